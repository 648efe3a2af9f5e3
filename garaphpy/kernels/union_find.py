"""Connected components by sampled union-find (Afforest), the start of min-label
propagation on the CPU alone (Sutton, Ben-Nun and Barak, "Optimizing
Parallel Graph Connectivity Computation via Subgraph Sampling", IPDPS 2018,
the algorithm of GAPBS's ``cc``).

Label propagation (Garaph section 6's CC) moves a label one edge per
iteration: its first pull alone reads every edge, and a high-diameter graph
takes many more (a grid's labels travel its whole diagonal).  A union-find
over the edges reaches the fixed point in near-linear work: each edge links
the trees of its endpoints, the larger root hooked under the smaller (an
atomic compare-and-swap), and path compression flattens the trees.  Afforest
saves most of the edge reads:

1. every vertex links along its first ``rounds`` out-edges only, and the
   trees are compressed after each round;
2. a sample of the vertices names the most frequent root, the largest
   component in all likelihood;
3. only the vertices outside that component link along their remaining
   out-edges (on a symmetric graph each edge between two components is seen
   from the side outside the largest one), then a last compression.

Roots are the smallest internal ids of their trees, and internal ids
increase with the user's, so the root's user id is the smallest of the
component: the label min-label propagation over user ids converges to.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from llvmlite import ir

from .. import _numba_setup  # noqa: F401  (threading layer first)

#: Vertices sampled to name the largest component (GAPBS's 1024).
SAMPLE_SIZE = 1024

#: Average out-list size in bytes from which :func:`component_roots`' first
#: phase prefetches (:func:`link_rounds_ahead`): a cache line, where the
#: vertices' first out-edges stop sharing lines.
PREFETCH_FROM_BYTES = 64

#: Vertices ahead that :func:`link_rounds_ahead` prefetches the parent of
#: an out-edge's target (and twice as far, the out-edge itself).
PREFETCH_AHEAD = 16

#: Parent array size in bytes from which :func:`component_roots`' first
#: phase over laid-out edges prefetches (:func:`link_sampled_ahead`): where
#: the array no longer sits in the caches (a partition's 1.8 M vertices of
#: kron:22, 14.5 MB: 35.0 -> 29.3 ms, one thread; at 4-5 MB, kron:20, the
#: extra reads cost up to 7%; dev VM, 2026-12-05).
PREFETCH_PARENT_FROM_BYTES = 8 * 2**20

#: Vertices ahead that :func:`link_sampled_ahead` prefetches a target's parent.
PREFETCH_SAMPLED_AHEAD = 32


@intrinsic
def _compare_and_swap(typingctx, array, index, expected, value):
    """Atomically set array[index] = value where it holds ``expected``; whether it did."""
    if not (isinstance(array, types.Array) and array.dtype == types.int64):
        return None

    def codegen(context, builder, signature, arguments):
        array_type, _, expected_type, value_type = signature.args
        data = context.make_array(array_type)(context, builder, arguments[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, data, [arguments[1]])
        held = context.cast(builder, arguments[2], expected_type, types.int64)
        new = context.cast(builder, arguments[3], value_type, types.int64)
        old_and_swapped = builder.cmpxchg(pointer, held, new, "seq_cst", "seq_cst")
        return builder.extract_value(old_and_swapped, 1)

    return types.boolean(array, index, expected, value), codegen


@intrinsic
def _prefetch(typingctx, array, index):
    """Hint the cache line of ``array[index]`` in (no fault, no wait; not
    held back by a compare-and-swap as a load is)."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, arguments):
        array_type = signature.args[0]
        data = context.make_array(array_type)(context, builder, arguments[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, data, [arguments[1]])
        byte_pointer, int32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        function_type = ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32])
        prefetch = cgutils.get_or_insert_function(builder.module, function_type,
                                                  "llvm.prefetch.p0")
        # a read, kept in every cache level, of data
        builder.call(prefetch, [builder.bitcast(pointer, byte_pointer),
                                int32(0), int32(3), int32(1)])
        return context.get_dummy_value()

    return types.none(array, index), codegen


