"""A partition's pull of precomputed gathers over its own numbering of the
sources it reads.

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
from garaphpy.distributed import worker
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
def test_compact_sources_number_the_sources_by_the_vertices_read(paged, count):
    store = paged.store
    in_offsets, all_sources, _ = store.csc()
    for part in cut_partitions(in_offsets, count):
        pieces = partition_pieces(store.pages, in_offsets, part)
        original = all_sources[in_offsets[part.first_vertex]:in_offsets[part.end_vertex]]
        held = original.copy()
        views = [held[p.edge_begin - in_offsets[part.first_vertex]:
                      p.edge_end - in_offsets[part.first_vertex]] for p in pieces]
        gathered = compact_sources(views, paged.num_vertices)
        np.testing.assert_array_equal(gathered, np.unique(original))
        assert held.dtype == original.dtype
        assert held.max() == gathered.size - 1
        np.testing.assert_array_equal(gathered[held], original)


def test_compact_sources_of_no_edges_read_nothing():
    assert compact_sources([], 5).size == 0
    empty = np.zeros(0, np.int32)
    assert compact_sources([empty], 5).size == 0 and empty.size == 0


@pytest.mark.parametrize("partitions, index", [(1, 0), (3, 0), (3, 2)])
def test_pagerank_step_over_compact_gathers_is_scipys(paged, partitions, index):
    """One synchronous PageRank step of the owned vertices, the partition's
    contributions computed for the vertices it reads alone, against
    ``(1 - d) / n + d (A^T (x / outdeg) + dangling / n)`` in SciPy."""
    alone = _pagerank_worker(paged, partitions, index)
    assert alone.gathered is not None
    assert alone.contributions.size == alone.gathered.size < paged.num_vertices
    n = paged.num_vertices
    rng = np.random.default_rng(7)
    values = rng.random(n) / n
    alone.values[:] = values
    alone.next[:] = values
    aggregates = np.array([math.fsum(values[paged.store.out_degree == 0])])
    alone._pull_step(0, aggregates)
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
