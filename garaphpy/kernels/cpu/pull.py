"""Pull kernels (Garaph section 4.1): gather over in-edges, then apply.

A page's edges are cut into equal parts, one per thread, not vertices per
thread (:func:`pull_range`).  A thread gathers its edges in CSC order into a
local accumulator; a vertex whose in-edges are cut at a part boundary
leaves a *replica* (its partial sum) that is merged with the neighbouring
parts' replicas after the gather, then applied once.  Vertices whose
in-edges continue into another page come back to the caller as partial
sums, combined across pages at the end of the iteration
(:func:`apply_vertices`).

:func:`pull_range` takes the gather as an accessor plus the array it reads,
so the same kernel runs either way: ``gather_call`` over the values, or
:func:`~garaphpy.kernels.cpu.vertices.read_source_contribution` over the
source-side contributions.  The other kernels are its variants: for a
program final once set (:func:`pull_range_settling`,
:func:`pull_settling_whole`), fused with the next iteration's source-side
gathers and aggregates (:func:`pull_fused`), and over a list of notified
vertices (:func:`pull_vertices`).  Every one ends a vertex with the update
tail of :mod:`~garaphpy.kernels.cpu.common` (``_update_and_flag``, or
``_update_vertex`` where the activated vertices are listed, not flagged).
"""

from __future__ import annotations

import numba
import numpy as np

from ..atomics import FIRST_FREE_SLOT, atomic_add, sync_slots
from .common import (SETTLED_CLAIM, _at_floor, _balanced_chunks, _bit_set, _concatenate_chunks,
                     _update_and_flag, _update_vertex, _vertex_of_edge)
from .exact_sum import WIDTH


