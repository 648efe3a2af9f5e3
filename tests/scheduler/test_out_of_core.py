"""CPU runs larger than their host budget (Garaph section 2.2), end to end.

A ``host_memory`` below the store leaves most pages on the storage
directories: the CPU engine pulls them page by page through a
:class:`~garaphpy.storage.host_pages.PageCursor` and notify-pull copies the
notified vertices' in-edges out of the pages holding them.  Every built-in
program must give the in-memory run's values (exact for BFS, SSSP, CC,
SSWP; 1e-4 for float sums), and the notify-pull / pull switch must count
what each direction reads from disk (section 4.2, pages read whole: rho
gives way to the pages' bytes) without changing a synchronous result.  The GPU and
hybrid out-of-core runs are in ``tests/scheduler/test_out_of_core_gpu.py``.

Each program's first run compiles it (about ten seconds): the programs
beyond PageRank, SSSP and CC are marked ``slow``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numba
import numpy as np
import pytest

import garaphpy
from garaphpy import api, config
from garaphpy.configfile import load_config
from garaphpy.errors import ConfigError, StoreError
from garaphpy.programs import BUILTIN_PROGRAMS, get_program
from garaphpy.scheduler import decisions
from garaphpy.scheduler.disk_decisions import disk_direction
from garaphpy.cli import graph_from_config, main
from garaphpy.storage.host_budget import run_fixed_bytes

import references as ref
from helpers import STREAMED_READ_RATIO as K
from helpers import budget, buffer_bytes, page_bytes, plan_of, store_of

THREADS = min(2, numba.config.NUMBA_NUM_THREADS)
EXACT = ref.EXACT_PROGRAMS
FAST = {"pagerank", "sssp", "cc"}
SOURCES = [0, 7]                       #: internal ids of the source vertices


def taken(record) -> int:
    """The bytes an iteration read for its own walks: ``bytes_read`` less the
    read-ahead it dropped unused (which ``bytes_read`` counts too)."""
    assert 0 <= record.bytes_dropped <= record.bytes_read
    return record.bytes_read - record.bytes_dropped
LIMIT = 40                             #: iterations at most (HS, CS, NN: not converged)
#: CC as a workload of many streamed pulls: its labels start from the ids
#: (the union-find start ends it after one pull that reads no page; it is
#: tested out of core in tests/test_union_find.py).
LABELS_FROM_IDS = frozenset({"union_find_start"})


def programs(names=None):
    """pytest params of the built-in programs, the slow-to-compile ones marked."""
    return [pytest.param(name, marks=() if name in FAST else pytest.mark.slow)
            for name in (names or BUILTIN_PROGRAMS)]


def sources_of(name):
    return SOURCES if BUILTIN_PROGRAMS[name].needs_sources else ()


def run_quietly(graph, name, **options):
    """A CPU run; synchronous unless asked (the built-in min/max programs run
    asynchronously on the CPU by default, whose iterations vary from run to run)."""
    options = {"mode": "cpu", "threads": THREADS, "max_iterations": LIMIT,
               "execution": "sync", **options,
               "turned_off": LABELS_FROM_IDS | set(options.get("turned_off", ()))}
    return ref.run_engine_quietly(graph, get_program(name), sources_of(name), **options)


assert_matches = ref.assert_program_values


@pytest.fixture(scope="module")
def disk_rmat(tmp_path_factory):
    return ref.out_of_core_rmat(tmp_path_factory.mktemp("out-of-core"))


@pytest.fixture(scope="module")
def in_memory(disk_rmat):
    """The in-memory CPU run of a program (memoised per options)."""
    done = {}

    def run(name, **options):
        key = (name, tuple(sorted(options.items())))
        if key not in done:
            done[key] = run_quietly(disk_rmat, name, **options)
        return done[key]

    return run


# ------------------------------------------------------------- the set-up --
def test_the_test_graph_streams_from_three_directories(disk_rmat):
    store = disk_rmat.store
    assert len(store.pages) > 8
    assert set(np.unique(store.blocks["directory"]).tolist()) == {0, 1, 2}
    plan = plan_of(store, **budget(disk_rmat, "pagerank", 0.25))
    assert plan is not None and len(plan.cached) >= 2 and len(plan.streamed) >= 6
    assert plan.cached == tuple(range(len(plan.cached)))         # a prefix of the pages


def test_the_budget_that_holds_every_page_is_the_threshold(disk_rmat):
    store = disk_rmat.store
    everything = run_fixed_bytes(store) + sum(page_bytes(store))
    assert plan_of(store, everything) is None
    assert plan_of(store, 10 * everything) is None
    plan = plan_of(store, everything - 1)
    assert plan is not None and plan.streamed and plan.used_bytes <= everything - 1


def test_each_processor_reader_is_paid_for(disk_rmat):
    """The budget pays one reader's read-ahead per processor: a hybrid run (two
    readers) caches less than a CPU run under the same budget."""
    options = budget(disk_rmat, "pagerank", 0.25)
    plans = {}
    for mode in ("cpu", "hybrid"):
        paged = api.page_source(disk_rmat.store, mode, options["host_memory"], K,
                               options["readahead_bytes"])
        paged.close()
        plans[mode] = paged.plan
        assert paged.rho == K and paged.readahead_bytes == options["readahead_bytes"]
    assert plans["cpu"].readahead_bytes == options["readahead_bytes"]
    assert plans["hybrid"].readahead_bytes == 2 * options["readahead_bytes"]
    assert len(plans["hybrid"].cached) < len(plans["cpu"].cached)
    for plan in plans.values():
        assert plan.used_bytes <= options["host_memory"]
        assert plan.fixed_bytes == run_fixed_bytes(disk_rmat.store)


def test_a_budget_above_the_store_holds_the_graph_in_memory(disk_rmat, in_memory):
    store = disk_rmat.store
    everything = run_fixed_bytes(store) + sum(page_bytes(store))
    result = run_quietly(disk_rmat, "sssp", host_memory=everything, read_ratio=K)
    assert all(record.rho == config.RHO_IN_MEMORY for record in result.iterations)
    assert all(record.bytes_read == 0 for record in result.iterations)
    np.testing.assert_array_equal(result.values, in_memory("sssp").values)


def test_later_runs_in_memory_read_no_page_until_released(disk_rmat, monkeypatch):
    from garaphpy.storage.store import Store

    reads = []
    read_page, read_regions = Store.read_page, Store._read_page_regions
    monkeypatch.setattr(Store, "read_page",
                        lambda self, index, *a, **k: reads.append(index) or
                        read_page(self, index, *a, **k))
    # the whole CSC reads each page's sources and weights straight into its arrays
    monkeypatch.setattr(Store, "_read_page_regions",
                        lambda self, info, regions: reads.append(info.index) or
                        read_regions(self, info, regions))
    graph = garaphpy.Graph.open(disk_rmat.store.path)      # a store object of its own
    first = run_quietly(graph, "sssp")
    assert sorted(reads) == list(range(len(graph.store.pages)))
    reads.clear()
    second = run_quietly(graph, "sssp")
    assert reads == [] and np.array_equal(first.values, second.values)
    assert graph.release_memory() and not graph.release_memory()
    third = run_quietly(graph, "sssp")
    assert len(reads) == len(graph.store.pages)
    np.testing.assert_array_equal(first.values, third.values)
    # a run whose budget streams the pages gives the kept edges back first
    assert graph.store._kept_csc is not None
    streamed = run_quietly(graph, "sssp", **budget(graph, "sssp", 0.3), read_ratio=K)
    assert graph.store._kept_csc is None
    np.testing.assert_array_equal(first.values, streamed.values)
    # kept nothing where asked not to
    monkeypatch.setattr(config, "KEEP_CSC_BETWEEN_RUNS", False)
    reads.clear()
    run_quietly(graph, "sssp")
    run_quietly(graph, "sssp")
    assert len(reads) == 2 * len(graph.store.pages) and graph.store._kept_csc is None


def test_release_memory_also_frees_the_undirected_twins_edges(disk_rmat):
    graph = garaphpy.Graph.open(disk_rmat.store.path)
    assert graph.directed
    run_quietly(graph, "cc")        # runs on the symmetrized twin
    twin = graph.as_undirected()
    assert twin.store._kept_csc is not None and graph.store._kept_csc is None
    assert graph.release_memory()
    assert twin.store._kept_csc is None


# ------------------------------------------------- every program, k = 1 --
@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", programs())
def test_streamed_run_equals_in_memory_run(disk_rmat, in_memory, name, execution):
    """With k = 1 the streamed run takes the in-memory run's decisions: the same
    iterations, directions and values."""
    expected = in_memory(name, execution=execution)
    options = budget(disk_rmat, name, 0.25)
    plan = plan_of(store_of(disk_rmat, name), **options)
    assert plan is not None and plan.cached and plan.streamed
    result = run_quietly(disk_rmat, name, execution=execution, read_ratio=1.0, **options)
    assert_matches(name, result.values, expected.values)
    steps = [(r.direction, r.activated, r.updated_vertices, r.edges_processed)
             for r in result.iterations]
    expected_steps = [(r.direction, r.activated, r.updated_vertices, r.edges_processed)
                      for r in expected.iterations]
    if execution == "async" and "notify-pull" in {r.direction for r in expected.iterations}:
        # an asynchronous notify-pull on two threads reads values the other thread is
        # writing: from there on its frontiers vary from run to run, in memory as well
        # (see test_async_on_one_thread_takes_the_same_steps)
        first = [r.direction for r in expected.iterations].index("notify-pull")
        assert steps[:first] == expected_steps[:first]
        assert steps[first][0] == "notify-pull"
    elif execution == "sync" and "memory_rule" in result.iterations[0].decisions.get(
            "direction", {}):
        # from disk a synchronous run's direction also counts the pages each direction
        # reads and the in-edges a notify-pull copies out of them (disk_decisions): its
        # in-memory rule chooses as the in-memory run did, and either direction takes
        # the same frontiers
        assert result.num_iterations == expected.num_iterations
        for record, memory, step, expected_step in zip(result.iterations, expected.iterations,
                                                       steps, expected_steps):
            entry = dict(record.decisions["direction"])
            assert entry.pop("choice") == record.direction
            assert entry.pop("memory_rule")["choice"] == memory.direction
            assert disk_direction(**entry) == record.direction
            assert record.activated == memory.activated
            if record.direction == memory.direction:
                assert step == expected_step
    else:
        assert result.num_iterations == expected.num_iterations
        assert steps == expected_steps
    assert all(record.rho == 1.0 for record in result.iterations)
    assert all(record.bytes_read == 0 for record in expected.iterations)
    total = sum(page_bytes(store_of(disk_rmat, name)))
    records = result.iterations
    for index, record in enumerate(records):
        if record.direction != "pull":
            continue
        # a pull reads every page on disk only in the placement in force (the plan's,
        # or as revised by reuse after the iteration before), and the host's pages
        # the first time; after a pull that revised nothing, only the former
        before = records[index - 1] if index else None
        streamed = plan.streamed_bytes if before is None \
            else before.decisions["host_pages"]["disk_bytes"]
        assert streamed <= plan.streamed_bytes
        if get_program(name).final_once_set and execution == "sync":
            # with early exit it skips the pages whose vertices are all settled:
            # it reads those it needs on disk only, as its direction counted them
            streamed = record.decisions["direction"]["pull_disk_bytes"]
        assert streamed <= taken(record) <= total
        if before is not None and before.direction == "pull" \
                and not before.decisions["host_pages"]["choice"]:
            assert taken(record) == streamed
    for record in result.iterations:
        assert taken(record) <= total
    assert sum(record.bytes_read for record in result.iterations) > 0
    if result.converged:
        report = result.program.verify(result.graph, result)
        assert report.ok, str(report)


@pytest.mark.parametrize("name", programs(sorted(EXACT) + ["delta_pagerank"]))
def test_async_on_one_thread_takes_the_same_steps(disk_rmat, name):
    """On one thread an asynchronous run is deterministic: the streamed run
    (notified vertices in page order) updates what the in-memory run does."""
    expected = run_quietly(disk_rmat, name, execution="async", threads=1)
    result = run_quietly(disk_rmat, name, execution="async", threads=1, read_ratio=1.0,
                         **budget(disk_rmat, name, 0.25))
    assert_matches(name, result.values, expected.values)
    assert [(r.direction, r.activated, r.updated_vertices, r.edges_processed)
            for r in result.iterations] == \
        [(r.direction, r.activated, r.updated_vertices, r.edges_processed)
         for r in expected.iterations]
    assert "notify-pull" in {r.direction for r in result.iterations}


# ------------------------------------------ the disk's reads move the switch --
@pytest.mark.parametrize("name", programs(["sssp", "bfs", "sswp"]))
def test_disk_reads_change_directions_not_results(disk_rmat, in_memory, name):
    """From disk each direction is the in-memory rule over compute (rho = 1:
    pages are read whole either way) with each direction's disk bytes
    counted (:func:`~garaphpy.scheduler.disk_decisions.disk_direction`),
    its inputs in the record; the frontiers and values are the in-memory
    run's."""
    expected = in_memory(name)
    result = run_quietly(disk_rmat, name, read_ratio=K, **budget(disk_rmat, name, 0.25))
    assert [r.rho for r in result.iterations] == [K] * result.num_iterations
    assert all(r.rho == 1.0 for r in expected.iterations)
    # synchronous: the same frontiers whatever the directions
    assert result.num_iterations == expected.num_iterations
    np.testing.assert_allclose([r.active_fraction for r in result.iterations],
                               [r.active_fraction for r in expected.iterations])
    np.testing.assert_array_equal(result.values, expected.values)
    settling = get_program(name).final_once_set
    memory_rule = decisions.settling_direction if settling else decisions.choose_direction
    for streamed in result.iterations:
        entry = dict(streamed.decisions["direction"])
        choice = entry.pop("choice")
        rule_inputs = dict(entry.pop("memory_rule"))
        rule_choice = rule_inputs.pop("choice")
        assert rule_inputs["rho"] == 1.0
        assert memory_rule(**rule_inputs) == rule_choice == entry["chosen"]
        assert disk_direction(**entry) == choice == streamed.direction
        assert entry["pull_disk_bytes"] >= 0 and entry["sparse_disk_bytes"] >= 0
    assert any(s.direction == "notify-pull" for s in result.iterations)
    total = sum(page_bytes(disk_rmat.store))
    for record in result.iterations:
        if record.direction == "pull":
            assert record.bytes_read > 0
            # a pull with early exit skips the pages whose vertices are all settled
            assert record.pages <= len(disk_rmat.store.pages) if settling \
                else record.pages == len(disk_rmat.store.pages)
        assert record.bytes_read <= total


