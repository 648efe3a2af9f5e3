"""Fast line-oriented parsing of text edge lists (numba).

Every text input garaphpy reads (SNAP and plain edge lists, Matrix Market
entries, DIMACS ``a`` lines) is a sequence of *records*, one per line:
two non-negative integer vertex ids and, optionally, a weight, separated by
spaces or tabs, possibly preceded by a one-character tag (DIMACS ``a``),
interleaved with blank lines and comment lines.  This module turns such text
into int64/float64 arrays at 350-500 MB/s per core, which the store builder
needs to stay above 5 M edges/s (Garaph section 6.5: preprocessing scans the
input once or twice, so reading it must not be the bottleneck).

Design
------
* :func:`parse_records` is a ``@njit(nogil=True, cache=True)`` kernel over a
  ``uint8`` buffer.  It parses whole lines from ``buf[pos:end]`` until its
  output arrays hold ``capacity`` records, and returns where it stopped, how
  many lines it consumed and, on malformed input, an error code with the
  byte position of the offending token.  It never raises: Python turns the
  code into a :class:`~garaphpy.errors.GraphInputError` naming the file, the
  1-based line and the column.
* The kernel relies on a sentinel, not bounds checks: every range it parses
  ends with a newline (one is appended to an input whose last line lacks
  it), so each inner loop stops at a non-digit or non-blank byte.  Error
  classification lives in separate cold functions.
* :class:`_BlockReader` reads the (possibly decompressed) stream on a
  background thread in blocks (:data:`garaphpy.config.TEXT_BLOCK_BYTES`) cut after their
  last newline, carrying the partial last line to the next block, so that
  reading or decompressing overlaps parsing.
* :class:`RecordScanner` cuts each block at newlines into pieces
  (:data:`garaphpy.config.PIECE_BYTES`), parses up to one piece per worker thread at once
  (the kernel releases the GIL), and copies the records in file order into
  chunks of at most ``max_edges``, counting lines across piece, block and
  chunk boundaries.
* Line endings: ``\\n`` ends a line; ``\\r`` is treated as a blank, so CRLF
  files parse (and are numbered) exactly like LF files.

Number syntax
-------------
* Vertex ids: ASCII digits only (no sign), at most ``2**63 - 1``.  A leading
  ``-`` is reported as a negative id, ``1.5``/``1e3`` as a non-integer id.
* Integer weights (``weight_mode == WEIGHT_INT``): optional sign and digits;
  a ``.`` or exponent is reported as :data:`ERR_NON_INTEGER_WEIGHT`.
* Real weights (``weight_mode == WEIGHT_REAL``): optional sign, digits,
  optional fraction, optional exponent (``-1.5e-3``, ``.5``, ``7.``).  A
  literal of 18 significant digits or more (trailing zeros aside) is
  converted by Python's ``float`` (correctly rounded; the kernel marks it
  with a NaN, which no literal parses to, and :class:`RecordScanner`
  replaces the marks).  Shorter ones are converted in the kernel: when they fit in 2**53 and the
  decimal exponent is within +-22 the value is one exact IEEE operation
  (Clinger's fast path; this covers weights such as ``0.25`` or ``1234.5678``).
  Otherwise the significand is multiplied by a double-double power of ten
  (:func:`_scale_by_power_of_ten`), which is correctly rounded except within
  about 2**-100 of a rounding boundary or for subnormal results (no mismatch
  with Python's ``float()`` in 1.2 million random tests, 17-digit ``repr``
  strings and extreme exponents included).  ``nan``/``inf`` tokens are
  rejected, and so is a literal that overflows to infinity (``1e999``).
"""

from __future__ import annotations

import math
import queue
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import BinaryIO, Iterator

import numpy as np
from numba import njit

from garaphpy import config
from garaphpy.errors import GraphInputError

# -------------------------------------------------------------- error codes --
OK = 0
ERR_MISSING_FIELD = 1         # the line ends before all columns were read
ERR_EXTRA_FIELD = 2           # something follows the last expected column
ERR_NOT_AN_ID = 3             # garbage where a vertex id was expected
ERR_NEGATIVE_ID = 4
ERR_NON_INTEGER_ID = 5        # 1.5, 1e3
ERR_ID_OVERFLOW = 6           # does not fit in int64
ERR_ZERO_ID_ONE_BASED = 7     # 0 in a 1-based format
ERR_ID_OUT_OF_RANGE = 8       # id >= declared vertex count
ERR_BAD_WEIGHT = 9            # garbage (or nan/inf) where a weight was expected
ERR_NON_INTEGER_WEIGHT = 10   # 2.5 where integer weights are expected
ERR_WEIGHT_OVERFLOW = 11      # integer weight beyond int64, or real beyond float64
ERR_BAD_LINE_TAG = 12         # a data line that does not start with the record tag

# ------------------------------------------------------------- weight modes --
WEIGHT_NONE = 0
WEIGHT_INT = 1
WEIGHT_REAL = 2

_NEWLINE = 10
_CARRIAGE_RETURN = 13
_SPACE = 32
_TAB = 9
_MINUS = 45
_PLUS = 43
_DOT = 46
_LOWER_E = 101
_UPPER_E = 69

