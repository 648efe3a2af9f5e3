"""CPU kernels: edge-balanced pull over a page, notify, notify-pull (Garaph section 4).

Pull (section 4.1): a page's edges are cut into equal parts, one per thread,
not vertices per thread.  A thread gathers its edges in CSC order into a
local accumulator; a vertex whose in-edges are cut at a part boundary
leaves a *replica* (its partial sum) that is merged with the neighbouring
parts' replicas after the gather, then applied once.  Vertices whose
in-edges continue into another page come back to the caller as partial
sums, combined across pages at the end of the iteration.

Notify-pull (section 4.2): the vertices active in the last iteration mark
their out-neighbours through the CSR (an atomic claim makes each notified
vertex appear once), and only those pull over their in-edges.

Source-side precompute: a gather that depends on the source vertex alone
(PageRank's rank(u) / outdeg(u)) can be computed once per vertex at the
start of a synchronous pull (:func:`source_contributions`); the edge loop
then reads one array at the source instead of the value and the degree.
:func:`pull_range` takes the gather as an accessor plus the array it reads,
so the same kernel runs either way: ``gather_call`` over the values, or
:func:`read_source_contribution` over the contributions.

The program's functions arrive as numba dispatchers with the fixed
signatures of :mod:`garaphpy.kernels.cpu_program`.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .. import _numba_setup  # noqa: F401  (threading layer first)
from .atomics import (FIRST_FREE_SLOT, atomic_add, atomic_load, atomic_min, atomic_store,
                      compare_and_swap, sync_slots, team_barrier, team_rendezvous)


@intrinsic
def _claim(typingctx, flags, index):
    """Atomically set flags[index] = 1 and return its previous value (uint8)."""
    if not (isinstance(flags, types.Array) and flags.dtype == types.uint8):
        return None

    def codegen(context, builder, signature, arguments):
        array_type = signature.args[0]
        array = context.make_array(array_type)(context, builder, arguments[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, array, [arguments[1]])
        return builder.atomic_rmw("xchg", pointer, ir.Constant(ir.IntType(8), 1), "monotonic")

    return types.uint8(flags, index), codegen


@numba.njit(nogil=True, cache=True)
def _vertex_of_edge(in_offsets, first, end, edge):
    """Smallest v in first..end-1 with in_offsets[v + 1] > edge."""
    lo, hi = first, end - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if in_offsets[mid + 1] > edge:
            hi = mid
        else:
            lo = mid + 1
    return lo


@numba.njit(nogil=True, parallel=True)
def init_values(init_call, attrs, num_vertices, values):
    """values[v] = init(v) for every vertex."""
    for v in numba.prange(num_vertices):
        values[v] = init_call(attrs, num_vertices, v)


@numba.njit(nogil=True, parallel=True)
def compute_aggregates(aggregate_call, values, attrs, num_vertices, iteration, identities,
                       part_starts):
    """Reduce every aggregate over all vertices: one row of partials per part
    (vertices ``part_starts[t]..part_starts[t+1]-1``, folded in order), merged
    by the caller.  Given the parts of :func:`pull_fused`, the rows are those
    that pull folds as it writes the values, bit for bit: an iteration's
    aggregates are the same whichever kernel made them (a resumed run's
    first, or a pull's that follows a notify-pull)."""
    count = identities.shape[0]
    parts = part_starts.shape[0] - 1
    # rows padded past a cache line: the thread on a part updates its row per vertex
    partial = np.empty((parts, count + 8), np.float64)
    for t in range(parts):
        # element by element: a slice assignment compiles numba's shape-mismatch
        # error message, 1.8 s of a cold run
        for i in range(count):
            partial[t, i] = identities[i]
    for t in numba.prange(parts):
        for v in range(part_starts[t], part_starts[t + 1]):
            aggregate_call(values, attrs, num_vertices, iteration, v, partial[t])
    return partial[:, :count]


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


@numba.njit(nogil=True)
def read_source_contribution(contributions, weights, attrs, u, v, e):
    """The gather accessor over precomputed contributions (``gather_call``'s signature)."""
    return contributions[u]


@numba.njit(nogil=True)
def _update_vertex(apply_call, activate_call, attrs, aggregates, num_vertices, iteration, v,
                   accum, values_read, values_write):
    """Apply v's summed gathers; returns (activated, |new - old|)."""
    old = values_read[v]
    new = apply_call(attrs, aggregates, num_vertices, iteration, v, old, accum)
    values_write[v] = new
    return activate_call(new, old), abs(np.float64(new) - np.float64(old))


#: ``floor_mode`` of :func:`pull_range`: values at or below (min) or at or above
#: (max) the floor read no in-edge.
FLOOR_MIN, FLOOR_MAX = 1, 2


@numba.njit(nogil=True, inline="always")
def _at_floor(floor_mode, value, floor):
    return value <= floor if floor_mode == FLOOR_MIN else value >= floor


@numba.njit(nogil=True, cache=True)
def above_floor(vertices, values, floor_mode, floor):
    """The listed vertices whose value is not at the floor (:func:`pull_range`'s
    ``floor_mode``), in their order."""
    kept = np.empty(vertices.shape[0], np.int64)
    count = 0
    for i in range(vertices.shape[0]):
        v = vertices[i]
        if not _at_floor(floor_mode, values[v], floor[0]):
            kept[count] = v
            count += 1
    return kept[:count]


@numba.njit(nogil=True, parallel=True, cache=True)
def all_at_floor(values, in_degree, floor_mode, floor):
    """Whether every vertex with in-edges is at the floor (``floor[0]``, as
    :func:`pull_range` tests it): a pull would then read no in-edge.  Each
    part stops at its first vertex above the floor."""
    n = values.shape[0]
    chunks = min(256, n // 16384 + 1)
    size = (n + chunks - 1) // chunks
    above = np.zeros(chunks, np.bool_)
    for c in numba.prange(chunks):
        for v in range(c * size, min(n, (c + 1) * size)):
            if in_degree[v] > 0 and not _at_floor(floor_mode, values[v], floor[0]):
                above[c] = True
                break
    return not above.any()


@numba.njit(nogil=True, parallel=True, cache=True)
def best_source_value(values, out_degree, floor_mode, out):
    """Whether a vertex has out-edges; if so, ``out[0]`` is the least
    (``FLOOR_MIN``) or the greatest (``FLOOR_MAX``) value of such a vertex."""
    chunks = min(256, values.shape[0] // 16384 + 1)
    size = (values.shape[0] + chunks - 1) // chunks
    best = np.empty(chunks, values.dtype)
    found = np.zeros(chunks, np.bool_)
    for c in numba.prange(chunks):
        have = False
        value = values[0]
        for v in range(c * size, min(values.shape[0], (c + 1) * size)):
            if out_degree[v] > 0:
                if not have or (values[v] < value if floor_mode == FLOOR_MIN
                                else values[v] > value):
                    value = values[v]
                    have = True
        best[c] = value
        found[c] = have
    have = False
    for c in range(chunks):
        if found[c] and (not have or (best[c] < out[0] if floor_mode == FLOOR_MIN
                                      else best[c] > out[0])):
            out[0] = best[c]
            have = True
    return have


@numba.njit(nogil=True, parallel=True)
def pull_range(gather_call, apply_call, activate_call, combine, aggregate_tuple, identity,
               in_offsets, sources, weights, edge_base, edge_begin, edge_end, first_vertex,
               end_vertex, values_read, values_write, gather_values, attrs, aggregates,
               num_vertices, iteration, active, parts, boundary_vertex, boundary_accum, stats,
               floor_mode, floor):
    """Pull over the edges edge_begin..edge_end-1 of a page (Garaph section 4.1).

    Parameters
    ----------
    gather_call : numba dispatcher
        ``gather_call(gather_values, weights, attrs, u, v, e)``: the
        program's gather, or :func:`read_source_contribution`.
    in_offsets : int64 array
        Global CSC index.
    sources, weights : arrays
        The page's sources and edge values; edge e is at ``e - edge_base``.
    first_vertex, end_vertex : int
        The page's vertex range (a vertex split across pages is in both).
    values_read, values_write : arrays
        Committed values and where new values go (the same array when
        asynchronous).
    gather_values : array
        What ``gather_call`` reads: ``values_read``, or the contributions
        of :func:`source_contributions`.
    active : bool array
        active[v] = activate(new, old) for every vertex applied here.
    parts : int
        Equal edge parts, one per task.
    boundary_vertex, boundary_accum : arrays of at least 2
        Receive the partial sums of vertices whose in-edges continue
        outside the page.
    stats : float64 array of 2
        stats[0] += L1 change, stats[1] += vertices activated.
    floor_mode, floor : int, array of 1
        :data:`FLOOR_MIN` or :data:`FLOOR_MAX`: a vertex whose value is at
        or below ``floor[0]`` (or at or above) reads no in-edge (a program
        declaring ``gather_no_better_than_source``, ``floor`` the best value
        of a vertex with out-edges: :func:`best_source_value`); 0: none.

    apply reads ``aggregates`` as a tuple (``aggregate_tuple(aggregates)``),
    constants of the loop, as in :func:`pull_fused`.

    Returns
    -------
    int
        Number of boundary partial sums written.
    """
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
            if floor_mode != 0 and _at_floor(floor_mode, values_read[v], floor[0]):
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
                flag, delta = _update_vertex(apply_call, activate_call, attrs, current,
                                             num_vertices, iteration, v, accum, values_read,
                                             values_write)
                active[v] = flag
                part_activated += flag
                part_change += delta
        # one write per part: per-vertex writes to neighbouring slots false-share
        change[t] = part_change
        activated[t] = part_activated
        if t < parts - 1:
            w = starts[t + 1]
            if w < end_vertex and in_offsets[w] < e1:
                accum = identity
                w_end = min(in_offsets[w + 1], e1)
                if floor_mode != 0 and _at_floor(floor_mode, values_read[w], floor[0]):
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
                boundary = _finish_cut_vertex(
                    apply_call, activate_call, attrs, aggregates, num_vertices, iteration,
                    in_offsets, edge_begin, edge_end, current, current_accum, values_read,
                    values_write, active, boundary_vertex, boundary_accum, boundary, change,
                    activated)
            current = w
            current_accum = record_accum[t, r]
    if current >= 0:
        boundary = _finish_cut_vertex(
            apply_call, activate_call, attrs, aggregates, num_vertices, iteration, in_offsets,
            edge_begin, edge_end, current, current_accum, values_read, values_write, active,
            boundary_vertex, boundary_accum, boundary, change, activated)
    stats[0] += change.sum()
    stats[1] += activated.sum()
    return boundary


@numba.njit(nogil=True)
def _finish_cut_vertex(apply_call, activate_call, attrs, aggregates, num_vertices, iteration,
                       in_offsets, edge_begin, edge_end, v, accum, values_read, values_write,
                       active, boundary_vertex, boundary_accum, boundary, change, activated):
    """Apply a vertex whose replicas are merged, or hand it back if it leaves the page."""
    if in_offsets[v] >= edge_begin and in_offsets[v + 1] <= edge_end:
        flag, delta = _update_vertex(apply_call, activate_call, attrs, aggregates,
                                     num_vertices, iteration, v, accum, values_read,
                                     values_write)
        active[v] = flag
        activated[0] += flag
        change[0] += delta
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
    empty, else from ``settled``."""
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
def pull_range_settling(gather_call, apply_call, activate_call, combine, identity,
                        in_offsets, sources, weights, edge_base, edge_begin, edge_end,
                        first_vertex, end_vertex, values_read, values_write, gather_values, attrs,
                        aggregates, num_vertices, iteration, active, parts, boundary_vertex,
                        boundary_accum, stats, settled, settled_bits):
    """:func:`pull_range` for a program whose values are final once set (issue 19).

    Such a program (``VertexProgram.final_once_set``, synchronous runs)
    declares that a vertex once active never changes its value again, and
    that a vertex not yet active takes its final value from its first
    settled in-neighbour (one not yet active contributes nothing).  So a
    vertex marked in ``settled`` keeps its value without reading an edge,
    any other reads the values of settled in-neighbours only (a byte per
    edge otherwise) and stops at the first in-edge after which its sum
    activates it: Beamer's bottom-up step, for any such program.
    ``settled_bits`` is ``settled`` packed (:func:`pack_flags`), read for the
    in-neighbours; empty: ``settled`` is read.
    Work is cut into ``parts`` runs of about equal vertex counts (the edges a
    vertex reads are not known in advance).  The arguments are
    :func:`pull_range`'s, ``gather_values`` being ``values_read``; a vertex
    whose in-edges leave the page hands back its partial sum, as there.

    Returns
    -------
    int
        Number of boundary partial sums written.
    """
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
            flag, delta = _update_vertex(apply_call, activate_call, attrs, aggregates,
                                         num_vertices, iteration, v, accum, values_read,
                                         values_write)
            active[v] = flag
            part_activated += flag
            part_change += delta
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
def pull_settling_whole(gather_call, apply_call, activate_call, combine, identity,
                        in_offsets, sources, weights, values, attrs, aggregates, num_vertices,
                        iteration, active, settled, settled_bits, in_edge_bits, claimed, found,
                        stats, settled_in_edges, found_out_edges, team):
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

    Returns
    -------
    numpy.ndarray of int64
        The activated vertices in increasing order (the next frontier).
    """
    block = SETTLING_BLOCK
    blocks = (num_vertices + block - 1) // block
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
            first = b * block
            last = min(num_vertices, first + block)
            # the activity of the last iteration ends (a vertex not settled is never
            # active): one store per flag, not a test per vertex
            for v in range(first, last):
                active[v] = False
            for w in range(first >> 6, (last + 63) >> 6):
                base = w << 6
                width = min(64, num_vertices - base)
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
                        found[first + listed] = v
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


@numba.njit(nogil=True, inline="always")
def _bit_set(bits, v):
    return (bits[v >> 6] >> np.uint64(v & 63)) & np.uint64(1) != 0


@numba.njit(nogil=True, parallel=True, cache=True)
def pack_flags(flags, bits):
    """bits[w] bit i = flags[64 w + i]: a bitmap a probe at a random vertex
    reads 8x less of (GAPBS's bitmap of the frontier in its bottom-up step)."""
    n = flags.shape[0]
    for w in numba.prange(bits.shape[0]):
        word = np.uint64(0)
        base = w * 64
        for i in range(min(64, n - base)):
            if flags[base + i]:
                word |= np.uint64(1) << np.uint64(i)
        bits[w] = word


#: The ``claimed`` flag of a settled vertex in a run with early exit: never 0,
#: so the sparse notify (:func:`notify`) never lists it.
SETTLED_CLAIM = 2


@numba.njit(nogil=True, parallel=True, cache=True)
def mark_settled(vertices, settled, claimed, in_offsets):
    """Mark the listed (distinct) vertices settled, and claimed for good (2: the
    sparse notify passes them over); returns the in-edges of those that were
    not yet settled."""
    total = 0
    for i in numba.prange(vertices.shape[0]):
        v = vertices[i]
        claimed[v] = SETTLED_CLAIM
        if not settled[v]:
            settled[v] = True
            total += in_offsets[v + 1] - in_offsets[v]
    return total


@numba.njit(nogil=True, inline="always")
def _settle(done, v, settled, claimed, in_offsets):
    """Vertex v settled (claimed for good) or not (its claim cleared); returns
    its in-edges when it is not settled, else 0."""
    settled[v] = done
    if done:
        claimed[v] = SETTLED_CLAIM
        return 0
    claimed[v] = 0
    return in_offsets[v + 1] - in_offsets[v]


@numba.njit(nogil=True, parallel=True, cache=True)
def settled_from_values(values, initial, is_source, everything, settled, claimed, in_offsets):
    """settled = the vertices whose value left ``initial``, the sources, or all
    of them (``everything``), each settled one claimed for good and the others'
    claims cleared; returns the in-edges of the vertices not settled.  The
    frontier is added after (:func:`mark_settled`)."""
    unsettled = 0
    for v in numba.prange(values.shape[0]):
        done = everything or is_source[v] or values[v] != initial[v]
        unsettled += _settle(done, v, settled, claimed, in_offsets)
    return unsettled


@numba.njit(nogil=True, parallel=True, cache=True)
def settled_from_value(values, initial_value, is_source, everything, settled, claimed,
                       in_offsets):
    """:func:`settled_from_values` where every vertex but the sources starts
    from one value, ``initial_value`` (BFS): the initial values are not
    read, a third fewer bytes than the pass over both arrays."""
    unsettled = 0
    for v in numba.prange(values.shape[0]):
        done = everything or is_source[v] or values[v] != initial_value
        unsettled += _settle(done, v, settled, claimed, in_offsets)
    return unsettled


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


@numba.njit(nogil=True)
def apply_vertices(apply_call, activate_call, attrs, aggregates, num_vertices, iteration,
                   vertices, accums, values_read, values_write, active, stats):
    """Apply the combined partial sums of vertices split across pages."""
    for i in range(vertices.shape[0]):
        v = vertices[i]
        flag, delta = _update_vertex(apply_call, activate_call, attrs, aggregates,
                                     num_vertices, iteration, v, accums[i], values_read,
                                     values_write)
        active[v] = flag
        stats[1] += flag
        stats[0] += delta


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
def no_aggregates_fold(values, attrs, num_vertices, iteration, v, running):
    """``aggregate_fold`` of a program without aggregates (:func:`pull_fused`)."""
    return running


@numba.njit(nogil=True)
def no_aggregates_write(running, out, row):
    """``aggregate_write`` of a program without aggregates (:func:`pull_fused`)."""
    return 0


@numba.njit(nogil=True, parallel=True)
def pull_fused(source_gather_call, aggregate_tuple, aggregate_fold, aggregate_write,
               apply_call, activate_call, combine, identity, in_offsets, sources, values_read,
               values_write, contributions, next_contributions, attrs, aggregates,
               num_vertices, iteration, active, part_starts, aggregate_identities, stats,
               team):
    """A synchronous pull over the whole CSC that also prepares the next one.

    Each vertex sums ``contributions`` (the source-side gathers of
    :func:`source_contributions`) over its in-edges and is applied; then,
    from its new value, its gather for the next pull goes to
    ``next_contributions`` and its share of the next iteration's aggregates
    to its part's running tuple (``aggregate_tuple(aggregate_identities)``,
    then ``aggregate_fold(values, attrs, num_vertices, iteration, v,
    running)``: held in registers, not stored per vertex; written to the
    part's row by ``aggregate_write(running, out, row)``, whose indices are
    constants: a tuple read at a variable index would live in memory, 15%
    of PageRank's pull on a 4M-vertex grid at 16 threads).  The next pull
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
    float64 array (parts, aggregates)
        Each part's aggregates of the new values, at ``iteration + 1``
        (merged by the caller with each aggregate's monoid).
    """
    parts = part_starts.shape[0] - 1
    count = aggregate_identities.shape[0]
    partial = np.empty((parts, count), np.float64)
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
            for v in range(part_starts[t], part_starts[t + 1]):
                accum = identity
                for e in range(in_offsets[v], in_offsets[v + 1]):
                    accum = combine(accum, contributions[sources[e]])
                flag, delta = _update_vertex(apply_call, activate_call, attrs, current,
                                             num_vertices, iteration, v, accum, values_read,
                                             values_write)
                if active[v] != flag:
                    active[v] = flag
                part_activated += flag
                part_change += delta
                if out_degree[v] > 0:
                    next_contributions[v] = source_gather_call(values_write, attrs, v)
                running = aggregate_fold(values_write, attrs, num_vertices, iteration + 1, v,
                                         running)
            aggregate_write(running, partial, t)
            change[t] = part_change
            activated[t] = part_activated
            t = atomic_add(next_part, 0, 1)
    stats[0] += change.sum()
    stats[1] += activated.sum()
    return partial


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


def active_vertex_ids(active: np.ndarray, threads: int) -> np.ndarray:
    """The vertices whose flag is set, in increasing order: :func:`frontier_of`
    on several threads, numpy's on one (nothing to compile for a run that
    cannot use the parallel compaction)."""
    if threads <= 1:
        return np.flatnonzero(active).astype(np.int64, copy=False)
    return frontier_of(active, threads)


@numba.njit(nogil=True, cache=True)
def _balanced_chunks(prefix, chunks):
    """Cut items 0..len(prefix)-2 into ``chunks`` runs of about equal prefix weight."""
    items = prefix.shape[0] - 1
    bounds = np.empty(chunks + 1, np.int64)
    bounds[0] = 0
    total = prefix[items]
    item = 0
    for c in range(1, chunks):
        target = (total * c) // chunks
        while item < items and prefix[item] < target:
            item += 1
        bounds[c] = item
    bounds[chunks] = items
    return bounds


@numba.njit(nogil=True, cache=True)
def _edge_chunk(prefix, chunks, c):
    """Chunk ``c`` of ``chunks`` equal cuts of the edges that ``prefix`` counts
    (a vertex's edges may be cut between chunks: a hub's are shared by all).

    Returns ``(lo, hi, first)``: the chunk's edge positions ``[lo, hi)`` in
    the prefix's numbering, and the first item holding any of them (walk
    items from ``first`` while ``prefix[item] < hi``, each over edges
    ``max(lo, prefix[item])`` to ``min(hi, prefix[item + 1])``).
    """
    items = prefix.shape[0] - 1
    total = prefix[items]
    lo = total * c // chunks
    hi = total * (c + 1) // chunks
    first = np.searchsorted(prefix, lo, side="right") - 1
    return lo, hi, max(first, 0)


@numba.njit(nogil=True, inline="always")
def _item_edges(prefix, offsets, vertex, item, lo, hi):
    """The edges ``[begin, end)`` of ``offsets`` that item ``item`` (vertex
    ``vertex``) has in the chunk ``[lo, hi)`` of :func:`_edge_chunk`."""
    skip = offsets[vertex] - prefix[item]
    return max(lo, prefix[item]) + skip, min(hi, prefix[item + 1]) + skip


@numba.njit(nogil=True, cache=True)
def _edge_chunk_starts(prefix, chunks):
    """``lo`` of every :func:`_edge_chunk`: where each chunk's output starts."""
    total = prefix[prefix.shape[0] - 1]
    starts = np.empty(chunks, np.int64)
    for c in range(chunks):
        starts[c] = total * c // chunks
    return starts


#: :func:`_concatenate_chunks` copies at most this many items on its own
#: thread: a parallel launch costs more than the copy (a sparse step's lists).
SERIAL_CONCATENATE_MAX = 1 << 14


@numba.njit(nogil=True, parallel=True, cache=True)
def _concatenate_chunks(buffer, chunk_base, counts):
    """Concatenate buffer[chunk_base[c] : chunk_base[c] + counts[c + 1]] over chunks c."""
    chunks = chunk_base.shape[0]
    starts = np.empty(chunks + 1, np.int64)
    starts[0] = 0
    for c in range(chunks):
        starts[c + 1] = starts[c] + counts[c + 1]
    out = np.empty(starts[chunks], np.int64)
    if starts[chunks] <= SERIAL_CONCATENATE_MAX:
        for c in range(chunks):
            for j in range(counts[c + 1]):
                out[starts[c] + j] = buffer[chunk_base[c] + j]
        return out
    for c in numba.prange(chunks):
        for j in range(counts[c + 1]):
            out[starts[c] + j] = buffer[chunk_base[c] + j]
    return out


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


def frontier_degree_prefix(vertices: np.ndarray, offsets: np.ndarray,
                           threads: int) -> np.ndarray:
    """:func:`degree_prefix`, on ``threads`` threads for a list of at least
    :data:`PARALLEL_PREFIX_MIN` vertices (a dense frontier's prefix is an
    O(|V|) pass that one thread makes the iteration's longest part)."""
    if threads > 1 and vertices.shape[0] >= PARALLEL_PREFIX_MIN:
        return _degree_prefix_blocks(vertices, offsets, threads * 4)
    return degree_prefix(vertices, offsets)


@numba.njit(nogil=True, parallel=True, cache=True)
def notify(frontier, prefix, out_offsets, out_targets, claimed, chunks):
    """Out-neighbours of the frontier, each once (Garaph's notify step).

    ``prefix`` is :func:`degree_prefix` of the frontier over the CSR;
    ``claimed`` is a uint8 flag per vertex, 0 on entry for every vertex that
    may be listed (a settled vertex of a run with early exit holds
    :data:`SETTLED_CLAIM` and is passed over); the caller resets the flags
    of the returned vertices afterwards.  The frontier's out-edges are cut
    in ``chunks`` equal runs (:func:`_edge_chunk`), so a hub's are shared.
    """
    items = frontier.shape[0]
    candidates = np.empty(prefix[items], np.int64)
    counts = np.zeros(chunks + 1, np.int64)
    for c in numba.prange(chunks):
        lo, hi, first = _edge_chunk(prefix, chunks, c)
        written = 0
        for i in range(first, items):
            if prefix[i] >= hi:
                break
            u = frontier[i]
            begin, end = _item_edges(prefix, out_offsets, u, i, lo, hi)
            for e in range(begin, end):
                w = out_targets[e]
                if claimed[w] == 0 and _claim(claimed, w) == 0:
                    candidates[lo + written] = w
                    written += 1
        counts[c + 1] = written
    return _concatenate_chunks(candidates, _edge_chunk_starts(prefix, chunks), counts)


@numba.njit(nogil=True, parallel=True, cache=True)
def notify_dense(frontier, prefix, out_offsets, out_targets, claimed, chunks, threads):
    """Notify for large frontiers: mark the flags, then list them in vertex order.

    Listing by a pass over the flags costs O(|V|) but yields the notified
    vertices sorted, so the pull that follows walks the CSC in order, and
    needs no candidate array of f |E| entries.  The flags are cleared.
    """
    items = frontier.shape[0]
    for c in numba.prange(chunks):
        lo, hi, first = _edge_chunk(prefix, chunks, c)
        for i in range(first, items):
            if prefix[i] >= hi:
                break
            u = frontier[i]
            begin, end = _item_edges(prefix, out_offsets, u, i, lo, hi)
            for e in range(begin, end):
                w = out_targets[e]
                if claimed[w] == 0:
                    claimed[w] = 1
    notified = frontier_of(claimed, threads)
    reset_flags(notified, claimed)
    return notified


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


@numba.njit(nogil=True, parallel=True)
def pull_vertices(gather_call, apply_call, activate_call, combine, identity, vertices,
                  in_prefix, edge_starts, sources, weights, values_read, values_write, attrs,
                  aggregates, num_vertices, iteration, chunks, stats, early_exit, settled,
                  claimed, settled_in_edges):
    """Gather, apply and activate the listed vertices over their in-edges.

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


@numba.njit(nogil=True, parallel=True)
def push_settling(gather_call, apply_call, activate_call, combine, identity, frontier, prefix,
                  out_offsets, out_targets, weights, values_read, values_write, attrs,
                  aggregates, num_vertices, iteration, chunks, stats, settled, claimed,
                  in_offsets, settled_in_edges):
    """Beamer's top-down step for a program whose values are final once set
    (:func:`pull_range_settling`; synchronous, its gather reading no edge
    value): each out-edge of a settled frontier vertex ``u`` to a vertex not
    yet settled or claimed claims it (``claimed``, atomically: one edge per
    vertex) and gives it its value from ``u`` alone, which the declaration
    makes final.  The work is the frontier's out-edges, where a notify and a
    pull would also read the new vertices' in-edges until a settled one.

    An activated vertex is marked settled at once (``settled``, ``claimed`` =
    :data:`SETTLED_CLAIM`), its in-edges added to ``settled_in_edges[0]``
    (unless ``in_offsets`` is empty: the caller counts them); one written but
    not activated gives its claim back.  ``prefix`` is :func:`degree_prefix`
    of the frontier over the CSR; its out-edges are cut in ``chunks`` equal
    runs (:func:`_edge_chunk`): a hub's no longer fall to one thread.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray) of int64
        The vertices written (the synchronous run commits them) and those
        activated, each in the order of the frontier's edges.
    """
    items = frontier.shape[0]
    written = np.empty(prefix[items], np.int64)
    activated = np.empty(prefix[items], np.int64)
    written_counts = np.zeros(chunks + 1, np.int64)
    activated_counts = np.zeros(chunks + 1, np.int64)
    change = np.zeros(chunks, np.float64)
    marked_edges = np.zeros(chunks, np.int64)
    counts_in_edges = in_offsets.shape[0] > 0
    for c in numba.prange(chunks):
        base, hi, first = _edge_chunk(prefix, chunks, c)
        wrote = 0
        activations = 0
        chunk_change = 0.0
        chunk_marked = 0
        for i in range(first, items):
            if prefix[i] >= hi:
                break
            u = frontier[i]
            if not settled[u]:
                continue
            begin, end = _item_edges(prefix, out_offsets, u, i, base, hi)
            for e in range(begin, end):
                v = out_targets[e]
                if claimed[v] != 0 or _claim(claimed, v) != 0:
                    continue
                accum = combine(identity, gather_call(values_read, weights, attrs, u, v, 0))
                flag, delta = _update_vertex(apply_call, activate_call, attrs, aggregates,
                                             num_vertices, iteration, v, accum, values_read,
                                             values_write)
                chunk_change += delta
                written[base + wrote] = v
                wrote += 1
                if flag:
                    activated[base + activations] = v
                    activations += 1
                    settled[v] = True
                    claimed[v] = SETTLED_CLAIM
                    if counts_in_edges:
                        chunk_marked += in_offsets[v + 1] - in_offsets[v]
        written_counts[c + 1] = wrote
        activated_counts[c + 1] = activations
        change[c] = chunk_change
        marked_edges[c] = chunk_marked
    chunk_base = _edge_chunk_starts(prefix, chunks)
    written_vertices = _concatenate_chunks(written, chunk_base, written_counts)
    # a chunk activates only vertices it wrote: equal totals, equal lists
    if activated_counts.sum() == written_vertices.shape[0]:  # BFS: no claim to give back
        frontier_out = written_vertices
    else:
        frontier_out = _concatenate_chunks(activated, chunk_base, activated_counts)
        for i in numba.prange(written_vertices.shape[0]):
            v = written_vertices[i]
            if not settled[v]:
                claimed[v] = 0
    settled_in_edges[0] += marked_edges.sum()
    stats[0] += change.sum()
    stats[1] += frontier_out.shape[0]
    return written_vertices, frontier_out


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


@numba.njit(nogil=True)
def _sparse_step(gather_call, apply_call, activate_call, combine, identity, current, prefix,
                 out_offsets, out_targets, in_offsets, sources, weights, values_read,
                 values_write, synchronous, attrs, aggregates, num_vertices, iteration,
                 serial_edges, dense_factor, claimed, chunks, threads, early_exit, settled,
                 unsettled_edges, stats, marked):
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

    Returns
    -------
    (following, notified, edges, serial, change)
        The vertices activated, how many were notified, their in-edges, whether
        the gather ran on this thread, and the step's summed change.
    """
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
                                  notified, in_prefix, edge_starts, sources, weights,
                                  values_read, values_write, attrs, aggregates,
                                  num_vertices, iteration, chunks, stats, early_exit,
                                  settled, claimed, marked)
        unsettled_edges[0] -= marked[0]
        change = stats[0]
        if synchronous:
            commit_vertices(notified, values_write, values_read)
    return following, count, edges, serial, change


@numba.njit(nogil=True)
def _settle_step(gather_call, apply_call, activate_call, combine, identity, current, edges,
                 out_offsets, out_targets, weights, values_read, values_write, synchronous,
                 attrs, aggregates, num_vertices, iteration, settled, claimed, in_offsets,
                 unsettled_edges):
    """:func:`push_settling` on this thread, for a step of
    :func:`sparse_iterations` small enough (no claim needs an atomic; an
    empty ``in_offsets``: the caller counts the settled vertices' in-edges);
    ``edges`` is the frontier's out-edges summed.

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


@numba.njit(nogil=True)
def _push_step(gather_call, apply_call, activate_call, current, prefix, out_offsets,
               out_targets, out_weights, values, attrs, aggregates, num_vertices, iteration,
               claimed):
    """One push step of :func:`priority_iterations`, on this thread: each
    out-edge u -> v of the frontier ``current`` applies its gather to v's
    value at once (``values`` in place; ``out_weights``: the edge values in
    the out-edges' order).  For a program declaring ``apply_keeps_best`` the
    value then is the notify-pull's, without reading the in-edges of the
    vertices reached.

    Returns
    -------
    (following, touched, edges, change)
        The vertices activated (each once), how many vertices the edges
        reached, the out-edges pushed, and the step's summed change.
    """
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


#: Columns of :func:`sparse_iterations`'s per-iteration counters ("serial": 1
#: when the step's gather ran on the calling thread alone).
SPARSE_COUNTERS = ("active_vertices", "active_out_edges", "updated_vertices",
                   "edges_processed", "activated", "serial", "unsettled_in_edges")


@numba.njit(nogil=True)
def sparse_iterations(gather_call, apply_call, activate_call, combine, identity, frontier,
                      out_offsets, out_targets, in_offsets, sources, weights, values_read,
                      values_write, synchronous, attrs, aggregates, num_vertices, num_edges,
                      first_iteration, max_steps, serial_edges, direction_threshold,
                      dense_factor, tolerance, claimed, chunks, threads, counters, changes,
                      early_exit, settled, unsettled_edges, settling_pull_factor,
                      settling_push, degrees_match):
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

    Returns
    -------
    frontier : int64 array
        The frontier after the last step taken (``frontier`` itself when no
        step was taken).
    steps : int
        Steps taken; row ``s`` of ``counters`` holds step ``s``'s
        :data:`SPARSE_COUNTERS` and ``changes[s]`` its summed change.
    """
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
                    active_edges, out_offsets, out_targets, weights, values_read,
                    values_write, synchronous, attrs, aggregates, num_vertices, iteration,
                    settled, claimed, mark_offsets, unsettled_edges)
            else:
                if prefix.shape[0] != size + 1:
                    prefix = degree_prefix(current, out_offsets)
                stats[:] = 0.0
                marked[0] = 0
                written, following = push_settling(
                    gather_call, apply_call, activate_call, combine, identity, current, prefix,
                    out_offsets, out_targets, weights, values_read, values_write, attrs,
                    aggregates, num_vertices, iteration, chunks, stats, settled, claimed,
                    mark_offsets, marked)
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
                out_offsets, out_targets, in_offsets, sources, weights, values_read,
                values_write, synchronous, attrs, aggregates, num_vertices, iteration,
                serial_edges, dense_factor, claimed, chunks, threads, early_exit, settled,
                unsettled_edges, stats, marked)
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
                        out_offsets, out_targets, in_offsets, sources, weights, values,
                        attrs, aggregates, num_vertices, num_edges, first_iteration, max_steps,
                        serial_edges, direction_threshold, dense_factor, claimed,
                        chunks, threads, counters, changes, bucket_width, larger_first,
                        pending, push, out_weights):
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

    Returns
    -------
    frontier : int64 array
        The vertices still pending, every bucket's (the engine's frontier).
    steps : int
        Steps taken, their :data:`SPARSE_COUNTERS` in ``counters`` and their
        summed changes in ``changes``, as :func:`sparse_iterations`.
    """
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
                gather_call, apply_call, activate_call, current, prefix, out_offsets,
                out_targets, out_weights, values, attrs, aggregates, num_vertices,
                first_iteration + steps, claimed)
            serial = True
        else:
            following, count, edges, serial, change = _sparse_step(
                gather_call, apply_call, activate_call, combine, identity, current, prefix,
                out_offsets, out_targets, in_offsets, sources, weights, values, values, False,
                attrs, aggregates, num_vertices, first_iteration + steps, serial_edges,
                dense_factor, claimed, chunks, threads, False, settled, unsettled, stats,
                marked)
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


@numba.njit(nogil=True, inline="always")
def _slot(k):
    return FIRST_FREE_SLOT + 8 * k


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


@numba.njit(nogil=True, inline="always")
def _team_totals(tally, team, totals):
    """``totals[c]``: column ``c`` of every thread's row of ``tally`` summed (rows
    16 apart; the rows are others' writes, hence the atomic loads)."""
    for c in range(totals.shape[0]):
        total = 0.0
        for other in range(team):
            total += atomic_load(tally, 16 * other + c)
        totals[c] = total


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


