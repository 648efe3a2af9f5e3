"""Text lines ``vertex<TAB>value`` of a whole result, made by compiled
kernels on every core: the bytes of ``f"{vertex}\\t{value!r}\\n"`` for float
values, ``f"{vertex}\\t{value}\\n"`` for integer ones.

A result file (Garaph section 6.5 counts preprocessing and output in a
run's end-to-end time) holds one line per vertex; Python makes one line in
about a microsecond (David Gay's ``dtoa`` for each float).

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
is half the gap above), get Python's ``repr``.

Each float goes through that decision one value per loop step, in
parallel, and the lines are written straight into the output buffer: a
first pass makes each value's text and each line's length, a prefix sum
places the lines, a second pass writes them.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numba
import numpy as np

#: The widest text of a value: a double's ``repr`` (24,
#: ``-2.2250738585072014e-308``) or an int64 (20).
VALUE_WIDTH = 24
#: Characters of the longest int64 text, ``-9223372036854775808``.
_INT64_WIDTH = 20

#: The decimal exponents decided here (beyond: ``repr``).
_EXPONENT_LIMIT = 290
#: Powers of ten in the table: ``10**k`` for ``_LOWEST_POWER <= k <= _HIGHEST_POWER``
#: (``a * 10**(p - 1 - e)`` for 15 <= p <= 17 and e within the limit, one off).
_LOWEST_POWER, _HIGHEST_POWER = 14 - _EXPONENT_LIMIT - 1, 16 + _EXPONENT_LIMIT + 1
#: How close to a decision boundary a computed quantity may come before the
#: value goes to ``repr`` (the computed ones are good to about 1e-14).
_MARGIN = 1e-6
#: Veltkamp's splitting constant, 2**27 + 1.
_SPLITTER = 134217729.0
_SMALLEST = 10.0 ** -_EXPONENT_LIMIT
_LARGEST = 10.0 ** _EXPONENT_LIMIT
_ZERO, _POINT, _E, _MINUS, _PLUS, _TAB, _NEWLINE = (ord(c) for c in "0.e-+\t\n")


@numba.njit(nogil=True, cache=True)
def _scaled(magnitude, power, tables):
    """``magnitude * 10**power`` as two doubles (high, low), and ``10**power``
    rounded."""
    at = power - _LOWEST_POWER
    high_power, low_power = tables[0, at], tables[1, at]
    power_high, power_low = tables[2, at], tables[3, at]
    scaled = magnitude * _SPLITTER
    magnitude_high = scaled - (scaled - magnitude)
    magnitude_low = magnitude - magnitude_high
    product = magnitude * high_power
    error = (((magnitude_high * power_high - product) + magnitude_high * power_low
              + magnitude_low * power_high) + magnitude_low * power_low)
    rest = error + magnitude * low_power
    high = product + rest
    return high, rest - (high - product), high_power


@numba.njit(nogil=True, cache=True)
def _below(high, low, power):
    return high < power or (high == power and low < 0)


@numba.njit(nogil=True, cache=True)
def _shortest_digits(magnitude, tables):
    """``repr``'s digits of a positive normal double as a 17-digit integer
    (padded with zeros), the decimal exponent of its first digit, and
    whether that could not be decided."""
    exponent = int(math.floor(math.log10(magnitude)))
    high, low, _ = _scaled(magnitude, 16 - exponent, tables)
    # log10 may be one off near a power of ten
    if not _below(high, low, 1e17):
        exponent += 1
    if _below(high, low, 1e16):
        exponent -= 1
    high_17, low_17, power_17 = _scaled(magnitude, 16 - exponent, tables)
    undecided = _below(high_17, low_17, 1e16) or not _below(high_17, low_17, 1e17)
    mantissa, binary_exponent = math.frexp(magnitude)
    half_gap = 0.5 * math.ldexp(1.0, binary_exponent - 53)
    digits = 0
    for count in range(15, 18):
        if count == 17:
            high, low, power = high_17, low_17, power_17
        else:
            high, low, power = _scaled(magnitude, count - 1 - exponent, tables)
        whole = math.floor(high)
        fraction = (high - whole) + low
        rounded = math.floor(fraction + 0.5)
        distance = abs(rounded - fraction)
        bound = half_gap * power
        if abs(distance - 0.5) < _MARGIN or abs(distance - bound) < _MARGIN:
            undecided = True
        if distance < bound or count == 17:
            digits = (np.int64(whole) + np.int64(rounded)) * 10 ** (17 - count)
            break
    if digits >= 10 ** 17:          # rounded up to the next power of ten
        digits //= 10
        exponent += 1
    return digits, exponent, undecided


@numba.njit(nogil=True, cache=True)
def _float_text(value, tables, row, characters):
    """``repr(value)`` into ``row``; its length, or 0 where ``repr`` must make it
    (``characters``: 17 bytes of scratch)."""
    magnitude = abs(value)
    if not (magnitude >= _SMALLEST and magnitude < _LARGEST):     # nan fails both
        return 0
    if math.frexp(magnitude)[0] == 0.5:     # powers of two: the gap below is narrower
        return 0
    digits, exponent, undecided = _shortest_digits(magnitude, tables)
    if undecided:
        return 0
    rest = digits
    for i in range(16, -1, -1):
        characters[i] = _ZERO + rest % 10
        rest //= 10
    significant = 17
    while significant > 1 and characters[significant - 1] == _ZERO:
        significant -= 1
    at = 0
    if value < 0:
        row[at] = _MINUS
        at += 1
    if exponent < -4 or exponent >= 16:
        row[at] = characters[0]
        at += 1
        if significant > 1:
            row[at] = _POINT
            at += 1
            for i in range(1, significant):
                row[at] = characters[i]
                at += 1
        row[at] = _E
        row[at + 1] = _MINUS if exponent < 0 else _PLUS
        at += 2
        size = abs(exponent)
        if size >= 100:
            row[at] = _ZERO + size // 100
            at += 1
        row[at] = _ZERO + size // 10 % 10
        row[at + 1] = _ZERO + size % 10
        at += 2
    elif exponent >= 0:
        for i in range(exponent + 1):
            row[at] = characters[i] if i < significant else _ZERO
            at += 1
        row[at] = _POINT
        at += 1
        if significant <= exponent + 1:
            row[at] = _ZERO
            at += 1
        for i in range(exponent + 1, significant):
            row[at] = characters[i]
            at += 1
    else:
        row[at] = _ZERO
        row[at + 1] = _POINT
        at += 2
        for _ in range(-exponent - 1):
            row[at] = _ZERO
            at += 1
        for i in range(significant):
            row[at] = characters[i]
            at += 1
    return at


@numba.njit(nogil=True, cache=True)
def _integer_length(value):
    """Characters of ``str(value)`` for an int64."""
    length = 1
    if value < 0:
        length = 2
        magnitude = np.uint64(-(value + 1)) + np.uint64(1)
    else:
        magnitude = np.uint64(value)
    while magnitude >= 10:
        magnitude //= np.uint64(10)
        length += 1
    return length


@numba.njit(nogil=True, cache=True)
def _write_integer(value, length, out, at):
    """``str(value)`` (``length`` characters) into ``out`` from ``at``."""
    first = at
    if value < 0:
        out[at] = _MINUS
        first += 1
        magnitude = np.uint64(-(value + 1)) + np.uint64(1)
    else:
        magnitude = np.uint64(value)
    for i in range(at + length - 1, first - 1, -1):
        out[i] = np.uint8(_ZERO + magnitude % np.uint64(10))
        magnitude //= np.uint64(10)


@numba.njit(nogil=True, cache=True)
def _float_rows(values, tables, rows, lengths):
    """Each value's ``repr`` into its row of ``rows``, its length into
    ``lengths`` (0: left to ``repr``)."""
    characters = np.empty(17, np.uint8)
    for i in range(values.shape[0]):
        lengths[i] = _float_text(values[i], tables, rows[i], characters)


@numba.njit(nogil=True, cache=True)
def _write_float_lines(vertices, rows, lengths, out):
    """``vertex TAB text NEWLINE`` of every line into ``out``, where ``rows``
    holds each value's text (of ``lengths`` characters); the bytes written."""
    at = 0
    for i in range(vertices.shape[0]):
        vertex_length = _integer_length(vertices[i])
        _write_integer(vertices[i], vertex_length, out, at)
        at += vertex_length
        out[at] = _TAB
        at += 1
        for j in range(lengths[i]):
            out[at + j] = rows[i, j]
        at += lengths[i]
        out[at] = _NEWLINE
        at += 1
    return at


