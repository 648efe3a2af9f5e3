"""Host kernels of selective page transfers: the frontier's edges per page and
its active subgraph (Subway's SubCSR, Sabet et al. EuroSys'20
section 3; HyTGraph's filtered transfers, section 4).

A graph whose pages do not all fit the GPU streams some of them every
iteration.  For a program whose vertices follow from their in-neighbours
that changed alone (``VertexProgram.apply_keeps_best``) an iteration needs
only the out-edges of the active vertices, which the store keeps as a CSR
(``out_offsets``, ``out_targets``, with the edge values placed in the same
order by :func:`out_edge_values`):

* :func:`page_active_edges` counts, per page, the frontier's out-edges whose
  destination lies in the page's vertex range: a page with none is skipped,
  and the counts price the other choices;
* :func:`gather_active_edges` copies the frontier's out-edges into the
  pages chosen to go compacted into one buffer: pieces of the frontier's
  vertices, their edge offsets, targets and values, which the GPU's push
  kernel reads after one copy.

Each costs time in proportion to the frontier's out-edges, never to the
graph.  Both run on every core: the frontier's edges are cut into pieces of
at most :data:`PIECE_EDGES` (a hub's edges are shared), and a vertex's page
is found through a table (:class:`PageLookup`), not a search over pages.
"""

from __future__ import annotations

import contextlib

import numba
import numpy as np

from .. import _numba_setup  # noqa: F401  (threading layer first)
from .cpu.common import _balanced_chunks


#: Out-edges one piece of the frontier's work holds at most: a hub's edges are
#: cut into pieces, so that the host threads (and the GPU's lanes) share them.
PIECE_EDGES = 4096

#: Frontier vertices, or pieces, up to which the counts run on the calling
#: thread alone: a parallel launch for 13 vertices waited 12-67 ms for the
#: other host threads in some runs, against microseconds of work
#: (BENCHMARKS.md); 256 pieces are at most 1M edges, a millisecond or two.
SERIAL_PIECES = 256


@contextlib.contextmanager
def _threads_for(items: int):
    """Numba's parallel loops on one thread (the caller's) while ``items`` is at
    most :data:`SERIAL_PIECES`; on every thread otherwise."""
    if items > SERIAL_PIECES:
        yield
        return
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(previous)


class PageLookup:
    """The pages holding a vertex, found in a few steps.

    Pages hold increasing vertex ranges (neighbours share the vertex whose
    in-edges are split over them).  ``table[b]`` is the last page starting
    at or before vertex ``b << shift``: a vertex's last page is at most a
    few steps on, and the pages before it that still hold it are found by
    stepping back.

    Parameters
    ----------
    page_first, page_end : int64 arrays
        Each page's vertex range.
    num_vertices : int
    buckets : int
        About how many table entries (the table stays in the cache).
    """

    def __init__(self, page_first: np.ndarray, page_end: np.ndarray, num_vertices: int,
                 buckets: int = 1 << 16):
        self.page_first = np.ascontiguousarray(page_first, np.int64)
        self.page_end = np.ascontiguousarray(page_end, np.int64)
        self.shift = max(0, int(np.ceil(np.log2(max(num_vertices, 1) / buckets))))
        starts = np.arange(-(-max(num_vertices, 1) >> self.shift) + 1, dtype=np.int64) \
            << self.shift
        self.table = (np.searchsorted(self.page_first, starts, side="right") - 1).astype(
            np.int32)

    @property
    def arrays(self) -> tuple:
        return self.page_first, self.page_end, self.table, self.shift


@numba.njit(nogil=True, cache=True, inline="always")
def _last_page(page_first, table, shift, v):
    p = table[v >> shift]
    while p + 1 < page_first.size and page_first[p + 1] <= v:
        p += 1
    return p