@numba.njit(nogil=True, parallel=True)
def pull_range(gather_call, apply_call, activate_call, combine, aggregate_tuple, identity,
               edges, page, values, context, parts, out, floor):
    """Pull over the edges edge_begin..edge_end-1 of a page (Garaph section 4.1).

    The arguments come in the groups of :mod:`~garaphpy.kernels.cpu.arguments`.

    Parameters
    ----------
    gather_call : numba dispatcher
        ``gather_call(gather_values, weights, attrs, u, v, e)``: the
        program's gather, or :func:`read_source_contribution`.
    edges : (in_offsets, sources, weights, edge_base)
        The global CSC index, and the page's sources and edge values; edge
        e is at ``e - edge_base``.
    page : (edge_begin, edge_end, first_vertex, end_vertex)
        The page's edges and vertex range (a vertex split across pages is
        in both).
    values : (values_read, values_write, gather_values)
        Committed values and where new values go (the same array when
        asynchronous); what ``gather_call`` reads: ``values_read``, or the
        contributions of :func:`source_contributions`.
    context : (attrs, aggregates, num_vertices, iteration)
        What apply reads.
    parts : int
        Equal edge parts, one per task.
    out : (active, stats, boundary_vertex, boundary_accum)
        active[v] = activate(new, old) for every vertex applied here;
        stats[0] += L1 change, stats[1] += vertices activated; the partial
        sums of vertices whose in-edges continue outside the page (arrays
        of at least 2).
    floor : (floor_mode, floor_value)
        :data:`FLOOR_MIN` or :data:`FLOOR_MAX`: a vertex whose value is at
        or below ``floor_value[0]`` (or at or above) reads no in-edge (a
        program declaring ``gather_no_better_than_source``, the floor the
        best value of a vertex with out-edges: :func:`best_source_value`);
        0: none.

    apply reads ``aggregates`` as a tuple (``aggregate_tuple(aggregates)``),
    constants of the loop, as in :func:`pull_fused`.

    Returns
    -------
    int
        Number of boundary partial sums written.
    """
    in_offsets, sources, weights, edge_base = edges
    edge_begin, edge_end, first_vertex, end_vertex = page
    values_read, values_write, gather_values = values
    attrs, aggregates, num_vertices, iteration = context
    active, stats, boundary_vertex, boundary_accum = out
    floor_mode, floor_value = floor
    span = edge_end - edge_begin
    if span <= 0:
        parts = 1
    part = (span + parts - 1) // parts if span > 0 else 0
    starts = np.empty(parts + 1, np.int64)
    starts[0] = first_vertex
    starts[parts] = end_vertex
    for t in range(1, parts):
        starts[t] = _vertex_of_edge(in_offsets, first_vertex, end_vertex, edge_begin + t * part)
    record_vertex = np.full((parts, 2), -1, np.int64)
    record_accum = np.full((parts, 2), identity)
    change = np.zeros(parts, np.float64)
    activated = np.zeros(parts, np.int64)
    current = aggregate_tuple(aggregates)
    for t in numba.prange(parts):
        e0 = edge_begin + t * part
        e1 = edge_end if t == parts - 1 else min(edge_end, e0 + part)
        records = 0
        part_change = 0.0
        part_activated = 0
        for v in range(starts[t], starts[t + 1]):
            lo = max(in_offsets[v], e0)
            hi = min(in_offsets[v + 1], e1)
            if floor_mode != 0 and _at_floor(floor_mode, values_read[v], floor_value[0]):
                hi = lo
            accum = identity
            for e in range(lo, hi):
                local = e - edge_base
                accum = combine(accum, gather_call(gather_values, weights, attrs,
                                                   sources[local], v, local))
            if in_offsets[v] < e0 or in_offsets[v + 1] > e1:
                record_vertex[t, records] = v
                record_accum[t, records] = accum
                records += 1
            else:
                part_activated, part_change = _update_and_flag(
                    apply_call, activate_call, attrs, current, num_vertices, iteration, v, accum,
                    values_read, values_write, active, False, part_activated, part_change)
        # one write per part: per-vertex writes to neighbouring slots false-share
        change[t] = part_change
        activated[t] = part_activated
        if t < parts - 1:
            w = starts[t + 1]
            if w < end_vertex and in_offsets[w] < e1:
                accum = identity
                w_end = min(in_offsets[w + 1], e1)
                if floor_mode != 0 and _at_floor(floor_mode, values_read[w], floor_value[0]):
                    w_end = e0
                for e in range(max(in_offsets[w], e0), w_end):
                    local = e - edge_base
                    accum = combine(accum, gather_call(gather_values, weights, attrs,
                                                       sources[local], w, local))
                record_vertex[t, records] = w
                record_accum[t, records] = accum
    # merge the replicas of cut vertices, in vertex order
    # typed, not literal, starts: numba would compile _finish_cut_vertex and
    # _update_vertex once more for the literals 0 and -1 (0.7 s on a first run)
    boundary = np.int64(0)
    current = np.int64(-1)
    current_accum = identity
    for t in range(parts):
        for r in range(2):
            w = record_vertex[t, r]
            if w < 0:
                continue
            if w == current:
                current_accum = combine(current_accum, record_accum[t, r])
                continue
            if current >= 0:
                boundary = _finish_cut_vertex(apply_call, activate_call, context, in_offsets,
                                              page, current, current_accum, values, out,
                                              boundary, change, activated)
            current = w
            current_accum = record_accum[t, r]
    if current >= 0:
        boundary = _finish_cut_vertex(apply_call, activate_call, context, in_offsets, page,
                                      current, current_accum, values, out, boundary, change,
                                      activated)
    stats[0] += change.sum()
    stats[1] += activated.sum()
    return boundary


@numba.njit(nogil=True)
def _finish_cut_vertex(apply_call, activate_call, context, in_offsets, page, v, accum, values,
                       out, boundary, change, activated):
    """Apply a vertex whose replicas are merged, or hand it back if it leaves the page
    (the groups are :func:`pull_range`'s)."""
    attrs, aggregates, num_vertices, iteration = context
    edge_begin, edge_end, _, _ = page
    values_read, values_write, _ = values
    active, _, boundary_vertex, boundary_accum = out
    if in_offsets[v] >= edge_begin and in_offsets[v + 1] <= edge_end:
        activated[0], change[0] = _update_and_flag(
            apply_call, activate_call, attrs, aggregates, num_vertices, iteration, v, accum,
            values_read, values_write, active, False, activated[0], change[0])
        return boundary
    boundary_vertex[boundary] = v
    boundary_accum[boundary] = accum
    return boundary + 1


