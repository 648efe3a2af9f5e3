"""Passes over every vertex, or a list of them, that no pull reads edges for
(Garaph section 4.1): initial values, aggregates, source-side gathers,
commits, sums, and the shortcut of min-label propagation.

Source-side precompute: a gather that depends on the source vertex alone
(PageRank's rank(u) / outdeg(u)) can be computed once per vertex at the
start of a synchronous pull (:func:`source_contributions`, or
:func:`listed_source_contributions` over the vertices a partition reads);
the edge loop then reads one array at the source instead of the value and
the degree (:func:`read_source_contribution` is the gather accessor over
them).
"""

from __future__ import annotations

import numba
import numpy as np

from .exact_sum import WIDTH



@numba.njit(nogil=True, parallel=True)
def init_values(init_call, attrs, num_vertices, values):
    """values[v] = init(v) for every vertex."""
    for v in numba.prange(num_vertices):
        values[v] = init_call(attrs, num_vertices, v)


@numba.njit(nogil=True, parallel=True)
def compute_aggregates(aggregate_call, values, attrs, num_vertices, iteration, identities,
                       part_starts):
    """Reduce every aggregate over all vertices by parts (vertices
    ``part_starts[t]..part_starts[t+1]-1``), merged by the caller
    (:func:`garaphpy.kernels.cpu.exact_sum.merge_parts`).

    Returns
    -------
    partial : float64 array (parts, aggregates)
        Each part's min and max aggregates (an add aggregate's column holds
        its identity).
    sums : int64 array (parts, aggregates, exact_sum.WIDTH)
        Each part's exact accumulator of each add aggregate: the merged sum
        is the same bits whatever the parts, so an iteration's aggregates
        are the same whichever kernel made them (this pass, or
        :func:`pull_fused` as it writes the values) and however many threads
        or partitions made them.
    """
    count = identities.shape[0]
    parts = part_starts.shape[0] - 1
    # rows padded past a cache line: the thread on a part updates its row per vertex
    partial = np.empty((parts, count + 8), np.float64)
    sums = np.zeros((parts, count, WIDTH), np.int64)
    for t in range(parts):
        # element by element: a slice assignment compiles numba's shape-mismatch
        # error message, 1.8 s of a cold run
        for i in range(count):
            partial[t, i] = identities[i]
    for t in numba.prange(parts):
        row = partial[t]
        part_sums = sums[t]
        for v in range(part_starts[t], part_starts[t + 1]):
            aggregate_call(values, attrs, num_vertices, iteration, v, row, part_sums)
    return partial[:, :count], sums


@numba.njit(nogil=True, parallel=True)
def source_contributions(source_gather_call, values, attrs, contributions):
    """contributions[u] = gather of any edge leaving u, for every u with out-edges.

    A vertex without out-edges is no edge's source: its slot is never read,
    and its gather is not evaluated (PageRank's would divide by zero).
    """
    out_degree = attrs[0]
    for u in numba.prange(values.shape[0]):
        if out_degree[u] > 0:
            contributions[u] = source_gather_call(values, attrs, u)


@numba.njit(nogil=True, parallel=True)
def listed_source_contributions(source_gather_call, values, attrs, vertices, contributions):
    """contributions[i] = gather of any edge leaving ``vertices[i]``, for each
    listed vertex with out-edges: :func:`source_contributions` over the
    vertices a partition's edges read, into an array of their own (the
    partition's sources numbered by their place in ``vertices``)."""
    out_degree = attrs[0]
    for i in numba.prange(vertices.shape[0]):
        u = vertices[i]
        if out_degree[u] > 0:
            contributions[i] = source_gather_call(values, attrs, u)


@numba.njit(nogil=True)
def read_source_contribution(contributions, weights, attrs, u, v, e):
    """The gather accessor over precomputed contributions (``gather_call``'s signature)."""
    return contributions[u]


@numba.njit(nogil=True, parallel=True, cache=True)
def count_unequal(values, value, skip):
    """How many ``values[v]`` differ from ``value`` where ``skip[v]`` is False
    (a NaN differs from everything)."""
    count = 0
    for v in numba.prange(values.shape[0]):
        if not skip[v] and not values[v] == value:
            count += 1
    return count


@numba.njit(nogil=True, cache=True)
def _vertex_of_label(label, ids, dense):
    """The internal vertex whose user id is ``label``: ``ids`` are the user ids
    of the vertices in increasing order (``dense``: consecutive)."""
    if dense:
        return label - ids[0]
    low, high = 0, ids.shape[0] - 1
    while low < high:
        middle = (low + high) // 2
        if ids[middle] < label:
            low = middle + 1
        else:
            high = middle
    return low


@numba.njit(nogil=True, parallel=True, cache=True)
def shortcut_labels(vertices, values, ids, active, mark):
    """Pointer jumping for min-label propagation (Shiloach-Vishkin's shortcut):
    each listed vertex takes the label of the vertex its label names, then of
    the vertex that one names, while the label drops.

    A vertex's label is the user id (``ids``, increasing) of a vertex that
    reaches it and whose own label is no larger, so the label it jumps to
    reaches it too: the fixed point is the one label propagation reaches,
    in fewer iterations.  Labels only drop, so a label read while another
    thread lowers it is still a valid one.  With ``mark``, a vertex whose
    label dropped is flagged in ``active``.  Returns how many dropped.
    """
    n = ids.shape[0]
    dense = n > 0 and ids[n - 1] - ids[0] == n - 1
    dropped = 0
    for i in numba.prange(vertices.shape[0]):
        v = vertices[i]
        label = values[v]
        start = label
        while True:
            jumped = values[_vertex_of_label(label, ids, dense)]
            if jumped >= label:
                break
            label = jumped
        if label < start:
            values[v] = label
            if mark:
                active[v] = True
            dropped += 1
    return dropped