def test_pagerank_reads_the_streamed_pages_every_iteration(disk_rmat, in_memory):
    options = budget(disk_rmat, "pagerank", 0.25)
    plan = plan_of(disk_rmat.store, **options)
    expected = in_memory("pagerank")
    result = run_quietly(disk_rmat, "pagerank", read_ratio=K, **options)
    np.testing.assert_allclose(result.values, expected.values, rtol=1e-4)
    assert result.num_iterations == expected.num_iterations > 3
    assert all(r.rho == K and r.direction == "pull" for r in result.iterations)
    read = [r.bytes_read for r in result.iterations]
    assert sum(read) >= (result.num_iterations - 1) * plan.streamed_bytes
    assert read[0] == plan.cached_bytes + plan.streamed_bytes       # the cache fills once
    assert read[1:] == [plan.streamed_bytes] * (result.num_iterations - 1)
    assert all(r.pages == len(disk_rmat.store.pages) for r in result.iterations)
    np.testing.assert_allclose(result.values, ref.pagerank_power(disk_rmat), atol=1e-5)


# ------------------------------------------------------ forced notify-pull --
@pytest.mark.parametrize("cached_fraction", [0.0, 0.5])
@pytest.mark.parametrize("name", programs(["sssp", "cc", "bfs"]))
def test_forced_notify_pull_from_pages(disk_rmat, in_memory, name, cached_fraction,
                                      monkeypatch):
    # BFS would push from the frontier, reading no page (test_bfs_pushes_without_pages)
    expected = in_memory(name, direction="notify-pull", turned_off=frozenset({"settling_push"}))
    options = budget(disk_rmat, name, cached_fraction, pages_ahead=1)
    store = store_of(disk_rmat, name)
    plan = plan_of(store, **options)
    assert plan is not None and bool(plan.cached) == (cached_fraction > 0)
    result = run_quietly(disk_rmat, name, direction="notify-pull", read_ratio=K,
                         turned_off={"settling_push"}, **options)
    np.testing.assert_array_equal(result.values, expected.values)
    np.testing.assert_array_equal(result.values, in_memory(name).values)
    assert result.num_iterations == expected.num_iterations
    # CC's vertices all start active: its first iteration pulls, applying every vertex
    first = "pull" if name == "cc" else "notify-pull"
    assert [r.direction for r in result.iterations] == \
        [first] + ["notify-pull"] * (result.num_iterations - 1)
    assert all(r.forced for r in result.iterations)
    assert [r.updated_vertices for r in result.iterations] == \
        [r.updated_vertices for r in expected.iterations]
    assert [r.edges_processed for r in result.iterations] == \
        [r.edges_processed for r in expected.iterations]
    sizes = sorted(page_bytes(store))
    assert any(r.pages > 0 for r in result.iterations)
    for record in result.iterations:
        assert 0 <= record.pages <= len(sizes)
        assert (record.pages > 0) == (record.edges_processed > 0)
        # a touched page is read whole, once
        assert taken(record) <= sum(sizes[len(sizes) - record.pages:])
        if cached_fraction == 0.0:      # every touched page comes from storage
            assert taken(record) >= sum(sizes[:record.pages])
            assert (taken(record) > 0) == (record.pages > 0)


