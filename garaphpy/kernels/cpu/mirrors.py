"""The exchange's messages between partitions, made and read in one pass (Garaph section 2.2's GlobalVertices, spread).

A partition's worker sends each reader the changed vertices it reads, as
positions in the reader's mirror list: a bitmap over that list, one bit a
vertex (numpy's :func:`~numpy.packbits` order, the first position the high
bit of the first byte), or the vertices themselves
(:mod:`garaphpy.distributed.exchange` picks the smaller).  Made with numpy,
each reader's message took a gather of the changed vertices' positions, a
mask, two compressions, a zeroed flag array and its packing: 3.5 ms for
270,000 changed vertices against a mirror list of as many (a BFS level of a
half of kron:20, dev VM), each of which passes allocates.
:func:`mirror_bitmap` makes the bitmap and the list in one pass over the
changed vertices; :func:`bitmap_members` reads a bitmap back;
:func:`same_bits` says whether the changed vertices' values are one value
(a BFS level's), without gathering them.  These run on one thread (a
message is made by the worker's iteration thread and read on its event
loop, neither of which should start a thread team) and release the GIL.
At the next iteration's start the iteration thread writes the pairs
received (:func:`write_received`) and, for a program final once set,
settles their vertices (:func:`settle_received`) on the worker's threads,
where numpy's scatters took one thread each.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def mirror_bitmap(changed, first, positions, bits, listed):
    """The changed vertices a reader reads: sets bit ``positions[v - first]``
    of ``bits`` (zeroed, a byte per 8 positions of the mirror list, the first
    position the high bit) for each ``v`` of ``changed`` that has one
    (>= 0), writes those vertices to ``listed`` in their order, and returns
    how many there are."""
    count = 0
    for i in range(changed.shape[0]):
        v = changed[i]
        p = positions[v - first]
        if p >= 0:
            bits[p >> 3] |= np.uint8(0x80) >> np.uint8(p & 7)
            listed[count] = v
            count += 1
    return count


@numba.njit(nogil=True, cache=True)
def bitmap_members(bits, read_list):
    """``read_list[i]`` for every bit ``i`` set in ``bits`` (numpy's
    :func:`~numpy.packbits` order), in increasing ``i``: what
    ``read_list[np.flatnonzero(np.unpackbits(bits, count=read_list.size))]``
    gives, without the unpacked array."""
    count = 0
    for b in range(bits.shape[0]):
        byte = bits[b]
        while byte:
            byte &= byte - np.uint8(1)
            count += 1
    members = np.empty(count, read_list.dtype)
    size = read_list.shape[0]
    k = 0
    for b in range(bits.shape[0]):
        byte = bits[b]
        if byte == 0:
            continue
        for j in range(8):
            if (byte >> np.uint8(7 - j)) & np.uint8(1):
                i = b * 8 + j
                if i < size:
                    members[k] = read_list[i]
                    k += 1
    return members[:k]


@numba.njit(nogil=True, cache=True)
def same_bits(bits, vertices):
    """Whether ``bits[v]`` (the values' bits, as unsigned integers) is the same
    for every ``v`` of ``vertices`` (True for none or one)."""
    if vertices.shape[0] < 2:
        return True
    first = bits[vertices[0]]
    for i in range(1, vertices.shape[0]):
        if bits[vertices[i]] != first:
            return False
    return True


@numba.njit(nogil=True, parallel=True, cache=True)
def write_received(target, indices, values):
    """``target[indices] = values`` (``values`` one value for every index, or
    one an index; the indices distinct), on the worker's threads: the pairs
    a partition received, written at its next iteration's start."""
    one = values.shape[0] == 1
    for i in numba.prange(indices.shape[0]):
        target[indices[i]] = values[0] if one else values[i]


@numba.njit(nogil=True, parallel=True, cache=True)
def settle_received(vertices, settled, claimed, claim):
    """Mark the (distinct) ``vertices`` settled and claimed for good (``claim``):
    the other partitions' vertices a message says changed, of a program
    final once set."""
    for i in numba.prange(vertices.shape[0]):
        v = vertices[i]
        settled[v] = True
        claimed[v] = claim
