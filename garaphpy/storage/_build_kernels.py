"""Numba kernels of the store builder: counting sorts, cleaning, CSR, IdxOff.

All kernels are O(edges) passes (stable counting sorts rather than
comparison sorts), which is what lets preprocessing reach tens of millions
of edges per second (Garaph section 6.5 calls its preprocessing
"light-weight": two scans of the input to build the CSC and the CSR).
"""

from __future__ import annotations

import numba
import numpy as np

from .. import _numba_setup  # noqa: F401  (threading layer first)
from .. import options

#: Duplicate-edge policies, as codes for the kernels (garaphpy.options declares the names).
DUPLICATE_POLICIES = {name: code for code, name in enumerate(options.DUPLICATE_POLICIES)}


@numba.njit(cache=True, nogil=True)
def key_offsets(keys, key_base, key_range):
    """Exclusive prefix sum of the key histogram: offsets[k] .. offsets[k+1]."""
    offsets = np.zeros(key_range + 1, np.int64)
    for i in range(keys.shape[0]):
        offsets[keys[i] - key_base + 1] += 1
    for k in range(key_range):
        offsets[k + 1] += offsets[k]
    return offsets


@numba.njit(cache=True, nogil=True)
def stable_scatter(keys, key_base, offsets, values, out):
    """out[pos] = values[i], placing i after every earlier item of the same key."""
    cursor = offsets[:-1].copy()
    for i in range(keys.shape[0]):
        k = keys[i] - key_base
        out[cursor[k]] = values[i]
        cursor[k] += 1


def counting_sort(keys: np.ndarray, key_base: int, key_range: int, *payloads,
                  include_keys: bool = True):
    """Stable sort of ``payloads`` (and ``keys``) by ``keys``.

    Parameters
    ----------
    keys : numpy.ndarray of integers
        Sort keys, all in ``key_base .. key_base + key_range - 1``.
    key_base, key_range : int
        The key interval.
    *payloads : numpy.ndarray
        Arrays of the same length as ``keys``, permuted alongside.
    include_keys : bool
        Also return the sorted keys (first).

    Returns
    -------
    offsets : numpy.ndarray of int64, shape (key_range + 1,)
        Start of each key in the sorted order.
    sorted_keys, *sorted_payloads : numpy.ndarray
        New arrays, in sorted order (``sorted_keys`` only with include_keys).
    """
    offsets = key_offsets(keys, key_base, key_range)
    results = []
    for values in ((keys,) if include_keys else ()) + payloads:
        out = np.empty_like(values)
        stable_scatter(keys, key_base, offsets, values, out)
        results.append(out)
    return (offsets, *results)


@numba.njit(cache=True, nogil=True)
def fill_idxoff(in_offsets, first_vertices, num_vertices, edge_begins, edge_ends,
                page_edge_begin, idxoff):
    """IdxOff of every edge of a page: destination minus the shard's first vertex."""
    for shard in range(first_vertices.shape[0]):
        first = first_vertices[shard]
        lo = edge_begins[shard]
        hi = edge_ends[shard]
        for vertex in range(first, first + num_vertices[shard]):
            begin = max(in_offsets[vertex], lo)
            end = min(in_offsets[vertex + 1], hi)
            for e in range(begin, end):
                idxoff[e - page_edge_begin] = vertex - first


@numba.njit(cache=True, nogil=True)
def mark_present(ids, present):
    """present[x] = True for every x in ids."""
    for i in range(ids.shape[0]):
        present[ids[i]] = True


@numba.njit(cache=True, nogil=True)
def id_range(src, dst):
    """(lowest, highest) id of two non-empty id arrays of one length, in one pass."""
    low = high = src[0]
    for i in range(src.shape[0]):
        a = src[i]
        b = dst[i]
        if a < low:
            low = a
        if a > high:
            high = a
        if b < low:
            low = b
        if b > high:
            high = b
    return low, high


@numba.njit(cache=True, nogil=True)
def map_dense_ids(raw, table, out):
    """out[i] = table[raw[i]]: renumber ids through a lookup table."""
    for i in range(raw.shape[0]):
        out[i] = table[raw[i]]


@numba.njit(cache=True, nogil=True)
def bucket_of(keys, bucket_width, out):
    """out[i] = keys[i] // bucket_width."""
    for i in range(keys.shape[0]):
        out[i] = keys[i] // bucket_width


# ---------------------------------------------------------------------------
# Parallel stable sort by an integer key, in two cache-friendly levels: a
# scatter into about 1024 buckets of the key's high bits (per-thread
# histograms keep it stable), then a counting sort of each bucket by the low
# bits, buckets in parallel.  Produces the permutation and the key offsets.

#: log2 of the number of first-level buckets.
_BUCKET_BITS = 10