@pytest.mark.parametrize("cached_fraction", [0.0, 0.5])
def test_bfs_pushes_without_pages(disk_rmat, in_memory, cached_fraction):
    """Beamer's top-down step reads the frontier's out-edges (in memory), no page."""
    expected = in_memory("bfs", direction="notify-pull")
    options = budget(disk_rmat, "bfs", cached_fraction, pages_ahead=1)
    result = run_quietly(disk_rmat, "bfs", direction="notify-pull", read_ratio=K, **options)
    np.testing.assert_array_equal(result.values, expected.values)
    assert [r.activated for r in result.iterations] == \
        [r.activated for r in expected.iterations]
    pushed = [r for r in result.iterations if "settling_push" in r.decisions]
    assert pushed
    assert all(r.pages == 0 and taken(r) == 0 for r in pushed)


def test_configured_read_ratio_is_rho(disk_rmat, in_memory, monkeypatch):
    monkeypatch.setattr(config, "READ_RATIO", 3.0)
    result = run_quietly(disk_rmat, "sssp", **budget(disk_rmat, "sssp", 0.25))
    assert [r.rho for r in result.iterations] == [3.0] * result.num_iterations
    np.testing.assert_array_equal(result.values, in_memory("sssp").values)


def test_notify_pull_on_a_grid_reads_only_the_pages_it_touches(tmp_path_factory):
    """A grid's SSSP frontier is a thin wave: notify-pull iterations touch a few
    pages, and only those are read (nothing is cached)."""
    base = tmp_path_factory.mktemp("grid")
    grid = garaphpy.Graph.load(
        "grid:60x50", store=base / "store", progress=False,
        generator_options={"weighted": True, "seed": 2}, max_shard_edges=128,
        max_page_bytes=4096, compress=False, storage_dirs=[str(base / "ssd1"), str(base / "ssd2")])
    store = grid.store
    sizes = page_bytes(store)
    assert len(sizes) > 20
    host_memory = run_fixed_bytes(store) + buffer_bytes(store)
    assert plan_of(store, host_memory).cached == ()
    expected = run_quietly(grid, "sssp", max_iterations=10_000)
    result = run_quietly(grid, "sssp", host_memory=host_memory, read_ratio=K,
                         max_iterations=10_000)
    np.testing.assert_array_equal(result.values, expected.values)
    np.testing.assert_array_equal(result.values, ref.sssp_scipy(grid, SOURCES))
    assert result.num_iterations == expected.num_iterations > 50
    notify = [r for r in result.iterations if r.direction == "notify-pull"]
    assert len(notify) > result.num_iterations // 2
    ordered = sorted(sizes)
    for record in notify:
        assert 0 < record.pages <= len(sizes)
        assert sum(ordered[:record.pages]) <= taken(record) \
            <= sum(ordered[len(ordered) - record.pages:])
    assert result.iterations[0].pages == 1          # the sources' out-neighbours
    assert sum(r.pages <= 3 for r in notify) >= 5
    assert sum(r.bytes_read for r in notify) < 0.7 * len(notify) * sum(sizes)
    for record in result.iterations:
        if record.direction == "pull":
            assert taken(record) == sum(sizes)