@numba.njit(nogil=True, parallel=True)
def priority_push_rounds(gather_call, apply_call, activate_call, frontier, out_offsets,
                         out_targets, out_weights, values, attrs, aggregates, num_vertices,
                         first_iteration, max_steps, counters, changes, bucket_width,
                         larger_first, team):
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
    """
    bins = PUSH_ROUND_BINS
    if max_steps < 1 or frontier.shape[0] == 0:
        return frontier.copy(), 0
    base = np.int64(4_000_000_000_000_000_000)
    for i in range(frontier.shape[0]):
        base = min(base, _bucket_key(values[frontier[i]], bucket_width, larger_first))
    shared_vertex = np.empty(max(num_vertices, 1), np.int64)
    shared_value = np.empty(max(num_vertices, 1), values.dtype)
    size = 0
    for i in range(frontier.shape[0]):
        v = frontier[i]
        if _bucket_key(values[v], bucket_width, larger_first) == base:
            shared_vertex[size] = v
            shared_value[size] = values[v]
            size += 1
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
                for i in range(frontier.shape[0]):
                    v = frontier[i]
                    relative = _bucket_key(values[v], bucket_width, larger_first) - base
                    if relative != 0:
                        entry_vertex, entry_value, entry_next = _link_entry(
                            v, values[v], min(relative, bins - 1), heads, counts, occupied,
                            entry_vertex, entry_value, entry_next, free)
            round_ = 0
            while True:
                parity = round_ & 1
                current = atomic_load(sync, _slot(_BIN + parity))
                size = atomic_load(sync, _slot(_TAIL + parity))
                iteration = first_iteration + round_
                row[0] = 0.0
                row[1] = 0.0
                row[2] = 0.0
                row[3] = 0.0
                chunk = max(1, min(PUSH_ROUND_CHUNK, size // (4 * team)))
                while True:
                    start = atomic_add(sync, _slot(_WORK + parity), chunk)
                    if start >= size:
                        break
                    for i in range(start, min(start + chunk, size)):
                        u = shared_vertex[i]
                        if values[u] == shared_value[i]:
                            entry_vertex, entry_value, entry_next = _push_relax(
                                gather_call, apply_call, activate_call, u, out_offsets,
                                out_targets, out_weights, values, attrs, aggregates,
                                num_vertices, iteration, base, current, bucket_width,
                                larger_first, heads, counts, occupied, entry_vertex,
                                entry_value, entry_next, free, row)
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
                                gather_call, apply_call, activate_call, u, out_offsets,
                                out_targets, out_weights, values, attrs, aggregates,
                                num_vertices, iteration, base, current, bucket_width,
                                larger_first, heads, counts, occupied, entry_vertex,
                                entry_value, entry_next, free, row)
                        entry = following
                own_lowest = _lowest_occupied(occupied, current)
                if own_lowest >= 0:
                    atomic_min(sync, _slot(_BIN + 1 - parity), own_lowest)
                team_barrier(sync, team)
                lowest = atomic_load(sync, _slot(_BIN + 1 - parity))
                done = lowest >= bins - 1 or round_ + 1 >= max_steps
                if t == 0:      # the round's counts: the other threads need none of them
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
                # the next frontier: the live entries of the lowest bucket, or of every
                # bucket when the call ends
                first_bin, end_bin = (current, bins) if done else (lowest, lowest + 1)
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
                if done:
                    break
                team_barrier(sync, team)
                round_ += 1
    if not met.all():
        return frontier, -1
    left = sync[_slot(_TAIL + sync[_slot(_LAST_PARITY)])]
    return shared_vertex[:left].copy(), sync[_slot(_ROUNDS)]


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


@numba.njit(nogil=True, parallel=True)
def settle_push_rounds(gather_call, apply_call, activate_call, combine, identity, frontier,
                       out_offsets, out_targets, in_offsets, weights, values_read,
                       values_write, synchronous, attrs, aggregates, num_vertices,
                       first_iteration, max_steps, tolerance, settled, claimed,
                       unsettled_edges, settling_pull_factor, degrees_match, serial_edges,
                       counters, changes, team):
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
    """
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
                filled = 0
                if edges <= serial_edges:
                    if t == 0:      # levels this small, one after another on this thread
                        done = False
                        while not done:
                            unsettled_at_start = unsettled[0]
                            for i in range(head, end):
                                u = queue[i]
                                if settled[u]:
                                    filled = _settle_from(
                                        gather_call, apply_call, activate_call, combine,
                                        identity, u, out_offsets, out_targets, weights,
                                        values_read, values_write, synchronous, attrs,
                                        aggregates, num_vertices, first_iteration + step,
                                        settled, claimed, in_offsets, degrees_match, False,
                                        buffer, filled, queue, returned, sync, row)
                            _flush_queue(buffer, filled, queue, sync)
                            filled = 0
                            _give_claims_back(returned, claimed, sync)
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
                size = end - head
                chunk = max(1, min(PUSH_ROUND_CHUNK, size // (4 * team)))
                first = min(size // (2 * team), 4 * PUSH_ROUND_CHUNK)
                start, stop = head + t * first, head + (t + 1) * first
                dealt = head + team * first
                while True:
                    for i in range(start, stop):
                        u = queue[i]
                        if settled[u]:
                            filled = _settle_from(
                                gather_call, apply_call, activate_call, combine, identity, u,
                                out_offsets, out_targets, weights, values_read, values_write,
                                synchronous, attrs, aggregates, num_vertices,
                                first_iteration + step, settled, claimed, in_offsets,
                                degrees_match, True, buffer, filled, queue, returned, sync,
                                row)
                    start = dealt + atomic_add(sync, _slot(_TAKEN), chunk)
                    if start >= end:
                        break
                    stop = min(start + chunk, end)
                _flush_queue(buffer, filled, queue, sync)
                team_barrier(sync, team)
                if t == 0:
                    _give_claims_back(returned, claimed, sync)
                    _team_totals(tally, team, totals)
                    written, next_edges, settled_in_edges, change = (
                        totals[0], totals[2], totals[3], totals[4])
                    unsettled_at_start = unsettled[0]
                    unsettled[0] -= np.int64(settled_in_edges)
                    tail = atomic_load(sync, _slot(_QUEUE_TAIL))
                    _level_counters(counters, changes, step, size, edges, written, tail - end,
                                    0, unsettled_at_start, change)
                    sync[_slot(_TAKEN)] = 0
                    _write_level(sync, following, end, tail, np.int64(next_edges), step + 1,
                                 tail == end or step + 1 >= max_steps or change < tolerance
                                 or np.int64(next_edges) * settling_pull_factor
                                 > unsettled[0] + num_vertices)
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
