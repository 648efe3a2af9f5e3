"""Parallel delta-stepping by push on threads kept for the whole call
(GAPBS's ``sssp``): :func:`priority_push_rounds`, for a program declaring
``apply_keeps_best`` run asynchronously.
"""

from __future__ import annotations

import numba
import numpy as np

from ..atomics import (atomic_add, atomic_load, atomic_min, compare_and_swap, sync_slots,
                       team_barrier, team_rendezvous)
from .common import _slot, _team_totals
from .priority import _bin_insert, _bucket_key


#: Bins of each thread in :func:`priority_push_rounds`, counted from the
#: lowest bucket of the call's frontier; a value this many bucket widths or
#: more past it waits in the last bin, and the call returns when only that
#: bin holds work (the caller calls again from the new lowest bucket).
PUSH_ROUND_BINS = 1 << 14


#: GAPBS's bucket fusion (``kBinSizeThreshold``): a thread goes on with its
#: own entries of the current bucket, without a barrier, while it holds
#: fewer than this many.
PUSH_ROUND_FUSE = 1000


#: Frontier entries a thread takes at a time in :func:`priority_push_rounds`.
PUSH_ROUND_CHUNK = 64


# shared counters of priority_push_rounds: slot k of the sync array (two of
# each, by the round's parity), then the parity and the rounds at the end
_WORK, _TAIL, _BIN, _LAST_PARITY, _ROUNDS = 0, 2, 4, 6, 7


@numba.njit(nogil=True)
def _link_entry(vertex, value, bin_index, heads, counts, occupied, entry_vertex, entry_value,
                entry_next, free):
    """Link ``(vertex, value)`` into bin ``bin_index`` of one thread's bins
    (:func:`priority_push_rounds`; :func:`_bin_insert` with the entry's value
    beside it, ``counts`` per bin and ``occupied``, a bit per non-empty
    bin).  Returns the entry arrays (grown when full)."""
    entry_vertex, entry_next = _bin_insert(vertex, bin_index, heads, entry_vertex, entry_next,
                                           free)
    entry = heads[bin_index]
    if entry >= entry_value.shape[0]:
        grown_value = np.empty(entry_vertex.shape[0], entry_value.dtype)
        grown_value[:entry_value.shape[0]] = entry_value
        entry_value = grown_value
    entry_value[entry] = value
    if counts[bin_index] == 0:
        occupied[bin_index >> 6] |= np.uint64(1) << np.uint64(bin_index & 63)
    counts[bin_index] += 1
    return entry_vertex, entry_value, entry_next