# inlined in numba's IR: a call would count references to every array argument
@numba.njit(nogil=True, inline="always")
def _gather_in_edges(gather_call, apply_call, activate_call, combine, identity, sources,
                     weights, gather_values, attrs, aggregates, num_vertices, iteration, v, old,
                     first, end, edge_base, early_exit, settled, settled_bits):
    """The sum of vertex ``v``'s in-edges ``first..end`` (``sources`` and
    ``weights`` start at edge ``edge_base``).  With ``early_exit`` (a program
    final once set, :func:`pull_range_settling`), only settled in-neighbours
    count and the gather stops at the first in-edge after which the sum
    activates ``v`` (from ``old``).  The settled vertices are read from
    ``settled_bits`` (:func:`pack_flags` of ``settled``) where it is not
    empty, else from ``settled``.  Called in the kernels' parallel loops, so
    its arguments are not grouped (see :mod:`~garaphpy.kernels.cpu.arguments`)."""
    by_bits = settled_bits.shape[0] > 0
    accum = identity
    for e in range(first, end):
        local = e - edge_base
        u = sources[local]
        # a bit or a byte read, not the value: most edges end here
        if early_exit and not (_bit_set(settled_bits, u) if by_bits else settled[u]):
            continue
        accum = combine(accum, gather_call(gather_values, weights, attrs, u, v, local))
        if early_exit and activate_call(apply_call(attrs, aggregates, num_vertices, iteration,
                                                   v, old, accum), old):
            break
    return accum


@numba.njit(nogil=True, parallel=True)
def pull_range_settling(gather_call, apply_call, activate_call, combine, identity, edges, page,
                        values, context, parts, out, settling):
    """:func:`pull_range` for a program whose values are final once set.

    Such a program (``VertexProgram.final_once_set``, synchronous runs)
    declares that a vertex once active never changes its value again, and
    that a vertex not yet active takes its final value from its first
    settled in-neighbour (one not yet active contributes nothing).  So a
    vertex marked in ``settled`` keeps its value without reading an edge,
    any other reads the values of settled in-neighbours only (a byte per
    edge otherwise) and stops at the first in-edge after which its sum
    activates it: Beamer's bottom-up step, for any such program.
    ``settling`` is ``(settled, settled_bits)``, ``settled_bits`` being
    ``settled`` packed (:func:`pack_flags`), read for the in-neighbours;
    empty: ``settled`` is read.
    Work is cut into ``parts`` runs of about equal vertex counts (the edges a
    vertex reads are not known in advance).  The other arguments are
    :func:`pull_range`'s, ``gather_values`` being ``values_read``; a vertex
    whose in-edges leave the page hands back its partial sum, as there.

    Returns
    -------
    int
        Number of boundary partial sums written.
    """
    in_offsets, sources, weights, edge_base = edges
    edge_begin, edge_end, first_vertex, end_vertex = page
    values_read, values_write, gather_values = values
    attrs, aggregates, num_vertices, iteration = context
    active, stats, boundary_vertex, boundary_accum = out
    settled, settled_bits = settling
    boundary = 0
    low = first_vertex
    high = end_vertex
    change = np.zeros(parts + 1, np.float64)
    activated = np.zeros(parts + 1, np.int64)
    # the page's first and last vertex may continue on another page
    for side in range(2):
        if high <= low:
            break
        v = low if side == 0 else high - 1
        if in_offsets[v] >= edge_begin and in_offsets[v + 1] <= edge_end:
            continue
        if side == 0:
            low += 1
        else:
            high -= 1
        old = values_read[v]
        if settled[v]:
            values_write[v] = old
            active[v] = False
            continue
        accum = _gather_in_edges(gather_call, apply_call, activate_call, combine, identity,
                                 sources, weights, gather_values, attrs, aggregates,
                                 num_vertices, iteration, v, old,
                                 max(in_offsets[v], edge_begin),
                                 min(in_offsets[v + 1], edge_end), edge_base, True, settled,
                                 settled_bits)
        boundary_vertex[boundary] = v
        boundary_accum[boundary] = accum
        boundary += 1
    count = high - low
    block = (count + parts - 1) // parts if count > 0 else 0
    for t in numba.prange(parts):
        part_change = 0.0
        part_activated = 0
        for v in range(low + t * block, min(high, low + (t + 1) * block)):
            old = values_read[v]
            if settled[v]:
                values_write[v] = old
                active[v] = False
                continue
            accum = _gather_in_edges(gather_call, apply_call, activate_call, combine,
                                     identity, sources, weights, gather_values, attrs,
                                     aggregates, num_vertices, iteration, v, old,
                                     in_offsets[v], in_offsets[v + 1], edge_base, True,
                                     settled, settled_bits)
            part_activated, part_change = _update_and_flag(
                apply_call, activate_call, attrs, aggregates, num_vertices, iteration, v, accum,
                values_read, values_write, active, False, part_activated, part_change)
        change[t] = part_change
        activated[t] = part_activated
    stats[0] += change.sum()
    stats[1] += activated.sum()
    return boundary


