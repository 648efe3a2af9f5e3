"""Beamer's top-down steps on threads kept for the whole call (GAPBS's
``bfs``: one parallel region, a barrier per level, a sliding queue of
frontiers): :func:`settle_push_rounds`, for a program final once set.
"""

from __future__ import annotations

import numba
import numpy as np

from ..atomics import (atomic_add, atomic_load, atomic_store, sync_slots, team_barrier,
                       team_rendezvous)
from .common import SETTLED_CLAIM, _claim, _slot, _team_totals, _update_vertex
from .push_rounds import PUSH_ROUND_CHUNK


#: Entries of a thread's buffer of the next frontier in
#: :func:`settle_push_rounds` (GAPBS's ``QueueBuffer``): flushed to the
#: shared queue when full and at the end of each level.
SETTLE_ROUND_BUFFER = 256


# the sync array of settle_push_rounds: two copies of the state of a level, each
# on one cache line (slots 0 and 1): pass k of the threads' loop reads copy
# k % 2 and its first thread writes the other (a thread still reading copy k %
# 2 never sees it change); then the counter of taken vertices, the queue's
# tail and the count of claims to give back, each on a line of its own
_LEVEL_HEAD, _LEVEL_END, _LEVEL_EDGES, _LEVEL_STEPS, _LEVEL_DONE = range(5)


_TAKEN, _QUEUE_TAIL, _RETURNED = 2, 3, 4


@numba.njit(nogil=True)
def _settle_round_buffer(capacity):
    """One thread's buffer of :func:`settle_push_rounds`.  Made by a call, not in
    the parallel loop's body (numba would hoist a fixed-size allocation out of
    it, and the threads would share it); never replaced by a larger one:
    numba's parfor pass may go on reading an array variable reassigned in the
    loop's body as first made."""
    return np.empty(capacity, np.int64)


@numba.njit(nogil=True, inline="always")
def _flush_queue(buffer, filled, queue, sync):
    """Append ``buffer[:filled]`` to the shared queue (its tail taken atomically)."""
    at = atomic_add(sync, _slot(_QUEUE_TAIL), filled)
    for j in range(filled):
        queue[at + j] = buffer[j]


@numba.njit(nogil=True, inline="always")
def _settle_from(gather_call, apply_call, activate_call, combine, identity, u, out_offsets,
                 out_targets, weights, values_read, values_write, synchronous, attrs,
                 aggregates, num_vertices, iteration, settled, claimed, in_offsets,
                 degrees_match, atomic, buffer, filled, queue, returned, sync, tally):
    """Beamer's top-down step from one settled vertex ``u``
    (:func:`settle_push_rounds`; :func:`push_settling`'s rule): each out-edge to
    a vertex neither settled nor claimed claims it (atomically when
    ``atomic``) and gives it its value from ``u`` alone.  An activated vertex
    is settled and goes to ``buffer`` (flushed to ``queue`` when full); one
    written but not activated to ``returned`` (its claim goes back after the
    level).  ``tally`` gets the vertices written, those activated, their
    out-edges, their in-edges and the summed change.  Returns the buffer's
    fill."""
    for e in range(out_offsets[u], out_offsets[u + 1]):
        v = out_targets[e]
        if claimed[v] != 0:
            continue
        if atomic:
            if _claim(claimed, v) != 0:
                continue
        else:
            claimed[v] = 1
        accum = combine(identity, gather_call(values_read, weights, attrs, u, v, 0))
        flag, delta = _update_vertex(apply_call, activate_call, attrs, aggregates,
                                     num_vertices, iteration, v, accum, values_read,
                                     values_write)
        if synchronous:     # v is this thread's alone, and no gather reads it this level
            values_read[v] = values_write[v]
        tally[0] += 1.0
        tally[4] += delta
        if flag:
            settled[v] = True
            claimed[v] = SETTLED_CLAIM
            if filled == buffer.shape[0]:
                _flush_queue(buffer, filled, queue, sync)
                filled = 0
            buffer[filled] = v
            filled += 1
            out_degree = out_offsets[v + 1] - out_offsets[v]
            tally[1] += 1.0
            tally[2] += out_degree
            tally[3] += out_degree if degrees_match else in_offsets[v + 1] - in_offsets[v]
        else:
            returned[atomic_add(sync, _slot(_RETURNED), 1)] = v
    return filled


