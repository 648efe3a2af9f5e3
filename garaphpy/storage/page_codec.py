"""Compressed page images: source ids as bit-packed gaps, IdxOff from the degrees.

A plain page (Garaph section 2.1) costs 6 bytes an edge: a 4-byte source id
and a 2-byte IdxOff.  The compressed format ``gap-bp128`` keeps neither as
such:

* IdxOff is not stored: it follows from the CSC index ``in_offsets`` and the
  shard table, both held in host memory once a store is open; the decoder
  writes it as it walks each destination's edges.
* A page's edges are cut into blocks of :data:`BLOCK_EDGES` consecutive
  edges.  Every destination's sources are sorted, so within a block each
  edge is either a *head* (the first in-edge of its destination, or the
  block's first edge), stored as ``zigzag(source - destination)``, or a
  *gap*, stored as ``source - previous source``.  Heads and gaps are
  bit-packed in two runs, each with the width of its largest value (the
  idea of frame-of-reference packing: Goldstein et al., ICDE'98; gaps of
  sorted adjacency lists: Ligra+, DCC'15; GCGT, SIGMOD'19).

Measured on the dev VM (2 cores, 2026-12-02;
``bench/results/compressed-pages-devvm-2026-12-02.md``): 1.6-2.2 bytes an
edge against 6.0 on web-NotreDame, soc-Slashdot0811, ca-HepPh, rmat:20,
kron20 and kron22.  A byte-oriented varint of the same values was within 10%
either way and decodes one value after the other; the bit-packed blocks
decode in parallel (each block is independent) and suit a GPU warp.

The edge stream is a run of little-endian uint32 words::

    [0]            number of blocks, nb
    [1 .. nb + 1]  word index of each block's start, then the end
    block          header word (head width | gap width << 8 | heads << 16),
                   then the heads' bits, then the gaps' bits
    [last]         one zero word, so that a value can be read as two words

The compressed page image is the edge stream, then the edge values as they
are in a plain page, at ``stored_weights_offset`` (64-byte aligned).
Decoding gives exactly the plain page's arrays.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from ..errors import StoreCorruptError

__all__ = ["BLOCK_EDGES", "CODECS", "PLAIN", "GAP_BP128", "encode_sources",
           "decode_sources", "stream_words"]

#: A plain page: ``sources | idxoff | weights`` as written.
PLAIN = "plain"
#: Sources as bit-packed gaps per block of :data:`BLOCK_EDGES` edges, no IdxOff.
GAP_BP128 = "gap-bp128"
#: Every page format this version reads.
CODECS = (PLAIN, GAP_BP128)

#: Edges of one compressed block (four per thread of a 32-thread warp).
BLOCK_EDGES = 128

_HEADER_WORDS = 1
_NO_IDXOFF = np.zeros(0, np.uint16)
_NO_SHARDS = np.zeros(0, np.int64)


@numba.njit(cache=True, nogil=True, inline="always")
def _vertex_of(in_offsets, lo, hi, edge):
    # the vertex in [lo, hi) whose in-edges hold edge: the largest with
    # in_offsets[v] <= edge (a zero-degree vertex before it shares its offset)
    hi -= 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if in_offsets[mid] <= edge:
            lo = mid
        else:
            hi = mid - 1
    return lo


@numba.njit(cache=True, nogil=True, inline="always")
def _bit_length(value):
    bits = 0
    while value > 0:
        bits += 1
        value >>= 1
    return bits


@numba.njit(cache=True, nogil=True, parallel=True)
def _block_sizes(sources, in_offsets, edge_begin, first_vertex, end_vertex, block_edges,
                 heads, head_bits, gap_bits, words):
    # pass 1 of the encoder: each block's heads, widths and words (-1: unsorted)
    num_edges = sources.shape[0]
    for block in prange(words.shape[0]):
        b0 = edge_begin + block * block_edges
        b1 = min(b0 + block_edges, edge_begin + num_edges)
        v = _vertex_of(in_offsets, first_vertex, end_vertex, b0)
        count = 0
        head_width = 0
        gap_width = 0
        previous = np.int64(0)
        sorted_ = True
        for e in range(b0, b1):
            while in_offsets[v + 1] <= e:
                v += 1
            s = np.int64(sources[e - edge_begin])
            if e == b0 or e == in_offsets[v]:
                d = s - v
                z = (d << 1) ^ (d >> 63)
                head_width = max(head_width, _bit_length(z))
                count += 1
            else:
                g = s - previous
                if g < 0:
                    sorted_ = False
                gap_width = max(gap_width, _bit_length(g))
            previous = s
        heads[block] = count
        head_bits[block] = head_width
        gap_bits[block] = gap_width
        bits = count * head_width + (b1 - b0 - count) * gap_width
        words[block] = _HEADER_WORDS + (bits + 31) // 32 if sorted_ else -1


@numba.njit(cache=True, nogil=True, inline="always")
def _put(words, position, value, width):
    if width == 0:
        return
    index = position >> 5
    shift = position & 31
    words[index] |= np.uint32((value << np.uint64(shift)) & np.uint64(0xFFFFFFFF))
    if shift + width > 32:
        words[index + 1] |= np.uint32(value >> np.uint64(32 - shift))


@numba.njit(cache=True, nogil=True, parallel=True)
def _pack_blocks(sources, in_offsets, edge_begin, first_vertex, end_vertex, block_edges,
                 heads, head_bits, gap_bits, starts, stream):
    # pass 2 of the encoder: every block into its own words of stream (zeroed)
    num_edges = sources.shape[0]
    for block in prange(heads.shape[0]):
        b0 = edge_begin + block * block_edges
        b1 = min(b0 + block_edges, edge_begin + num_edges)
        base = starts[block]
        head_width = head_bits[block]
        gap_width = gap_bits[block]
        stream[base] = np.uint32(head_width | (gap_width << 8) | (heads[block] << 16))
        head_at = (base + _HEADER_WORDS) * 32
        gap_at = head_at + heads[block] * head_width
        v = _vertex_of(in_offsets, first_vertex, end_vertex, b0)
        previous = np.int64(0)
        for e in range(b0, b1):
            while in_offsets[v + 1] <= e:
                v += 1
            s = np.int64(sources[e - edge_begin])
            if e == b0 or e == in_offsets[v]:
                d = s - v
                _put(stream, head_at, np.uint64((d << 1) ^ (d >> 63)), head_width)
                head_at += head_width
            else:
                _put(stream, gap_at, np.uint64(s - previous), gap_width)
                gap_at += gap_width
            previous = s


def encode_sources(sources: np.ndarray, in_offsets: np.ndarray, edge_begin: int,
                   first_vertex: int, end_vertex: int,
                   block_edges: int = BLOCK_EDGES) -> np.ndarray | None:
    """The edge stream of a page's source ids (see the module docstring).

    Parameters
    ----------
    sources : numpy.ndarray of int32
        The page's source ids, in CSC order (edges ``edge_begin`` onwards).
    in_offsets : numpy.ndarray of int64
        The whole graph's CSC index.
    edge_begin : int
        Global index of the page's first edge.
    first_vertex, end_vertex : int
        The page's destinations are ``first_vertex .. end_vertex - 1``.
    block_edges : int
        Edges of one block.

    Returns
    -------
    numpy.ndarray of uint32 or None
        The stream; None when some destination's sources are not sorted
        (the page is then written plain).
    """
    sources = np.ascontiguousarray(sources)
    num_edges = sources.shape[0]
    num_blocks = -(-num_edges // block_edges)
    heads = np.empty(num_blocks, np.int64)
    head_bits = np.empty(num_blocks, np.int64)
    gap_bits = np.empty(num_blocks, np.int64)
    words = np.empty(num_blocks, np.int64)
    _block_sizes(sources, in_offsets, edge_begin, first_vertex, end_vertex, block_edges,
                 heads, head_bits, gap_bits, words)
    if (words < 0).any():
        return None
    table = 2 + num_blocks
    starts = np.empty(num_blocks + 1, np.int64)
    starts[0] = table
    np.cumsum(words, out=starts[1:])
    starts[1:] += table
    if starts[-1] + 1 >= 1 << 32:
        return None
    stream = np.zeros(starts[-1] + 1, np.uint32)
    stream[0] = num_blocks
    stream[1:table] = starts
    _pack_blocks(sources, in_offsets, edge_begin, first_vertex, end_vertex, block_edges,
                 heads, head_bits, gap_bits, starts[:-1], stream)
    return stream


@numba.njit(cache=True, nogil=True, inline="always")
def _get(stream, position, mask):
    # a value of no width may sit past the stream's last word: nothing to read
    if mask == 0:
        return np.int64(0)
    index = position >> 5
    pair = np.uint64(stream[index]) | (np.uint64(stream[index + 1]) << np.uint64(32))
    return np.int64((pair >> np.uint64(position & 31)) & mask)


@numba.njit(cache=True, nogil=True, inline="always")
def _decode_block(stream, in_offsets, edge_begin, first_vertex, end_vertex, block_edges,
                  num_edges, block, out, shard_first, idxoff):
    # one block into out (and, unless idxoff is empty, each edge's destination
    # less its shard's first vertex into idxoff, the shards of the page starting
    # at shard_first); 0, or 1 when its words contradict the stream's size
    b0 = edge_begin + block * block_edges
    b1 = min(b0 + block_edges, edge_begin + num_edges)
    base = np.int64(stream[1 + block])
    end = np.int64(stream[2 + block])
    if base >= end or end >= stream.shape[0]:
        return 1
    header = stream[base]
    head_width = np.int64(header & 0xFF)
    gap_width = np.int64((header >> 8) & 0xFF)
    count = np.int64(header >> 16)
    if head_width > 32 or gap_width > 32 or count > b1 - b0 or (
            _HEADER_WORDS + (count * head_width + (b1 - b0 - count) * gap_width + 31) // 32
            > end - base):
        return 1
    head_mask = (np.uint64(1) << np.uint64(head_width)) - np.uint64(1)
    gap_mask = (np.uint64(1) << np.uint64(gap_width)) - np.uint64(1)
    head_at = (base + _HEADER_WORDS) * 32
    gap_at = head_at + count * head_width
    seen = 0
    v = _vertex_of(in_offsets, first_vertex, end_vertex, b0)
    shards = shard_first.shape[0]
    shard = 0
    if idxoff.shape[0]:
        shard = _vertex_of(shard_first, 0, shards, v)
    e = b0
    while e < b1:
        # one destination's edges in the block: a head, then gaps
        stop = min(in_offsets[v + 1], b1)
        v += 1
        if stop <= e:
            continue
        seen += 1
        if seen > count:
            return 1
        if gap_at + (stop - e - 1) * gap_width > end * 32:
            return 1        # fewer heads than the header says: gaps past the block
        z = _get(stream, head_at, head_mask)
        head_at += head_width
        previous = ((z >> 1) ^ -(z & 1)) + (v - 1)
        out[e - edge_begin] = previous
        for i in range(e + 1 - edge_begin, stop - edge_begin):
            previous += _get(stream, gap_at, gap_mask)
            gap_at += gap_width
            out[i] = previous
        if idxoff.shape[0]:
            # the last shard starting at or before the destination holds it (the
            # pieces of a split vertex all start at it: offset 0 in each)
            while shard + 1 < shards and shard_first[shard + 1] <= v - 1:
                shard += 1
            offset = v - 1 - shard_first[shard]
            for i in range(e - edge_begin, stop - edge_begin):
                idxoff[i] = offset
        e = stop
    return 0 if seen == count else 1


@numba.njit(cache=True, nogil=True)
def _decode_serial(stream, in_offsets, edge_begin, first_vertex, end_vertex, block_edges,
                   out, shard_first, idxoff):
    num_edges = out.shape[0]
    bad = 0
    for block in range(np.int64(stream[0])):
        bad += _decode_block(stream, in_offsets, edge_begin, first_vertex, end_vertex,
                             block_edges, num_edges, block, out, shard_first, idxoff)
    return bad


@numba.njit(cache=True, nogil=True, parallel=True)
def _decode_parallel(stream, in_offsets, edge_begin, first_vertex, end_vertex, block_edges,
                     out, shard_first, idxoff):
    num_edges = out.shape[0]
    bad = 0
    for block in prange(np.int64(stream[0])):
        bad += _decode_block(stream, in_offsets, edge_begin, first_vertex, end_vertex,
                             block_edges, num_edges, block, out, shard_first, idxoff)
    return bad


def stream_words(image: np.ndarray, num_edges: int, block_edges: int = BLOCK_EDGES) -> int:
    """Words of the edge stream at the start of a compressed page ``image``
    (uint8), read from its block table; StoreCorruptError when it cannot be."""
    num_blocks = -(-num_edges // block_edges)
    table = 2 + num_blocks
    if image.nbytes < 4 * (table + 1):
        raise StoreCorruptError(f"compressed page of {num_edges} edges: {image.nbytes} bytes "
                                "cannot hold its block table")
    words = image[:4 * table].view(np.uint32)
    end = int(words[-1]) + 1
    if int(words[0]) != num_blocks or 4 * end > image.nbytes or end <= table:
        raise StoreCorruptError(f"compressed page of {num_edges} edges: its block table "
                                "does not match the page")
    return end


def decode_sources(image: np.ndarray, in_offsets: np.ndarray, edge_begin: int,
                   first_vertex: int, end_vertex: int, out: np.ndarray, *,
                   idxoff: np.ndarray | None = None, shard_first: np.ndarray | None = None,
                   parallel: bool = False, block_edges: int = BLOCK_EDGES) -> None:
    """Decode the edge stream at the start of ``image`` into ``out`` (and the
    IdxOff of every edge into ``idxoff``).

    Parameters
    ----------
    image : numpy.ndarray of uint8
        The compressed page image (4-byte aligned).
    in_offsets : numpy.ndarray of int64
    edge_begin, first_vertex, end_vertex : int
        As for :func:`encode_sources`.
    out : numpy.ndarray of int32
        The page's source ids, ``num_edges`` of them.
    idxoff : numpy.ndarray of uint16, optional
        ``num_edges`` destination offsets, each from its shard's first vertex.
    shard_first : numpy.ndarray of int64, optional
        With ``idxoff``: the first vertex of each shard of the page, in order.
    parallel : bool
        Decode the blocks in parallel (numba threads); else one after the
        other in the calling thread (the page reader's threads decode pages
        side by side).

    Raises
    ------
    garaphpy.errors.StoreCorruptError
        The stream contradicts itself or the page's size (nothing is
        written outside ``out``).
    """
    num_edges = out.shape[0]
    words = stream_words(image, num_edges, block_edges)
    stream = image[:4 * words].view(np.uint32)
    if idxoff is None:
        idxoff, shard_first = _NO_IDXOFF, _NO_SHARDS
    elif idxoff.shape[0] != num_edges or shard_first is None or not shard_first.size:
        raise ValueError(f"idxoff: expected {num_edges} offsets and the page's shards")
    decode = _decode_parallel if parallel else _decode_serial
    if decode(stream, in_offsets, edge_begin, first_vertex, end_vertex, block_edges, out,
              np.ascontiguousarray(shard_first, np.int64), idxoff):
        raise StoreCorruptError(f"compressed page of {num_edges} edges (edges {edge_begin} "
                                "onwards): a block's words contradict the stream")
