"""Writers of edge-list text files (GAPBS ``.el`` / ``.wel``).

:func:`write_edge_list` streams any :class:`~garaphpy.storage.edges.EdgeSource`
(a generator, a parsed file, in-memory arrays) into the plain text formats
GAPBS reads (``src/reader.h``): one edge per line, 0-based ids separated by
a space, ``u v`` for ``.el`` and ``u v w`` for ``.wel``.  It is how a
generated graph is handed to other systems (GAPBS, Ligra's converters,
Gunrock's loaders) for the baselines of ``bench/``.

Speed: integer columns are formatted by numba kernels straight into a
``uint8`` buffer (line lengths, prefix sum, then a parallel fill) that is
handed to ``file.write`` while the next chunk is formatted; the 67M edges of
rmat:22 take seconds, where ``numpy.savetxt`` takes minutes.  Real weights
are printed with Python's ``repr`` (the shortest string that reads back to
the same float64), which is slower but exact.

Atomicity: the text goes to a hidden temporary file next to the target,
which is flushed, fsync'ed and renamed over the target only when every edge
has been written; an interrupted or failed write removes the temporary file
and leaves any previous file at the target untouched.
"""

from __future__ import annotations

import gzip
import os
import secrets
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit, prange, uint64

from .. import _numba_setup  # noqa: F401  (threading layer first)

from garaphpy import config
from garaphpy.errors import ConfigError
from garaphpy.storage.edges import EdgeSource

__all__ = ["write_edge_list"]

#: gzip level of ``.gz`` outputs: level 1 is several times faster than the
#: default 9 and only slightly larger on digit text.
GZIP_LEVEL = 1

#: Suffixes of compressed files this writer refuses (only gzip is written).
_UNSUPPORTED_COMPRESSION = (".bz2", ".xz", ".zst", ".zip", ".lz4")

_NEWLINE = np.uint8(ord("\n"))
_SPACE = np.uint8(ord(" "))
_MINUS = np.uint8(ord("-"))
_ZERO = np.uint8(ord("0"))


# ------------------------------------------------------------ formatting --
@njit(inline="always", cache=True)
def _magnitude(x):
    """|x| as uint64 (exact for the smallest int64, too)."""
    if x < 0:
        return uint64(-(x + 1)) + uint64(1)
    return uint64(x)


#: "00", "01", ..., "99": two digits per division when printing.
_DIGIT_PAIRS = np.frombuffer("".join(f"{i:02d}" for i in range(100)).encode("ascii"),
                             dtype=np.uint8).copy()


@njit(inline="always", cache=True)
def _int_width(x):
    """Characters of the decimal text of the int64 ``x``."""
    m = _magnitude(x)
    n = 1
    while m >= uint64(10000):
        m = m // uint64(10000)
        n += 4
    if m >= uint64(10):
        n += 1
        if m >= uint64(100):
            n += 1
            if m >= uint64(1000):
                n += 1
    return n + (1 if x < 0 else 0)


@njit(inline="always", cache=True)
def _put_int(buf, end, x):
    """Write the decimal text of ``x`` so that it ends just before ``end``.

    Returns the position of its first character.
    """
    m = _magnitude(x)
    pos = end
    while m >= uint64(100):
        pair = 2 * (m % uint64(100))
        m = m // uint64(100)
        pos -= 2
        buf[pos] = _DIGIT_PAIRS[pair]
        buf[pos + 1] = _DIGIT_PAIRS[pair + uint64(1)]
    if m >= uint64(10):
        pos -= 2
        buf[pos] = _DIGIT_PAIRS[2 * m]
        buf[pos + 1] = _DIGIT_PAIRS[2 * m + uint64(1)]
    else:
        pos -= 1
        buf[pos] = _ZERO + np.uint8(m)
    if x < 0:
        pos -= 1
        buf[pos] = _MINUS
    return pos


@njit(parallel=True, nogil=True, cache=True)
def _int_line_ends(src, dst, weight, ends):
    """``ends[i]`` = length of line ``i``, then the running sum (line end).

    ``weight`` has length 0 when no weight column is written.
    """
    n = src.shape[0]
    has_weight = weight.shape[0] > 0
    for i in prange(n):
        length = _int_width(src[i]) + 1 + _int_width(dst[i]) + 1
        if has_weight:
            length += _int_width(weight[i]) + 1
        ends[i] = length
    total = 0
    for i in range(n):
        total += ends[i]
        ends[i] = total
    return total


