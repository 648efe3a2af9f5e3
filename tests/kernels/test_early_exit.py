"""Early exit in CPU pulls for programs whose values are final once set.

A program declaring ``final_once_set`` (the built-in BFS) runs on the CPU
alone with its settled vertices skipped and each gather stopped at the
in-edge that activates the vertex (Beamer's bottom-up step), directions by
Beamer's rule.  Checked here against SciPy and against the same runs with
early exit off: every direction, one and two threads, batches on and off,
pages cut through vertices, pages read from storage, a checkpoint resumed;
the rule itself; the declaration's validation; a user's honest declaration
and a false one, which must raise instead of answering wrongly; the
top-down push of sparse iterations run alone, against the notify-pull and,
kernel alone, against NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy import api, config
from garaphpy.program import ProgramError, VertexProgram
from garaphpy.programs import BFS
from garaphpy.kernels import cpu as kernels
from garaphpy.scheduler import decisions
from garaphpy.storage.host_budget import run_fixed_bytes

from references import bfs_scipy, random_csr_csc, run_engine

DIRECTIONS = ["auto", "pull", "notify-pull"]


@pytest.fixture(scope="module")
def graphs(tmp_path_factory, request):
    base = tmp_path_factory.mktemp("early-exit")
    sample = garaphpy.Graph.load(
        request.config.rootpath / "examples" / "graphs" / "sample-web.txt.gz",
        store=base / "sample", progress=False)
    return {
        "grid": garaphpy.Graph.load("grid:40x30", store=base / "grid", progress=False),
        "rmat": garaphpy.Graph.load("rmat:12", store=base / "rmat", progress=False),
        # pages of a few hundred edges: hubs are cut between pages
        "rmat-pages": garaphpy.Graph.load("rmat:11", store=base / "rmat-pages",
                                          progress=False, max_shard_edges=64,
                                          max_page_bytes=2048),
        "sample": sample,
    }


def hub(graph) -> int:
    """A source that reaches much of the graph: the largest out-degree."""
    return int(np.argmax(graph.store.out_degree))


def bfs(graph, **options):
    options = {"mode": "cpu", "threads": 2, **options}
    return run_engine(graph, "bfs", [hub(graph)], **options)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("name", ["grid", "rmat", "rmat-pages", "sample"])
def test_bfs_with_early_exit_equals_scipy_and_the_run_without(graphs, name, direction,
                                                              threads, monkeypatch):
    graph = graphs[name]
    result = bfs(graph, direction=direction, threads=threads)
    np.testing.assert_array_equal(result.values, bfs_scipy(graph, [hub(graph)]))
    assert result.converged
    without = bfs(graph, direction=direction, threads=threads, turned_off={"early_exit"})
    np.testing.assert_array_equal(result.values, without.values)
    if direction != "auto":     # the same levels, one iteration each
        assert result.num_iterations == without.num_iterations
        assert [r.activated for r in result.iterations] == \
            [r.activated for r in without.iterations]


@pytest.mark.parametrize("name", ["rmat", "sample"])
def test_batches_off_give_the_same_depths(graphs, name, monkeypatch):
    graph = graphs[name]
    batched = bfs(graph)
    single = bfs(graph, turned_off={"sparse_batches"})
    np.testing.assert_array_equal(batched.values, single.values)
    assert [r.direction for r in batched.iterations] == [r.direction for r in single.iterations]


def test_pulls_read_only_the_unsettled_vertices_in_edges(graphs, monkeypatch):
    graph = graphs["rmat"]
    result = bfs(graph, direction="pull")
    edges = [r.edges_processed for r in result.iterations]
    # the first pull may read every in-edge; after it, only those of unsettled vertices
    assert edges[0] <= graph.num_edges and all(a >= b for a, b in zip(edges, edges[1:]))
    assert edges[-1] < graph.num_edges // 2
    without = bfs(graph, direction="pull", turned_off={"early_exit"})
    assert all(r.edges_processed == graph.num_edges for r in without.iterations)


def test_auto_pulls_the_middle_of_a_power_law_search(graphs):
    result = bfs(graphs["rmat"])
    directions = [r.direction for r in result.iterations]
    assert directions[0] == "notify-pull" and "pull" in directions
    for record in result.iterations:
        entry = record.decisions["direction"]
        assert "unsettled_in_edges" in entry
        if record.direction == "notify-pull" and "sparse_batch" in record.decisions:
            # settled vertices hold their claim
            assert record.decisions["dense_notify"]["choice"] is False
        elif record.direction == "notify-pull":     # run alone: Beamer's top-down step
            assert record.decisions["settling_push"]["choice"]
            assert "dense_notify" not in record.decisions


def test_async_keeps_the_full_pull_and_a_hybrid_run_may_skip(graphs):
    graph = graphs["rmat"]
    result = bfs(graph, execution="async")
    np.testing.assert_array_equal(result.values, bfs_scipy(graph, [hub(graph)]))
    for record in result.iterations:
        assert "unsettled_in_edges" not in record.decisions["direction"]
    assert not decisions.early_exit(True, False, "cpu")
    assert decisions.early_exit(True, True, "hybrid")
    assert not decisions.early_exit(True, False, "hybrid")
    assert not decisions.early_exit(True, True, "gpu")
    assert not decisions.early_exit(False, True, "cpu")
    assert decisions.early_exit(True, True, "cpu")


def test_pages_read_from_storage(tmp_path):
    graph = garaphpy.Graph.load("rmat:11", store=tmp_path / "store", progress=False,
                                max_shard_edges=64, max_page_bytes=2048,
                                storage_dirs=[str(tmp_path / "a"), str(tmp_path / "b")])
    store = graph.store
    largest = max(page.nbytes for page in store.pages)
    # the vertex arrays and two page buffers: no page cached, every pull reads them all
    host_memory = run_fixed_bytes(store) + 2 * largest + 2 * config.BLOCK_ALIGNMENT
    in_memory = bfs(graph)
    streamed = bfs(graph, host_memory=host_memory, read_ratio=2.0)
    assert any(r.bytes_read for r in streamed.iterations)
    np.testing.assert_array_equal(streamed.values, in_memory.values)
    np.testing.assert_array_equal(streamed.values, bfs_scipy(graph, [hub(graph)]))
    # pages from storage pull page by page; in memory, over the whole CSC at once
    pulls = [r for r in streamed.iterations if r.direction == "pull"]
    assert pulls and not any(r.decisions["whole_settling_pull"]["choice"] for r in pulls)
    assert all(r.decisions["whole_settling_pull"]["choice"]
               for r in in_memory.iterations if r.direction == "pull")


def test_the_whole_settling_pull_rule():
    assert decisions.whole_settling_pull(True, in_memory=True)
    assert not decisions.whole_settling_pull(False, in_memory=True)
    assert not decisions.whole_settling_pull(True, in_memory=False)


@pytest.mark.parametrize("direction", ["auto", "pull"])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("name", ["grid", "rmat", "rmat-pages", "sample"])
def test_the_whole_settling_pull_equals_the_pull_by_pages(graphs, name, threads, direction,
                                                          monkeypatch):
    graph = graphs[name]
    whole = bfs(graph, direction=direction, threads=threads)
    pulls = [r for r in whole.iterations if r.direction == "pull"]
    assert all(r.decisions["whole_settling_pull"]["choice"] for r in pulls)
    assert pulls or (name == "grid" and direction == "auto")     # a grid's levels push
    paged = bfs(graph, direction=direction, threads=threads,
                turned_off={"whole_settling_pull"})
    assert not any(r.decisions["whole_settling_pull"]["choice"]
                   for r in paged.iterations if r.direction == "pull")
    np.testing.assert_array_equal(whole.values, paged.values)
    np.testing.assert_array_equal(whole.values, bfs_scipy(graph, [hub(graph)]))
    # the same levels, settled in-edges and so the same choices of direction
    for a, b in zip(whole.iterations, paged.iterations, strict=True):
        assert (a.direction, a.activated, a.edges_processed) == \
            (b.direction, b.activated, b.edges_processed)
        assert a.decisions["direction"] == b.decisions["direction"]


@pytest.mark.parametrize("span", ["whole", "partition"])
def test_the_whole_settling_pull_kernel_against_numpy(span):
    """One bottom-up step over several blocks of vertices, against NumPy: the
    vertices with a settled in-neighbour take the level, are listed in order,
    settled and claimed; the others are untouched.  A partition's step holds
    the in-edges of its own range alone (not starting on a word) and passes
    over that range: the flags of the other vertices stay as they were."""
    from garaphpy.kernels.cpu_program import compile_program
    from garaphpy.programs.bfs import UNREACHED

    n, m = 3 * kernels.SETTLING_BLOCK + 17, 12_000
    out_offsets, out_targets, in_offsets, in_sources = random_csr_csc(5, n, m)
    first, end = (0, n) if span == "whole" else \
        (kernels.SETTLING_BLOCK + 5, 2 * kernels.SETTLING_BLOCK + 700)
    if span == "partition":
        in_degree = np.diff(in_offsets)
        in_degree[:first] = in_degree[end:] = 0
        in_sources = in_sources[in_offsets[first]:in_offsets[end]]
        in_offsets = np.concatenate([[0], np.cumsum(in_degree)])
    compiled = compile_program(BFS(), None, parallel=True)
    rng = np.random.default_rng(5)
    settled = rng.random(n) < 0.05
    is_source = np.zeros(n, np.bool_)
    attrs = (np.diff(out_offsets), np.diff(in_offsets), np.zeros(n), np.arange(n), is_source)
    values = np.where(settled, 2, UNREACHED).astype(compiled.value_dtype)
    claimed = np.where(settled, kernels.SETTLED_CLAIM, 0).astype(np.uint8)
    bits = np.zeros((n + 63) // 64, np.uint64)
    kernels.pack_flags(settled, bits)
    in_edge_bits = np.zeros_like(bits)
    in_degree = np.diff(in_offsets)
    assert (in_degree == 0).any() and n % 64      # words with vertices passed over, a short last
    kernels.pack_flags(in_degree > 0, in_edge_bits)
    destination = np.repeat(np.arange(n), np.diff(in_offsets))
    reached = np.zeros(n, np.bool_)
    reached[destination[settled[in_sources]]] = True
    expected = np.flatnonzero(reached & ~settled)
    was_settled = settled.copy()
    # the active ones: settled (the last frontier, and older ones a push left set)
    was_active = was_settled & (rng.random(n) < 0.5)
    active = was_active.copy()
    stats, marked, out_edges = np.zeros(2), np.zeros(1, np.int64), np.array([-1])
    for team in (1, 4):
        if team == 4:       # again from the same state
            settled[:] = was_settled
            active[:] = was_active
            values[:] = np.where(settled, 2, UNREACHED)
            claimed[:] = np.where(settled, kernels.SETTLED_CLAIM, 0)
            stats[:], marked[:] = 0, 0
        frontier = compiled.kernels.pull_settling_whole(
            compiled.identity, (in_offsets, in_sources, np.zeros(1)), values,
            (attrs, np.zeros(1), n, 3), active,
            (settled, bits, in_edge_bits, claimed, np.empty(n, np.int64)),
            (stats, marked, out_edges), team, (first, end))
        np.testing.assert_array_equal(frontier, expected)
        assert np.all(values[expected] == 3) and np.all(values[was_settled] == 2)
        untouched = ~reached & ~was_settled
        assert np.all(values[untouched] == UNREACHED)
        np.testing.assert_array_equal(settled, was_settled | reached)
        passed = np.zeros(n, np.bool_)
        passed[(first >> 6) << 6:end] = True
        np.testing.assert_array_equal(active, np.where(passed, reached & ~was_settled,
                                                       was_active))
        assert np.all(claimed[expected] == kernels.SETTLED_CLAIM) and not claimed[untouched].any()
        assert marked[0] == int(np.diff(in_offsets)[expected].sum())
        assert out_edges[0] == int(np.diff(out_offsets)[expected].sum())
        assert stats[1] == expected.size


def test_checkpoint_resume_finds_the_settled_vertices_again(graphs, tmp_path):
    graph = graphs["grid"]
    whole = bfs(graph, direction="pull")

    def stop_after_five(record):
        if record.iteration == 5:
            raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        bfs(graph, direction="pull", checkpoint_dir=tmp_path, checkpoint_every=2,
            keep_checkpoints=True, on_iteration=stop_after_five)
    resumed = bfs(graph, direction="pull", checkpoint_dir=tmp_path, checkpoint_every=2,
                  resume=True)
    assert resumed.resumed_from is not None
    np.testing.assert_array_equal(resumed.values, whole.values)
    assert [r.edges_processed for r in resumed.iterations] == \
        [r.edges_processed for r in whole.iterations]


# -- a hybrid run's CPU, after the GPU's iterations ------------------------------------------
def early_exit_engine(graph, sources):
    """A CPU engine with early exit, made as ``garaphpy.run`` makes it."""
    from garaphpy import api
    from garaphpy.scheduler.cpu_engine import CpuEngine
    from garaphpy.scheduler.cpu_state import GraphArrays, RunState
    from garaphpy.scheduler.plan import plan_cpu

    program = BFS()
    source_vertices = api._source_vertices(graph, program, sources)
    compiled = api._compiled_program(program, parallel=True)
    arrays = GraphArrays.from_graph(graph, source_vertices, False,
                                    api.page_source(graph.store, "cpu"))
    plan = plan_cpu(program, compiled, arrays, mode="cpu", synchronous=True, threads=2,
                    tolerance=None, symmetric=not graph.directed)
    assert plan.early_exit
    state = RunState(arrays, compiled, synchronous=True, find_initial_value=plan.early_exit)
    state.frontier = source_vertices.copy()
    return program, CpuEngine(arrays, compiled, state, plan)


@pytest.mark.parametrize("name", ["rmat", "grid", "rmat-pages"])
@pytest.mark.parametrize("depth", [1, 3])
def test_settled_vertices_found_again_after_the_gpus_writes(graphs, name, depth):
    graph = graphs[name]
    source = hub(graph)
    levels = bfs_scipy(graph, [source])
    program, engine = early_exit_engine(graph, [source])
    state = engine.state
    # the state the GPU leaves after `depth` iterations: depths up to it, its frontier
    reached = (levels >= 0) & (levels <= depth)
    values = np.where(reached, levels, state.values)
    state.values[:] = values
    state.next[:] = values
    state.frontier = np.flatnonzero(levels == depth).astype(np.int64)
    previous = int(np.count_nonzero(levels == depth - 1))
    engine.refresh_settled(pulled_last=True, previous_active=previous)
    # against NumPy: the reached vertices settled and claimed for good, the others'
    # in-edges counted
    in_degree = np.diff(engine.arrays.in_offsets)
    np.testing.assert_array_equal(engine.settled, reached)
    np.testing.assert_array_equal(state.claimed,
                                  np.where(reached, kernels.SETTLED_CLAIM, 0))
    assert int(engine.unsettled_edges[0]) == int(in_degree[~reached].sum())
    assert (engine.pulled_last, engine.previous_active) == (True, previous)
    # the CPU alone finishes the search from there, skipping the settled vertices
    from garaphpy import api
    records, converged, _ = api._iterate(engine, program, program.max_iterations,
                                         program.tolerance, "auto", None)
    assert converged
    np.testing.assert_array_equal(program.finalize(engine.values_to_host()), levels)
    assert all("unsettled_in_edges" in r.decisions["direction"] for r in records)


def test_settled_from_one_initial_value_equals_the_pass_over_both_arrays():
    rng = np.random.default_rng(11)
    n = 3001
    in_offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 9, n))]).astype(np.int64)
    is_source = np.zeros(n, np.bool_)
    is_source[rng.choice(n, 5, replace=False)] = True
    initial = np.full(n, np.inf)
    values = np.where(rng.random(n) < 0.4, rng.integers(0, 7, n).astype(np.float64), np.inf)
    values[17] = np.nan                           # a NaN differs from its initial value
    for everything in (False, True):
        expected = everything | is_source | (values != initial)
        results = []
        for kernel, start in ((kernels.settled_from_values, initial),
                              (kernels.settled_from_value, np.inf)):
            settled = np.zeros(n, np.bool_)
            claimed = np.full(n, 1, np.uint8)
            unsettled = kernel(values, start, is_source, everything, settled, claimed,
                               in_offsets)
            np.testing.assert_array_equal(settled, expected)
            np.testing.assert_array_equal(claimed, np.where(expected, kernels.SETTLED_CLAIM, 0))
            assert unsettled == int(np.diff(in_offsets)[~expected].sum())
            results.append(unsettled)
        assert results[0] == results[1]


def test_count_unequal_skips_and_counts_nans():
    values = np.array([2.0, 2.0, np.nan, 3.0, 2.0, 5.0])
    skip = np.array([False, False, False, False, True, True])
    assert kernels.count_unequal(values, 2.0, skip) == 2
    assert kernels.count_unequal(values, np.nan, np.zeros(6, np.bool_)) == 6
    assert kernels.count_unequal(np.zeros(0), 1.0, np.zeros(0, np.bool_)) == 0


def test_settled_found_from_one_value_or_from_each_vertexs_initial_value(graphs):
    graph = graphs["rmat"]
    source = hub(graph)
    levels = bfs_scipy(graph, [source])
    _, engine = early_exit_engine(graph, [source])
    state = engine.state
    assert engine.settling._initial_value is not None      # BFS: every vertex but the source alike
    # a start where each vertex has its own value: the pass reads the initial values
    rng = np.random.default_rng(3)
    own = rng.integers(0, 3, levels.size).astype(state.values.dtype)
    engine.settling._initial_values, engine.settling._initial_value = own, None
    state.values[:] = np.where(levels >= 0, levels, own)
    state.frontier = np.zeros(0, np.int64)
    engine.refresh_settled(pulled_last=False, previous_active=0)
    expected = (state.values != own) | engine.arrays.attrs[4]
    np.testing.assert_array_equal(engine.settled, expected)
    in_degree = np.diff(engine.arrays.in_offsets)
    assert int(engine.unsettled_edges[0]) == int(in_degree[~expected].sum())


def test_one_initial_value_passes_over_the_sources_and_sees_any_difference():
    from garaphpy.scheduler.cpu_state import one_initial_value

    values = np.array([7, 0, 7, 7, 3], np.int64)
    is_source = np.array([False, True, False, False, True])
    assert one_initial_value(values, is_source) == 7
    values[3] = 6
    assert one_initial_value(values, is_source) is None
    assert one_initial_value(values, np.ones(5, np.bool_)) is None     # every vertex a source
    assert one_initial_value(np.zeros(0), np.zeros(0, np.bool_)) is None
    assert one_initial_value(np.full(3, np.nan), np.zeros(3, np.bool_)) is None


@pytest.mark.parametrize("name", ["rmat", "grid"])
def test_a_run_with_early_exit_makes_its_initial_values_once(graphs, name):
    # the state finds the one initial value as it makes the values: the settled
    # vertices are found from it, without a second pass of init and its array
    graph = graphs[name]
    source = hub(graph)
    program, engine = early_exit_engine(graph, [source])
    others = ~engine.arrays.attrs[4]
    assert engine.state.initial_value == engine.state.values[np.argmax(others)]
    assert engine.settling._initial_values is None
    _, converged, _ = api._iterate(engine, program, program.max_iterations,
                                   program.tolerance, "auto", None)
    assert converged
    np.testing.assert_array_equal(program.finalize(engine.values_to_host()),
                                  bfs_scipy(graph, [source]))


def test_settled_vertices_found_again_count_every_vertex_of_an_all_active_start(graphs):
    graph = graphs["grid"]
    _, engine = early_exit_engine(graph, [hub(graph)])
    engine.settling._initially_active = "all"
    engine.refresh_settled(pulled_last=False, previous_active=0)
    assert engine.settled.all() and int(engine.unsettled_edges[0]) == 0


# -- the direction rule ---------------------------------------------------------------------
def test_settling_direction_is_beamers_rule():
    rule = decisions.settling_direction
    alpha, beta = config.CPU_SETTLING_PULL_FACTOR, config.CPU_SETTLING_NOTIFY_FACTOR
    common = dict(num_vertices=1000, previous_active=0)
    # from notify-pull: pull once the frontier's out-edges * alpha exceed what a pull
    # reads, the unsettled in-edges and a flag per vertex
    assert rule(100, 10, 100 * alpha - 1000, pulled_last=False, **common) == "notify-pull"
    assert rule(100, 10, 100 * alpha - 1001, pulled_last=False, **common) == "pull"
    assert rule(100, 10, 100 * alpha * 2 - 1001, pulled_last=False, rho=2.0,
                **common) == "pull"
    assert rule(1, 1, 0, pulled_last=False, **common) == "notify-pull"    # a chain's tail
    # from pull: stay while the frontier grows or is larger than |V| / beta
    stay = dict(num_vertices=1000, pulled_last=True)
    assert rule(0, 50, 10**9, previous_active=40, **stay) == "pull"
    assert rule(0, 1000 // beta + 1, 10**9, previous_active=10**6, **stay) == "pull"
    assert rule(0, 1000 // beta - 1, 10**9, previous_active=10**6, **stay) == "notify-pull"
    assert rule(10**6, 1, 1, pulled_last=False, forced="notify-pull", **common) == \
        "notify-pull"


# -- declarations -----------------------------------------------------------------------------
def test_declaration_needs_min_or_max_sources_and_a_bool():
    with pytest.raises(ProgramError, match="needs sum 'min' or 'max'"):
        class Adds(VertexProgram):
            sum = "add"
            initially_active = "sources"
            final_once_set = True

            def gather(src):
                return src

            def apply(value, accum):
                return accum
    with pytest.raises(ProgramError, match="initially_active = 'all'"):
        class AllActive(VertexProgram):
            sum = "min"
            final_once_set = True

            def gather(src):
                return src

            def apply(value, accum):
                return min(value, accum)
    with pytest.raises(ProgramError, match="final_once_set = 'yes'"):
        class NotBool(VertexProgram):
            sum = "min"
            initially_active = "sources"
            final_once_set = "yes"

            def gather(src):
                return src

            def apply(value, accum):
                return min(value, accum)
    assert BFS.final_once_set and not VertexProgram.final_once_set


class OwnLevels(VertexProgram):
    """A user's BFS: depths, final once set (an honest declaration)."""

    value_dtype = np.int64
    sum = "min"
    initially_active = "sources"
    needs_sources = True
    final_once_set = True
    max_iterations = 100_000

    def init(is_source):
        return 0 if is_source else 1099511627776     # 2**40

    def gather(src):
        return src + 1

    def apply(value, accum):
        return min(value, accum)

    def activate(new, old):
        return new < old


