"""Notify-pull in order of value (delta-stepping; HyTGraph's priority
scheduling), on the calling thread: :func:`priority_iterations` keeps the
frontier in buckets of the values and steps the lowest first.
"""

from __future__ import annotations

import numba
import numpy as np

from .frontier import degree_prefix
from .batches import _sparse_step


@numba.njit(nogil=True)
def _push_step(gather_call, apply_call, activate_call, current, prefix, out_edges, values,
               context, claimed):
    """One push step of :func:`priority_iterations`, on this thread: each
    out-edge u -> v of the frontier ``current`` applies its gather to v's
    value at once (``values`` in place; ``out_weights``: the edge values in
    the out-edges' order).  For a program declaring ``apply_keeps_best`` the
    value then is the notify-pull's, without reading the in-edges of the
    vertices reached.  ``out_edges`` is ``(out_offsets, out_targets,
    out_weights)``, ``context`` what apply reads (``(attrs, aggregates,
    num_vertices, iteration)``).

    Returns
    -------
    (following, touched, edges, change)
        The vertices activated (each once), how many vertices the edges
        reached, the out-edges pushed, and the step's summed change.
    """
    out_offsets, out_targets, out_weights = out_edges
    attrs, aggregates, num_vertices, iteration = context
    edges = prefix[current.shape[0]]
    reached = np.empty(edges, np.int64)
    following = np.empty(edges, np.int64)
    touched = 0
    activated = 0
    change = 0.0
    for i in range(current.shape[0]):
        u = current[i]
        for e in range(out_offsets[u], out_offsets[u + 1]):
            v = out_targets[e]
            if claimed[v] == 0:
                claimed[v] = 1
                reached[touched] = v
                touched += 1
            old = values[v]
            new = apply_call(attrs, aggregates, num_vertices, iteration, v, old,
                             gather_call(values, out_weights, attrs, u, v, e))
            if activate_call(new, old):
                values[v] = new
                change += abs(new - old)
                if claimed[v] == 1:
                    claimed[v] = 3      # reached and activated: listed once
                    following[activated] = v
                    activated += 1
    for i in range(touched):
        claimed[reached[i]] = 0
    return following[:activated].copy(), touched, edges, change


#: Bins of :func:`priority_iterations`: a value this many bucket widths or more
#: past the lowest of its batch waits in the last bin, sorted out when the
#: lower bins are done.
PRIORITY_BINS = 4096


@numba.njit(nogil=True, inline="always")
def _bucket_key(value, bucket_width, larger_first):
    """The bucket of a value: floor(value / width), of -value for a max sum
    (larger values first); values beyond int64's reach share the last."""
    scaled = (-value if larger_first else value) / bucket_width
    if not scaled < 4.0e18:             # +inf and nan too
        return np.int64(4_000_000_000_000_000_000)
    if scaled < -4.0e18:
        return np.int64(-4_000_000_000_000_000_000)
    return np.int64(np.floor(scaled))


@numba.njit(nogil=True)
def _bin_insert(vertex, bin_index, heads, entry_vertex, entry_next, free):
    """Link ``vertex`` into bin ``bin_index``; ``free[0]`` heads the free entries,
    ``free[1]`` counts the entries used.  Returns the entry arrays (grown
    when full)."""
    if free[0] >= 0:
        entry = free[0]
        free[0] = entry_next[entry]
    else:
        entry = free[1]
        if entry == entry_vertex.shape[0]:
            grown_vertex = np.empty(2 * entry, np.int64)
            grown_next = np.empty(2 * entry, np.int64)
            grown_vertex[:entry] = entry_vertex
            grown_next[:entry] = entry_next
            entry_vertex, entry_next = grown_vertex, grown_next
        free[1] = entry + 1
    entry_vertex[entry] = vertex
    entry_next[entry] = heads[bin_index]
    heads[bin_index] = entry
    return entry_vertex, entry_next


@numba.njit(nogil=True)
def _take_bin(bin_index, heads, entry_vertex, entry_next, free, pending):
    """The vertices of a bin still pending (each once; their ``pending`` flags
    cleared); the bin's entries go back to the free list."""
    count = 0
    entry = heads[bin_index]
    while entry >= 0:
        count += 1
        entry = entry_next[entry]
    taken = np.empty(count, np.int64)
    size = 0
    entry = heads[bin_index]
    while entry >= 0:
        following = entry_next[entry]
        v = entry_vertex[entry]
        if pending[v]:
            pending[v] = 0
            taken[size] = v
            size += 1
        entry_next[entry] = free[0]
        free[0] = entry
        entry = following
    heads[bin_index] = -1
    return taken[:size]


@numba.njit(nogil=True)
def _bin_vertices(vertices, values, bucket_width, larger_first, heads, entry_vertex, entry_next,
                  free, pending):
    """Link each of ``vertices`` not yet pending into the bin of its value,
    counted from the lowest of them (bin 0; the last bin takes the rest),
    and mark it pending.  Returns that lowest bucket and the entry arrays."""
    base = np.int64(4_000_000_000_000_000_000)
    for i in range(vertices.shape[0]):
        base = min(base, _bucket_key(values[vertices[i]], bucket_width, larger_first))
    for i in range(vertices.shape[0]):
        v = vertices[i]
        if not pending[v]:
            pending[v] = 1
            relative = min(_bucket_key(values[v], bucket_width, larger_first) - base,
                           heads.shape[0] - 1)
            entry_vertex, entry_next = _bin_insert(v, relative, heads, entry_vertex,
                                                   entry_next, free)
    return base, entry_vertex, entry_next