@numba.njit(nogil=True)
def _thread_bins(bins, values):
    """One thread's bins of :func:`priority_push_rounds`: heads, counts, a bit per
    non-empty bin, the entry arrays (vertex, value, next) and the free list.

    Made by a call, not in the parallel loop's body: numba moves a
    ``np.empty`` or ``np.zeros`` of a size fixed in the loop out of it
    (allocation hoisting), and every thread would then share one array."""
    capacity = 1024
    return (np.full(bins, -1, np.int64), np.zeros(bins, np.int64),
            np.zeros(bins // 64, np.uint64), np.empty(capacity, np.int64),
            np.empty(capacity, values.dtype), np.empty(capacity, np.int64),
            np.array([-1, 0], np.int64))


@numba.njit(nogil=True, inline="always")
def _empty_bin(bin_index, heads, counts, occupied):
    heads[bin_index] = -1
    counts[bin_index] = 0
    occupied[bin_index >> 6] &= ~(np.uint64(1) << np.uint64(bin_index & 63))


@numba.njit(nogil=True)
def _lowest_occupied(occupied, first):
    """The lowest non-empty bin at or after ``first`` (``occupied``: a bit per
    bin), or -1."""
    word = first >> 6
    if word >= occupied.shape[0]:
        return -1
    bits = occupied[word] & ~((np.uint64(1) << np.uint64(first & 63)) - np.uint64(1))
    while True:
        if bits != 0:
            low = 0
            while (bits >> np.uint64(low)) & np.uint64(1) == 0:
                low += 1
            return (word << 6) + low
        word += 1
        if word == occupied.shape[0]:
            return -1
        bits = occupied[word]


@numba.njit(nogil=True, inline="always")
def _push_relax(gather_call, apply_call, activate_call, u, out_offsets, out_targets,
                out_weights, values, attrs, aggregates, num_vertices, iteration, base,
                current_bin, bucket_width, larger_first, heads, counts, occupied, entry_vertex,
                entry_value, entry_next, free, tally):
    """Push ``u``'s out-edges (:func:`priority_push_rounds`): each reached vertex
    takes the applied gather when it activates, by compare-and-swap (another
    thread may be writing it), and is linked into this thread's bin of its new
    value.  ``tally`` gets the edges, the improvements and their summed change.
    Returns the entry arrays."""
    bins = heads.shape[0]
    for e in range(out_offsets[u], out_offsets[u + 1]):
        v = out_targets[e]
        gathered = gather_call(values, out_weights, attrs, u, v, e)
        while True:
            old = atomic_load(values, v)
            new = apply_call(attrs, aggregates, num_vertices, iteration, v, old, gathered)
            if new == old or not activate_call(new, old):
                break
            if compare_and_swap(values, v, old, new):
                tally[1] += 1.0
                tally[2] += abs(np.float64(new) - np.float64(old))
                relative = _bucket_key(new, bucket_width, larger_first) - base
                relative = min(max(relative, current_bin), bins - 1)
                entry_vertex, entry_value, entry_next = _link_entry(
                    v, new, relative, heads, counts, occupied, entry_vertex, entry_value,
                    entry_next, free)
                break
    tally[0] += out_offsets[u + 1] - out_offsets[u]
    tally[3] += 1.0
    return entry_vertex, entry_value, entry_next


@numba.njit(nogil=True)
def _first_bucket(frontier, values, bucket_width, larger_first, shared_vertex, shared_value):
    """The lowest bucket of the frontier's values, its vertices and their values
    listed in ``shared_vertex`` and ``shared_value`` (the first round's shared
    frontier, :func:`priority_push_rounds`).  Returns the bucket and the count."""
    base = np.int64(4_000_000_000_000_000_000)
    for i in range(frontier.shape[0]):
        base = min(base, _bucket_key(values[frontier[i]], bucket_width, larger_first))
    size = 0
    for i in range(frontier.shape[0]):
        v = frontier[i]
        if _bucket_key(values[v], bucket_width, larger_first) == base:
            shared_vertex[size] = v
            shared_value[size] = values[v]
            size += 1
    return base, size


@numba.njit(nogil=True, inline="always")
def _link_later_buckets(frontier, values, base, bucket_width, larger_first, heads, counts,
                        occupied, entry_vertex, entry_value, entry_next, free):
    """Link the frontier's vertices of buckets after ``base`` into one thread's
    bins (:func:`priority_push_rounds`).  Returns the entry arrays."""
    bins = heads.shape[0]
    for i in range(frontier.shape[0]):
        v = frontier[i]
        relative = _bucket_key(values[v], bucket_width, larger_first) - base
        if relative != 0:
            entry_vertex, entry_value, entry_next = _link_entry(
                v, values[v], min(relative, bins - 1), heads, counts, occupied, entry_vertex,
                entry_value, entry_next, free)
    return entry_vertex, entry_value, entry_next


@numba.njit(nogil=True, inline="always")
def _push_round(gather_call, apply_call, activate_call, shared_vertex, shared_value, size,
                chunk, sync, parity, out_offsets, out_targets, out_weights, values, attrs,
                aggregates, num_vertices, iteration, base, current, bucket_width, larger_first,
                heads, counts, occupied, entry_vertex, entry_value, entry_next, free, row):
    """One thread's pushes in a round of :func:`priority_push_rounds`: the live
    entries of the shared frontier, ``chunk`` at a time through the round's
    counter, then its own entries of the current bucket while it holds fewer
    than :data:`PUSH_ROUND_FUSE` (bucket fusion).  Returns the entry arrays."""
    while True:
        start = atomic_add(sync, _slot(_WORK + parity), chunk)
        if start >= size:
            break
        for i in range(start, min(start + chunk, size)):
            u = shared_vertex[i]
            if values[u] == shared_value[i]:
                entry_vertex, entry_value, entry_next = _push_relax(
                    gather_call, apply_call, activate_call, u, out_offsets, out_targets,
                    out_weights, values, attrs, aggregates, num_vertices, iteration, base,
                    current, bucket_width, larger_first, heads, counts, occupied,
                    entry_vertex, entry_value, entry_next, free, row)
    while counts[current] > 0 and counts[current] < PUSH_ROUND_FUSE:
        entry = heads[current]
        _empty_bin(current, heads, counts, occupied)
        while entry >= 0:
            following = entry_next[entry]
            u = entry_vertex[entry]
            held = entry_value[entry]
            entry_next[entry] = free[0]
            free[0] = entry
            if values[u] == held:
                entry_vertex, entry_value, entry_next = _push_relax(
                    gather_call, apply_call, activate_call, u, out_offsets, out_targets,
                    out_weights, values, attrs, aggregates, num_vertices, iteration, base,
                    current, bucket_width, larger_first, heads, counts, occupied,
                    entry_vertex, entry_value, entry_next, free, row)
            entry = following
    return entry_vertex, entry_value, entry_next


@numba.njit(nogil=True, inline="always")
def _close_round(tally, team, totals, counters, changes, round_, sync, parity, bins):
    """The first thread's end of a round of :func:`priority_push_rounds`: the
    round's :data:`SPARSE_COUNTERS` row and change, and the round's copy of the
    shared counters reset for the round after next."""
    _team_totals(tally, team, totals)
    edges, improved, change, pushed = totals[0], totals[1], totals[2], totals[3]
    counters[round_, 0] = np.int64(pushed)
    counters[round_, 1] = np.int64(edges)
    counters[round_, 2] = np.int64(improved)
    counters[round_, 3] = np.int64(edges)
    counters[round_, 4] = np.int64(improved)
    counters[round_, 5] = 0
    counters[round_, 6] = 0
    changes[round_] = change
    sync[_slot(_BIN + parity)] = bins
    sync[_slot(_WORK + parity)] = 0
    sync[_slot(_TAIL + parity)] = 0
    sync[_slot(_LAST_PARITY)] = 1 - parity
    sync[_slot(_ROUNDS)] = round_ + 1


@numba.njit(nogil=True, inline="always")
def _share_live_entries(first_bin, end_bin, values, heads, counts, occupied, entry_vertex,
                        entry_value, entry_next, free, sync, parity, shared_vertex,
                        shared_value):
    """Append one thread's live entries of bins ``first_bin..end_bin-1`` to the
    next round's shared frontier (:func:`priority_push_rounds`; its tail taken
    atomically) and empty those bins."""
    live = 0
    b = _lowest_occupied(occupied, first_bin)
    while 0 <= b < end_bin:
        entry = heads[b]
        while entry >= 0:
            if values[entry_vertex[entry]] == entry_value[entry]:
                live += 1
            entry = entry_next[entry]
        b = _lowest_occupied(occupied, b + 1)
    at = atomic_add(sync, _slot(_TAIL + 1 - parity), live)
    b = _lowest_occupied(occupied, first_bin)
    while 0 <= b < end_bin:
        entry = heads[b]
        while entry >= 0:
            following = entry_next[entry]
            v = entry_vertex[entry]
            if values[v] == entry_value[entry]:
                shared_vertex[at] = v
                shared_value[at] = entry_value[entry]
                at += 1
            entry_next[entry] = free[0]
            free[0] = entry
            entry = following
        _empty_bin(b, heads, counts, occupied)
        b = _lowest_occupied(occupied, b + 1)


@numba.njit(nogil=True, parallel=True)
def priority_push_rounds(gather_call, apply_call, activate_call, frontier, out_edges, values,
                         context, max_steps, out, order, team):
    """Up to ``max_steps`` rounds of parallel delta-stepping by push, on ``team``
    threads (``numba.get_num_threads()`` of the call: one iteration of
    ``numba.prange(team)`` per thread) kept for the whole call (GAPBS's ``sssp``;
    HyTGraph's priority scheduling), for a program declaring
    ``apply_keeps_best`` run asynchronously.

    The values are split in buckets of width ``bucket_width`` (of the negated
    values when ``larger_first``).  Each round the threads share the shared
    frontier (the live entries of the lowest bucket holding any), taking
    :data:`PUSH_ROUND_CHUNK` entries at a time; each entry's vertex pushes
    its out-edges (:func:`_push_relax`), and every vertex whose value
    improves is linked, with that value, into the improving thread's own bin
    of its bucket.  A thread then goes on alone with its own entries of the
    current bucket while it holds fewer than :data:`PUSH_ROUND_FUSE`
    (GAPBS's bucket fusion), and offers its lowest non-empty bin.  After a
    barrier the lowest offered bucket's live entries of every thread become
    the next round's frontier, and a second barrier starts the round.  An
    entry is live while its vertex still holds the entry's value: an
    improved vertex has a newer entry, so each vertex is listed once.  The
    order changes the work, not the fixed point.

    A round is an iteration: ``counters`` row ``r`` gets its
    :data:`SPARSE_COUNTERS` (the vertices pushed, their out-edges, the
    improvements as vertices updated and activated) and ``changes[r]`` the
    summed change (a bucket's: no test of the fixed point, so no tolerance).
    The call returns after ``max_steps`` rounds, when no entry is left, or
    when only the last of :data:`PUSH_ROUND_BINS` bins holds any.  Where the
    threads do not all meet at the start (:func:`team_rendezvous`), nothing
    is done.

    Returns
    -------
    frontier : int64 array
        The vertices still to push, each once (the engine's frontier).
    steps : int
        Rounds taken; -1 when the threads did not meet (``frontier`` is
        then the input, unchanged).

    The groups (:mod:`~garaphpy.kernels.cpu.arguments`): ``out_edges`` is
    ``(out_offsets, out_targets, out_weights)``, ``context`` ``(attrs,
    aggregates, num_vertices, first_iteration)``, ``out`` ``(counters,
    changes)`` and ``order`` ``(bucket_width, larger_first)``.
    """
    out_offsets, out_targets, out_weights = out_edges
    attrs, aggregates, num_vertices, first_iteration = context
    counters, changes = out
    bucket_width, larger_first = order
    bins = PUSH_ROUND_BINS
    if max_steps < 1 or frontier.shape[0] == 0:
        return frontier.copy(), 0
    shared_vertex = np.empty(max(num_vertices, 1), np.int64)
    shared_value = np.empty(max(num_vertices, 1), values.dtype)
    base, size = _first_bucket(frontier, values, bucket_width, larger_first, shared_vertex,
                               shared_value)
    sync = sync_slots(8)
    sync[_slot(_TAIL + 0)] = size
    sync[_slot(_BIN + 0)] = 0
    sync[_slot(_BIN + 1)] = bins
    tally = np.zeros(team * 16, np.float64)     # rows a cache line apart and more
    totals = np.zeros(5, np.float64)            # the first thread's sums of the rows
    met = np.zeros(team, np.bool_)
    for t in numba.prange(team):
        met[t] = team_rendezvous(sync, team)
        if met[t]:
            heads, counts, occupied, entry_vertex, entry_value, entry_next, free = \
                _thread_bins(bins, values)
            row = tally[t * 16:(t + 1) * 16]
            if t == 0:      # the frontier's later buckets start in this thread's bins
                entry_vertex, entry_value, entry_next = _link_later_buckets(
                    frontier, values, base, bucket_width, larger_first, heads, counts,
                    occupied, entry_vertex, entry_value, entry_next, free)
            round_ = 0
            while True:
                parity = round_ & 1
                current = atomic_load(sync, _slot(_BIN + parity))
                size = atomic_load(sync, _slot(_TAIL + parity))
                row[0] = 0.0
                row[1] = 0.0
                row[2] = 0.0
                row[3] = 0.0
                entry_vertex, entry_value, entry_next = _push_round(
                    gather_call, apply_call, activate_call, shared_vertex, shared_value, size,
                    max(1, min(PUSH_ROUND_CHUNK, size // (4 * team))), sync, parity,
                    out_offsets, out_targets, out_weights, values, attrs, aggregates,
                    num_vertices, first_iteration + round_, base, current, bucket_width,
                    larger_first, heads, counts, occupied, entry_vertex, entry_value,
                    entry_next, free, row)
                own_lowest = _lowest_occupied(occupied, current)
                if own_lowest >= 0:
                    atomic_min(sync, _slot(_BIN + 1 - parity), own_lowest)
                team_barrier(sync, team)
                lowest = atomic_load(sync, _slot(_BIN + 1 - parity))
                done = lowest >= bins - 1 or round_ + 1 >= max_steps
                if t == 0:      # the round's counts: the other threads need none of them
                    _close_round(tally, team, totals, counters, changes, round_, sync, parity,
                                 bins)
                # the next frontier: the live entries of the lowest bucket, or of every
                # bucket when the call ends
                first_bin, end_bin = (current, bins) if done else (lowest, lowest + 1)
                _share_live_entries(first_bin, end_bin, values, heads, counts, occupied,
                                    entry_vertex, entry_value, entry_next, free, sync, parity,
                                    shared_vertex, shared_value)
                if done:
                    break
                team_barrier(sync, team)
                round_ += 1
    if not met.all():
        return frontier, -1
    left = sync[_slot(_TAIL + sync[_slot(_LAST_PARITY)])]
    return shared_vertex[:left].copy(), sync[_slot(_ROUNDS)]
