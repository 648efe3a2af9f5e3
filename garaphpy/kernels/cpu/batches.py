"""Batches of sparse notify-pull iterations in one call (Garaph section 4.2).

:func:`sparse_iterations` runs the iterations the engine would run one at a
time while their frontiers stay small, on the calling thread where a step
is small and through the parallel kernels where it is not, without a
return to Python in between.
"""

from __future__ import annotations

import numba
import numpy as np

from .common import SETTLED_CLAIM, _update_vertex
from .vertices import commit_vertices
from .pull import pull_vertices
from .frontier import degree_prefix, reset_flags
from .notify import notify, notify_dense, push_settling


@numba.njit(nogil=True)
def _sparse_step(gather_call, apply_call, activate_call, combine, identity, current, prefix,
                 graph, values, context, schedule, claimed, settling, scratch):
    """One notify-pull step of a batch (:func:`sparse_iterations`,
    :func:`priority_iterations`) over the frontier ``current``, whose
    out-degree prefix over the CSR is ``prefix``.

    The notify runs on this thread when the frontier has at most
    ``serial_edges`` out-edges, over a bitmap (:func:`notify_dense`) when
    ``out-edges * dense_factor > num_vertices``, else in parallel
    (:func:`notify`); the gather of the notified vertices runs on this
    thread when they have at most ``serial_edges`` in-edges, else in
    parallel (:func:`pull_vertices`); ``chunks`` and ``threads`` are the
    parallel kernels'.  ``stats`` and ``marked`` are the
    parallel pull's scratch counters.

    The groups: ``graph`` is ``(out_offsets, out_targets, in_offsets,
    sources, weights)``, ``values`` ``(values_read, values_write,
    synchronous)``, ``context`` what apply reads (``(attrs, aggregates,
    num_vertices, iteration)``), ``schedule`` ``(serial_edges,
    dense_factor, chunks, threads)``, ``settling`` ``(early_exit, settled,
    unsettled_edges)`` and ``scratch`` ``(stats, marked)``.

    Returns
    -------
    (following, notified, edges, serial, change)
        The vertices activated, how many were notified, their in-edges, whether
        the gather ran on this thread, and the step's summed change.
    """
    out_offsets, out_targets, in_offsets, sources, weights = graph
    values_read, values_write, synchronous = values
    attrs, aggregates, num_vertices, iteration = context
    serial_edges, dense_factor, chunks, threads = schedule
    early_exit, settled, unsettled_edges = settling
    stats, marked = scratch
    size = current.shape[0]
    active_edges = prefix[size]
    if active_edges <= serial_edges:
        buffer = np.empty(active_edges, np.int64)
        count = 0
        for i in range(size):
            u = current[i]
            for e in range(out_offsets[u], out_offsets[u + 1]):
                w = out_targets[e]
                if claimed[w] == 0:
                    claimed[w] = 1
                    buffer[count] = w
                    count += 1
        notified = buffer[:count].copy()
        for i in range(count):
            claimed[notified[i]] = 0
    elif active_edges * dense_factor > num_vertices:
        notified = notify_dense(current, prefix, out_offsets, out_targets, claimed, chunks,
                                threads)
        count = notified.shape[0]
    else:
        notified = notify(current, prefix, out_offsets, out_targets, claimed, chunks)
        reset_flags(notified, claimed)
        count = notified.shape[0]
    in_prefix = degree_prefix(notified, in_offsets)
    edges = in_prefix[count]
    serial = edges <= serial_edges
    if serial:
        following = np.empty(count, np.int64)
        change = 0.0
        activated = 0
        for i in range(count):
            v = notified[i]
            # _gather_in_edges written out: through it, numba made this serial
            # step twice as slow (grid BFS at 2 threads, 90 -> 187 ms)
            accum = identity
            old = values_read[v]
            for e in range(in_offsets[v], in_offsets[v + 1]):
                u = sources[e]
                if early_exit and not settled[u]:
                    continue
                accum = combine(accum, gather_call(values_read, weights, attrs, u, v, e))
                if early_exit and activate_call(apply_call(attrs, aggregates, num_vertices,
                                                           iteration, v, old, accum), old):
                    break
            flag, delta = _update_vertex(apply_call, activate_call, attrs, aggregates,
                                         num_vertices, iteration, v, accum, values_read,
                                         values_write)
            change += delta
            if flag:
                following[activated] = v
                activated += 1
                if early_exit and not settled[v]:
                    settled[v] = True
                    claimed[v] = SETTLED_CLAIM
                    unsettled_edges[0] -= in_offsets[v + 1] - in_offsets[v]
        following = following[:activated].copy()
        if synchronous:
            for i in range(count):
                v = notified[i]
                values_read[v] = values_write[v]
    else:
        edge_starts = np.empty(count, np.int64)
        for i in range(count):
            edge_starts[i] = in_offsets[notified[i]]
        stats[:] = 0.0
        marked[0] = 0
        following = pull_vertices(gather_call, apply_call, activate_call, combine, identity,
                                  (notified, in_prefix, edge_starts), (sources, weights),
                                  (values_read, values_write), context, chunks, stats,
                                  (early_exit, settled, claimed, marked))
        unsettled_edges[0] -= marked[0]
        change = stats[0]
        if synchronous:
            commit_vertices(notified, values_write, values_read)
    return following, count, edges, serial, change


