"""The NetworkX backend (garaphpy.nx_backend): networkx's own answers, through the
backend object and through ``nx.pagerank(G, backend="garaphpy")``.

As networkx's backend tests do, each function is compared with networkx's
implementation on the same graph: small graphs with string, tuple and
integer nodes, isolated nodes, self-loops and parallel edges, and the SNAP
graphs of the shared data (ca-HepPh, soc-Slashdot0811): PageRank within
networkx's tolerance, distances and components exactly.  Dispatch is tested
twice: with the backend registered in networkx's registry in this process
(as networkx's conftest registers its ``nx_loopback``), and in a fresh
interpreter that finds the entry points of setup.cfg through package
metadata, as an installed garaphpy is found.
"""

from __future__ import annotations

import configparser
import math
import os
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

nx = pytest.importorskip("networkx")
pytest.importorskip("scipy")     # networkx's pagerank is its scipy one

from garaphpy.nx_backend import BackendInterface as backend  # noqa: E402
from garaphpy import nx_backend  # noqa: E402
from garaphpy.nx_backend import GaraphpyGraph  # noqa: E402

from helpers import SHARED_DATA  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[1]


def small_graphs():
    """Graphs whose nodes are not 0..n-1 ints, with what each function must cope with."""
    directed = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "a"),
                           ("d", "d")])
    directed.add_node("lonely")
    undirected = nx.Graph([((0, 1), (2, 3)), ((2, 3), "x"), (7, 7), (7, 8), (9, "y")])
    undirected.add_node(-5)
    multi = nx.MultiDiGraph([(3, 1), (3, 1), (1, 2), (2, 3), (2, 0)])
    return {"directed": directed, "undirected": undirected, "multi": multi}


def weighted_graph(directed: bool):
    graph = (nx.DiGraph if directed else nx.Graph)()
    graph.add_weighted_edges_from([("s", "a", 1.5), ("a", "b", 0.25), ("s", "b", 2.0),
                                   ("b", "c", 3.0), ("c", "s", 0.5), ("d", "e", 1.0)])
    graph.add_edge("a", "c")                          # no weight: networkx's default 1
    graph.add_node("alone")
    return graph


@pytest.mark.parametrize("name", ["directed", "undirected", "multi"])
def test_pagerank_matches_networkx_on_small_graphs(name):
    graph = small_graphs()[name]
    expected = nx.pagerank(graph, alpha=0.8, tol=1e-12, max_iter=500)
    got = backend.pagerank(graph, alpha=0.8, tol=1e-12, max_iter=500, mode="cpu")
    assert list(got) == list(expected)               # keyed by the user's nodes, G's order
    assert all(type(value) is float for value in got.values())
    assert got == pytest.approx(expected, abs=1e-10)


def test_pagerank_failures_are_networkxs():
    graph = small_graphs()["directed"]
    with pytest.raises(nx.PowerIterationFailedConvergence):
        backend.pagerank(graph, max_iter=2, tol=1e-12, mode="cpu")
    for hopeless in ({"max_iter": 0}, {"tol": 0}):       # as networkx: never converged
        with pytest.raises(nx.PowerIterationFailedConvergence):
            nx.pagerank(graph, **hopeless)
        with pytest.raises(nx.PowerIterationFailedConvergence):
            backend.pagerank(graph, **hopeless)
    assert backend.pagerank(nx.DiGraph()) == nx.pagerank(nx.DiGraph()) == {}
    assert backend.pagerank(nx.empty_graph(3)) == pytest.approx(nx.pagerank(nx.empty_graph(3)))
    with pytest.raises(NotImplementedError, match="personalization"):
        backend.pagerank(graph, personalization={"a": 1})
    with pytest.raises(NotImplementedError, match="weighted pagerank"):
        backend.pagerank(weighted_graph(True))
    # weights that are all 1 (or ignored) are plain PageRank
    unit = nx.DiGraph(graph)
    nx.set_edge_attributes(unit, 1, "weight")
    assert backend.pagerank(unit, mode="cpu", tol=1e-12) == pytest.approx(
        nx.pagerank(graph, tol=1e-12), abs=1e-10)
    assert backend.pagerank(weighted_graph(True), weight=None, mode="cpu", tol=1e-12) == \
        pytest.approx(nx.pagerank(weighted_graph(True), weight=None, tol=1e-12), abs=1e-10)