class FirstFoundDistance(VertexProgram):
    """Shortest distances that declare themselves final once set: a false
    declaration (a longer path may be found first)."""

    value_dtype = np.int64
    sum = "min"
    initially_active = "sources"
    needs_sources = True
    needs_weights = True
    final_once_set = True
    max_iterations = 100_000

    def init(is_source):
        return 0 if is_source else 1099511627776     # 2**40

    def gather(src, weight):
        return src + weight

    def apply(value, accum):
        return min(value, accum)

    def activate(new, old):
        return new < old


def test_a_users_honest_declaration_is_checked_and_passes(graphs):
    graph = graphs["sample"]
    source = hub(graph)
    result = run_engine(graph, OwnLevels(), [source], mode="cpu", threads=2)
    expected = bfs_scipy(graph, [source])
    np.testing.assert_array_equal(np.where(result.values >= 2**40, -1, result.values),
                                  expected)


def test_a_users_false_declaration_raises_instead_of_answering(tmp_path):
    # 0 -> 1 costs 10, 0 -> 2 -> 1 costs 2: vertex 1 is reached first at 10
    graph = garaphpy.Graph.from_arrays(np.array([0, 0, 2]), np.array([1, 2, 1]),
                                       np.array([10, 1, 1]), num_vertices=3)
    with pytest.raises(ProgramError, match="declares final_once_set = True.*vertex 1"):
        garaphpy.run(graph, FirstFoundDistance(), mode="cpu", threads=1, sources=[0])
    # without early exit (async, or the switch off) the same program is right
    result = garaphpy.run(graph, FirstFoundDistance(), mode="cpu", threads=1, sources=[0],
                          execution="async")
    assert result.values.tolist() == [0, 2, 1]