@numba.njit(cache=True, nogil=True, parallel=True)
def sort_by_key(keys, key_base, key_range, values, out, key_scratch, value_scratch, threads):
    """Stable sort of ``values`` by ``keys`` into ``out``; returns key offsets.

    Parameters
    ----------
    keys : integer array
        All in ``key_base .. key_base + key_range - 1``.  Not modified.
    values : array of len(keys)
        The payload (source ids, or item indices to gather several payloads).
    out : array like ``values``
        Receives the payload in key order.  May be ``values`` itself: the
        first level reads every value before the second writes any.
    key_scratch, value_scratch : arrays of len(keys)
        Work space of the keys' and values' dtypes.
    threads : int
        Parallel parts of the first level.

    Returns
    -------
    offsets : int64 array of key_range + 1
        Items of key k are ``out[offsets[k]:offsets[k+1]]``.
    """
    n = keys.shape[0]
    key_bits = 1
    while (1 << key_bits) < key_range:
        key_bits += 1
    shift = max(0, key_bits - _BUCKET_BITS)
    num_buckets = ((max(key_range, 1) - 1) >> shift) + 1
    block = (n + threads - 1) // threads
    histogram = np.zeros((threads, num_buckets), np.int64)
    for t in numba.prange(threads):
        for i in range(t * block, min(n, (t + 1) * block)):
            histogram[t, (keys[i] - key_base) >> shift] += 1
    bucket_start = np.zeros(num_buckets + 1, np.int64)
    cursor = np.empty((threads, num_buckets), np.int64)
    position = 0
    for b in range(num_buckets):
        bucket_start[b] = position
        for t in range(threads):
            cursor[t, b] = position
            position += histogram[t, b]
    bucket_start[num_buckets] = position
    for t in numba.prange(threads):
        for i in range(t * block, min(n, (t + 1) * block)):
            key = keys[i] - key_base
            b = key >> shift
            key_scratch[cursor[t, b]] = key
            value_scratch[cursor[t, b]] = values[i]
            cursor[t, b] += 1
    offsets = np.empty(key_range + 1, np.int64)
    offsets[key_range] = n
    local_range = 1 << shift
    mask = local_range - 1
    for b in numba.prange(num_buckets):
        lo = bucket_start[b]
        hi = bucket_start[b + 1]
        first_key = b << shift
        keys_here = min(local_range, key_range - first_key)
        counts = np.zeros(keys_here + 1, np.int64)
        for j in range(lo, hi):
            counts[(key_scratch[j] & mask) + 1] += 1
        counts[0] = lo
        for k in range(keys_here):
            counts[k + 1] += counts[k]
        for k in range(keys_here):
            offsets[first_key + k] = counts[k]
        for j in range(lo, hi):
            k = key_scratch[j] & mask
            out[counts[k]] = value_scratch[j]
            counts[k] += 1
    return offsets


def sort_by_key_numpy(keys, key_base, key_range, values):
    """:func:`sort_by_key` in numpy, for small inputs (no compilation): sorts
    ``values`` in place by ``keys`` (stably) and returns the key offsets."""
    values[:] = values[np.argsort(keys, kind="stable")]
    offsets = np.zeros(key_range + 1, np.int64)
    np.cumsum(np.bincount(keys.astype(np.int64) - key_base, minlength=key_range),
              out=offsets[1:])
    return offsets


def expand_offsets_numpy(offsets, first_key, out):
    """:func:`expand_offsets` in numpy, for small inputs (no compilation)."""
    keys = np.arange(first_key, first_key + offsets.shape[0] - 1, dtype=np.int64)
    out[:] = np.repeat(keys, np.diff(offsets))


@numba.njit(cache=True, nogil=True, parallel=True)
def gather(values, permutation, out):
    """out[i] = values[permutation[i]], in parallel."""
    for i in numba.prange(out.shape[0]):
        out[i] = values[permutation[i]]


@numba.njit(cache=True, nogil=True, parallel=True)
def expand_offsets(offsets, first_key, out):
    """out[e] = first_key + k for every e in offsets[k]..offsets[k+1]-1."""
    for k in numba.prange(offsets.shape[0] - 1):
        for e in range(offsets[k], offsets[k + 1]):
            out[e] = first_key + k


@numba.njit(cache=True, nogil=True, parallel=True)
def dedup_sorted_segments(offsets, src, weight, has_weight, policy, kept):
    """Merge runs of equal sources inside every key's (already sorted) segment.

    ``kept[k]`` receives the number of items of key k that remain; they are
    the first ``kept[k]`` items of its segment.  ``policy`` is a code of
    :data:`DUPLICATE_POLICIES` other than keep.
    """
    for k in numba.prange(offsets.shape[0] - 1):
        lo = offsets[k]
        hi = offsets[k + 1]
        if hi <= lo:
            kept[k] = 0
            continue
        write = lo
        for read in range(lo + 1, hi):
            if src[read] == src[write]:
                if has_weight:
                    if policy == 2:
                        if weight[read] < weight[write]:
                            weight[write] = weight[read]
                    elif policy == 3:
                        if weight[read] > weight[write]:
                            weight[write] = weight[read]
                    elif policy == 4:
                        weight[write] += weight[read]
                continue
            write += 1
            src[write] = src[read]
            if has_weight:
                weight[write] = weight[read]
        kept[k] = write + 1 - lo


@numba.njit(cache=True, nogil=True, parallel=True)
def compact_segments(offsets, kept, new_offsets, values, out):
    """Copy the kept prefix of every segment to its place in ``out``."""
    for k in numba.prange(offsets.shape[0] - 1):
        source = offsets[k]
        target = new_offsets[k]
        for j in range(kept[k]):
            out[target + j] = values[source + j]


@numba.njit(cache=True, nogil=True)
def first_asymmetric_weight(offsets, sources, weights):
    """The first edge, in CSC order, whose weight differs from its reverse's, or -1.

    For a CSC whose every vertex's in-neighbours are its out-neighbours
    (sorted sources): the k-th copy of v among u's sources (edge v -> u) is
    paired with the k-th copy of u among v's sources (edge u -> v), found by
    a binary search.
    """
    for u in range(offsets.shape[0] - 1):
        e = offsets[u]
        end = offsets[u + 1]
        while e < end:
            v = sources[e]
            run_end = e + 1
            while run_end < end and sources[run_end] == v:
                run_end += 1
            lo = offsets[v]
            hi = offsets[v + 1]
            while lo < hi:
                middle = (lo + hi) // 2
                if sources[middle] < u:
                    lo = middle + 1
                else:
                    hi = middle
            for k in range(run_end - e):
                if lo + k >= offsets[v + 1] or sources[lo + k] != u \
                        or weights[lo + k] != weights[e + k]:
                    return e + k
            e = run_end
    return -1