# ------------------------------------------------------ tiny budgets --
@pytest.mark.parametrize("name", programs(["pagerank", "sssp", "cc"]))
def test_a_budget_that_caches_nothing_still_works(disk_rmat, in_memory, name):
    store = store_of(disk_rmat, name)
    host_memory = run_fixed_bytes(store) + buffer_bytes(store)   # one page buffer, no more
    plan = plan_of(store, host_memory)
    assert plan is not None and plan.cached == () and plan.cached_bytes == 0
    expected = in_memory(name)
    result = run_quietly(disk_rmat, name, host_memory=host_memory, read_ratio=K)
    assert_matches(name, result.values, expected.values)
    total = sum(page_bytes(store))
    for record in result.iterations:
        if record.direction == "pull":
            assert taken(record) == total       # every page, every pull
    if name == "sssp":
        np.testing.assert_array_equal(result.values, ref.sssp_scipy(disk_rmat, SOURCES))
    if name == "cc":
        np.testing.assert_array_equal(result.values, ref.components_scipy(disk_rmat))


def test_default_readahead_under_a_budget(disk_rmat, in_memory):
    store = disk_rmat.store
    host_memory = run_fixed_bytes(store) + sum(page_bytes(store)) // 2
    plan = plan_of(store, host_memory)
    assert plan is not None and plan.cached and plan.streamed
    assert plan.readahead_bytes >= buffer_bytes(store)
    result = run_quietly(disk_rmat, "pagerank", host_memory=host_memory, read_ratio=K)
    np.testing.assert_allclose(result.values, in_memory("pagerank").values, rtol=1e-4)
    assert all(r.bytes_read >= plan.streamed_bytes for r in result.iterations)


