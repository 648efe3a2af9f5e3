"""The compressed page codec (garaphpy.storage.page_codec) on its own.

Every page is encoded and decoded and must give back its source ids; the
stream's size is checked against a count made here with numpy (the bit
width of each block's heads and gaps), so that a codec that round-trips by
storing everything plain would fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from garaphpy.errors import StoreCorruptError
from garaphpy.storage import page_codec
from garaphpy.storage.page_codec import BLOCK_EDGES, decode_sources, encode_sources


def csc_of(num_vertices: int, src: np.ndarray, dst: np.ndarray):
    """(in_offsets, sources): the CSC of the edges, each destination's sources sorted."""
    order = np.lexsort((src, dst))
    in_offsets = np.zeros(num_vertices + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=num_vertices), out=in_offsets[1:])
    return in_offsets, src[order].astype(np.int32)


def random_csc(seed: int, num_vertices: int, num_edges: int, skewed: bool = False):
    rng = np.random.default_rng(seed)
    if skewed:       # power-law in-degrees: a few destinations take most edges
        weights = 1.0 / np.arange(1, num_vertices + 1) ** 1.2
        dst = rng.choice(num_vertices, num_edges, p=weights / weights.sum())
    else:
        dst = rng.integers(0, num_vertices, num_edges)
    src = rng.integers(0, num_vertices, num_edges)
    return csc_of(num_vertices, src, dst)


def page_range(in_offsets: np.ndarray, edge_begin: int, edge_end: int) -> tuple[int, int]:
    """The destinations of edges edge_begin..edge_end-1: the vertex holding
    the first edge, to one past the vertex holding the last."""
    first = int(np.searchsorted(in_offsets, edge_begin, side="right")) - 1
    end = int(np.searchsorted(in_offsets, edge_end, side="left"))
    return max(first, 0), max(end, first + 1)


def round_trip(in_offsets, sources, edge_begin, edge_end, parallel=False):
    first, end = page_range(in_offsets, edge_begin, edge_end)
    plain = sources[edge_begin:edge_end]
    stream = encode_sources(plain, in_offsets, edge_begin, first, end)
    assert stream is not None
    out = np.full(edge_end - edge_begin, -1, np.int32)
    decode_sources(stream.view(np.uint8), in_offsets, edge_begin, first, end, out,
                   parallel=parallel)
    np.testing.assert_array_equal(out, plain)
    return stream


