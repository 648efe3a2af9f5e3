"""Pulls that skip the vertices already as good as any source:
a program declaring ``gather_no_better_than_source`` (connected components)
reads no in-edge of a vertex whose value equals the best value of a vertex
with out-edges, the exactness of Afforest's skip of the largest component
for label propagation.  Checked against SciPy and NumPy references, with the
skip on and off, and a user's false declaration caught at the end of its run.
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy import api
from garaphpy.kernels import cpu as kernels
from garaphpy.program import ProgramError, VertexProgram
from garaphpy.programs import ConnectedComponents
from garaphpy.scheduler import decisions
from references import MinLabels, components_scipy, run_engine


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    base = tmp_path_factory.mktemp("floor")
    return {
        "grid": garaphpy.Graph.load("grid:60x40", store=base / "grid", progress=False),
        # vertex 0 of rmat has no edge: the floor is the largest component's label
        "rmat": garaphpy.Graph.load("rmat:12", store=base / "rmat", progress=False,
                                    generator_options={"seed": 3}),
        "pages": garaphpy.Graph.load("rmat:11", store=base / "pages", progress=False,
                                     max_shard_edges=512, max_page_bytes=16384,
                                     generator_options={"seed": 5}),
    }


def test_the_rule():
    assert decisions.floor_skip(True, "cpu")
    assert not decisions.floor_skip(True, "hybrid")
    assert not decisions.floor_skip(True, "gpu")
    assert not decisions.floor_skip(False, "cpu")


@pytest.mark.parametrize("seed", range(5))
def test_the_floor_and_the_vertices_above_it_against_numpy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 20_000))
    values = rng.integers(0, 1000, n)
    out_degree = rng.integers(0, 3, n) * rng.integers(0, 2, n)
    for mode, best in ((kernels.FLOOR_MIN, np.min), (kernels.FLOOR_MAX, np.max)):
        out = np.zeros(1, values.dtype)
        found = kernels.best_source_value(values, out_degree, mode, out)
        sources = values[out_degree > 0]
        assert found == (sources.size > 0)
        if found:
            assert out[0] == best(sources)
            vertices = rng.permutation(n)[:n // 2]
            above = values[vertices] > out[0] if mode == kernels.FLOOR_MIN \
                else values[vertices] < out[0]
            np.testing.assert_array_equal(kernels.above_floor(vertices, values, mode, out),
                                          vertices[above])
    assert not kernels.best_source_value(values, np.zeros(n, np.int32), kernels.FLOOR_MIN,
                                         np.zeros(1, values.dtype))


@pytest.mark.parametrize("seed", range(5))
def test_all_at_floor_against_numpy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 100_000))
    in_degree = rng.integers(0, 3, n).astype(np.int32)
    for mode, floor in ((kernels.FLOOR_MIN, 4), (kernels.FLOOR_MAX, 6)):
        at = rng.integers(0, 5, n) if mode == kernels.FLOOR_MIN else rng.integers(6, 11, n)
        values = at.copy()
        limit = np.array([floor], values.dtype)
        assert kernels.all_at_floor(values, in_degree, mode, limit)
        # one vertex above the floor: with in-edges it may change, without none reads it
        v = int(rng.integers(0, n))
        values[v] = floor + 1 if mode == kernels.FLOOR_MIN else floor - 1
        assert kernels.all_at_floor(values, in_degree, mode, limit) == (in_degree[v] == 0)
        expected = bool(np.all(np.where(in_degree > 0, values <= floor if mode ==
                                        kernels.FLOOR_MIN else values >= floor, True)))
        assert kernels.all_at_floor(values, in_degree, mode, limit) == expected


def test_frontier_degree_sum_against_numpy():
    rng = np.random.default_rng(7)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 9, 50_000))]).astype(np.int64)
    for size in (0, 1, 1000, 60_000):
        vertices = rng.integers(0, 50_000, size).astype(np.int64)
        assert kernels.frontier_degree_sum(vertices, offsets) == int(
            (offsets[vertices + 1] - offsets[vertices]).sum())


@pytest.mark.parametrize("execution", ["async", "sync"])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_pull_with_every_vertex_at_the_floor_reads_nothing(graphs, execution, threads,
                                                             monkeypatch):
    """On a grid every label reaches the floor in the first iteration (the
    shortcut finishes it); the second pull, every vertex at the floor, reads
    and applies nothing and empties the frontier: the same labels, and the
    same iterations, as when it pulls every vertex."""
    graph = graphs["grid"]
    skipped = run_engine(graph, "cc", mode="cpu", threads=threads, execution=execution)
    np.testing.assert_array_equal(skipped.values, components_scipy(graph))
    settled = [r for r in skipped.iterations
               if r.decisions.get("cpu_floor_skip", {}).get("all_at_floor")]
    assert settled == skipped.iterations[-1:]
    assert settled[0].edges_processed == 0 and settled[0].activated == 0
    assert all(not r.decisions["cpu_floor_skip"]["all_at_floor"]
               for r in skipped.iterations[:-1] if "cpu_floor_skip" in r.decisions)
    monkeypatch.setattr(kernels, "all_at_floor", lambda *arguments: False)
    pulled = run_engine(graph, "cc", mode="cpu", threads=threads, execution=execution)
    np.testing.assert_array_equal(skipped.values, pulled.values)
    assert skipped.num_iterations == pulled.num_iterations
    assert pulled.iterations[-1].edges_processed > 0


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["grid", "rmat", "pages"])
def test_components_with_the_skip_equal_scipy_and_read_fewer_edges(graphs, name, threads,
                                                                   monkeypatch):
    graph = graphs[name]
    skipped = run_engine(graph, "cc", mode="cpu", threads=threads)
    np.testing.assert_array_equal(skipped.values, components_scipy(graph))
    full = run_engine(graph, "cc", mode="cpu", threads=threads, turned_off={"floor_skip"})
    np.testing.assert_array_equal(skipped.values, full.values)
    floors = [r.decisions["cpu_floor_skip"] for r in skipped.iterations
              if "cpu_floor_skip" in r.decisions]
    assert floors and all(f["choice"] for f in floors)
    assert not any("cpu_floor_skip" in r.decisions for r in full.iterations)
    # the notify-pulls gather no in-edge of a vertex at the floor
    assert sum(r.edges_processed for r in skipped.iterations if r.direction == "notify-pull") \
        <= sum(r.edges_processed for r in full.iterations if r.direction == "notify-pull")


def test_synchronous_components_skip_too(graphs):
    assert ConnectedComponents.gather_no_better_than_source
    result = run_engine(graphs["rmat"], "cc", mode="cpu", threads=2, execution="sync")
    np.testing.assert_array_equal(result.values, components_scipy(graphs["rmat"]))
    assert any(r.decisions.get("cpu_floor_skip", {}).get("choice")
               for r in result.iterations)


class UserComponents(MinLabels):
    """A user's label propagation, declaring what it may (honestly)."""

    needs_undirected = True
    apply_keeps_best = True
    gather_no_better_than_source = True