# --------------------------------------------------------------- failures --
def test_a_budget_below_the_vertex_data_is_named(disk_rmat):
    store = disk_rmat.store
    small = run_fixed_bytes(store) // 2
    with pytest.raises(ConfigError, match=rf"host memory budget .*\({small} bytes\) is too "
                                          "small"):
        run_quietly(disk_rmat, "sssp", host_memory=small, read_ratio=K)
    # the vertex data fit, one page buffer of read-ahead does not
    short = run_fixed_bytes(store) + buffer_bytes(store) - 1
    with pytest.raises(ConfigError, match=rf"\({short} bytes\) is too small"):
        run_quietly(disk_rmat, "sssp", host_memory=short, read_ratio=K)


@pytest.mark.parametrize("value", [0.5, 0, "x", True, float("nan")])
@pytest.mark.parametrize("streamed", [True, False])
def test_bad_read_ratio_is_named(disk_rmat, value, streamed):
    host_memory = budget(disk_rmat, "sssp", 0.25)["host_memory"] if streamed else None
    with pytest.raises(ConfigError, match="read_ratio"):
        run_quietly(disk_rmat, "sssp", host_memory=host_memory, read_ratio=value)


@pytest.mark.parametrize("value", [0, -4096, "2MiB", 1.5e6])
def test_bad_host_memory_is_refused(disk_rmat, value):
    with pytest.raises(ConfigError, match="host_memory=" + repr(value).replace(".", r"\.")):
        run_quietly(disk_rmat, "sssp", host_memory=value, read_ratio=K)


