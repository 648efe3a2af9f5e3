"""What a run's set-up makes once and shares between a graph's runs: the user
ids of every vertex (``Store.original_id_array``), 0..|V|-1 (``vertex_range``,
the first frontier of a program active everywhere), the packed in-edge flags
(``Store.in_edge_bits``), and the check of an integer program's initial
values; none of it stale or changed by a run, for ids that are the identity,
start at 1, or come from a table, and for the undirected twin of a directed
graph.  And the per-vertex buffers a graph's runs lend each other
(``Store.vertex_buffers``): no value of one run seen by another, a Result's
values never changed by a later run, two threads' runs never sharing one,
none lent to a run whose pages stream, nor held past ``release_memory``.
And the out-edges' values a run in buckets places (``Store.kept_out_edge_values``):
placed once, never written, counted by the host budget, kept only where it
has room for them beside every page, dropped by ``release_memory`` and by a
run whose pages stream.  Also what a set-up no longer makes: the aggregates
at the warm-up."""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy import VertexProgram, api, config
from garaphpy.program import ProgramError
from garaphpy.programs.components import ConnectedComponents
from garaphpy.scheduler.cpu_state import vertex_attributes

from references import (MinLabels, bfs_scipy, components_scipy, pagerank_power, run_engine,
                        sssp_scipy)

# DIMACS ids are 1-based: the store maps them with an offset, no table
DIMACS = "p sp 7 7\na 1 2 3\na 2 3 1\na 3 1 2\na 4 5 1\na 5 6 4\na 2 5 2\na 7 7 1\n"


def _graphs(tmp_path):
    """The same edges three ways: ids 1..7 (offset 1), 0..6 (offset 0), and
    sparse ids (a table)."""
    path = tmp_path / "g.gr"
    path.write_text(DIMACS)
    one_based = garaphpy.Graph.load(path, store=tmp_path / "one")
    src, dst, weights = one_based.to_scipy().tocoo().row, one_based.to_scipy().tocoo().col, \
        one_based.to_scipy().tocoo().data
    zero_based = garaphpy.Graph.from_arrays(src, dst, weights, num_vertices=7)
    sparse_ids = np.array([3, 10, 11, 400, 401, 9000, 10 ** 12])
    table = garaphpy.Graph.from_arrays(sparse_ids[src], sparse_ids[dst], weights)
    return {"offset-1": one_based, "offset-0": zero_based, "table": table}


def test_each_mapping_gives_the_user_ids_once_and_the_user_a_new_array(tmp_path):
    graphs = _graphs(tmp_path)
    kinds = {name: graph.store.manifest["id_mapping"] for name, graph in graphs.items()}
    assert kinds["offset-1"] == {"kind": "offset", "base": 1}
    assert kinds["offset-0"] == {"kind": "offset", "base": 0}
    assert kinds["table"]["kind"] == "table"
    for graph in graphs.values():
        ids = graph.original_id_array
        assert ids.dtype == np.int64 and ids.flags.c_contiguous
        np.testing.assert_array_equal(ids, graph.original_ids())
        assert graph.original_id_array is ids       # made once
        np.testing.assert_array_equal(graph.store.vertex_range, np.arange(7))
        mine = graph.original_ids()
        mine[:] = -1                                # the user's own copy
        np.testing.assert_array_equal(graph.original_id_array, graph.original_ids())
        assert np.all(graph.original_id_array >= 0)
    assert graphs["offset-0"].original_id_array is graphs["offset-0"].store.vertex_range
    np.testing.assert_array_equal(graphs["offset-1"].original_id_array, np.arange(1, 8))


@pytest.mark.parametrize("name", ["offset-1", "offset-0", "table"])
def test_repeated_runs_give_the_same_values_in_the_users_ids(tmp_path, name):
    graph = _graphs(tmp_path)[name]
    source = int(graph.original_ids()[1])
    expected = {"cc": components_scipy(graph), "bfs": bfs_scipy(graph, [1]),
                "sssp": sssp_scipy(graph, [1])}
    first_pagerank = None
    for _ in range(2):
        for program, reference in expected.items():
            sources = [source] if program != "cc" else None
            result = garaphpy.run(graph, program, sources=sources, mode="cpu", threads=2)
            np.testing.assert_array_equal(result.values, reference)
            np.testing.assert_array_equal(result.original_ids(), graph.original_ids())
        pagerank = garaphpy.run(graph, "pagerank", mode="cpu", threads=2).values
        if first_pagerank is None:
            first_pagerank = pagerank
        np.testing.assert_array_equal(pagerank, first_pagerank)
    # no run wrote into what the runs share
    np.testing.assert_array_equal(graph.store.vertex_range, np.arange(7))
    np.testing.assert_array_equal(graph.original_id_array, graph.original_ids())