@numba.njit(nogil=True)
def _give_claims_back(returned, claimed, sync):
    """Clear the claims of the vertices written but not activated in the level."""
    for j in range(sync[_slot(_RETURNED)]):
        claimed[returned[j]] = 0
    sync[_slot(_RETURNED)] = 0


@numba.njit(nogil=True, inline="always")
def _serial_level(gather_call, apply_call, activate_call, combine, identity, queue, head, end,
                  out_offsets, out_targets, in_offsets, weights, values_read, values_write,
                  synchronous, attrs, aggregates, num_vertices, iteration, settled, claimed,
                  degrees_match, buffer, returned, sync, row):
    """A level of :func:`settle_push_rounds` (``queue[head:end]``) on the first
    thread alone: its activated vertices appended to the queue, the claims of
    those written but not activated given back."""
    filled = 0
    for i in range(head, end):
        u = queue[i]
        if settled[u]:
            filled = _settle_from(
                gather_call, apply_call, activate_call, combine, identity, u, out_offsets,
                out_targets, weights, values_read, values_write, synchronous, attrs,
                aggregates, num_vertices, iteration, settled, claimed, in_offsets,
                degrees_match, False, buffer, filled, queue, returned, sync, row)
    _flush_queue(buffer, filled, queue, sync)
    _give_claims_back(returned, claimed, sync)