_INT64_MAX_DIV_10 = 922337203685477580  # (2**63 - 1) // 10
_INT64_MAX_LAST_DIGIT = 7               # (2**63 - 1) % 10
#: Significant digits kept by the real parser: below this bound another digit
#: still fits in int64 and the significand stays exact up to 2**53 at 16 digits.
_SIGNIFICAND_LIMIT = 10 ** 17
_EXACT_POWERS_OF_TEN = np.array([10.0 ** k for k in range(23)], dtype=np.float64)
_EXACT_SIGNIFICAND_MAX = 2 ** 53


def _power_of_ten_table(lowest: int, highest: int):
    """10**k = (hi + lo) * 2**b with hi in [1, 2), for k in lowest..highest.

    ``hi`` is 10**k's significand rounded to a double and ``lo`` the rounded
    remainder, together about 106 bits (a double-double), computed exactly
    with integers: each is one quotient of integers, which Python rounds
    correctly (the table is built at import, so it avoids fractions.Fraction,
    whose reductions made it take 20 ms).
    """
    count = highest - lowest + 1
    hi = np.empty(count)
    lo = np.empty(count)
    binary_exponent = np.empty(count, dtype=np.int64)
    for index, k in enumerate(range(lowest, highest + 1)):
        numerator, denominator = (10 ** k, 1) if k >= 0 else (1, 10 ** -k)
        b = numerator.bit_length() - denominator.bit_length()
        # the significand numerator / (denominator * 2**b) is top / bottom
        top, bottom = (numerator, denominator << b) if b >= 0 else (numerator << -b, denominator)
        if bottom > top:        # below 1: one bit less
            b -= 1
            top, bottom = (numerator, denominator << b) if b >= 0 else \
                (numerator << -b, denominator)
        hi[index] = top / bottom
        exact_numerator, exact_denominator = hi[index].as_integer_ratio()
        lo[index] = (top * exact_denominator - exact_numerator * bottom) / \
            (bottom * exact_denominator)
        binary_exponent[index] = b
    return hi, lo, binary_exponent


_LOWEST_POWER = -350   # significand < 1e18, so anything below underflows to 0
_HIGHEST_POWER = 308   # a significand >= 1 times more than this overflows
_POWER_HI, _POWER_LO, _POWER_EXPONENT = _power_of_ten_table(_LOWEST_POWER, _HIGHEST_POWER)
_DEKKER_SPLITTER = 134217729.0  # 2**27 + 1
_EMPTY_INT = np.empty(0, dtype=np.int64)
_EMPTY_REAL = np.empty(0, dtype=np.float64)


# ------------------------------------------------------------------ kernels --
# The kernels rely on a sentinel: every range they parse ends with "\n", so the
# inner loops stop at a non-digit / non-blank without bounds checks.
# Error classification lives in separate cold functions.

@njit(nogil=True, cache=True, inline="always")
def _is_token_end(c):
    return c == _SPACE or c == _TAB or c == _CARRIAGE_RETURN or c == _NEWLINE


@njit(nogil=True, cache=True, inline="always")
def _skip_blanks(buf, pos):
    while True:
        c = buf[pos]
        if c != _SPACE and c != _TAB and c != _CARRIAGE_RETURN:
            return pos
        pos += 1


@njit(nogil=True, cache=True, inline="always")
def _scan_digits(buf, pos):
    """Accumulate decimal digits from ``pos``: (value, position after them).

    Wraps around beyond 18 digits; callers check the digit count.
    """
    value = np.int64(0)
    while True:
        digit = np.int64(buf[pos]) - 48
        if digit < 0 or digit > 9:
            return value, pos
        value = value * 10 + digit
        pos += 1


@njit(nogil=True, cache=True)
def _fits_int64(buf, start, stop):
    """Whether the digits ``buf[start:stop]`` denote a value <= 2**63 - 1."""
    value = np.int64(0)
    for pos in range(start, stop):
        digit = np.int64(buf[pos]) - 48
        if value > _INT64_MAX_DIV_10 or (value == _INT64_MAX_DIV_10
                                         and digit > _INT64_MAX_LAST_DIGIT):
            return False
        value = value * 10 + digit
    return True


@njit(nogil=True, cache=True)
def _id_error(buf, start, stop):
    """Classify an id token that did not scan cleanly (cold path).

    ``start`` is where the token starts, ``stop`` where its digits end.
    Returns :data:`OK` for a long but valid id.
    """
    c = buf[start]
    if c == _NEWLINE:
        return ERR_MISSING_FIELD
    if c == _MINUS:
        return ERR_NEGATIVE_ID
    if stop == start:
        return ERR_NOT_AN_ID
    c = buf[stop]
    if not _is_token_end(c):
        if c == _DOT or c == _LOWER_E or c == _UPPER_E:
            return ERR_NON_INTEGER_ID
        return ERR_NOT_AN_ID
    if not _fits_int64(buf, start, stop):
        return ERR_ID_OVERFLOW
    return OK


@njit(nogil=True, cache=True)
def _int_weight_error(buf, start, digits_start, stop):
    """Classify an integer weight token that did not scan cleanly (cold path)."""
    c = buf[start]
    if c == _NEWLINE:
        return ERR_MISSING_FIELD
    c = buf[stop]
    if not _is_token_end(c):
        if stop > digits_start and (c == _DOT or c == _LOWER_E or c == _UPPER_E):
            return ERR_NON_INTEGER_WEIGHT
        if stop == digits_start and c == _DOT:
            return ERR_NON_INTEGER_WEIGHT  # ".5"
        return ERR_BAD_WEIGHT
    if stop == digits_start:
        return ERR_BAD_WEIGHT
    if not _fits_int64(buf, digits_start, stop):
        return ERR_WEIGHT_OVERFLOW
    return OK


