"""Interop with NetworkX, pandas and SciPy: graphs in, results and matrices out.

``Graph.from_networkx`` / ``Graph.from_pandas`` / ``Graph.to_scipy`` and
``Result.to_dict`` / ``Result.to_pandas``, checked against NetworkX and SciPy
and by round trips; pandas and networkx stay optional (not imported with
garaphpy).
"""

from __future__ import annotations

import subprocess
import sys
import types

import networkx as nx
import numpy as np
import pandas as pd
import pytest
import scipy.sparse
import scipy.sparse.csgraph

import garaphpy
from garaphpy import Graph, VertexProgram
from garaphpy.errors import GraphInputError
from garaphpy.programs import BUILTIN_PROGRAMS
from garaphpy.scheduler.records import Result


def random_digraph(n: int, p: float, seed: int) -> nx.DiGraph:
    return nx.gnp_random_graph(n, p, seed=seed, directed=True)


# -- NetworkX -------------------------------------------------------------------
def test_from_networkx_keeps_the_users_ids_and_pagerank_matches_networkx():
    base = random_digraph(80, 0.06, seed=3)
    base.remove_nodes_from(list(nx.isolates(base)))
    graph_nx = nx.relabel_nodes(base, {v: 7 * v + 1000 for v in base})   # ids not 0..n-1
    graph = Graph.from_networkx(graph_nx)
    assert graph.directed and not graph.weighted
    assert graph.num_vertices == graph_nx.number_of_nodes()
    assert graph.num_edges == graph_nx.number_of_edges()
    result = garaphpy.run(graph, "pagerank", mode="cpu", tolerance=1e-12)
    ranks = result.to_dict()
    expected = nx.pagerank(graph_nx, tol=1e-13, max_iter=1000)
    assert set(ranks) == set(graph_nx.nodes)
    assert all(type(k) is int and type(v) is float for k, v in ranks.items())
    assert max(abs(ranks[v] - expected[v]) for v in expected) < 1e-9

    nx.set_node_attributes(graph_nx, ranks, result.value_name)
    assert result.value_name == "pagerank"
    assert graph_nx.nodes[1000]["pagerank"] == ranks[1000]

    frame = result.to_pandas()
    assert list(frame.columns) == ["vertex", "pagerank"]
    assert dict(zip(frame["vertex"].tolist(), frame["pagerank"].tolist())) == ranks


@pytest.mark.parametrize("multi", [False, True])
def test_from_networkx_undirected_as_directed_keeps_both_directions(multi):
    graph_nx = (nx.MultiGraph if multi else nx.Graph)([(2, 1), (1, 0), (3, 3)])
    nx.set_edge_attributes(graph_nx, 1.5, "weight")
    graph = Graph.from_networkx(graph_nx, directed=True)
    assert graph.directed
    assert graph.num_edges == 2 * graph_nx.number_of_edges() - 1     # the self-loop once
    for source in (0, 2):
        depths = garaphpy.run(graph, "bfs", sources=[source], mode="cpu").to_dict()
        expected = nx.single_source_shortest_path_length(graph_nx, source)
        assert {v: d for v, d in depths.items() if d >= 0} == expected, source
        distances = garaphpy.run(graph, "sssp", sources=[source], mode="cpu").to_dict()
        assert {v: d for v, d in distances.items() if d < np.inf} == \
            nx.single_source_dijkstra_path_length(graph_nx, source)


def test_from_networkx_undirected_weighted_sssp_matches_dijkstra():
    graph_nx = nx.gnm_random_graph(50, 120, seed=11)
    rng = np.random.default_rng(11)
    for u, v in graph_nx.edges:
        graph_nx.edges[u, v]["cost"] = int(rng.integers(1, 50))
    graph_nx.add_node(50)                                  # isolated, ids 0..n-1
    graph = Graph.from_networkx(graph_nx, weight="cost")
    assert not graph.directed and graph.weighted
    assert graph.num_vertices == 51 and graph.num_edges == 2 * graph_nx.number_of_edges()
    result = garaphpy.run(graph, "sssp", sources=[4], mode="cpu")
    expected = nx.single_source_dijkstra_path_length(graph_nx, 4, weight="cost")
    distances = result.to_dict()
    for vertex in graph_nx:
        assert distances[vertex] == expected.get(vertex, np.inf)
    frame = result.to_pandas()
    assert list(frame.columns) == ["vertex", "distance"]
    assert frame.shape == (51, 2)


