"""The CPU engine's mechanics against independent references (SciPy, slow numpy).

The programs here are written in this file, so the engine is tested on its
own: pages and parts cut through heavy vertices, pull against notify-pull,
sync against async, threads, the iteration records, and the failure paths.
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

import garaphpy
from garaphpy import api, config
from garaphpy.api import NotConvergedError, NotConvergedWarning
from garaphpy.errors import ConfigError
from garaphpy.program import ProgramError, VertexProgram
from garaphpy.scheduler import decisions
from helpers import ShortestPaths


def dangling_mass(value, out_degree):
    return value if out_degree == 0 else 0.0


class PageRankProgram(VertexProgram):
    """PageRank with the dangling mass spread uniformly, L1 tolerance."""

    constants = {"damping": 0.85}
    tolerance = 1e-10
    aggregates = {"dangling": ("add", dangling_mass)}

    def init(num_vertices):
        return 1.0 / num_vertices

    def gather(src, src_out_degree):
        return src / src_out_degree

    def apply(accum, num_vertices, dangling):
        return (1.0 - damping) / num_vertices + damping * (accum + dangling / num_vertices)

    def activate(new, old):
        return True


class MaxLabel(VertexProgram):
    """Propagate the largest user id along edges (tests int values, max monoid)."""

    value_dtype = np.int64
    sum = "max"

    def init(vertex):
        return vertex

    def gather(src):
        return src

    def apply(value, accum):
        return max(value, accum)

    def activate(new, old):
        return new != old


def random_graph(seed, n=3000, m=30000, heavy=True):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    if heavy:  # one vertex with far more in-edges than a shard or a part carries
        dst[: m // 5] = 7
    weights = rng.integers(1, 20, m).astype(np.float64)
    return src, dst, weights


def small_pages(src, dst, weights=None, **options):
    """A graph cut into many pages and shards, so heavy vertices cross both."""
    return garaphpy.Graph.from_arrays(src, dst, weights, max_shard_edges=500,
                                      max_page_bytes=40_000, **options)


def stored_matrix(graph):
    in_offsets, sources, weights = graph.store.csc()
    destinations = np.repeat(np.arange(graph.num_vertices), np.diff(in_offsets))
    values = weights.astype(np.float64) if weights is not None else np.ones(sources.size)
    return sp.csr_matrix((values, (sources, destinations)),
                         shape=(graph.num_vertices, graph.num_vertices))


def reference_pagerank(matrix, damping=0.85, iterations=200):
    n = matrix.shape[0]
    out_degree = np.asarray((matrix != 0).sum(axis=1)).ravel()
    pattern = (matrix != 0).astype(np.float64).tocsr()
    rank = np.full(n, 1.0 / n)
    for _ in range(iterations):
        share = np.divide(rank, out_degree, out=np.zeros(n), where=out_degree > 0)
        dangling = rank[out_degree == 0].sum()
        rank = (1 - damping) / n + damping * (pattern.T @ share + dangling / n)
    return rank


@pytest.fixture(scope="module")
def graph():
    src, dst, weights = random_graph(1)
    return small_pages(src, dst, weights)


def test_graph_really_has_split_vertices_and_many_pages(graph):
    assert len(graph.store.pages) > 5
    assert graph.store.shards["split"].sum() > 3


@pytest.mark.parametrize("direction", ["auto", "pull", "notify-pull"])
@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("threads", [1, 2])
def test_sssp_equals_dijkstra(graph, direction, execution, threads):
    reference = csgraph.dijkstra(stored_matrix(graph), indices=[3])[0]
    source = int(graph.original_ids([3])[0])
    result = garaphpy.run(graph, ShortestPaths, sources=[source], direction=direction,
                          execution=execution, threads=threads)
    assert result.converged and result.stop_reason == "no active vertex"
    np.testing.assert_array_equal(result.values, reference)
    if direction != "auto":
        assert {r.direction for r in result.iterations} == {direction}
        assert all(r.forced for r in result.iterations)


def test_auto_switch_uses_both_directions_and_records_them(graph):
    source = int(graph.original_ids([3])[0])
    result = garaphpy.run(graph, ShortestPaths, sources=[source])
    directions = [r.direction for r in result.iterations]
    assert "pull" in directions and "notify-pull" in directions
    for record in result.iterations:
        expected = decisions.choose_direction(record.active_fraction, record.rho)
        assert record.direction == expected and not record.forced
        assert record.seconds > 0 and record.active_vertices > 0
    assert result.iterations[0].active_vertices == 1
    assert result.iterations[-1].activated == 0


@pytest.mark.parametrize("direction", ["auto", "pull"])
def test_pagerank_matches_power_iteration(graph, direction):
    # (notify-pull would skip vertices no active vertex points to, which PageRank's
    # teleport and dangling terms still change: it is no choice for PageRank)
    reference = reference_pagerank(stored_matrix(graph))
    result = garaphpy.run(graph, PageRankProgram, direction=direction, max_iterations=300)
    assert {r.direction for r in result.iterations} == {"pull"}
    assert result.converged and result.stop_reason == "tolerance"
    np.testing.assert_allclose(result.values, reference, rtol=1e-6)
    assert abs(result.values.sum() - 1.0) < 1e-9


def test_async_pagerank_reaches_the_same_fixed_point(graph):
    reference = reference_pagerank(stored_matrix(graph))
    result = garaphpy.run(graph, PageRankProgram, execution="async", max_iterations=300)
    np.testing.assert_allclose(result.values, reference, rtol=1e-6)


def test_program_constants_are_per_instance(graph):
    reference = reference_pagerank(stored_matrix(graph), damping=0.5)
    result = garaphpy.run(graph, PageRankProgram(damping=0.5), max_iterations=300)
    np.testing.assert_allclose(result.values, reference, rtol=1e-6)


@pytest.mark.parametrize("direction", ["pull", "notify-pull"])
def test_integer_max_labels_equal_weak_components_of_a_dag(direction):
    # on an undirected graph max-label propagation gives each component's max id
    rng = np.random.default_rng(4)
    src = rng.integers(0, 4000, 3000) * 11 + 1
    dst = rng.integers(0, 4000, 3000) * 11 + 1
    graph = small_pages(src, dst, directed=False)
    result = garaphpy.run(graph, MaxLabel, direction=direction)
    matrix = stored_matrix(graph)
    _, labels = csgraph.connected_components(matrix, directed=False)
    ids = graph.original_ids()
    expected = np.zeros(graph.num_vertices, np.int64)
    for label in np.unique(labels):
        members = labels == label
        expected[members] = ids[members].max()
    np.testing.assert_array_equal(result.values, expected)


def test_needs_undirected_symmetrizes_with_the_same_ids():
    class MinLabel(MaxLabel):
        sum = "min"
        needs_undirected = True

        def apply(value, accum):
            return min(value, accum)

    graph = garaphpy.Graph.from_arrays(np.array([10, 20, 40]), np.array([20, 30, 50]))
    result = garaphpy.run(graph, MinLabel)
    assert dict(zip(result.original_ids(), result.values)) == {10: 10, 20: 10, 30: 10,
                                                               40: 40, 50: 40}


def test_graph_without_edges_and_isolated_vertices():
    graph = garaphpy.Graph.from_arrays(np.zeros(0, np.int64), np.zeros(0, np.int64),
                                       num_vertices=5)
    result = garaphpy.run(graph, PageRankProgram)
    np.testing.assert_allclose(result.values, np.full(5, 0.2))
    sssp = garaphpy.run(garaphpy.Graph.from_arrays([0], [1], [2.0], num_vertices=4),
                        ShortestPaths, sources=[3])
    assert list(sssp.values) == [math.inf, math.inf, math.inf, 0.0]  # source has no out-edges
    assert sssp.num_iterations == 1


def test_nonconvergence_is_reported():
    src, dst, weights = random_graph(2, heavy=False)
    graph = small_pages(src, dst, weights)
    with pytest.warns(NotConvergedWarning, match="did not converge in 2 iterations"):
        result = garaphpy.run(graph, PageRankProgram, max_iterations=2)
    assert not result.converged and result.stop_reason == "iteration limit"
    with pytest.raises(NotConvergedError):
        garaphpy.run(graph, PageRankProgram, max_iterations=2, raise_on_nonconvergence=True)


def test_run_argument_errors_name_the_argument(graph):
    source = int(graph.original_ids([0])[0])
    for kwargs, needle in [({"mode": "quantum"}, "mode"), ({"execution": "lazy"}, "execution"),
                           ({"direction": "push"}, "direction"),
                           ({"max_iterations": 0}, "max_iterations"),
                           ({"threads": 0}, "threads"), ({"sources": [10**9]}, "sources"),
                           ({"tolerance": -1.0}, "tolerance")]:
        with pytest.raises(ConfigError, match=needle):
            garaphpy.run(graph, ShortestPaths, **{"sources": [source], **kwargs})
    with pytest.raises(ConfigError, match="needs at least one source"):
        garaphpy.run(graph, ShortestPaths)
    unweighted = garaphpy.Graph.from_arrays([0, 1], [1, 2])
    with pytest.raises(ConfigError, match="needs edge weights"):
        garaphpy.run(unweighted, ShortestPaths, sources=[0])
    with pytest.raises(ConfigError, match="program"):
        garaphpy.run(graph, object())


def test_a_program_outside_the_subset_is_rejected_with_its_line():
    with pytest.raises(ProgramError, match=r"test_engine_cpu.py:\d+: in gather: loops"):
        class Looping(VertexProgram):
            def init(vertex):
                return 0.0

            def gather(src):
                total = 0.0
                for _ in range(3):
                    total += src
                return total

            def apply(value, accum):
                return accum

            def activate(new, old):
                return new != old


def test_numba_thread_layer_is_threadsafe_when_available():
    import numba

    from garaphpy import _numba_setup
    from garaphpy.kernels import cpu as kernels

    if "NUMBA_THREADING_LAYER" in os.environ or not _numba_setup._threadsafe_layer_available():
        pytest.skip("the threading layer is the user's, or neither TBB nor OpenMP is installed")
    kernels.frontier_of(np.ones(64, np.bool_), 2)
    assert _numba_setup.THREADSAFE
    assert numba.threading_layer() in ("tbb", "omp")
    assert isinstance(_numba_setup.parallel_section(), contextlib.nullcontext)


def test_a_released_thread_team_ends_and_is_made_again():
    from concurrent.futures import ThreadPoolExecutor

    import numba

    from garaphpy import _numba_setup
    from garaphpy.kernels import cpu as kernels

    if numba.config.NUMBA_NUM_THREADS < 2 or not os.path.isdir("/proc/self/task"):
        pytest.skip("needs two numba threads and /proc")
    kernels.frontier_of(np.ones(64, np.bool_), 2)       # the layer is chosen
    if _numba_setup._libgomp_pause() is None:
        assert not _numba_setup.release_thread_team()
        pytest.skip(f"threading layer {numba.threading_layer()}: no libgomp team to end")

    def os_threads() -> int:
        return len(os.listdir("/proc/self/task"))

    def make_team() -> int:
        numba.set_num_threads(2)
        kernels.frontier_of(np.ones(64, np.bool_), 2)
        return os_threads()

    with ThreadPoolExecutor(max_workers=1) as worker:
        without_team = worker.submit(os_threads).result()
        with_team = worker.submit(make_team).result()
        assert with_team == without_team + 1
        assert worker.submit(_numba_setup.release_thread_team).result()
        assert worker.submit(os_threads).result() == without_team
        assert worker.submit(make_team).result() == with_team
        assert worker.submit(_numba_setup.release_thread_team).result()


def test_parts_never_smaller_than_the_minimum(graph, monkeypatch):
    # a tiny minimum forces many parts per page: results must not change
    monkeypatch.setattr(config, "CPU_MIN_PART_EDGES", 1)
    reference = csgraph.dijkstra(stored_matrix(graph), indices=[3])[0]
    source = int(graph.original_ids([3])[0])
    result = garaphpy.run(graph, ShortestPaths, sources=[source], direction="pull", threads=2)
    np.testing.assert_array_equal(result.values, reference)


def test_no_warning_when_fixed_iteration_program_runs_out(graph):
    class Fixed(PageRankProgram):
        run_until_limit = True
        tolerance = None

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = garaphpy.run(graph, Fixed, max_iterations=3)
    assert result.converged and result.num_iterations == 3


def test_two_runs_in_two_python_threads_at_once(graph):
    """The GPU feeder of hybrid runs is a second Python thread: numba must cope."""
    import threading

    source = int(graph.original_ids([3])[0])
    reference = csgraph.dijkstra(stored_matrix(graph), indices=[3])[0]
    garaphpy.run(graph, ShortestPaths, sources=[source])  # compile first
    results, errors = [None, None], []

    def work(slot):
        try:
            results[slot] = garaphpy.run(graph, ShortestPaths, sources=[source], threads=2,
                                         direction="pull" if slot else "notify-pull")
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(slot,)) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for result in results:
        np.testing.assert_array_equal(result.values, reference)


# ---------------------------------------------------- source-side precompute --
class OutDegreeCost(VertexProgram):
    """Shortest paths where leaving u costs outdeg(u): a min program whose gather is
    source-side (its edge work can be computed once per source vertex)."""

    sum = "min"
    initially_active = "sources"
    needs_sources = True

    def init(is_source):
        return 0.0 if is_source else math.inf

    def gather(src, src_out_degree):
        return src + src_out_degree

    def apply(value, accum):
        return min(value, accum)

    def activate(new, old):
        return new < old


class DecayingMaxLabel(VertexProgram):
    """Largest (user id - out-degrees paid along the way): a max program, int values."""

    value_dtype = np.int64
    sum = "max"

    def init(vertex):
        return vertex

    def gather(src, src_out_degree):
        return src - src_out_degree

    def apply(value, accum):
        return max(value, accum)

    def activate(new, old):
        return new != old


def runs_with_and_without_precompute(monkeypatch, graph, program, **options):
    results = {}
    for enabled in (True, False):
        results[enabled] = api.execute(graph, program, **options, turned_off=(
            () if enabled else {"source_precompute"}))
        pulls = [r for r in results[enabled].iterations if r.direction == "pull"]
        assert pulls, "the comparison needs pull iterations"
        assert all(r.gather_precomputed == enabled for r in pulls)
    return results[True], results[False]


# two threads compile the programs' parallel modules too: the whole suite only
@pytest.mark.parametrize("threads", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_precompute_changes_no_min_or_max_result(graph, monkeypatch, threads):
    source = int(graph.original_ids([3])[0])
    with_it, without = runs_with_and_without_precompute(
        monkeypatch, graph, OutDegreeCost, sources=[source], direction="pull", threads=threads)
    np.testing.assert_array_equal(with_it.values, without.values)
    # and both are the shortest paths with edge cost outdeg(source)
    matrix = stored_matrix(graph).tocsr()
    costs = matrix.copy()
    costs.data = np.repeat(np.diff(matrix.indptr), np.diff(matrix.indptr)).astype(np.float64)
    np.testing.assert_array_equal(with_it.values, csgraph.dijkstra(costs, indices=[3])[0])
    with_it, without = runs_with_and_without_precompute(monkeypatch, graph, DecayingMaxLabel,
                                                        direction="auto", threads=threads)
    np.testing.assert_array_equal(with_it.values, without.values)
    assert [r.edges_processed for r in with_it.iterations] == \
        [r.edges_processed for r in without.iterations]


def test_precompute_changes_no_sum_result(graph, monkeypatch):
    with_it, without = runs_with_and_without_precompute(monkeypatch, graph, PageRankProgram,
                                                        max_iterations=300, threads=2)
    np.testing.assert_allclose(with_it.values, without.values, rtol=1e-12, atol=0)
    assert with_it.num_iterations == without.num_iterations


def test_precompute_only_where_its_semantics_hold(graph):
    source = int(graph.original_ids([3])[0])
    asynchronous = garaphpy.run(graph, PageRankProgram, execution="async", max_iterations=300)
    assert not any(r.gather_precomputed for r in asynchronous.iterations)
    # notify-pull gathers only the notified vertices' in-edges: no O(|V|) pass first
    mixed = garaphpy.run(graph, OutDegreeCost, sources=[source])
    assert {r.direction for r in mixed.iterations} == {"pull", "notify-pull"}
    assert all(r.gather_precomputed == (r.direction == "pull") for r in mixed.iterations)
    # a gather of src alone reads one array per edge either way: nothing to save
    labels = garaphpy.run(graph, MaxLabel, direction="pull")
    assert not any(r.gather_precomputed for r in labels.iterations)
    assert decisions.precompute_source_gathers("pull", True, frozenset({"src", "src_in_degree"}),
                                              True)
    assert not decisions.precompute_source_gathers("pull", True, frozenset({"src"}), True)
    assert not decisions.precompute_source_gathers("pull", False,
                                                  frozenset({"src", "src_out_degree"}), True)


def test_division_by_zero_gives_ieee_values_as_on_the_gpu():
    class MeanOfInNeighbours(VertexProgram):
        max_iterations = 1
        run_until_limit = True

        def init(vertex):
            return float(vertex)

        def gather(src):
            return src

        def apply(accum, in_degree):
            return accum / in_degree

        def activate(new, old):
            return False

    graph = garaphpy.Graph.from_arrays([0, 1], [1, 2], num_vertices=4)
    values = garaphpy.run(graph, MeanOfInNeighbours).values
    assert values[1] == 0.0 and values[2] == 1.0
    assert np.isnan(values[0]) and np.isnan(values[3])  # 0 / 0, no ZeroDivisionError


@pytest.mark.parametrize("threads", [1, 2, 3, 7])
def test_active_vertex_ids_match_numpys_on_any_thread_count(threads):
    # one thread: numpy's flatnonzero (nothing compiled); more: the parallel compaction
    from garaphpy.kernels import cpu as cpu_kernels

    rng = np.random.default_rng(threads)
    for size in (0, 1, 5, 1000):
        active = rng.random(size) < 0.3
        ids = cpu_kernels.active_vertex_ids(active, threads)
        assert ids.dtype == np.int64
        np.testing.assert_array_equal(ids, np.flatnonzero(active))


@pytest.mark.parametrize("count", [0, 1, 1000, 70_000])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_frontier_degree_prefix_equals_numpy(count, threads):
    # long lists take the parallel blocked scan (kernels.PARALLEL_PREFIX_MIN)
    from garaphpy.kernels import cpu as kernels

    rng = np.random.default_rng(count)
    degrees = rng.integers(0, 9, 100_000)
    offsets = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64)
    vertices = rng.integers(0, degrees.size, count).astype(np.int64)
    prefix = kernels.frontier_degree_prefix(vertices, offsets, threads)
    np.testing.assert_array_equal(prefix, np.concatenate([[0], np.cumsum(degrees[vertices])]))
    assert prefix.dtype == np.int64


@pytest.mark.parametrize("chunks", [1, 2, 7, 300])
def test_notify_lists_each_out_neighbour_once_with_a_hubs_edges_cut(chunks):
    # a hub of 200 out-edges (repeats included) beside small and edgeless vertices:
    # the chunks cut its edges (kernels.common._edge_chunk); more chunks than edges leave some empty
    from garaphpy.kernels import cpu as kernels

    rng = np.random.default_rng(chunks)
    n = 500
    targets = [rng.integers(0, n, 200), [], rng.integers(0, n, 3), [], rng.integers(0, n, 9)]
    out_offsets = np.zeros(n + 1, np.int64)
    out_offsets[1:len(targets) + 1] = np.cumsum([len(t) for t in targets])
    out_offsets[len(targets) + 1:] = out_offsets[len(targets)]
    out_targets = np.concatenate(targets).astype(np.int64)
    claimed = np.zeros(n, np.uint8)
    claimed[7] = kernels.SETTLED_CLAIM      # passed over
    for frontier in ([0], [1, 3], [4, 0, 2, 1], [3, 0]):
        frontier = np.array(frontier, np.int64)
        prefix = kernels.degree_prefix(frontier, out_offsets)
        listed = kernels.notify(frontier, prefix, out_offsets, out_targets, claimed, chunks)
        reached = np.concatenate([out_targets[out_offsets[u]:out_offsets[u + 1]]
                                  for u in frontier]).astype(np.int64)
        np.testing.assert_array_equal(np.sort(listed), np.setdiff1d(reached, [7]))
        assert claimed[listed].all()
        kernels.reset_flags(listed, claimed)
        assert np.count_nonzero(claimed) == 1
        # the dense notify, for runs without settled vertices: sorted, its flags cleared
        unclaimed = np.zeros(n, np.uint8)
        dense = kernels.notify_dense(frontier, prefix, out_offsets, out_targets, unclaimed,
                                     chunks, 2)
        np.testing.assert_array_equal(dense, np.unique(reached))
        assert not unclaimed.any()


def test_the_garbage_collector_pauses_while_a_run_iterates():
    import gc

    pause = True
    graph = garaphpy.Graph.load("rmat:8", progress=False)
    seen = []
    result = garaphpy.run(graph, "bfs", sources=[0], mode="cpu",
                          on_iteration=lambda record: seen.append(gc.isenabled()))
    assert seen and len(seen) == result.num_iterations
    assert all(enabled is not pause for enabled in seen)
    assert gc.isenabled()               # on again after the run
    # a collector the caller turned off stays off
    gc.disable()
    try:
        garaphpy.run(graph, "bfs", sources=[0], mode="cpu")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_garbage_collector_is_on_again_after_a_failing_run(monkeypatch):
    import gc

    graph = garaphpy.Graph.load("rmat:8", progress=False)

    def fail(record):
        raise KeyError("stop")

    with pytest.raises(KeyError):
        garaphpy.run(graph, "bfs", sources=[0], mode="cpu", on_iteration=fail)
    assert gc.isenabled()
