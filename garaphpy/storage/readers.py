"""Readers of input graphs: files in every supported format, arrays, SciPy.

Each reader is an :class:`~garaphpy.storage.edges.EdgeSource` that the store
builder consumes twice at most (Garaph section 6.5: preprocessing "only needs
to scan the input data twice"), so :meth:`chunks` re-opens the input on every
call and streams it in bounded chunks, never holding the whole edge list.

Formats (``EdgeSource.format``)
-------------------------------
``snap``   SNAP edge list: ``#`` comment lines, "from to" per line, blanks or
           tabs, arbitrary non-negative int64 ids.  ``num_vertices=None``.
``el``     0-based "u v" edge list (GAP ``.el``).  ``num_vertices=None``.
``wel``    0-based "u v w" edge list (GAP ``.wel``).  ``num_vertices=None``.
           Edge lists also skip blank lines and lines starting with ``#`` or
           ``%``.
``mtx``    Matrix Market coordinate (pattern / integer / real, general /
           symmetric), 1-based.  The size line "rows cols nnz" is checked:
           rows must equal cols and exactly nnz entries must follow.  A
           symmetric file yields both directions of every off-diagonal entry
           (``already_symmetric=True``, ``directed=False``).
``gr``     DIMACS shortest path: ``c`` comments, ``p sp n m``, ``a u v w``
           (1-based, integer weights); exactly m arc lines.  ``directed=True``.
           Or PACE 2016 track A (``p tw n m``, e.g. the DIMACS road graphs
           of ben-strasser/road-graphs-pace16): ``c`` comments, then m "u v"
           lines, 1-based, each undirected edge once, no weights; each yields
           both directions (``already_symmetric=True``, ``directed=False``).
``sg``, ``wsg``, ``bcsr``, ``bwcsr``
           GAP serialized graphs and Subway binary CSR; layouts and sources in
           :mod:`garaphpy.storage.binary`.

Compression
-----------
gzip, bzip2 and xz files are recognised by their magic bytes (whatever their
name) and decompressed while streaming; byte offsets in messages refer to the
decompressed data.

Format detection (``format="auto"``)
------------------------------------
The content decides; the extension (after any ``.gz``/``.bz2``/``.xz``) is a
hint.  Binary content (a NUL byte or many control characters in the first
64 KiB) is read as the binary format the extension names, or else tried
against each binary layout: the one whose header implies exactly the file's
size (and whose first row offset is 0) is taken.  Text starting with
``%%MatrixMarket`` is Matrix Market; text whose first line other than ``c``
comments is a ``p`` (or ``a``) line is DIMACS.  Other text is an edge list:
three columns on the first data line make ``wel``; two columns make what the
extension says (``.el`` -> ``el``, ``.txt``/``.snap`` -> ``snap``), else
``snap`` when ``#`` comments precede them, else ``el``.  A ``.mtx`` or ``.gr``
name on content without a banner / problem line is an error (rather than a
silent fallback to an edge list).  An explicit ``format=`` skips detection.

Weight kind of ``wel`` files
----------------------------
The kind must be known before chunks stream, so it is decided from the first
:data:`garaphpy.config.WEIGHT_PROBE_BYTES` of the (decompressed) file: ``"int"`` when every
weight there is written as an integer (optional sign and digits), else
``"real"``.  Integer weights are kept exact in int64; in a ``"real"`` file they
are converted to float64.  If a later weight of a file probed ``"int"`` is
not an integer, the reader widens on its own: the pass goes on reading
every weight as a real, chunks yielded before it keep their int64 weights
(exact in float64 up to 2**53), and ``weight_kind`` becomes ``"real"`` (a
message at INFO names the line).  An explicit ``weight_kind="int"`` is
kept: such a weight is then an error naming its line.

Errors
------
Every problem raises :class:`~garaphpy.errors.GraphInputError` naming the file
and the 1-based line (text) or byte offset (binary, decompressed).  A plain
edge list without any edge is an "empty graph" error; a Matrix Market or
DIMACS file declaring n > 0 vertices and 0 edges is a valid graph of isolated
vertices.
"""

from __future__ import annotations

import bz2
import gzip
import io
import logging
import lzma
import os
import re
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np

from garaphpy import config
from garaphpy.errors import ConfigError, GraphInputError
from garaphpy.storage import binary, textparse
from garaphpy.storage.edges import EdgeChunk, EdgeSource
from garaphpy.storage.textparse import RecordScanner, RecordSyntax

_log = logging.getLogger("garaphpy.storage")

#: Every file format name :func:`open_source` accepts besides "auto".
FILE_FORMATS = ("snap", "el", "wel", "mtx", "gr", "sg", "wsg", "bcsr", "bwcsr")

_COMPRESSION_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
)
_COMPRESSION_SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".xz": "xz"}
_EXTENSION_FORMATS = {
    ".el": "el", ".wel": "wel", ".mtx": "mtx", ".mm": "mtx", ".gr": "gr",
    ".sg": "sg", ".wsg": "wsg", ".bcsr": "bcsr", ".bwcsr": "bwcsr",
    ".txt": "snap", ".snap": "snap",
}
_UTF8_BOM = b"\xef\xbb\xbf"


# ------------------------------------------------------------------- files --
class _GuardedStream(io.RawIOBase):
    """A readable stream that turns decompression failures into GraphInputError.

    It also counts the bytes delivered, which locates the failure.
    """

    def __init__(self, inner: BinaryIO, name: str, compression: str | None):
        super().__init__()
        self._inner = inner
        self._name = name
        self._compression = compression
        self.position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            got = self._inner.readinto(buffer)
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
            what = f"{self._compression} data" if self._compression else "file"
            raise GraphInputError(f"cannot read the {what}: {exc}", self._name,
                                  offset=self.position) from exc
        got = got or 0
        self.position += got
        return got

    def close(self) -> None:
        if not self.closed:
            self._inner.close()
        super().close()