def test_from_networkx_weights_and_ids_it_cannot_keep_are_named():
    labelled = nx.DiGraph([("a", "b")])                  # labels: mapped, not refused
    assert Graph.from_networkx(labelled).user_ids().tolist() == ["a", "b"]
    with pytest.raises(GraphInputError, match="node -1 is out of range"):
        Graph.from_networkx(nx.DiGraph([(-1, 0)]))
    partial = nx.DiGraph()
    partial.add_edge(0, 1, weight=2.0)
    partial.add_edge(1, 2)
    with pytest.raises(GraphInputError, match=r"edge \(1, 2\) has no 'weight' attribute"):
        Graph.from_networkx(partial)
    assert not Graph.from_networkx(partial, weight=None).weighted
    isolated = nx.DiGraph([(10, 20)])
    isolated.add_node(30)
    with pytest.raises(GraphInputError, match="node 30 has no edges"):
        Graph.from_networkx(isolated)
    for bad in (-1, 2**63):
        with pytest.raises(GraphInputError, match=f"node {bad} is out of range"):
            Graph.from_networkx(nx.DiGraph([(bad, 2)]))


# -- pandas ---------------------------------------------------------------------
def test_from_pandas_bfs_matches_scipy_and_columns_are_named():
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"from": rng.integers(0, 30, 90), "to": rng.integers(0, 30, 90),
                          "w": rng.random(90)})
    graph = Graph.from_pandas(frame, source="from", destination="to", num_vertices=30)
    assert graph.num_vertices == 30 and not graph.weighted
    result = garaphpy.run(graph, "bfs", sources=[0], mode="cpu")
    matrix = scipy.sparse.csr_array((np.ones(90), (frame["from"], frame["to"])), shape=(30, 30))
    hops = scipy.sparse.csgraph.shortest_path(matrix, unweighted=True, indices=0)
    expected = np.where(np.isinf(hops), -1, hops).astype(np.int64)
    depths = result.to_pandas()
    assert list(depths.columns) == ["vertex", "depth"]
    assert np.array_equal(depths["depth"].to_numpy(), expected[depths["vertex"].to_numpy()])

    weighted = Graph.from_pandas(frame, source="from", destination="to", weight="w")
    assert weighted.weighted
    with pytest.raises(GraphInputError, match="destination='dst': no such column.*from, to, w"):
        Graph.from_pandas(frame, source="from", destination="dst")


# -- SciPy ----------------------------------------------------------------------
def test_to_scipy_round_trips_from_scipy():
    rng = np.random.default_rng(9)
    matrix = scipy.sparse.random_array((25, 25), density=0.15, rng=rng, format="csr")
    matrix.data = rng.integers(1, 100, matrix.nnz).astype(np.int64)
    matrix.setdiag(0)
    matrix.eliminate_zeros()
    graph = Graph.from_scipy(matrix)
    back = graph.to_scipy()
    assert back.format == "csr" and back.shape == (25, 25)
    assert np.array_equal(back.toarray(), matrix.toarray())
    again = Graph.from_scipy(back)
    assert np.array_equal(again.to_scipy().toarray(), matrix.toarray())


def test_to_scipy_is_in_internal_ids_with_original_ids_beside():
    src, dst = np.array([10, 20, 20, 40]), np.array([20, 40, 10, 10])
    graph = Graph.from_arrays(src, dst)
    pattern = graph.to_scipy()
    assert pattern.dtype == np.bool_ and pattern.nnz == 4
    ids = graph.original_ids()
    edges = {(int(ids[i]), int(ids[j])) for i, j in zip(*pattern.nonzero())}
    assert edges == set(zip(src.tolist(), dst.tolist()))
    assert not Graph.from_scipy(pattern).weighted


