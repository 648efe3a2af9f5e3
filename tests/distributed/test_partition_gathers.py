"""A partition's pull of precomputed gathers over its own numbering of the
sources it reads, and its aggregates folded in blocks.

Checked against NumPy and SciPy: the sources read (``np.unique``), one
PageRank step of every owned vertex (a sparse matrix product over the
store's CSC read back whole) and the dangling sum (``math.fsum``).  The
workers are made in this process, as a Dask actor would make them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import garaphpy
from garaphpy import config
from garaphpy.api import execute
from garaphpy.distributed import worker
from garaphpy.distributed.exchange import aggregate_monoids, reduce_aggregates
from garaphpy.distributed.partition import compact_sources, cut_partitions, partition_pieces
from garaphpy.programs import BUILTIN_PROGRAMS

sparse = pytest.importorskip("scipy.sparse")


@pytest.fixture(scope="module")
def paged(tmp_path_factory):
    """rmat:10 made symmetric (vertices without edges among them), in many
    small pages, some vertices split between two."""
    graph = garaphpy.Graph.load("rmat:10", store=tmp_path_factory.mktemp("gathers") / "s",
                                max_page_bytes=2048, max_shard_edges=128, progress=False)
    return graph.as_undirected()


def _pagerank_worker(graph, partitions: int, index: int, float32: bool = False):
    parts = tuple(cut_partitions(graph.store.in_offsets, partitions))
    setup = worker.WorkerSetup(str(graph.store.path), BUILTIN_PROGRAMS["pagerank"](), parts,
                               index, np.zeros(0, np.int64), 1, False, False,
                               float32_contributions=float32)
    return worker.PartitionWorker(setup)


@pytest.mark.parametrize("count", [1, 3])
def test_compact_sources_number_owned_vertices_then_ghosts(paged, count):
    store = paged.store
    in_offsets, all_sources, _ = store.csc()
    for part in cut_partitions(in_offsets, count):
        first, end = part.first_vertex, part.end_vertex
        pieces = partition_pieces(store.pages, in_offsets, part)
        original = all_sources[in_offsets[first]:in_offsets[end]]
        held = original.copy()
        views = [held[p.edge_begin - in_offsets[first]:p.edge_end - in_offsets[first]]
                 for p in pieces]
        ghosts = compact_sources(views, first, end, paged.num_vertices)
        read = np.unique(original)
        np.testing.assert_array_equal(ghosts, read[(read < first) | (read >= end)])
        assert held.dtype == original.dtype
        # owned vertex u is u - first; ghost i is end - first + i
        local_to_vertex = np.concatenate([np.arange(first, end), ghosts])
        np.testing.assert_array_equal(local_to_vertex[held], original)


def test_compact_sources_of_no_edges_read_nothing():
    assert compact_sources([], 1, 3, 5).size == 0
    empty = np.zeros(0, np.int32)
    assert compact_sources([empty], 1, 3, 5).size == 0 and empty.size == 0


@pytest.fixture(params=[False, True], ids=["page-by-page", "fused"])
def whole(request, monkeypatch):
    """A worker of one thread pulls fused (the threshold lowered) or page by page."""
    monkeypatch.setattr(config, "PARTITION_FUSED_PULL_MIN_THREADS", 1 if request.param else 2)
    return request.param


@pytest.mark.parametrize("partitions, index", [(1, 0), (3, 0), (3, 2)])
def test_pagerank_step_over_compact_gathers_is_scipys(paged, whole, partitions, index):
    """One synchronous PageRank step of the owned vertices, the partition's
    contributions computed for the vertices it reads alone, against
    ``(1 - d) / n + d (A^T (x / outdeg) + dangling / n)`` in SciPy."""
    alone = _pagerank_worker(paged, partitions, index)
    fused = alone.fused
    assert fused is not None and alone.contributions.size == 0
    assert alone.describe()["fused_pull"] == whole
    assert fused.contributions.size == fused.owned + fused.ghosts.size
    if partitions > 1:
        assert fused.contributions.size < paged.num_vertices
    n = paged.num_vertices
    rng = np.random.default_rng(7)
    values = rng.random(n) / n
    alone.values[:] = values
    alone.next[:] = values
    aggregates = np.array([math.fsum(values[paged.store.out_degree == 0])])
    row, changed = alone._pull_step(0, aggregates)
    in_offsets, sources, _ = paged.store.csc()
    destinations = np.repeat(np.arange(n), np.diff(in_offsets))
    matrix = sparse.csr_matrix((np.ones(sources.size), (destinations, sources)), shape=(n, n))
    out_degree = paged.store.out_degree.astype(np.float64)
    shares = np.divide(values, out_degree, out=np.zeros(n), where=out_degree > 0)
    damping = BUILTIN_PROGRAMS["pagerank"]().constants["damping"]
    expected = (1 - damping) / n + damping * (matrix @ shares + aggregates[0] / n)
    first, end = alone.first, alone.end
    np.testing.assert_allclose(alone.owned_values(), expected[first:end], rtol=1e-12)
    assert np.array_equal(alone.values[:first], values[:first])
    np.testing.assert_array_equal(changed, first + np.flatnonzero(expected[first:end]
                                                                   != values[first:end]))
    # the next iteration's share of the dangling sum comes with the pull
    owned_dangling = alone.values[first:end][paged.store.out_degree[first:end] == 0]
    monoids = aggregate_monoids(BUILTIN_PROGRAMS["pagerank"]())
    exact = math.fsum(owned_dangling)
    share = reduce_aggregates([row["aggregates"]], monoids)[0]
    assert abs(share - exact) <= np.spacing(exact)
    np.testing.assert_array_equal(row["aggregates"], alone.partial_aggregates(1))


@pytest.mark.filterwarnings("ignore::garaphpy.api.NotConvergedWarning")
def test_fused_pagerank_steps_match_the_one_process_run(paged, whole):
    """Three partitions stepped in this process (fused or page by page), their
    pairs handed over as the exchange would, to the one process's iterations:
    float32 contributions, the same bits (the dangling sum is exact in both,
    whatever the parts; a last bit moved there can round a float32
    contribution the other way)."""
    alone = execute(paged, "pagerank", mode="cpu", threads=1, max_iterations=4)
    assert alone.plan.cpu.float32_contributions and alone.plan.cpu.fused_pull
    workers = [_pagerank_worker(paged, 3, index, float32=True) for index in range(3)]
    monoids = aggregate_monoids(BUILTIN_PROGRAMS["pagerank"]())
    aggregates = reduce_aggregates([w.partial_aggregates(0) for w in workers], monoids)
    for iteration in range(4):
        rows = [w._pull_step(iteration, aggregates) for w in workers]
        for sender, (_, changed) in zip(workers, rows):
            for reader in workers:
                if reader is not sender:
                    wanted = changed[np.isin(changed, reader.reads[sender.index])]
                    reader.inbox.put(0, iteration, "values", wanted, sender.values[wanted])
        aggregates = reduce_aggregates([row["aggregates"] for row, _ in rows], monoids)
    spread = np.concatenate([w.owned_values() for w in workers])
    np.testing.assert_array_equal(spread, alone.values)


def test_a_partitions_dangling_sum_is_exact_whatever_its_threads(paged):
    """A partition's dangling sum over 2^16 equal values (where one float
    fold is 1e-12 away from the true sum): within one unit in the last place
    of ``math.fsum``, the same share from one thread or three."""
    alone = _pagerank_worker(paged, 1, 0)
    n = 1 << 16
    alone.num_vertices, alone.first, alone.end = n, 0, n
    alone.fused = None
    alone.values = np.full(n, 0.1)
    alone.attrs = (np.zeros(n, alone.attrs[0].dtype),) + alone.attrs[1:]
    monoids = aggregate_monoids(BUILTIN_PROGRAMS["pagerank"]())
    exact = math.fsum(alone.values)
    shares = {}
    for threads in (1, 3):
        alone.threads = threads
        shares[threads] = alone.partial_aggregates(1)
        got = reduce_aggregates([shares[threads]], monoids)[0]
        assert abs(got - exact) <= np.spacing(exact)
    np.testing.assert_array_equal(shares[1], shares[3])
