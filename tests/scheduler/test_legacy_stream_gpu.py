"""Set-up behind a slow legacy stream: the engine's streams are non-blocking.

cupy fills new arrays (``cupy.asarray``, ``cupy.zeros``, ``cupy.full``) on
the legacy stream, which the engine's non-blocking streams do not wait for.
A kernel the engine launched on its own streams before that work was done
read arrays not yet filled: under a loaded GPU, BFS runs came back with no
vertex reached, or with unreachable vertices at depth 0.  Here every fill
queued on the legacy stream waits behind a short spin there, into memory
that holds other bytes until then: a run is right, and none of the engine's
launches finds fills still queued, only where the engine waits for them.
"""

from __future__ import annotations


import numpy as np
import pytest

import garaphpy
from garaphpy import config

import references as ref
from helpers import budget_for, gpu_program, reference

SPIN_SOURCE = r"""
extern "C" __global__ void spin(long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < (unsigned long long)nanoseconds);
}
"""

#: how long each fill on the legacy stream waits there
SPIN_SECONDS = 0.01


def spin_kernel():
    import cupy

    return cupy.RawKernel(SPIN_SOURCE, "spin")


@pytest.fixture
def slow_legacy_stream(monkeypatch):
    """Every ``cupy.asarray``, ``cupy.zeros`` and ``cupy.full`` called on the
    legacy stream queues a spin of :data:`SPIN_SECONDS` there before and after
    its work; the memory pool's free blocks hold bytes 0xA5."""
    import cupy

    kernel = spin_kernel()
    legacy = cupy.cuda.Stream.null
    spins = []

    def spin():
        kernel((1,), (1,), (np.int64(SPIN_SECONDS * 1e9),))

    def slowed(fill):
        def slow_fill(*args, **kwargs):
            if cupy.cuda.get_current_stream().ptr != legacy.ptr:
                return fill(*args, **kwargs)
            spin()
            filled = fill(*args, **kwargs)
            spin()      # and the stream stays busy: as if the fill ended late
            spins.append(fill.__name__)
            return filled
        return slow_fill

    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    junk = cupy.full(64 << 20, 0xA5, np.uint8)
    cupy.cuda.Device().synchronize()
    del junk
    for name in ("asarray", "zeros", "full"):
        monkeypatch.setattr(cupy, name, slowed(getattr(cupy, name)))
    yield spins


@pytest.fixture
def launches_behind_fills(monkeypatch):
    """The engine's launches on its own streams (of vertex kernels and of
    pages), each with whether the legacy stream still had work queued then:
    work that launch may read and would not wait for."""
    import cupy

    from garaphpy.scheduler.gpu.launches import Launches
    from garaphpy.scheduler.gpu.vertex_state import DeviceVertexState

    seen = []

    def watched(method):
        def launch(self, *args, **kwargs):
            seen.append((method.__name__, not cupy.cuda.Stream.null.done))
            return method(self, *args, **kwargs)
        return launch

    for part, name in ((DeviceVertexState, "launch_vertices"), (Launches, "launch_page")):
        monkeypatch.setattr(part, name, watched(getattr(part, name)))
    return seen
    cupy.cuda.Device().synchronize()


@pytest.fixture(scope="module")
def reachable_in_part():
    """A weighted graph where half of the vertices have no in-edges (unreached
    from the sources), in 28 pages (55 undirected)."""
    rng = np.random.default_rng(17)
    n = 6000
    destinations = np.concatenate([np.repeat(np.arange(0, n, 2), 16),
                                   rng.integers(0, n, 8000) // 2 * 2])
    sources = rng.integers(0, n, destinations.size)
    weights = rng.integers(1, 100, destinations.size)
    return garaphpy.Graph.from_arrays(sources, destinations, weights, num_vertices=n,
                                      progress=False, max_shard_edges=2048,
                                      max_page_bytes=24000, compress=False)


PLACEMENTS = {
    # graph, mode, transfer, pages packed, budget: (fraction of the pages, stream buffers)
    "resident": ("reachable_in_part", "gpu", "auto", False, None),
    "streamed": ("reachable_in_part", "gpu", "copy", False, (0.3, True)),
    "packed": ("reachable_in_part", "gpu", "copy", True, (0.2, False)),
    # every page streamed packed, none kept (where BFS went wrong under load)
    "packed-none-kept": ("tiered", "gpu", "copy", True, (0.45, False)),
    "hybrid": ("reachable_in_part", "hybrid", "auto", False, None),
}


@pytest.mark.gpu
@pytest.mark.parametrize("placement", list(PLACEMENTS))
@pytest.mark.parametrize("name", ["bfs", "sssp", "cc"])
def test_a_run_set_up_behind_a_slow_legacy_stream_is_right(name, placement, request):
    graph_fixture, mode, transfer, packed, budget = PLACEMENTS[placement]
    graph = request.getfixturevalue(graph_fixture)
    program = gpu_program(name)
    sources = np.array([0, 7], np.int64) if program.needs_sources else ()
    options = dict(mode=mode, max_iterations=1000,
                   turned_off=() if packed else {"packed_pages"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "GPU_TRANSFER", transfer)
        if budget is not None:
            fraction, buffers = budget
            options["gpu_memory"] = budget_for(graph, program, fraction, buffers=buffers,
                                               selective=False)
        expected = reference(name, graph, sources, big=True)
        warm = ref.run_engine_like_gpu(graph, program, sources, **options)  # kernels compiled
        ref.assert_program_values(name, warm.values, expected)
        spins = request.getfixturevalue("slow_legacy_stream")
        launches = request.getfixturevalue("launches_behind_fills")
        result = ref.run_engine_like_gpu(graph, program, sources, **options)
    assert len(spins) > 10, spins      # the set-up's fills were slowed
    assert launches and not [launch for launch in launches if launch[1]]
    ref.assert_program_values(name, result.values, expected)
    assert result.converged
    if budget is not None:
        assert any(record.bytes_to_device > 0 for record in result.iterations)