# -- results --------------------------------------------------------------------
def test_every_builtin_program_names_its_value_and_user_programs_say_value():
    names = {name: cls.value_name for name, cls in BUILTIN_PROGRAMS.items()}
    assert names == {"pagerank": "pagerank", "delta_pagerank": "pagerank", "sssp": "distance",
                     "bfs": "depth", "cc": "component", "sswp": "width", "nn": "activation",
                     "hs": "temperature", "cs": "voltage"}

    class Copy(VertexProgram):
        def init():
            return 0.0

        def gather(src):
            return src

        def apply(value, accum):
            return accum

        def activate(new, old):
            return new != old

    assert Copy.value_name == "value"


def test_to_pandas_without_pandas_says_what_to_install(monkeypatch):
    graph = Graph.from_arrays(np.array([5, 6]), np.array([6, 5]))
    program = types.SimpleNamespace(value_name="value")     # what a user program names it
    result = Result(program=program, graph=graph, values=np.array([0.25, 0.75]),
                    sources=np.zeros(0, np.int64), mode="cpu", execution="sync",
                    converged=True, stop_reason="no active vertex", num_iterations=1)
    assert result.to_dict() == {5: 0.25, 6: 0.75}
    assert list(result.to_pandas().columns) == ["vertex", "value"]
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ModuleNotFoundError, match=r"garaphpy\[pandas\]"):
        result.to_pandas()


def test_pandas_and_networkx_are_not_imported_with_garaphpy():
    code = ("import sys, garaphpy; garaphpy.Graph; garaphpy.run; import garaphpy.console; "
            "print(sorted(m for m in ('pandas', 'networkx') if m in sys.modules))")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"


# -- results people can use --------------------------------------------------------
def _weighted_digraph(seed=5, n=60, m=240):
    rng = np.random.default_rng(seed)
    graph_nx = nx.gnm_random_graph(n, m, seed=seed, directed=True)
    for u, v in graph_nx.edges:
        graph_nx.edges[u, v]["weight"] = float(rng.uniform(0.5, 3.0))   # unique paths
    return nx.relabel_nodes(graph_nx, {v: 3 * v + 11 for v in graph_nx})


def test_sssp_predecessors_and_paths_match_scipy():
    graph_nx = _weighted_digraph()
    graph = Graph.from_networkx(graph_nx)
    source = 11
    result = garaphpy.run(graph, "sssp", sources=[source], mode="cpu")
    matrix = graph.to_scipy()
    internal = int(graph.internal_ids([source])[0])
    _, expected = scipy.sparse.csgraph.dijkstra(matrix, indices=internal,
                                                return_predecessors=True)
    ids = graph.original_ids()
    want = np.where(expected >= 0, ids[np.maximum(expected, 0)], -1)
    np.testing.assert_array_equal(result.predecessors(), want)
    lengths, paths = nx.single_source_dijkstra(graph_nx, source)
    for vertex in graph_nx.nodes:
        assert result.path_to(vertex) == paths.get(vertex, []), vertex
        assert result[vertex] == lengths.get(vertex, np.inf)


def test_bfs_parents_are_one_level_up_with_the_least_id():
    graph_nx = nx.gnm_random_graph(80, 200, seed=2, directed=True)
    graph = Graph.from_networkx(graph_nx)
    result = garaphpy.run(graph, "bfs", sources=[0], mode="cpu")
    depth = nx.single_source_shortest_path_length(graph_nx, 0)
    parents = dict(zip(result.original_ids().tolist(), result.parents().tolist()))
    for v in graph_nx.nodes:
        if v == 0 or v not in depth:
            assert parents[v] == -1
            continue
        candidates = [u for u in graph_nx.predecessors(v) if depth.get(u) == depth[v] - 1]
        assert parents[v] == min(candidates), v
        assert len(result.path_to(v)) == depth[v] + 1
    with pytest.raises(TypeError, match="PageRank has no paths"):
        garaphpy.run(graph, "pagerank", mode="cpu").predecessors()


def test_zero_weight_ties_give_a_tree():
    # 0 -> 1 (1), 1 <-> 2 (0), 0 -> 2 (1): 1 and 2 tie both ways at distance 1
    graph = Graph.from_arrays([0, 1, 2, 0], [1, 2, 1, 2], [1.0, 0.0, 0.0, 1.0],
                              num_vertices=3, weight_dtype="float64")
    result = garaphpy.run(graph, "sssp", sources=[0], mode="cpu")
    assert result.predecessors().tolist() == [-1, 0, 0]
    assert result.path_to(2) == [0, 2]


