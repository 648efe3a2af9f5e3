"""Exact sums of float64 terms, the same bits in any order (Garaph section 2.3's aggregates).

An ``add`` aggregate (PageRank's dangling mass) is a sum over every vertex,
folded by parts: the pull's parts on the CPU, whose count follows the
threads, and the partitions of a run over Dask workers.  A float sum
depends on that grouping in its last bits, and a last bit can decide a
rounding downstream: PageRank's float32 contributions near a rounding tie
round the other way, and the run's values drift apart by 1e-8 over ten
iterations.  Each part therefore folds its terms into a *long accumulator*
(Kulisch's; in the integer form of Neal, "Fast exact summation using small
and large superaccumulators", 2015): every finite float64 is an integer
times 2^-1074, so the terms are added as integers into 32-bit limbs held
in int64, which leaves 31 bits for carries.  Integer sums do not depend on
their order; an accumulator is rounded to a float64 once, at the end, from
its canonical form (:func:`normalize`).  The result is within one unit in
the last place of the true sum, and the same whatever the parts, the
threads or the partitions.

An accumulator is one int64 row of :data:`WIDTH`: :data:`LIMBS` limbs (limb
``i`` weighs ``2 ** (32 * i - 1074)``), the terms added since the last
normalization (:data:`COUNT`) and the infinities and NaNs seen
(:data:`FLAGS`), which IEEE addition gives whatever the order.  Kernels
keep one row per part and per aggregate (``accumulators[part, aggregate]``),
merged by :func:`merge_rows`.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ...monoids import MONOIDS

#: Limbs of 32 bits: a term's lowest bit sits at position 0 (2^-1074) to
#: 2045, its 53 bits reach 2098; two limbs more hold the carries of any count.
LIMBS = 68
#: The terms added since the last :func:`normalize`.
COUNT = LIMBS
#: Bits of the infinities and NaNs added (:data:`POSITIVE_INFINITY`...).
FLAGS = LIMBS + 1
#: One accumulator's int64 entries.
WIDTH = LIMBS + 2
POSITIVE_INFINITY, NEGATIVE_INFINITY, NOT_A_NUMBER = 1, 2, 4
#: Terms an accumulator takes between normalizations: each adds below 2^33
#: to a limb, which then stays below 2^63.
TERMS_BEFORE_NORMALIZING = 1 << 29
_LOW_32 = (1 << 32) - 1
_FRACTION = (1 << 52) - 1


@numba.njit(nogil=True, inline="always")
def add_term(accumulators, row, x):
    """Add float64 ``x`` to accumulator ``accumulators[row]`` exactly."""
    if x == 0.0:
        return
    bits = np.float64(x).view(np.int64)
    field = (bits >> 52) & 0x7FF
    fraction = bits & _FRACTION
    if field == 0x7FF:
        if fraction != 0:
            accumulators[row, FLAGS] |= NOT_A_NUMBER
        elif bits < 0:
            accumulators[row, FLAGS] |= NEGATIVE_INFINITY
        else:
            accumulators[row, FLAGS] |= POSITIVE_INFINITY
        return
    position = 0                      # subnormal: fraction * 2^-1074
    if field != 0:
        fraction |= 1 << 52
        position = field - 1
    limb = position >> 5
    shift = position & 31
    low = (fraction & _LOW_32) << shift
    high = (fraction >> 32) << shift
    first = low & _LOW_32
    second = (low >> 32) + (high & _LOW_32)
    third = high >> 32
    if bits < 0:
        accumulators[row, limb] -= first
        accumulators[row, limb + 1] -= second
        accumulators[row, limb + 2] -= third
    else:
        accumulators[row, limb] += first
        accumulators[row, limb + 1] += second
        accumulators[row, limb + 2] += third
    accumulators[row, COUNT] += 1
    if accumulators[row, COUNT] >= TERMS_BEFORE_NORMALIZING:
        _normalize_row(accumulators, row)


@numba.njit(nogil=True)
def _normalize_row(accumulators, row):
    for i in range(LIMBS - 1):
        carry = accumulators[row, i] >> 32
        accumulators[row, i] -= carry << 32
        accumulators[row, i + 1] += carry
    accumulators[row, COUNT] = 0


@numba.njit(nogil=True, cache=True)
def normalize(accumulator):
    """Carry ``accumulator`` (one row) into its canonical form, in place:
    every limb in ``[0, 2^32)`` but the last, which holds the sign; one form
    per exact sum."""
    _normalize_row(accumulator.reshape(1, WIDTH), 0)


@numba.njit(nogil=True, cache=True)
def merge_rows(rows):
    """The sum of accumulators ``rows`` (2-D, one per row), normalized."""
    total = np.zeros(WIDTH, np.int64)
    scratch = np.empty((1, WIDTH), np.int64)
    for r in range(rows.shape[0]):
        scratch[0, :] = rows[r, :]
        _normalize_row(scratch, 0)
        for i in range(LIMBS):
            total[i] += scratch[0, i]
        total[FLAGS] |= rows[r, FLAGS]
    normalize(total)
    return total


@numba.njit(nogil=True, cache=True)
def value(accumulator):
    """The float64 nearest (within one unit in the last place) to the sum
    ``accumulator`` holds; IEEE's infinity or NaN where it took one."""
    flags = accumulator[FLAGS]
    if flags & NOT_A_NUMBER or (flags & POSITIVE_INFINITY and flags & NEGATIVE_INFINITY):
        return np.nan
    if flags & POSITIVE_INFINITY:
        return np.inf
    if flags & NEGATIVE_INFINITY:
        return -np.inf
    canonical = accumulator.copy()
    normalize(canonical)
    sign = 1.0
    if canonical[LIMBS - 1] < 0:
        sign = -1.0
        for i in range(LIMBS):
            canonical[i] = -canonical[i]
        normalize(canonical)
    total = 0.0
    for i in range(LIMBS):          # lowest first: each limb rounds at most once
        if canonical[i] != 0:
            total += math.ldexp(np.float64(canonical[i]), 32 * i - 1074)
    return sign * total


