"""CPU runs from disk whose direction counts each direction's reads (Garaph sections 2.2, 4.2).

Every page on disk (or a tenth in the host budget), small pages: BFS, SSSP
and CC must give the in-memory run's values exactly and SciPy's, on a grid
(a thin frontier a long way) and on RMAT.  Each iteration's record carries
the direction's inputs (:func:`~garaphpy.scheduler.disk_decisions.disk_direction`)
and reads from disk no more than the pages its direction needs: BFS's, found
again by brute force from its depths (a pull: the pages holding a vertex
with in-edges not yet reached, the others skipped; a push: none).  In memory the direction is
chosen as before.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

import garaphpy
from garaphpy import config
from garaphpy.programs import get_program
from garaphpy.scheduler import decisions
from garaphpy.scheduler.disk_decisions import disk_direction

import references as ref
from helpers import STREAMED_READ_RATIO as K
from helpers import budget, plan_of, store_of

THREADS = min(2, numba.config.NUMBA_NUM_THREADS)
SOURCES = [0]
REFERENCES = {"bfs": ref.bfs_scipy, "sssp": ref.sssp_scipy,
              "cc": lambda graph, sources: ref.components_scipy(graph)}


@pytest.fixture(scope="module")
def disk_grid(tmp_path_factory):
    """A weighted 40 x 40 grid in pages of at most 4 KiB."""
    return garaphpy.Graph.load(
        "grid:40x40", store=tmp_path_factory.mktemp("grid") / "store", progress=False,
        generator_options={"weighted": True, "seed": 3}, max_shard_edges=128,
        max_page_bytes=4096, compress=False)


@pytest.fixture(scope="module")
def disk_rmat(tmp_path_factory):
    return ref.out_of_core_rmat(tmp_path_factory.mktemp("rmat"))


def run(graph, name, **options):
    program = get_program(name)
    options = {"mode": "cpu", "threads": THREADS, "max_iterations": 200,
               "execution": "sync", "turned_off": {"union_find_start"}, **options}
    return ref.run_engine_quietly(graph, program, SOURCES if program.needs_sources else (),
                                  **options)


def from_disk(graph, name, monkeypatch, fraction: float = 0.0, **options):
    """Pages placed once (no revision by reuse): ``fraction`` of them in the host."""
    monkeypatch.setattr(config, "HOST_PAGES_BY_REUSE", False)
    return run(graph, name, read_ratio=K, **budget(graph, name, fraction), **options)


def taken(record, graph, name) -> int:
    """The bytes an iteration read for its own walks: its ``bytes_read`` less
    the read-ahead it dropped unused, at most one reader's window."""
    assert 0 <= record.bytes_dropped <= budget(graph, name, 0.0)["readahead_bytes"]
    return record.bytes_read - record.bytes_dropped


def chosen_needs(record) -> int:
    entry = record.decisions["direction"]
    return entry["pull_disk_bytes" if record.direction == "pull" else "sparse_disk_bytes"]


def page_ranges(store):
    return (np.array([info.first_vertex for info in store.pages], np.int64),
            np.array([info.end_vertex for info in store.pages], np.int64),
            np.array([info.disk_bytes for info in store.pages], np.int64))


@pytest.mark.parametrize("name", ["bfs", "sssp", "cc"])
@pytest.mark.parametrize("graph_name", ["disk_grid", "disk_rmat"])
def test_values_equal_the_in_memory_run_and_scipy(request, graph_name, name, monkeypatch):
    graph = request.getfixturevalue(graph_name)
    memory = run(graph, name)
    disk = from_disk(graph, name, monkeypatch, fraction=0.1)
    np.testing.assert_array_equal(disk.values, memory.values)
    ref.assert_program_values(name, disk.values, REFERENCES[name](graph, SOURCES))
    for record in disk.iterations:
        entry = dict(record.decisions["direction"])
        assert entry.pop("choice") == record.direction
        entry.pop("memory_rule")
        assert disk_direction(**entry) == record.direction
    # the host's pages are read from disk once, when first asked for
    store = store_of(graph, name)
    cached = plan_of(store, **budget(graph, name, 0.1)).cached
    assert cached
    assert sum(taken(record, graph, name) for record in disk.iterations) <= \
        sum(chosen_needs(record) for record in disk.iterations) \
        + sum(store.pages[k].disk_bytes for k in cached)


@pytest.mark.parametrize("name", ["bfs", "sssp", "cc"])
@pytest.mark.parametrize("graph_name", ["disk_grid", "disk_rmat"])
def test_an_iteration_reads_no_more_than_its_direction_needs(request, graph_name, name,
                                                             monkeypatch):
    """Every page on disk: bytes read an iteration <= the disk bytes of the
    pages the chosen direction needs; a pull of SSSP or CC needs every page."""
    graph = request.getfixturevalue(graph_name)
    store = store_of(graph, name)
    _, _, sizes = page_ranges(store)
    disk = from_disk(graph, name, monkeypatch)
    np.testing.assert_array_equal(disk.values, run(graph, name).values)
    for record in disk.iterations:
        assert taken(record, graph, name) <= chosen_needs(record)
        if record.direction == "pull" and name != "bfs":
            # every page (a pull with every vertex at the floor reads none)
            assert chosen_needs(record) == sizes.sum()


