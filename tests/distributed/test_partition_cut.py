"""Partitions by destination range, their pieces of pages, mirror lists, the inbox.

Checked against the store's CSC read back whole (the client never reads it;
the tests do, as the reference).
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy.distributed.exchange import Inbox, Mirrors
from garaphpy.distributed.frontier import partition_out_edges
from garaphpy.distributed.partition import cut_partitions, partition_pieces, read_by
from garaphpy.errors import ConfigError


@pytest.fixture(scope="module")
def paged(tmp_path_factory):
    """rmat:9 in many small pages, some vertices split between two."""
    return garaphpy.Graph.load("rmat:9", store=tmp_path_factory.mktemp("paged") / "s",
                               max_page_bytes=1024, max_shard_edges=128, progress=False)


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_partitions_cover_the_vertices_balanced_by_edges(paged, count):
    in_offsets = paged.store.in_offsets
    parts = cut_partitions(in_offsets, count)
    assert [p.index for p in parts] == list(range(count))
    assert parts[0].first_vertex == 0 and parts[-1].end_vertex == paged.num_vertices
    assert all(a.end_vertex == b.first_vertex for a, b in zip(parts, parts[1:]))
    assert sum(p.num_edges for p in parts) == paged.num_edges
    largest_in_degree = int(np.diff(in_offsets).max())
    for part in parts:
        assert part.num_vertices >= 1
        assert abs(part.num_edges - paged.num_edges / count) <= largest_in_degree


def test_partitions_are_refused_beyond_the_vertices(paged):
    with pytest.raises(ConfigError, match=r"partitions=0: expected a positive integer"):
        cut_partitions(paged.store.in_offsets, 0)
    with pytest.raises(ConfigError, match=r"partitions=513: the graph has 512 vertices"):
        cut_partitions(paged.store.in_offsets, 513)


@pytest.mark.parametrize("count", [2, 5])
def test_pieces_hold_every_in_edge_once(paged, count):
    store = paged.store
    assert len(store.pages) > 4 * count
    in_offsets = store.in_offsets
    seen = np.zeros(paged.num_edges, np.int64)
    split = 0
    for part in cut_partitions(in_offsets, count):
        for piece in partition_pieces(store.pages, in_offsets, part):
            page = store.pages[piece.page]
            assert part.first_vertex <= piece.first_vertex < piece.end_vertex <= part.end_vertex
            assert page.edge_begin <= piece.edge_begin <= piece.edge_end \
                <= page.edge_begin + page.num_edges
            # the piece's edges are in-edges of its vertices
            assert in_offsets[piece.first_vertex] <= piece.edge_begin
            assert piece.edge_end <= in_offsets[piece.end_vertex]
            seen[piece.edge_begin:piece.edge_end] += 1
            split += piece.edge_begin > in_offsets[piece.first_vertex]
    assert (seen == 1).all()
    assert split > 0        # some vertex's in-edges span two pages


def test_mirror_lists_are_the_remote_sources_each_partition_reads(paged):
    store = paged.store
    in_offsets, sources, _ = store.csc()
    parts = cut_partitions(in_offsets, 3)
    for part in parts:
        pieces = partition_pieces(store.pages, in_offsets, part)
        lists = read_by([sources[p.edge_begin:p.edge_end] for p in pieces], parts)
        mine = sources[in_offsets[part.first_vertex]:in_offsets[part.end_vertex]]
        for other, listed in zip(parts, lists):
            expected = np.unique(mine[(mine >= other.first_vertex)
                                      & (mine < other.end_vertex)])
            np.testing.assert_array_equal(listed, expected)


def test_mirrors_send_a_changed_vertex_only_to_its_readers():
    mirrors = Mirrors(10, 20)
    mirrors.set_reader(1, np.array([10, 12, 19]))
    mirrors.set_reader(3, np.array([12]))
    mirrors.set_reader(4, np.array([15]))
    selected = mirrors.pairs_for(np.array([11, 12, 19], np.int64))
    assert sorted(selected) == [1, 3]
    np.testing.assert_array_equal(selected[1], [12, 19])
    np.testing.assert_array_equal(selected[3], [12])
    mirrors.set_reader(5, np.array([], np.int64))
    everything = mirrors.pairs_for(np.arange(10, 20, dtype=np.int64))
    assert sorted(everything) == [1, 3, 4]
    for partition, listed in [(1, [10, 12, 19]), (3, [12]), (4, [15])]:
        np.testing.assert_array_equal(everything[partition], listed)


def test_inbox_holds_a_faster_peers_pairs_until_their_iteration_is_done():
    inbox = Inbox()
    values = np.zeros(6)
    assert inbox.put(0, 0, "values", np.array([1]), np.array([5.0]))
    assert inbox.put(0, 1, "values", np.array([2]), np.array([7.0]))
    assert not inbox.put(1, 0, "values", np.array([3]), np.array([9.0]))   # another epoch
    assert inbox.apply("values", values, 1) == 1
    np.testing.assert_array_equal(values, [0, 5, 0, 0, 0, 0])
    assert inbox.apply("values", values, 2) == 1
    np.testing.assert_array_equal(values, [0, 5, 7, 0, 0, 0])
    inbox.put(0, 2, "values", np.array([4]), np.array([1.0]))
    inbox.reset(1)
    assert inbox.apply("values", values, 5) == 0


@pytest.mark.parametrize("threads", [1, 3])
def test_partition_out_edges_turn_the_in_edges_around(threads):
    """Each source's owned out-neighbours, in increasing order (repeated
    edges kept), against NumPy's lexsort of the (source, destination) pairs,
    on one thread and on several (each writing the sources it owns)."""
    rng = np.random.default_rng(7)
    num_vertices, first, end = 500, 120, 400
    in_degrees = rng.integers(0, 9, num_vertices)
    in_degrees[:first] = in_degrees[end:] = 0
    in_offsets = np.concatenate([[0], np.cumsum(in_degrees)]).astype(np.int64)
    sources = rng.integers(0, num_vertices, int(in_offsets[-1])).astype(np.int32)
    # the partition's edges start at in_offsets[first], as a worker holds them
    in_offsets += 17
    out_offsets, out_targets = partition_out_edges(sources, in_offsets, first, end,
                                                   num_vertices, threads)
    destinations = np.repeat(np.arange(num_vertices), in_degrees)
    order = np.lexsort((destinations, sources))
    np.testing.assert_array_equal(out_targets, destinations[order])
    assert out_targets.dtype == sources.dtype
    np.testing.assert_array_equal(np.diff(out_offsets),
                                  np.bincount(sources, minlength=num_vertices))
