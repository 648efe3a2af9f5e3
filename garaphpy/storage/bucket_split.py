"""Buckets larger than the memory budget, read in pieces that fit it.

Garaph section 6.5 builds the CSC and the CSR by scanning the input once or
twice; out of core (:mod:`garaphpy.storage.scratch`), the builder spills the
edges into buckets of consecutive destinations (or sources) and sorts each
bucket in memory.  One destination with very many in-edges (a star, a few
hubs, many copies of one edge kept or their real weights summed) makes one
bucket larger than any budget, and merging duplicates while bucketing
cannot shrink it.  Such a bucket is split again by a finer key, the pair

    (key vertex, other vertex)   as   (key - first key) * num_vertices + other,

into sub-buckets of consecutive pair ranges, recursively until each fits
the budget.  Every pair range holds the edges whose sorted order lies
between its neighbours', and equal pairs land in one sub-bucket in the
order they were written, so the pieces, each sorted on its own, follow one
another exactly as the whole bucket sorted at once would: the store is the
one an in-memory build makes.  A range of a single pair (copies of one edge)
cannot be split: its copies are passed on in pieces as they are (kept
duplicates), or merged piece after piece, in their order, by the duplicate
policy (a sum adds its terms in the same order as the in-memory merge).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .. import config
from ..errors import StoreError
from . import _build_kernels as kernels
from .scratch import Buckets

#: Sub-buckets a bucket too large for the budget is split into.
SPLIT_BUCKETS = 1024

_split_names = itertools.count()


@dataclass
class Piece:
    """Edges of a bucket that fit the budget, in the bucket's written order
    within each (key, other) pair, and the key range they lie in.  ``removed``
    counts the duplicates already merged away into them."""

    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray | None
    first_key: int
    end_key: int
    removed: int = 0


@dataclass
class _Split:
    """What every level of one bucket's split shares."""

    buckets: Buckets
    key_column: str        # "dst" or "src": the column the buckets are keyed on
    first_key: int         # first key of the bucket split
    with_weight: bool
    budget_edges: int
    duplicate_policy: str | None    # merge copies of one edge by it (None: keep them)

    @property
    def num_vertices(self) -> int:
        return self.buckets.num_keys

    def keys_other(self, src, dst):
        return (dst, src) if self.key_column == "dst" else (src, dst)

    def pair_keys(self, src, dst, first_pair: int) -> np.ndarray:
        """(key - first key) * num_vertices + other - first_pair, as int64."""
        key, other = self.keys_other(src, dst)
        pairs = key.astype(np.int64)
        pairs -= self.first_key
        pairs *= self.num_vertices
        pairs += other
        pairs -= first_pair
        return pairs

    def piece(self, src, dst, weight, first_pair: int, end_pair: int, removed: int = 0):
        """A :class:`Piece` of edges whose pairs lie in first_pair..end_pair-1 (checked)."""
        self.check_pairs(self.pair_keys(src, dst, first_pair), end_pair - first_pair)
        first_key = self.first_key + first_pair // self.num_vertices
        end_key = self.first_key + (end_pair - 1) // self.num_vertices + 1
        return Piece(src, dst, weight, first_key, end_key, removed)

    def check_pairs(self, pairs: np.ndarray, num_pairs: int) -> None:
        """StoreError unless every pair key lies in 0..num_pairs-1: the ids of
        a scratch file read back are trusted by no kernel."""
        if pairs.size and (int(pairs.min()) < 0 or int(pairs.max()) >= num_pairs):
            raise StoreError(f"{self.buckets.directory}: a scratch file of this build holds "
                             "edges outside its bucket; nothing was stored")


