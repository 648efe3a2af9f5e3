"""Cutting the CSC into shards and grouping shards into pages.

Garaph section 2.1: the vertices are split into disjoint consecutive ranges;
a *shard* holds every in-edge of its range, sorted by destination, and its
destination is stored as a 16-bit offset from the shard's first vertex
(IdxOff).  A shard's accumulators must fit the shared memory one GPU block
uses, and a shard with replication factor R_i (section 3.2, Equation 2)

    R_i = 2 ** min(ceil(log2(|E_i| / |V_i|) - 0.5), 5)

needs R_i slots per vertex, so |V_i| * R_i <= slots.  A vertex with more
in-edges than a shard may carry is split over several single-vertex shards
whose partial sums are combined through the sum monoid.

For study (Garaph Figure 9), ``fixed_replication=R`` gives every shard the
same R instead: the exponent of R_i is clamped to the range [log2 R, log2 R]
rather than [0, log2 max_replication], and shards are cut by the same rule
(|V_i| * R <= slots), so the one code path serves both.

A *page* is a run of consecutive shards moved to the GPU in one transfer,
sized so that N_streams pages fit the GPU memory the run may use.

Everything here is a pure function of the in-degrees and a few sizes, so it
is tested on its own (tests/storage/test_layout.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from .. import config, options
from ..errors import StoreError
from ..interpreted import interpreted

#: One row per shard.  ``edge_begin``/``edge_end`` index the global CSC edge
#: order; ``split`` is 1 for the pieces of a vertex split over several shards.
SHARD_DTYPE = np.dtype([
    ("first_vertex", np.int64),
    ("num_vertices", np.int32),
    ("replication", np.int32),
    ("edge_begin", np.int64),
    ("edge_end", np.int64),
    ("page", np.int32),
    ("split", np.int8),
])

#: One row per data block of a page (``blocks.bin``): where its bytes lie
#: (storage ``directory``, ``offset``, ``nbytes``) and their ``crc32``.
BLOCK_DTYPE = np.dtype([
    ("page", np.int32),
    ("index", np.int32),
    ("directory", np.int16),
    ("offset", np.int64),
    ("nbytes", np.int64),
    ("crc32", np.uint32),
])


#: How a shard's replication factor measures its contention (:func:`cut_shards`).
REPLICATION_RULES = options.REPLICATION_RULES


def replication_factor(num_edges: int, num_vertices: int,
                       max_replication: int | None = None) -> int:
    """Replication factor R_i of a shard (Garaph Equation 2).

    Parameters
    ----------
    num_edges, num_vertices : int
        |E_i| and |V_i| of the shard (``num_vertices >= 1``).
    max_replication : int, optional
        Upper bound, a power of two (32: one replica per thread of a warp).

    Returns
    -------
    int
        ``2 ** min(ceil(log2(|E_i|/|V_i|) - 0.5), log2(max_replication))``,
        at least 1 (a shard with fewer edges than vertices needs no replica).
    """
    if max_replication is None:
        max_replication = config.MAX_REPLICATION
    return int(_replication_factor(num_edges, num_vertices, 1, 0,
                                   int(math.log2(max_replication))))


# The helpers of _cut_shards are inlined into it before typing: called as
# separate functions, numba compiled each again for every literal argument
# (0, 1) it met while typing the caller, about 1 s on the first build.
@numba.njit(cache=True, nogil=True, inline="always")
def _replication_factor(writers, per, edges_per_thread, min_exponent, max_exponent):
    # Equation 2 for a contention of writers / per edges per vertex (|E_i| / |V_i|,
    # or the edge-weighted sum(d^2) / |E_i|), each thread taking edges_per_thread
    # edges, the exponent clamped to [min_exponent, max_exponent]
    # (min_exponent == max_exponent: a fixed R, for study)
    if writers <= 0:
        return 1 << min_exponent
    exponent = math.ceil(math.log2(writers / (per * edges_per_thread)) - 0.5)
    if exponent < min_exponent:
        exponent = min_exponent
    if exponent > max_exponent:
        exponent = max_exponent
    return 1 << exponent


@numba.njit(cache=True, nogil=True, inline="always")
def _last_vertex_within(in_offsets, start, limit_vertex, max_edges):
    """Largest end <= limit_vertex with in_offsets[end] - in_offsets[start] <= max_edges."""
    budget_end = in_offsets[start] + max_edges
    lo, hi = start + 1, limit_vertex
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if in_offsets[mid] <= budget_end:
            lo = mid
        else:
            hi = mid - 1
    return lo


@numba.njit(cache=True, nogil=True, inline="always")
def _shard_factor(in_offsets, squares, vertex, end, edges_per_thread, min_exponent,
                  max_exponent):
    # R_i of the range [vertex, end): by its mean in-degree (Equation 2) when
    # squares is empty, else by its edge-weighted mean in-degree
    edges = in_offsets[end] - in_offsets[vertex]
    if squares.shape[0] == 0:
        return _replication_factor(edges, end - vertex, edges_per_thread, min_exponent,
                                   max_exponent)
    return _replication_factor(squares[end] - squares[vertex], edges, edges_per_thread,
                               min_exponent, max_exponent)


@numba.njit(cache=True, nogil=True)
def _cut_shards(in_offsets, squares, edges_per_thread, slots, max_vertices, max_edges,
                min_exponent, max_exponent):
    num_vertices = in_offsets.shape[0] - 1
    capacity = 1024
    first = np.empty(capacity, np.int64)
    count = np.empty(capacity, np.int32)
    repl = np.empty(capacity, np.int32)
    ebegin = np.empty(capacity, np.int64)
    eend = np.empty(capacity, np.int64)
    split = np.empty(capacity, np.int8)
    num_shards = 0
    vertex = 0
    while vertex < num_vertices:
        degree = in_offsets[vertex + 1] - in_offsets[vertex]
        if degree > max_edges:
            pieces = (degree + max_edges - 1) // max_edges
        else:
            pieces = 1
        if num_shards + pieces > capacity:
            capacity = max(capacity * 2, num_shards + pieces)
            first = _grow(first, capacity)
            count = _grow(count, capacity)
            repl = _grow(repl, capacity)
            ebegin = _grow(ebegin, capacity)
            eend = _grow(eend, capacity)
            split = _grow(split, capacity)
        if degree > max_edges:
            # a vertex too heavy for one shard: single-vertex pieces
            begin = in_offsets[vertex]
            for piece in range(pieces):
                end = min(begin + max_edges, in_offsets[vertex + 1])
                first[num_shards] = vertex
                count[num_shards] = 1
                # the piece's edges all update one vertex: both rules give |E_i|
                repl[num_shards] = _replication_factor(end - begin, 1, edges_per_thread,
                                                       min_exponent, max_exponent)
                ebegin[num_shards] = begin
                eend[num_shards] = end
                split[num_shards] = 1
                num_shards += 1
                begin = end
            vertex += 1
            continue
        # the largest range whose accumulators fit: try every allowed R = 2^k
        # and keep the longest range whose own factor (one edge per thread) is
        # at most R; the factor the shard runs with may then be divided
        best_end = vertex + 1
        for exponent in range(min_exponent, max_exponent + 1):
            limit = min(vertex + min(slots >> exponent, max_vertices), num_vertices)
            if limit <= vertex:
                continue
            end = _last_vertex_within(in_offsets, vertex, limit, max_edges)
            fits = _shard_factor(in_offsets, squares, vertex, end, 1,
                                 min_exponent, max_exponent) <= (1 << exponent)
            if not fits and squares.shape[0] != 0:
                # the edge-weighted factor rises with a heavy vertex in the range:
                # the longest prefix that stops before it (bisection, each end checked)
                lo, hi = vertex + 1, end - 1
                while lo <= hi:
                    mid = (lo + hi) >> 1
                    if _shard_factor(in_offsets, squares, vertex, mid, 1,
                                     min_exponent, max_exponent) <= (1 << exponent):
                        end = mid
                        fits = True
                        lo = mid + 1
                    else:
                        hi = mid - 1
            if fits and end > best_end:
                best_end = end
        first[num_shards] = vertex
        count[num_shards] = best_end - vertex
        repl[num_shards] = _shard_factor(in_offsets, squares, vertex, best_end,
                                         edges_per_thread, min_exponent, max_exponent)
        ebegin[num_shards] = in_offsets[vertex]
        eend[num_shards] = in_offsets[best_end]
        split[num_shards] = 0
        num_shards += 1
        vertex = best_end
    return (first[:num_shards], count[:num_shards], repl[:num_shards],
            ebegin[:num_shards], eend[:num_shards], split[:num_shards])


@numba.njit(cache=True, nogil=True)
def _grow(array, capacity):
    grown = np.empty(capacity, array.dtype)
    # a loop, not grown[:n] = array: the slice's shape check compiles a
    # formatted error message, 2 s of the first build
    for i in range(array.shape[0]):
        grown[i] = array[i]
    return grown


def _interprets(in_offsets: np.ndarray) -> bool:
    """Whether :func:`_cut_shards` runs as Python (:mod:`garaphpy.interpreted`):
    a graph of at most ``config.INTERPRET_MAX_ITEMS`` vertices and as many
    edges, cut into a few shards at most (one loop iteration each)."""
    return in_offsets.shape[0] - 1 <= config.INTERPRET_MAX_ITEMS \
        and in_offsets[-1] <= config.INTERPRET_MAX_ITEMS


def shard_edge_limit(num_edges: int, max_edges: int, min_shards: int) -> int:
    """Edges per shard at most: ``max_edges``, lowered on small graphs so that
    they still cut into about ``min_shards`` shards (one GPU block each), but
    never below ``config.MIN_SHARD_EDGES``."""
    wanted = -(-num_edges // min_shards)
    return int(min(max_edges, max(wanted, config.MIN_SHARD_EDGES)))


def cut_shards(in_offsets: np.ndarray, *,
               shared_memory_bytes: int | None = None,
               slot_bytes: int | None = None,
               max_vertices: int | None = None,
               max_edges: int | None = None,
               max_replication: int | None = None,
               fixed_replication: int | None = None,
               replication_rule: str = "mean",
               edges_per_thread: int = 1) -> np.ndarray:
    """Split the vertices into shards (Garaph sections 2.1 and 3.2).

    Parameters
    ----------
    in_offsets : numpy.ndarray of int64, shape (n + 1,)
        CSC index: the in-edges of vertex v are ``in_offsets[v]:in_offsets[v+1]``.
    shared_memory_bytes : int
        Shared memory of one block reserved for accumulators.
    slot_bytes : int
        Bytes of one accumulator slot.
    max_vertices : int
        At most this many destination vertices per shard (16-bit IdxOff).
    max_edges : int
        At most this many edges per shard; heavier vertices are split.
    max_replication : int
        Upper bound of R_i, a power of two.
    fixed_replication : int or None
        None (default): each shard's R_i by Equation 2.  A power of two
        ``R <= max_replication``: every shard gets exactly R and holds at
        most ``slots // R`` vertices (for studying Equation 2 against fixed
        factors, Garaph Figure 9).
    replication_rule : {"mean", "edge-weighted"}
        How R_i measures the contention of a shard's accumulators: by its
        mean in-degree |E_i| / |V_i| (Equation 2 as published), or by the
        mean in-degree seen from its edges, sum(d_v^2) / |E_i| (the number of
        edges that share an edge's destination).  The two agree when a
        shard's in-degrees are equal; when one heavy vertex sits among light
        ones, the mean undercounts the collisions on it, and the edge-weighted
        rule replicates more and cuts such shards shorter.
    edges_per_thread : int
        Divides the contention of the factor each shard runs with: a pull
        kernel whose threads combine that many consecutive edges before their
        atomic reaches a vertex's accumulator from that many times fewer
        threads.  The shards are cut as with 1 (the published rule), so a
        divisor changes only how many replicas each shard keeps, never where
        shards end.  1: the published Equation 2.  Stores default to
        ``config.REPLICATION_EDGES_PER_THREAD``.

    Returns
    -------
    numpy.ndarray of SHARD_DTYPE
        The shards in vertex order; ``page`` is left at -1.  Every vertex lies
        in exactly one shard, or in consecutive ``split`` shards, and every
        edge in exactly one shard.
    """
    if shared_memory_bytes is None:
        shared_memory_bytes = config.SHARD_SHARED_MEMORY_BYTES
    if slot_bytes is None:
        slot_bytes = config.SHARD_SLOT_BYTES
    if max_vertices is None:
        max_vertices = config.MAX_SHARD_VERTICES
    if max_edges is None:
        max_edges = config.MAX_SHARD_EDGES
    if max_replication is None:
        max_replication = config.MAX_REPLICATION
    slots = shared_memory_bytes // slot_bytes
    if slots < max_replication:
        raise StoreError(
            f"shared_memory_bytes={shared_memory_bytes} holds {slots} slots of "
            f"{slot_bytes} bytes, fewer than one vertex at R={max_replication}")
    if max_replication & (max_replication - 1) or max_replication < 1:
        raise StoreError(f"max_replication={max_replication} is not a power of two")
    max_exponent = int(math.log2(max_replication))
    min_exponent = 0
    if fixed_replication is not None:
        if (isinstance(fixed_replication, bool) or not isinstance(fixed_replication, int)
                or fixed_replication < 1 or fixed_replication & (fixed_replication - 1)
                or fixed_replication > max_replication):
            raise StoreError(f"fixed_replication={fixed_replication!r} must be a power of two "
                             f"in 1..max_replication={max_replication}")
        min_exponent = max_exponent = int(math.log2(fixed_replication))
    if not 1 <= max_vertices <= 1 << 16:
        raise StoreError(f"max_vertices={max_vertices} must lie in 1..65536 (16-bit IdxOff)")
    if max_edges < 1:
        raise StoreError(f"max_edges={max_edges} must be positive")
    if replication_rule not in REPLICATION_RULES:
        raise StoreError(f"replication_rule={replication_rule!r}: expected one of "
                         f"{REPLICATION_RULES}")
    if (isinstance(edges_per_thread, bool) or not isinstance(edges_per_thread, int)
            or edges_per_thread < 1):
        raise StoreError(f"edges_per_thread={edges_per_thread!r}: expected a positive integer")
    in_offsets = np.ascontiguousarray(in_offsets, dtype=np.int64)
    if replication_rule == "edge-weighted":
        degrees = np.diff(in_offsets).astype(np.float64)
        squares = np.concatenate(([0.0], np.cumsum(degrees * degrees)))
    else:
        squares = np.zeros(0, np.float64)
    cut = interpreted(_cut_shards) if _interprets(in_offsets) else _cut_shards
    columns = cut(in_offsets, squares, edges_per_thread, slots, max_vertices, max_edges,
                  min_exponent, max_exponent)
    shards = np.empty(columns[0].shape[0], SHARD_DTYPE)
    for name, column in zip(("first_vertex", "num_vertices", "replication",
                             "edge_begin", "edge_end", "split"), columns):
        shards[name] = column
    shards["page"] = -1
    return shards


@dataclass(frozen=True)
class PageSizing:
    """How many bytes one edge of a page takes, and the page budget.

    Attributes
    ----------
    source_bytes : int
        Bytes of one source id (4 for int32, 8 for int64).
    weight_bytes : int
        Bytes of one edge value (0 when unweighted).
    page_bytes : int
        Largest page image in bytes.
    """

    source_bytes: int
    weight_bytes: int
    page_bytes: int

    @property
    def edge_bytes(self) -> int:
        """Bytes per edge in a page: source, 16-bit IdxOff, value."""
        return self.source_bytes + 2 + self.weight_bytes


def page_budget(gpu_memory_bytes: int, n_streams: int, vertex_bytes: int,
                max_page_bytes: int | None = None) -> int:
    """Largest page so that ``n_streams`` pages and the vertex data fit the GPU.

    Parameters
    ----------
    gpu_memory_bytes : int
        GPU memory the run may use.
    n_streams : int
        Pages in flight at once (one per stream).
    vertex_bytes : int
        GPU memory taken by vertex arrays (values, their next copy, bitmap).
    max_page_bytes : int
        Upper bound, so that hybrid runs get several pages to share.
    """
    if max_page_bytes is None:
        max_page_bytes = config.MAX_PAGE_BYTES
    if n_streams < 1:
        raise StoreError(f"n_streams={n_streams} must be at least 1")
    free_for_pages = gpu_memory_bytes - vertex_bytes
    if free_for_pages <= 0:
        raise StoreError(
            f"GPU memory budget of {gpu_memory_bytes} bytes (gpu_memory) does not even "
            f"hold the vertex data ({vertex_bytes} bytes)")
    return int(min(free_for_pages // n_streams, max_page_bytes))


@numba.njit(cache=True, nogil=True)
def _group_pages(shard_edges, edge_bytes, fixed_bytes, page_bytes):
    num_shards = shard_edges.shape[0]
    page_of = np.empty(num_shards, np.int32)
    page = 0
    used = 0
    for shard in range(num_shards):
        need = shard_edges[shard] * edge_bytes + fixed_bytes
        if used > 0 and used + need > page_bytes:
            page += 1
            used = 0
        page_of[shard] = page
        used += need
    return page_of


#: Alignment of each array inside a page image.
PAGE_ARRAY_ALIGNMENT = 64


def smallest_page_bytes(shards: np.ndarray, sizing: PageSizing) -> tuple[int, int]:
    """The edges of the largest shard, and the bytes of a page holding it alone
    (its arrays, each aligned): no page limit below that can hold every shard."""
    largest = int((shards["edge_end"] - shards["edge_begin"]).max()) if shards.size else 0
    return largest, largest * sizing.edge_bytes + 3 * PAGE_ARRAY_ALIGNMENT


def group_pages(shards: np.ndarray, sizing: PageSizing) -> np.ndarray:
    """Assign runs of consecutive shards to pages, in place, and return the
    number of shards per page.

    A page takes as many consecutive shards as fit ``sizing.page_bytes``.

    Raises
    ------
    garaphpy.errors.StoreError
        When one shard alone is larger than a page: the GPU budget is too small.
    """
    shard_edges = (shards["edge_end"] - shards["edge_begin"]).astype(np.int64)
    fixed = 3 * PAGE_ARRAY_ALIGNMENT
    largest, smallest = smallest_page_bytes(shards, sizing)
    if smallest > sizing.page_bytes and shard_edges.size:
        raise StoreError(
            f"a page of {sizing.page_bytes} bytes cannot hold one shard of "
            f"{largest} edges ({sizing.edge_bytes} bytes each): "
            "raise the GPU memory budget or lower max_shard_edges")
    group = interpreted(_group_pages) if shard_edges.size <= config.INTERPRET_MAX_ITEMS \
        else _group_pages
    page_of = group(shard_edges, sizing.edge_bytes, 0, sizing.page_bytes - fixed)
    shards["page"] = page_of
    if page_of.size == 0:
        return np.zeros(0, np.int64)
    return np.bincount(page_of).astype(np.int64)


def align(value: int, alignment: int) -> int:
    """Round ``value`` up to a multiple of ``alignment``."""
    return (value + alignment - 1) // alignment * alignment


def page_array_offsets(num_edges: int, sizing: PageSizing) -> dict:
    """Byte offsets of the arrays in a page image.

    A page image is ``sources | idxoff | weights``, each array starting at a
    multiple of :data:`PAGE_ARRAY_ALIGNMENT` bytes.

    Returns
    -------
    dict
        ``{"sources": 0, "idxoff": ..., "weights": ..., "nbytes": ...}``.
    """
    idxoff = align(num_edges * sizing.source_bytes, PAGE_ARRAY_ALIGNMENT)
    weights = align(idxoff + 2 * num_edges, PAGE_ARRAY_ALIGNMENT)
    end = align(weights + num_edges * sizing.weight_bytes, PAGE_ARRAY_ALIGNMENT)
    return {"sources": 0, "idxoff": idxoff, "weights": weights, "nbytes": end}