class InputFile:
    """A graph file on disk: where it is, how it is compressed, how to read it.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Raises
    ------
    GraphInputError
        The file does not exist, is not a regular file or cannot be read.
    """

    def __init__(self, path: str | os.PathLike):
        self.name = str(path)
        self.path = Path(path)
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            if self.path.is_symlink():
                raise GraphInputError(f"a broken symbolic link (to {os.readlink(self.path)}, "
                                      "which does not exist)", self.name) from None
            raise GraphInputError("no such file", self.name) from None
        except OSError as exc:
            raise GraphInputError(f"cannot access the file: {exc.strerror}",
                                  self.name) from None
        if not self.path.is_file():
            raise GraphInputError("not a regular file", self.name)
        self.resolved = str(self.path.resolve())
        self.size = int(stat.st_size)
        self.mtime_ns = int(stat.st_mtime_ns)
        try:
            with open(self.path, "rb") as raw:
                magic = raw.read(8)
        except OSError as exc:
            raise GraphInputError(f"cannot read the file: {exc.strerror}",
                                  self.name) from None
        self.compression = next((kind for prefix, kind in _COMPRESSION_MAGIC
                                 if magic.startswith(prefix)), None)
        self._content_size: int | None = None

    @property
    def format_hint(self) -> str | None:
        """The format the file name suggests, if any."""
        suffixes = [s.lower() for s in self.path.suffixes]
        if suffixes and suffixes[-1] in _COMPRESSION_SUFFIXES:
            suffixes.pop()
        return _EXTENSION_FORMATS.get(suffixes[-1]) if suffixes else None

    def open(self) -> _GuardedStream:
        """Open the (decompressed) content for reading from its start."""
        try:
            if self.compression == "gzip":
                inner = gzip.open(self.path, "rb")
            elif self.compression == "bz2":
                inner = bz2.open(self.path, "rb")
            elif self.compression == "xz":
                inner = lzma.open(self.path, "rb")
            else:
                inner = open(self.path, "rb", buffering=0)
        except OSError as exc:
            raise GraphInputError(f"cannot read the file: {exc}", self.name) from None
        return _GuardedStream(inner, self.name, self.compression)

    def head(self, nbytes: int) -> tuple[bytes, bool]:
        """The first ``nbytes`` of the content, and whether that is all of it."""
        with self.open() as stream:
            data = _read_exactly_up_to(stream, nbytes + 1)
        return data[:nbytes], len(data) <= nbytes

    def content_size(self) -> int:
        """Size of the (decompressed) content in bytes.

        For a compressed file this decompresses it (once: the size is kept).
        """
        if self.compression is None:
            return self.size
        if self._content_size is None:
            total = 0
            block = bytearray(8 << 20)
            with self.open() as stream:
                while got := stream.readinto(block):
                    total += got
            self._content_size = total
        return self._content_size

    def identity(self, format: str, **extra) -> dict:
        """Resolved path, size, modification time and format, as a dict."""
        return {"kind": "file", "path": self.resolved, "size": self.size,
                "mtime_ns": self.mtime_ns, "format": format,
                "compression": self.compression, **extra}


def _read_exactly_up_to(stream: BinaryIO, nbytes: int) -> bytes:
    """Read ``nbytes`` bytes, or fewer at the end of the stream."""
    out = bytearray(nbytes)
    view = memoryview(out)
    filled = 0
    while filled < nbytes:
        got = stream.readinto(view[filled:])
        if not got:
            break
        filled += got
    return bytes(out[:filled])


def _skip_bytes(stream: BinaryIO, nbytes: int) -> None:
    """Advance a stream by ``nbytes`` (reading: compressed streams cannot seek)."""
    if nbytes:
        _read_exactly_up_to(stream, nbytes)


def _check_max_edges(max_edges) -> int:
    if isinstance(max_edges, bool) or not isinstance(max_edges, (int, np.integer)) \
            or max_edges < 1:
        raise ConfigError(f"max_edges must be a positive integer, got {max_edges!r}")
    return int(max_edges)


def _split(chunk: EdgeChunk, max_edges: int) -> Iterator[EdgeChunk]:
    """Cut a chunk into pieces of at most ``max_edges`` edges."""
    if len(chunk) <= max_edges:
        yield chunk
        return
    for start in range(0, len(chunk), max_edges):
        stop = start + max_edges
        yield EdgeChunk(chunk.src[start:stop], chunk.dst[start:stop],
                        None if chunk.weight is None else chunk.weight[start:stop])


# ------------------------------------------------------------- text lines --
def _head_lines(head: bytes, complete: bool) -> Iterator[tuple[int, int, int, str]]:
    """Yield ``(line_number, start, end, text)`` for each whole line of ``head``.

    ``end`` is the byte offset just after the line's newline.  A final line
    without a newline is included only when ``head`` is the whole content.
    """
    pos = 0
    number = 1
    if head.startswith(_UTF8_BOM):
        pos = len(_UTF8_BOM)
    while pos < len(head):
        newline = head.find(b"\n", pos)
        if newline < 0:
            if not complete:
                return
            end = len(head)
        else:
            end = newline + 1
        text = head[pos:end].decode("utf-8", errors="replace").rstrip("\r\n")
        yield number, pos, end, text
        number += 1
        pos = end