def test_can_run_says_what_garaphpy_cannot_do():
    graph = weighted_graph(True)
    assert backend.can_run("pagerank", (graph,), {"weight": None}) is True
    assert "weighted pagerank" in backend.can_run("pagerank", (graph,), {})
    assert "nstart" in backend.can_run("pagerank", (graph,), {"weight": None, "nstart": {}})
    assert "weight function" in backend.can_run(
        "single_source_dijkstra_path_length", (graph, "s"), {"weight": lambda u, v, d: 1})
    negative = nx.DiGraph([(0, 1, {"weight": -1.0})])
    assert "negative" in backend.can_run("single_source_dijkstra_path_length", (negative, 0),
                                         {})
    assert backend.can_run("connected_components", (graph,), {}) is True
    assert backend.can_run("betweenness_centrality", (graph,), {}) is False
    # automatic dispatch leaves small graphs to networkx; backend="garaphpy" ignores this
    assert "below" in backend.should_run("pagerank", (graph,), {})
    assert backend.should_run("pagerank", (backend.convert_from_nx(graph),), {}) is True
    large = nx.gnm_random_graph(1000, nx_backend.AUTOMATIC_MIN_EDGES, seed=1)
    assert backend.should_run("connected_components", (), {"G": large}) is True


@pytest.mark.parametrize("name", ["directed", "undirected", "multi"])
def test_unweighted_traversals_match_networkx(name):
    graph = small_graphs()[name]
    converted = backend.convert_from_nx(graph)        # one store for every source
    for source in graph:
        expected = nx.single_source_shortest_path_length(graph, source)
        got = backend.single_source_shortest_path_length(converted, source, mode="cpu")
        assert got == expected and all(type(d) is int for d in got.values())
        assert list(got.values()) == sorted(got.values())     # nearest first
        assert backend.single_source_shortest_path_length(converted, source, cutoff=1) == \
            nx.single_source_shortest_path_length(graph, source, cutoff=1)
        assert backend.descendants(converted, source) == nx.descendants(graph, source)
    for function in (nx.single_source_shortest_path_length, nx.descendants):
        with pytest.raises(Exception) as expected:
            function(graph, "missing")
        with pytest.raises(type(expected.value), match=str(expected.value)):
            getattr(backend, function.__name__)(converted, "missing")


@pytest.mark.parametrize("directed", [True, False], ids=["directed", "undirected"])
def test_dijkstra_lengths_match_networkx(directed):
    graph = weighted_graph(directed)
    converted = backend.convert_from_nx(graph, edge_attrs={"weight": 1})
    for source in graph:
        expected = nx.single_source_dijkstra_path_length(graph, source)
        got = backend.single_source_dijkstra_path_length(converted, source, mode="cpu")
        assert got == expected
        assert backend.single_source_dijkstra_path_length(converted, source, cutoff=2.0) == \
            nx.single_source_dijkstra_path_length(graph, source, cutoff=2.0)
    with pytest.raises(nx.NodeNotFound, match="Node missing not found in graph"):
        backend.single_source_dijkstra_path_length(converted, "missing")
    integers = nx.DiGraph([(0, 1, {"cost": 2}), (1, 2, {"cost": 3}), (0, 2, {"cost": 9})])
    got = backend.single_source_dijkstra_path_length(integers, 0, weight="cost")
    assert got == {0: 0, 1: 2, 2: 5} == nx.single_source_dijkstra_path_length(
        integers, 0, weight="cost")
    assert all(type(d) is int for d in got.values())


def test_components_match_networkx_in_its_order():
    graph = small_graphs()["undirected"]
    assert list(backend.connected_components(graph)) == list(nx.connected_components(graph))
    assert backend.number_connected_components(graph) == \
        nx.number_connected_components(graph)
    assert backend.is_connected(graph) is False
    assert backend.is_connected(nx.path_graph(["p", "q", "r"])) is True
    converted = backend.convert_from_nx(graph)
    for node in graph:
        assert backend.node_connected_component(converted, node) == \
            nx.node_connected_component(graph, node)
    with pytest.raises(KeyError):
        backend.node_connected_component(converted, "missing")
    directed = small_graphs()["directed"]
    assert list(backend.weakly_connected_components(directed)) == \
        list(nx.weakly_connected_components(directed))
    assert backend.number_weakly_connected_components(directed) == 2
    with pytest.raises(nx.NetworkXNotImplemented):
        list(backend.connected_components(directed))
    with pytest.raises(nx.NetworkXNotImplemented):
        backend.number_weakly_connected_components(graph)
    with pytest.raises(nx.NetworkXPointlessConcept):
        backend.is_connected(nx.Graph())


