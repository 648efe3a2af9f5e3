"""What a pull may skip (Garaph section 4.1, with Beamer's bottom-up step).

Floors: a program declaring ``gather_no_better_than_source`` reads no
in-edge of a vertex whose value is already as good as the best source's
(:data:`~garaphpy.kernels.cpu.common.FLOOR_MIN`, ``FLOOR_MAX``).  Settled
vertices: a program final once set reads nothing for a vertex once active;
the settled flags, their claims and their bitmap are made here.
"""

from __future__ import annotations

import numba
import numpy as np

from .common import FLOOR_MIN, SETTLED_CLAIM, _at_floor


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


#: A multiplier that gathers the low bits of 8 bytes into the top byte: byte j
#: of a word (bits 8j.., little-endian) lands on bit 56 + j of the product.
_GATHER_BYTE_BITS = np.uint64(0x0102040810204080)


@numba.njit(nogil=True, parallel=True, cache=True)
def pack_flags(flags, bits):
    """bits[w] bit i = flags[64 w + i]: a bitmap a probe at a random vertex
    reads 8x less of (GAPBS's bitmap of the frontier in its bottom-up step).

    ``flags`` is a contiguous bool array (bytes 0 or 1): eight of them are
    read as one word and packed by a multiply, without a branch a flag (a
    flag's test and branch, mispredicted at random flags, made the pack of
    kron:20's settled vertices 0.79 ms on one thread against 0.085, dev VM).
    """
    n = flags.shape[0]
    full = n // 64
    words = flags[:full * 64].view(np.uint64)
    for w in numba.prange(bits.shape[0]):
        word = np.uint64(0)
        if w < full:
            for j in range(8):
                eight = words[w * 8 + j] * _GATHER_BYTE_BITS
                word |= (eight >> np.uint64(56)) << np.uint64(8 * j)
        else:
            base = w * 64
            for i in range(n - base):
                word |= np.uint64(flags[base + i]) << np.uint64(i)
        bits[w] = word


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


@numba.njit(nogil=True, parallel=True, cache=True)
def unsettled_in_edges(in_offsets, settled, first, end):
    """The in-edges of the vertices ``first..end-1`` not yet settled (Beamer's
    rule weighs a pull by them)."""
    total = 0
    for v in numba.prange(first, end):
        if not settled[v]:
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