@njit(nogil=True, cache=True)
def _scale_by_power_of_ten(significand, exponent):
    """significand * 10**exponent, rounded once from a double-double product.

    The significand (< 1e18) is split exactly into two doubles, multiplied by
    the double-double 10**exponent with Dekker's exact product, and scaled by
    a power of two.  The result is the correctly rounded value unless the
    exact one lies within about 2**-100 (relative) of a rounding boundary, or
    it is subnormal (rounded twice).
    """
    index = exponent - _LOWEST_POWER
    power_hi = _POWER_HI[index]
    power_lo = _POWER_LO[index]
    s_hi = np.float64(significand)
    s_lo = np.float64(significand - np.int64(s_hi))
    # Dekker's TwoProduct: product + error == s_hi * power_hi exactly
    product = s_hi * power_hi
    t = _DEKKER_SPLITTER * s_hi
    a_hi = t - (t - s_hi)
    a_lo = s_hi - a_hi
    t = _DEKKER_SPLITTER * power_hi
    b_hi = t - (t - power_hi)
    b_lo = power_hi - b_hi
    error = ((a_hi * b_hi - product) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    error += s_hi * power_lo + s_lo * power_hi
    return math.ldexp(product + error, _POWER_EXPONENT[index])


@njit(nogil=True, cache=True, inline="always")
def _parse_real(buf, pos):
    """Parse a decimal floating-point token at ``pos``: (value, new_pos, error)."""
    start = pos
    c = buf[pos]
    if c == _NEWLINE:
        return 0.0, pos, ERR_MISSING_FIELD
    negative = False
    if c == _MINUS or c == _PLUS:
        negative = c == _MINUS
        pos += 1
    significand = np.int64(0)
    exponent = np.int64(0)
    n_digits = 0
    truncated = False   # a non-zero digit beyond those kept
    while True:  # integer part
        digit = np.int64(buf[pos]) - 48
        if digit < 0 or digit > 9:
            break
        if significand < _SIGNIFICAND_LIMIT:
            significand = significand * 10 + digit
        else:
            exponent += 1
            truncated = truncated or digit != 0
        n_digits += 1
        pos += 1
    if buf[pos] == _DOT:  # fraction
        pos += 1
        while True:
            digit = np.int64(buf[pos]) - 48
            if digit < 0 or digit > 9:
                break
            if significand < _SIGNIFICAND_LIMIT:
                significand = significand * 10 + digit
                exponent -= 1
            else:
                truncated = truncated or digit != 0
            n_digits += 1
            pos += 1
    if n_digits == 0:
        return 0.0, start, ERR_BAD_WEIGHT
    c = buf[pos]
    if c == _LOWER_E or c == _UPPER_E:  # exponent
        pos += 1
        exponent_negative = False
        c = buf[pos]
        if c == _MINUS or c == _PLUS:
            exponent_negative = c == _MINUS
            pos += 1
        written = np.int64(0)
        n_exponent_digits = 0
        while True:
            digit = np.int64(buf[pos]) - 48
            if digit < 0 or digit > 9:
                break
            if written < 100000:
                written = written * 10 + digit
            n_exponent_digits += 1
            pos += 1
        if n_exponent_digits == 0:
            return 0.0, start, ERR_BAD_WEIGHT
        exponent += -written if exponent_negative else written
    if not _is_token_end(buf[pos]):
        return 0.0, start, ERR_BAD_WEIGHT
    while significand >= _SIGNIFICAND_LIMIT and significand % 10 == 0:
        significand //= 10      # trailing zeros are not significant
        exponent += 1
    # value = significand * 10**exponent
    if significand == 0:
        value = 0.0
    elif -22 <= exponent <= 22 and significand <= _EXACT_SIGNIFICAND_MAX:
        if exponent >= 0:
            value = np.float64(significand) * _EXACT_POWERS_OF_TEN[exponent]
        else:
            value = np.float64(significand) / _EXACT_POWERS_OF_TEN[-exponent]
    elif exponent > _HIGHEST_POWER:
        return 0.0, start, ERR_WEIGHT_OVERFLOW
    elif exponent < _LOWEST_POWER:
        value = 0.0
    else:
        value = _scale_by_power_of_ten(significand, exponent)
    if value == np.inf:
        return 0.0, start, ERR_WEIGHT_OVERFLOW
    if truncated or significand >= _SIGNIFICAND_LIMIT:
        # 18 significant digits or more: the product above may be one ulp
        # off; NaN (never a parsed value) asks the caller for Python's float
        return np.nan, pos, OK
    if negative:
        value = -value
    return value, pos, OK


@njit(nogil=True, cache=True)
def parse_records(buf, pos, end, comment_a, comment_b, record_tag, weight_mode,
                  id_base, id_limit, src, dst, weight_int, weight_real, capacity):
    """Parse whole lines of ``buf[pos:end]`` into at most ``capacity`` records.

    Parameters
    ----------
    buf : numpy.ndarray of uint8
        The text.  ``buf[end - 1]`` must be a newline (the scanner appends one
        to an input whose last line lacks it): it is the sentinel that stops
        every inner loop.
    pos, end : int
        Byte range to parse; ``pos`` is the start of a line.
    comment_a, comment_b : int
        Characters that open a comment line when they are its first non-blank
        character (-1 for none).
    record_tag : int
        Character every data line must start with, followed by a blank (DIMACS
        ``a``), or -1 for none.
    weight_mode : int
        :data:`WEIGHT_NONE` (two columns), :data:`WEIGHT_INT` or
        :data:`WEIGHT_REAL` (three columns).
    id_base : int
        0, or 1 for 1-based formats (an id of 0 is then an error).
    id_limit : int
        Ids minus ``id_base`` must be below this; -1 for no limit.
    src, dst : numpy.ndarray of int64
        Output ids (``id_base`` already subtracted), written from index 0.
    weight_int, weight_real : numpy.ndarray
        Output weights for the integer / real mode (the other may be empty).
    capacity : int
        Records to write at most; parsing stops at the start of a line once
        this many are written.

    Returns
    -------
    tuple of int
        ``(pos, n_records, n_lines, error, error_pos, error_field, line_start,
        last_record_line)``: where parsing stopped (the start of a line, or
        ``end``), records written, newlines consumed before ``pos``, an error
        code (:data:`OK` if none), the byte position of the bad token, its
        1-based field number, the start of the erroneous line, and the 0-based
        index (relative to the first line) of the line holding the last record
        written (-1 if none).  On an error, ``n_lines`` is the 0-based index
        of the bad line relative to the first line.
    """
    n_lines = 0
    n_records = 0
    last_record_line = -1
    while pos < end and n_records < capacity:
        line_start = pos
        pos = _skip_blanks(buf, pos)
        c = np.int64(buf[pos])
        if c == _NEWLINE:  # blank line
            pos += 1
            n_lines += 1
            continue
        if c == comment_a or c == comment_b:
            while buf[pos] != _NEWLINE:
                pos += 1
            pos += 1
            n_lines += 1
            continue
        if record_tag >= 0:
            if c != record_tag or not _is_token_end(buf[pos + 1]):
                return (pos, n_records, n_lines, ERR_BAD_LINE_TAG, pos, 0,
                        line_start, last_record_line)
            pos = _skip_blanks(buf, pos + 1)
        # source id
        u_start = pos
        u, pos = _scan_digits(buf, pos)
        if pos == u_start or pos - u_start > 18 or not _is_token_end(buf[pos]):
            error = _id_error(buf, u_start, pos)
            if error != OK:
                return (pos, n_records, n_lines, error, u_start, 1, line_start,
                        last_record_line)
        # destination id
        pos = _skip_blanks(buf, pos)
        v_start = pos
        v, pos = _scan_digits(buf, pos)
        if pos == v_start or pos - v_start > 18 or not _is_token_end(buf[pos]):
            error = _id_error(buf, v_start, pos)
            if error != OK:
                return (pos, n_records, n_lines, error, v_start, 2, line_start,
                        last_record_line)
        if id_base != 0:
            if u == 0:
                return (pos, n_records, n_lines, ERR_ZERO_ID_ONE_BASED, u_start, 1,
                        line_start, last_record_line)
            if v == 0:
                return (pos, n_records, n_lines, ERR_ZERO_ID_ONE_BASED, v_start, 2,
                        line_start, last_record_line)
            u -= id_base
            v -= id_base
        if id_limit >= 0:
            if u >= id_limit:
                return (pos, n_records, n_lines, ERR_ID_OUT_OF_RANGE, u_start, 1,
                        line_start, last_record_line)
            if v >= id_limit:
                return (pos, n_records, n_lines, ERR_ID_OUT_OF_RANGE, v_start, 2,
                        line_start, last_record_line)
        # weight
        if weight_mode == WEIGHT_INT:
            pos = _skip_blanks(buf, pos)
            w_start = pos
            c = buf[pos]
            if c == _MINUS or c == _PLUS:
                pos += 1
            digits_start = pos
            w, pos = _scan_digits(buf, pos)
            if (pos == digits_start or pos - digits_start > 18
                    or not _is_token_end(buf[pos])):
                error = _int_weight_error(buf, w_start, digits_start, pos)
                if error != OK:
                    return (pos, n_records, n_lines, error, w_start, 3, line_start,
                            last_record_line)
            if c == _MINUS:
                w = -w
            weight_int[n_records] = w
        elif weight_mode == WEIGHT_REAL:
            pos = _skip_blanks(buf, pos)
            w_start = pos
            x, pos, error = _parse_real(buf, pos)
            if error != OK:
                return (pos, n_records, n_lines, error, w_start, 3, line_start,
                        last_record_line)
            weight_real[n_records] = x
        # end of line
        pos = _skip_blanks(buf, pos)
        if buf[pos] != _NEWLINE:
            field = 4 if weight_mode != WEIGHT_NONE else 3
            return (pos, n_records, n_lines, ERR_EXTRA_FIELD, pos, field,
                    line_start, last_record_line)
        src[n_records] = u
        dst[n_records] = v
        n_records += 1
        last_record_line = n_lines
        pos += 1
        n_lines += 1
    return (pos, n_records, n_lines, OK, 0, 0, 0, last_record_line)


@njit(nogil=True, cache=True)
def last_newline(buf, end):
    """Index of the last ``\\n`` in ``buf[:end]``, or -1."""
    i = end - 1
    while i >= 0:
        if buf[i] == _NEWLINE:
            return i
        i -= 1
    return -1


@njit(nogil=True, cache=True)
def next_newline(buf, start, end):
    """Index of the first ``\\n`` in ``buf[start:end]``, or ``end``."""
    i = start
    while i < end:
        if buf[i] == _NEWLINE:
            return i
        i += 1
    return end


# ------------------------------------------------------------- Python side --
@dataclass(frozen=True)
class RecordSyntax:
    """What a record line of one text format looks like.

    Attributes
    ----------
    comment_chars : str
        Up to two characters that open a comment line ("#%" for edge lists,
        "%" for Matrix Market, "c" for DIMACS).
    record_tag : str
        Character every record line starts with ("a" for DIMACS), or "".
    weight_mode : int
        :data:`WEIGHT_NONE`, :data:`WEIGHT_INT` or :data:`WEIGHT_REAL`.
    id_base : int
        0, or 1 for 1-based ids.
    id_limit : int
        Number of declared vertices (ids minus base must be below it), or -1.
    foreign_lines : tuple of (str, str)
        ``(first token, message)`` pairs: a line starting with such a token
        where a source id is expected gets this message (e.g. a DIMACS ``a``
        line in a PACE ``p tw`` file).
    """

    comment_chars: str = "#%"
    record_tag: str = ""
    weight_mode: int = WEIGHT_NONE
    id_base: int = 0
    id_limit: int = -1
    foreign_lines: tuple[tuple[str, str], ...] = ()

    def kernel_arguments(self) -> tuple[int, int, int, int, int, int]:
        """The scalar arguments of :func:`parse_records` for this syntax."""
        comments = [ord(ch) for ch in self.comment_chars[:2]] + [-1, -1]
        tag = ord(self.record_tag) if self.record_tag else -1
        return (comments[0], comments[1], tag, self.weight_mode, self.id_base,
                self.id_limit)

    @property
    def n_columns(self) -> int:
        """Number of columns of a record (tag not counted)."""
        return 2 if self.weight_mode == WEIGHT_NONE else 3


def read_fully(stream: BinaryIO, out: np.ndarray) -> int:
    """Read into ``out`` (uint8) until it is full or the stream ends.

    Returns
    -------
    int
        Number of bytes read (less than ``out.size`` only at the end).
    """
    view = memoryview(out)
    filled = 0
    while filled < out.size:
        got = stream.readinto(view[filled:])
        if not got:
            break
        filled += got
    return filled


def _token_at(buf: np.ndarray, pos: int, end: int, limit: int = 40) -> str:
    """The text of the blank-delimited token starting at ``pos``."""
    stop = pos
    while stop < end and stop - pos < limit and buf[stop] not in (9, 10, 13, 32):
        stop += 1
    return bytes(buf[pos:stop]).decode("utf-8", errors="replace")


def _describe_error(code: int, token: str, field: int, syntax: RecordSyntax) -> str:
    """The human message for an error code of :func:`parse_records`."""
    what = {1: "source id", 2: "destination id", 3: "weight"}.get(field, f"field {field}")
    n_columns = syntax.n_columns
    tag = f" after '{syntax.record_tag}'" if syntax.record_tag else ""
    if code == ERR_MISSING_FIELD:
        return (f"malformed line: expected {n_columns} columns{tag} but the line "
                f"ends after {field - 1}")
    if code == ERR_EXTRA_FIELD:
        return (f"malformed line: expected {n_columns} columns{tag} but found more "
                f"('{token}')")
    if code == ERR_NOT_AN_ID:
        if field == 1 and token in dict(syntax.foreign_lines):
            return dict(syntax.foreign_lines)[token]
        return f"malformed line: {what} '{token}' is not a non-negative integer"
    if code == ERR_NEGATIVE_ID:
        return f"{what} '{token}' is negative"
    if code == ERR_NON_INTEGER_ID:
        return f"{what} '{token}' is not an integer"
    if code == ERR_ID_OVERFLOW:
        return f"{what} '{token}' does not fit in 64 bits"
    if code == ERR_ZERO_ID_ONE_BASED:
        return f"{what} is 0 but this format numbers vertices from 1"
    if code == ERR_ID_OUT_OF_RANGE:
        return (f"{what} '{token}' is outside the declared vertex range "
                f"{syntax.id_base}..{syntax.id_limit - 1 + syntax.id_base}")
    if code == ERR_BAD_WEIGHT:
        if token.lstrip("+-").lower() in ("nan", "inf", "infinity"):
            return f"weight '{token}' is not finite (NaN/inf weights are not allowed)"
        return f"malformed line: weight '{token}' is not a number"
    if code == ERR_NON_INTEGER_WEIGHT:
        return f"weight '{token}' is not an integer but the weights are integers"
    if code == ERR_WEIGHT_OVERFLOW:
        return f"weight '{token}' is out of range (not finite in 64 bits)"
    if code == ERR_BAD_LINE_TAG:
        return (f"malformed line: expected an '{syntax.record_tag}' line or a comment, "
                f"found '{token}'")
    return f"parse error {code}"  # pragma: no cover - every code is listed above


# ------------------------------------------------------------ block reading --
class _BlockReader:
    """Read a stream in blocks of whole lines on a background thread.

    Two buffers rotate: the thread fills one (decompressing, for compressed
    inputs; zlib, bz2 and lzma release the GIL) while the consumer parses the
    other.  Each block ends just after a newline; the partial last line is
    carried to the next block, and a newline is appended to an input whose
    last line lacks one, so that every block ends with the parser's sentinel.

    Iterate it for ``(buf, stop)`` pairs; call :meth:`release` with each
    buffer once it is parsed, and :meth:`close` when done.
    """

    _DONE = object()

    def __init__(self, stream: BinaryIO, block_bytes: int, n_buffers: int = 2):
        self._stream = stream
        self._free: queue.Queue = queue.Queue()
        self._ready: queue.Queue = queue.Queue()
        for _ in range(n_buffers):
            self._free.put(np.empty(block_bytes, dtype=np.uint8))
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="garaphpy-reader",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            tail = np.empty(0, dtype=np.uint8)
            while True:
                buf = self._free.get()
                if self._stopping:
                    return
                carry = tail.size
                if carry >= buf.size:  # a line longer than a block: grow
                    buf = np.empty(2 * carry, dtype=np.uint8)
                buf[:carry] = tail
                stop = carry + read_fully(self._stream, buf[carry:])
                if stop < buf.size:  # the end of the input
                    if stop:
                        if buf[stop - 1] != _NEWLINE:
                            buf[stop] = _NEWLINE
                            stop += 1
                        self._ready.put((buf, stop))
                    self._ready.put(self._DONE)
                    return
                cut = last_newline(buf, stop)
                tail = buf[cut + 1:stop].copy()
                if cut < 0:  # no newline yet: keep reading into a larger buffer
                    self._free.put(np.empty(2 * buf.size, dtype=np.uint8))
                    continue
                self._ready.put((buf, cut + 1))
        except BaseException as exc:  # handed to the consumer
            self._ready.put(exc)

    def __iter__(self) -> Iterator[tuple[np.ndarray, int]]:
        while True:
            item = self._ready.get()
            if item is self._DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def release(self, buf: np.ndarray) -> None:
        """Give a parsed buffer back for reuse."""
        self._free.put(buf)

    def close(self) -> None:
        """Stop the thread (it may be blocked on a full rotation)."""
        self._stopping = True
        self._free.put(np.empty(0, dtype=np.uint8))
        self._thread.join()


# ----------------------------------------------------------------- scanner --
@dataclass
class _PieceResult:
    """What parsing one piece of a block produced (views into scratch)."""

    start: int
    stop: int
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray | None
    n_records: int
    n_lines: int
    error: int
    error_pos: int
    error_field: int
    line_start: int


class _Scratch:
    """Reusable output arrays for one piece in flight."""

    def __init__(self, weight_dtype):
        self.weight_dtype = weight_dtype
        self.src = self.dst = np.empty(0, dtype=np.int64)
        self.weight = None

    def ensure(self, capacity: int) -> None:
        if self.src.size < capacity:
            self.src = np.empty(capacity, dtype=np.int64)
            self.dst = np.empty(capacity, dtype=np.int64)
            if self.weight_dtype is not None:
                self.weight = np.empty(capacity, dtype=self.weight_dtype)


class RecordScanner:
    """Stream the records of a text input in chunks, counting lines.

    One scanner serves one pass over the input; a reader creates a fresh one
    per :meth:`EdgeSource.chunks` call, so passes are independent.

    Each block is cut at newlines into pieces of about ``piece_bytes``; up to
    ``workers`` pieces are parsed at once on threads (the kernel releases the
    GIL) into reusable scratch arrays, and copied in file order into chunks.

    Parameters
    ----------
    name : str
        The input's name for messages.
    syntax : RecordSyntax
        What a record looks like.
    first_line : int
        1-based line number of the first line the stream delivers.
    expected_records : int, optional
        Exact number of records the header declared (Matrix Market nnz,
        DIMACS m): more or fewer is an error naming the line.
    workers : int, optional
        Parser threads; default :data:`garaphpy.config.PARSE_WORKERS` or the usable cores.
    block_bytes, piece_bytes : int
        Bytes read per block, and bytes parsed per task.
    non_integer_hint : str
        Appended to the message about a non-integer weight (what to do).
    on_widen : callable, optional
        Integer weights only: a non-integer weight then makes the scanner
        read every later weight as a real (float64; chunks already yielded
        keep their int64 weights, exact in float64 up to 2**53) and call
        ``on_widen(line)`` once, instead of raising.

    Attributes
    ----------
    records : int
        Records delivered so far.
    lines : int
        Number of the last line of the input, once the pass has finished.
    """

    def __init__(self, name: str, syntax: RecordSyntax, first_line: int = 1,
                 expected_records: int | None = None, workers: int | None = None,
                 block_bytes: int | None = None, piece_bytes: int | None = None,
                 non_integer_hint: str = "", on_widen=None):
        self.name = name
        self.non_integer_hint = non_integer_hint
        self.on_widen = on_widen
        self.syntax = syntax
        self.first_line = int(first_line)
        self.expected_records = expected_records
        self.workers = max(1, int(workers if workers is not None else default_workers()))
        self.block_bytes = int(block_bytes or config.TEXT_BLOCK_BYTES)
        self.piece_bytes = int(piece_bytes or config.PIECE_BYTES)
        self.records = 0
        self.lines = 0
        self._weight_dtype = {WEIGHT_INT: np.int64,
                              WEIGHT_REAL: np.float64}.get(syntax.weight_mode)

    # ------------------------------------------------------------ pieces --
    def _pieces(self, buf: np.ndarray, stop: int) -> Iterator[tuple[int, int]]:
        """Cut ``buf[:stop]`` after newlines into ranges of about piece_bytes."""
        start = 0
        while start < stop:
            target = start + self.piece_bytes
            if target >= stop:
                cut = stop
            else:
                cut = next_newline(buf, target - 1, stop) + 1
            yield start, cut
            start = cut

    def _parse_piece(self, buf: np.ndarray, start: int, stop: int,
                     scratch: _Scratch, capacity: int | None = None,
                     syntax: RecordSyntax | None = None) -> _PieceResult:
        """Parse ``buf[start:stop]`` completely (or up to ``capacity`` records),
        with ``syntax`` (default: the scanner's; its weights match ``scratch``'s)."""
        syntax = syntax or self.syntax
        bound = (stop - start) // 4 + 1  # a record takes at least 4 bytes ("0 0\n")
        scratch.ensure(bound)
        weight = scratch.weight
        is_int = scratch.weight_dtype is np.int64
        is_real = scratch.weight_dtype is np.float64
        (_, n_records, n_lines, error, error_pos, field, line_start, _) = parse_records(
            buf, start, stop, *syntax.kernel_arguments(), scratch.src, scratch.dst,
            weight if is_int else _EMPTY_INT, weight if is_real else _EMPTY_REAL,
            bound if capacity is None else capacity)
        if is_real and n_records:
            long_literals = np.flatnonzero(np.isnan(weight[:n_records]))
            if long_literals.size:
                overflow = self._convert_long_literals(buf, start, stop, weight,
                                                       long_literals)
                if overflow is not None and (error == OK or overflow[0] < n_lines):
                    n_lines, error_pos, line_start = overflow
                    error, field = ERR_WEIGHT_OVERFLOW, 3
        return _PieceResult(start, stop, scratch.src, scratch.dst, weight, n_records,
                            n_lines, error, error_pos, field, line_start)

    def _convert_long_literals(self, buf: np.ndarray, start: int, stop: int,
                               weight: np.ndarray, records: np.ndarray):
        """Convert the weights of ``records`` (indices in the piece) with Python's float.

        The records are the piece's data lines in order (the kernel accepted
        them, so each ends with its weight).  Returns None, or ``(line index
        in the piece, byte position, line start)`` of the first literal that
        overflows to infinity.
        """
        wanted = set(records.tolist())
        last = int(records[-1])
        comments = self.syntax.comment_chars.encode()
        record = 0
        offset = start
        for text in bytes(buf[start:stop]).split(b"\n"):
            line_start = offset
            offset += len(text) + 1
            stripped = text.lstrip(b" \t\r")
            if not stripped or stripped[:1] in comments:     # blank or comment line
                continue
            if record in wanted:
                token = stripped.split()[-1]
                value = float(token)
                if math.isinf(value):
                    line = bytes(buf[start:line_start]).count(b"\n")
                    return line, line_start + text.rindex(token), line_start
                weight[record] = value
            if record == last:
                return None
            record += 1
        return None

    def _widen(self, buf: np.ndarray, piece: _PieceResult, line: int) -> _PieceResult:
        """Read weights as reals from now on; ``piece`` parsed again so."""
        self.syntax = replace(self.syntax, weight_mode=WEIGHT_REAL)
        self._weight_dtype = np.float64
        if self.on_widen is not None:
            self.on_widen(line + piece.n_lines)
            self.on_widen = None
        return self._parse_piece(buf, piece.start, piece.stop, _Scratch(np.float64))

    def _raise_parse_error(self, buf: np.ndarray, piece: _PieceResult, line: int):
        token = _token_at(buf, piece.error_pos, piece.stop)
        message = _describe_error(piece.error, token, piece.error_field, self.syntax)
        if piece.error == ERR_NON_INTEGER_WEIGHT:
            message += self.non_integer_hint
        column = piece.error_pos - piece.line_start + 1
        raise GraphInputError(f"{message} (column {column})", self.name,
                              line=line + piece.n_lines)

    def _line_of_record(self, buf: np.ndarray, piece: _PieceResult, line: int,
                        index: int) -> int:
        """1-based line of the ``index``-th (0-based) record of a piece."""
        scratch = _Scratch(self._weight_dtype)
        kernel_arguments = self.syntax.kernel_arguments()
        scratch.ensure(index + 1)
        weight = scratch.weight
        result = parse_records(
            buf, piece.start, piece.stop, *kernel_arguments, scratch.src, scratch.dst,
            weight if self._weight_dtype is np.int64 else _EMPTY_INT,
            weight if self._weight_dtype is np.float64 else _EMPTY_REAL, index + 1)
        return line + result[7]

    def locate(self, stream: BinaryIO, test) -> tuple[int, object] | None:
        """(1-based line, value) of the first record whose weight passes ``test``.

        One sequential pass (an error path: no threads); None when no weight
        passes.  ``test`` maps an array of weights to a boolean array.
        """
        scratch = _Scratch(self._weight_dtype)
        reader = _BlockReader(stream, self.block_bytes)
        line = self.first_line
        try:
            for buf, stop in reader:
                for start, cut in self._pieces(buf, stop):
                    piece = self._parse_piece(buf, start, cut, scratch)
                    if piece.error != OK:
                        self._raise_parse_error(buf, piece, line)
                    if piece.weight is not None and piece.n_records:
                        hits = np.flatnonzero(test(piece.weight[:piece.n_records]))
                        if hits.size:
                            k = int(hits[0])
                            return (self._line_of_record(buf, piece, line, k),
                                    piece.weight[k].item())
                    line += piece.n_lines
                reader.release(buf)
        finally:
            reader.close()
        return None

    # ------------------------------------------------------------ chunks --
    def _grow_chunk(self, src, dst, weight, filled: int, needed: int, max_edges: int):
        """Chunk arrays holding at least ``needed`` records, the first ``filled`` kept.

        A new chunk gets room for what one block can hold (a record takes 4
        bytes at least), capped at ``max_edges``; a chunk larger than a block
        doubles as it fills, so a huge ``max_edges`` reserves no memory ahead.
        """
        if src is None:
            capacity = min(max_edges, max(needed, self.block_bytes // 4 + 1))
        else:
            capacity = min(max_edges, max(needed, 2 * src.size))
        grown = (np.empty(capacity, dtype=np.int64), np.empty(capacity, dtype=np.int64),
                 None if self._weight_dtype is None
                 else np.empty(capacity, dtype=self._weight_dtype))
        if src is not None and filled:
            grown[0][:filled] = src[:filled]
            grown[1][:filled] = dst[:filled]
            if weight is not None:
                grown[2][:filled] = weight[:filled]
        return grown

    def chunks(self, stream: BinaryIO, max_edges: int
               ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        """Yield ``(src, dst, weight)`` arrays of at most ``max_edges`` records.

        Raises
        ------
        GraphInputError
            On a malformed line (naming the file, line and column), or when
            the number of records differs from ``expected_records``.
        """
        max_edges = int(max_edges)
        weight_dtype = self._weight_dtype
        expected = self.expected_records
        n_slots = self.workers
        scratches = [_Scratch(weight_dtype) for _ in range(n_slots)]
        pool = ThreadPoolExecutor(n_slots) if n_slots > 1 else None
        reader = _BlockReader(stream, self.block_bytes)
        line = self.first_line  # number of the line the next piece starts with

        chunk_src = chunk_dst = chunk_weight = None
        filled = 0

        def take_chunk():
            """The filled part of the current chunk (copied if mostly empty)."""
            if filled < 0.75 * chunk_src.size:
                return (chunk_src[:filled].copy(), chunk_dst[:filled].copy(),
                        None if chunk_weight is None else chunk_weight[:filled].copy())
            return (chunk_src[:filled], chunk_dst[:filled],
                    None if chunk_weight is None else chunk_weight[:filled])

        try:
            for buf, stop in reader:
                pieces = list(self._pieces(buf, stop))
                in_flight: deque = deque()
                next_piece = 0
                free_slots = list(range(n_slots))
                while next_piece < len(pieces) or in_flight:
                    while free_slots and next_piece < len(pieces):
                        slot = free_slots.pop()
                        start, cut = pieces[next_piece]
                        next_piece += 1
                        if pool is None:
                            in_flight.append((slot, self._parse_piece(
                                buf, start, cut, scratches[slot], None, self.syntax)))
                        else:
                            in_flight.append((slot, pool.submit(
                                self._parse_piece, buf, start, cut, scratches[slot], None,
                                self.syntax)))
                    slot, result = in_flight.popleft()
                    piece = result if pool is None else result.result()
                    if piece.error == ERR_NON_INTEGER_WEIGHT and (
                            self.on_widen is not None or self._weight_dtype is np.float64):
                        # an integer-weighted input turns out to hold reals
                        piece = self._widen(buf, piece, line)
                        weight_dtype = np.float64
                        scratches = [_Scratch(weight_dtype) for _ in range(n_slots)]
                        if chunk_weight is not None:
                            chunk_weight = chunk_weight.astype(np.float64)
                    if piece.error != OK:
                        self._raise_parse_error(buf, piece, line)
                    if expected is not None and self.records + piece.n_records > expected:
                        bad = self._line_of_record(buf, piece, line,
                                                   expected - self.records)
                        raise GraphInputError(
                            f"more entries than the {expected} the header declares",
                            self.name, line=bad)
                    # copy the piece's records into chunks, in file order
                    taken = 0
                    while taken < piece.n_records:
                        n = min(piece.n_records - taken, max_edges - filled)
                        if chunk_src is None or chunk_src.size < filled + n:
                            chunk_src, chunk_dst, chunk_weight = self._grow_chunk(
                                chunk_src, chunk_dst, chunk_weight, filled, filled + n,
                                max_edges)
                        chunk_src[filled:filled + n] = piece.src[taken:taken + n]
                        chunk_dst[filled:filled + n] = piece.dst[taken:taken + n]
                        if chunk_weight is not None:
                            chunk_weight[filled:filled + n] = piece.weight[taken:taken + n]
                        filled += n
                        taken += n
                        self.records += n
                        if filled == max_edges:
                            yield take_chunk()
                            chunk_src = None
                            filled = 0
                    line += piece.n_lines
                    free_slots.append(slot)
                reader.release(buf)
            if chunk_src is not None and filled:
                yield take_chunk()
        finally:
            reader.close()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        # every input ends with a newline here (the reader appends one)
        self.lines = max(1, line - 1)
        if expected is not None and self.records < expected:
            raise GraphInputError(
                f"only {self.records} entries but the header declares {expected}"
                f" (the file ends at line {self.lines})", self.name, line=self.lines)


def default_workers() -> int:
    """Parser threads used by default: ``config.PARSE_WORKERS`` or every usable core."""
    if config.PARSE_WORKERS:
        return config.PARSE_WORKERS
    return max(1, min(config.MAX_PARSE_WORKERS, config.default_threads()))