@numba.njit(nogil=True, parallel=True, cache=True)
def _chunk_pieces(frontier, out_offsets, piece_edges, chunks, totals):
    for c in numba.prange(chunks):
        total = 0
        for i in range(frontier.size * c // chunks, frontier.size * (c + 1) // chunks):
            u = frontier[i]
            total += (out_offsets[u + 1] - out_offsets[u] + piece_edges - 1) // piece_edges
        totals[c] = total


@numba.njit(nogil=True, parallel=True, cache=True)
def _fill_pieces(frontier, out_offsets, piece_edges, chunks, first_piece, vertex, begin, end):
    for c in numba.prange(chunks):
        at = first_piece[c]
        for i in range(frontier.size * c // chunks, frontier.size * (c + 1) // chunks):
            u = frontier[i]
            lo, hi = out_offsets[u], out_offsets[u + 1]
            while lo < hi:
                vertex[at] = u
                begin[at] = lo
                end[at] = min(lo + piece_edges, hi)
                lo += piece_edges
                at += 1


class PieceBuffers:
    """Arrays :func:`frontier_pieces` writes into, kept from one frontier to the
    next and grown as needed (fresh memory costs a page fault per 4 KiB, as
    much as the pieces' making itself)."""

    def __init__(self):
        self.arrays = np.empty((3, 0), np.int64)

    def take(self, count: int) -> tuple:
        if count > self.arrays.shape[1]:
            self.arrays = np.empty((3, max(count, self.arrays.shape[1] * 5 // 4)), np.int64)
        return tuple(self.arrays[:, :count])


def frontier_pieces(frontier: np.ndarray, out_offsets: np.ndarray,
                    piece_edges: int = PIECE_EDGES, buffers: PieceBuffers | None = None,
                    chunks: int = 256) -> tuple:
    """The frontier's out-edges as pieces of at most ``piece_edges`` edges:
    (vertex, edge begin, edge end) arrays, in the frontier's order (views of
    ``buffers`` when given, valid until their next use)."""
    frontier = np.ascontiguousarray(frontier, np.int64)
    chunks = max(1, min(int(chunks), frontier.size))
    totals = np.empty(chunks, np.int64)
    with _threads_for(frontier.size):
        _chunk_pieces(frontier, out_offsets, piece_edges, chunks, totals)
        first_piece = np.cumsum(totals) - totals
        count = int(totals.sum())
        vertex, begin, end = (buffers.take(count) if buffers is not None
                              else np.empty((3, count), np.int64))
        _fill_pieces(frontier, out_offsets, piece_edges, chunks, first_piece, vertex, begin,
                     end)
    return vertex, begin, end


#: A piece of at least this many edges, its targets sorted, is walked page by page
#: (two binary searches per page it reaches) rather than edge by edge.
SORTED_RUN_EDGES = 64


@numba.njit(nogil=True, cache=True, inline="always")
def _lower_bound(values, lo, hi, x):
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(nogil=True, cache=True, inline="always")
def _gallop(values, lo, hi, x):
    """The first index in [lo, hi) whose value is at least ``x`` (``hi`` if
    none), in steps doubling from ``lo``: the cost grows with the distance
    gone, not with the range."""
    step = 1
    start = lo
    while lo < hi and values[lo] < x:
        start = lo + 1
        lo += step
        step <<= 1
    return _lower_bound(values, start, min(lo, hi), x)


@numba.njit(nogil=True, cache=True, inline="always")
def _first_page(page_first, page_end, table, shift, v):
    """The first page holding vertex ``v``."""
    p = _last_page(page_first, table, shift, v)
    while p > 0 and page_end[p - 1] > v:
        p -= 1
    return p


@numba.njit(nogil=True, cache=True, inline="always")
def _next_page(page_first, page_end, table, shift, out_targets, p, hi):
    """After page ``p``, the next page holding a target at or after edge ``hi``:
    ``p + 1`` when the two share a vertex, else the first page of that target."""
    if p + 1 < page_first.size and page_first[p + 1] < page_end[p]:
        return p + 1
    return max(p + 1, _first_page(page_first, page_end, table, shift, out_targets[hi]))


@numba.njit(nogil=True, parallel=True, cache=True)
def _page_counts(begin, end, out_targets, page_first, page_end, table, shift, chunks,
                 sorted_targets):
    num_pages = page_first.size
    partial = np.zeros((chunks, num_pages), np.int64)
    for c in numba.prange(chunks):
        spans = np.empty((num_pages, 3), np.int64)
        for i in range(begin.size * c // chunks, begin.size * (c + 1) // chunks):
            b, e = begin[i], end[i]
            if sorted_targets and e - b >= SORTED_RUN_EDGES:
                for r in range(_page_spans(b, e, out_targets, page_first, page_end, table,
                                           shift, spans)):
                    partial[c, spans[r, 0]] += spans[r, 2] - spans[r, 1]
                continue
            for k in range(b, e):
                v = out_targets[k]
                p = _last_page(page_first, table, shift, v)
                while p >= 0 and page_end[p] > v:
                    partial[c, p] += 1
                    p -= 1
    counts = np.zeros(num_pages, np.int64)
    for c in range(chunks):
        counts += partial[c]
    return counts


def page_active_edges(frontier: np.ndarray, out_offsets: np.ndarray, out_targets: np.ndarray,
                      lookup: PageLookup, chunks: int, pieces: tuple | None = None,
                      sorted_targets: bool | None = None) -> np.ndarray:
    """Per page, the frontier's out-edges whose destination lies in its range.

    An edge to a vertex whose in-edges are split over neighbouring pages
    counts for every page that holds the vertex (a page it does not reach
    is then never skipped wrongly).

    Parameters
    ----------
    frontier : int64 array
        The active vertices.
    out_offsets, out_targets : arrays
        The out-edge CSR.
    lookup : PageLookup
    chunks : int
        Parts the work is cut into (one private histogram each).
    pieces : tuple, optional
        :func:`frontier_pieces` of the frontier, when already made.
    sorted_targets : bool, optional
        :func:`targets_sorted` of the CSR, when already known (else checked).

    Returns
    -------
    int64 array
        Edges per page.
    """
    _vertex, begin, end, sorted_targets = _walk(frontier, out_offsets, out_targets, pieces,
                                                sorted_targets)
    chunks = max(1, min(int(chunks), begin.size))
    with _threads_for(begin.size):
        return _page_counts(begin, end, out_targets, *lookup.arrays, chunks, sorted_targets)


def compile_counts(out_offsets: np.ndarray, out_targets: np.ndarray, lookup: PageLookup,
                   sorted_targets: bool, buffers: PieceBuffers | None = None,
                   chunks: int = 1) -> None:
    """Compile (or load from numba's cache) :func:`count_work`,
    :func:`frontier_pieces` and :func:`page_active_edges` for these arrays'
    types, by counting a one-vertex frontier: a run's set-up calls it, so
    that the first selective iteration does not compile them inside the
    timed iterations (seconds on a fresh install)."""
    if out_offsets.size < 2:
        return
    first = np.zeros(1, np.int64)
    count_work(first, out_offsets, lookup.arrays[0].size, sorted_targets)
    pieces = frontier_pieces(first, out_offsets, buffers=buffers)
    page_active_edges(first, out_offsets, out_targets, lookup, chunks, pieces, sorted_targets)


def _walk(frontier, out_offsets, out_targets, pieces, sorted_targets) -> tuple:
    """The frontier's pieces (made unless given) and whether the CSR's targets
    are sorted (checked unless given)."""
    vertex, begin, end = pieces if pieces is not None else frontier_pieces(frontier,
                                                                           out_offsets)
    if sorted_targets is None:
        sorted_targets = targets_sorted(out_offsets, out_targets)
    return vertex, begin, end, bool(sorted_targets)


@numba.njit(nogil=True, cache=True, inline="always")
def _pushed(page_first, page_end, table, shift, pushed_page, v):
    p = _last_page(page_first, table, shift, v)
    while p >= 0 and page_end[p] > v:
        if pushed_page[p]:
            return True
        p -= 1
    return False


@numba.njit(nogil=True, cache=True)
def _page_spans(b, e, out_targets, page_first, page_end, table, shift, spans):
    """A sorted piece's edges page by page: ``spans[r]`` = (page, first edge,
    end edge) for each page the piece reaches, in order (neighbours sharing a
    vertex overlap on its edges); returns how many."""
    num_pages = page_first.size
    count = 0
    lo = b
    p = _first_page(page_first, page_end, table, shift, out_targets[b])
    while p < num_pages:
        lo = _gallop(out_targets, lo, e, page_first[p])
        if lo >= e:
            break
        hi = _gallop(out_targets, lo, e, page_end[p])
        spans[count, 0] = p
        spans[count, 1] = lo
        spans[count, 2] = hi
        count += 1
        if hi >= e:
            break
        p = _next_page(page_first, page_end, table, shift, out_targets, p, hi)
    return count


@numba.njit(nogil=True, cache=True)
def _pushed_runs(b, e, out_targets, page_first, page_end, table, shift, pushed_page, spans,
                 runs):
    """The runs of a sorted piece's edges into pushed pages (disjoint, in order)
    into ``runs`` (pairs); returns how many."""
    count = 0
    done = b
    for r in range(_page_spans(b, e, out_targets, page_first, page_end, table, shift,
                               spans)):
        lo, hi = spans[r, 1], spans[r, 2]
        if pushed_page[spans[r, 0]] and hi > done:
            start = max(lo, done)
            if count > 0 and runs[count - 1, 1] == start:
                runs[count - 1, 1] = hi
            else:
                runs[count, 0] = start
                runs[count, 1] = hi
                count += 1
            done = hi
    return count


@numba.njit(nogil=True, parallel=True, cache=True)
def _count_pushed(pieces, out_targets, lookup, pushed_page, counts, chunks, sorted_targets):
    """``counts[i]``: the edges of piece ``i`` (``pieces`` is ``(begin, end)``
    over ``out_targets``) into pushed pages (``lookup``: a
    :class:`PageLookup`'s ``arrays``)."""
    begin, end = pieces
    page_first, page_end, table, shift = lookup
    for c in numba.prange(chunks):
        spans = np.empty((page_first.size, 3), np.int64)
        runs = np.empty((page_first.size + 1, 2), np.int64)
        for i in range(begin.size * c // chunks, begin.size * (c + 1) // chunks):
            kept = 0
            if sorted_targets and end[i] - begin[i] >= SORTED_RUN_EDGES:
                for r in range(_pushed_runs(begin[i], end[i], out_targets, page_first,
                                            page_end, table, shift, pushed_page, spans,
                                            runs)):
                    kept += runs[r, 1] - runs[r, 0]
                counts[i] = kept
                continue
            for k in range(begin[i], end[i]):
                if _pushed(page_first, page_end, table, shift, pushed_page, out_targets[k]):
                    kept += 1
            counts[i] = kept


@numba.njit(nogil=True, parallel=True, cache=True)
def _write_pushed(pieces, out_edges, lookup, pushed_page, out, chunks, sorted_targets):
    """The edges of :func:`_count_pushed` written out: ``pieces`` is
    ``(vertex, begin, end)``, ``out_edges`` ``(out_targets, out_weights,
    with_weights)``, ``lookup`` a :class:`PageLookup`'s ``arrays`` and
    ``out`` ``(offsets, sources, targets, weights)``."""
    vertex, begin, end = pieces
    out_targets, out_weights, with_weights = out_edges
    page_first, page_end, table, shift = lookup
    offsets, sources, targets, weights = out
    for c in numba.prange(chunks):
        spans = np.empty((page_first.size, 3), np.int64)
        runs = np.empty((page_first.size + 1, 2), np.int64)
        for i in range(begin.size * c // chunks, begin.size * (c + 1) // chunks):
            sources[i] = vertex[i]
            at = offsets[i]
            if sorted_targets and end[i] - begin[i] >= SORTED_RUN_EDGES:
                for r in range(_pushed_runs(begin[i], end[i], out_targets, page_first,
                                            page_end, table, shift, pushed_page, spans,
                                            runs)):
                    lo, hi = runs[r, 0], runs[r, 1]
                    targets[at:at + hi - lo] = out_targets[lo:hi]
                    if with_weights:
                        weights[at:at + hi - lo] = out_weights[lo:hi]
                    at += hi - lo
                continue
            for k in range(begin[i], end[i]):
                v = out_targets[k]
                if _pushed(page_first, page_end, table, shift, pushed_page, v):
                    targets[at] = v
                    if with_weights:
                        weights[at] = out_weights[k]
                    at += 1


def gather_active_edges(frontier: np.ndarray, out_offsets: np.ndarray, out_targets: np.ndarray,
                        out_weights: np.ndarray | None, lookup: PageLookup,
                        pushed_pages: np.ndarray, allocate, chunks: int,
                        pieces: tuple | None = None, sorted_targets: bool | None = None
                        ) -> dict:
    """The frontier's out-edges into the given pages, as a small CSR of pieces.

    Parameters
    ----------
    frontier : int64 array
        The active vertices.
    out_offsets, out_targets : arrays
        The out-edge CSR; ``out_weights`` its edge values in the same order
        (None: no values are gathered).
    lookup : PageLookup
    pushed_pages : bool array
        Per page, whether the edges into it are wanted (an edge into a vertex
        two pages share is kept when either is wanted).
    allocate : callable
        ``allocate(sizes)`` with ``{"sources", "offsets", "targets",
        "weights"}`` element counts returns arrays of at least those sizes
        (for example views of one pinned buffer).
    chunks : int
        Parts the work is cut into.
    pieces : tuple, optional
        :func:`frontier_pieces` of the frontier, when already made.
    sorted_targets : bool, optional
        :func:`targets_sorted` of the CSR, when already known (else checked).

    Returns
    -------
    dict
        ``sources`` (int64, the vertex of each piece: a vertex with more than
        :data:`PIECE_EDGES` out-edges has several pieces), ``offsets`` (int64,
        one more than the pieces: piece ``i``'s kept edges are
        ``targets[offsets[i]:offsets[i + 1]]``), ``targets``, ``weights`` (or
        None) and ``edges``, the number kept.
    """
    vertex, begin, end, sorted_targets = _walk(frontier, out_offsets, out_targets, pieces,
                                               sorted_targets)
    count = begin.size
    chunks = max(1, min(int(chunks), count))
    pushed_pages = np.ascontiguousarray(pushed_pages, np.bool_)
    counts = np.empty(count, np.int64)
    _count_pushed((begin, end), out_targets, lookup.arrays, pushed_pages, counts, chunks,
                  sorted_targets)
    edges = int(counts.sum())
    arrays = allocate({"sources": count, "offsets": count + 1,
                       "targets": edges, "weights": edges if out_weights is not None else 0})
    offsets = arrays["offsets"][:count + 1]
    offsets[0] = 0
    np.cumsum(counts, out=offsets[1:])
    sources = arrays["sources"][:count]
    targets = arrays["targets"][:edges]
    with_weights = out_weights is not None
    weights = arrays["weights"][:edges] if with_weights else np.zeros(1, np.float32)
    _write_pushed((vertex, begin, end),
                  (out_targets, out_weights if with_weights else np.zeros(1, np.float32),
                   with_weights),
                  lookup.arrays, pushed_pages, (offsets, sources, targets, weights), chunks,
                  sorted_targets)
    return {"sources": sources, "offsets": offsets, "targets": targets,
            "weights": weights if with_weights else None, "edges": edges}


@numba.njit(nogil=True, parallel=True, cache=True)
def _count_unsorted(out_offsets, out_targets, chunks):
    num_vertices = out_offsets.size - 1
    unsorted = 0
    for c in numba.prange(chunks):
        for u in range(num_vertices * c // chunks, num_vertices * (c + 1) // chunks):
            for k in range(out_offsets[u] + 1, out_offsets[u + 1]):
                if out_targets[k] < out_targets[k - 1]:
                    unsorted += 1
    return unsorted


@numba.njit(nogil=True, parallel=True, cache=True)
def _frontier_work(frontier, out_offsets, cap):
    work = 0
    for i in numba.prange(frontier.size):
        u = frontier[i]
        work += min(out_offsets[u + 1] - out_offsets[u], cap)
    return work


def count_work(frontier: np.ndarray, out_offsets: np.ndarray, num_pages: int,
               sorted_targets: bool) -> int:
    """About the steps :func:`frontier_pieces` and :func:`page_active_edges`
    take for ``frontier``: :data:`VERTEX_STEPS` per vertex, and its
    out-edges, a vertex whose sorted targets reach many pages counted as a
    few steps per page (:data:`PAGE_STEPS`), not one per edge."""
    frontier = np.ascontiguousarray(frontier, np.int64)
    cap = PAGE_STEPS * max(num_pages, 1) if sorted_targets else np.iinfo(np.int64).max
    with _threads_for(frontier.size):
        work = int(_frontier_work(frontier, out_offsets, cap))
    return work + VERTEX_STEPS * frontier.size


#: Steps a sorted piece's walk takes per page it reaches (two gallops, the lookup).
PAGE_STEPS = 8

#: Steps a frontier vertex costs beside its edges: its piece made and walked,
#: each a read of memory no cache holds (measured on 16 host threads: about
#: 11 ns a vertex against 1.1 ns a step of a hub's sorted walk).
VERTEX_STEPS = 10


def targets_sorted(out_offsets: np.ndarray, out_targets: np.ndarray) -> bool:
    """Whether every vertex's out-edge targets are in increasing order (the
    store's builders make them so; a long piece of sorted targets is walked
    page by page)."""
    chunks = max(1, min(256, out_offsets.size - 1))
    return bool(_count_unsorted(np.asarray(out_offsets), np.asarray(out_targets), chunks) == 0)


@numba.njit(nogil=True, cache=True)
def _place_values(sources, values, cursor, out):
    for e in range(sources.size):
        u = sources[e]
        out[cursor[u]] = values[e]
        cursor[u] += 1


@numba.njit(nogil=True, parallel=True, cache=True)
def _place_values_by_source_ranges(sources, values, cursor, out, bounds):
    """:func:`_place_values` on several threads: thread ``c`` reads every
    edge and places those whose source lies in ``[bounds[c], bounds[c + 1])``,
    in the edges' order, so each source's slots fill as in the serial loop.
    The reads are sequential and shared; the scattered writes are split."""
    for c in numba.prange(bounds.size - 1):
        lo, hi = bounds[c], bounds[c + 1]
        for e in range(sources.size):
            u = sources[e]
            if u >= lo and u < hi:
                out[cursor[u]] = values[e]
                cursor[u] += 1


#: Edges below which the out-edge values are placed on one thread.
PARALLEL_PLACE_EDGES = 1 << 20


def out_edge_values(out_offsets: np.ndarray, pages, dtype, out: np.ndarray | None = None
                    ) -> np.ndarray:
    """The edge values in the order of the out-edge CSR.

    The store's ``out_targets`` keep each vertex's out-edges in the order its
    CSC (in-edge) order meets them (a stable sort by source), so walking the
    in-edges in that order and placing each value at its source's next free
    slot lines the values up with the targets.

    Parameters
    ----------
    out_offsets : int64 array
    pages : iterable of (sources, values)
        The in-edges' sources and values, page by page in the store's order.
    dtype : numpy dtype
    out : array, optional
        Where to write (for example pinned memory), of the edges' count.
    """
    num_edges = int(out_offsets[-1])
    out = np.empty(num_edges, dtype) if out is None else out[:num_edges]
    cursor = np.array(out_offsets[:-1], np.int64)
    threads = numba.get_num_threads()
    # Ranges of sources holding about equal shares of the out-edges, one a thread.
    bounds = _balanced_chunks(out_offsets, threads) if threads > 1 else None
    for sources, values in pages:
        if bounds is not None and sources.size >= PARALLEL_PLACE_EDGES:
            _place_values_by_source_ranges(sources, values, cursor, out, bounds)
        else:
            _place_values(sources, values, cursor, out)
    return out


def store_out_edge_values(store, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`out_edge_values` of a store, its pages read in order."""
    pages = ((page.sources, page.weights) for page in
             (store.read_page(info.index) for info in store.pages))
    return out_edge_values(store.out_offsets, pages, store.weight_dtype, out)