# -- Beamer's top-down step: sparse iterations run alone push -----------------------------
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["grid", "rmat", "rmat-pages", "sample"])
def test_the_push_gives_the_notify_pulls_levels(graphs, name, threads, monkeypatch):
    graph = graphs[name]
    pushed = bfs(graph, threads=threads, turned_off={"sparse_batches"})  # each sparse alone
    np.testing.assert_array_equal(pushed.values, bfs_scipy(graph, [hub(graph)]))
    pulled = bfs(graph, threads=threads, turned_off={"sparse_batches", "settling_push"})
    np.testing.assert_array_equal(pushed.values, pulled.values)
    assert [r.direction for r in pushed.iterations] == [r.direction for r in pulled.iterations]
    assert [r.activated for r in pushed.iterations] == [r.activated for r in pulled.iterations]
    sparse = [r for r in pushed.iterations if r.direction == "notify-pull"]
    assert sparse and all(r.decisions["settling_push"]["choice"] for r in sparse)
    assert not any("settling_push" in r.decisions for r in pulled.iterations)
    out_degree = np.asarray(graph.store.out_degree)      # aligned with the values
    for a, b in zip(pushed.iterations, pulled.iterations):
        if a.direction == "notify-pull":
            # the same vertices written, from the out-edges of the level's vertices alone
            assert a.updated_vertices == b.updated_vertices
            assert a.edges_processed == int(out_degree[pushed.values == a.iteration].sum())