@numba.njit(nogil=True, cache=True)
def _write_integer_lines(vertices, values, out):
    """``vertex TAB value NEWLINE`` of every pair of int64 into ``out``; the
    bytes written."""
    at = 0
    for i in range(vertices.shape[0]):
        length = _integer_length(vertices[i])
        _write_integer(vertices[i], length, out, at)
        at += length
        out[at] = _TAB
        at += 1
        length = _integer_length(values[i])
        _write_integer(values[i], length, out, at)
        at += length
        out[at] = _NEWLINE
        at += 1
    return at


def _split(value: float) -> tuple[float, float]:
    """Veltkamp's split of a normal double into two 26-bit halves, through its
    mantissa (exact, and without overflow for any exponent)."""
    mantissa, exponent = math.frexp(value)
    scaled = mantissa * _SPLITTER
    high = scaled - (scaled - mantissa)
    return math.ldexp(high, exponent), math.ldexp(mantissa - high, exponent)


@functools.cache
def _tables() -> np.ndarray:
    """``10**k`` as ``high + low`` (each rounded to nearest), and ``high``'s
    split halves, in column ``k - _LOWEST_POWER`` of four rows."""
    rows = []
    for k in range(_LOWEST_POWER, _HIGHEST_POWER + 1):
        exact = Fraction(10) ** k
        high = float(exact)
        rows.append((high, float(exact - Fraction(high)), *_split(high)))
    return np.ascontiguousarray(np.array(rows).T)