@njit(parallel=True, nogil=True, cache=True)
def _fill_int_lines(src, dst, weight, ends, buf):
    """Write ``"u v[ w]\\n"`` for every edge, line ``i`` ending at ``ends[i]``."""
    n = src.shape[0]
    has_weight = weight.shape[0] > 0
    for i in prange(n):
        pos = ends[i] - 1
        buf[pos] = _NEWLINE
        if has_weight:
            pos = _put_int(buf, pos, weight[i]) - 1
            buf[pos] = _SPACE
        pos = _put_int(buf, pos, dst[i]) - 1
        buf[pos] = _SPACE
        _put_int(buf, pos, src[i])


@njit(parallel=True, nogil=True, cache=True)
def _text_weight_line_ends(src, dst, weight_ends, ends):
    """Like :func:`_int_line_ends`, weight ``i`` being pre-rendered text that
    ends at ``weight_ends[i]`` in a text buffer."""
    n = src.shape[0]
    for i in prange(n):
        start = weight_ends[i - 1] if i > 0 else 0
        ends[i] = _int_width(src[i]) + 1 + _int_width(dst[i]) + 1 + (weight_ends[i] - start) + 1
    total = 0
    for i in range(n):
        total += ends[i]
        ends[i] = total
    return total


@njit(parallel=True, nogil=True, cache=True)
def _fill_text_weight_lines(src, dst, weight_text, weight_ends, ends, buf):
    """Write ``"u v w\\n"``, ``w`` copied from the pre-rendered weight text."""
    n = src.shape[0]
    for i in prange(n):
        pos = ends[i] - 1
        buf[pos] = _NEWLINE
        w_start = weight_ends[i - 1] if i > 0 else 0
        w_len = weight_ends[i] - w_start
        pos -= w_len
        for k in range(w_len):
            buf[pos + k] = weight_text[w_start + k]
        pos -= 1
        buf[pos] = _SPACE
        pos = _put_int(buf, pos, dst[i]) - 1
        buf[pos] = _SPACE
        _put_int(buf, pos, src[i])


