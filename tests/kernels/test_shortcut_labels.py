"""Label shortcuts for min-label propagation on the CPU.

A program declaring ``shortcut_labels`` (the built-in CC) runs on the CPU
alone with pointer jumping after each iteration.  Checked here: the kernel
against full pointer jumping in NumPy (consecutive and arbitrary user ids);
CC with shortcuts against SciPy's components and the runs without, in every
direction and execution, one and two threads, on grids, a chain, rmat and
the sample web graph with sparse ids; far fewer iterations on a grid; the
decision; the declaration's checks, at class definition and at the start of
a run, for a user's honest program and for false ones.
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy import config
from garaphpy.kernels import cpu as kernels
from garaphpy.program import ProgramError
from garaphpy.scheduler import decisions

import references
from references import MinLabels, components_scipy
from helpers import DoublingGather, OffByOneInit, OwnLabels, TakesTheSum


#: The shortcut itself is under test: labels start from the ids, not from
#: the union-find start (tests/test_union_find.py).
LABELS_FROM_IDS = frozenset({"union_find_start"})


def run_engine(graph, program, sources=(), turned_off=(), **options):
    return references.run_engine(graph, program, sources,
                                 turned_off=LABELS_FROM_IDS | set(turned_off), **options)


@pytest.fixture(scope="module")
def graphs(tmp_path_factory, request):
    base = tmp_path_factory.mktemp("shortcut")
    n = 3000
    chain = np.arange(n - 1)
    sparse_ids = np.array([5, 17, 17, 900, 4_000_000_000, 3, 12, 12, 88, 7])
    return {
        "grid": garaphpy.Graph.load("grid:60x40", store=base / "grid", progress=False),
        "chain": garaphpy.Graph.from_arrays(chain, chain + 1, num_vertices=n,
                                            store=base / "chain"),
        "rmat": garaphpy.Graph.load("rmat:12", store=base / "rmat", progress=False),
        "sample": garaphpy.Graph.load(
            request.config.rootpath / "examples" / "graphs" / "sample-web.txt.gz",
            store=base / "sample", progress=False),
        # user ids far from 0..n-1: the labels are looked up in the id table
        "sparse-ids": garaphpy.Graph.from_arrays(sparse_ids[::2], sparse_ids[1::2],
                                                 store=base / "sparse-ids"),
    }


def cc(graph, **options):
    return run_engine(graph, "cc", **{"mode": "cpu", "threads": 2, **options})


def full_jumps(labels: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Every label replaced by the label it names until none drops (NumPy)."""
    labels = labels.copy()
    while True:
        jumped = labels[np.searchsorted(ids, labels)]
        if np.array_equal(jumped, labels):
            return labels
        labels = np.minimum(labels, jumped)


def one_propagation(sources, targets, ids):
    """Labels after one synchronous min-label step from the ids (NumPy)."""
    labels = ids.copy()
    np.minimum.at(labels, targets, ids[sources])
    return labels


@pytest.mark.parametrize("ids_kind", ["consecutive", "offset", "table"])
def test_kernel_equals_full_pointer_jumping_in_numpy(ids_kind):
    rng = np.random.default_rng(7)
    n = 5000
    sources, targets = rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n)
    sources, targets = np.concatenate([sources, targets]), np.concatenate([targets, sources])
    ids = {"consecutive": np.arange(n), "offset": np.arange(n) + 1000,
           "table": np.cumsum(rng.integers(1, 50, n)) - 20}[ids_kind].astype(np.int64)
    labels = one_propagation(sources, targets, ids)
    expected = full_jumps(labels, ids)
    values = labels.copy()
    active = np.zeros(n, np.bool_)
    dropped = kernels.shortcut_labels(np.arange(n, dtype=np.int64), values, ids, active, True)
    np.testing.assert_array_equal(values, expected)
    assert dropped == np.count_nonzero(expected < labels) > 0
    np.testing.assert_array_equal(active, expected < labels)
    # listed vertices only, unmarked
    listed = np.arange(0, n, 3, dtype=np.int64)
    values, active = labels.copy(), np.zeros(n, np.bool_)
    kernels.shortcut_labels(listed, values, ids, active, False)
    assert not active.any()
    np.testing.assert_array_equal(values[listed], expected[listed])
    untouched = np.setdiff1d(np.arange(n), listed)
    np.testing.assert_array_equal(values[untouched], labels[untouched])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("direction", ["auto", "pull", "notify-pull"])
