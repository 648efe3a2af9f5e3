"""A partition's worker runs its kernels on its own thread count, whichever
thread calls it (numba's count is per thread; a Dask actor's calls come on
another thread than its set-up, where numba would take every core)."""

from __future__ import annotations

import threading

import numba
import numpy as np
import pytest

import garaphpy
from garaphpy.distributed import worker
from garaphpy.distributed.partition import cut_partitions
from garaphpy.programs import BUILTIN_PROGRAMS

csgraph = pytest.importorskip("scipy.sparse.csgraph")
sparse = pytest.importorskip("scipy.sparse")


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2,
                    reason="one core: every thread count is one")
def test_the_union_find_start_runs_on_the_workers_threads_from_any_thread(tmp_path):
    graph = garaphpy.Graph.load("rmat:9", store=tmp_path / "rmat",
                                progress=False).as_undirected()
    store = graph.store
    partitions = tuple(cut_partitions(store.in_offsets, 1))
    setup = worker.WorkerSetup(str(store.path), BUILTIN_PROGRAMS["cc"](), partitions, 0,
                               np.zeros(0, np.int64), 1, False, False, union_find_start=True)
    alone = worker.PartitionWorker(setup)
    seen = {}

    def call():
        seen["before"] = numba.get_num_threads()
        seen["row"] = alone.union_find_start()
        seen["after"] = numba.get_num_threads()

    caller = threading.Thread(target=call)
    caller.start()
    caller.join()
    assert seen["before"] == numba.config.NUMBA_NUM_THREADS > 1
    assert seen["after"] == 1
    # one partition holds every edge: its start gives SciPy's components, each
    # labelled by its least user id
    in_offsets, sources, _ = store.csc()
    n = graph.num_vertices
    destinations = np.repeat(np.arange(n), np.diff(in_offsets))
    matrix = sparse.coo_matrix((np.ones(sources.size), (sources, destinations)), shape=(n, n))
    _, components = csgraph.connected_components(matrix, directed=False)
    ids = np.asarray(graph.original_ids(np.arange(n)), np.int64)
    least = np.full(components.max() + 1, np.iinfo(np.int64).max)
    np.minimum.at(least, components, ids)
    np.testing.assert_array_equal(alone.owned_values(), least[components])


def _os_threads() -> int:
    import os

    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2,
                    reason="one core: a team of one thread makes no thread")
def test_the_set_up_thread_keeps_no_openmp_team(tmp_path):
    """A worker's set-up runs on a Dask task thread, which lives on; the
    OpenMP team its parallel launches made is let go at the set-up's end, so
    that only the actor thread's stays (libgomp throttles every team's spin
    where a process holds more threads than cores)."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    if not os.path.isdir("/proc/self/task"):
        pytest.skip("no /proc: the threads cannot be counted")
    graph = garaphpy.Graph.load("rmat:9", store=tmp_path / "rmat",
                                progress=False).as_undirected()
    store = graph.store
    partitions = tuple(cut_partitions(store.in_offsets, 2))
    setup = worker.WorkerSetup(str(store.path), BUILTIN_PROGRAMS["bfs"](), partitions, 0,
                               np.zeros(1, np.int64), 2, False, False)
    worker.PartitionWorker(setup)       # the process's own threads started once
    with ThreadPoolExecutor(1) as pool:     # a thread that lives on, as Dask's do
        pool.submit(lambda: None).result()
        before = _os_threads()
        pool.submit(worker.PartitionWorker, setup).result()
        kept = _os_threads() - before
    if numba.threading_layer() != "omp":
        pytest.skip(f"threading layer {numba.threading_layer()}: no OpenMP team")
    assert kept == 0