@numba.njit(nogil=True)
def _settle_step(gather_call, apply_call, activate_call, combine, identity, current, edges,
                 graph, values, context, settling):
    """:func:`push_settling` on this thread, for a step of
    :func:`sparse_iterations` small enough (no claim needs an atomic; an
    empty ``in_offsets``: the caller counts the settled vertices' in-edges);
    ``edges`` is the frontier's out-edges summed.  The groups: ``graph`` is
    ``(out_offsets, out_targets, weights, in_offsets)``, ``values``
    ``(values_read, values_write, synchronous)``, ``context`` what apply
    reads (``(attrs, aggregates, num_vertices, iteration)``) and
    ``settling`` ``(settled, claimed, unsettled_edges)``.

    A synchronous step commits each written vertex as it writes it: the
    step reads only settled vertices' values, and a vertex it writes was
    not settled, so no read of the step sees the commit.  The activated
    vertices' out-edges are summed as they are activated: the next step's
    frontier needs no pass of its own for its size.

    Returns
    -------
    (written, following, change, following_out_edges)
        The vertices written, those activated (views of this step's
        buffers), the step's summed change, and the activated vertices'
        out-edges summed.
    """
    out_offsets, out_targets, weights, in_offsets = graph
    values_read, values_write, synchronous = values
    attrs, aggregates, num_vertices, iteration = context
    settled, claimed, unsettled_edges = settling
    written = np.empty(edges, np.int64)
    following = np.empty(edges, np.int64)
    wrote = 0
    activated = 0
    change = 0.0
    marked = 0
    following_out_edges = 0
    counts_in_edges = in_offsets.shape[0] > 0
    for i in range(current.shape[0]):
        u = current[i]
        if not settled[u]:
            continue
        for e in range(out_offsets[u], out_offsets[u + 1]):
            v = out_targets[e]
            if claimed[v] != 0:
                continue
            claimed[v] = 1
            accum = combine(identity, gather_call(values_read, weights, attrs, u, v, 0))
            flag, delta = _update_vertex(apply_call, activate_call, attrs, aggregates,
                                         num_vertices, iteration, v, accum, values_read,
                                         values_write)
            if synchronous:
                values_read[v] = values_write[v]
            change += delta
            written[wrote] = v
            wrote += 1
            if flag:
                following[activated] = v
                activated += 1
                settled[v] = True
                claimed[v] = SETTLED_CLAIM
                following_out_edges += out_offsets[v + 1] - out_offsets[v]
                if counts_in_edges:
                    marked += in_offsets[v + 1] - in_offsets[v]
    if wrote != activated:
        for i in range(wrote):
            v = written[i]
            if not settled[v]:
                claimed[v] = 0
    unsettled_edges[0] -= marked
    return written[:wrote], following[:activated], change, following_out_edges