@pytest.mark.parametrize("chunks", [1, 3, 64, 5000])
def test_the_push_walks_the_frontiers_out_edges_once_per_new_vertex(chunks):
    """The kernel alone, two steps from a hub, against NumPy; the hub's edges
    cut among the chunks (more chunks than edges: most get none)."""
    from garaphpy.kernels import cpu as kernels
    from garaphpy.kernels.cpu_program import compile_program
    from garaphpy.programs.bfs import UNREACHED

    n, m = 400, 1500
    out_offsets, out_targets, in_offsets, _ = random_csr_csc(11, n, m)
    compiled = compile_program(BFS(), None, parallel=False)
    degree = np.diff(out_offsets)
    root = int(np.argmax(degree))
    is_source = np.zeros(n, np.bool_)
    is_source[root] = True
    attrs = (degree, np.diff(in_offsets), np.zeros(n), np.arange(n), is_source)
    values = np.full(n, UNREACHED, compiled.value_dtype)
    values[root] = 0
    settled = is_source.copy()
    claimed = np.where(settled, kernels.SETTLED_CLAIM, 0).astype(np.uint8)
    frontier = np.array([root], np.int64)
    expected_levels = np.full(n, -1)
    expected_levels[root] = 0
    for step in (1, 2):
        new = np.unique(out_targets[np.concatenate(
            [np.arange(out_offsets[u], out_offsets[u + 1]) for u in frontier])])
        new = new[expected_levels[new] < 0]
        expected_levels[new] = step
        prefix = kernels.degree_prefix(frontier, out_offsets)
        stats = np.zeros(2)
        unsettled = np.zeros(1, np.int64)
        next_values = values.copy()
        written, activated = compiled.kernels.push_settling(
            compiled.identity, (frontier, prefix),
            (out_offsets, out_targets, np.zeros(1), in_offsets), (values, next_values),
            (attrs, np.zeros(1), n, step), chunks, stats, (settled, claimed, unsettled))
        # each new vertex written once, activated, settled, holding its claim
        assert sorted(written.tolist()) == new.tolist()
        if step == 1:       # in the order of the hub's edges
            first_edges = np.unique(out_targets[out_offsets[root]:out_offsets[root + 1]],
                                    return_index=True)[1]
            order = out_targets[out_offsets[root] + np.sort(first_edges)]
            assert written.tolist() == order[order != root].tolist()
        assert sorted(activated.tolist()) == new.tolist()
        assert np.all(next_values[new] == step)
        assert settled[new].all() and np.all(claimed[new] == kernels.SETTLED_CLAIM)
        assert np.array_equal(claimed != 0, settled)
        assert unsettled[0] == int(np.diff(in_offsets)[new].sum())
        assert stats[1] == new.size
        kernels.commit_vertices(written, next_values, values)
        frontier = activated
    assert np.array_equal(values[expected_levels >= 0], expected_levels[expected_levels >= 0])


