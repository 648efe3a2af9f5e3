"""What a run's set-up makes once and shares between a graph's runs: the user
ids of every vertex (``Store.original_id_array``), 0..|V|-1 (``vertex_range``,
the first frontier of a program active everywhere), and the check of an
integer program's initial values; none of it stale or changed by a run, for
ids that are the identity, start at 1, or come from a table, and for the
undirected twin of a directed graph."""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy import VertexProgram, api
from garaphpy.program import ProgramError
from garaphpy.programs.components import ConnectedComponents
from garaphpy.scheduler.cpu_state import vertex_attributes

from references import MinLabels, bfs_scipy, components_scipy, sssp_scipy

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
