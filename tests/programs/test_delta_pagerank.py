"""DeltaPageRank (accumulative PageRank) on the engine, against an independent power iteration.

The reference is SciPy's sparse power iteration of PageRank with dangling
mass spread uniformly (tests/references.py), never the engine or the
program's verifier.  Graphs cover dangling vertices, self-loops, isolated
vertices, vertices split across pages, a graph without edges and a single
vertex; runs cover sync and async, pull, notify-pull and the automatic
switch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import garaphpy
from garaphpy.api import NotConvergedWarning
from garaphpy.errors import ConfigError
from garaphpy.programs import DeltaPageRank, get_program

import references as ref

REPO = Path(__file__).resolve().parents[2]

#: Tight enough that the result equals PageRank to 1e-6 relative (||r - PR||_1 <= 3.4e-10).
TIGHT = 1e-10


def random_graph(seed=5, n=2000, m=12000, isolated=30):
    """Random directed graph: dangling vertices, self-loops, isolated vertices, one heavy
    vertex whose in-edges span several pages (the store is cut into small pages)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    dst[: m // 8] = 11  # a vertex with more in-edges than a shard or a page carries
    src[: n // 10] = dst[: n // 10]  # self-loops
    sinks = rng.choice(n, n // 20, replace=False)  # no out-edges: dangling
    keep = ~np.isin(src, sinks)
    return garaphpy.Graph.from_arrays(src[keep], dst[keep], num_vertices=n + isolated,
                                      max_shard_edges=500, max_page_bytes=20_000)


@pytest.fixture(scope="module")
def graph():
    built = random_graph()
    assert len(built.store.pages) > 3 and built.store.shards["split"].any()
    return built


@pytest.fixture(scope="module")
def expected(graph):
    return ref.pagerank_power(graph)


def power_step_l1(graph, scores, damping=0.85):
    """||T(r) - r||_1 for PageRank's power step T, from the edge list (not the verifier)."""
    n, src, dst, _ = ref.edges_of(graph)
    out_degree = np.bincount(src, minlength=n)
    share = np.divide(scores, out_degree, out=np.zeros(n), where=out_degree > 0)
    step = (1 - damping) / n + damping * (np.bincount(dst, weights=share[src], minlength=n)
                                          + scores[out_degree == 0].sum() / n)
    return float(np.abs(step - scores).sum())


@pytest.mark.parametrize("direction", ["auto", "pull", "notify-pull"])
@pytest.mark.parametrize("execution", ["sync", "async"])
def test_matches_power_iteration(graph, expected, execution, direction):
    result = garaphpy.run(graph, DeltaPageRank(l1_bound=TIGHT), mode="cpu", execution=execution,
                          direction=direction, threads=2)
    assert result.converged and result.stop_reason == "no active vertex"
    np.testing.assert_allclose(result.values, expected, rtol=1e-6)
    assert abs(result.values.sum() - 1.0) < 1e-12
    assert result.program.verify(graph, result).ok
    if direction != "auto":     # a forced notify-pull pulls the first iteration: all start active
        first = "pull" if direction == "notify-pull" else direction
        assert [r.direction for r in result.iterations[:1]] == [first]
        assert {r.direction for r in result.iterations[1:]} == {direction}


@pytest.mark.parametrize("execution", ["sync", "async"])
def test_default_bound_holds_with_the_derived_margin(graph, execution):
    # the module docstring derives ||T(r) - r||_1 <= l1_bound / 2; the verifier checks < l1_bound
    program = DeltaPageRank()
    result = garaphpy.run(graph, program, mode="cpu", execution=execution, threads=2)
    assert result.converged and result.execution == execution
    assert power_step_l1(graph, result.values) <= program.constants["l1_bound"] / 2
    report = program.verify(graph, result)
    assert report.ok, str(report)


def test_late_iterations_are_sparse_and_notify_pull_takes_them():
    graph = garaphpy.Graph.load("rmat:12", progress=False)
    for execution in ("sync", "async"):
        result = garaphpy.run(graph, DeltaPageRank(), mode="cpu", execution=execution, threads=1)
        records = result.iterations
        assert records[0].direction == "pull"
        assert records[-1].direction == "notify-pull"
        assert records[-1].active_vertices < graph.num_vertices // 100
        assert records[-1].activated == 0
        assert result.program.verify(graph, result).ok


def test_async_gathers_no_more_edges_than_sync(graph):
    # one thread: async is Gauss-Seidel in vertex order, deterministic
    work = {}
    for execution in ("sync", "async"):
        result = garaphpy.run(graph, DeltaPageRank(l1_bound=TIGHT), mode="cpu",
                              execution=execution, threads=1)
        work[execution] = sum(r.edges_processed for r in result.iterations)
    assert work["async"] <= work["sync"]


def test_sync_runs_are_deterministic_and_use_the_source_precompute(graph):
    runs = [garaphpy.run(graph, DeltaPageRank(), mode="cpu", execution="sync", threads=threads)
            for threads in (1, 2)]
    np.testing.assert_array_equal(runs[0].values, runs[1].values)
    pulls = [r for r in runs[0].iterations if r.direction == "pull"]
    assert pulls and all(r.gather_precomputed for r in pulls)
    asynchronous = garaphpy.run(graph, DeltaPageRank(), mode="cpu", execution="async", threads=2)
    assert not any(r.gather_precomputed for r in asynchronous.iterations)


@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("direction", ["auto", "notify-pull"])
def test_graph_without_edges_scores_uniformly(execution, direction):
    graph = garaphpy.Graph.from_arrays(np.zeros(0, np.int64), np.zeros(0, np.int64),
                                       num_vertices=7)
    result = garaphpy.run(graph, DeltaPageRank(), mode="cpu", execution=execution,
                          direction=direction)
    assert result.converged
    np.testing.assert_allclose(result.values, np.full(7, 1 / 7), rtol=1e-15)
    assert result.program.verify(graph, result).ok


@pytest.mark.parametrize("loop", [False, True])
def test_single_vertex(loop):
    graph = garaphpy.Graph.from_arrays([0] if loop else np.zeros(0, np.int64),
                                       [0] if loop else np.zeros(0, np.int64), num_vertices=1)
    result = garaphpy.run(graph, DeltaPageRank(l1_bound=TIGHT), mode="cpu")
    assert result.converged and list(result.values) == [1.0]
    assert result.program.verify(graph, result).ok


def test_naive_interpreter_agrees():
    # the program's own functions, edge by edge in pure Python (tests/references.py)
    small = random_graph(seed=9, n=60, m=300, isolated=3)
    reference = ref.pagerank_power(small)
    for execution, direction in (("sync", "pull"), ("async", "notify-pull"),
                                 ("async", "auto")):
        result = ref.run_naive(small, DeltaPageRank(l1_bound=TIGHT), execution=execution,
                               direction=direction)
        assert result.converged
        np.testing.assert_allclose(result.values, reference, rtol=1e-6)


# ------------------------------------------------------------------ verifier --
def test_verifier_fails_on_perturbed_results(graph, expected):
    program = DeltaPageRank()
    good = ref.fake_result(program, expected)
    assert program.verify(graph, good).ok
    bound = program.constants["l1_bound"]
    top, low = int(np.argmax(expected)), int(np.argmin(expected))
    raised = expected.copy()
    raised[top] += 10 * bound
    moved = expected.copy()  # sum still 1: mass moved from the top vertex to the lowest
    moved[top] -= 5 * bound
    moved[low] += 5 * bound
    negative = expected.copy()
    negative[low] = -negative[low]
    for wrong in (raised, moved, negative):
        report = program.verify(graph, ref.fake_result(program, wrong))
        assert not report.ok and "FAILED" in str(report), str(report)
        assert report.mismatches >= 1


def test_verifier_fails_a_run_stopped_early(graph):
    with pytest.warns(NotConvergedWarning):
        capped = garaphpy.run(graph, DeltaPageRank(), mode="cpu", execution="sync",
                              max_iterations=3)
    assert not capped.converged
    report = capped.program.verify(graph, capped)
    assert not report.ok and "moved" in report.detail, str(report)


def test_verifier_rejects_a_wrong_shape(graph):
    report = DeltaPageRank().verify(graph, ref.fake_result(DeltaPageRank(), np.ones(3)))
    assert not report.ok and "shape" in report.detail


# ----------------------------------------------------------- registry and CLI --
def test_registered_under_its_names_with_checked_constants():
    for name in ("delta-pagerank", "delta_pagerank", "Delta-PR", "pagerank_delta"):
        assert isinstance(get_program(name), DeltaPageRank)
    assert get_program("delta-pagerank", l1_bound=1e-8).constants["l1_bound"] == 1e-8
    with pytest.raises(ConfigError, match=r"l1_bound=0: expected l1_bound > 0"):
        get_program("delta-pagerank", l1_bound=0)
    with pytest.raises(ConfigError, match=r"damping=1: expected 0 <= damping < 1"):
        get_program("delta-pagerank", damping=1)


def test_apply_publishes_only_past_the_threshold():
    apply, parameters = ref._python_functions(DeltaPageRank(l1_bound=0.4))["apply"]
    assert parameters == ("value", "accum", "num_vertices")
    # N = 3, d = 0.85: x = 0.05 + 0.85 accum; eps = 0.4 * 0.15 / 3 = 0.02
    assert apply(0.05, 0.1, 3) == pytest.approx(0.135)  # x - S = 0.085 > eps: published
    assert apply(0.12, 0.1, 3) == 0.12  # x - S = 0.015 <= eps: kept
    assert DeltaPageRank().finalize(np.array([1.0, 3.0])).tolist() == [0.25, 0.75]


def test_cli_runs_and_verifies(tmp_path, capsys):
    from garaphpy.output import read_values
    from garaphpy.cli import main

    values = tmp_path / "dpr.txt"
    code = main([str(REPO / "examples" / "quickstart.toml"), "-q", "--verify",
                 "--set", "run.program='delta-pagerank'",
                 "--set", f"store.path={str(tmp_path / 'store')!r}",
                 "--set", f"output.values={str(values)!r}"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "DeltaPageRank (cpu, async): converged" in out and "verify: PASSED" in out
    vertices, scores = read_values(values)
    assert vertices.size == 782 and abs(scores.sum() - 1.0) < 1e-9
