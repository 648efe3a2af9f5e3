"""A run on the GPU alone iterates with no OpenMP team of the host's spinning.

The set-up's parallel loops (the first frontier's flags, Garaph section 3's
activity bitmap) leave the calling thread's libgomp team spinning for
milliseconds, which is the whole of a short BFS or SSSP on a resident graph;
the run ends the team before its first iteration
(:func:`garaphpy._numba_setup.release_thread_team`).
"""

from __future__ import annotations

import os

import numba
import numpy as np
import pytest

import garaphpy
from garaphpy import _numba_setup
from garaphpy.kernels import cpu as kernels


def _os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.gpu
def test_gpu_alone_iterations_run_without_the_set_ups_thread_team():
    if numba.config.NUMBA_NUM_THREADS < 2 or not os.path.isdir("/proc/self/task"):
        pytest.skip("needs two numba threads and /proc")
    kernels.frontier_of(np.ones(64, np.bool_), 2)       # the layer is chosen
    if _numba_setup._libgomp_pause() is None:
        pytest.skip(f"threading layer {numba.threading_layer()}: no libgomp team")
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 2000, 20000), rng.integers(0, 2000, 20000)
    graph = garaphpy.Graph.from_arrays(src, dst, compress=False)
    garaphpy.run(graph, "bfs", mode="gpu", sources=0)      # the CUDA context's threads
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(2)
        kernels.frontier_of(np.ones(64, np.bool_), 2)   # this thread's team: one worker
        with_team = _os_threads()
    finally:
        numba.set_num_threads(previous)
    seen = []
    garaphpy.run(graph, "bfs", mode="gpu", sources=0, threads=2,
                 on_iteration=lambda record: seen.append(_os_threads()))
    # the team's worker (the run's set-up made it again) has ended
    assert seen and max(seen) <= with_team - 1