def test_the_undirected_twin_takes_the_directed_graphs_ids(tmp_path):
    graph = _graphs(tmp_path)["table"]
    assert graph.directed
    labels = garaphpy.run(graph, "cc", mode="cpu").values    # runs on the twin
    twin = graph.as_undirected()
    assert twin.original_id_array is graph.original_id_array
    np.testing.assert_array_equal(twin.original_ids(), graph.original_ids())
    np.testing.assert_array_equal(labels, components_scipy(graph))
    # its own graph's store and ids: nothing of another graph's
    other = garaphpy.Graph.from_arrays(np.array([5, 6]), np.array([6, 7]))
    np.testing.assert_array_equal(garaphpy.run(other, "cc", mode="cpu").values, [5, 5, 5])
    np.testing.assert_array_equal(garaphpy.run(graph, "cc", mode="cpu").values, labels)


def test_release_memory_drops_the_shared_vertex_arrays(tmp_path):
    graph = _graphs(tmp_path)["offset-1"]
    garaphpy.run(graph, "pagerank", mode="cpu")
    ids = graph.original_id_array
    assert graph.release_memory() and not graph.release_memory()
    assert graph.original_id_array is not ids
    np.testing.assert_array_equal(graph.original_id_array, ids)


def test_a_built_in_programs_labels_start_at_the_vertex_ids(tmp_path):
    """What lets a run of the built-in CC skip the check of its initial labels."""
    for graph in _graphs(tmp_path).values():
        program = ConnectedComponents()
        compiled = api._compiled_program(program, parallel=False)
        values = np.empty(graph.num_vertices, compiled.value_dtype)
        compiled.kernels.init_values(vertex_attributes(graph, np.zeros(0, np.int64), None),
                                     graph.num_vertices, values)
        np.testing.assert_array_equal(values, graph.original_ids())


class _Huge(VertexProgram):
    """Fits for every source but the vertex with user id 5 (a table graph's
    sources differ from run to run)."""

    value_dtype = np.int64
    sum = "min"
    initially_active = "sources"
    needs_sources = True

    def init(is_source, vertex):
        if is_source:
            return 0
        return vertex * 1e300 if vertex == 5 else 1099511627776

    def gather(src):
        return src + 1

    def apply(value, accum):
        return min(value, accum)

    def activate(new, old):
        return new < old


def test_the_initial_values_are_checked_again_for_other_sources_and_each_failure():
    graph = garaphpy.Graph.from_arrays(np.array([5, 6, 7]), np.array([6, 7, 5]))
    for _ in range(2):
        with pytest.raises(ProgramError, match=r"init gives vertex 5 the value 5e\+300"):
            garaphpy.run(graph, _Huge, sources=[6], mode="cpu", threads=1)
    for _ in range(2):      # passed once, then kept; other sources are checked afresh
        assert garaphpy.run(graph, _Huge, sources=[5], mode="cpu", threads=1).values[0] == 0
    with pytest.raises(ProgramError, match=r"init gives vertex 5 the value 5e\+300"):
        garaphpy.run(graph, _Huge, sources=[7], mode="cpu", threads=1)


class _WeightedStart(MinLabels):
    """Min-label propagation from labels that read the weighted in-degree."""

    def init(vertex, weighted_in_degree):
        return vertex + int(weighted_in_degree)


def test_an_integer_init_may_read_the_weighted_in_degree():
    graph = garaphpy.Graph.from_arrays(np.array([0, 1, 2]), np.array([1, 2, 3]),
                                       np.array([1.5, 2.0, 3.0]))
    result = garaphpy.run(graph, _WeightedStart, mode="cpu", threads=1)
    np.testing.assert_array_equal(result.values, [0, 0, 0, 0])


