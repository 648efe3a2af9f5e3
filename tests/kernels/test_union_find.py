"""The union-find start of min-label propagation on the CPU alone.

A CPU-alone run of a program declaring ``shortcut_labels`` on a symmetric
graph starts its first iteration from the labels of a sampled union-find
(Afforest, :mod:`garaphpy.kernels.union_find`).  Checked here: the kernel's
roots against SciPy's components (random graphs with isolated vertices and
many components, a grid, every number of sampled rounds, samples that miss
the largest component); CC runs against SciPy in every direction and
execution, on one and two threads, with sparse user ids; the run ends after
one iteration that reads no edge of a connected grid; out of core, the
pull's pages read ahead while the union-find runs (each once), and dropped
where the pull reads none; the record; the
decision; and the cases that must not use it (a directed graph, where the
fixed point is not the components; hybrid; a run resumed from a checkpoint;
the switch off).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

import garaphpy
from garaphpy import api
from garaphpy.kernels import union_find
from garaphpy.scheduler import decisions

from references import MinLabels, components_scipy, run_engine
from helpers import budget, plan_of


def symmetric_csr(num_vertices, sources, targets):
    """CSR (int64 offsets, int32 targets) of the edges and their reverses, as SciPy sees it."""
    matrix = sp.coo_matrix((np.ones(len(sources)), (sources, targets)),
                           shape=(num_vertices, num_vertices)).tocsr()
    matrix = (matrix + matrix.T).tocsr()
    matrix.sort_indices()
    return matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32), matrix


def smallest_member_roots(matrix):
    """Every vertex's smallest vertex of its component (SciPy's components)."""
    count, label = connected_components(matrix, directed=False)
    smallest = np.full(count, matrix.shape[0], np.int64)
    np.minimum.at(smallest, label, np.arange(matrix.shape[0]))
    return smallest[label]


@pytest.mark.parametrize("num_vertices, num_edges", [(1, 0), (7, 0), (10, 3), (1000, 600),
                                                     (5000, 20000), (50_000, 40_000),
                                                     (3000, 60_000)])
@pytest.mark.parametrize("rounds", [0, 1, 2, 5])
@pytest.mark.parametrize("laid_out", [False, True])
def test_roots_are_each_components_smallest_vertex(num_vertices, num_edges, rounds, laid_out):
    """Also where the first rounds' edges are laid out before (the partitions' start)."""
    rng = np.random.default_rng(num_vertices + rounds)
    offsets, targets, matrix = symmetric_csr(num_vertices, rng.integers(0, num_vertices, num_edges),
                                             rng.integers(0, num_vertices, num_edges))
    sampled = union_find.sampled_edges(offsets, targets, rounds) if laid_out else None
    roots, skipped = union_find.component_roots(offsets, targets, rounds=rounds, sampled=sampled)
    np.testing.assert_array_equal(roots, smallest_member_roots(matrix))
    assert 0 <= skipped < num_vertices      # a root when sampled; maybe linked since


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("first, rounds", [(0, 1), (0, 2), (1, 3), (0, 40)])
def test_prefetching_rounds_link_as_the_plain_rounds(threads, first, rounds):
    """Out-lists of 40 edges on average (160 bytes): the first phase prefetches."""
    rng = np.random.default_rng(rounds)
    offsets, targets, matrix = symmetric_csr(3000, rng.integers(0, 3000, 60_000),
                                             rng.integers(0, 3000, 60_000))
    assert targets.nbytes >= union_find.PREFETCH_FROM_BYTES * 3000
    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        plain, ahead = np.arange(3000), np.arange(3000)
        union_find.link_rounds(offsets, targets, plain, first, rounds)
        union_find.link_rounds_ahead(offsets, targets, ahead, first, rounds)
    finally:
        numba.set_num_threads(previous)
    np.testing.assert_array_equal(ahead, plain)
    assert rounds < 40 or np.array_equal(ahead, smallest_member_roots(matrix))


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("rounds", [1, 2, 3])
@pytest.mark.parametrize("ahead_from", [0, 2**62])
def test_laid_out_rounds_with_and_without_prefetch_give_the_roots(threads, rounds, ahead_from,
                                                                  monkeypatch):
    """The partitions' first rounds over laid-out edges, whose links halve the
    paths they climb, prefetching (a parent array over the threshold) or not:
    SciPy's roots, on several threads, with long chains of hooked roots (many
    small components joined in the later rounds)."""
    monkeypatch.setattr(union_find, "PREFETCH_PARENT_FROM_BYTES", ahead_from)
    rng = np.random.default_rng(rounds + threads)
    n = 20_000
    offsets, targets, matrix = symmetric_csr(n, rng.integers(0, n, 15_000),
                                             rng.integers(0, n, 15_000))
    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        sampled = union_find.sampled_edges(offsets, targets, rounds)
        roots, _ = union_find.component_roots(offsets, targets, sampled=sampled)
    finally:
        numba.set_num_threads(previous)
    np.testing.assert_array_equal(roots, smallest_member_roots(matrix))


def test_halving_links_join_as_plain_links():
    """Serial links, halving or not, give the same compressed forest."""
    rng = np.random.default_rng(7)
    n = 3000
    pairs = rng.integers(0, n, (2, 4000))
    plain, halved = np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64)
    union_find.link_pairs(pairs[0], pairs[1], plain)
    for u, v in pairs.T:
        union_find.link_halving(u, v, halved)
    union_find.compress(plain)
    union_find.compress(halved)
    np.testing.assert_array_equal(halved, plain)


def test_a_sample_that_names_a_small_component_changes_no_root():
    """Two vertices sampled, both in the small component: the large one then
    links along all its remaining edges, and the roots are the same."""
    chain = np.arange(99)
    sources = np.concatenate([[0], chain + 2])
    targets = np.concatenate([[1], chain + 3])
    offsets, edges, matrix = symmetric_csr(102, sources, targets)
    assert union_find.most_frequent_root(np.array([0, 0, 2, 2, 2], np.int64), 5) == 2
    roots, skipped = union_find.component_roots(offsets, edges, rounds=1, sample_size=1)
    assert skipped == 0
    np.testing.assert_array_equal(roots, smallest_member_roots(matrix))


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_grid_roots_on_several_threads(threads):
    graph = garaphpy.Graph.load("grid:200x150", progress=False)
    offsets, targets = np.asarray(graph.store.out_offsets), np.asarray(graph.store.out_targets)
    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        roots, skipped = union_find.component_roots(offsets, targets)
    finally:
        numba.set_num_threads(previous)
    assert skipped == 0 and not roots.any()


def test_least_over_sets_and_lowering_labels_match_numpy():
    rng = np.random.default_rng(4)
    parent = np.arange(500, dtype=np.int64)
    for u, v in rng.integers(0, 500, (300, 2)):
        union_find.link(u, v, parent)
    union_find.compress(parent)
    values = rng.integers(-1000, 1000, 500)
    least = np.full(500, np.iinfo(np.int64).max)
    np.minimum.at(least, parent, values)
    np.testing.assert_array_equal(union_find.least_over_sets(parent, values), least[parent])
    labels = rng.integers(0, 100, 50)
    vertices = rng.choice(50, 20, replace=False)
    lower = rng.integers(0, 100, 20)
    expected = labels.copy()
    expected[vertices] = np.minimum(labels[vertices], lower)
    in_range = (vertices >= 10) & (vertices < 30)
    expected_lowered = np.count_nonzero(lower[in_range] < labels[vertices][in_range])
    assert union_find.lower_labels(labels, vertices, lower, 10, 30) == expected_lowered
    np.testing.assert_array_equal(labels, expected)


def test_labels_are_the_roots_user_ids_and_drops_are_counted():
    parent = np.array([0, 0, 2, 2], np.int64)
    labels = np.array([10, 11, 13, 12], np.int64)
    ids = np.array([10, 11, 12, 13], np.int64)
    assert union_find.write_labels(parent, ids, labels) == 2
    np.testing.assert_array_equal(labels, [10, 10, 12, 12])


@pytest.fixture(scope="module")
def graphs(tmp_path_factory, request):
    base = tmp_path_factory.mktemp("union-find")
    rng = np.random.default_rng(3)
    sparse_ids = rng.choice(10**12, 400, replace=False)
    return {
        "grid": garaphpy.Graph.load("grid:60x40", store=base / "grid", progress=False),
        "rmat": garaphpy.Graph.load("rmat:12", store=base / "rmat", progress=False),
        "sample": garaphpy.Graph.load(
            request.config.rootpath / "examples" / "graphs" / "sample-web.txt.gz",
            store=base / "sample", progress=False),
        # user ids far from 0..n-1, many components and isolated vertices
        "sparse-ids": garaphpy.Graph.from_arrays(
            sparse_ids[rng.integers(0, 400, 150)], sparse_ids[rng.integers(0, 400, 150)],
            store=base / "sparse-ids"),
    }


@pytest.mark.parametrize("name", ["grid", "rmat", "sample", "sparse-ids"])
@pytest.mark.parametrize("execution", ["async", "sync"])
@pytest.mark.parametrize("direction", ["auto", "pull", "notify-pull"])
@pytest.mark.parametrize("threads", [1, 2])
def test_cc_equals_scipy(graphs, name, execution, direction, threads):
    graph = graphs[name]
    result = run_engine(graph, "cc", mode="cpu", threads=threads, execution=execution,
                        direction=direction)
    np.testing.assert_array_equal(result.values, components_scipy(graph))
    first = result.iterations[0].decisions["cpu_union_find_start"]
    assert first["choice"] is True and first["seconds"] >= 0
    assert result.converged and result.num_iterations == 1
    assert result.iterations[0].activated == 0


def test_a_connected_grid_reads_no_edge_and_ends_after_one_iteration(graphs):
    graph = graphs["grid"]
    result = run_engine(graph, "cc", mode="cpu", threads=2)
    record = result.iterations[0]
    assert result.num_iterations == 1 and record.edges_processed == 0
    assert record.decisions["cpu_union_find_start"]["dropped"] == graph.num_vertices - 1
    assert record.decisions["cpu_union_find_start"]["seconds"] <= record.seconds


def test_switched_off_labels_start_from_the_ids(graphs, monkeypatch):
    graph = graphs["grid"]
    result = run_engine(graph, "cc", mode="cpu", threads=2, turned_off={"union_find_start"})
    np.testing.assert_array_equal(result.values, components_scipy(graph))
    assert result.num_iterations > 1
    assert all("cpu_union_find_start" not in r.decisions for r in result.iterations)


def test_decision():
    assert decisions.union_find_start(True, True, "cpu")
    assert not decisions.union_find_start(True, False, "cpu")     # directed
    assert not decisions.union_find_start(False, True, "cpu")     # not min-label propagation
    assert not decisions.union_find_start(True, True, "hybrid")
    assert not decisions.union_find_start(True, True, "gpu")


class DirectedLabels(MinLabels):
    """Min-label propagation along edge directions: a vertex ends with the
    smallest id that reaches it, which components do not give."""

    shortcut_labels = True


def test_a_directed_graph_keeps_label_propagation(tmp_path):
    # 0 -> 1 -> 2 and 3 -> 2: vertex 3 is reached by no smaller id
    graph = garaphpy.Graph.from_arrays(np.array([0, 1, 3]), np.array([1, 2, 2]),
                                       store=tmp_path / "s")
    assert graph.directed
    result = run_engine(graph, DirectedLabels(), mode="cpu", threads=2)
    np.testing.assert_array_equal(result.values, [0, 0, 0, 3])
    assert all("cpu_union_find_start" not in r.decisions for r in result.iterations)


def test_a_users_declaration_on_a_symmetric_graph_uses_it(graphs):
    graph = graphs["rmat"].as_undirected()
    result = run_engine(graph, DirectedLabels(), mode="cpu", threads=2)
    np.testing.assert_array_equal(result.values, components_scipy(graph))
    assert result.iterations[0].decisions["cpu_union_find_start"]["choice"] is True


def test_out_of_core_pages_give_the_same_labels(tmp_path):
    graph = garaphpy.Graph.load("rmat:11", store=tmp_path / "s", progress=False,
                                max_page_bytes=4000, max_shard_edges=300)
    graph = graph.as_undirected()
    assert len(graph.store.pages) > 6
    options = budget(graph, "cc", 0.25)
    assert plan_of(graph.store, **options) is not None       # pages streamed
    result = run_engine(graph, "cc", mode="cpu", threads=2, **options)
    np.testing.assert_array_equal(result.values, components_scipy(graph))
    assert result.iterations[0].decisions["cpu_union_find_start"]["choice"] is True


def pages_apart(tmp_path, spec):
    """``spec`` made symmetric (``"components"``: a random graph of many
    components), in many small pages, and a host budget caching a quarter of
    them (the others streamed)."""
    pages = dict(store=tmp_path / "s", progress=False, max_page_bytes=4000,
                 max_shard_edges=300)
    if spec == "components":
        rng = np.random.default_rng(7)
        graph = garaphpy.Graph.from_arrays(rng.integers(0, 3000, 2500),
                                           rng.integers(0, 3000, 2500), num_vertices=3000,
                                           **pages)
    else:
        graph = garaphpy.Graph.load(spec, **pages)
    graph = graph.as_undirected()
    options = budget(graph, "cc", 0.25)
    assert plan_of(graph.store, **options) is not None       # pages streamed
    return graph, options


def test_pages_from_disk_are_read_ahead_while_the_union_find_runs(tmp_path):
    """Out of core, the pull's reads begin before the union-find start and
    the pull takes them: labels as SciPy's, every page read once (the cached
    ones into the cache), nothing dropped."""
    graph, options = pages_apart(tmp_path, "components")
    result = run_engine(graph, "cc", mode="cpu", threads=2, **options)
    np.testing.assert_array_equal(result.values, components_scipy(graph))
    record = result.iterations[0]
    assert record.decisions["cpu_pull_read_ahead"]["choice"] is True
    assert record.pages == len(graph.store.pages)       # the pull read every page
    asked = record.decisions["host_pages"]
    assert record.bytes_read == asked["asked_host_bytes"] + asked["asked_disk_bytes"] \
        == sum(info.disk_bytes for info in graph.store.pages)
    assert record.bytes_dropped == 0


def test_a_connected_graph_from_disk_drops_the_read_ahead(tmp_path):
    """Where the union-find leaves every vertex at the floor the pull reads no
    page: the reads begun for it stop, what they read counted as dropped, at
    most the read-ahead."""
    graph, options = pages_apart(tmp_path, "grid:60x40")
    result = run_engine(graph, "cc", mode="cpu", threads=2, **options)
    np.testing.assert_array_equal(result.values, components_scipy(graph))
    record = result.iterations[0]
    assert result.num_iterations == 1 and record.pages == 0
    assert record.decisions["cpu_floor_skip"]["all_at_floor"] is True
    assert record.decisions["cpu_pull_read_ahead"]["choice"] is True
    assert record.bytes_dropped == record.bytes_read <= options["readahead_bytes"]


def test_a_resumed_run_does_not_start_again(tmp_path, monkeypatch):
    """Label propagation alone until a crash after iteration 2, then resumed with
    shortcuts and the start on: iteration 3 is not a first iteration, and label propagation
    goes on from the checkpoint."""
    graph = garaphpy.Graph.load("grid:40x30", store=tmp_path / "g", progress=False)
    options = dict(mode="cpu", threads=2, execution="sync", checkpoint_dir=tmp_path / "ck",
                   checkpoint_every=1)

    def crash_after_two(record):
        if record.iteration == 2:
            raise RuntimeError("crash")

    with pytest.raises(RuntimeError, match="crash"):      # many iterations without shortcuts
        api.execute(graph, "cc", on_iteration=crash_after_two, turned_off={"shortcut_labels"},
                    **options)
    result = garaphpy.run(graph, "cc", resume=True, **options)
    np.testing.assert_array_equal(result.values, components_scipy(graph))
    # a fresh start would have ended after one iteration, with the start recorded
    assert result.num_iterations > 3
    assert all("cpu_union_find_start" not in r.decisions for r in result.iterations)