def test_the_push_gives_back_the_claims_of_vertices_it_did_not_activate():
    """A written vertex whose value does not change is not activated: its claim is
    given back and it stays unsettled; the frontier holds only the activated."""
    from garaphpy.kernels import cpu as kernels
    from garaphpy.kernels.cpu_program import compile_program
    from garaphpy.programs.bfs import UNREACHED

    # 0 -> 1, 2, 3; vertex 2 already holds 0, so writing it changes nothing
    out_offsets = np.array([0, 3, 3, 3, 3], np.int64)
    out_targets = np.array([1, 2, 3], np.int64)
    in_offsets = np.array([0, 0, 1, 2, 3], np.int64)
    compiled = compile_program(BFS(), None, parallel=False)
    n = 4
    degree = np.diff(out_offsets)
    is_source = np.array([True, False, False, False])
    attrs = (degree, np.diff(in_offsets), np.zeros(n), np.arange(n), is_source)
    values = np.array([0, UNREACHED, 0, UNREACHED], compiled.value_dtype)
    settled = is_source.copy()
    claimed = np.where(settled, kernels.SETTLED_CLAIM, 0).astype(np.uint8)
    frontier = np.array([0], np.int64)
    prefix = kernels.degree_prefix(frontier, out_offsets)
    next_values = values.copy()
    written, activated = compiled.kernels.push_settling(
        compiled.identity, (frontier, prefix),
        (out_offsets, out_targets, np.zeros(1), in_offsets), (values, next_values),
        (attrs, np.zeros(1), n, 1), 2, np.zeros(2), (settled, claimed, np.zeros(1, np.int64)))
    assert written.tolist() == [1, 2, 3] and activated.tolist() == [1, 3]
    assert settled.tolist() == [True, True, False, True]
    assert claimed.tolist() == [kernels.SETTLED_CLAIM, kernels.SETTLED_CLAIM, 0,
                                kernels.SETTLED_CLAIM]