def test_result_indexing_series_and_networkx():
    graph_nx = _weighted_digraph(seed=8, n=30, m=90)
    graph = Graph.from_networkx(graph_nx)
    result = garaphpy.run(graph, "pagerank", mode="cpu")
    expected = result.to_dict()
    assert all(result[v] == expected[v] for v in graph_nx.nodes)
    with pytest.raises(KeyError):
        result[12345]
    series = result.to_series()
    assert series.name == "pagerank" and series.index.name == "vertex"
    assert series.to_dict() == expected
    annotated = result.to_networkx(graph_nx)
    assert annotated is not graph_nx and "pagerank" not in graph_nx.nodes[11]
    assert nx.get_node_attributes(annotated, "pagerank") == expected
    same = result.to_networkx(graph_nx, copy=False)
    assert same is graph_nx and graph_nx.nodes[11]["pagerank"] == expected[11]
    built = result.to_networkx()
    assert set(built.edges) == set(graph_nx.edges) and built.is_directed()
    assert nx.get_node_attributes(built, "pagerank") == expected


# -- string vertex ids, pandas column names ------------------------------------------
def test_string_ids_through_networkx_come_back_in_every_output():
    graph_nx = nx.Graph()
    graph_nx.add_weighted_edges_from([("paris", "lyon", 4.6), ("lyon", "nice", 4.5),
                                      ("paris", "lille", 2.2), ("brest", "paris", 5.9)])
    graph_nx.add_node("ajaccio")                       # isolated: kept
    graph = Graph.from_networkx(graph_nx)
    assert graph.num_vertices == 6 and set(graph.user_ids().tolist()) == set(graph_nx.nodes)
    paths = garaphpy.run(graph, "sssp", sources=["paris"], mode="cpu")
    expected = nx.single_source_dijkstra_path_length(graph_nx, "paris")
    assert {v: d for v, d in paths.to_dict().items() if d < np.inf} == expected
    assert paths["nice"] == expected["nice"] and paths["ajaccio"] == np.inf
    assert paths.path_to("nice") == nx.dijkstra_path(graph_nx, "paris", "nice")
    assert paths.predecessors().tolist().count(None) == 2   # the source and ajaccio
    assert paths.to_pandas()["vertex"].tolist() == graph.user_ids().tolist()
    assert paths.program.verify(graph, paths).ok
    components = garaphpy.run(graph, "cc", mode="cpu").to_dict()
    assert components["ajaccio"] == "ajaccio"
    assert len({components[v] for v in ("paris", "lyon", "nice", "lille", "brest")}) == 1
    assert components["paris"] in graph_nx.nodes
    with pytest.raises(garaphpy.ConfigError, match="'rome' is not in the graph"):
        garaphpy.run(graph, "sssp", sources=["rome"], mode="cpu")


def test_from_pandas_takes_networkx_names_and_string_ids():
    graph_nx = nx.DiGraph()
    graph_nx.add_weighted_edges_from([("a", "b", 1.0), ("b", "c", 2.0), ("a", "c", 5.0)])
    edges = nx.to_pandas_edgelist(graph_nx)                  # source, target, weight
    graph = Graph.from_pandas(edges, weight="weight")
    result = garaphpy.run(graph, "sssp", sources=["a"], mode="cpu")
    assert result.to_dict() == nx.single_source_dijkstra_path_length(graph_nx, "a")
    same = Graph.from_pandas(edges, target="target", weight="weight")
    assert garaphpy.run(same, "sssp", sources=["a"], mode="cpu").to_dict() == result.to_dict()


def test_from_pandas_errors_name_the_users_columns():
    frame = pd.DataFrame({"from": [0, -1], "to": [1, 2], "km": [1.0, np.nan]})
    with pytest.raises(GraphInputError, match="column 'from' contains a negative id"):
        Graph.from_pandas(frame, source="from", destination="to")
    frame["from"] = [0, 1]
    with pytest.raises(GraphInputError, match="column 'km' contains a non-finite"):
        Graph.from_pandas(frame, source="from", destination="to", weight="km")
    with pytest.raises(GraphInputError, match=r"destination='target': no such column"):
        Graph.from_pandas(frame, source="from", target="target")
