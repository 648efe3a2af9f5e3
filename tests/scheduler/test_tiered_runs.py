"""Runs whose pages sit in three tiers (Garaph section 2.2): the host's pages revised by reuse.

A run whose host budget holds a quarter of the pages moves its host pages
between iterations to those its iterations ask for
(:meth:`~garaphpy.storage.host_pages.HostPages.end_iteration`).  The values
must be the in-memory run's (exact for BFS, SSSP and CC, PageRank within
1e-12 relative) and the networkx/scipy references', every iteration's
record must carry the decision with its inputs, and an iteration must read
from disk only pages in neither budget, each once: a pull over every page
(PageRank) reads exactly the disk bytes of the pages on disk only, and a
frontier program reads no more than it does with the pages first placed.
The GPU's side is in ``tests/scheduler/test_out_of_core_gpu.py`` (marked
``gpu``).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from garaphpy import config
from garaphpy.programs import get_program

import references as ref
from helpers import STREAMED_READ_RATIO as K
from helpers import budget, store_of

THREADS = min(2, numba.config.NUMBA_NUM_THREADS)
SOURCES = [0, 7]
REFERENCES = {"bfs": ref.bfs_scipy, "sssp": ref.sssp_scipy,
              "cc": lambda graph, sources: ref.components_scipy(graph)}


@pytest.fixture(scope="module")
def disk_rmat(tmp_path_factory):
    return ref.out_of_core_rmat(tmp_path_factory.mktemp("tiered"))


def run(graph, name, **options):
    program = get_program(name)
    options = {"mode": "cpu", "threads": THREADS, "max_iterations": 40, "execution": "sync",
               "turned_off": {"union_find_start"}, **options}
    if name == "pagerank":
        options.update(tolerance=0.0, max_iterations=6)
    return ref.run_engine_quietly(graph, program, SOURCES if program.needs_sources else (),
                                  **options)


def taken(record, graph, name) -> int:
    """The bytes an iteration read for its own walks: its ``bytes_read`` less
    the read-ahead it dropped unused, at most one reader's window."""
    assert 0 <= record.bytes_dropped <= budget(graph, name, 0.0)["readahead_bytes"]
    return record.bytes_read - record.bytes_dropped


def from_disk(graph, name, by_reuse: bool, monkeypatch, fraction: float = 0.25):
    monkeypatch.setattr(config, "HOST_PAGES_BY_REUSE", by_reuse)
    return run(graph, name, read_ratio=K, **budget(graph, name, fraction))


@pytest.mark.parametrize("name", ["bfs", "sssp", "cc", "pagerank"])
def test_values_equal_the_in_memory_run(disk_rmat, name, monkeypatch):
    memory = run(disk_rmat, name)
    disk = from_disk(disk_rmat, name, True, monkeypatch)
    assert any(record.bytes_read for record in disk.iterations)
    if name == "pagerank":
        assert len(disk.iterations) == len(memory.iterations)
        np.testing.assert_allclose(disk.values, memory.values, rtol=1e-12, atol=0)
    else:
        np.testing.assert_array_equal(disk.values, memory.values)
    if name in REFERENCES:      # and an independent reference (SciPy)
        ref.assert_program_values(name, disk.values, REFERENCES[name](disk_rmat, SOURCES))


def test_every_iteration_records_the_placement(disk_rmat, monkeypatch):
    result = from_disk(disk_rmat, "bfs", True, monkeypatch)
    count = len(store_of(disk_rmat, "bfs").pages)
    for record in result.iterations:
        entry = record.decisions["host_pages"]
        assert isinstance(entry["choice"], bool)
        assert {"kept_saving_bytes", "revised_saving_bytes", "min_gain", "entering_pages",
                "asked_pages"} <= set(entry)
        assert entry["gpu_pages"] + entry["host_pages"] + entry["disk_pages"] == count
        assert entry["gpu_pages"] == 0      # the CPU alone
        assert entry["host_pages"] >= 1
    off = from_disk(disk_rmat, "bfs", False, monkeypatch)
    assert all("host_pages" not in record.decisions for record in off.iterations)