@pytest.mark.parametrize("total", [0, 5, 1 << 14, (1 << 14) + 1, 50_000])
def test_chunks_concatenate_on_one_thread_or_many(total):
    from garaphpy.kernels import cpu as kernels
    from garaphpy.kernels.cpu.common import _concatenate_chunks

    assert kernels.SERIAL_CONCATENATE_MAX == 1 << 14     # the totals bracket it
    rng = np.random.default_rng(total)
    chunks = 7
    counts = np.zeros(chunks + 1, np.int64)
    counts[1:] = rng.multinomial(total, np.full(chunks, 1 / chunks))
    chunk_base = np.concatenate([[0], np.cumsum(counts[1:] + 3)[:-1]]).astype(np.int64)
    buffer = rng.integers(0, 1 << 30, int(chunk_base[-1] + counts[-1] + 3)).astype(np.int64)
    expected = np.concatenate([buffer[b:b + c] for b, c in zip(chunk_base, counts[1:])])
    np.testing.assert_array_equal(_concatenate_chunks(buffer, chunk_base, counts),
                                  expected)


class ParentDegreeLevels(OwnLevels):
    """Declares final_once_set falsely without reading an edge value: a vertex's
    value depends on which parent reaches it (its out-degree), so the first
    found need not be the smallest."""

    def gather(src, src_out_degree):
        return src + src_out_degree


