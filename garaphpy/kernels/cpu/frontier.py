"""Frontiers as vertex lists (Garaph section 4.2): the compaction of flags
into sorted ids, flags from ids, the degree prefixes over a list that
the notify and the gather of notified vertices cut their work by, and a
range's in-edges turned around into the out-edges a notify follows.
"""

from __future__ import annotations

import numba
import numpy as np



@numba.njit(nogil=True, parallel=True, cache=True)
def frontier_of(active, threads):
    """The vertices whose flag is set, in increasing order (parallel compaction)."""
    n = active.shape[0]
    block = (n + threads - 1) // threads
    counts = np.zeros(threads + 1, np.int64)
    for t in numba.prange(threads):
        c = 0
        for v in range(t * block, min(n, (t + 1) * block)):
            if active[v]:       # a flag, whatever its nonzero value
                c += 1
        counts[t + 1] = c
    for t in range(threads):
        counts[t + 1] += counts[t]
    out = np.empty(counts[threads], np.int64)
    for t in numba.prange(threads):
        position = counts[t]
        for v in range(t * block, min(n, (t + 1) * block)):
            if active[v]:
                out[position] = v
                position += 1
    return out


@numba.njit(nogil=True, cache=True)
def _lowest_bit(word):
    """The index of the lowest set bit of a nonzero uint64 (a popcount of the
    bits below it)."""
    x = (word & (~word + np.uint64(1))) - np.uint64(1)
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2))
                                               & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@numba.njit(nogil=True, cache=True)
def in_range_order(vertices, first, marks):
    """The distinct ``vertices`` of the range ``first..first + 64 * marks.size - 1``
    in increasing order (what ``np.sort`` gives): each marked in the bitmap
    ``marks`` (zeroed, a bit a vertex of the range, left zeroed), then read
    back word by word.  One thread; a pass over the list and over the range's
    words (1/64 of its vertices) instead of a sort: 32,000 vertices of a
    range of 524,288, 0.05 ms against numpy's 1.0 ms (dev VM)."""
    for i in range(vertices.shape[0]):
        offset = vertices[i] - first
        marks[offset >> 6] |= np.uint64(1) << np.uint64(offset & 63)
    ordered = np.empty(vertices.shape[0], np.int64)
    k = 0
    for w in range(marks.shape[0]):
        word = marks[w]
        if word == 0:
            continue
        marks[w] = 0
        while word:
            ordered[k] = first + w * 64 + _lowest_bit(word)
            k += 1
            word &= word - np.uint64(1)
    return ordered


def active_vertex_ids(active: np.ndarray, threads: int) -> np.ndarray:
    """The vertices whose flag is set, in increasing order: :func:`frontier_of`
    on several threads, numpy's on one (nothing to compile for a run that
    cannot use the parallel compaction)."""
    if threads <= 1:
        return np.flatnonzero(active).astype(np.int64, copy=False)
    return frontier_of(active, threads)


@numba.njit(nogil=True, cache=True)
def degree_prefix(vertices, offsets):
    """prefix[i] = sum of the degrees (by ``offsets``) of vertices[:i]."""
    prefix = np.empty(vertices.shape[0] + 1, np.int64)
    prefix[0] = 0
    for i in range(vertices.shape[0]):
        v = vertices[i]
        prefix[i + 1] = prefix[i] + offsets[v + 1] - offsets[v]
    return prefix


#: Lists at least this long get :func:`frontier_degree_prefix`'s parallel scan.
PARALLEL_PREFIX_MIN = 1 << 15


@numba.njit(nogil=True, parallel=True, cache=True)
def _degree_prefix_blocks(vertices, offsets, blocks):
    """:func:`degree_prefix` in ``blocks`` runs: their sums in parallel, a scan
    of the sums, then each run's prefix in parallel from its start."""
    n = vertices.shape[0]
    size = (n + blocks - 1) // blocks
    starts = np.zeros(blocks + 1, np.int64)
    for b in numba.prange(blocks):
        total = 0
        for i in range(b * size, min(n, (b + 1) * size)):
            v = vertices[i]
            total += offsets[v + 1] - offsets[v]
        starts[b + 1] = total
    for b in range(blocks):
        starts[b + 1] += starts[b]
    prefix = np.empty(n + 1, np.int64)
    prefix[0] = 0
    for b in numba.prange(blocks):
        running = starts[b]
        for i in range(b * size, min(n, (b + 1) * size)):
            v = vertices[i]
            running += offsets[v + 1] - offsets[v]
            prefix[i + 1] = running
    return prefix