@pytest.mark.parametrize("program", ["bfs", "pagerank"])
def test_a_warm_cpu_run_starts_no_thread(tmp_path, monkeypatch, program):
    # a thread started per run (a compile announcement's timer) waits for a core,
    # which the run's own OpenMP threads may still be spinning on
    import threading

    from garaphpy.kernels import cpu_program

    graph = _graphs(tmp_path)["offset-0"]
    options = {"sources": 0} if program == "bfs" else {"max_iterations": 5}
    # as in a process whose kernels come from numba's cache: nothing announced
    monkeypatch.setattr(cpu_program.CpuProgram, "_announce", lambda self, message: None)
    garaphpy.run(graph, program, mode="cpu", threads=2, **options)
    started = []
    original = threading.Thread.start

    def counting_start(thread):
        started.append(thread.name)
        original(thread)

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    garaphpy.run(graph, program, mode="cpu", threads=2, **options)
    assert started == []


def test_the_warm_up_makes_no_aggregates_over_the_vertices(tmp_path, monkeypatch):
    # the warm-ups only compile the aggregates' kernel: the first iteration makes them
    from garaphpy.options import RunOptions
    from garaphpy.programs import PageRank

    graph = garaphpy.Graph.load("rmat:8", store=tmp_path / "rmat", progress=False)
    run_ = api._validated(graph, PageRank(), RunOptions(mode="cpu", threads=2))
    plan, (compiled, arrays) = api._plan(run_, api.page_source(graph.store, "cpu"), None,
                                         frozenset())
    covered = []
    compute = compiled.kernels.compute_aggregates

    def counted(values, attrs, num_vertices, iteration, identities, part_starts):
        covered.append(int(part_starts[-1] - part_starts[0]))
        return compute(values, attrs, num_vertices, iteration, identities, part_starts)

    monkeypatch.setattr(compiled.kernels, "compute_aggregates", counted)
    engine = api.build_cpu_engine(plan, run_.program, compiled, arrays,
                                  graph.store.vertex_range)
    engine.warm_up(("pull", "notify-pull"))
    assert covered and not any(covered)
    # and the first iteration's are the program's over every vertex
    aggregates = engine.aggregates(0)
    assert covered[-1] == graph.num_vertices
    expected = np.full(graph.num_vertices, 1.0 / graph.num_vertices)
    np.testing.assert_allclose(aggregates[0],
                               expected[graph.store.out_degree == 0].sum())


# -- buffers lent from run to run ------------------------------------------------------------
@pytest.fixture(scope="module")
def rmat(tmp_path_factory):
    base = tmp_path_factory.mktemp("lent")
    return garaphpy.Graph.load("rmat:10", store=base / "rmat", progress=False,
                               generator_options={"weighted": True}, max_shard_edges=64,
                               max_page_bytes=2048)


def _reference(graph, program, source):
    if program == "bfs":
        return bfs_scipy(graph, [source])
    if program == "sssp":
        return sssp_scipy(graph, [source])
    if program == "cc":
        return components_scipy(graph)
    return None