@pytest.mark.parametrize("push", [True, False])
def test_a_false_declaration_raises_with_the_push_too(monkeypatch, push):
    # 0 reaches 1 and 2 (value 2 each); vertex 3 gets 5 from 1 (out-degree 3), which
    # claims it first (one thread, the frontier in order), where 2 would give 3
    graph = garaphpy.Graph.from_arrays(np.array([0, 0, 1, 1, 1, 2]),
                                       np.array([1, 2, 3, 4, 5, 3]), num_vertices=6)
    seen = []
    with pytest.raises(ProgramError, match="declares final_once_set = True.*vertex 3"):
        api.execute(graph, ParentDegreeLevels(), mode="cpu", threads=1, sources=[0],
                    direction="notify-pull", turned_off=() if push else {"settling_push"},
                    on_iteration=lambda record: seen.append(record.decisions))
    assert all(("settling_push" in entry) == push for entry in seen)
    # without early exit the same program is right
    result = garaphpy.run(graph, ParentDegreeLevels(), mode="cpu", threads=1, sources=[0],
                          execution="async")
    assert result.values.tolist()[3] == 3


def test_the_push_rule():
    assert decisions.settling_push(early_exit=True, reads_weights=False)
    assert not decisions.settling_push(early_exit=False, reads_weights=False)
    assert not decisions.settling_push(early_exit=True, reads_weights=True)


# -- the settled vertices as a bitmap ------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 1000, 4096, 100_003])
def test_packed_flags_match_numpy(n):
    flags = np.random.default_rng(n).random(n) < 0.3
    bits = np.full((n + 63) // 64, np.uint64(0xFFFF), np.uint64)
    kernels.pack_flags(flags, bits)
    expected = np.zeros(bits.size * 8, np.uint8)
    packed = np.packbits(flags, bitorder="little")
    expected[:packed.size] = packed
    np.testing.assert_array_equal(bits.view(np.uint8), expected)



@pytest.mark.parametrize("first, end", [(0, 0), (0, 500), (37, 38), (100, 401), (499, 500)])
def test_unsettled_in_edges_match_numpy(first, end):
    rng = np.random.default_rng(first + end)
    in_offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 9, 500))]).astype(np.int64)
    settled = rng.random(500) < 0.4
    expected = int(np.diff(in_offsets)[first:end] @ ~settled[first:end])
    assert kernels.unsettled_in_edges(in_offsets, settled, first, end) == expected