def float_lines(vertices: np.ndarray, values: np.ndarray) -> memoryview:
    """The bytes of ``f"{vertex}\\t{value!r}\\n"`` for every pair.

    Parameters
    ----------
    vertices : numpy.ndarray of integers (each an int64)
    values : numpy.ndarray of float64 or float32 (written as the double each is)
    """
    vertices = np.ascontiguousarray(vertices, np.int64)
    values = np.ascontiguousarray(values, np.float64)
    rows = np.empty((values.size, VALUE_WIDTH), np.uint8)
    lengths = np.empty(values.size, np.int64)
    _float_rows(values, _tables(), rows, lengths)
    for index in np.flatnonzero(lengths == 0).tolist():
        text = repr(float(values[index])).encode()
        rows[index, :len(text)] = np.frombuffer(text, np.uint8)
        lengths[index] = len(text)
    out = np.empty(values.size * (_INT64_WIDTH + VALUE_WIDTH + 2), np.uint8)
    return memoryview(out)[:_write_float_lines(vertices, rows, lengths, out)]


def integer_lines(vertices: np.ndarray, values: np.ndarray) -> memoryview:
    """The bytes of ``f"{vertex}\\t{value}\\n"`` for every pair (both arrays
    of integers that are each an int64)."""
    out = np.empty(vertices.size * (2 * _INT64_WIDTH + 2), np.uint8)
    return memoryview(out)[:_write_integer_lines(np.ascontiguousarray(vertices, np.int64),
                                                 np.ascontiguousarray(values, np.int64), out)]