@numba.njit(nogil=True, cache=True)
def _link(u, v, parent, halving):
    """:func:`link`, or :func:`link_halving` where ``halving`` (a constant at
    each caller, so each compiles to its own loop)."""
    p1 = parent[u]
    p2 = parent[v]
    while p1 != p2:
        high = max(p1, p2)
        low = min(p1, p2)
        high_parent = parent[high]
        if high_parent == low:
            return
        if high_parent == high:
            if _compare_and_swap(parent, high, high, low):
                return
            high_parent = parent[high]      # hooked by another thread meanwhile
        grand = parent[high_parent]
        if halving and grand != high_parent:
            parent[high] = grand
        p1 = grand
        p2 = parent[low]


@numba.njit(nogil=True, cache=True)
def link(u, v, parent):
    """Unite the trees of ``u`` and ``v``: the larger root hooked under the smaller
    (Afforest's ``Link``; safe while other threads link and compress)."""
    _link(u, v, parent, False)


@numba.njit(nogil=True, cache=True)
def link_halving(u, v, parent):
    """:func:`link`, halving the path it climbs: where the higher of the two
    is no root, it is pointed at its grandparent as it climbs (a plain
    store: only a root's parent is ever swapped, and a vertex that is no root
    stays none, so a store of an ancestor loses no link).  Without it the
    second of Afforest's first rounds climbs the chains the first round's
    hooks of roots made, unshortened until the next compression (the round
    took 25 ms, twice the first, on a partition's 1.8 M vertices of kron:22;
    13 ms halving).  Path halving in a concurrent union-find: Dhulipala,
    Hong and Shun, "ConnectIt", VLDB 2020."""
    _link(u, v, parent, True)


@numba.njit(nogil=True, parallel=True, cache=True)
def compress(parent):
    """Point every vertex at its tree's root (pointer jumping)."""
    for v in numba.prange(parent.shape[0]):
        while parent[v] != parent[parent[v]]:
            parent[v] = parent[parent[v]]


def _link_rounds_kernel(name: str, ahead: bool, doc: str):
    """The kernel linking every vertex along its out-edges ``first`` ..
    ``first + rounds - 1`` (those it has), compressing after each; with
    ``ahead``, prefetching as :func:`link_rounds_ahead` says.

    One source for both kernels: ``ahead`` is a closure variable, which
    numba freezes as a constant, so each kernel is compiled (and cached)
    with its branch alone and neither pays for the other's.
    """
    def kernel(out_offsets, out_targets, parent, first, rounds):
        n = parent.shape[0]
        last = out_targets.shape[0] - 1
        for r in range(first, first + rounds):
            for u in numba.prange(n):
                if ahead:
                    w = u + 2 * PREFETCH_AHEAD
                    if w < n:
                        _prefetch(out_targets, min(out_offsets[w] + r, last))
                    x = u + PREFETCH_AHEAD
                    if x < n:
                        e = out_offsets[x] + r
                        if e < out_offsets[x + 1]:
                            _prefetch(parent, out_targets[e])
                e = out_offsets[u] + r
                if e < out_offsets[u + 1]:
                    link(u, out_targets[e], parent)
            compress(parent)

    kernel.__name__ = kernel.__qualname__ = name
    kernel.__doc__ = doc
    return numba.njit(nogil=True, parallel=True, cache=True)(kernel)


link_rounds = _link_rounds_kernel("link_rounds", False, """Link every vertex along its
    out-edges ``first`` .. ``first + rounds - 1`` (those it has), compressing after each.""")

