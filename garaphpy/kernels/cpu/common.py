"""Helpers shared by the CPU kernel families (Garaph section 4).

The atomic claim of a vertex, the update tail every kernel runs after a
vertex's gather (apply, write, activate, change), the floor test, the
bitmap read, the cut of a list's edges into equal chunks and the
concatenation of the chunks' outputs, and the sync slots of the kernels
whose threads are kept for a whole call.

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

from ..atomics import FIRST_FREE_SLOT, atomic_load


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


@numba.njit(nogil=True)
def _update_vertex(apply_call, activate_call, attrs, aggregates, num_vertices, iteration, v,
                   accum, values_read, values_write):
    """Apply v's summed gathers; returns (activated, |new - old|)."""
    old = values_read[v]
    new = apply_call(attrs, aggregates, num_vertices, iteration, v, old, accum)
    values_write[v] = new
    return activate_call(new, old), abs(np.float64(new) - np.float64(old))


# inlined in numba's IR, as the tail of each pull's loop over its vertices
@numba.njit(nogil=True, inline="always")
def _update_and_flag(apply_call, activate_call, attrs, aggregates, num_vertices, iteration, v,
                     accum, values_read, values_write, active, changed_only, activated, change):
    """The update tail of the pulls that flag every vertex they apply:
    :func:`_update_vertex`, then ``active[v]`` = its activation (stored only
    where it changes with ``changed_only``: a run whose vertices all stay
    active reads the flags instead of storing them).  Returns ``activated``
    and ``change`` with v's activation and change added."""
    flag, delta = _update_vertex(apply_call, activate_call, attrs, aggregates, num_vertices,
                                 iteration, v, accum, values_read, values_write)
    if not changed_only or active[v] != flag:
        active[v] = flag
    return activated + flag, change + delta


#: ``floor_mode`` of :func:`pull_range`: values at or below (min) or at or above
#: (max) the floor read no in-edge.
FLOOR_MIN, FLOOR_MAX = 1, 2


@numba.njit(nogil=True, inline="always")
def _at_floor(floor_mode, value, floor):
    return value <= floor if floor_mode == FLOOR_MIN else value >= floor


@numba.njit(nogil=True, inline="always")
def _bit_set(bits, v):
    return (bits[v >> 6] >> np.uint64(v & 63)) & np.uint64(1) != 0


#: The ``claimed`` flag of a settled vertex in a run with early exit: never 0,
#: so the sparse notify (:func:`notify`) never lists it.
SETTLED_CLAIM = 2


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


@numba.njit(nogil=True, inline="always")
def _slot(k):
    return FIRST_FREE_SLOT + 8 * k


@numba.njit(nogil=True, inline="always")
def _team_totals(tally, team, totals):
    """``totals[c]``: column ``c`` of every thread's row of ``tally`` summed (rows
    16 apart; the rows are others' writes, hence the atomic loads)."""
    for c in range(totals.shape[0]):
        total = 0.0
        for other in range(team):
            total += atomic_load(tally, 16 * other + c)
        totals[c] = total
