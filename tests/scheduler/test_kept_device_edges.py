"""A graph's edges kept on the GPU between its runs (``config.KEEP_CSC_BETWEEN_RUNS``).

A GPU run whose pages all fit the device copies them into whole-graph edge
arrays; the next GPU run over the same store takes those arrays as they are
instead of reading and copying every page again (on a 4M-vertex grid on the
H200 host that copy was 50 of a set-up's 70-140 ms).  One store's arrays are
kept at a time; a run over another store, a run whose pages stream and
``Graph.release_memory`` give the memory back.  No kernel writes the arrays:
after runs of every built-in program they still equal a fresh copy.
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy import config
from garaphpy.scheduler.gpu import page_store
from garaphpy.programs import BFS
from helpers import budget_for


class _Store:
    """What the keeping reads of a store."""

    def __init__(self):
        self.kept_device_edges = None

    def release_device_edges(self) -> bool:
        held = self.kept_device_edges is not None
        self.kept_device_edges = None
        return held


class _Pool:
    def __init__(self):
        self.freed = 0

    def free_all_blocks(self):
        self.freed += 1


@pytest.fixture
def fake_device(monkeypatch):
    """cupy's memory pool, counted, with no GPU; no store held before."""
    pool = _Pool()

    class _Cupy:
        @staticmethod
        def get_default_memory_pool():
            return pool

    monkeypatch.setattr(page_store.gpu_kernels, "cupy_module", lambda: _Cupy)
    monkeypatch.setattr(page_store, "_holder", None)
    return pool


def test_one_store_at_a_time_and_its_bytes_count_in_its_budget(fake_device):
    first, second = _Store(), _Store()
    assert page_store.kept_edge_bytes(first) == 0
    page_store._keep_edges(first, (np.zeros(10, np.int32), np.zeros(10, np.uint16), None))
    assert page_store.kept_edge_bytes(first) == 60
    assert fake_device.freed == 0
    # another store's run: the first's arrays go, their blocks back to the device
    assert page_store.kept_edge_bytes(second) == 0
    assert first.kept_device_edges is None and fake_device.freed == 1
    page_store._keep_edges(second, (np.zeros(4, np.int64), np.zeros(4, np.uint16),
                                    np.zeros(4, np.float32)))
    assert page_store.kept_edge_bytes(second) == 56
    page_store.release_kept_edges(second)       # a streamed run's: into the pool
    assert second.kept_device_edges is None and page_store._holder is None
    assert fake_device.freed == 1
    page_store._keep_edges(second, (np.zeros(4, np.int64), np.zeros(4, np.uint16), None))
    page_store.release_kept_edges(second, to_device=True)
    page_store.release_kept_edges(second, to_device=True)   # nothing held: nothing freed
    assert fake_device.freed == 2


def test_a_collected_store_holds_nothing(fake_device):
    import gc

    store = _Store()
    page_store._keep_edges(store, (np.zeros(3, np.int32), np.zeros(3, np.uint16), None))
    del store
    gc.collect()
    other = _Store()
    assert page_store.kept_edge_bytes(other) == 0 and fake_device.freed == 0


def test_release_memory_frees_the_kept_device_edges(tmp_path):
    graph = garaphpy.Graph.from_arrays([0, 1, 2], [1, 2, 0], num_vertices=3,
                                       store=tmp_path / "g")
    assert not graph.release_memory()
    graph.store.kept_device_edges = ("sources", "idxoff", None)
    assert graph.release_memory() and graph.store.kept_device_edges is None


def _weighted_grid(tmp_path, name="grid"):
    """A weighted 64 x 64 grid in pages small enough to stream."""
    return garaphpy.Graph.load("grid:64x64", store=tmp_path / name, progress=False,
                               max_shard_edges=512, max_page_bytes=16384, compress=False)


def _fresh_copy(graph):
    """The resident arrays a run over ``graph`` makes when nothing is kept."""
    import cupy

    kept = graph.store.kept_device_edges
    graph.store.kept_device_edges = None
    try:
        garaphpy.run(graph, "pagerank", mode="gpu", max_iterations=1, tolerance=0.0)
        return tuple(None if a is None else cupy.asnumpy(a)
                     for a in graph.store.kept_device_edges)
    finally:
        graph.store.kept_device_edges = kept


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore::garaphpy.NotConvergedWarning")
def test_later_runs_take_the_kept_edges_and_no_kernel_writes_them(tmp_path):
    import cupy

    graph = _weighted_grid(tmp_path)
    garaphpy.run(graph, "pagerank", mode="gpu", max_iterations=3, tolerance=0.0)
    kept = graph.store.kept_device_edges
    assert kept is not None and kept[2] is not None     # the grid's weights too
    source = [5]
    for name, options in (("bfs", {"sources": source}), ("sssp", {"sources": source}),
                          ("sswp", {"sources": source}), ("cc", {}),
                          ("pagerank", {"max_iterations": 5, "tolerance": 0.0})):
        on_gpu = garaphpy.run(graph, name, mode="gpu", **options)
        on_cpu = garaphpy.run(graph, name, mode="cpu", **options)
        assert graph.store.kept_device_edges is kept, name
        if name == "pagerank":
            np.testing.assert_allclose(on_gpu.values, on_cpu.values, rtol=1e-9)
        else:
            np.testing.assert_array_equal(on_gpu.values, on_cpu.values, err_msg=name)
    fresh = _fresh_copy(graph)
    for array, expected in zip(kept, fresh):
        np.testing.assert_array_equal(cupy.asnumpy(array), expected)


@pytest.mark.gpu
def test_another_graph_or_a_streamed_run_gives_the_memory_back(tmp_path, monkeypatch):
    first, second = _weighted_grid(tmp_path, "a"), _weighted_grid(tmp_path, "b")
    garaphpy.run(first, "bfs", mode="gpu", sources=[0])
    assert first.store.kept_device_edges is not None
    garaphpy.run(second, "bfs", mode="gpu", sources=[0])
    assert first.store.kept_device_edges is None
    assert second.store.kept_device_edges is not None
    # a budget the pages do not fit: they stream, and nothing stays kept (without
    # room for the selective arrays: on this small grid the stream buffers and those
    # arrays alone would hold every page)
    streamed = garaphpy.run(second, "bfs", mode="gpu", sources=[0],
                            gpu_memory=budget_for(second, BFS(), 0.25, selective=False))
    assert not streamed.plan.gpu.pages.resident
    assert second.store.kept_device_edges is None
    monkeypatch.setattr(config, "KEEP_CSC_BETWEEN_RUNS", False)
    garaphpy.run(first, "bfs", mode="gpu", sources=[0])
    assert first.store.kept_device_edges is None