def test_bad_readahead_is_named(disk_rmat):
    options = budget(disk_rmat, "sssp", 0.25)
    with pytest.raises(ConfigError, match="readahead_bytes"):
        run_quietly(disk_rmat, "sssp", host_memory=options["host_memory"], read_ratio=K,
                    readahead_bytes=0)


def test_a_storage_directory_gone_is_named(tmp_path):
    graph = garaphpy.Graph.load(
        "rmat:10", store=tmp_path / "store", progress=False,
        generator_options={"weighted": True, "seed": 3}, max_shard_edges=256,
        max_page_bytes=8192, storage_dirs=[str(tmp_path / "ssd1")])
    assert len(graph.store.pages) > 4
    options = budget(graph, "sssp", 0.0)
    (tmp_path / "ssd1").rename(tmp_path / "elsewhere")
    with pytest.raises(StoreError, match=f"{tmp_path / 'ssd1'}: storage directory 1"):
        run_quietly(graph, "sssp", read_ratio=K, **options)


# -------------------------------------------------------------------- CLI --
def write_config(directory: Path, extra: str = "") -> Path:
    path = directory / "run.toml"
    path.write_text(
        'graph = "rmat:12"\n'
        '[input]\nweighted = true\nseed = 11\n'
        f'[store]\npath = "store"\nstorage_dirs = ["ssd1", "ssd2"]\n'
        'max_shard_edges = 512\nmax_page_bytes = 16384\n'
        f'[run]\nprogram = "sssp"\nsources = 0\nmode = "cpu"\nthreads = {THREADS}\n'
        'execution = "sync"\n'
        f'read_ratio = {K}\n{extra}'
        '[output]\nvalues = "values.npy"\niterations = "iterations.jsonl"\n')
    return path