link_rounds_ahead = _link_rounds_kernel("link_rounds_ahead", True, """:func:`link_rounds`,
    prefetching the out-edge ``2 * PREFETCH_AHEAD`` vertices ahead and its target's parent
    ``PREFETCH_AHEAD`` ahead.

    Each link's compare-and-swap holds later loads back, so the next
    vertex's out-edge and its target's parent, two cache misses on a graph
    whose out-lists span cache lines, would each be waited for in turn;
    prefetches are not held back and overlap them (rmat:20 symmetric, two
    threads: 56-58 ms -> 39-42 ms; on a grid, whose first out-edges share
    cache lines, the extra work costs 6 ms -> 9 ms, hence
    ``PREFETCH_FROM_BYTES``).
    """)


@numba.njit(nogil=True, parallel=True, cache=True)
def sample_out_edges(out_offsets, out_targets, rounds, sampled):
    """sampled[r, u] = u's out-edge ``r`` (-1 where it has fewer), for r <
    ``rounds``: the edges :func:`link_rounds` reads, side by side."""
    for u in numba.prange(out_offsets.shape[0] - 1):
        for r in range(rounds):
            e = out_offsets[u] + r
            sampled[r, u] = out_targets[e] if e < out_offsets[u + 1] else -1


def _link_sampled_kernel(name: str, ahead: bool, doc: str):
    """The kernel linking every vertex along the edges :func:`sample_out_edges`
    laid out, one round a row, compressing after each (with ``ahead``,
    prefetching as :func:`link_sampled_ahead` says; one source for both, as
    :func:`_link_rounds_kernel`'s)."""
    def kernel(sampled, parent):
        n = parent.shape[0]
        for r in range(sampled.shape[0]):
            for u in numba.prange(n):
                if ahead:
                    x = u + PREFETCH_SAMPLED_AHEAD
                    if x < n and sampled[r, x] >= 0:
                        _prefetch(parent, sampled[r, x])
                v = sampled[r, u]
                if v >= 0:
                    link_halving(u, v, parent)
            compress(parent)

    kernel.__name__ = kernel.__qualname__ = name
    kernel.__doc__ = doc
    return numba.njit(nogil=True, parallel=True, cache=True)(kernel)


link_sampled = _link_sampled_kernel("link_sampled", False, """:func:`link_rounds` from ``0``
    over the edges :func:`sample_out_edges` laid out: each round reads one array in
    order, not one edge a vertex spread over the CSR; its links halve the paths they
    climb (:func:`link_halving`).""")

link_sampled_ahead = _link_sampled_kernel("link_sampled_ahead", True, """:func:`link_sampled`,
    prefetching the parent of the target ``PREFETCH_SAMPLED_AHEAD`` vertices ahead: the
    edges are read in order, but their targets' parents are cache misses where the
    parent array is larger than the caches, each waited for behind the last link's
    compare-and-swap (``PREFETCH_PARENT_FROM_BYTES``).""")


