"""Notify-pull computes what a pull computes (Garaph section 4.2).

Notify-pull recomputes only the vertices that an in-neighbour's change
notified.  That is the pull's answer only where a vertex's apply reads
nothing but its in-edges' values: a vertex that no notification reaches
(no in-edges) must still be applied once, and a program whose apply reads
an input that changes every iteration (an aggregate, such as PageRank's
dangling mass, or the iteration number) changes every vertex.  A forced
notify-pull therefore pulls the first iteration of a program that starts
with every vertex active, and is refused for a program of the second kind,
whose runs always pull.

The graph here has what broke both: vertices without in-edges, vertices
without out-edges (dangling mass), isolated vertices, self loops and
duplicate edges.  Each run is checked against the program's own verifier
(a numpy power step or replay) and against the pull run.
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy import ConfigError
from garaphpy.programs import PageRank, program_class
from garaphpy.program import VertexProgram
from garaphpy.scheduler import decisions

NUM_VERTICES = 310


def edges():
    """Sources among the first 150 vertices only, destinations from vertex 20 on:
    vertices 0-19 have no in-edges (but for a self loop), 150-299 no out-edges,
    the last ten no edges at all; a duplicate edge."""
    rng = np.random.default_rng(7)
    src = np.concatenate([rng.integers(0, 150, 1500), [5, 5, 7]])
    dst = np.concatenate([rng.integers(20, 300, 1500), [5, 9, 9]])
    return src, dst, rng.integers(1, 20, src.size).astype(np.float64)


@pytest.fixture(scope="module")
def graph():
    return garaphpy.Graph.from_arrays(*edges(), num_vertices=NUM_VERTICES)


def test_the_graph_has_vertices_without_in_edges_and_without_out_edges():
    src, dst, _ = edges()
    in_degree = np.bincount(dst, minlength=NUM_VERTICES)
    out_degree = np.bincount(src, minlength=NUM_VERTICES)
    assert ((in_degree == 0) & (out_degree > 0)).sum() >= 5
    assert ((in_degree > 0) & (out_degree == 0)).sum() >= 100


@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("mode", ["cpu", "hybrid"])
def test_neural_network_notify_pull_applies_the_vertices_without_in_edges(graph, mode,
                                                                          execution):
    pulled = garaphpy.run(graph, "nn", mode=mode, execution=execution, direction="pull",
                          threads=2)
    notified = garaphpy.run(graph, "nn", mode=mode, execution=execution,
                            direction="notify-pull", threads=2)
    np.testing.assert_array_equal(notified.values, pulled.values)
    assert [r.direction for r in notified.iterations] == \
        ["pull"] + ["notify-pull"] * (len(notified.iterations) - 1)
    if execution == "sync":
        report = notified.program.verify(graph, notified)
        assert report.ok, str(report)


@pytest.mark.parametrize("direction", ["auto", "pull"])
@pytest.mark.parametrize("mode", ["cpu", "hybrid"])
def test_pagerank_with_dangling_mass_sums_to_one_in_every_direction_taken(graph, mode,
                                                                          direction):
    result = garaphpy.run(graph, "pagerank", mode=mode, direction=direction, threads=2)
    report = result.program.verify(graph, result)
    assert report.ok, str(report)
    assert abs(result.values.sum() - 1.0) < 1e-6
    assert {r.direction for r in result.iterations} == {"pull"}


def test_a_forced_notify_pull_of_pagerank_is_refused_naming_the_aggregate(graph):
    with pytest.raises(ConfigError, match=r"direction='notify-pull': PageRank\.apply reads "
                                          r"\['dangling'\].*use 'pull' or 'auto'"):
        garaphpy.run(graph, PageRank(), mode="cpu", direction="notify-pull")


class ShrinkingRanks(VertexProgram):
    """A frontier program with an aggregate: only vertices whose value moved stay
    active, so the frontier shrinks and the direction rule alone would notify-pull."""

    value_dtype = np.float64
    sum = "add"
    execution = "sync"
    max_iterations = 60
    initially_active = "all"
    tolerance = None
    aggregates = {"dangling": ("add", program_class("pagerank").aggregates["dangling"][1])}

    def init(num_vertices):
        return 1.0 / num_vertices

    def gather(src, src_out_degree):
        return src / src_out_degree

    def apply(accum, num_vertices, dangling):
        return 0.15 / num_vertices + 0.85 * (accum + dangling / num_vertices)

    def activate(new, old):
        return abs(new - old) > 1e-9


def test_a_program_with_an_aggregate_pulls_every_iteration_in_auto(graph):
    result = garaphpy.run(graph, ShrinkingRanks(), mode="cpu", threads=2)
    assert {r.direction for r in result.iterations} == {"pull"}
    assert result.plan.cpu.entries["notify_pull"] == {
        "apply_reads_per_iteration": ["dangling"], "choice": False}
    assert not any(r.forced for r in result.iterations)
    reference = garaphpy.run(graph, "pagerank", mode="cpu", tolerance=1e-12,
                             max_iterations=200, threads=2)
    np.testing.assert_allclose(result.values, reference.values, rtol=0, atol=1e-7)


class DecayingLabels(VertexProgram):
    """Min-label propagation whose apply reads the iteration: a label also
    shrinks by one each iteration until 0, notified or not."""

    value_dtype = np.int64
    sum = "min"
    execution = "sync"
    max_iterations = 40
    initially_active = "all"

    def init(vertex):
        return vertex

    def gather(src):
        return src

    def apply(accum, value, iteration):
        best = min(accum, value)
        return best - 1 if best > 0 and iteration < 20 else best

    def activate(new, old):
        return new != old


def test_an_apply_that_reads_the_iteration_pulls_and_refuses_notify_pull(graph):
    pulled = garaphpy.run(graph, DecayingLabels(), mode="cpu", direction="pull", threads=2)
    result = garaphpy.run(graph, DecayingLabels(), mode="cpu", threads=2)
    assert result.plan.cpu.entries["notify_pull"]["apply_reads_per_iteration"] == ["iteration"]
    assert {r.direction for r in result.iterations} == {"pull"}
    np.testing.assert_array_equal(result.values, pulled.values)
    with pytest.raises(ConfigError, match=r"DecayingLabels\.apply reads \['iteration'\]"):
        garaphpy.run(graph, DecayingLabels(), mode="cpu", direction="notify-pull")


def test_the_rules():
    assert decisions.notify_pull_computes_pull(["dangling"]) is False
    assert decisions.notify_pull_computes_pull(["iteration"]) is False
    assert decisions.notify_pull_computes_pull([]) is True
    assert decisions.choose_direction(0.01, 1.0, "auto", notify_pull=False) == "pull"
    assert decisions.choose_direction(0.01, 1.0, "auto") == "notify-pull"
    first = decisions.iteration_forced_direction
    assert first("notify-pull", 0, "all") == "pull"
    assert first("notify-pull", 1, "all") == "notify-pull"
    assert first("notify-pull", 0, "sources") == "notify-pull"
    assert first("auto", 0, "all") == "auto"
    assert first("pull", 0, "all") == "pull"


@pytest.mark.gpu
def test_on_the_gpu_a_forced_notify_pull_of_nn_equals_its_pull(graph):
    pulled = garaphpy.run(graph, "nn", mode="gpu", direction="pull")
    notified = garaphpy.run(graph, "nn", mode="gpu", direction="notify-pull")
    # the device's sparse pass may add a vertex's in-edges in another order
    np.testing.assert_allclose(notified.values, pulled.values, rtol=1e-12, atol=0)
    assert notified.iterations[0].direction == "pull"
    report = notified.program.verify(graph, notified)
    assert report.ok, str(report)