def expected_words(in_offsets, sources, edge_begin, edge_end) -> int:
    """The stream's length by the format's rule, counted with numpy."""
    n = edge_end - edge_begin
    edges = np.arange(edge_begin, edge_end)
    dst = np.searchsorted(in_offsets, edges, side="right") - 1
    src = sources[edge_begin:edge_end].astype(np.int64)
    block = (edges - edge_begin) // BLOCK_EDGES
    head = np.isin(edges, in_offsets) | ((edges - edge_begin) % BLOCK_EDGES == 0)
    value = np.where(head, ((src - dst) << 1) ^ ((src - dst) >> 63),
                     src - np.r_[0, src[:-1]])
    width = np.zeros(n, np.int64)
    width[value > 0] = np.floor(np.log2(value[value > 0])).astype(np.int64) + 1
    blocks = -(-n // BLOCK_EDGES)
    head_width = np.zeros(blocks, np.int64)
    gap_width = np.zeros(blocks, np.int64)
    np.maximum.at(head_width, block[head], width[head])
    np.maximum.at(gap_width, block[~head], width[~head])
    bits = head_width * np.bincount(block[head], minlength=blocks) \
        + gap_width * np.bincount(block[~head], minlength=blocks)
    return int(2 + blocks + (1 + (bits + 31) // 32).sum() + 1)


@pytest.mark.parametrize("skewed", [False, True])
@pytest.mark.parametrize("parallel", [False, True])
def test_a_whole_graph_round_trips_in_the_words_the_format_counts(skewed, parallel):
    in_offsets, sources = random_csc(3, 3000, 40000, skewed)
    stream = round_trip(in_offsets, sources, 0, sources.size, parallel)
    assert stream.size == expected_words(in_offsets, sources, 0, sources.size)
    assert stream.nbytes < 0.6 * 4 * sources.size        # smaller than the sources alone


@pytest.mark.parametrize("parallel", [False, True])
def test_pages_cut_at_every_boundary_round_trip(parallel):
    # zero-degree vertices, a heavy vertex and blocks ending inside destinations;
    # in parallel each block is decoded by its own thread, as the CPU's reader does
    src = np.r_[np.arange(300) % 37, [5, 5, 9], np.arange(40)]
    dst = np.r_[np.full(300, 4), [0, 2, 2], np.arange(40) % 13 + 6]
    in_offsets, sources = csc_of(20, src, dst)
    m = sources.size
    for cut in range(m + 1):
        for begin, end in ((0, cut), (cut, m)):
            stream = round_trip(in_offsets, sources, begin, end, parallel)
            assert stream.size == expected_words(in_offsets, sources, begin, end)


def test_a_parallel_decode_writes_what_the_serial_one_does():
    """Sources and IdxOff of every page cut of a skewed graph, decoded with
    the blocks in parallel and one after the other: the same arrays."""
    in_offsets, sources = random_csc(11, 200, 5000, skewed=True)
    shard_first = np.arange(0, 200, 9)
    for cut in range(0, sources.size + 1, 97):
        for begin, end in ((0, cut), (cut, sources.size)):
            first, stop = page_range(in_offsets, begin, end)
            page_shards = shard_first[(shard_first >= shard_first[shard_first <= first].max())
                                      & (shard_first < stop)]
            stream = encode_sources(sources[begin:end], in_offsets, begin, first, stop)
            decoded = []
            for parallel in (False, True):
                out = np.full(end - begin, -1, np.int32)
                idxoff = np.full(end - begin, 9999, np.uint16)
                decode_sources(stream.view(np.uint8), in_offsets, begin, first, stop, out,
                               idxoff=idxoff, shard_first=page_shards, parallel=parallel)
                decoded.append((out, idxoff))
            np.testing.assert_array_equal(decoded[0][0], decoded[1][0])
            np.testing.assert_array_equal(decoded[0][1], decoded[1][1])
            np.testing.assert_array_equal(decoded[1][0], sources[begin:end])


@pytest.mark.parametrize("parallel", [False, True])
def test_idxoff_is_decoded_from_the_shards(parallel):
    """Shards of 7 vertices, and vertex 30 (heavy) split over three pieces."""
    in_offsets, sources = random_csc(9, 100, 6000, skewed=True)
    shard_first = np.unique(np.r_[np.arange(0, 100, 7), [30, 30, 30, 31]])
    shard_first = np.sort(np.r_[shard_first, [30, 30]])
    edges = np.arange(sources.size)
    dst = np.searchsorted(in_offsets, edges, side="right") - 1
    expected = dst - shard_first[np.searchsorted(shard_first, dst, side="right") - 1]
    for begin, end in ((0, sources.size), (int(in_offsets[30]) + 5, int(in_offsets[60]) + 3)):
        first, stop = page_range(in_offsets, begin, end)
        page_shards = shard_first[(shard_first >= shard_first[shard_first <= first].max())
                                  & (shard_first < stop)]
        idxoff = np.full(end - begin, 9999, np.uint16)
        out = np.empty(end - begin, np.int32)
        stream = encode_sources(sources[begin:end], in_offsets, begin, first, stop)
        decode_sources(stream.view(np.uint8), in_offsets, begin, first, stop, out,
                       idxoff=idxoff, shard_first=page_shards, parallel=parallel)
        np.testing.assert_array_equal(out, sources[begin:end])
        np.testing.assert_array_equal(idxoff, expected[begin:end])


def test_pages_of_a_split_vertex_round_trip():
    """Pieces of one destination's in-edges, as a split vertex's shards give."""
    in_offsets, sources = csc_of(3, np.arange(1000) % 700, np.full(1000, 1))
    for begin in range(0, 1000, 97):
        round_trip(in_offsets, sources, begin, min(begin + 97, 1000))


def test_empty_and_single_edge_pages():
    in_offsets, sources = csc_of(5, np.array([3]), np.array([2]))
    assert round_trip(in_offsets, sources, 0, 0).size == 3
    round_trip(in_offsets, sources, 0, 1)
    in_offsets, sources = csc_of(5, np.array([], np.int64), np.array([], np.int64))
    round_trip(in_offsets, sources, 0, 0)


def test_extreme_ids_round_trip():
    """Sources and destinations far apart: head values of 32 bits."""
    n = 2**31 - 1
    in_offsets = np.array([0, 0, 3] + [3] * 3, np.int64)
    sources = np.array([0, n - 1, n - 1], np.int32)
    round_trip(in_offsets, sources, 0, 3)
    in_offsets = np.zeros(6, np.int64)
    in_offsets[5:] = 2                          # destination 4 only
    round_trip(in_offsets, np.array([n - 1, n - 1], np.int32), 0, 2)


def test_unsorted_sources_are_not_encoded():
    in_offsets = np.array([0, 3], np.int64)
    assert encode_sources(np.array([1, 0, 2], np.int32), in_offsets, 0, 0, 1) is None


def test_a_damaged_stream_is_refused_without_writing_elsewhere():
    in_offsets, sources = random_csc(5, 500, 5000)
    stream = encode_sources(sources, in_offsets, 0, 0, 500)
    blocks = int(stream[0])
    header = int(stream[2])                              # the second block's start
    damages = {"block count": (0, blocks + 1),
               "block start past the end": (2, stream.size + 5),
               "more heads than edges": (header, (BLOCK_EDGES + 1) << 16),
               "heads the block does not have": (header, int(stream[header]) + (5 << 16)),
               "width over 32 bits": (header, 33)}
    out = np.zeros(sources.size + 1, np.int32)
    for what, (word, value) in damages.items():
        bad = stream.copy()
        bad[word] = value
        with pytest.raises(StoreCorruptError):
            decode_sources(bad.view(np.uint8), in_offsets, 0, 0, 500, out[:-1])
        assert out[-1] == 0, what
    with pytest.raises(StoreCorruptError, match="block table"):
        decode_sources(stream[:2].view(np.uint8), in_offsets, 0, 0, 500, out[:-1])


def test_the_codecs_are_named():
    assert page_codec.CODECS == ("plain", "gap-bp128")
