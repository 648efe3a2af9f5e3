"""Binary CSR graph files: GAP serialized graphs and Subway binary CSR.

Layouts implemented (all little-endian, no padding, no magic number):

GAP benchmark suite ``.sg`` / ``.wsg`` (sbeamer/gapbs, ``src/writer.h``
``WriterBase::WriteSerializedGraph``, read back by ``src/reader.h``
``Reader::ReadSerializedGraph``; types from ``src/graph.h``: ``SGOffset`` =
int64_t, ``SGID`` = int32_t, and ``src/benchmark.h``: ``WNode`` =
``NodeWeight<int32_t, int32_t>`` = ``{int32 v; int32 w}``)::

    offset  size                 field
    0       1                    directed  (C++ bool: 0 or 1)
    1       8                    num_edges (int64; entries per CSR: for an
                                           undirected graph both directions,
                                           i.e. num_edges_directed())
    9       8                    num_nodes (int64)
    17      8 * (num_nodes + 1)  out offsets (int64, offsets[0] = 0,
                                              offsets[num_nodes] = num_edges)
    ...     E * num_edges        out neighbours: int32 (.sg, E = 4) or
                                 {int32 v, int32 w} (.wsg, E = 8)
    if directed:
    ...     8 * (num_nodes + 1)  in offsets
    ...     E * num_edges        in neighbours

  Edges are read from the out-CSR (row = source).  An undirected graph stores
  both directions, so its source reports ``already_symmetric=True``; the
  in-CSR of a directed graph is the same edge set transposed and is skipped.

Subway ``.bcsr`` / ``.bwcsr`` (AutomataLab/Subway, ``tools/converter.cpp``
writes, ``shared/graph.cu`` ``Graph<E>::ReadGraph`` reads; ``OutEdge`` =
``{uint end}``, ``OutEdgeWeighted`` = ``{uint end; uint w8}`` from
``shared/globals.hpp``)::

    offset  size             field
    0       4                num_nodes (uint32)
    4       4                num_edges (uint32)
    8       4 * num_nodes    nodePointer (uint32; the row start of every
                             vertex; row n-1 ends at num_edges, which is not
                             stored: graph.cu sets nodePointer[n] = num_edges)
    ...     E * num_edges    edges: uint32 end (.bcsr, E = 4) or
                             {uint32 end, uint32 w8} (.bwcsr, E = 8)

The file size must be exactly what the header implies: a shorter file is
reported as truncated at the byte where data ran out, a longer one as
carrying trailing bytes.  Offsets must start at 0, never decrease and end at
num_edges; neighbour ids must be below num_nodes.  Every error names the file
and the byte offset (in the decompressed data) of the offending field.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO, Iterator

import numpy as np
from numba import njit

from garaphpy.errors import GraphInputError
from garaphpy.storage.edges import EdgeChunk

#: Formats this module reads ("w": with int weights).
BINARY_FORMATS = ("sg", "wsg", "bcsr", "bwcsr")

GAP_HEADER_BYTES = 17          # bool + int64 + int64
GAP_OFFSET_BYTES = 8           # SGOffset = int64_t
GAP_ID_BYTES = 4               # SGID = int32_t
SUBWAY_HEADER_BYTES = 8        # uint32 + uint32
SUBWAY_WORD_BYTES = 4          # uint

_GAP_MAX_NODES = 2 ** 31 - 1   # ids are int32


@dataclass(frozen=True)
class BinaryLayout:
    """What a binary graph file's header declares.

    Attributes
    ----------
    format : str
        "sg", "wsg", "bcsr" or "bwcsr".
    num_vertices : int
    num_entries : int
        Adjacency entries of one CSR (edges yielded).
    directed : bool or None
        The GAP header's flag; None for Subway files (which say nothing).
    weighted : bool
    offsets_at : int
        Byte offset of the row-offset array.
    neighbours_at : int
        Byte offset of the neighbour (and weight) records.
    entry_bytes : int
        Bytes of one neighbour record.
    expected_size : int
        Exact file size the header implies.
    """

    format: str
    num_vertices: int
    num_entries: int
    directed: bool | None
    weighted: bool
    offsets_at: int
    neighbours_at: int
    entry_bytes: int
    expected_size: int


def header_bytes(format: str) -> int:
    """Bytes of the fixed header of ``format``."""
    return GAP_HEADER_BYTES if format in ("sg", "wsg") else SUBWAY_HEADER_BYTES


def parse_header(format: str, head: bytes, name: str) -> BinaryLayout:
    """Decode the fixed header of a binary graph file.

    Parameters
    ----------
    format : {"sg", "wsg", "bcsr", "bwcsr"}
    head : bytes
        At least the first :func:`header_bytes` bytes of the file (fewer means
        the file is truncated).
    name : str
        The file, for messages.

    Raises
    ------
    GraphInputError
        The header is cut short or holds impossible values.
    """
    weighted = format in ("wsg", "bwcsr")
    need = header_bytes(format)
    if len(head) < need:
        raise GraphInputError(
            f"truncated {format} file: the {need}-byte header ends after "
            f"{len(head)} bytes", name, offset=len(head))
    if format in ("sg", "wsg"):
        directed_byte = head[0]
        num_edges, num_nodes = struct.unpack_from("<qq", head, 1)
        if directed_byte not in (0, 1):
            raise GraphInputError(
                f"not a GAP {format} file: the 'directed' flag is {directed_byte}, "
                "not 0 or 1", name, offset=0)
        if num_edges < 0:
            raise GraphInputError(f"negative edge count {num_edges} in the {format} "
                                  "header", name, offset=1)
        if not 0 <= num_nodes <= _GAP_MAX_NODES:
            raise GraphInputError(f"vertex count {num_nodes} in the {format} header is "
                                  "outside 0..2**31-1 (ids are int32)", name, offset=9)
        entry = GAP_ID_BYTES * (2 if weighted else 1)
        csr_bytes = GAP_OFFSET_BYTES * (num_nodes + 1) + entry * num_edges
        copies = 2 if directed_byte else 1
        offsets_at = GAP_HEADER_BYTES
        return BinaryLayout(format, num_nodes, num_edges, bool(directed_byte), weighted,
                            offsets_at, offsets_at + GAP_OFFSET_BYTES * (num_nodes + 1),
                            entry, GAP_HEADER_BYTES + copies * csr_bytes)
    num_nodes, num_edges = struct.unpack_from("<II", head, 0)
    entry = SUBWAY_WORD_BYTES * (2 if weighted else 1)
    offsets_at = SUBWAY_HEADER_BYTES
    neighbours_at = offsets_at + SUBWAY_WORD_BYTES * num_nodes
    return BinaryLayout(format, num_nodes, num_edges, None, weighted, offsets_at,
                        neighbours_at, entry, neighbours_at + entry * num_edges)


def check_size(layout: BinaryLayout, actual_size: int, name: str) -> None:
    """Raise unless the file is exactly as long as its header implies."""
    if actual_size < layout.expected_size:
        raise GraphInputError(
            f"truncated {layout.format} file: data ran out at byte {actual_size} but "
            f"the header ({layout.num_vertices} vertices, {layout.num_entries} edges) "
            f"implies {layout.expected_size} bytes", name, offset=actual_size)
    if actual_size > layout.expected_size:
        raise GraphInputError(
            f"{actual_size - layout.expected_size} unexpected trailing bytes after "
            f"byte {layout.expected_size}, where the {layout.format} header "
            f"({layout.num_vertices} vertices, {layout.num_entries} edges) says the "
            "file ends", name, offset=layout.expected_size)


def matching_layouts(head: bytes, size: int, name: str) -> list[BinaryLayout]:
    """Every binary layout whose header fits ``head`` and implies exactly ``size``.

    Used to recognise a binary file without an extension hint: besides the
    exact size, the first row offset must be 0.
    """
    found = []
    for format in BINARY_FORMATS:
        try:
            layout = parse_header(format, head, name)
        except GraphInputError:
            continue
        if layout.expected_size != size:
            continue
        first = layout.offsets_at
        word = GAP_OFFSET_BYTES if format in ("sg", "wsg") else SUBWAY_WORD_BYTES
        has_rows = layout.num_vertices > 0
        if has_rows and len(head) >= first + word:
            if int.from_bytes(head[first:first + word], "little") != 0:
                continue
        found.append(layout)
    return found


# ------------------------------------------------------------------ reading --
def _read_array(stream: BinaryIO, dtype: str, count: int, at: int, name: str,
                what: str) -> np.ndarray:
    """Read ``count`` items of ``dtype`` at byte ``at`` (the stream's position)."""
    out = np.empty(count, dtype=np.dtype(dtype))
    raw = out.view(np.uint8)
    view = memoryview(raw)
    filled = 0
    while filled < raw.size:
        got = stream.readinto(view[filled:])
        if not got:
            raise GraphInputError(
                f"truncated file: data ran out at byte {at + filled} while reading "
                f"{what}", name, offset=at + filled)
        filled += got
    return out


@njit(nogil=True, cache=True)
def expand_row_ids(offsets, first_entry, count, out):
    """Write the row (source vertex) of entries ``first_entry .. +count`` to ``out``.

    ``offsets`` is a valid CSR row-offset array of length n + 1.
    """
    row = np.searchsorted(offsets, first_entry, side="right") - 1
    for k in range(count):
        entry = first_entry + k
        while offsets[row + 1] <= entry:
            row += 1
        out[k] = row


@njit(nogil=True, cache=True)
def _first_bad_offset(offsets, num_entries):
    """Index of the first offset that breaks 0 = o[0] <= o[1] <= ... <= num_entries."""
    if offsets.size and offsets[0] != 0:
        return 0
    for i in range(1, offsets.size):
        if offsets[i] < offsets[i - 1] or offsets[i] > num_entries:
            return i
    return -1


def read_offsets(stream: BinaryIO, layout: BinaryLayout, name: str) -> np.ndarray:
    """Read and validate the row offsets; returns int64 of length n + 1.

    The stream must be positioned at ``layout.offsets_at``.
    """
    n = layout.num_vertices
    if layout.format in ("sg", "wsg"):
        offsets = _read_array(stream, "<i8", n + 1, layout.offsets_at, name,
                              "the row offsets").astype(np.int64, copy=False)
        word = GAP_OFFSET_BYTES
    else:
        stored = _read_array(stream, "<u4", n, layout.offsets_at, name,
                             "the row offsets (nodePointer)")
        offsets = np.empty(n + 1, dtype=np.int64)
        offsets[:n] = stored
        offsets[n] = layout.num_entries
        word = SUBWAY_WORD_BYTES
    bad = _first_bad_offset(offsets, layout.num_entries)
    if bad == n and layout.format in ("bcsr", "bwcsr"):
        bad = n - 1  # offsets[n] is not stored: the last stored pointer is too large
    if bad >= 0:
        raise GraphInputError(
            f"invalid row offset {int(offsets[bad])} for vertex {bad}: offsets must "
            f"start at 0, never decrease and stay within {layout.num_entries} edges",
            name, offset=layout.offsets_at + word * bad)
    if layout.format in ("sg", "wsg") and offsets[n] != layout.num_entries:
        raise GraphInputError(
            f"the last row offset is {int(offsets[n])} but the header declares "
            f"{layout.num_entries} edges", name, offset=layout.offsets_at + word * n)
    return offsets


def iter_edges(stream: BinaryIO, layout: BinaryLayout, name: str,
               max_edges: int) -> Iterator[EdgeChunk]:
    """Stream the out-CSR of a binary graph file as edge chunks.

    Parameters
    ----------
    stream : binary file object
        Positioned at ``layout.offsets_at`` (just after the header).
    layout : BinaryLayout
        From :func:`parse_header`, already checked by :func:`check_size`.
    name : str
        The file, for messages.
    max_edges : int
        Edges per chunk at most.

    Yields
    ------
    EdgeChunk
        int64 ids and, for weighted layouts, int64 weights.
    """
    offsets = read_offsets(stream, layout, name)
    n = layout.num_vertices
    gap = layout.format in ("sg", "wsg")
    id_dtype = "<i4" if gap else "<u4"
    words_per_entry = 2 if layout.weighted else 1
    for first in range(0, layout.num_entries, max_edges):
        count = min(max_edges, layout.num_entries - first)
        at = layout.neighbours_at + first * layout.entry_bytes
        raw = _read_array(stream, id_dtype, count * words_per_entry, at, name,
                          "the neighbour lists")
        dst = raw[0::words_per_entry].astype(np.int64)
        bad = np.flatnonzero((dst < 0) | (dst >= n))
        if bad.size:
            k = int(bad[0])
            raise GraphInputError(
                f"neighbour id {int(dst[k])} of edge {first + k} is outside 0..{n - 1}",
                name, offset=at + k * layout.entry_bytes)
        weight = raw[1::2].astype(np.int64) if layout.weighted else None
        src = np.empty(count, dtype=np.int64)
        expand_row_ids(offsets, first, count, src)
        yield EdgeChunk(src, dst, weight)