def test_conversion_round_trips_and_is_reused():
    graph = weighted_graph(False)
    converted = backend.convert_from_nx(graph, edge_attrs={"weight": 1})
    assert isinstance(converted, GaraphpyGraph) and converted.__networkx_backend__ == "garaphpy"
    back = backend.convert_to_nx(converted)
    assert type(back) is nx.Graph and list(back) == list(graph)
    assert {frozenset((u, v)): w for u, v, w in back.edges(data="weight")} == \
        {frozenset((u, v)): w for u, v, w in graph.edges(data="weight", default=1)}
    # one conversion, several functions
    assert backend.single_source_dijkstra_path_length(converted, "s") == \
        nx.single_source_dijkstra_path_length(graph, "s")
    assert list(backend.connected_components(converted)) == list(nx.connected_components(graph))


# ---- dispatch through networkx ----------------------------------------------------
def setup_cfg_entry_points() -> dict:
    """The ``networkx.*`` entry point groups setup.cfg declares."""
    config = configparser.ConfigParser()
    config.read(REPOSITORY / "setup.cfg")
    section = config["options.entry_points"]
    groups = {}
    for group in ("networkx.backends", "networkx.backend_info"):
        lines = [line for line in section[group].strip().splitlines() if line.strip()]
        groups[group] = dict(line.split("=", 1) for line in lines)
        groups[group] = {k.strip(): v.strip() for k, v in groups[group].items()}
    return groups


@pytest.fixture
def registered(monkeypatch):
    """The garaphpy backend in networkx's registry, as networkx's conftest registers
    its test backend; everything back as it was afterwards."""
    from networkx.utils import backends as registry

    entry = setup_cfg_entry_points()
    info = EntryPoint("garaphpy", entry["networkx.backend_info"]["garaphpy"],
                      "networkx.backend_info").load()()
    monkeypatch.setitem(registry.backends, "garaphpy",
                        EntryPoint("garaphpy", entry["networkx.backends"]["garaphpy"],
                                   "networkx.backends"))
    monkeypatch.setitem(registry.backend_info, "garaphpy", info)
    monkeypatch.setattr(nx.config, "backends",
                        nx.utils.Config(**{**nx.config.backends,   # installed: already there
                                           "garaphpy": nx.utils.Config(**info["default_config"])}))
    monkeypatch.setattr(registry._dispatchable, "__call__",
                        registry._dispatchable._call_if_any_backends_installed)
    monkeypatch.delitem(registry._loaded_backends, "garaphpy", raising=False)
    # networkx notes each reuse of its cached conversion: expected here
    monkeypatch.setattr(nx.config, "warnings_to_ignore", {"cache"})
    yield
    registry._loaded_backends.pop("garaphpy", None)


def test_networkx_dispatches_to_garaphpy(registered, monkeypatch):
    calls = []
    real_run = nx_backend._run
    monkeypatch.setattr(nx_backend, "_run",
                        lambda G, program, **kw: calls.append(program) or real_run(G, program,
                                                                                  **kw))
    graph = small_graphs()["directed"]
    assert nx.pagerank(graph, backend="garaphpy", tol=1e-12) == pytest.approx(
        nx.pagerank(graph, tol=1e-12), abs=1e-10)
    assert nx.single_source_shortest_path_length(graph, "a", backend="garaphpy") == \
        nx.single_source_shortest_path_length(graph, "a")
    weighted = weighted_graph(False)
    assert nx.single_source_dijkstra_path_length(weighted, "s", backend="garaphpy") == \
        nx.single_source_dijkstra_path_length(weighted, "s")
    assert list(nx.connected_components(weighted, backend="garaphpy")) == \
        list(nx.connected_components(weighted))
    assert nx.number_connected_components(weighted, backend="garaphpy") == 3
    assert len(calls) == 5
    # what garaphpy cannot do is refused by name, not answered wrongly
    with pytest.raises(NotImplementedError, match="garaphpy"):
        nx.pagerank(weighted, backend="garaphpy")
    # the backend's own keyword reaches it
    assert nx.pagerank(graph, backend="garaphpy", mode="cpu", tol=1e-12) == pytest.approx(
        nx.pagerank(graph, tol=1e-12), abs=1e-10)