@numba.njit(nogil=True, cache=True)
def most_frequent_root(parent, sample_size):
    """The root held most often among ``sample_size`` evenly spaced vertices."""
    n = parent.shape[0]
    if n == 0:
        return -1
    step = max(1, n // sample_size)
    sample = np.sort(parent[::step].copy())
    best, best_count = sample[0], 0
    run_start = 0
    for i in range(1, sample.shape[0] + 1):
        if i == sample.shape[0] or sample[i] != sample[run_start]:
            if i - run_start > best_count:
                best, best_count = sample[run_start], i - run_start
            run_start = i
    return best


@numba.njit(nogil=True, parallel=True, cache=True)
def link_outside(out_offsets, out_targets, parent, skip_root, first):
    """Link the vertices outside ``skip_root``'s tree along their out-edges
    from ``first`` on, then compress."""
    for u in numba.prange(parent.shape[0]):
        if parent[u] == skip_root:
            continue
        for e in range(out_offsets[u] + first, out_offsets[u + 1]):
            link(u, out_targets[e], parent)
    compress(parent)


@numba.njit(nogil=True, parallel=True, cache=True)
def link_beside(out_offsets, out_targets, parent, inner_root, first):
    """Link every vertex along its out-edges from ``first`` on, but for the
    edges both of whose ends are already in ``inner_root``'s tree (a link
    between them changes nothing), then compress: Afforest's last phase for
    a CSR that need not hold every edge's reverse (:func:`link_outside`
    skips every out-edge of the largest tree, which only the reverse edges
    make safe)."""
    for u in numba.prange(parent.shape[0]):
        inside = parent[u] == inner_root
        for e in range(out_offsets[u] + first, out_offsets[u + 1]):
            v = out_targets[e]
            if inside and parent[v] == inner_root:
                continue
            link(u, v, parent)
    compress(parent)


@numba.njit(nogil=True, cache=True)
def link_pairs(sources, targets, parent):
    """Link ``sources[i]`` with ``targets[i]`` for every i (no compression:
    :func:`compress` after the last): a few links, where a CSR over every
    vertex would cost more."""
    for i in range(sources.shape[0]):
        link(sources[i], targets[i], parent)


@numba.njit(nogil=True, cache=True)
def least_over_sets(parent, values):
    """Each element's least of ``values`` over its set (``parent``
    compressed: every element points at its root)."""
    least = values.copy()
    for v in range(parent.shape[0]):
        root = parent[v]
        if values[v] < least[root]:
            least[root] = values[v]
    for v in range(parent.shape[0]):
        least[v] = least[parent[v]]
    return least


@numba.njit(nogil=True, cache=True)
def lower_labels(labels, vertices, lower, first, end):
    """labels[vertices[i]] = min(itself, lower[i]) for every i; how many of
    the vertices ``first..end-1`` were lowered."""
    lowered = 0
    for i in range(vertices.shape[0]):
        v = vertices[i]
        if lower[i] < labels[v]:
            labels[v] = lower[i]
            if first <= v < end:
                lowered += 1
    return lowered


@numba.njit(nogil=True, parallel=True, cache=True)
def holders_of(listed, numbering, holder_positions, vertices):
    """The holder (a vertex) of each of ``listed``: ``vertices[holder_positions[
    numbering[v]]]``, in one pass (``numbering`` a vertex's position in a
    partition's forest, ``holder_positions`` each position's holder's)."""
    holders = np.empty(listed.shape[0], np.int64)
    for i in numba.prange(listed.shape[0]):
        holders[i] = vertices[holder_positions[numbering[listed[i]]]]
    return holders


@numba.njit(nogil=True, cache=True)
def apart_holders(listed, numbering, holder_positions, vertices, common, positions, others):
    """``(mine, theirs)``: for each of ``listed`` whose holder here
    (:func:`holders_of`) is not its holder in a reader's forest, both;
    the reader's holders given as its message (``common`` everywhere but at
    the increasing ``positions``, which hold ``others``)."""
    mine = np.empty(listed.shape[0], np.int64)
    theirs = np.empty(listed.shape[0], np.int64)
    count = 0
    j = 0
    for i in range(listed.shape[0]):
        other = common
        if j < positions.shape[0] and positions[j] == i:
            other = others[j]
            j += 1
        held = vertices[holder_positions[numbering[listed[i]]]]
        if held != other:
            mine[count] = held
            theirs[count] = other
            count += 1
    return mine[:count], theirs[:count]


@numba.njit(nogil=True, parallel=True, cache=True)
def lower_held_labels(labels, roots, vertices, ids, merged, first, end):
    """labels[vertices[i]] = min(itself, the label of i's tree) for every i,
    where ``roots`` is a forest over positions (each compressed: its root,
    the tree's least position and vertex), a tree's label the user id
    ``ids`` of its root's vertex, or, where a root holds ``-2 - t``, merged
    with other trees, ``merged[t]``; how many of the vertices
    ``first..end-1`` were lowered.  One parallel pass, no array as long as
    the forest made: a partition's merge of its forest with the links of
    its boundaries, where user ids increase with the vertices."""
    lowered = 0
    for i in numba.prange(roots.shape[0]):
        root = roots[i]
        if root >= 0 and roots[root] < 0:
            root = roots[root]
        if root < 0:
            label = merged[-2 - root]
        else:
            label = ids[vertices[root]]
        v = vertices[i]
        if label < labels[v]:
            labels[v] = label
            if first <= v < end:
                lowered += 1
    return lowered


@numba.njit(nogil=True, parallel=True, cache=True)
def write_labels(parent, ids, labels):
    """labels[v] = the user id of v's root; how many labels dropped."""
    dropped = 0
    for v in numba.prange(parent.shape[0]):
        label = ids[parent[v]]
        if label < labels[v]:
            dropped += 1
        labels[v] = label
    return dropped


def sampled_edges(out_offsets: np.ndarray, out_targets: np.ndarray,
                  rounds: int = 2) -> np.ndarray:
    """The first ``rounds`` out-edges of every vertex, one row a round
    (:func:`sample_out_edges`; -1 where a vertex has fewer), for
    :func:`component_roots`' first phase."""
    dtype = out_targets.dtype if out_targets.dtype.kind == "i" else np.int64
    sampled = np.empty((rounds, out_offsets.shape[0] - 1), dtype)
    sample_out_edges(out_offsets, out_targets, rounds, sampled)
    return sampled


def component_roots(out_offsets: np.ndarray, out_targets: np.ndarray, rounds: int = 2,
                    sample_size: int = SAMPLE_SIZE, sampled: np.ndarray | None = None,
                    parent: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Afforest over a symmetric graph's CSR.

    Parameters
    ----------
    out_offsets, out_targets : numpy.ndarray
        The CSR; every edge must have its reverse (a directed graph's
        components would come out wrong).
    rounds : int
        Out-edges per vertex linked before the largest component is named.
    sample_size : int
        Vertices sampled to name it.
    sampled : numpy.ndarray, optional
        The first ``rounds`` out-edges laid out (:func:`sampled_edges`), made
        before where the graph is linked more than once: the first phase
        reads them in order, twice as fast (a partition's 0.5 M vertices of
        rmat:20, one thread: 21 ms -> 10 ms), not one edge a vertex spread
        over the CSR (a cache miss each); its targets' parents are
        prefetched where the parent array is larger than
        ``PREFETCH_PARENT_FROM_BYTES`` (:func:`link_sampled_ahead`).
        Without it, the first phase prefetches where the out-lists average
        a cache line or more (:func:`link_rounds_ahead`).
    parent : numpy.ndarray, optional
        Every vertex its own parent (int64, ``0..n-1``), made before (a
        partition's at set-up): it becomes the roots returned.

    Returns
    -------
    (numpy.ndarray, int)
        The root of every vertex (int64, the smallest internal id of its
        component) and the root skipped in the last phase (-1: none).
    """
    n = out_offsets.shape[0] - 1
    if parent is None:
        parent = np.arange(n, dtype=np.int64)
    if n == 0:
        return parent, -1
    if sampled is None and out_targets.nbytes >= PREFETCH_FROM_BYTES * n:
        link_rounds_ahead(out_offsets, out_targets, parent, 0, rounds)
    elif sampled is None:
        link_rounds(out_offsets, out_targets, parent, 0, rounds)
    elif parent.nbytes >= PREFETCH_PARENT_FROM_BYTES:
        rounds = sampled.shape[0]
        link_sampled_ahead(sampled, parent)
    else:
        rounds = sampled.shape[0]
        link_sampled(sampled, parent)
    largest = most_frequent_root(parent, sample_size)
    link_outside(out_offsets, out_targets, parent, largest, rounds)
    return parent, int(largest)