#: Vertices a thread takes at a time in :func:`pull_settling_whole`: in one
#: level of a power-law graph the vertices' reads differ by orders of
#: magnitude, so they are dealt in small blocks as threads finish (GAPBS's
#: dynamic schedule of 1,024 vertices in its bottom-up step).  A multiple of
#: 64: a block is whole words of the settled bitmap.
SETTLING_BLOCK = 1024


@numba.njit(nogil=True, parallel=True)
def pull_settling_whole(gather_call, apply_call, activate_call, combine, identity, graph, values,
                        context, active, settling, counters, team, span):
    """:func:`pull_range_settling` over the whole CSC in one launch, its vertices
    dealt in blocks of :data:`SETTLING_BLOCK` as threads finish (``team``
    threads, a shared counter), for a run whose edges are all in memory.

    Beamer's bottom-up step without its copies: whether a vertex is settled
    is read from ``settled_bits`` (:func:`pack_flags` of ``settled`` before
    the call), for it and its in-neighbours.  The vertices are taken 64 at a
    time, a word of the bitmap: only those neither settled nor without
    in-edges (``in_edge_bits``, :func:`pack_flags` of the in-degrees) are
    visited, so a late step, where few vertices are left, costs a pass over
    the words and not over the vertices.  One not settled reads the
    values of its settled in-neighbours until their sum activates it.  One
    with no settled in-neighbour takes nothing (the declaration: an
    in-neighbour not yet active contributes nothing), so its value is not
    even read; a run of a user's program is checked at its end as any with
    early exit.  The values are written in place: the only values read are
    those of vertices settled before the call, which keep theirs, so the
    synchronous run needs no second buffer and no copy of the settled
    vertices' values.  An activated vertex is marked settled and claimed for
    good at once (:func:`mark_settled`; the probes read the bitmap), its
    in-edges added to ``settled_in_edges[0]``, its out-degree to
    ``found_out_edges[0]`` (the next frontier's out-edges, which the
    direction rule reads: no pass over the frontier after), and listed in
    ``found`` (a scratch array of ``num_vertices`` entries) at its block's
    offset.
    ``active``, the engine's flags, is cleared (a vertex not settled is never
    active, so only settled ones lose a flag) and set for the activated ones.

    The groups: ``graph`` is ``(in_offsets, sources, weights)`` (the whole
    CSC), ``context`` what apply reads (``(attrs, aggregates, num_vertices,
    iteration)``), ``settling`` is ``(settled, settled_bits, in_edge_bits,
    claimed, found)`` and ``counters`` ``(stats, settled_in_edges,
    found_out_edges)``.  ``span`` ``(first, end)``: the vertices that may
    have in-edges (a partition's own range; ``(0, num_vertices)`` for the
    whole graph), so that a partition passes over its own share of the
    vertices and flags alone.

    Returns
    -------
    numpy.ndarray of int64
        The activated vertices in increasing order (the next frontier).
    """
    in_offsets, sources, weights = graph
    attrs, aggregates, num_vertices, iteration = context
    settled, settled_bits, in_edge_bits, claimed, found = settling
    stats, settled_in_edges, found_out_edges = counters
    block = SETTLING_BLOCK
    # blocks of whole bitmap words: no word is shared by two blocks
    start = (span[0] >> 6) << 6
    end_vertex = span[1]
    blocks = (end_vertex - start + block - 1) // block
    counts = np.zeros(blocks + 1, np.int64)
    sync = sync_slots(1)
    # each thread's change and settled in-edges, a cache line apart
    partial = np.zeros(team * 8, np.float64)
    marked = np.zeros(team * 8, np.int64)
    out_edges = np.zeros(team * 8, np.int64)
    out_degree = attrs[0]
    for t in numba.prange(team):
        part_change = 0.0
        part_marked = 0
        part_out = 0
        while True:
            b = atomic_add(sync, FIRST_FREE_SLOT, 1)
            if b >= blocks:
                break
            listed = 0
            first = start + b * block
            last = min(end_vertex, first + block)
            # the activity of the last iteration ends (a vertex not settled is never
            # active): one store per flag, not a test per vertex
            for v in range(first, last):
                active[v] = False
            for w in range(first >> 6, (last + 63) >> 6):
                base = w << 6
                width = min(64, end_vertex - base)
                candidates = ~settled_bits[w] & in_edge_bits[w]
                if candidates == np.uint64(0):
                    continue
                for i in range(width):
                    if (candidates >> np.uint64(i)) & np.uint64(1) == 0:
                        continue
                    v = base + i
                    # the first settled in-neighbour: with none, nothing is read or written
                    edge = in_offsets[v]
                    end = in_offsets[v + 1]
                    while edge < end and not _bit_set(settled_bits, sources[edge]):
                        edge += 1
                    if edge == end:
                        continue
                    old = values[v]
                    accum = _gather_in_edges(gather_call, apply_call, activate_call, combine,
                                             identity, sources, weights, values, attrs,
                                             aggregates, num_vertices, iteration, v, old, edge,
                                             end, 0, True, settled, settled_bits)
                    new = apply_call(attrs, aggregates, num_vertices, iteration, v, old, accum)
                    flag = activate_call(new, old)
                    if new != old:
                        values[v] = new
                    part_change += abs(np.float64(new) - np.float64(old))
                    if flag:
                        active[v] = True
                        found[first - start + listed] = v
                        listed += 1
                        settled[v] = True
                        claimed[v] = SETTLED_CLAIM
                        part_marked += in_offsets[v + 1] - in_offsets[v]
                        part_out += out_degree[v]
            counts[b + 1] = listed
        partial[t * 8] = part_change
        marked[t * 8] = part_marked
        out_edges[t * 8] = part_out
    frontier = _concatenate_chunks(found, np.arange(blocks) * block, counts)
    settled_in_edges[0] += marked.sum()
    found_out_edges[0] = out_edges.sum()
    stats[0] += partial.sum()
    stats[1] += frontier.shape[0]
    return frontier


