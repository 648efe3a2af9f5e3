"""Packed pages: fewer bytes per edge on the bus and in GPU memory.

A page image (Garaph section 2.1) holds, per edge, its source (4 bytes for
fewer than 2^31 vertices), its destination's offset in its shard (IdxOff, 2
bytes) and its value.  Garaph copies the image as it is; the GPU's time on a
page is a small part of the copy's.  A packed page carries the same edges in
fewer bytes, which the GPU's pull reads where they lie (``gp_pull_packed``,
kernels/cuda/stream.cu; ``gp_unpack_page`` restores the image in device
memory instead, for study):

* sources in the fewest whole bytes that hold ``|V| - 1`` (3 bytes up to 2^24
  vertices, 2 up to 2^16);
* no IdxOff: a shard's edges are sorted by destination, so each vertex of
  the shard needs only the offset of its first in-edge (4 bytes per vertex,
  not 2 per edge: the CSC's column starts, per shard);
* edge values as 8- or 16-bit integers when every value of the page is an
  integer that fits (SNAP and GAPBS weights 1..255 do), else as they are;
* the destination (IdxOff) of every ``2**KEY_SHIFT``-th edge of the page, so
  that the pull finds each run's destinations from there over the column
  starts, not by a search (0.125 bytes per edge).

By this layout a Kronecker graph of mean degree 30 (rmat:20 symmetric)
takes 3.26 bytes per edge against 6 (no values) and 4.26 against 10
(4-byte values 1..255): about twice as many pages stay resident in the same GPU budget,
and half as many bytes cross the bus for those that stream (measured on
rmat:20 and two SNAP graphs: BENCHMARKS.md).  :func:`pack_page` packs on
the host (numba, all cores); :func:`unpack_page` is the NumPy reference
the tests compare both directions with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from .. import _numba_setup  # noqa: F401  (threading layer first)

__all__ = ["PackedLayout", "source_width", "weight_code", "packed_layout", "pack_page",
           "unpack_page", "KEY_SHIFT", "WEIGHT_NONE", "WEIGHT_UINT8", "WEIGHT_UINT16",
           "WEIGHT_RAW"]

#: How a packed page holds its edge values (the decoder's ``weight_code``).
WEIGHT_NONE, WEIGHT_UINT8, WEIGHT_UINT16, WEIGHT_RAW = 0, 1, 2, 3
_WEIGHT_BYTES = {WEIGHT_UINT8: 1, WEIGHT_UINT16: 2}

#: Every ``2**KEY_SHIFT``-th edge's IdxOff is kept (``PackedLayout.keys_offset``).
KEY_SHIFT = 4

#: Alignment of each array inside a packed image (the decoder reads the column
#: starts as 32-bit words and the values as 16-bit or wider words).
ARRAY_ALIGNMENT = 16


def _align(value: int) -> int:
    return -(-value // ARRAY_ALIGNMENT) * ARRAY_ALIGNMENT


@dataclass(frozen=True)
class PackedLayout:
    """Where the arrays of one packed page lie, in bytes from its start.

    Attributes
    ----------
    num_edges, num_columns : int
        Edges of the page; vertices of its shards (one column start each).
    source_bytes : int
        Bytes per source (little-endian low bytes of the id).
    columns_offset : int
        The column starts (uint32, per shard, relative to the shard's first edge).
    weights_offset : int
    weight_code : int
        ``WEIGHT_NONE`` (no values on the wire), ``WEIGHT_UINT8``,
        ``WEIGHT_UINT16`` or ``WEIGHT_RAW`` (the store's dtype).
    keys_offset : int
        The IdxOff (uint16) of edges 0, 2**KEY_SHIFT, 2 * 2**KEY_SHIFT, ...
    nbytes : int
        The whole packed image.
    """

    num_edges: int
    num_columns: int
    source_bytes: int
    columns_offset: int
    weights_offset: int
    weight_code: int
    keys_offset: int
    nbytes: int


def source_width(num_vertices: int, vertex_dtype) -> int:
    """The fewest whole bytes that hold every vertex id (at most the dtype's)."""
    bits = max(int(num_vertices) - 1, 1).bit_length()
    return min(-(-bits // 8), np.dtype(vertex_dtype).itemsize)


@numba.njit(nogil=True, parallel=True, cache=True)
def _count_not_fitting(weights, limit):
    bad = 0
    for i in numba.prange(weights.size):
        w = weights[i]
        if not (w >= 0 and w <= limit and w == np.floor(w)):
            bad += 1
    return bad


def weight_code(weights: np.ndarray | None) -> int:
    """The narrowest exact code for a page's values (``WEIGHT_NONE`` for none)."""
    if weights is None:
        return WEIGHT_NONE
    if weights.dtype.kind in "iu":
        low = int(weights.min(initial=0))
        high = int(weights.max(initial=0))
        if low >= 0 and high <= 0xFF and weights.dtype.itemsize > 1:
            return WEIGHT_UINT8
        if low >= 0 and high <= 0xFFFF and weights.dtype.itemsize > 2:
            return WEIGHT_UINT16
        return WEIGHT_RAW
    if weights.dtype.itemsize < 4:      # numba has no float16
        return WEIGHT_UINT8 if _count_not_fitting(weights.astype(np.float32), 255.0) == 0 \
            else WEIGHT_RAW
    if _count_not_fitting(weights, 255.0) == 0:
        return WEIGHT_UINT8
    if weights.dtype.itemsize > 2 and _count_not_fitting(weights, 65535.0) == 0:
        return WEIGHT_UINT16
    return WEIGHT_RAW


def packed_layout(num_edges: int, num_columns: int, source_bytes: int, code: int,
                  weight_itemsize: int) -> PackedLayout:
    """The layout of a packed page of these sizes."""
    columns_offset = _align(num_edges * source_bytes)
    weights_offset = _align(columns_offset + 4 * num_columns)
    value_bytes = 0 if code == WEIGHT_NONE else _WEIGHT_BYTES.get(code, weight_itemsize)
    keys_offset = _align(weights_offset + num_edges * value_bytes)
    return PackedLayout(int(num_edges), int(num_columns), int(source_bytes),
                        columns_offset, weights_offset, int(code), keys_offset,
                        keys_offset + 2 * _num_keys(num_edges))


def _num_keys(num_edges: int) -> int:
    return -(-int(num_edges) >> KEY_SHIFT)


@numba.njit(nogil=True, parallel=True, cache=True)
def _pack_sources(source_bytes, itemsize, width, out):
    for i in numba.prange(source_bytes.size // itemsize):
        for b in range(width):
            out[i * width + b] = source_bytes[i * itemsize + b]


@numba.njit(nogil=True, parallel=True, cache=True)
def _pack_columns(idxoff, shard_begin, shard_end, shard_vertices, column_begin, columns,
                  failed):
    """Each shard's column starts; ``failed[s]`` set where shard ``s``'s IdxOff
    is not sorted or leaves its range."""
    for s in numba.prange(shard_begin.size):
        begin, end, count = shard_begin[s], shard_end[s], shard_vertices[s]
        base = column_begin[s]
        column = 0
        previous = 0
        for i in range(begin, end):
            offset = np.int64(idxoff[i])
            if offset < previous or offset >= count:
                failed[s] = True
                break
            previous = offset
            while column <= offset:
                columns[base + column] = i - begin
                column += 1
        while column < count:
            columns[base + column] = end - begin
            column += 1


def pack_page(sources: np.ndarray, idxoff: np.ndarray, weights: np.ndarray | None,
              shards: np.ndarray, num_vertices: int, code: int | None = None,
              out: np.ndarray | None = None) -> tuple[PackedLayout, np.ndarray]:
    """Pack one page.

    Parameters
    ----------
    sources, idxoff, weights : numpy.ndarray
        The page's arrays (``weights`` None: not on the wire).
    shards : numpy.ndarray
        The page's rows of the store's shard table (``edge_begin``,
        ``edge_end``, ``num_vertices``), edges counted from the store's first.
    num_vertices : int
        The graph's (fixes the bytes per source).
    code : int, optional
        The values' code (default: :func:`weight_code` of ``weights``).
    out : numpy.ndarray of uint8, optional
        A buffer of at least the layout's ``nbytes`` (pinned memory, say).

    Returns
    -------
    (PackedLayout, numpy.ndarray of uint8)

    Raises
    ------
    ValueError
        When a shard's IdxOff is not sorted or leaves the shard.
    """
    width = source_width(num_vertices, sources.dtype)
    code = weight_code(weights) if code is None else int(code)
    count = int(sources.size)
    columns = int(shards["num_vertices"].astype(np.int64).sum())
    layout = packed_layout(count, columns, width, code,
                           0 if weights is None else weights.dtype.itemsize)
    image = np.empty(layout.nbytes, np.uint8) if out is None else out[:layout.nbytes]
    _pack_sources(np.ascontiguousarray(sources).view(np.uint8), sources.dtype.itemsize, width,
                  image[:count * width])
    first_edge = int(shards["edge_begin"][0]) if shards.size else 0
    vertices = shards["num_vertices"].astype(np.int64)
    column_begin = np.cumsum(vertices) - vertices
    failed = np.zeros(shards.size, np.bool_)
    _pack_columns(np.ascontiguousarray(idxoff), shards["edge_begin"].astype(np.int64) - first_edge,
                  shards["edge_end"].astype(np.int64) - first_edge, vertices, column_begin,
                  image[layout.columns_offset:layout.columns_offset + 4 * columns]
                  .view(np.uint32), failed)
    if failed.any():
        raise ValueError(f"shard {int(np.argmax(failed))} of the page: IdxOff not sorted "
                         "within [0, num_vertices)")
    if code != WEIGHT_NONE:
        dtype = {WEIGHT_UINT8: np.uint8, WEIGHT_UINT16: np.uint16}.get(code, weights.dtype)
        size = np.dtype(dtype).itemsize
        image[layout.weights_offset:layout.weights_offset + count * size].view(dtype)[:] = \
            weights
    keys = _num_keys(count)
    image[layout.keys_offset:layout.keys_offset + 2 * keys].view(np.uint16)[:] = \
        np.asarray(idxoff)[::1 << KEY_SHIFT]
    return layout, image


def unpack_page(layout: PackedLayout, image: np.ndarray, shards: np.ndarray, vertex_dtype,
                weight_dtype=None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The page's ``(sources, idxoff, weights)`` back from a packed image
    (plain NumPy, the reference for the GPU's decoder; the kept IdxOff of
    every ``2**KEY_SHIFT``-th edge is checked against the column starts').

    Raises
    ------
    ValueError
        When the kept IdxOff differ from the column starts'.
    """
    count, width = layout.num_edges, layout.source_bytes
    raw = image[:count * width].reshape(count, width).astype(np.uint64)
    sources = np.zeros(count, np.uint64)
    for b in range(width):
        sources |= raw[:, b] << np.uint64(8 * b)
    sources = sources.astype(vertex_dtype)
    columns = image[layout.columns_offset:layout.columns_offset + 4 * layout.num_columns
                    ].view(np.uint32).astype(np.int64)
    idxoff = np.empty(count, np.uint16)
    first_edge = int(shards["edge_begin"][0]) if shards.size else 0
    at = 0
    for row in shards:
        begin = int(row["edge_begin"]) - first_edge
        end = int(row["edge_end"]) - first_edge
        vertices = int(row["num_vertices"])
        starts = np.append(columns[at:at + vertices], end - begin)
        idxoff[begin:end] = np.repeat(np.arange(vertices), np.diff(starts))
        at += vertices
    kept = image[layout.keys_offset:layout.keys_offset + 2 * _num_keys(count)].view(np.uint16)
    if not np.array_equal(kept, idxoff[::1 << KEY_SHIFT]):
        raise ValueError("the packed image's kept IdxOff differ from its column starts'")
    weights = None
    if layout.weight_code != WEIGHT_NONE:
        dtype = {WEIGHT_UINT8: np.uint8, WEIGHT_UINT16: np.uint16}.get(layout.weight_code,
                                                                        weight_dtype)
        size = np.dtype(dtype).itemsize
        weights = image[layout.weights_offset:layout.weights_offset + count * size].view(
            dtype).astype(weight_dtype)
    return sources, idxoff, weights