def exact_sum(terms) -> float:
    """The sum of float64 ``terms``, as :func:`value` rounds it (for tests
    and for a share made by another processor)."""
    accumulators = np.zeros((1, WIDTH), np.int64)
    _add_all(accumulators, np.ascontiguousarray(terms, np.float64))
    return float(value(accumulators[0]))


@numba.njit(nogil=True, cache=True)
def _add_all(accumulators, terms):
    for x in terms:
        add_term(accumulators, 0, x)


def accumulator_of(terms) -> np.ndarray:
    """One normalized accumulator holding the exact sum of ``terms``."""
    accumulators = np.zeros((1, WIDTH), np.int64)
    _add_all(accumulators, np.ascontiguousarray(terms, np.float64))
    normalize(accumulators[0])
    return accumulators[0]


def merged_columns(partial: np.ndarray, sums: np.ndarray, monoids) -> list:
    """Each aggregate of the parts of :func:`~garaphpy.kernels.cpu.compute_aggregates`
    or :func:`~garaphpy.kernels.cpu.pull_fused`, merged over the parts: an
    add aggregate's accumulators added (one accumulator, not yet rounded), a
    min or max column reduced by its monoid (its identity where there are no
    parts)."""
    merged = []
    for i, monoid in enumerate(monoids):
        if monoid == "add":
            merged.append(merge_rows(sums[:, i, :]))
        else:
            column = partial[:, i]
            merged.append(getattr(column, MONOIDS[monoid].numpy_reduce)() if column.size
                          else MONOIDS[monoid].identity(np.float64))
    return merged


def merge_parts(partial: np.ndarray, sums: np.ndarray, monoids) -> np.ndarray:
    """The aggregates from the parts (:func:`merged_columns`), each add
    aggregate rounded once."""
    return np.array([value(column) if monoid == "add" else column
                     for monoid, column in zip(monoids, merged_columns(partial, sums, monoids))],
                    np.float64).reshape(len(monoids))