@numba.njit(nogil=True)
def apply_vertices(apply_call, activate_call, context, vertices, accums, values, active, stats):
    """Apply the combined partial sums of vertices split across pages
    (``context``: what apply reads; ``values``: ``(values_read,
    values_write)``)."""
    attrs, aggregates, num_vertices, iteration = context
    values_read, values_write = values
    for i in range(vertices.shape[0]):
        v = vertices[i]
        stats[1], stats[0] = _update_and_flag(
            apply_call, activate_call, attrs, aggregates, num_vertices, iteration, v, accums[i],
            values_read, values_write, active, False, stats[1], stats[0])


@numba.njit(nogil=True, parallel=True)
def pull_fused(source_gather_call, aggregate_tuple, aggregate_fold, aggregate_write,
               apply_call, activate_call, combine, identity, graph, values, context, out,
               schedule, aggregate_identities):
    """A synchronous pull over the whole CSC that also prepares the next one.

    The groups: ``graph`` is ``(in_offsets, sources)``, ``values``
    ``(values_read, values_write, contributions, next_contributions)``,
    ``context`` what apply reads (``(attrs, aggregates, num_vertices,
    iteration)``), ``out`` ``(active, stats)`` and ``schedule``
    ``(part_starts, team)``.

    Each vertex sums ``contributions`` (the source-side gathers of
    :func:`source_contributions`) over its in-edges and is applied; then,
    from its new value, its gather for the next pull goes to
    ``next_contributions`` and its share of the next iteration's aggregates
    to its part's running tuple (``aggregate_tuple(aggregate_identities)``,
    then ``aggregate_fold(values, attrs, num_vertices, iteration, v,
    running, sums)``: min and max held in registers, not stored per vertex;
    written to the part's row by ``aggregate_write(running, out, row)``,
    whose indices are constants: a tuple read at a variable index would live
    in memory, 15% of PageRank's pull on a 4M-vertex grid at 16 threads;
    add aggregates go to the part's exact accumulators ``sums[t]``).  The next pull
    needs neither pass over every vertex: GAPBS's PageRank loop, which
    computes the outgoing contribution where it writes the score.  Parts are
    whole vertices (:func:`balanced_vertex_starts`): no vertex is cut.
    The parts are taken one at a time by the first thread free (an atomic
    counter: OpenMP's ``schedule(dynamic)``, as GAPBS's loop), not handed out
    as one block per thread: with several parts per thread, a thread slowed
    by its share of the memory system or by the machine's other work no
    longer holds up the whole pull.  ``team``: the threads that take them
    (``numba.get_num_threads()`` of the caller; read inside the kernel, it
    would keep numba from caching it).
    apply reads this iteration's ``aggregates`` as a tuple
    (``aggregate_tuple(aggregates)``): constants of the loop, so what apply
    computes from them alone (PageRank's dangling share) is computed once,
    not reloaded from an array the loop's stores might alias.

    ``values_write`` may be ``values_read``: no vertex reads another's value
    here (the gathers come from ``contributions``), so the pull stays
    synchronous written in place, and moves a third fewer value bytes.
    ``active[v]`` is written only where it changes: a run whose vertices all
    stay active (PageRank) reads the flags instead of storing them.

    Returns
    -------
    partial, sums
        Each part's aggregates of the new values, at ``iteration + 1``, as
        :func:`compute_aggregates` returns them (the same bits).
    """
    in_offsets, sources = graph
    values_read, values_write, contributions, next_contributions = values
    attrs, aggregates, num_vertices, iteration = context
    active, stats = out
    part_starts, team = schedule
    parts = part_starts.shape[0] - 1
    count = aggregate_identities.shape[0]
    partial = np.empty((parts, count), np.float64)
    sums = np.zeros((parts, count, WIDTH), np.int64)
    change = np.zeros(parts, np.float64)
    activated = np.zeros(parts, np.int64)
    out_degree = attrs[0]
    current = aggregate_tuple(aggregates)
    next_part = np.zeros(1, np.int64)
    for _member in numba.prange(min(team, parts)):
        t = atomic_add(next_part, 0, 1)
        while t < parts:
            part_change = 0.0
            part_activated = 0
            running = aggregate_tuple(aggregate_identities)
            part_sums = sums[t]
            for v in range(part_starts[t], part_starts[t + 1]):
                accum = identity
                for e in range(in_offsets[v], in_offsets[v + 1]):
                    accum = combine(accum, contributions[sources[e]])
                part_activated, part_change = _update_and_flag(
                    apply_call, activate_call, attrs, current, num_vertices, iteration, v, accum,
                    values_read, values_write, active, True, part_activated, part_change)
                if out_degree[v] > 0:
                    next_contributions[v] = source_gather_call(values_write, attrs, v)
                running = aggregate_fold(values_write, attrs, num_vertices, iteration + 1, v,
                                         running, part_sums)
            aggregate_write(running, partial, t)
            change[t] = part_change
            activated[t] = part_activated
            t = atomic_add(next_part, 0, 1)
    stats[0] += change.sum()
    stats[1] += activated.sum()
    return partial, sums