class SteppingDown(VertexProgram):
    """Values that each edge lowers by one (down to 0): a gather better than
    its source, declared otherwise (a false declaration)."""

    value_dtype = np.int64
    sum = "min"
    apply_keeps_best = True
    gather_no_better_than_source = True
    max_iterations = 100_000

    def init(vertex):
        return 5

    def gather(src):
        return max(src - 1, 0)

    def apply(value, accum):
        return min(value, accum)

    def activate(new, old):
        return new < old


def test_a_users_honest_declaration_passes_its_check(graphs):
    graph = graphs["rmat"]
    result = garaphpy.run(graph, UserComponents(), mode="cpu", threads=2)
    expected = components_scipy(graph)
    np.testing.assert_array_equal(result.values, expected)
    assert any("cpu_floor_skip" in r.decisions for r in result.iterations)


def test_a_users_false_declaration_raises_instead_of_answering():
    graph = garaphpy.Graph.from_arrays(np.array([0, 1]), np.array([1, 0]), num_vertices=2)
    with pytest.raises(ProgramError, match="declares gather_no_better_than_source = True"):
        garaphpy.run(graph, SteppingDown(), mode="cpu", threads=1)
    result = api.execute(graph, SteppingDown(), mode="cpu", threads=1,
                         turned_off={"floor_skip"})
    assert result.values.tolist() == [0, 0]


def test_the_declaration_needs_apply_keeps_best():
    with pytest.raises(ProgramError, match="gather_no_better_than_source = True needs"):
        class Unkept(VertexProgram):
            sum = "min"
            gather_no_better_than_source = True

            def gather(src):
                return src

            def apply(value, accum):
                return min(value, accum)
    with pytest.raises(ProgramError, match="gather_no_better_than_source = 1"):
        class NotBool(VertexProgram):
            sum = "min"
            apply_keeps_best = True
            gather_no_better_than_source = 1

            def gather(src):
                return src

            def apply(value, accum):
                return min(value, accum)