def _looks_binary(head: bytes) -> bool:
    """Whether content is binary: any NUL byte, or over 5% control characters."""
    if not head:
        return False
    if b"\x00" in head:
        return True
    controls = sum(head.count(bytes([c])) for c in range(1, 32) if c not in (9, 10, 12, 13))
    return controls > 0.05 * len(head)


def _sniff_text_format(head: bytes, complete: bool, hint: str | None,
                       name: str) -> str:
    """Decide the format of text content (see the module docstring)."""
    saw_hash = False
    saw_dimacs_comment = False
    first_nonblank = True
    for number, _, _, text in _head_lines(head, complete):
        stripped = text.strip()
        if not stripped:
            continue
        if first_nonblank and stripped.lower().startswith("%%matrixmarket"):
            return "mtx"
        first_nonblank = False
        tokens = stripped.split()
        if tokens[0] == "c":
            saw_dimacs_comment = True
            continue
        if tokens[0] in ("p", "a"):
            return "gr"
        if stripped[0] == "#":
            saw_hash = True
            continue
        if stripped[0] == "%":
            continue
        if saw_dimacs_comment:
            raise GraphInputError(
                "cannot detect the format: 'c' comment lines (DIMACS) are followed "
                "by a line that is neither 'p' nor 'a'; pass format=", name, line=number)
        if hint in ("mtx", "gr"):
            expected = ("a '%%MatrixMarket' banner on the first line" if hint == "mtx"
                        else "a 'p sp n m' or 'p tw n m' line before the edges")
            raise GraphInputError(
                f"the file name says {hint} but the content has no {expected}; "
                "pass format='el', 'wel' or 'snap' to read it as an edge list",
                name, line=number)
        if len(tokens) == 2:
            if hint in ("el", "snap"):
                return hint
            return "snap" if saw_hash else "el"
        if len(tokens) == 3:
            return "wel"
        raise GraphInputError(
            f"cannot detect the format: the first data line has {len(tokens)} columns "
            "(edge lists have 2 or 3); pass format=", name, line=number)
    # no data line in the sampled head
    if saw_dimacs_comment:
        return "gr"
    if hint in ("el", "wel", "snap", "mtx", "gr"):
        return hint
    return "snap" if saw_hash else "el"


def _detect_format(file: InputFile) -> str:
    """The format of a file, from its content and, as a hint, its name."""
    hint = file.format_hint
    head, complete = file.head(config.DETECT_BYTES)
    if _looks_binary(head):
        if hint in binary.BINARY_FORMATS:
            return hint
        size = file.content_size()
        layouts = binary.matching_layouts(head, size, file.name)
        if len(layouts) == 1:
            return layouts[0].format
        if layouts:
            names = ", ".join(layout.format for layout in layouts)
            raise GraphInputError(
                f"ambiguous binary content: it fits the {names} layouts equally; "
                "pass format=", file.name, offset=0)
        raise GraphInputError(
            "unknown format: binary content that matches no supported layout "
            f"({', '.join(binary.BINARY_FORMATS)}: header and file size disagree); "
            "pass format= to see why", file.name, offset=0)
    if hint in binary.BINARY_FORMATS:
        return hint  # a binary extension wins: its reader checks header and size
    return _sniff_text_format(head, complete, hint, file.name)


# --------------------------------------------------------------- sources --
class FileSource(EdgeSource):
    """Base of the file readers: name, sizes and identity of an :class:`InputFile`."""

    def __init__(self, file: InputFile, format: str):
        self.file = file
        self.name = file.name
        self.format = format
        self.input_bytes = file.size

    def identity(self) -> dict:
        """Resolved path, size, mtime_ns and format (and the weight kind)."""
        return self.file.identity(self.format, weight_kind=self.weight_kind)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.name!r}, format={self.format!r}, "
                f"num_vertices={self.num_vertices}, weight_kind={self.weight_kind!r})")