def test_a_pull_over_every_page_reads_each_disk_page_once(disk_rmat, monkeypatch):
    """PageRank asks every page every iteration: after the first (which also
    fills the host's pages), each iteration reads the disk bytes of the pages
    in neither budget, no more, no less."""
    result = from_disk(disk_rmat, "pagerank", True, monkeypatch)
    store = store_of(disk_rmat, "pagerank")
    records = result.iterations
    assert all(not record.decisions["host_pages"]["choice"] for record in records[1:])
    for before, record in zip(records[1:], records[2:]):
        placed = before.decisions["host_pages"]
        assert record.bytes_read == placed["disk_bytes"]
        assert placed["disk_bytes"] < sum(info.disk_bytes for info in store.pages)
    # and the same as with the pages first placed
    first = from_disk(disk_rmat, "pagerank", False, monkeypatch)
    assert [r.bytes_read for r in first.iterations[2:]] == \
        [r.bytes_read for r in records[2:]]


def test_a_frontier_reads_no_more_than_with_the_pages_first_placed(disk_rmat, monkeypatch):
    """BFS from two sources: the pages its notify-pulls ask for come to stay in
    the host's pages, so the run reads no more than with the prefix first
    placed (and the same values)."""
    placed = from_disk(disk_rmat, "bfs", False, monkeypatch)
    revised = from_disk(disk_rmat, "bfs", True, monkeypatch)
    np.testing.assert_array_equal(placed.values, revised.values)
    read_placed = sum(record.bytes_read for record in placed.iterations)
    read_revised = sum(record.bytes_read for record in revised.iterations)
    assert read_revised <= read_placed


# ------------------------------------------------------- a disk-only store --
def test_from_a_disk_only_store_each_iteration_reads_what_must_move(disk_rmat, monkeypatch):
    """No page in either budget: a pull of PageRank reads every page once, one
    of BFS every page holding a vertex with in-edges not yet reached (it
    skips the others); a notify-pull of BFS reads no more than the pages with
    an in-edge from the frontier
    (:func:`references.pages_with_active_in_edges`, by brute force
    over the CSR of out-edges), each once; the depths are the in-memory run's."""
    from garaphpy.storage.tiers import place_pages
    from references import pages_with_active_in_edges

    store = store_of(disk_rmat, "bfs")
    memory = run(disk_rmat, "bfs")
    disk = from_disk(disk_rmat, "bfs", True, monkeypatch, fraction=0.0)
    np.testing.assert_array_equal(disk.values, memory.values)
    infos = store.pages
    placement = place_pages([p.nbytes for p in infos], 0,
                            disk_bytes=[p.disk_bytes for p in infos])
    assert placement.must_move() == sum(p.disk_bytes for p in infos)
    first = np.array([p.first_vertex for p in infos], np.int64)
    end = np.array([p.end_vertex for p in infos], np.int64)
    depth = np.asarray(disk.values)
    unreached = np.where(depth < 0, np.iinfo(np.int64).max, depth)
    has_in_edges = np.diff(store.in_offsets) > 0
    directions = set()
    for iteration, record in enumerate(disk.iterations):
        assert record.decisions["host_pages"]["host_pages"] == 0
        directions.add(record.direction)
        if record.direction == "pull":
            # every page holding a vertex with in-edges not reached before it
            pending = np.flatnonzero((unreached > iteration) & has_in_edges)
            unsettled = np.searchsorted(pending, end) > np.searchsorted(pending, first)
            assert taken(record, disk_rmat, "bfs") == placement.must_move(unsettled)
        else:
            frontier = np.flatnonzero(depth == iteration)
            needed = pages_with_active_in_edges(frontier, store.out_offsets,
                                                store.out_targets, first, end)
            assert taken(record, disk_rmat, "bfs") <= placement.must_move(needed)
    assert directions == {"pull", "notify-pull"}
    pagerank = from_disk(disk_rmat, "pagerank", True, monkeypatch, fraction=0.0)
    assert all(record.bytes_read == placement.must_move() for record in pagerank.iterations)