@numba.njit(nogil=True, cache=True)
def balanced_vertex_starts(in_offsets, parts):
    """Vertex boundaries of ``parts`` parts of about equal in-edges plus
    vertices (``starts[t]..starts[t+1]-1`` is part t): a part's cost is its
    edges' gathers and its vertices' applies.  Binary search, no O(|V|) pass."""
    n = in_offsets.shape[0] - 1
    total = in_offsets[n] + n
    starts = np.empty(parts + 1, np.int64)
    starts[0] = 0
    starts[parts] = n
    for t in range(1, parts):
        target = (total * t) // parts
        lo, hi = starts[t - 1], n      # the least v with in_offsets[v] + v >= target
        while lo < hi:
            mid = (lo + hi) // 2
            if in_offsets[mid] + mid >= target:
                hi = mid
            else:
                lo = mid + 1
        starts[t] = lo
    return starts


@numba.njit(nogil=True)
def no_aggregates_fold(values, attrs, num_vertices, iteration, v, running, sums):
    """``aggregate_fold`` of a program without aggregates (:func:`pull_fused`)."""
    return running


@numba.njit(nogil=True)
def no_aggregates_write(running, out, row):
    """``aggregate_write`` of a program without aggregates (:func:`pull_fused`)."""
    return 0


@numba.njit(nogil=True, parallel=True, cache=True)
def vertex_ids(out):
    """out[v] = v for every v, written by all threads (the pages of a new array
    are first touched in parallel, not by one thread as ``np.arange`` does)."""
    for v in numba.prange(out.shape[0]):
        out[v] = v
    return out


@numba.njit(nogil=True, parallel=True, cache=True)
def touch(out):
    """Zero ``out`` with all threads: a new buffer's pages are mapped in parallel
    now, not by the first kernel that writes them."""
    for i in numba.prange(out.shape[0]):
        out[i] = 0
    return out


def all_vertex_ids(count: int, threads: int) -> np.ndarray:
    """0..count-1 (int64): :func:`vertex_ids` on several threads, numpy's on
    one (nothing to compile for a run that cannot map pages in parallel)."""
    if threads <= 1:
        return np.arange(count, dtype=np.int64)
    return vertex_ids(np.empty(count, np.int64))


def mapped_zeros(shape, dtype, threads: int) -> np.ndarray:
    """A new zeroed array: :func:`touch` on several threads, numpy's on one."""
    if threads <= 1:
        return np.zeros(shape, dtype)
    return touch(np.empty(shape, dtype))


@numba.njit(nogil=True, parallel=True, cache=True)
def commit_vertices(vertices, source, target):
    """target[v] = source[v] for the listed vertices (sync commit of notify-pull)."""
    for i in numba.prange(vertices.shape[0]):
        v = vertices[i]
        target[v] = source[v]


@numba.njit(nogil=True, parallel=True, cache=True)
def add_weighted_in_degrees(in_offsets, weights, edge_base, edge_begin, edge_end,
                            first_vertex, end_vertex, out):
    """out[v] += the weights of v's in-edges among edges edge_begin..edge_end-1
    (one page; edge e at ``weights[e - edge_base]``)."""
    for v in numba.prange(first_vertex, end_vertex):
        total = 0.0
        for e in range(max(in_offsets[v], edge_begin), min(in_offsets[v + 1], edge_end)):
            total += weights[e - edge_base]
        out[v] += total


@numba.njit(nogil=True, parallel=True, cache=True)
def gather_vertex_edges(vertices, in_prefix, in_offsets, edge_begin, edge_end, page_sources,
                        page_weights, copy_weights, sources, weights):
    """Copy the in-edges of ``vertices`` that lie in one page (edges
    edge_begin..edge_end-1, ``page_sources[e - edge_begin]``) to their places
    in ``sources`` (and ``weights`` when ``copy_weights``): vertex ``i``'s
    edges start at ``in_prefix[i]`` there (notify-pull over pages not held in
    memory)."""
    for i in numba.prange(vertices.shape[0]):
        v = vertices[i]
        lo = max(in_offsets[v], edge_begin)
        hi = min(in_offsets[v + 1], edge_end)
        target = in_prefix[i] + lo - in_offsets[v]
        for e in range(lo, hi):
            sources[target + e - lo] = page_sources[e - edge_begin]
            if copy_weights:
                weights[target + e - lo] = page_weights[e - edge_begin]


@numba.njit(nogil=True, parallel=True, cache=True)
def out_neighbour_in_degrees(out_offsets, out_targets, in_offsets, out):
    """out[u] = sum of the in-degrees of u's out-neighbours.

    Summed over a frontier it bounds the in-edges a notify-pull gathers (a
    vertex notified twice counted twice); the dispatcher's cost model uses it.
    """
    for u in numba.prange(out.shape[0]):
        total = 0
        for e in range(out_offsets[u], out_offsets[u + 1]):
            v = out_targets[e]
            total += in_offsets[v + 1] - in_offsets[v]
        out[u] = total


@numba.njit(nogil=True, parallel=True, cache=True)
def total(values):
    """The sum of ``values``, in float64."""
    result = 0.0
    for i in numba.prange(values.shape[0]):
        result += np.float64(values[i])
    return result


@numba.njit(nogil=True, parallel=True, cache=True)
def sum_over(vertices, values):
    """sum of values[v] over the given vertices."""
    total = 0
    for i in numba.prange(vertices.shape[0]):
        total += values[vertices[i]]
    return total