@numba.njit(nogil=True)
def priority_iterations(gather_call, apply_call, activate_call, combine, identity, frontier,
                        claimed, graph, values, context, rules, schedule, out, order):
    """Up to ``max_steps`` asynchronous notify-pull iterations in order of value
    (delta-stepping; HyTGraph's priority scheduling), in one call.

    The frontier's vertices are put in buckets of their values' width
    ``bucket_width`` (of the negated values when ``larger_first``: a max
    sum).  Each step takes the pending vertices of the lowest bucket, notifies
    their out-neighbours and pulls those (:func:`_sparse_step`, writing
    ``values`` in place); the vertices it activates join the bucket of their
    new value, or the current one when that is lower, so a bucket repeats
    until no step refills it.  Vertices of later buckets wait: in a min
    program (``VertexProgram.value_priority``, run asynchronously) an update
    from a smaller value would overwrite theirs and set them off again.  The
    order changes the work, not the fixed point.

    Steps stop after ``max_steps``, when no vertex is pending, before a step
    whose out-edges are more than ``direction_threshold`` of the graph's
    (a pull would pay: the engine pulls the whole frontier); not on a
    step's summed change, which measures one bucket, not the fixed point.
    ``pending`` is a uint8
    flag per vertex, 0 on entry and on return; ``claimed`` as in
    :func:`sparse_iterations` (no settled vertices).  With ``push`` (a
    program declaring ``apply_keeps_best``), a step whose frontier has at
    most ``serial_edges`` out-edges pushes them instead (:func:`_push_step`,
    ``out_weights`` in the out-edges' order); its counters' "edges
    processed" are then the out-edges pushed.

    The groups are :func:`sparse_iterations`' (``values`` one array, written
    in place; ``rules`` ``(num_edges, direction_threshold, dense_factor)``),
    and ``order`` ``(bucket_width, larger_first, pending, push,
    out_weights)``.

    Returns
    -------
    frontier : int64 array
        The vertices still pending, every bucket's (the engine's frontier).
    steps : int
        Steps taken, their :data:`SPARSE_COUNTERS` in ``counters`` and their
        summed changes in ``changes``, as :func:`sparse_iterations`.
    """
    out_offsets, out_targets, in_offsets, sources, weights = graph
    attrs, aggregates, num_vertices, first_iteration = context
    num_edges, direction_threshold, dense_factor = rules
    max_steps, serial_edges, chunks, threads = schedule
    counters, changes = out
    bucket_width, larger_first, pending, push, out_weights = order
    bins = PRIORITY_BINS
    heads = np.full(bins, -1, np.int64)
    capacity = max(2 * frontier.shape[0], 1024)
    entry_vertex = np.empty(capacity, np.int64)
    entry_next = np.empty(capacity, np.int64)
    free = np.array([-1, 0], np.int64)
    base, entry_vertex, entry_next = _bin_vertices(frontier, values, bucket_width, larger_first,
                                                   heads, entry_vertex, entry_next, free,
                                                   pending)
    stats = np.zeros(2, np.float64)
    marked = np.zeros(1, np.int64)
    settled = np.zeros(1, np.bool_)
    unsettled = np.zeros(1, np.int64)
    current_bin = 0
    steps = 0
    while steps < max_steps:
        while current_bin < bins and heads[current_bin] < 0:
            current_bin += 1
        if current_bin == bins:
            break
        current = _take_bin(current_bin, heads, entry_vertex, entry_next, free, pending)
        if current.shape[0] == 0:
            continue
        if current_bin == bins - 1:
            # the far bucket: sort its vertices out from their lowest value
            base, entry_vertex, entry_next = _bin_vertices(
                current, values, bucket_width, larger_first, heads, entry_vertex, entry_next,
                free, pending)
            current_bin = 0
            continue
        prefix = degree_prefix(current, out_offsets)
        active_edges = prefix[current.shape[0]]
        if num_edges > 0 and active_edges / num_edges > direction_threshold:
            for i in range(current.shape[0]):
                pending[current[i]] = 1
                entry_vertex, entry_next = _bin_insert(current[i], current_bin, heads,
                                                       entry_vertex, entry_next, free)
            break
        if push and active_edges <= serial_edges:
            following, count, edges, change = _push_step(
                gather_call, apply_call, activate_call, current, prefix,
                (out_offsets, out_targets, out_weights), values,
                (attrs, aggregates, num_vertices, first_iteration + steps), claimed)
            serial = True
        else:
            following, count, edges, serial, change = _sparse_step(
                gather_call, apply_call, activate_call, combine, identity, current, prefix,
                graph, (values, values, False),
                (attrs, aggregates, num_vertices, first_iteration + steps),
                (serial_edges, dense_factor, chunks, threads), claimed,
                (False, settled, unsettled), (stats, marked))
        for i in range(following.shape[0]):
            v = following[i]
            pending[v] = 1
            relative = _bucket_key(values[v], bucket_width, larger_first) - base
            relative = min(max(relative, current_bin), bins - 1)
            entry_vertex, entry_next = _bin_insert(v, relative, heads, entry_vertex,
                                                   entry_next, free)
        counters[steps, 0] = current.shape[0]
        counters[steps, 1] = active_edges
        counters[steps, 2] = count
        counters[steps, 3] = edges
        counters[steps, 4] = following.shape[0]
        counters[steps, 5] = serial
        counters[steps, 6] = 0
        changes[steps] = change
        steps += 1
    left = np.empty(free[1], np.int64)     # every entry ever used bounds those left
    size = 0
    for b in range(current_bin, bins):
        if heads[b] >= 0:
            taken = _take_bin(b, heads, entry_vertex, entry_next, free, pending)
            left[size:size + taken.shape[0]] = taken
            size += taken.shape[0]
    return left[:size].copy(), steps