def bucket_pieces(buckets: Buckets, first: int, end: int, with_weight: bool,
                  budget_edges: int, duplicate_policy: str | None = None):
    """The edges of buckets ``first..end-1`` as :class:`Piece` objects of at
    most ``budget_edges`` edges each (one piece when they fit), in their
    sorted order; their files are deleted once read.

    Parameters
    ----------
    buckets : Buckets
        Keyed on vertex ids (``buckets.prefix`` names the key column, "dst" or
        "src").
    first, end : int
        A group of :meth:`Buckets.groups`: only one of its buckets holds edges
        when they exceed the budget.
    with_weight : bool
        Read the weight column.
    budget_edges : int
        Most edges a piece may hold (at least 1).
    duplicate_policy : str or None
        Merge the copies of one edge that outnumber the budget by this
        policy (a name of :data:`kernels.DUPLICATE_POLICIES`); None or
        "keep" passes them on as they are.
    """
    held = int(buckets.counts[first:end].sum())
    if held <= budget_edges:
        lo, hi = buckets.key_range(first, end, buckets.num_keys)
        yield Piece(*buckets.load(first, end, with_weight), lo, hi)
        return
    # a group over the budget is one bucket, after empty ones (Buckets.groups)
    bucket = first + int(np.flatnonzero(buckets.counts[first:end])[0])
    lo, hi = buckets.key_range(bucket, bucket + 1, buckets.num_keys)
    split = _Split(buckets, buckets.prefix, lo, with_weight, max(1, budget_edges),
                   duplicate_policy if duplicate_policy != "keep" else None)
    chunks = buckets.chunks(bucket, with_weight, _chunk_edges(split))
    yield from _pieces_of(split, chunks, held, 0, (hi - lo) * split.num_vertices)


def _chunk_edges(split: _Split) -> int:
    """Edges read at once while splitting: the chunk, its pair keys and its
    counting sort by sub-bucket take about as much as sorting half a budget."""
    return max(1, split.budget_edges // 2)


def _pieces_of(split: _Split, chunks, count: int, first_pair: int, end_pair: int):
    """Pieces of the edges ``chunks`` yields (``count`` of them), whose pairs
    all lie in ``first_pair..end_pair-1`` (checked)."""
    if end_pair - first_pair == 1:
        yield from _copies_of_one_edge(split, chunks, first_pair, count)
        return
    sub = Buckets(split.buckets.directory, f"split{next(_split_names)}",
                  end_pair - first_pair, SPLIT_BUCKETS, split.buckets.vid,
                  split.buckets.wdtype, vertex_bound=split.num_vertices)
    for src, dst, weight in chunks:
        pairs = split.pair_keys(src, dst, first_pair)
        split.check_pairs(pairs, end_pair - first_pair)
        sub.add(pairs, src, dst, weight)
        del pairs, src, dst, weight
    for group_first, group_end in sub.groups(split.budget_edges):
        lo, hi = sub.key_range(group_first, group_end, sub.num_keys)
        held = int(sub.counts[group_first:group_end].sum())
        if held > split.budget_edges:
            # one sub-bucket, after empty ones (Buckets.groups)
            bucket = group_first + int(np.flatnonzero(sub.counts[group_first:group_end])[0])
            lo, hi = sub.key_range(bucket, bucket + 1, sub.num_keys)
            inner = sub.chunks(bucket, split.with_weight, _chunk_edges(split))
            yield from _pieces_of(split, inner, held, first_pair + lo, first_pair + hi)
            continue
        yield split.piece(*sub.load(group_first, group_end, split.with_weight),
                          first_pair + lo, first_pair + hi)


def _copies_of_one_edge(split: _Split, chunks, pair: int, count: int):
    """Copies of a single edge: passed on in pieces, or merged in order."""
    merged = None
    for src, dst, weight in chunks:
        if split.duplicate_policy is None:
            yield split.piece(src, dst, weight, pair, pair + 1)
            continue
        split.check_pairs(split.pair_keys(src, dst, pair), 1)
        if merged is None:
            merged = [src[:1].copy(), dst[:1].copy(), None]
        if weight is not None:
            terms = weight if merged[2] is None else np.concatenate([merged[2], weight])
            merged[2] = _merge_weights(terms, split.duplicate_policy, split.buckets.vid)
        del src, dst, weight
    if merged is not None:
        yield split.piece(*merged, pair, pair + 1, removed=count - 1)


def _merge_weights(weights: np.ndarray, policy: str, vid: np.dtype) -> np.ndarray:
    """The weight the duplicate policy gives copies of one edge of these
    weights, in this order (the kernel that merges them in memory)."""
    offsets = np.array([0, weights.size], np.int64)
    sources = np.zeros(weights.size, vid)
    kept = np.empty(1, np.int64)
    dedup = kernels.dedup_sorted_segments
    if weights.size <= config.INTERPRET_MAX_ITEMS:
        dedup = dedup.py_func
    dedup(offsets, sources, weights, True, kernels.DUPLICATE_POLICIES[policy], kept)
    return weights[:1].copy()
