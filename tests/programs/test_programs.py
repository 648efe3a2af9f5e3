"""Built-in programs: registry, the functions themselves, and verifiers that can fail.

Three layers, each against an independent reference (tests/references.py):

* the registry and the class declarations;
* every program's own GAS functions, run by a naive pure-Python
  interpreter (sync/async, pull/notify-pull), against SciPy/NetworkX;
* every verifier: it PASSES on a correct result computed independently and
  FAILS on a copy with one wrong vertex, on small graphs and on the SNAP
  graph ca-HepPh.

Tests marked ``engine`` run the real engine (garaphpy.run) and are skipped
while it is not available.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import garaphpy
from garaphpy.errors import ConfigError
from garaphpy.program import VerifyReport, VertexProgram
from garaphpy.programs import (ALIASES, BFS, BUILTIN_PROGRAMS, SSSP, SSWP, CircuitSimulation,
                               ConnectedComponents, DeltaPageRank, HeatSimulation,
                               NeuralNetwork, PageRank, get_program, program_class)
from garaphpy.programs import bfs as bfs_module
from garaphpy.programs.components import union_find_roots

import references as ref
from helpers import (CIRCUIT, ITERATIVE, SMALL_GRAPHS, TIGHT_CONSTANTS, program_for,
                     reference, sources_of)

HEPPH = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "ca-HepPh.txt.gz"


# --------------------------------------------------------------- graphs --
@pytest.fixture(scope="module")
def small():
    return {name: build() for name, build in SMALL_GRAPHS.items()}


@pytest.fixture(scope="module")
def hepph(tmp_path_factory):
    """ca-HepPh as loaded (unweighted, undirected) and a weighted copy (weights 1..8)."""
    if not HEPPH.is_file():
        pytest.skip(f"{HEPPH} is not there")
    base = tmp_path_factory.mktemp("hepph")
    graph = garaphpy.Graph.load(HEPPH, store=base / "s", progress=False, directed=False)
    n, src, dst, _ = ref.edges_of(graph)
    keep = src < dst
    u, v = src[keep], dst[keep]
    weight = (1 + (u * 31 + v * 17) % 8).astype(np.float64)
    weighted = garaphpy.Graph.from_arrays(u, v, weight, num_vertices=n, directed=False,
                                          store=base / "w", weight_dtype="float64")
    return {"plain": graph, "weighted": weighted}


# ------------------------------------------------------------ references --
def reference_result(name, graph, sources, big=False):
    program = program_for(name)
    values = reference(name, graph, sources, big=big)
    return ref.fake_result(program, values, sources if program.needs_sources else (),
                           num_iterations=NeuralNetwork.max_iterations if name == "nn" else 1)


def assert_same(name, actual, expected, atol):
    if np.dtype(BUILTIN_PROGRAMS[name].value_dtype).kind == "i":
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=0, atol=atol)


def perturbations(name, values, sources, graph):
    """(description, wrong copy) pairs: each copy has exactly one wrong vertex."""
    values = np.asarray(values)
    n = values.size
    is_source = np.zeros(n, bool)
    is_source[sources] = True
    in_degree = np.diff(graph.store.in_offsets)
    out = []

    def changed(v, new):
        wrong = values.copy()
        wrong[v] = new
        return wrong

    if name in ("pagerank", "delta_pagerank"):
        v = int(np.argmax(values))
        out.append(("top score + 10 tol", changed(v, values[v] + 10 * PageRank.tolerance)))
        v = int(np.argmin(values))
        out.append(("a score doubled", changed(v, values[v] * 2 + 10 * PageRank.tolerance)))
    elif name in ("sssp", "bfs"):
        reached = np.flatnonzero(~is_source & (values >= 0) & np.isfinite(values))
        v = int(reached[np.argmax(values[reached])])
        out.append(("farthest + 1", changed(v, values[v] + 1)))
        v = int(reached[0])
        out.append(("a distance - 1", changed(v, values[v] - 1)))
        unreached = np.flatnonzero((values == -1) | np.isinf(values))
        if unreached.size:
            out.append(("an unreached vertex reached", changed(int(unreached[0]), 1)))
        out.append(("a source moved off 0", changed(int(sources[0]), 1)))
    elif name == "cc":
        labels = np.unique(values)
        if labels.size > 1:
            v = int(np.flatnonzero(values == labels[-1])[0])
            out.append(("one label from another component", changed(v, labels[0])))
        v = int(np.flatnonzero(values == labels[0])[-1])
        out.append(("one label + 1", changed(v, values[v] + 1)))
    elif name == "sswp":
        reached = np.flatnonzero(~is_source & (values > 0))
        v = int(reached[0])
        out.append(("a width + 1", changed(v, values[v] + 1)))
        out.append(("a width halved", changed(v, values[v] / 2)))
        out.append(("a source not +inf", changed(int(sources[0]), 5.0)))
    elif name == "nn":
        out.append(("one activation + 1e-6", changed(n // 2, values[n // 2] + 1e-6)))
    elif name in ("hs", "cs"):
        free = np.flatnonzero(~is_source & (in_degree > 0) & (values > 0) & (values < 1))
        v = int(free[0]) if free.size else int(np.flatnonzero(~is_source & (in_degree > 0))[0])
        out.append(("a free value moved by 0.25",
                    changed(v, values[v] + 0.25 if values[v] < 0.5 else values[v] - 0.25)))
        out.append(("a source not at 1", changed(int(sources[0]), 0.5)))
    return out


PROGRAMS = list(BUILTIN_PROGRAMS)


# ------------------------------------------------------ registry & classes --
def test_every_builtin_defines_and_is_registered():
    assert set(PROGRAMS) == {"pagerank", "delta_pagerank", "sssp", "bfs", "cc", "sswp", "nn",
                             "hs", "cs"}
    for name, cls in BUILTIN_PROGRAMS.items():
        assert issubclass(cls, VertexProgram)
        assert set(cls.functions) >= {"init", "gather", "apply", "activate"}
        doc = cls.__doc__ + sys.modules[cls.__module__].__doc__
        for word in ("Values", "Execution", "Verifier"):
            assert word in cls.__doc__, (name, word)
        assert "unreach" in doc.lower() or "every vertex has one" in doc.lower(), name
        assert cls.describe().startswith(cls.__name__)
        assert isinstance(get_program(name), cls)
    for alias, name in ALIASES.items():
        assert program_class(alias) is BUILTIN_PROGRAMS[name]


def test_registry_names_are_forgiving_and_errors_name_the_problem():
    assert isinstance(get_program("PageRank"), PageRank)
    assert isinstance(get_program(" Connected-Components "), ConnectedComponents)
    assert get_program("pr", damping=0.9).constants == {"damping": 0.9}
    with pytest.raises(ConfigError, match=r"unknown program 'pagerenk'.*pagerank"):
        get_program("pagerenk")
    with pytest.raises(ConfigError, match=r"program name must be a string"):
        get_program(3)
    with pytest.raises(ConfigError, match=r"unknown constant\(s\) dampin.*known: damping"):
        get_program("pagerank", dampin=0.5)
    with pytest.raises(ConfigError, match=r"damping=1\.5: expected 0 <= damping < 1"):
        get_program("pagerank", damping=1.5)
    with pytest.raises(ConfigError, match=r"k=0: expected 0 < k <= 1"):
        get_program("hs", k=0)
    with pytest.raises(ConfigError, match=r"constant k='hot' must be a number"):
        get_program("hs", k="hot")
    with pytest.raises(ConfigError, match=r"ground_every=2\.5: expected an integer >= 1"):
        get_program("cs", ground_every=2.5)
    with pytest.raises(ConfigError, match=r"unknown constant\(s\) damping.*none"):
        get_program("sssp", damping=0.5)
    assert get_program("cs", ground_every=4.0).constants["ground_every"] == 4


# ----------------------------------------------------- functions, directly --
def test_functions_called_directly():
    assert SSSP.gather(2.0, 3.0) == 5.0
    assert SSSP.apply(4.0, 2.5) == 2.5 and SSSP.activate(2.5, 4.0) and not SSSP.activate(4, 4)
    assert SSSP.init(True) == 0.0 and SSSP.init(False) == math.inf
    assert BFS.init(False) == bfs_module.UNREACHED
    assert BFS.gather(bfs_module.UNREACHED) <= np.iinfo(np.int64).max  # no overflow
    assert ConnectedComponents.init(42) == 42 and ConnectedComponents.apply(7, 3) == 3
    assert SSWP.gather(math.inf, 4.0) == 4.0 and SSWP.apply(2.0, 4.0) == 4.0
    assert SSWP.activate(4.0, 2.0) and not SSWP.activate(2.0, 2.0)
    assert NeuralNetwork.init(3) == 0.25
    assert NeuralNetwork.apply(0.0) == 0.5
    assert NeuralNetwork.apply(-1000.0) == 0.0 and NeuralNetwork.apply(1000.0) == 1.0
    assert abs(NeuralNetwork.apply(-2.0) + NeuralNetwork.apply(2.0) - 1.0) < 1e-15
    assert PageRank.gather(0.5, 4) == 0.125
    assert HeatSimulation.init(True) == 1.0 and CircuitSimulation.init(False) == 0.0
    np.testing.assert_array_equal(BFS().finalize(np.array([0, 3, bfs_module.UNREACHED])),
                                  [0, 3, -1])


def test_functions_with_constants_through_the_interpreter_binding():
    functions = ref._python_functions(PageRank(damping=0.5))
    apply, parameters = functions["apply"]
    assert parameters == ("accum", "num_vertices", "dangling")
    assert apply(0.25, 4, 0.5) == pytest.approx(0.5 / 4 + 0.5 * (0.25 + 0.5 / 4))
    heat, _ = ref._python_functions(HeatSimulation(k=0.25))["apply"]
    assert heat(0.0, 2.0, 4.0, False) == pytest.approx(0.25 * 0.5)
    assert heat(0.3, 2.0, 4.0, True) == 1.0 and heat(0.3, 0.0, 0.0, False) == 0.3
    circuit, parameters = ref._python_functions(CircuitSimulation(ground_every=5))["apply"]
    assert parameters == ("value", "accum", "vertex", "weighted_in_degree", "is_source")
    assert circuit(0.7, 3.0, 10, 4.0, False) == 0.0  # user id 10 is grounded
    assert circuit(0.7, 3.0, 11, 4.0, False) == 0.75 and circuit(0.7, 3.0, 10, 4.0, True) == 1.0


# The naive interpreter runs each program's own functions: sync pull is the definition,
# auto mixes pull and notify-pull as Garaph does, async updates in place.
NAIVE_MODES = {
    "pagerank": [("sync", "pull"), ("async", "pull")],
    "delta_pagerank": [("sync", "pull"), ("sync", "notify-pull"), ("async", "auto")],
    "sssp": [("sync", "pull"), ("sync", "auto"), ("async", "notify-pull")],
    "bfs": [("sync", "auto"), ("async", "pull")],
    "cc": [("sync", "auto"), ("async", "notify-pull")],
    "sswp": [("sync", "pull"), ("sync", "auto"), ("async", "auto")],
    "nn": [("sync", "pull")],
    "hs": [("sync", "pull"), ("async", "pull")],
    "cs": [("sync", "pull"), ("async", "pull")],
}
@pytest.mark.parametrize("graph_name", list(SMALL_GRAPHS))
@pytest.mark.parametrize("name", PROGRAMS)
def test_naive_run_of_the_functions_matches_the_reference(small, name, graph_name):
    graph = small[graph_name]
    sources = sources_of(graph, graph_name)
    program = program_for(name)
    expected = reference(name, graph, sources)
    for execution, direction in NAIVE_MODES[name]:
        tight = ref.run_naive(graph, program_for(name, tight=True),
                              sources if program.needs_sources else (),
                              execution=execution, direction=direction,
                              tolerance=1e-13 if name in ITERATIVE else "program",
                              max_iterations=100_000 if name in ITERATIVE else None)
        assert tight.converged, (execution, direction)
        assert_same(name, tight.values, expected, atol=1e-9)
        assert tight.program.verify(graph, tight).ok
        if name in ITERATIVE or name in TIGHT_CONSTANTS:
            # stopped by the program's own tolerance: the verifier's bound must hold
            loose = ref.run_naive(graph, program, sources if program.needs_sources else (),
                                  execution=execution, direction=direction)
            report = program.verify(graph, loose)
            assert loose.converged and report.ok, (execution, direction, str(report))


def test_naive_pagerank_notify_pull_misses_vertices_without_in_edges(small):
    # why PageRank needs pull: notify-pull never applies a vertex without in-edges
    graph = small["tiny"]
    wrong = ref.run_naive(graph, PageRank(), direction="notify-pull")
    assert not PageRank().verify(graph, wrong).ok


# ----------------------------------------------- verifiers: pass, then fail --
def check_verifier(name, graph, result, sources):
    program = result.program
    report = program.verify(graph, result)
    assert isinstance(report, VerifyReport)
    assert report.ok, str(report)
    assert str(report).startswith("verify: PASSED")
    for description, wrong in perturbations(name, result.values, sources, graph):
        bad = ref.fake_result(program, wrong, result.sources, result.num_iterations)
        report = program.verify(graph, bad)
        assert not report.ok, (description, str(report))
        assert "FAILED" in str(report)
        assert report.mismatches >= 1 or report.detail, description


@pytest.mark.parametrize("graph_name", list(SMALL_GRAPHS))
@pytest.mark.parametrize("name", PROGRAMS)
def test_verifier_passes_the_reference_and_fails_one_wrong_vertex(small, name, graph_name):
    graph = small[graph_name]
    sources = sources_of(graph, graph_name)
    result = reference_result(name, graph, sources)
    check_verifier(name, graph, result, sources)


@pytest.mark.parametrize("name", PROGRAMS)
def test_verifier_on_ca_hepph(hepph, name):
    graph = hepph["plain"] if name in ("pagerank", "delta_pagerank", "bfs", "cc") \
        else hepph["weighted"]
    sources = sources_of(graph, "hepph")
    result = reference_result(name, graph, sources, big=True)
    check_verifier(name, graph, result, sources)


def test_union_find_agrees_with_scipy_on_ca_hepph(hepph):
    from scipy.sparse.csgraph import connected_components

    graph = hepph["plain"]
    count, labels = connected_components(ref.sparse(graph), directed=False)
    roots = union_find_roots(graph)
    assert np.unique(roots).size == count
    # same partition: a root determines the SciPy label and back
    pairs = np.unique(np.stack([roots, labels]), axis=1)
    assert pairs.shape[1] == count


# ------------------------------------------------------ verifier failure paths --
def test_verifiers_reject_wrong_shapes_and_sources(small):
    graph = small["tiny"]
    for name in PROGRAMS:
        program = program_for(name)
        report = program.verify(graph, ref.fake_result(program, np.zeros(3), [0]))
        assert not report.ok and "shape" in report.detail, name
    report = SSSP().verify(graph, ref.fake_result(SSSP(), np.zeros(graph.num_vertices), [99]))
    assert not report.ok and "sources" in report.detail


def test_sssp_and_sswp_reject_a_tight_cycle_no_source_reaches():
    # 0 -> 1 (5), 1 -> 2 (1), 2 <-> 3 (weight 0): true dist(2) = dist(3) = 6.
    graph = garaphpy.Graph.from_arrays([0, 1, 2, 3], [1, 2, 3, 2], [5.0, 1.0, 0.0, 0.0],
                                       num_vertices=4, weight_dtype="float64")
    assert SSSP().verify(graph, ref.fake_result(SSSP(), [0, 5, 6, 6], [0])).ok
    # 2 and 3 each have a tight in-edge from the other: GAPBS's local check would pass
    report = SSSP().verify(graph, ref.fake_result(SSSP(), [0, 5, 5.5, 5.5], [0]))
    assert not report.ok and "tight path" in report.detail and report.mismatches == 2
    # widest path: 0 -> 1 (2), 1 -> 2 (3), 2 <-> 3 (9): true widths 2, 2, 2
    graph = garaphpy.Graph.from_arrays([0, 1, 2, 3], [1, 2, 3, 2], [2.0, 3.0, 9.0, 9.0],
                                       num_vertices=4, weight_dtype="float64")
    assert SSWP().verify(graph, ref.fake_result(SSWP(), [math.inf, 2, 2, 2], [0])).ok
    report = SSWP().verify(graph, ref.fake_result(SSWP(), [math.inf, 2, 9, 9], [0]))
    assert not report.ok and "tight path" in report.detail and report.mismatches == 2


def test_weight_requirements_are_checked():
    graph = garaphpy.Graph.from_arrays([0, 1], [1, 2], [1.0, -2.0], num_vertices=3,
                                       weight_dtype="float64")
    for program in (SSSP(), SSWP(), HeatSimulation(), CircuitSimulation()):
        report = program.verify(graph, ref.fake_result(program, [0.0, 1.0, 0.0], [0]))
        assert not report.ok and "(1, 2) has -2.0" in report.detail, type(program).__name__
    zero = garaphpy.Graph.from_arrays([0], [1], [0.0], num_vertices=2, weight_dtype="float64")
    report = HeatSimulation().verify(zero, ref.fake_result(HeatSimulation(), [1.0, 0.0], [0]))
    assert not report.ok and "> 0" in report.detail


def test_bfs_verifier_invariants_each_fail():
    # path 0 -> 1 -> 2, and 3 alone
    graph = garaphpy.Graph.from_arrays([0, 1], [1, 2], num_vertices=4)
    good = np.array([0, 1, 2, -1])
    assert BFS().verify(graph, ref.fake_result(BFS(), good, [0])).ok
    cases = {"source not at depth 0": ([1, 1, 2, -1], [0]),
             "no in-neighbour one level up": ([0, 1, 2, 0], [0]),
             "gives a smaller depth": ([0, 1, -1, -1], [0]),
             "depth below -1": ([0, 1, 2, -2], [0])}
    for expected, (depth, sources) in cases.items():
        report = BFS().verify(graph, ref.fake_result(BFS(), depth, sources))
        assert not report.ok and expected in report.detail, (expected, str(report))
    # vertices are named by the user's ids
    named = garaphpy.Graph.from_arrays([100, 200], [200, 300])
    report = BFS().verify(named, ref.fake_result(BFS(), [0, 1, 5], [0]))
    assert not report.ok and "vertex 300 = 5" in report.detail


def test_cc_counts_and_names_wrong_labels(small):
    graph = small["undirected"]
    labels = ref.components_scipy(graph)
    merged = np.zeros_like(labels)  # every vertex labelled 0: components merged
    report = ConnectedComponents().verify(graph, ref.fake_result(ConnectedComponents(), merged))
    assert not report.ok and report.mismatches == int((labels != 0).sum())
    assert "5 components, 1 distinct labels" in report.detail


def test_iterative_verifiers_fail_a_run_stopped_early(small):
    # LAGraph habit: a run capped at 2 iterations must not pass
    graph = small["random"]
    sources = sources_of(graph, "random")
    for program in (PageRank(), DeltaPageRank(), HeatSimulation(),
                    CircuitSimulation(**CIRCUIT)):
        capped = ref.run_naive(graph, program, sources if program.needs_sources else (),
                               max_iterations=2)
        assert not capped.converged
        report = program.verify(graph, capped)
        assert not report.ok and "moved" in report.detail, str(report)


def test_fixed_point_bound_follows_the_runs_tolerance(small):
    graph = small["random"]
    loose = ref.run_naive(graph, PageRank(), tolerance=1e-2)
    assert loose.tolerance == 1e-2 and PageRank().verify(graph, loose).ok
    loose.tolerance = None  # judged by the program's own 1e-4: not converged enough
    report = PageRank().verify(graph, loose)
    assert not report.ok and "bound 0.0001" in report.detail


def test_nn_verifier_replays_the_runs_iteration_count():
    # small weights of both signs, so that the activations do not saturate
    rng = np.random.default_rng(5)
    graph = garaphpy.Graph.from_arrays(rng.integers(0, 30, 120), rng.integers(0, 30, 120),
                                       rng.uniform(-1.0, 1.0, 120), num_vertices=30,
                                       weight_dtype="float64")
    five = ref.fake_result(NeuralNetwork(), ref.nn_scipy(graph, 5), num_iterations=5)
    assert NeuralNetwork().verify(graph, five).ok
    five.num_iterations = 6
    assert not NeuralNetwork().verify(graph, five).ok


def test_circuit_ground_rule_uses_user_ids(small):
    graph = small["random"]  # user ids 3 i + 7
    program = CircuitSimulation(ground_every=5)
    ground = program.grounded(graph, np.array([1]))
    original = graph.original_ids()
    expected = (original % 5 == 0) & (np.arange(original.size) != 1)
    assert expected.any()
    np.testing.assert_array_equal(ground, expected)


# ------------------------------------------------------------------ engine --
ENGINE_GRAPH = "random"


@pytest.mark.parametrize("name", PROGRAMS)
def test_engine_result_verifies_and_matches_the_reference(small, name):
    """garaphpy.run on a small graph: verified, and equal to the independent reference."""
    graph = small[ENGINE_GRAPH] if name != "cc" else small["tiny"]
    sources = sources_of(graph, ENGINE_GRAPH)
    program = program_for(name, tight=True)
    result = ref.run_engine(graph, program, sources if program.needs_sources else (),
                            tolerance=1e-13 if name in ITERATIVE else None,
                            max_iterations=100_000 if name in ITERATIVE else None)
    assert result.converged
    report = result.program.verify(getattr(result, "graph", graph), result)
    assert report.ok, str(report)
    assert_same(name, result.values, reference(name, graph, sources), atol=1e-9)


# ------------------------------------------- fixed points: no tolerance stops them --
def chain_with_shortcuts(n=31, step=0.01, detour=1e-8):
    """0 -> 1 -> ... -> n-1 by ``step``, plus 0 -> i weighing i * step + ``detour``.

    A synchronous SSSP takes every shortcut in its first iteration; the chain
    then improves one vertex per iteration, each by ``detour``: an L1 change
    under 1e-6 while 28 distances are still wrong."""
    chain = [(i, i + 1, step) for i in range(n - 1)]
    shortcuts = [(0, i, i * step + detour) for i in range(2, n)]
    src, dst, weight = (np.array(c) for c in zip(*(chain + shortcuts)))
    return garaphpy.Graph.from_arrays(src.astype(np.int64), dst.astype(np.int64), weight,
                                      num_vertices=n, weight_dtype="float64")


@pytest.mark.parametrize("execution", ["sync", "async"])
def test_a_tolerance_does_not_stop_sssp_before_its_fixed_point(execution):
    from garaphpy.program import ToleranceIgnoredWarning

    graph = chain_with_shortcuts()
    with pytest.warns(ToleranceIgnoredWarning, match="tolerance=1e-06.*SSSP"):
        result = garaphpy.run(graph, "sssp", sources=[0], mode="cpu", execution=execution,
                              tolerance=1e-6)
    assert result.converged
    np.testing.assert_array_equal(result.values, ref.sssp_scipy(graph, [0]))
    assert SSSP().verify(graph, result).ok


def test_fixed_point_programs_declare_it_and_refuse_a_class_tolerance():
    assert all(cls.fixed_point for cls in (SSSP, BFS, ConnectedComponents, SSWP))
    assert not PageRank.fixed_point and not HeatSimulation.fixed_point
    with pytest.raises(garaphpy.ProgramError, match="fixed_point.*tolerance = 0.001"):
        class Stopped(VertexProgram):       # noqa: F841
            sum = "min"
            fixed_point = True
            tolerance = 1e-3

            def init(is_source):
                return 0.0 if is_source else math.inf

            def gather(src, weight):
                return src + weight

            def apply(value, accum):
                return min(value, accum)

            def activate(new, old):
                return new < old


@pytest.mark.parametrize("scale", [1e-12, 1e-3, 1.0, 1e9])
def test_path_verifiers_catch_a_wrong_value_of_any_size(scale):
    graph = chain_with_shortcuts(step=0.01 * scale, detour=1e-8 * scale)
    dist = ref.sssp_scipy(graph, [0])
    assert SSSP().verify(graph, ref.fake_result(SSSP(), dist, [0])).ok
    for wrong in (dist[5] * (1 + 1e-9), dist[5] * (1 - 1e-9)):
        bad = dist.copy()
        bad[5] = wrong
        report = SSSP().verify(graph, ref.fake_result(SSSP(), bad, [0]))
        assert not report.ok and "vertex 5" in report.detail, (scale, wrong, str(report))
    # widest paths: the same graph's widths, one off by a relative 1e-9
    width = ref.sswp_heap(graph, [0])
    assert SSWP().verify(graph, ref.fake_result(SSWP(), width, [0])).ok
    bad = width.copy()
    bad[5] = width[5] * (1 + 1e-9)
    report = SSWP().verify(graph, ref.fake_result(SSWP(), bad, [0]))
    assert not report.ok and "vertex 5" in report.detail, (scale, str(report))