class TextSource(FileSource):
    """A text format whose records the numba scanner parses.

    Subclasses set ``syntax``, ``data_start`` (byte offset of the first line
    after the header), ``first_line`` and ``expected_records``.
    """

    syntax: RecordSyntax
    #: Decimal weights read from text are stored as float64 under
    #: ``weight_dtype="auto"`` (float32 would round ``1.000000001`` to 1.0).
    real_weight_dtype = np.dtype(np.float64)
    data_start: int = 0
    first_line: int = 1
    expected_records: int | None = None
    non_integer_hint: str = ""

    def _scanner(self) -> RecordScanner:
        workers = textparse.default_workers()
        if self.file.compression is not None:
            # decompression keeps the reader thread busy on a core of its own
            workers = max(1, workers - 1)
        return RecordScanner(self.name, self.syntax, first_line=self.first_line,
                             expected_records=self.expected_records, workers=workers,
                             non_integer_hint=self.non_integer_hint)

    def _records(self, max_edges: int) -> Iterator[tuple]:
        """Raw ``(src, dst, weight)`` arrays of one pass, then :meth:`_finished`."""
        scanner = self._scanner()
        with self.file.open() as stream:
            _skip_bytes(stream, self.data_start)
            yield from scanner.chunks(stream, max_edges)
        self._finished(scanner)

    def locate_weight(self, test) -> dict | None:
        """The file and line of the first weight passing ``test`` (EdgeSource)."""
        scanner = self._scanner()
        with self.file.open() as stream:
            _skip_bytes(stream, self.data_start)
            found = scanner.locate(stream, test)
        if found is None:
            return None
        return {"path": self.name, "line": found[0], "value": found[1]}

    def _finished(self, scanner: RecordScanner) -> None:
        """Checks once a pass has read everything (e.g. the empty graph)."""

    def chunks(self, max_edges: int) -> Iterator[EdgeChunk]:
        max_edges = _check_max_edges(max_edges)
        for src, dst, weight in self._records(max_edges):
            yield EdgeChunk(src, dst, weight)

    def _mirrored_chunks(self, max_edges: int) -> Iterator[EdgeChunk]:
        """Chunks of a file listing each undirected edge once: a record (u, v),
        u != v, stands for u -> v and v -> u; a loop (u, u) for itself."""
        max_edges = _check_max_edges(max_edges)
        for src, dst, weight in self._records(max(1, max_edges // 2)):
            off_diagonal = src != dst
            mirrored = EdgeChunk(
                np.concatenate([src, dst[off_diagonal]]),
                np.concatenate([dst, src[off_diagonal]]),
                None if weight is None else np.concatenate([weight, weight[off_diagonal]]))
            yield from _split(mirrored, max_edges)


class EdgeListSource(TextSource):
    """SNAP, ``el`` and ``wel`` edge lists: 0-based file ids, no declared size.

    Parameters
    ----------
    file : InputFile
    format : {"snap", "el", "wel"}
    weight_kind : {"int", "real"}, optional
        For ``wel``: the weight type; by default decided from the first
        :data:`garaphpy.config.WEIGHT_PROBE_BYTES` (see the module docstring).
    """

    def __init__(self, file: InputFile, format: str, weight_kind: str | None = None):
        super().__init__(file, format)
        head, complete = file.head(max(config.DETECT_BYTES, config.WEIGHT_PROBE_BYTES)
                                   if format == "wel" else config.DETECT_BYTES)
        self.data_start = len(_UTF8_BOM) if head.startswith(_UTF8_BOM) else 0
        self.first_line = 1
        if complete and not any(_is_data_line(text)
                                for *_, text in _head_lines(head, complete)):
            last = head.count(b"\n") + (0 if head.endswith(b"\n") or not head else 1)
            raise GraphInputError("empty graph: the file has no edges", self.name,
                                  line=max(1, last))
        self._widens = False
        if format == "wel":
            if weight_kind is None:
                probe = head[self.data_start:config.WEIGHT_PROBE_BYTES]
                weight_kind = _probe_weight_kind(
                    probe, complete and len(head) <= config.WEIGHT_PROBE_BYTES)
                self._widens = weight_kind == "int"
            elif weight_kind not in ("int", "real"):
                raise ConfigError(
                    f"weight_kind must be 'int', 'real' or None, got {weight_kind!r}")
            self.weight_kind = weight_kind
            mode = textparse.WEIGHT_INT if weight_kind == "int" else textparse.WEIGHT_REAL
            self.non_integer_hint = (
                f" (integer weights were detected in the first "
                f"{config.WEIGHT_PROBE_BYTES >> 20} MiB; pass weight_kind='real')")
        else:
            self.weight_kind = None
            mode = textparse.WEIGHT_NONE
        self.syntax = RecordSyntax(comment_chars="#%", weight_mode=mode)
        self.num_vertices = None
        self.id_base = 0
        self.directed = None
        self.already_symmetric = False
        self.num_edges_hint = _estimate_lines(head, complete, file)

        self._identity = file.identity(format, weight_kind=weight_kind)

    def identity(self) -> dict:
        """As :meth:`FileSource.identity`, with the weight kind decided before any
        pass (widening during a pass does not change which input this is)."""
        return dict(self._identity)

    def _scanner(self) -> RecordScanner:
        scanner = super()._scanner()
        if self._widens and self.weight_kind == "int":
            scanner.on_widen = self._widen
        return scanner

    def _widen(self, line: int) -> None:
        """A weight after the probed head is not an integer: every weight is a real."""
        _log.info("%s:%d: a weight is not an integer (the first %d MiB held integers "
                  "only): reading every weight as a real (float64)", self.name, line,
                  config.WEIGHT_PROBE_BYTES >> 20)
        self.weight_kind = "real"
        self.syntax = RecordSyntax(comment_chars="#%", weight_mode=textparse.WEIGHT_REAL)

    def _finished(self, scanner: RecordScanner) -> None:
        if scanner.records == 0:
            raise GraphInputError("empty graph: the file has no edges", self.name,
                                  line=scanner.lines)


def _is_data_line(text: str) -> bool:
    stripped = text.strip()
    return bool(stripped) and stripped[0] not in "#%"


def _estimate_lines(head: bytes, complete: bool, file: InputFile) -> int | None:
    """Edges of an edge list: exact for a small file, else size / mean line length."""
    lines = head.count(b"\n")
    if complete:
        return lines + (0 if head.endswith(b"\n") or not head else 1)
    if file.compression is not None or lines == 0:
        return None
    return int(file.size / (len(head) / lines))


def _probe_weight_kind(head: bytes, complete: bool) -> str:
    """"int" if every weight in ``head`` is written as an integer, else "real"."""
    if not complete:
        cut = head.rfind(b"\n")
        head = head[:cut + 1] if cut >= 0 else b""
    if not head:
        return "int"
    if not head.endswith(b"\n"):
        head += b"\n"
    buf = np.frombuffer(head, dtype=np.uint8).copy()
    bound = buf.size // 4 + 1
    src = np.empty(bound, dtype=np.int64)
    dst = np.empty(bound, dtype=np.int64)
    weight = np.empty(bound, dtype=np.int64)
    syntax = RecordSyntax(comment_chars="#%", weight_mode=textparse.WEIGHT_INT)
    result = textparse.parse_records(buf, 0, buf.size, *syntax.kernel_arguments(),
                                     src, dst, weight, np.empty(0, np.float64), bound)
    return "real" if result[3] == textparse.ERR_NON_INTEGER_WEIGHT else "int"


def _header_lines(file: InputFile) -> Iterator[tuple[int, int, int, str]]:
    """Whole lines of a file's start, reading more until config.HEADER_MAX_BYTES."""
    size = config.DETECT_BYTES
    seen = 0
    while True:
        head, complete = file.head(size)
        for line in _head_lines(head, complete):
            if line[0] > seen:
                seen = line[0]
                yield line
        if complete:
            return
        if size >= config.HEADER_MAX_BYTES:
            raise GraphInputError(
                f"the header is longer than {config.HEADER_MAX_BYTES >> 20} MiB", file.name,
                line=seen + 1)
        size *= 4


def _parse_count(token: str, what: str, name: str, line: int) -> int:
    try:
        if not re.fullmatch(r"-?[0-9]+", token):     # int() takes 1_0, +3, other digits
            raise ValueError(token)
        value = int(token)
    except ValueError:
        raise GraphInputError(f"{what} '{token}' is not an integer", name,
                              line=line) from None
    if value < 0:
        raise GraphInputError(f"{what} {value} is negative", name, line=line)
    return value


class MatrixMarketSource(TextSource):
    """Matrix Market coordinate files (pattern / integer / real; general / symmetric).

    Reference: "The Matrix Market Exchange Formats: Initial Design" (Boisvert,
    Pozo, Remington, NIST 1996).  Ids are 1-based (``id_base=1``) and
    ``num_vertices`` is the number of rows.
    """

    def __init__(self, file: InputFile):
        super().__init__(file, "mtx")
        lines = _header_lines(file)
        banner = next(lines, None)
        if banner is None:
            raise GraphInputError("empty graph: the file is empty", self.name, line=1)
        number, _, _, text = banner
        tokens = text.split()
        if not tokens or tokens[0].lower() != "%%matrixmarket":
            raise GraphInputError(
                "not a Matrix Market file: the first line is not a '%%MatrixMarket' "
                "banner", self.name, line=number)
        if len(tokens) != 5:
            raise GraphInputError(
                "malformed Matrix Market banner: expected '%%MatrixMarket matrix "
                "coordinate <field> <symmetry>'", self.name, line=number)
        obj, layout, field, symmetry = (t.lower() for t in tokens[1:])
        if obj != "matrix":
            raise GraphInputError(f"unsupported Matrix Market object '{obj}' (only "
                                  "'matrix' is a graph)", self.name, line=number)
        if layout != "coordinate":
            raise GraphInputError(
                f"unsupported Matrix Market format '{layout}' (only 'coordinate' "
                "is read; a dense 'array' is not a graph)", self.name, line=number)
        if field not in ("pattern", "integer", "real", "double"):
            raise GraphInputError(
                f"unsupported Matrix Market field '{field}' (pattern, integer and "
                "real are read)", self.name, line=number)
        if symmetry not in ("general", "symmetric"):
            raise GraphInputError(
                f"unsupported Matrix Market symmetry '{symmetry}' (general and "
                "symmetric are read)", self.name, line=number)
        for number, _, end, text in lines:
            stripped = text.strip()
            if not stripped or stripped.startswith("%"):
                continue
            tokens = stripped.split()
            if len(tokens) != 3:
                raise GraphInputError(
                    "malformed Matrix Market size line: expected 'rows cols nnz', "
                    f"found {len(tokens)} values", self.name, line=number)
            rows, cols, nnz = (_parse_count(t, what, self.name, number) for t, what in
                               zip(tokens, ("row count", "column count", "entry count")))
            break
        else:
            raise GraphInputError("the Matrix Market size line 'rows cols nnz' is "
                                  "missing", self.name, line=number)
        if rows != cols:
            raise GraphInputError(
                f"the matrix is {rows} x {cols}; a graph's adjacency matrix must be "
                "square", self.name, line=number)
        if rows == 0:
            raise GraphInputError("empty graph: the matrix has no rows", self.name,
                                  line=number)
        self.data_start = end
        self.first_line = number + 1
        self.expected_records = nnz
        self.symmetric = symmetry == "symmetric"
        self.weight_kind = {"pattern": None, "integer": "int"}.get(field, "real")
        mode = {None: textparse.WEIGHT_NONE, "int": textparse.WEIGHT_INT,
                "real": textparse.WEIGHT_REAL}[self.weight_kind]
        self.syntax = RecordSyntax(comment_chars="%", weight_mode=mode, id_base=1,
                                   id_limit=rows)
        self.non_integer_hint = " (the Matrix Market field is 'integer')"
        self.num_vertices = rows
        self.id_base = 1
        self.directed = False if self.symmetric else None
        self.already_symmetric = self.symmetric
        self.num_edges_hint = 2 * nnz if self.symmetric else nnz

    def chunks(self, max_edges: int) -> Iterator[EdgeChunk]:
        if not self.symmetric:
            return super().chunks(max_edges)
        return self._mirrored_chunks(max_edges)


class DimacsSource(TextSource):
    """DIMACS ``.gr`` files: shortest-path arcs or PACE 2016 undirected edges.

    ``c`` comment lines and one problem line, then the records, with 1-based
    vertex ids below the declared n:

    * ``p sp n m``: m ``a u v w`` arc lines with integer weights (9th DIMACS
      Implementation Challenge); a directed graph.
    * ``p tw n m``: m ``u v`` edge lines, each undirected edge listed once and
      no weights (PACE 2016 track A, e.g. the road graphs converted by
      ben-strasser/road-graphs-pace16); every line yields ``u -> v`` and
      ``v -> u``, so the graph has 2m directed edges.
    """

    def __init__(self, file: InputFile):
        super().__init__(file, "gr")
        number = 0
        for number, _, end, text in _header_lines(file):
            stripped = text.strip()
            if not stripped or stripped[0] == "c":
                continue
            tokens = stripped.split()
            if tokens[0] == "a":
                raise GraphInputError("arc line before the 'p sp n m' problem line",
                                      self.name, line=number)
            if tokens[0] != "p":
                raise GraphInputError(
                    "not a DIMACS file: expected 'c' comments and a 'p sp n m' or "
                    f"'p tw n m' line, found '{stripped[:40]}'", self.name, line=number)
            if len(tokens) != 4:
                raise GraphInputError(
                    f"malformed problem line: expected 'p sp n m' or 'p tw n m', found "
                    f"{len(tokens)} fields", self.name, line=number)
            if tokens[1] not in ("sp", "tw"):
                raise GraphInputError(
                    f"unsupported DIMACS problem type '{tokens[1]}' (only 'sp' and 'tw' "
                    "are read: shortest-path arcs and PACE 2016 edges)", self.name,
                    line=number)
            n = _parse_count(tokens[2], "vertex count", self.name, number)
            m = _parse_count(tokens[3], "arc count" if tokens[1] == "sp" else "edge count",
                             self.name, number)
            break
        else:
            raise GraphInputError("the 'p sp n m' or 'p tw n m' problem line is missing",
                                  self.name, line=max(1, number))
        if n == 0:
            raise GraphInputError("empty graph: the problem line declares 0 vertices",
                                  self.name, line=number)
        self.problem = tokens[1]
        self.data_start = end
        self.first_line = number + 1
        self.expected_records = m
        self.num_vertices = n
        self.id_base = 1
        self.directed = self.problem == "sp"
        self.already_symmetric = not self.directed
        if self.directed:
            self.syntax = RecordSyntax(comment_chars="c", record_tag="a",
                                       weight_mode=textparse.WEIGHT_INT, id_base=1,
                                       id_limit=n)
            self.non_integer_hint = " (DIMACS arc weights are integers)"
            self.weight_kind = "int"
            self.num_edges_hint = m
            return
        self.syntax = RecordSyntax(
            comment_chars="c", id_base=1, id_limit=n, foreign_lines=(
                ("a", "an 'a u v w' arc line in a 'p tw' file (PACE edge lines are 'u v')"),
                ("p", "a second problem line after the edges (the 'p tw n m' line "
                      "comes first, once)")))
        self.weight_kind = None
        self.num_edges_hint = 2 * m

    def chunks(self, max_edges: int) -> Iterator[EdgeChunk]:
        if self.directed:
            return super().chunks(max_edges)
        return self._mirrored_chunks(max_edges)


class BinaryCSRSource(FileSource):
    """GAP ``.sg``/``.wsg`` and Subway ``.bcsr``/``.bwcsr`` files.

    The layouts are documented in :mod:`garaphpy.storage.binary`.  The header
    and the exact file size are checked when the source is opened.
    """

    def __init__(self, file: InputFile, format: str):
        super().__init__(file, format)
        head, _ = file.head(binary.header_bytes(format))
        self.layout = binary.parse_header(format, head, self.name)
        binary.check_size(self.layout, file.content_size(), self.name)
        if self.layout.num_vertices == 0:
            raise GraphInputError("empty graph: the header declares 0 vertices",
                                  self.name, offset=0)
        self.num_vertices = self.layout.num_vertices
        self.num_edges_hint = self.layout.num_entries
        self.weight_kind = "int" if self.layout.weighted else None
        self.id_base = 0
        self.directed = self.layout.directed
        self.already_symmetric = self.layout.directed is False

    def chunks(self, max_edges: int) -> Iterator[EdgeChunk]:
        max_edges = _check_max_edges(max_edges)
        with self.file.open() as stream:
            _skip_bytes(stream, self.layout.offsets_at)
            yield from binary.iter_edges(stream, self.layout, self.name, max_edges)

    def locate_weight(self, test) -> dict | None:
        """The file and byte offset of the first weight passing ``test`` (EdgeSource)."""
        found = super().locate_weight(test)
        if found is not None:
            edge = found.pop("edge")
            found["offset"] = self.layout.neighbours_at + edge * self.layout.entry_bytes + 4
        return found


def open_source(path: str | os.PathLike, format: str = "auto", *,
                weight_kind: str | None = None) -> EdgeSource:
    """Open a graph file as an :class:`~garaphpy.storage.edges.EdgeSource`.

    Parameters
    ----------
    path : str or os.PathLike
        The file; gzip, bzip2 and xz compression is recognised by content.
    format : str, default "auto"
        One of :data:`FILE_FORMATS`, or "auto" to detect it from the content
        (the extension is only a hint; see the module docstring).
    weight_kind : {"int", "real"}, optional
        Only for ``wel`` files: the weight type, instead of deciding it from
        the first :data:`garaphpy.config.WEIGHT_PROBE_BYTES`.

    Returns
    -------
    EdgeSource
        A reader whose :meth:`~EdgeSource.chunks` streams the edges.

    Raises
    ------
    GraphInputError
        The file is missing or unreadable, its format is unknown or cannot
        be detected, or its header is malformed (naming the file and the line
        or byte offset).  Malformed records are reported by ``chunks``.
    """
    file = InputFile(path)
    if format == "auto":
        format = _detect_format(file)
    elif format not in FILE_FORMATS:
        raise GraphInputError(
            f"unknown format {format!r}; format= must be 'auto' or one of "
            f"{', '.join(FILE_FORMATS)}", file.name)
    if weight_kind is not None and format != "wel":
        raise ConfigError(f"weight_kind is only meaningful for 'wel' files, not "
                          f"{format!r}")
    if format in ("snap", "el", "wel"):
        return EdgeListSource(file, format, weight_kind)
    if format == "mtx":
        return MatrixMarketSource(file)
    if format == "gr":
        return DimacsSource(file)
    return BinaryCSRSource(file, format)


# ------------------------------------------------------------- in memory --
class ArraySource(EdgeSource):
    """Edges held in memory as arrays (see :func:`from_arrays`, :func:`from_scipy`).

    Chunks are views of the caller's arrays when their ids are int32 or int64
    (no copy: a 67 M-edge graph streams without doubling its memory), else
    int64 copies; weights are int64 or float64.  Consumers must not modify
    chunks (the EdgeChunk contract).
    """

    def __init__(self, src: np.ndarray, dst: np.ndarray, weight: np.ndarray | None,
                 num_vertices: int | None, name: str, format: str):
        self.name = name
        self.format = format
        self._src = src
        self._dst = dst
        self._weight = weight
        self.num_vertices = num_vertices
        self.num_edges_hint = int(src.shape[0])
        self.weight_kind = (None if weight is None else
                            "int" if np.issubdtype(weight.dtype, np.integer) else "real")
        if self.weight_kind == "real":
            self.real_weight_dtype = np.dtype(np.float64) if weight.dtype.itemsize > 4 \
                else np.dtype(np.float32)
        self.id_base = 0
        self.directed = None
        self.already_symmetric = False
        self.input_bytes = int(src.nbytes + dst.nbytes
                               + (0 if weight is None else weight.nbytes))

    def chunks(self, max_edges: int) -> Iterator[EdgeChunk]:
        max_edges = _check_max_edges(max_edges)
        weight_dtype = np.int64 if self.weight_kind == "int" else np.float64
        for start in range(0, self._src.shape[0], max_edges):
            stop = start + max_edges
            yield EdgeChunk(
                _signed_ids(self._src[start:stop]),
                _signed_ids(self._dst[start:stop]),
                None if self._weight is None
                else self._weight[start:stop].astype(weight_dtype, copy=False))

    def identity(self) -> dict:
        """Sizes, dtypes and a CRC-32 of the contents."""
        checksum = 0
        for array in (self._src, self._dst, self._weight):
            if array is not None:
                checksum = zlib.crc32(memoryview(np.ascontiguousarray(array)).cast("B"),
                                      checksum)
        return {"kind": self.format, "name": self.name,
                "num_edges": int(self._src.shape[0]),
                "num_vertices": self.num_vertices,
                "dtypes": [str(a.dtype) for a in (self._src, self._dst, self._weight)
                           if a is not None],
                "crc32": checksum}

    def __repr__(self) -> str:
        return (f"ArraySource({self.name!r}, format={self.format!r}, "
                f"num_edges={self.num_edges_hint}, num_vertices={self.num_vertices})")


def _signed_ids(ids: np.ndarray) -> np.ndarray:
    """``ids`` itself when int32 or int64, else an int64 copy."""
    if ids.dtype in (np.dtype(np.int32), np.dtype(np.int64)):
        return ids
    return ids.astype(np.int64)


def _validated_ids(values, argument: str, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise GraphInputError(f"{argument} must be one-dimensional, got shape "
                              f"{array.shape}", name)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        if array.size == 0 and array.dtype == np.float64:  # np.asarray([])
            return array.astype(np.int64)
        raise GraphInputError(f"{argument} must have an integer dtype, got "
                              f"{array.dtype}", name)
    if array.size:
        if np.issubdtype(array.dtype, np.signedinteger):
            negative = np.flatnonzero(array < 0)
            if negative.size:
                k = int(negative[0])
                raise GraphInputError(f"{argument} contains a negative id ({int(array[k])}"
                                      f" at index {k})", name)
        elif array.dtype.itemsize == 8:
            too_large = np.flatnonzero(array > np.iinfo(np.int64).max)
            if too_large.size:
                k = int(too_large[0])
                raise GraphInputError(f"{argument} contains id {int(array[k])} at index "
                                      f"{k}, which does not fit in int64", name)
    return array


def _validated_weights(values, length: int, name: str, argument: str = "weight",
                       ids: str = "src") -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise GraphInputError(f"{argument} must be one-dimensional, got shape {array.shape}",
                              name)
    if array.shape[0] != length:
        raise GraphInputError(f"{argument} has length {array.shape[0]} but {ids} has {length}",
                              name)
    if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.integer)
                                       or np.issubdtype(array.dtype, np.floating)):
        raise GraphInputError(f"{argument} must have an integer or floating dtype, got "
                              f"{array.dtype}", name)
    if np.issubdtype(array.dtype, np.floating) and array.size:
        bad = np.flatnonzero(~np.isfinite(array))
        if bad.size:
            k = int(bad[0])
            raise GraphInputError(f"{argument} contains a non-finite value ({array[k]} at "
                                  f"index {k}); NaN/inf weights are not allowed", name)
    if array.dtype == np.uint64 and array.size and array.max() > np.iinfo(np.int64).max:
        k = int(np.argmax(array > np.iinfo(np.int64).max))
        raise GraphInputError(f"{argument} holds {int(array[k])} at index {k}, which does "
                              "not fit in int64", name)
    return array


def _validated_num_vertices(num_vertices, src, dst, name: str,
                            ids: tuple[str, str] = ("src", "dst")) -> int | None:
    if num_vertices is None:
        return None
    if isinstance(num_vertices, bool) or not isinstance(num_vertices, (int, np.integer)):
        raise GraphInputError(f"num_vertices must be an integer or None, got "
                              f"{num_vertices!r}", name)
    num_vertices = int(num_vertices)
    if num_vertices < 0:
        raise GraphInputError(f"num_vertices must be >= 0, got {num_vertices}", name)
    for argument, array in zip(ids, (src, dst)):
        if array.size:
            too_large = np.flatnonzero(array >= num_vertices)
            if too_large.size:
                k = int(too_large[0])
                raise GraphInputError(
                    f"{argument} contains id {int(array[k])} at index {k}, but "
                    f"num_vertices is {num_vertices} (ids must be below it)", name)
    return num_vertices


def from_arrays(src, dst, weight=None, num_vertices: int | None = None,
                name: str = "<arrays>",
                arguments: tuple[str, str, str] = ("src", "dst", "weight")) -> EdgeSource:
    """An edge source over in-memory arrays.

    Parameters
    ----------
    src, dst : array_like of integers, shape (m,)
        Endpoints of the m edges, 0-based, non-negative.
    weight : array_like, shape (m,), optional
        Edge weights: an integer dtype gives ``weight_kind="int"``, a floating
        one ``"real"``.  NaN and infinities are rejected.
    num_vertices : int, optional
        Declared vertex count (ids must be below it; vertices no edge touches
        are isolated).  None: the vertices are the ids that occur.
    name : str, default "<arrays>"
        Name used in messages and in the manifest.
    arguments : (str, str, str)
        What messages call src, dst and weight (``from_pandas`` names the
        user's columns).

    Returns
    -------
    EdgeSource
        ``format="arrays"``; chunks are int64 copies.

    Raises
    ------
    GraphInputError
        Naming the argument: not one-dimensional, lengths differ, non-integer
        id dtype, negative ids, ids >= num_vertices, non-finite weights, or
        no edges and no declared vertices (empty graph).
    """
    src_name, dst_name, weight_name = arguments
    src_array = _validated_ids(src, src_name, name)
    dst_array = _validated_ids(dst, dst_name, name)
    if src_array.shape[0] != dst_array.shape[0]:
        raise GraphInputError(f"{src_name} and {dst_name} have different lengths "
                              f"({src_array.shape[0]} and {dst_array.shape[0]})", name)
    weight_array = (None if weight is None
                    else _validated_weights(weight, src_array.shape[0], name, weight_name,
                                            src_name))
    num_vertices = _validated_num_vertices(num_vertices, src_array, dst_array, name,
                                           (src_name, dst_name))
    if src_array.shape[0] == 0 and not num_vertices:
        raise GraphInputError("empty graph: no edges (src and dst are empty) and no "
                              "declared vertices (num_vertices)", name)
    return ArraySource(src_array, dst_array, weight_array, num_vertices, name, "arrays")


def from_scipy(matrix, name: str = "<scipy>") -> EdgeSource:
    """An edge source over a SciPy sparse adjacency matrix.

    Parameters
    ----------
    matrix : scipy.sparse matrix or array, shape (n, n)
        Entry (i, j) is the edge i -> j (row = source, column = destination)
        with weight ``data``; every stored entry is an edge, explicit zeros
        included (call ``matrix.eliminate_zeros()`` first to drop them).
        Duplicate entries of one (i, j) are one edge whose weight is their
        sum, as SciPy reads them (``tocsr()``, ``toarray()``, ``A @ x``);
        the caller's matrix is not modified.  A boolean matrix is a
        pattern: its edges are unweighted.
    name : str, default "<scipy>"
        Name used in messages and in the manifest.

    Returns
    -------
    EdgeSource
        ``format="scipy"``, ``num_vertices = n``.

    Raises
    ------
    GraphInputError
        Naming ``matrix``: not a SciPy sparse matrix, not square, complex or
        non-finite data, or a 0 x 0 matrix (empty graph).
    """
    import scipy.sparse

    if not scipy.sparse.issparse(matrix):
        raise GraphInputError(f"matrix must be a scipy.sparse matrix or array, got "
                              f"{type(matrix).__name__}", name)
    if len(matrix.shape) != 2 or matrix.shape[0] != matrix.shape[1]:
        raise GraphInputError(f"matrix must be square (an adjacency matrix), got shape "
                              f"{matrix.shape}", name)
    num_vertices = int(matrix.shape[0])
    if num_vertices == 0:
        raise GraphInputError("empty graph: matrix is 0 x 0", name)
    if getattr(matrix, "has_canonical_format", False):
        coo = matrix.tocoo()                # sorted, without duplicates
    else:
        # duplicates mean their sum in SciPy: merge them here, before any
        # symmetrization could take a reverse edge for a duplicate
        coo = matrix.tocoo(copy=True)
        if coo.data.dtype.kind in "iu" and coo.data.dtype.itemsize < 8:
            coo.data = coo.data.astype(np.int64)    # sums of small integers must not wrap
        coo.sum_duplicates()
    data = np.asarray(coo.data)
    if data.dtype == np.bool_:
        weight = None
    elif np.issubdtype(data.dtype, np.complexfloating):
        raise GraphInputError(f"matrix has complex data ({data.dtype}); edge weights "
                              "must be real", name)
    else:
        try:
            weight = _validated_weights(data, data.shape[0], name)
        except GraphInputError as exc:
            raise GraphInputError(exc.message.replace("weight", "matrix.data", 1),
                                  name) from None
    row = np.asarray(coo.row)
    col = np.asarray(coo.col)
    return ArraySource(row, col, weight, num_vertices, name, "scipy")