@pytest.mark.parametrize("name", ["grid", "chain", "rmat", "sample", "sparse-ids"])
def test_cc_with_shortcuts_equals_scipy_and_the_run_without(graphs, name, direction,
                                                            execution, threads, monkeypatch):
    graph = graphs[name]
    result = cc(graph, direction=direction, execution=execution, threads=threads)
    np.testing.assert_array_equal(result.values, components_scipy(graph))
    assert result.converged
    assert all(r.decisions["shortcut_labels"]["choice"] for r in result.iterations)
    without = cc(graph, direction=direction, execution=execution, threads=threads,
                 turned_off={"shortcut_labels"})
    np.testing.assert_array_equal(result.values, without.values)
    if execution == "sync":     # async counts depend on the threads' interleaving
        assert result.num_iterations <= without.num_iterations
    assert not any("shortcut_labels" in r.decisions for r in without.iterations)


def test_a_grid_takes_a_handful_of_iterations_instead_of_its_diameter(graphs, monkeypatch):
    graph = graphs["grid"]      # 60x40: label propagation needs about 100 iterations
    result = cc(graph, execution="sync")
    without = cc(graph, execution="sync", turned_off={"shortcut_labels"})
    assert without.num_iterations >= 99
    assert result.num_iterations <= 5
    first = result.iterations[0].decisions["shortcut_labels"]
    assert first["choice"] == "all" and first["vertices"] == graph.num_vertices
    assert first["sample_dropped"] >= first["min_fraction"] * first["sample_size"] > 0
    assert first["dropped"] >= first["sample_dropped"]


def test_one_processor_alone_shortcuts_and_in_hybrid_runs_only_the_gpu():
    assert decisions.shortcut_labels(True, "cpu")
    assert not decisions.shortcut_labels(True, "hybrid", processor="cpu")
    assert decisions.shortcut_labels(True, "hybrid", processor="gpu")
    assert not decisions.shortcut_labels(True, "hybrid")
    assert not decisions.shortcut_labels(True, "gpu", processor="cpu")
    assert decisions.shortcut_labels(True, "gpu")
    assert not decisions.shortcut_labels(False, "cpu")
    assert not decisions.shortcut_labels(True, "gpu", enabled=False)


def test_every_vertex_is_shortcut_only_where_the_sample_says_labels_travel():
    assert decisions.shortcut_every_vertex(1024, 4096, 0.25)
    assert not decisions.shortcut_every_vertex(1023, 4096, 0.25)
    assert not decisions.shortcut_every_vertex(0, 0, 0.25)


def test_a_low_diameter_graph_shortcuts_a_sample_after_its_pulls(graphs, monkeypatch):
    # rmat: few labels drop in the sample; the O(|V|) pass is left out
    monkeypatch.setattr(config, "CPU_SHORTCUT_SAMPLE", 256)
    result = cc(graphs["rmat"], direction="pull")
    entries = [r.decisions["shortcut_labels"] for r in result.iterations]
    assert entries[0]["choice"] == "sample" and entries[0]["sample_size"] >= 256
    assert entries[0]["sample_dropped"] < 0.25 * entries[0]["sample_size"]
    np.testing.assert_array_equal(result.values, components_scipy(graphs["rmat"]))


def test_a_users_honest_declaration_is_used(graphs, monkeypatch):
    graph = graphs["grid"]
    result = run_engine(graph, OwnLabels(), mode="cpu", threads=2, execution="sync")
    np.testing.assert_array_equal(result.values, components_scipy(graph))
    assert result.num_iterations <= 5
    assert result.iterations[0].decisions["shortcut_labels"]["dropped"] > 0


def test_a_false_declaration_is_refused_when_the_class_is_defined():
    with pytest.raises(ProgramError, match="needs sum 'min'"):
        class MaxLabels(OwnLabels):
            sum = "max"

            def apply(value, accum):
                return max(value, accum)
    with pytest.raises(ProgramError, match="integer values"):
        class RealLabels(OwnLabels):
            value_dtype = np.float64
    with pytest.raises(ProgramError, match=r"gather\(src\) \(got gather\('src', 'weight'\)"):
        class WeightedLabels(OwnLabels):
            def gather(src, weight):
                return src
    with pytest.raises(ProgramError, match=r"init\(vertex\) \(got init\('out_degree',\)"):
        class DegreeLabels(OwnLabels):
            def init(out_degree):
                return out_degree
    with pytest.raises(ProgramError, match="shortcut_labels = 1; expected True or False"):
        class NotABool(OwnLabels):
            shortcut_labels = 1


@pytest.mark.parametrize("program, message", [
    (OffByOneInit, "instead of its own id"),
    (DoublingGather, "pass labels on unchanged"),
    (TakesTheSum, "keep the smaller"),
])
def test_a_false_declaration_raises_at_the_start_of_a_run(graphs, program, message):
    with pytest.raises(ProgramError, match=message):
        run_engine(graphs["grid"], program(), mode="cpu", threads=2)