def test_cli_with_host_memory_below_the_store(tmp_path, capsys):
    config_path = write_config(tmp_path)
    assert main([str(config_path), "-q"]) == 0
    in_memory_values = np.load(tmp_path / "values.npy")
    graph = graph_from_config(load_config(config_path), progress=False)
    host_memory = budget(graph, "sssp", 0.25)["host_memory"]
    assert plan_of(graph.store, host_memory) is not None
    capsys.readouterr()
    code = main([str(config_path), "-q", "--set", f"run.host_memory={host_memory}",
                 "--set", "output.values='streamed.npy'",
                 "--set", "output.iterations='streamed.jsonl'"])
    assert code == 0, capsys.readouterr().err
    streamed = np.load(tmp_path / "streamed.npy")
    assert streamed.dtype == in_memory_values.dtype
    np.testing.assert_array_equal(streamed, in_memory_values)
    records = [json.loads(line)
               for line in (tmp_path / "streamed.jsonl").read_text().splitlines()]
    assert records and all(r["rho"] == K for r in records)
    assert sum(r["bytes_read"] for r in records) > 0
    before = [json.loads(line)
              for line in (tmp_path / "iterations.jsonl").read_text().splitlines()]
    assert all(r["bytes_read"] == 0 and r["rho"] == 1.0 for r in before)
    assert len(before) == len(records)


def test_cli_bad_read_ratio_and_host_memory(tmp_path, capsys):
    config_path = write_config(tmp_path, "host_memory = \"1MiB\"\n")
    assert main([str(config_path), "-q", "--set", "run.read_ratio=0.5"]) == 2
    assert "run.read_ratio" in capsys.readouterr().err
    assert main([str(config_path), "-q", "--set", "run.read_ratio='x'"]) == 2
    assert "run.read_ratio" in capsys.readouterr().err
    assert main([str(config_path), "-q", "--set", "run.host_memory='lots'"]) == 2
    assert "run.host_memory" in capsys.readouterr().err
    # a size below the vertex data: refused by the run, naming the budget
    assert main([str(config_path), "-q", "--set", "run.host_memory='2KiB'"]) == 2
    err = capsys.readouterr().err
    assert "host memory budget of 2.0 KiB (2048 bytes) is too small" in err
    assert not (tmp_path / "values.npy").exists()


def test_the_undirected_store_keeps_the_storage_directories(tmp_path):
    """CC symmetrizes a directed graph: its store spreads over the same directories."""
    ssd = tmp_path / "ssd"
    ssd.mkdir()
    rng = np.random.default_rng(3)
    graph = garaphpy.Graph.from_arrays(rng.integers(0, 500, 5000), rng.integers(0, 500, 5000),
                                       store=tmp_path / "store", storage_dirs=[str(ssd)],
                                       block_bytes=4096, max_page_bytes=16384, progress=False)
    undirected = graph.as_undirected()
    assert undirected.store.manifest["storage_dirs"] == [None, str(ssd.resolve())]
    assert set(np.unique(undirected.store.blocks["directory"])) == {0, 1}


@pytest.mark.parametrize("threads, directories, expected", [
    (16, 1, 16 - config.STREAMING_CORES_PER_DIRECTORY),
    (16, 3, 12),             # at most a quarter of the cores
    (2, 1, 2), (1, 1, 1),
])
def test_default_threads_leave_cores_to_the_page_readers(threads, directories, expected):
    assert api._threads_beside_readers(threads, directories) == expected
