"""Notify (Garaph section 4.2) and the top-down step.

The vertices active in the last iteration mark their out-neighbours
through the CSR (an atomic claim makes each notified vertex appear once),
and only those pull over their in-edges
(:func:`~garaphpy.kernels.cpu.pull.pull_vertices`).  For a program final
once set, :func:`push_settling` gives the reached vertices their values
from the frontier alone (Beamer's top-down step).
"""

from __future__ import annotations

import numba
import numpy as np

from .common import (SETTLED_CLAIM, _claim, _concatenate_chunks, _edge_chunk, _edge_chunk_starts,
                     _item_edges, _update_vertex)
from .frontier import frontier_of, reset_flags


@numba.njit(nogil=True, inline="always")
def _mark_chunk(frontier, prefix, out_offsets, out_targets, flags, chunks, c):
    """Flag (1 where 0) the targets of chunk ``c`` of the frontier's out-edges
    (:func:`_edge_chunk`); a flag already set, such as a settled vertex's
    :data:`SETTLED_CLAIM`, stays."""
    lo, hi, first = _edge_chunk(prefix, chunks, c)
    for i in range(first, frontier.shape[0]):
        if prefix[i] >= hi:
            break
        begin, end = _item_edges(prefix, out_offsets, frontier[i], i, lo, hi)
        for e in range(begin, end):
            w = out_targets[e]
            if flags[w] == 0:
                flags[w] = 1


@numba.njit(nogil=True, parallel=True, cache=True)
def mark_out_neighbours(frontier, prefix, out_offsets, out_targets, reached, chunks):
    """``reached[w]`` set for every out-neighbour ``w`` of the frontier: the
    vertices a notify-pull of it would pull, as flags (no list, no claim:
    every write is the same value).  ``prefix`` and ``chunks`` as in
    :func:`notify`."""
    for c in numba.prange(chunks):
        _mark_chunk(frontier, prefix, out_offsets, out_targets, reached, chunks, c)


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
    for c in numba.prange(chunks):
        _mark_chunk(frontier, prefix, out_offsets, out_targets, claimed, chunks, c)
    notified = frontier_of(claimed, threads)
    reset_flags(notified, claimed)
    return notified


@numba.njit(nogil=True, parallel=True)
def push_settling(gather_call, apply_call, activate_call, combine, identity, listed, graph,
                  values, context, chunks, stats, settling):
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

    The groups (:mod:`~garaphpy.kernels.cpu.arguments`): ``listed`` is
    ``(frontier, prefix)``, ``graph`` ``(out_offsets, out_targets, weights,
    in_offsets)``, ``values`` ``(values_read, values_write)``, ``context``
    what apply reads (``(attrs, aggregates, num_vertices, iteration)``) and
    ``settling`` ``(settled, claimed, settled_in_edges)``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray) of int64
        The vertices written (the synchronous run commits them) and those
        activated, each in the order of the frontier's edges.
    """
    frontier, prefix = listed
    out_offsets, out_targets, weights, in_offsets = graph
    values_read, values_write = values
    attrs, aggregates, num_vertices, iteration = context
    settled, claimed, settled_in_edges = settling
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