def test_runs_in_turns_take_the_buffers_back_and_see_no_earlier_value(rmat, monkeypatch):
    graph = rmat
    pool = graph.store.vertex_buffers
    lent = []
    take = pool.take

    def counted(length, dtype):
        buffer = take(length, dtype)
        lent.append(buffer is not None)
        return buffer

    monkeypatch.setattr(pool, "take", counted)
    # PageRank's values as a first run makes them, on a store opened apart (no buffer lent)
    fresh = garaphpy.Graph(type(graph.store).open(graph.store.path))
    pagerank = {"tolerance": 1e-10, "max_iterations": 300}
    first_pagerank = garaphpy.run(fresh, "pagerank", mode="cpu", threads=2, **pagerank).values
    np.testing.assert_allclose(first_pagerank, pagerank_power(graph), rtol=1e-6)
    order = np.argsort(-graph.store.out_degree, kind="stable")
    store = graph.store
    shared = {name: getattr(store, name).copy() for name in (
        "in_offsets", "out_offsets", "out_targets", "in_degree", "out_degree",
        "vertex_range", "original_id_array")}
    kept = []
    # programs of other value types in turns, the sources changing: a value left
    # by an earlier run would show
    for turn in range(3):
        for program in ("bfs", "pagerank", "sssp", "cc"):
            source = int(order[turn])
            sources = [source] if program in ("bfs", "sssp") else None
            result = garaphpy.run(graph, program, sources=sources, mode="cpu", threads=2,
                                  **(pagerank if program == "pagerank" else {}))
            expected = {"bfs": bfs_scipy, "sssp": sssp_scipy}[program](graph, [source]) \
                if sources else components_scipy(graph) if program == "cc" else first_pagerank
            np.testing.assert_array_equal(result.values, expected)
            kept.append((result, result.values.copy()))
    assert sum(lent) > len(lent) // 2 and pool.held_bytes > 0
    # no later run changed an earlier Result's values (the user's own)
    for result, values in kept:
        np.testing.assert_array_equal(result.values, values)
    # nor what the runs share
    for name, array in shared.items():
        np.testing.assert_array_equal(getattr(store, name), array, err_msg=name)
    has_in_edges = np.diff(store.in_offsets) > 0
    bits = store.in_edge_bits
    unpacked = (bits[np.arange(store.num_vertices) // 64]
                >> (np.arange(store.num_vertices) % 64).astype(np.uint64)) & np.uint64(1)
    np.testing.assert_array_equal(unpacked.astype(bool), has_in_edges)


def test_the_store_packs_its_in_edge_flags_as_the_kernel_does(rmat):
    from garaphpy.kernels import cpu as kernels

    store = rmat.store
    flags = store.in_offsets[1:] != store.in_offsets[:-1]
    expected = np.zeros((store.num_vertices + 63) // 64, np.uint64)
    kernels.pack_flags(flags, expected)
    assert store.in_edge_bits.dtype == np.uint64
    np.testing.assert_array_equal(store.in_edge_bits, expected)
    assert store.in_edge_bits is store.in_edge_bits         # made once


def test_two_threads_running_one_graph_share_no_buffer(rmat):
    import threading

    graph = rmat
    order = np.argsort(-graph.store.out_degree, kind="stable")
    expected = {int(source): sssp_scipy(graph, [int(source)]) for source in order[:4]}
    failures = []

    def runs(sources):
        try:
            for _ in range(3):
                for source in sources:
                    values = garaphpy.run(graph, "sssp", sources=[source], mode="cpu",
                                          threads=1).values
                    np.testing.assert_array_equal(values, expected[source])
        except Exception as error:      # noqa: BLE001 - reported below
            failures.append(error)

    sources = list(expected)
    threads = [threading.Thread(target=runs, args=(sources[i::2],)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures


def test_the_pool_lends_each_buffer_once_and_holds_a_bounded_number_of_bytes():
    from garaphpy.storage.vertex_buffers import VertexBuffers

    pool = VertexBuffers(limit_bytes=3 * 80)
    a, b = np.zeros(10, np.int64), np.zeros(10, np.int64)
    pool.put([a, b, a])
    assert pool.held_bytes == 160
    first, second = pool.take(10, np.int64), pool.take(10, np.int64)
    assert {id(first), id(second)} == {id(a), id(b)}
    assert pool.take(10, np.int64) is None      # each lent once
    assert pool.take(10, np.float64) is None and pool.take(9, np.int64) is None
    # views, read-only arrays, what exceeds the limit: not held
    view, frozen = np.zeros(20, np.int64)[::2], np.zeros(10, np.int64)
    frozen.flags.writeable = False
    pool.put([view, np.zeros(20, np.int64)[:10], frozen, np.zeros(31, np.int64)])
    assert pool.held_bytes == 0
    # past the limit, the least recently given back go first
    c, d = np.zeros(10), np.zeros(10)
    pool.put([a, b])
    pool.put([c, d])
    assert pool.held_bytes == 240
    assert pool.take(10, np.int64) is b and pool.take(10, np.int64) is None
    assert pool.clear() and not pool.clear()


def test_a_streamed_run_neither_takes_nor_leaves_buffers(rmat, monkeypatch):
    from garaphpy.storage.host_budget import run_fixed_bytes

    graph = rmat
    garaphpy.run(graph, "sssp", sources=[0], mode="cpu", threads=2)
    assert graph.store.vertex_buffers.held_bytes > 0
    taken = []
    take = graph.store.vertex_buffers.take
    monkeypatch.setattr(graph.store.vertex_buffers, "take",
                        lambda *a: taken.append(a) or take(*a))
    # the vertex arrays and two page buffers: no page cached
    budget = run_fixed_bytes(graph.store) + 2 * max(p.nbytes for p in graph.store.pages) \
        + 2 * config.BLOCK_ALIGNMENT
    result = garaphpy.run(graph, "sssp", sources=[0], mode="cpu", threads=2,
                          host_memory=budget, read_ratio=2.0)
    assert "from storage" in result.plan.pages
    assert taken == [] and graph.store.vertex_buffers.held_bytes == 0
    np.testing.assert_array_equal(result.values, sssp_scipy(graph, [0]))


def test_the_default_host_budget_counts_the_held_buffers_as_the_runs(rmat, monkeypatch):
    from garaphpy.storage.host_budget import host_cache_budget, plan_run_pages

    store = rmat.store
    monkeypatch.setattr(config, "available_host_memory", lambda: 10 ** 9)
    store.vertex_buffers.clear()
    bare = plan_run_pages(store, 1)[0].budget_bytes
    assert bare == host_cache_budget()
    store.vertex_buffers.put([np.zeros(store.num_vertices)])
    assert plan_run_pages(store, 1)[0].budget_bytes == bare + 8 * store.num_vertices
    assert plan_run_pages(store, 1, 10 ** 8)[0].budget_bytes == 10 ** 8   # the user's, as given
    store.vertex_buffers.clear()


def test_release_memory_drops_the_lent_buffers(rmat):
    garaphpy.run(rmat, "bfs", sources=[0], mode="cpu", threads=2)
    store = rmat.store
    assert store.vertex_buffers.held_bytes > 0 and "in_edge_bits" in store.__dict__
    assert rmat.release_memory()
    assert store.vertex_buffers.held_bytes == 0 and "in_edge_bits" not in store.__dict__


# -- out-edge values kept from run to run ---------------------------------------------------
@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """A mesh (in-degree skew 1): SSSP on the CPU takes its buckets pushed."""
    return garaphpy.Graph.load("grid:40x30", store=tmp_path_factory.mktemp("kept") / "grid",
                               progress=False, max_shard_edges=64, max_page_bytes=2048)


@pytest.fixture
def placings(monkeypatch):
    """The calls that place the out-edges' values, counted."""
    from garaphpy.kernels import gpu_subgraph

    calls = []
    place = gpu_subgraph.out_edge_values

    def counted(*args, **kwargs):
        calls.append(args[0].size)
        return place(*args, **kwargs)

    monkeypatch.setattr(gpu_subgraph, "out_edge_values", counted)
    return calls


def _out_edge_values_by_scipy(graph) -> np.ndarray:
    """Each out-edge's value in the out-edge CSR's order, looked up in SciPy's
    matrix of the graph (a grid has no parallel edges)."""
    store = graph.store
    rows = np.repeat(np.arange(store.num_vertices), np.diff(store.out_offsets))
    return np.asarray(graph.to_scipy().tocsr()[rows, store.out_targets]).ravel()


def test_a_second_run_in_buckets_reuses_the_placed_out_edge_values(grid, placings):
    store = grid.store
    grid.release_memory()
    order = np.argsort(-store.out_degree, kind="stable")
    first = garaphpy.run(grid, "sssp", sources=[0], mode="cpu", threads=2)
    assert first.plan.cpu.priority_push and first.plan.pages == "in memory"
    assert len(placings) == 1
    kept = store.kept_out_edge_values
    assert kept is not None and kept.dtype == store.weight_dtype
    np.testing.assert_array_equal(kept, _out_edge_values_by_scipy(grid))
    image = kept.tobytes()
    # later runs from other sources, with and without the rounds: none places again
    for source, turned_off in ((int(order[0]), ()), (int(order[7]), ("push_rounds",)), (0, ())):
        result = run_engine(grid, "sssp", [source], mode="cpu", threads=2,
                            turned_off=turned_off)
        assert result.plan.cpu.priority_push
        np.testing.assert_array_equal(result.values, sssp_scipy(grid, [source]))
        assert store.kept_out_edge_values is kept
    assert len(placings) == 1
    assert kept.tobytes() == image       # no run writes them
    np.testing.assert_array_equal(first.values, sssp_scipy(grid, [0]))


def test_the_budget_counts_the_kept_values_and_release_memory_drops_them(grid, placings,
                                                                         monkeypatch):
    from garaphpy.storage.host_budget import host_cache_budget, plan_run_pages, run_fixed_bytes

    store = grid.store
    grid.release_memory()
    monkeypatch.setattr(config, "available_host_memory", lambda: 10 ** 9)
    bare_fixed = run_fixed_bytes(store)
    garaphpy.run(grid, "sssp", sources=[0], mode="cpu", threads=2)
    kept = store.kept_out_edge_values
    assert kept is not None and kept.nbytes == 4 * store.num_edges
    assert run_fixed_bytes(store) == bare_fixed + kept.nbytes
    plan = plan_run_pages(store, 1)[0]
    assert plan.fixed_bytes == bare_fixed + kept.nbytes and plan.kept_bytes == kept.nbytes
    # already out of the memory available: the default budget adds them back
    assert plan.budget_bytes == host_cache_budget() + store.vertex_buffers.held_bytes \
        + kept.nbytes
    assert plan_run_pages(store, 1, 10 ** 8)[0].budget_bytes == 10 ** 8
    assert grid.release_memory()
    assert store.kept_out_edge_values is None and run_fixed_bytes(store) == bare_fixed
    garaphpy.run(grid, "sssp", sources=[0], mode="cpu", threads=2)
    assert len(placings) == 2       # placed again after the release


def test_values_are_kept_only_where_the_budget_has_room_and_yield_to_the_pages(grid,
                                                                               placings):
    from garaphpy.storage.host_budget import run_fixed_bytes

    store = grid.store
    grid.release_memory()
    values_bytes = 4 * store.num_edges
    pages = sum(info.nbytes for info in store.pages)
    # every page fits, the values do not: placed every run, never kept
    tight = run_fixed_bytes(store) + pages + values_bytes - 1
    for _ in range(2):
        result = garaphpy.run(grid, "sssp", sources=[0], mode="cpu", threads=2,
                              host_memory=tight)
        assert result.plan.pages == "in memory" and result.plan.cpu.priority_push
        assert store.kept_out_edge_values is None
    assert len(placings) == 2
    # room for them too: kept, and the next run, counting them, still holds every page
    roomy = tight + 1
    for _ in range(2):
        result = garaphpy.run(grid, "sssp", sources=[0], mode="cpu", threads=2,
                              host_memory=roomy)
        assert result.plan.pages == "in memory"
        np.testing.assert_array_equal(result.values, sssp_scipy(grid, [0]))
    assert store.kept_out_edge_values is not None and len(placings) == 3
    # a budget that holds every page only without them: they yield, the pages stay
    result = garaphpy.run(grid, "sssp", sources=[0], mode="cpu", threads=2,
                          host_memory=tight)
    assert result.plan.pages == "in memory" and store.kept_out_edge_values is None
    np.testing.assert_array_equal(result.values, sssp_scipy(grid, [0]))
    assert len(placings) == 4


def test_a_streamed_run_drops_the_kept_values_and_the_switch_keeps_none(grid, placings,
                                                                        monkeypatch):
    from garaphpy.storage.host_budget import run_fixed_bytes

    store = grid.store
    garaphpy.run(grid, "sssp", sources=[0], mode="cpu", threads=2)
    assert store.kept_out_edge_values is not None
    budget = run_fixed_bytes(store) - store.kept_out_edge_values.nbytes \
        + 2 * max(p.nbytes for p in store.pages) + 2 * config.BLOCK_ALIGNMENT
    result = garaphpy.run(grid, "sssp", sources=[0], mode="cpu", threads=2,
                          host_memory=budget, read_ratio=2.0)
    assert "from storage" in result.plan.pages
    assert store.kept_out_edge_values is None
    np.testing.assert_array_equal(result.values, sssp_scipy(grid, [0]))
    monkeypatch.setattr(config, "KEEP_CSC_BETWEEN_RUNS", False)
    for _ in range(2):
        garaphpy.run(grid, "sssp", sources=[0], mode="cpu", threads=2)
        assert store.kept_out_edge_values is None
