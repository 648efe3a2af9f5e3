"""Floats as Python's ``repr`` writes them, for whole arrays at numpy's speed.

Result files hold each float as its shortest text that reads back to the
same double, in Python's ``repr`` style (:mod:`garaphpy.output`).  Python
makes that text one value at a time (David Gay's ``dtoa``), about half a
microsecond each; this module makes the same bytes with whole-array
arithmetic, and leaves to ``repr`` only the values it cannot decide.

For a positive double ``a`` with decimal exponent ``e`` (``10**e <= a <
10**(e + 1)``), ``repr`` writes the fewest significant digits p that read
back to ``a``, and among the p-digit numbers that do, the one nearest to
``a``.  Fifteen digits always separate doubles, so when some number of at
most 15 digits reads back, it is ``a`` rounded to 15 digits with its
trailing zeros dropped; otherwise it is ``a`` rounded to 16 digits if that
reads back, else to 17 (which always does).  ``a`` rounded to p digits is
the integer nearest to ``y = a * 10**(p - 1 - e)``; y is computed as a sum
of two doubles (Dekker's exact product with a two-double ``10**k``), about
100 bits, so the integer, and whether it is within half a gap between
doubles of y (it reads back), are exact unless y's fraction is within a
millionth of one half or of that bound.  Those values, and the ones outside
the range where the products cannot overflow or lose bits (zero, inf, nan,
subnormals, exponents beyond +-290) and the powers of two (whose gap below
is half the gap above), are written by ``repr``.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

#: The decimal exponents handled by whole-array arithmetic (beyond: ``repr``).
_EXPONENT_LIMIT = 290
#: Powers of ten in the table: ``10**k`` for ``_LOWEST_POWER <= k <= _HIGHEST_POWER``
#: (``a * 10**(p - 1 - e)`` for 15 <= p <= 17 and e within the limit, one off).
_LOWEST_POWER, _HIGHEST_POWER = 14 - _EXPONENT_LIMIT - 1, 16 + _EXPONENT_LIMIT + 1
#: How close to a decision boundary a computed quantity may come before the
#: value goes to ``repr`` (the computed ones are good to about 1e-14).
_MARGIN = 1e-6
#: Veltkamp's splitting constant, 2**27 + 1.
_SPLITTER = 134217729.0
#: Values made at once (their rows of characters stay in the processor's cache).
_ROWS_PER_BLOCK = 1 << 14
#: The widest text ``repr`` gives a double: ``-2.2250738585072014e-308``.
WIDTH = 24

_NUL, _ZERO, _POINT, _E, _MINUS, _PLUS = 0, ord("0"), ord("."), ord("e"), ord("-"), ord("+")


def _split(value: float) -> tuple[float, float]:
    """Veltkamp's split of a normal double into two 26-bit halves, through its
    mantissa (exact, and without overflow for any exponent)."""
    mantissa, exponent = math.frexp(value)
    scaled = mantissa * _SPLITTER
    high = scaled - (scaled - mantissa)
    return math.ldexp(high, exponent), math.ldexp(mantissa - high, exponent)


@functools.cache
def _powers_of_ten() -> tuple[np.ndarray, ...]:
    """``10**k`` as ``high + low`` (each rounded to nearest), and ``high``'s
    split halves, at ``k - _LOWEST_POWER``: four arrays."""
    rows = []
    for k in range(_LOWEST_POWER, _HIGHEST_POWER + 1):
        exact = Fraction(10) ** k
        high = float(exact)
        rows.append((high, float(exact - Fraction(high)), *_split(high)))
    return tuple(np.ascontiguousarray(column) for column in np.array(rows).T)


def _scaled(magnitude: np.ndarray, power: np.ndarray):
    """``magnitude * 10**power`` as two doubles (high, low), about 100 bits;
    also ``10**power`` rounded."""
    at = power - _LOWEST_POWER
    high_power, low_power, power_high, power_low = (table.take(at) for table in _powers_of_ten())
    scaled = magnitude * _SPLITTER
    magnitude_high = scaled - (scaled - magnitude)
    magnitude_low = magnitude - magnitude_high
    product = magnitude * high_power
    error = (((magnitude_high * power_high - product) + magnitude_high * power_low
              + magnitude_low * power_high) + magnitude_low * power_low)
    rest = error + magnitude * low_power
    high = product + rest
    return high, rest - (high - product), high_power


def _nearest_integer(high: np.ndarray, low: np.ndarray):
    """The integer nearest to ``high + low`` (int64), its distance from it, and
    whether the sum is too near a half to tell."""
    whole = np.floor(high)
    fraction = (high - whole) + low
    rounded = np.floor(fraction + 0.5)
    distance = np.abs(rounded - fraction)
    undecided = np.abs(distance - 0.5) < _MARGIN
    return whole.astype(np.int64) + rounded.astype(np.int64), distance, undecided


def _below(high: np.ndarray, low: np.ndarray, power: float) -> np.ndarray:
    """Whether ``high + low < power``."""
    return (high < power) | ((high == power) & (low < 0))


def _shortest_digits(magnitude: np.ndarray):
    """For positive normal doubles of decimal exponents within
    ``_EXPONENT_LIMIT``: ``repr``'s digits as a 17-digit integer (padded with
    zeros), the decimal exponent of its first digit, and where this could
    not be decided (those go to ``repr``)."""
    exponent = np.floor(np.log10(magnitude)).astype(np.int64)
    high, low, _ = _scaled(magnitude, 16 - exponent)
    # log10 may be one off near a power of ten
    exponent += ~_below(high, low, 1e17)
    exponent -= _below(high, low, 1e16)
    scaled_17 = _scaled(magnitude, 16 - exponent)
    undecided = _below(*scaled_17[:2], 1e16) | ~_below(*scaled_17[:2], 1e17)
    half_gap = 0.5 * np.spacing(magnitude)
    digits = np.zeros(magnitude.size, np.int64)
    chosen = np.zeros(magnitude.size, bool)
    for count in (15, 16, 17):
        high, low, power = scaled_17 if count == 17 \
            else _scaled(magnitude, count - 1 - exponent)
        nearest, distance, near_half = _nearest_integer(high, low)
        bound = half_gap * power
        fresh = ~chosen
        undecided |= fresh & (near_half | (np.abs(distance - bound) < _MARGIN))
        take = fresh & ((distance < bound) | (count == 17))
        digits[take] = nearest[take] * 10 ** (17 - count)
        chosen |= take
    carried = digits >= 10 ** 17         # rounded up to the next power of ten
    digits[carried] //= 10
    exponent += carried
    return digits, exponent, undecided


#: The three digit characters of each number below 1000.
_THREE_DIGITS = np.frombuffer("".join(f"{i:03d}" for i in range(1000)).encode(),
                              np.uint8).reshape(1000, 3)


def _digit_columns(digits: np.ndarray) -> np.ndarray:
    """The 17 decimal digits of each value (as characters), most significant
    first, three at a time."""
    columns = np.empty((digits.size, 18), np.uint8)
    rest = digits.copy()
    for group in range(5, -1, -1):
        columns[:, 3 * group:3 * group + 3] = _THREE_DIGITS[rest % 1000]
        rest //= 1000
    return columns[:, 1:]


# Columns of a row's alphabet: its 17 digits, then these characters
# (the exponent's sign and its three digits are the row's own).
_ZERO_AT, _POINT_AT, _E_AT, _EXPONENT_SIGN_AT, _EXPONENT_AT, _MINUS_AT, _NUL_AT = \
    17, 18, 19, 20, 21, 24, 25


def _layout(negative: bool, significant: int, exponent: int) -> list[int]:
    """The alphabet columns of ``repr``'s text for a value with ``significant``
    digits and the decimal exponent ``exponent``: positional from -4 to 15
    (``0.0001``, ``100.0``), else scientific (``1e-05``, ``1.5e+16``)."""
    columns = [_MINUS_AT] if negative else []
    digits = list(range(significant))
    if exponent < -4 or exponent >= 16:
        columns += [0] + ([_POINT_AT] + digits[1:] if significant > 1 else [])
        columns += [_E_AT, _EXPONENT_SIGN_AT]
        columns += [_EXPONENT_AT + (0 if abs(exponent) >= 100 else 1) + i
                    for i in range(3 if abs(exponent) >= 100 else 2)]
    elif exponent >= 0:
        columns += [i if i < significant else _ZERO_AT for i in range(exponent + 1)]
        columns += [_POINT_AT] + (digits[exponent + 1:] or [_ZERO_AT])
    else:
        columns += [_ZERO_AT, _POINT_AT] + [_ZERO_AT] * (-exponent - 1) + digits
    return columns + [_NUL_AT] * (WIDTH - len(columns))


def _repr_style(digits: np.ndarray, exponent: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """Rows of ``WIDTH`` characters (NUL-padded on the right) in ``repr``'s
    layout (:func:`_layout`), made for each group of rows that share one."""
    count = digits.size
    columns = _digit_columns(digits)
    significant = 17 - np.argmax(columns[:, ::-1] != _ZERO, axis=1)
    magnitude = np.abs(exponent)
    alphabet = np.empty((count, 26), np.uint8)
    alphabet[:, :17] = columns
    alphabet[:, _ZERO_AT:_EXPONENT_SIGN_AT] = (_ZERO, _POINT, _E)
    alphabet[:, _EXPONENT_SIGN_AT] = np.where(exponent < 0, _MINUS, _PLUS)
    alphabet[:, _EXPONENT_AT] = magnitude // 100 + _ZERO
    alphabet[:, _EXPONENT_AT + 1] = magnitude // 10 % 10 + _ZERO
    alphabet[:, _EXPONENT_AT + 2] = magnitude % 10 + _ZERO
    alphabet[:, _MINUS_AT:] = (_MINUS, _NUL)
    # what a layout depends on: the sign, the digits, the exponent where
    # positional, else only whether it has three digits
    kind = np.where((exponent < -4) | (exponent >= 16), 20 + (magnitude >= 100), exponent + 4)
    key = (negative.astype(np.int64) * 17 + significant - 1) * 22 + kind
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    bounds = np.flatnonzero(np.diff(ordered)) + 1
    rows = np.empty((count, WIDTH), np.uint8)
    for begin, end in zip([0, *bounds.tolist()], [*bounds.tolist(), count]):
        members = order[begin:end]
        first = members[0]
        layout = _layout(bool(negative[first]), int(significant[first]), int(exponent[first]))
        rows[members] = alphabet[members[:, None], np.array(layout)[None, :]]
    return rows


def repr_columns(values: np.ndarray) -> np.ndarray:
    """``repr(float(v))`` of every value, as rows of ``WIDTH`` bytes (ASCII,
    NUL-padded on the right): the bytes of ``[repr(v) for v in
    values.tolist()]``."""
    values = np.asarray(values, np.float64).ravel()
    rows = np.empty((values.size, WIDTH), np.uint8)
    for start in range(0, values.size, _ROWS_PER_BLOCK):
        rows[start:start + _ROWS_PER_BLOCK] = _block_columns(
            values[start:start + _ROWS_PER_BLOCK])
    return rows


def _block_columns(values: np.ndarray) -> np.ndarray:
    magnitude = np.abs(values)
    fast = np.isfinite(values) & (magnitude >= 10.0 ** -_EXPONENT_LIMIT) \
        & (magnitude < 10.0 ** _EXPONENT_LIMIT)
    mantissa, _ = np.frexp(magnitude)
    fast &= mantissa != 0.5                 # powers of two: the gap below is narrower
    rows = np.zeros((values.size, WIDTH), np.uint8)
    indices = np.flatnonzero(fast)
    if indices.size:
        digits, exponent, undecided = _shortest_digits(magnitude[indices])
        rows[indices] = _repr_style(digits, exponent, np.signbit(values[indices]))
        fast[indices[undecided]] = False
    slow = np.flatnonzero(~fast)
    if slow.size:
        text = np.array([repr(value) for value in values[slow].tolist()], f"S{WIDTH}")
        rows[slow] = text.view(np.uint8).reshape(slow.size, WIDTH)
    return rows