@numba.njit(nogil=True, parallel=True)
def pull_vertices(gather_call, apply_call, activate_call, combine, identity, listed, edges,
                  values, context, chunks, stats, settling):
    """Gather, apply and activate the listed vertices over their in-edges.

    The groups: ``listed`` is ``(vertices, in_prefix, edge_starts)``,
    ``edges`` ``(sources, weights)``, ``values`` ``(values_read,
    values_write)``, ``context`` what apply reads (``(attrs, aggregates,
    num_vertices, iteration)``) and ``settling`` ``(early_exit, settled,
    claimed, settled_in_edges)``.

    With ``early_exit`` (a program whose values are final once set, see
    :func:`pull_range_settling`; synchronous), a vertex gathers only from
    in-neighbours marked in ``settled`` and stops at the first in-edge after
    which its sum activates it; an activated vertex is marked settled at
    once (``settled``, and ``claimed`` = :data:`SETTLED_CLAIM`), its
    in-edges added to ``settled_in_edges[0]``.  Marked in the step, it is
    read by later vertices of the step at its committed, initial value,
    which contributes nothing.  Otherwise a vertex gathers over all its
    in-edges.

    Work is cut into ``chunks`` runs of about equal in-edge counts
    (``in_prefix`` is :func:`degree_prefix` of ``vertices`` over the CSC).
    The in-edges of ``vertices[i]`` are ``sources[edge_starts[i]:edge_starts[i]
    + in_prefix[i + 1] - in_prefix[i]]``: ``edge_starts`` is
    ``in_offsets[vertices]`` over the whole CSC, or ``in_prefix[:-1]`` over
    the in-edges gathered from pages by :func:`gather_vertex_edges`.

    Returns
    -------
    numpy.ndarray of int64
        The vertices activated, in the order of ``vertices``.
    """
    vertices, in_prefix, edge_starts = listed
    sources, weights = edges
    values_read, values_write = values
    attrs, aggregates, num_vertices, iteration = context
    early_exit, settled, claimed, settled_in_edges = settling
    bounds = _balanced_chunks(in_prefix, chunks)
    activated = np.empty(vertices.shape[0], np.int64)
    counts = np.zeros(chunks + 1, np.int64)
    change = np.zeros(chunks, np.float64)
    marked_edges = np.zeros(chunks, np.int64)
    no_bits = np.empty(0, np.uint64)     # ``settled`` read as bytes
    for c in numba.prange(chunks):
        written = 0
        chunk_change = 0.0
        chunk_marked = 0
        for i in range(bounds[c], bounds[c + 1]):
            v = vertices[i]
            first = edge_starts[i]
            accum = _gather_in_edges(gather_call, apply_call, activate_call, combine, identity,
                                     sources, weights, values_read, attrs, aggregates,
                                     num_vertices, iteration, v, values_read[v], first,
                                     first + in_prefix[i + 1] - in_prefix[i], 0, early_exit,
                                     settled, no_bits)
            flag, delta = _update_vertex(apply_call, activate_call, attrs, aggregates,
                                         num_vertices, iteration, v, accum, values_read,
                                         values_write)
            chunk_change += delta
            if flag:
                activated[bounds[c] + written] = v
                written += 1
                if early_exit and not settled[v]:
                    settled[v] = True
                    claimed[v] = SETTLED_CLAIM
                    chunk_marked += in_prefix[i + 1] - in_prefix[i]
        change[c] = chunk_change
        counts[c + 1] = written
        marked_edges[c] = chunk_marked
    frontier = _concatenate_chunks(activated, bounds[:-1], counts)
    settled_in_edges[0] += marked_edges.sum()
    stats[0] += change.sum()
    stats[1] += frontier.shape[0]
    return frontier