def _render_real_weights(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shortest round-trip text of every float (``repr``), concatenated.

    Returns the ASCII bytes and the end offset of each number in them.
    """
    texts = list(map(repr, weight.astype(np.float64, copy=False).tolist()))
    text = np.frombuffer("".join(texts).encode("ascii"), dtype=np.uint8)
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    return text, ends


class _LineFormatter:
    """Turns chunks into text, reusing two output buffers in turn.

    Two buffers let the caller write one chunk (on another thread) while the
    next one is formatted into the other.
    """

    def __init__(self):
        self._buffers = [np.empty(0, np.uint8), np.empty(0, np.uint8)]
        self._turn = 0
        self._ends = np.empty(0, np.int64)

    def _buffer(self, size: int) -> np.ndarray:
        i = self._turn
        self._turn ^= 1
        if self._buffers[i].shape[0] < size:
            self._buffers[i] = np.empty(max(size, self._buffers[i].shape[0] * 5 // 4), np.uint8)
        return self._buffers[i]

    def format(self, src, dst, weight) -> memoryview:
        """The lines of one chunk; ``weight`` is None for ``u v`` lines."""
        src = np.ascontiguousarray(src, dtype=np.int64)
        dst = np.ascontiguousarray(dst, dtype=np.int64)
        if self._ends.shape[0] < src.shape[0]:
            self._ends = np.empty(src.shape[0], np.int64)
        ends = self._ends[:src.shape[0]]
        if weight is not None and weight.dtype.kind == "f":
            text, weight_ends = _render_real_weights(weight)
            total = _text_weight_line_ends(src, dst, weight_ends, ends)
            buf = self._buffer(total)
            _fill_text_weight_lines(src, dst, text, weight_ends, ends, buf)
        else:
            if weight is None:
                weight = np.empty(0, np.int64)
            else:
                weight = np.ascontiguousarray(weight, dtype=np.int64)
            total = _int_line_ends(src, dst, weight, ends)
            buf = self._buffer(total)
            _fill_int_lines(src, dst, weight, ends, buf)
        return memoryview(buf)[:total]


# --------------------------------------------------------------- writing --
def _wants_weights(source: EdgeSource, path: str, weighted: bool | None) -> bool:
    """Resolve ``weighted`` against the source and the file extension."""
    stem = path[:-3] if path.lower().endswith(".gz") else path
    ext = os.path.splitext(stem)[1].lower()
    if weighted is None:
        weighted = {".wel": True, ".el": False}.get(ext, source.weighted)
    elif not isinstance(weighted, (bool, np.bool_)):
        raise ConfigError(f"write_edge_list: weighted must be None, True or False, "
                          f"got {weighted!r}")
    if weighted and not source.weighted:
        raise ConfigError(f"write_edge_list: {path} asks for a weight column "
                          f"(weighted={weighted!r}, extension {ext or 'none'}) but "
                          f"{source.name} has no weights")
    return bool(weighted)


def write_edge_list(source: EdgeSource, path, weighted: bool | None = None, *,
                    chunk_edges: int | None = None) -> int:
    """Write the edges of ``source`` as a GAPBS edge-list text file.

    Parameters
    ----------
    source : EdgeSource
        The edges, streamed once through ``source.chunks(chunk_edges)`` and
        written in that order, 0-based file ids as the source yields them.
    path : str or os.PathLike
        Target file.  A ``.gz`` suffix writes gzip (level ``GZIP_LEVEL``).
        Its directory must exist; an existing file is replaced atomically.
    weighted : bool or None, default None
        Whether to write a third column with the weights: integer weights as
        integers, real ones as the shortest text that reads back exactly.
        None follows the extension (``.wel`` yes, ``.el`` no) and otherwise
        the source.  True (or ``.wel``) on an unweighted source is an error;
        False drops the weights of a weighted one.
    chunk_edges : int, default ``config.READ_CHUNK_EDGES``
        Edges formatted at a time; the writer holds about 2 x 20 bytes per
        edge of it in text buffers.

    Returns
    -------
    int
        Number of edges (lines) written.

    Raises
    ------
    garaphpy.errors.ConfigError
        For an invalid ``weighted``, ``chunk_edges`` or compression suffix.
    garaphpy.errors.GraphInputError
        Whatever the source raises while being read; nothing is written then.
    OSError
        When the target directory is missing or the write fails.
    """
    if chunk_edges is None:
        chunk_edges = config.READ_CHUNK_EDGES
    path = os.fspath(path)
    lowered = path.lower()
    if lowered.endswith(_UNSUPPORTED_COMPRESSION):
        raise ConfigError(f"write_edge_list: {path}: only .gz compression is written")
    if isinstance(chunk_edges, bool) or not isinstance(chunk_edges, (int, np.integer)) \
            or chunk_edges < 1:
        raise ConfigError(f"write_edge_list: chunk_edges must be a positive integer, "
                          f"got {chunk_edges!r}")
    with_weights = _wants_weights(source, path, weighted)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(2, "directory of the output file does not exist", directory)
    if os.path.isdir(path):
        raise IsADirectoryError(21, "output path is a directory", path)

    temporary = os.path.join(directory, f".{os.path.basename(path)}."
                                        f"{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    written = 0
    try:
        with os.fdopen(fd, "wb", buffering=0) as raw:
            out = (gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                 compresslevel=GZIP_LEVEL, mtime=0)
                   if lowered.endswith(".gz") else raw)
            formatter = _LineFormatter()
            with ThreadPoolExecutor(max_workers=1) as pool:
                pending = None
                for chunk in source.chunks(int(chunk_edges)):
                    if len(chunk) == 0:
                        continue
                    weight = chunk.weight if with_weights else None
                    if with_weights and weight is None:
                        raise ConfigError(f"write_edge_list: {source.name} declares "
                                          f"weights but yielded a chunk without them")
                    # format this chunk while the previous one is written
                    text = formatter.format(chunk.src, chunk.dst, weight)
                    if pending is not None:
                        pending.result()
                    pending = pool.submit(out.write, text)
                    written += len(chunk)
                if pending is not None:
                    pending.result()
            if out is not raw:
                out.close()
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
    return written