def test_bfs_on_a_grid_pushes_where_rho_k_pulled_every_page(disk_grid, monkeypatch):
    """BFS on the grid from disk: its frontier, a diagonal, pushes over the CSR
    of out-edges and reads no page after the first iteration, where Beamer's
    rule with rho = k (Garaph's edge-granular price) would pull, reading every
    page with a vertex not yet reached."""
    disk = from_disk(disk_grid, "bfs", monkeypatch)
    assert len(disk.iterations) > 20
    assert sum(taken(record, disk_grid, "bfs") for record in disk.iterations[1:]) == 0
    assert {record.direction for record in disk.iterations[1:]} == {"notify-pull"}
    with_rho_k = []
    for record in disk.iterations[1:]:
        inputs = dict(record.decisions["direction"]["memory_rule"])
        inputs.pop("choice")
        with_rho_k.append(decisions.settling_direction(**{**inputs, "rho": K}))
    assert "pull" in with_rho_k


@pytest.mark.parametrize("graph_name", ["disk_grid", "disk_rmat"])
def test_bfs_reads_what_brute_force_says_it_needs(request, graph_name, monkeypatch):
    """BFS from disk, pulls forced, then the directions chosen: a pull reads
    exactly the pages holding a vertex with in-edges not reached before the
    iteration (the others are skipped), a push reads nothing; the recorded
    needs are the same pages."""
    graph = request.getfixturevalue(graph_name)
    store = store_of(graph, "bfs")
    first, end, sizes = page_ranges(store)
    memory = run(graph, "bfs")
    depth = np.asarray(memory.values)
    unreached = np.where(depth < 0, np.iinfo(np.int64).max, depth)
    has_in_edges = np.diff(store.in_offsets) > 0
    for direction in ("pull", "auto"):
        disk = from_disk(graph, "bfs", monkeypatch, direction=direction)
        np.testing.assert_array_equal(disk.values, memory.values)
        for iteration, record in enumerate(disk.iterations):
            # the vertices with in-edges not settled as the iteration starts
            pending = np.flatnonzero((unreached > iteration) & has_in_edges)
            needed = np.searchsorted(pending, end) > np.searchsorted(pending, first)
            if record.direction == "pull":
                assert taken(record, graph, "bfs") == sizes[needed].sum()
                assert record.pages == needed.sum()
            else:
                assert taken(record, graph, "bfs") == 0
            assert record.decisions["direction"]["pull_disk_bytes"] == sizes[needed].sum()
            assert record.decisions["direction"]["sparse_disk_bytes"] == 0
    if graph_name == "disk_grid":     # rmat's unreached vertices leave no page settled
        pulls = from_disk(graph, "bfs", monkeypatch, direction="pull")
        assert any(record.pages < len(store.pages) for record in pulls.iterations)


@pytest.mark.parametrize("name", ["bfs", "sssp", "cc"])
def test_in_memory_runs_choose_as_before(disk_grid, name):
    """In memory the direction is the in-memory rule's, its entry without the
    disk's inputs."""
    settling = get_program(name).final_once_set
    rule = decisions.settling_direction if settling else decisions.choose_direction
    for record in run(disk_grid, name).iterations:
        entry = dict(record.decisions["direction"])
        if "count" in entry or record.direction == "batch":
            continue
        assert "memory_rule" not in entry and "pull_disk_bytes" not in entry
        choice = entry.pop("choice")
        assert rule(**entry) == choice


def test_a_notify_pull_needs_the_pages_its_frontier_reaches(disk_grid, monkeypatch):
    """SSSP's sparse needs, as recorded, are the pages with an in-edge from the
    frontier (checked at the first iteration, whose frontier is the source)."""
    store = store_of(disk_grid, "sssp")
    first, end, sizes = page_ranges(store)
    disk = from_disk(disk_grid, "sssp", monkeypatch)
    needed = ref.pages_with_active_in_edges(np.array(SOURCES), store.out_offsets,
                                            store.out_targets, first, end)
    assert disk.iterations[0].decisions["direction"]["sparse_disk_bytes"] == sizes[needed].sum()


def test_an_asynchronous_run_keeps_garaphs_rule(disk_grid, monkeypatch):
    """SSSP run asynchronously from disk: its pulls sweep many hops an
    iteration, so the direction stays Garaph's (rho = k), recorded as before;
    the distances are SciPy's."""
    disk = from_disk(disk_grid, "sssp", monkeypatch, execution="async")
    ref.assert_program_values("sssp", disk.values, ref.sssp_scipy(disk_grid, SOURCES))
    for record in disk.iterations:
        entry = dict(record.decisions["direction"])
        assert "memory_rule" not in entry and entry["rho"] == K
        assert decisions.choose_direction(**{k: v for k, v in entry.items()
                                             if k != "choice"}) == record.direction