@numba.njit(nogil=True, inline="always")
def _shared_level(gather_call, apply_call, activate_call, combine, identity, queue, head, end,
                  t, team, out_offsets, out_targets, in_offsets, weights, values_read,
                  values_write, synchronous, attrs, aggregates, num_vertices, iteration,
                  settled, claimed, degrees_match, buffer, returned, sync, row):
    """Thread ``t``'s share of a level of :func:`settle_push_rounds` shared by
    the ``team``: a first part of ``queue[head:end]``, then parts of up to
    :data:`PUSH_ROUND_CHUNK` vertices through the level's counter; the
    vertices it activates are appended to the queue."""
    size = end - head
    chunk = max(1, min(PUSH_ROUND_CHUNK, size // (4 * team)))
    first = min(size // (2 * team), 4 * PUSH_ROUND_CHUNK)
    start, stop = head + t * first, head + (t + 1) * first
    dealt = head + team * first
    filled = 0
    while True:
        for i in range(start, stop):
            u = queue[i]
            if settled[u]:
                filled = _settle_from(
                    gather_call, apply_call, activate_call, combine, identity, u, out_offsets,
                    out_targets, weights, values_read, values_write, synchronous, attrs,
                    aggregates, num_vertices, iteration, settled, claimed, in_offsets,
                    degrees_match, True, buffer, filled, queue, returned, sync, row)
        start = dealt + atomic_add(sync, _slot(_TAKEN), chunk)
        if start >= end:
            break
        stop = min(start + chunk, end)
    _flush_queue(buffer, filled, queue, sync)


@numba.njit(nogil=True, inline="always")
def _close_level(tally, team, totals, returned, claimed, sync, unsettled, head, end, edges,
                 step, max_steps, tolerance, settling_pull_factor, num_vertices, counters,
                 changes, following):
    """The first thread's end of a shared level of :func:`settle_push_rounds`
    (``queue[head:end]``, ``edges`` out-edges): the claims given back, the
    level's counters, and the next level's state, decided, in the copy at
    ``following`` of the sync array."""
    _give_claims_back(returned, claimed, sync)
    _team_totals(tally, team, totals)
    written, next_edges, settled_in_edges, change = totals[0], totals[2], totals[3], totals[4]
    unsettled_at_start = unsettled[0]
    unsettled[0] -= np.int64(settled_in_edges)
    tail = atomic_load(sync, _slot(_QUEUE_TAIL))
    _level_counters(counters, changes, step, end - head, edges, written, tail - end, 0,
                    unsettled_at_start, change)
    sync[_slot(_TAKEN)] = 0
    _write_level(sync, following, end, tail, np.int64(next_edges), step + 1,
                 tail == end or step + 1 >= max_steps or change < tolerance
                 or np.int64(next_edges) * settling_pull_factor > unsettled[0] + num_vertices)


@numba.njit(nogil=True, parallel=True)
def settle_push_rounds(gather_call, apply_call, activate_call, combine, identity, frontier,
                       graph, values, context, rules, settling, out, team):
    """Up to ``max_steps`` of Beamer's top-down steps (:func:`push_settling`) for a
    program final once set, on ``team`` threads kept for the whole call (one
    iteration of ``numba.prange(team)`` each; GAPBS's ``bfs``: one parallel
    region, a barrier per level, a sliding queue of frontiers).

    Each step is the iteration :func:`sparse_iterations` would run with
    ``settling_push``, with the same values, frontier, settled flags and
    claims; the steps differ in how the threads meet.  A frontier of at most
    ``serial_edges`` out-edges is stepped by the first thread alone, level
    after level while the frontiers stay that small, as the others wait at
    the barrier.  A larger one is shared: each thread takes a first part of
    it, then parts of up to :data:`PUSH_ROUND_CHUNK` vertices through an
    atomic counter; it claims the vertices their out-edges reach
    (atomically) and keeps the activated ones in a buffer of its own,
    appended to the shared queue when full and at the level's end.  At a
    barrier the threads meet; the first gives back the claims of the
    vertices written but not activated, sums the level's counts and
    decides; a second barrier starts the next level.  The queue holds each
    frontier after the last: every vertex is activated once (it is settled
    then).

    The call stops before a step whose frontier is empty or for which the
    engine's rule would pull (``a * settling_pull_factor >
    unsettled_edges[0] + num_vertices``, ``a`` the frontier's out-edges:
    :func:`garaphpy.scheduler.decisions.settling_direction`), and after
    ``max_steps`` steps or one whose summed change is below ``tolerance``.
    ``unsettled_edges[0]`` loses the in-edges of every vertex settled (the
    out-edges when ``degrees_match``: a symmetric graph).  Row ``s`` of
    ``counters`` gets step ``s``'s :data:`SPARSE_COUNTERS` and ``changes[s]``
    its summed change.  Where the threads do not all meet at the start
    (:func:`team_rendezvous`), nothing is done.

    Returns
    -------
    frontier : int64 array
        The frontier after the last step taken.
    steps : int
        Steps taken; -1 when the threads did not meet (``frontier`` is then
        the input, unchanged).

    The groups (:mod:`~garaphpy.kernels.cpu.arguments`): ``graph`` is
    ``(out_offsets, out_targets, in_offsets, weights)``, ``values``
    ``(values_read, values_write, synchronous)``, ``context`` ``(attrs,
    aggregates, num_vertices, first_iteration)``, ``rules`` ``(max_steps,
    tolerance, settling_pull_factor, serial_edges)``, ``settling``
    ``(settled, claimed, unsettled_edges, degrees_match)`` and ``out``
    ``(counters, changes)``.
    """
    out_offsets, out_targets, in_offsets, weights = graph
    values_read, values_write, synchronous = values
    attrs, aggregates, num_vertices, first_iteration = context
    max_steps, tolerance, settling_pull_factor, serial_edges = rules
    settled, claimed, unsettled_edges, degrees_match = settling
    counters, changes = out
    size = frontier.shape[0]
    if max_steps < 1 or size == 0:
        return frontier.copy(), 0
    queue = np.empty(size + num_vertices, np.int64)
    returned = np.empty(max(num_vertices, 1), np.int64)
    edges = 0
    for i in range(size):
        queue[i] = frontier[i]
        edges += out_offsets[frontier[i] + 1] - out_offsets[frontier[i]]
    sync = sync_slots(5)
    sync[_slot(0) + _LEVEL_END] = size
    sync[_slot(0) + _LEVEL_EDGES] = edges
    sync[_slot(_QUEUE_TAIL)] = size
    if edges * settling_pull_factor > unsettled_edges[0] + num_vertices:
        sync[_slot(0) + _LEVEL_DONE] = 1
    last = np.zeros(3, np.int64)        # the last state: head, end, steps
    unsettled = np.full(1, unsettled_edges[0], np.int64)
    tally = np.zeros(team * 16, np.float64)     # rows a cache line apart and more
    totals = np.zeros(5, np.float64)            # the first thread's sums of the rows
    met = np.zeros(team, np.bool_)
    for t in numba.prange(team):
        met[t] = team_rendezvous(sync, team)
        if met[t]:
            buffer = _settle_round_buffer(SETTLE_ROUND_BUFFER)
            row = tally[t * 16:(t + 1) * 16]
            passes = 0
            while True:
                level = _slot(passes & 1)
                following = _slot(1 - (passes & 1))
                passes += 1
                head = atomic_load(sync, level + _LEVEL_HEAD)
                end = atomic_load(sync, level + _LEVEL_END)
                edges = atomic_load(sync, level + _LEVEL_EDGES)
                step = atomic_load(sync, level + _LEVEL_STEPS)
                if atomic_load(sync, level + _LEVEL_DONE) != 0:
                    if t == 0:
                        last[0], last[1], last[2] = head, end, step
                    break
                for c in range(5):
                    row[c] = 0.0
                if edges <= serial_edges:
                    if t == 0:      # levels this small, one after another on this thread
                        done = False
                        while not done:
                            unsettled_at_start = unsettled[0]
                            _serial_level(
                                gather_call, apply_call, activate_call, combine, identity,
                                queue, head, end, out_offsets, out_targets, in_offsets, weights,
                                values_read, values_write, synchronous, attrs, aggregates,
                                num_vertices, first_iteration + step, settled, claimed,
                                degrees_match, buffer, returned, sync, row)
                            unsettled[0] -= np.int64(row[3])
                            _level_counters(counters, changes, step, end - head, edges, row[0],
                                            row[1], 1, unsettled_at_start, row[4])
                            step += 1
                            head, end, edges = end, sync[_slot(_QUEUE_TAIL)], np.int64(row[2])
                            done = (head == end or step >= max_steps or row[4] < tolerance
                                    or edges * settling_pull_factor
                                    > unsettled[0] + num_vertices)
                            for c in range(5):
                                row[c] = 0.0
                            if edges > serial_edges:
                                break
                        _write_level(sync, following, head, end, edges, step, done)
                    team_barrier(sync, team)
                    continue
                _shared_level(gather_call, apply_call, activate_call, combine, identity, queue,
                              head, end, t, team, out_offsets, out_targets, in_offsets, weights,
                              values_read, values_write, synchronous, attrs, aggregates,
                              num_vertices, first_iteration + step, settled, claimed,
                              degrees_match, buffer, returned, sync, row)
                team_barrier(sync, team)
                if t == 0:
                    _close_level(tally, team, totals, returned, claimed, sync, unsettled, head,
                                 end, edges, step, max_steps, tolerance, settling_pull_factor,
                                 num_vertices, counters, changes, following)
                team_barrier(sync, team)
    if not met.all():
        return frontier, -1
    unsettled_edges[0] = unsettled[0]
    return queue[last[0]:last[1]].copy(), last[2]


@numba.njit(nogil=True, inline="always")
def _write_level(sync, level, head, end, edges, steps, done):
    """The state of the next level, in the copy at ``level`` of the sync array."""
    sync[level + _LEVEL_HEAD] = head
    sync[level + _LEVEL_END] = end
    sync[level + _LEVEL_EDGES] = edges
    sync[level + _LEVEL_STEPS] = steps
    atomic_store(sync, level + _LEVEL_DONE, 1 if done else 0)


@numba.njit(nogil=True, inline="always")
def _level_counters(counters, changes, step, vertices, edges, written, activated, serial,
                    unsettled_at_start, change):
    """Row ``step`` of :func:`settle_push_rounds`'s :data:`SPARSE_COUNTERS`."""
    counters[step, 0] = vertices
    counters[step, 1] = edges
    counters[step, 2] = np.int64(written)
    counters[step, 3] = edges
    counters[step, 4] = np.int64(activated)
    counters[step, 5] = serial
    counters[step, 6] = unsettled_at_start
    changes[step] = change