def installed_metadata(site: Path) -> str:
    """A .dist-info under ``site`` with setup.cfg's entry points, as an installed
    garaphpy publishes them; the PYTHONPATH that finds it and the repository."""
    dist_info = site / "garaphpy-0.0.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: garaphpy\n"
                                        "Version: 0.0.0\n")
    lines = []
    for group, entries in setup_cfg_entry_points().items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in entries.items()]
    (dist_info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return os.pathsep.join([str(site), str(REPOSITORY), os.environ.get("PYTHONPATH", "")])


def test_installed_entry_points_dispatch_pagerank(tmp_path):
    """setup.cfg's entry points, as an installed garaphpy publishes them (a
    .dist-info on the path), make nx.pagerank(G, backend="garaphpy") run garaphpy."""
    path = installed_metadata(tmp_path / "site")
    script = textwrap.dedent("""
        import sys
        import networkx as nx
        assert "garaphpy" not in sys.modules      # the metadata alone, at import
        G = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])
        got = nx.pagerank(G, backend="garaphpy", tol=1e-12)
        assert "garaphpy.nx_backend" in sys.modules
        expected = nx.pagerank(G, tol=1e-12)
        assert list(got) == list(expected), (got, expected)
        assert max(abs(got[n] - expected[n]) for n in G) < 1e-10, (got, expected)
        print(nx.utils.backends.backend_info["garaphpy"]["backend_name"], "ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "garaphpy ok"


#: networkx's own test modules of the functions the backend implements.
NETWORKX_TEST_MODULES = [f"networkx.algorithms.{name}" for name in (
    "components.tests.test_connected", "components.tests.test_weakly_connected",
    "link_analysis.tests.test_pagerank", "shortest_paths.tests.test_unweighted",
    "shortest_paths.tests.test_weighted", "tests.test_dag")]


@pytest.mark.slow
def test_networkx_own_tests_pass_on_the_backend(tmp_path):
    """networkx's convention for backends: its own tests, every dispatchable call
    sent to the backend (NETWORKX_TEST_BACKEND), networkx taking over where
    can_run declines (NETWORKX_FALLBACK_TO_NX)."""
    import importlib.util

    if importlib.util.find_spec("networkx.algorithms.components.tests") is None:
        pytest.skip("networkx's tests are not installed")
    environment = {**os.environ, "PYTHONPATH": installed_metadata(tmp_path / "site"),
                   "NETWORKX_TEST_BACKEND": "garaphpy", "NETWORKX_FALLBACK_TO_NX": "True"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:warnings", "--pyargs", *NETWORKX_TEST_MODULES],
                          cwd=tmp_path, env=environment, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


# ---- the SNAP graphs ----------------------------------------------------------------
SNAP_FILES = {"ca-HepPh": "ca-HepPh.txt.gz", "soc-Slashdot0811": "soc-Slashdot0811.txt.gz"}


@pytest.fixture(scope="module", params=list(SNAP_FILES))
def snap_graph(request):
    path = SHARED_DATA / SNAP_FILES[request.param]
    if not path.exists():
        pytest.skip(f"{path} is not here (GARAPHPY_TEST_DATA names the SNAP files)")
    # ca-HepPh lists each collaboration both ways: an undirected graph, as SNAP
    # describes it; soc-Slashdot0811 is directed
    kind = nx.Graph if request.param == "ca-HepPh" else nx.DiGraph
    graph = nx.read_edgelist(path, create_using=kind, nodetype=int)
    converted = backend.convert_from_nx(graph)
    return graph, converted


@pytest.mark.slow
def test_snap_pagerank_within_networkx_tolerance(snap_graph):
    graph, converted = snap_graph
    tol = 1e-10
    expected = nx.pagerank(graph, tol=tol)
    got = backend.pagerank(converted, tol=tol, mode="cpu")
    assert list(got) == list(expected)
    # both stop at an L1 change below N * tol, each within N * tol * d / (1 - d) of
    # the fixed point
    bound = 2 * len(graph) * tol * 0.85 / 0.15
    assert sum(abs(got[node] - expected[node]) for node in graph) < bound


@pytest.mark.slow
def test_snap_distances_and_components_exactly(snap_graph):
    graph, converted = snap_graph
    source = max(graph, key=graph.degree)
    assert backend.single_source_shortest_path_length(converted, source, mode="cpu") == \
        nx.single_source_shortest_path_length(graph, source)
    if graph.is_directed():
        expected = list(nx.weakly_connected_components(graph))
        got = list(backend.weakly_connected_components(converted, mode="cpu"))
    else:
        expected = list(nx.connected_components(graph))
        got = list(backend.connected_components(converted, mode="cpu"))
    assert got == expected


@pytest.mark.slow
def test_snap_dijkstra_exactly(snap_graph):
    graph, _ = snap_graph
    weighted = graph.copy()
    for u, v, data in weighted.edges(data=True):    # decimal weights from the ids
        data["weight"] = 1.0 + ((u * 7919 + v * 104729) % 1000) / 997.0
    source = max(graph, key=graph.degree)
    expected = nx.single_source_dijkstra_path_length(weighted, source)
    got = backend.single_source_dijkstra_path_length(weighted, source, mode="cpu")
    assert got.keys() == expected.keys()
    mismatched = [node for node in expected if got[node] != expected[node]]
    assert not mismatched, [(n, got[n], expected[n]) for n in mismatched[:5]]
    assert math.isclose(max(got.values()), max(expected.values()))