@numba.njit(nogil=True, parallel=True, cache=True)
def frontier_degree_sum(vertices, offsets):
    """The listed vertices' degrees summed (the last entry of
    :func:`degree_prefix`, without writing the prefix)."""
    total = 0
    for i in numba.prange(vertices.shape[0]):
        v = vertices[i]
        total += offsets[v + 1] - offsets[v]
    return total


def frontier_degrees(vertices: np.ndarray, offsets: np.ndarray, threads: int) -> int:
    """The listed vertices' degrees summed: :func:`frontier_degree_sum` on
    several threads, numpy's on one (nothing to compile for a run that
    cannot use the parallel sum)."""
    if threads <= 1:
        return int((offsets[vertices + 1] - offsets[vertices]).sum())
    return int(frontier_degree_sum(vertices, offsets))


def frontier_degree_prefix(vertices: np.ndarray, offsets: np.ndarray,
                           threads: int) -> np.ndarray:
    """:func:`degree_prefix`, on ``threads`` threads for a list of at least
    :data:`PARALLEL_PREFIX_MIN` vertices (a dense frontier's prefix is an
    O(|V|) pass that one thread makes the iteration's longest part)."""
    if threads > 1 and vertices.shape[0] >= PARALLEL_PREFIX_MIN:
        return _degree_prefix_blocks(vertices, offsets, threads * 4)
    return degree_prefix(vertices, offsets)


@numba.njit(nogil=True, parallel=True, cache=True)
def flags_of(vertices, flags):
    """flags[v] = 1 for the listed vertices and 0 for every other: a frontier as
    the GPU's activity (a hybrid run's switch to the GPU)."""
    for v in numba.prange(flags.shape[0]):
        flags[v] = 0
    for i in numba.prange(vertices.shape[0]):
        flags[vertices[i]] = 1


@numba.njit(nogil=True, parallel=True, cache=True)
def reset_flags(vertices, flags):
    """flags[v] = 0 for v in vertices."""
    for i in numba.prange(vertices.shape[0]):
        flags[vertices[i]] = 0


@numba.njit(nogil=True, parallel=True, cache=True)
def turn_in_edges(in_offsets, sources, first, end, out_offsets, out_targets, parts):
    """The in-edges of vertices ``first..end-1`` (``sources``, from edge
    ``in_offsets[first]`` on, in CSC order) turned around: ``out_offsets``
    (|V| + 1 entries, zeros on entry) and ``out_targets`` (one a source),
    out_targets[out_offsets[u]:out_offsets[u + 1]] the destinations of u's
    edges in increasing order.  A counting sort: each of ``parts`` threads
    owns a range of sources, counts its sources' edges in one pass over the
    edges and writes them in a second, destinations in increasing order, so
    no two threads write one entry (a sort of (source, destination) keys
    cost several times more)."""
    n = out_offsets.shape[0] - 1
    base = in_offsets[first]
    size = (n + parts - 1) // parts
    for t in numba.prange(parts):
        lo, hi = t * size, min(n, (t + 1) * size)
        for e in range(sources.shape[0]):
            u = sources[e]
            if u >= lo and u < hi:
                out_offsets[u + 1] += 1
    for u in range(n):
        out_offsets[u + 1] += out_offsets[u]
    for t in numba.prange(parts):
        lo, hi = t * size, min(n, (t + 1) * size)
        position = out_offsets[lo:hi].copy()
        for v in range(first, end):
            for e in range(in_offsets[v] - base, in_offsets[v + 1] - base):
                u = sources[e]
                if u >= lo and u < hi:
                    out_targets[position[u - lo]] = v
                    position[u - lo] += 1