#: Columns of :func:`sparse_iterations`'s per-iteration counters ("serial": 1
#: when the step's gather ran on the calling thread alone).
SPARSE_COUNTERS = ("active_vertices", "active_out_edges", "updated_vertices",
                   "edges_processed", "activated", "serial", "unsettled_in_edges")


@numba.njit(nogil=True)
def sparse_iterations(gather_call, apply_call, activate_call, combine, identity, frontier,
                      claimed, graph, values, context, rules, schedule, out, settling):
    """Up to ``max_steps`` notify-pull iterations of sparse frontiers in one call.

    Each step is the iteration the engine would run in its own call (Garaph
    section 4.1's notify-pull with the sparse notify), with the same values,
    frontier and counters: the out-neighbours of the frontier are notified
    once each, each gathers over all its in-edges (CSC ``in_offsets``,
    ``sources``, ``weights`` indexed by the global edge), applies, and joins
    the next frontier when activated; a synchronous run reads
    ``values_read``, writes ``values_write`` and commits the notified
    vertices after the step, an asynchronous one passes the same array
    twice.  The notify of a frontier with at most ``serial_edges``
    out-edges, and the gather of notified vertices with at most
    ``serial_edges`` in-edges, run on this thread alone; larger ones call
    the parallel kernels of the engine's own notify-pull (:func:`notify`,
    :func:`pull_vertices`, ``chunks`` chunks), without a return to Python
    in between.

    Steps run while the frontier's out-edges ``a`` satisfy the engine's own
    choices: ``a / num_edges <= direction_threshold`` (notify-pull, not
    pull) and ``a * dense_factor <= num_vertices`` (the sparse notify).  The
    call stops before a step whose frontier is empty or refused, and after a
    step whose summed change is below ``tolerance``.  ``claimed`` is a
    uint8 flag per vertex, 0 on entry and on return but for settled vertices.

    With ``early_exit`` (a program final once set, :func:`pull_range_settling`)
    the settled vertices, whose ``claimed`` flag is :data:`SETTLED_CLAIM`,
    are never notified, the others gather from settled in-neighbours and
    stop at their activating in-edge, each step marks its activated vertices
    (both flags) and takes their in-edges off ``unsettled_edges[0]``, and the engine's rule
    for such programs refuses a step instead of Garaph's:
    ``a * settling_pull_factor > unsettled_edges[0] + num_vertices`` (a pull
    would pay).  With ``settling_push`` too (:func:`push_settling`'s rule
    for iterations run alone) each step is Beamer's top-down step, on this
    thread up to ``serial_edges`` out-edges (:func:`_settle_step`); its
    counters are then the vertices written and the frontier's out-edges, as
    an iteration run alone records them.  With ``degrees_match`` too (every
    vertex has as many in-edges as out-edges: a symmetric graph) the
    in-edges a step settles are its activated vertices' out-edges, which the
    next step's :func:`degree_prefix` sums anyway: no read of ``in_offsets``
    per vertex (its cache line is a miss of its own on a grid).

    The groups (:mod:`~garaphpy.kernels.cpu.arguments`): ``graph`` is
    ``(out_offsets, out_targets, in_offsets, sources, weights)``, ``values``
    ``(values_read, values_write, synchronous)``, ``context`` ``(attrs,
    aggregates, num_vertices, first_iteration)``, ``rules`` ``(num_edges,
    direction_threshold, dense_factor, tolerance, settling_pull_factor)``,
    ``schedule`` ``(max_steps, serial_edges, chunks, threads)``, ``out``
    ``(counters, changes)`` and ``settling`` ``(early_exit, settled,
    unsettled_edges, settling_push, degrees_match)``.

    Returns
    -------
    frontier : int64 array
        The frontier after the last step taken (``frontier`` itself when no
        step was taken).
    steps : int
        Steps taken; row ``s`` of ``counters`` holds step ``s``'s
        :data:`SPARSE_COUNTERS` and ``changes[s]`` its summed change.
    """
    out_offsets, out_targets, in_offsets, sources, weights = graph
    values_read, values_write, synchronous = values
    attrs, aggregates, num_vertices, first_iteration = context
    num_edges, direction_threshold, dense_factor, tolerance, settling_pull_factor = rules
    max_steps, serial_edges, chunks, threads = schedule
    counters, changes = out
    early_exit, settled, unsettled_edges, settling_push, degrees_match = settling
    current = frontier
    stats = np.zeros(2, np.float64)
    marked = np.zeros(1, np.int64)
    steps = 0
    by_prefix = early_exit and settling_push and degrees_match
    mark_offsets = in_offsets[:0] if by_prefix else in_offsets
    pending = False     # the settled vertices of ``current`` still count as unsettled
    known_edges = -1    # ``current``'s out-edges, where the step that made it summed them
    no_prefix = np.empty(0, np.int64)
    while steps < max_steps and current.shape[0] > 0:
        size = current.shape[0]
        if known_edges >= 0:
            prefix = no_prefix
            active_edges = known_edges
        else:
            prefix = degree_prefix(current, out_offsets)
            active_edges = prefix[size]
        known_edges = -1
        if pending:
            unsettled_edges[0] -= active_edges
            pending = False
        fraction = active_edges / num_edges if num_edges > 0 else 0.0
        if active_edges * dense_factor > num_vertices:
            break
        if early_exit:
            if active_edges * settling_pull_factor > unsettled_edges[0] + num_vertices:
                break
        elif fraction > direction_threshold:
            break
        iteration = first_iteration + steps
        unsettled_at_start = unsettled_edges[0]
        if early_exit and settling_push:
            serial = active_edges <= serial_edges
            if serial:
                written, following, change, known_edges = _settle_step(
                    gather_call, apply_call, activate_call, combine, identity, current,
                    active_edges, (out_offsets, out_targets, weights, mark_offsets), values,
                    (attrs, aggregates, num_vertices, iteration),
                    (settled, claimed, unsettled_edges))
            else:
                if prefix.shape[0] != size + 1:
                    prefix = degree_prefix(current, out_offsets)
                stats[:] = 0.0
                marked[0] = 0
                written, following = push_settling(
                    gather_call, apply_call, activate_call, combine, identity, (current, prefix),
                    (out_offsets, out_targets, weights, mark_offsets),
                    (values_read, values_write), (attrs, aggregates, num_vertices, iteration),
                    chunks, stats, (settled, claimed, marked))
                unsettled_edges[0] -= marked[0]
                change = stats[0]
                if synchronous:
                    for i in range(written.shape[0]):
                        values_read[written[i]] = values_write[written[i]]
            pending = by_prefix
            count = written.shape[0]
            edges = active_edges
        else:       # only a settling step sums the next frontier's edges: prefix is made
            following, count, edges, serial, change = _sparse_step(
                gather_call, apply_call, activate_call, combine, identity, current, prefix,
                graph, values, (attrs, aggregates, num_vertices, iteration),
                (serial_edges, dense_factor, chunks, threads), claimed,
                (early_exit, settled, unsettled_edges), (stats, marked))
        activated = following.shape[0]
        counters[steps, 0] = size
        counters[steps, 1] = active_edges
        counters[steps, 2] = count
        counters[steps, 3] = edges
        counters[steps, 4] = activated
        counters[steps, 5] = serial
        counters[steps, 6] = unsettled_at_start
        changes[steps] = change
        current = following
        steps += 1
        if change < tolerance:
            break
    if pending:
        unsettled_edges[0] -= (known_edges if known_edges >= 0 else
                               degree_prefix(current, out_offsets)[current.shape[0]])
    return current, steps
