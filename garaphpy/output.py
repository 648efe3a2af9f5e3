"""Writing results: vertex values in the user's ids, and per-iteration records.

Values go to a text file (``vertex value`` per line, in the user's original
ids, floats written so they read back exactly) or to ``.npy`` (a structured
array with fields ``vertex`` and ``value``).  Per-iteration records go to
JSON lines.  Every file is written to a temporary name in its directory
(created with the user's umask, as ``open`` would), fsynced and renamed into
place, and the directory fsynced: a result file is there whole or not at
all.  A failed write (a full disk) removes the temporary and raises an
:class:`~garaphpy.errors.OutputError` naming the file and, for a full disk,
the bytes it needs.  :func:`check_writable` lets a caller refuse an
unwritable path before the computation rather than after it.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import secrets
import shutil
import stat
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from . import value_lines
from .errors import ConfigError, OutputError
from .storage.filesafety import fsync_directory, pid_alive

_LINES_PER_WRITE = 1 << 16
_BYTES_PER_WRITE = 1 << 24
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def _temporary_name(path: Path, kind: str) -> Path:
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}-{secrets.token_hex(4)}")


def check_writable(path, key: str, directory: bool = False) -> Path:
    """Check, before a run, that a result file (or a directory) can be written at ``path``.

    Nothing is created: the nearest existing ancestor must be a directory in
    which a probe file can be made (and is removed at once).

    Parameters
    ----------
    path : str or os.PathLike
    key : str
        The configuration key (or variable) that names the path, for the message.
    directory : bool
        ``path`` is to be a directory (checkpoints), not a file.

    Raises
    ------
    ConfigError
        Naming ``key`` and ``path``: the path is a directory where a file is
        expected or the other way round, a parent is a file, or the
        directory cannot be written.
    """
    path = Path(path)
    if not directory and path.is_dir() and not path.is_symlink():
        raise ConfigError(f"{key}: {path} is a directory, expected a file name")
    existing = path if directory else path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "" if existing == path else f"{path}: "
        raise ConfigError(f"{key}: {where}{existing} is not a directory")
    probe = _temporary_name(existing / path.name, "probe")
    try:
        open(probe, "xb").close()
        probe.unlink()
    except OSError as error:
        raise ConfigError(f"{key}: {path}: cannot write in {existing} "
                          f"({error.strerror or error})") from None
    return path


def _remove_stale_temporaries(path: Path) -> None:
    """Remove the temporaries beside ``path`` that killed processes left
    (``.NAME.tmp-PID-XXXXXXXX`` of a pid no longer alive)."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.tmp-(\d+)-[0-9a-f]{{8}}")
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match and not pid_alive(int(match.group(1))) and entry.is_file() \
                and not entry.is_symlink():
            entry.unlink(missing_ok=True)


def _write_atomically(path: Path, chunks: Iterable[bytes]) -> Path:
    """Write the bytes of ``chunks`` to ``path`` whole or not at all."""
    chunks = iter(chunks)
    if path.is_dir() and not path.is_symlink():
        raise OutputError(f"{path}: is a directory, cannot write the result there")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(f"{path}: cannot create its directory "
                          f"({error.strerror or error})") from None
    _remove_stale_temporaries(path)
    temporary = _temporary_name(path, "tmp")
    handed = 0
    try:
        with open(temporary, "xb") as handle:
            # a link is replaced by a regular file, never written through
            with_mode = path.stat().st_mode if path.exists() and not path.is_symlink() \
                else None
            if with_mode is not None:      # a rewritten file keeps its mode, as with open()
                os.chmod(temporary, stat.S_IMODE(with_mode))
            for chunk in chunks:
                handed += len(chunk)
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        fsync_directory(path.parent)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        if error.errno in _DISK_FULL:
            needed = handed + sum(len(chunk) for chunk in chunks)
            free = shutil.disk_usage(path.parent).free
            raise OutputError(f"{path}: no space left on the device: the file needs "
                              f"{needed:,} bytes, {free:,} are free") from None
        raise OutputError(f"{path}: cannot write ({error.strerror or error})") from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def _npy_chunks(vertices: np.ndarray, values: np.ndarray,
                value_name: str = "value") -> Iterator[bytes]:
    table = np.empty(vertices.size, [("vertex", np.int64), (value_name, values.dtype)])
    table["vertex"] = vertices
    table[value_name] = values
    header = np.lib.format.header_data_from_array_1_0(table)
    sink = io.BytesIO()
    np.lib.format.write_array_header_1_0(sink, header)
    yield sink.getvalue()
    data = table.view(np.uint8)
    for start in range(0, data.size, _BYTES_PER_WRITE):
        yield data[start:start + _BYTES_PER_WRITE].tobytes()


#: Lines from which the compiled formatters (:mod:`garaphpy.value_lines`)
#: pay: below, Python writes them (in about 30 ms) and nothing is compiled
#: on a machine's first run.
_COMPILED_LINES = 1 << 15


def _int64_text(dtype: np.dtype) -> bool:
    """Whether every value of ``dtype`` is an int64 (text by
    :func:`garaphpy.value_lines.integer_lines`)."""
    return dtype.kind == "i" or (dtype.kind == "u" and dtype.itemsize < 8)


def _in_order(make, pieces: range, threads: int) -> Iterator:
    """``make(piece)`` of every piece, in order, made by ``threads`` threads
    (the compiled formatters release the GIL) at most ``2 * threads`` ahead
    of the consumer, so memory stays a few pieces whatever the file."""
    if threads <= 1 or len(pieces) <= 1:
        yield from map(make, pieces)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="garaphpy-values") as pool:
        pending = deque()
        for piece in pieces:
            pending.append(pool.submit(make, piece))
            if len(pending) >= 2 * threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _text_chunks(vertices: np.ndarray, values: np.ndarray,
                 threads: int | None = None) -> Iterator[bytes]:
    float_values = values.dtype.kind == "f"
    lines = value_lines.integer_lines if _int64_text(values.dtype) \
        else value_lines.float_lines if float_values and values.dtype.itemsize <= 8 else None
    if _int64_text(vertices.dtype) and lines is not None and vertices.size >= _COMPILED_LINES:
        threads = threads or len(os.sched_getaffinity(0))
        yield from _in_order(lambda start: lines(vertices[start:start + _LINES_PER_WRITE],
                                                 values[start:start + _LINES_PER_WRITE]),
                             range(0, vertices.size, _LINES_PER_WRITE), threads)
        return
    for start in range(0, vertices.size, _LINES_PER_WRITE):
        ids = vertices[start:start + _LINES_PER_WRITE].tolist()
        chunk = values[start:start + _LINES_PER_WRITE].tolist()
        if float_values:
            lines = [f"{v}\t{x!r}" for v, x in zip(ids, chunk)]
        else:
            lines = [f"{v}\t{x}" for v, x in zip(ids, chunk)]
        yield ("\n".join(lines) + "\n").encode()


def write_values(path, vertices: np.ndarray, values: np.ndarray,
                 value_name: str = "value", threads: int | None = None) -> Path:
    """Write ``vertices[i] values[i]`` pairs to ``path`` (.npy or text).

    A ``.npy`` file holds a structured array with the fields ``vertex`` and
    ``value_name`` (the program's: ``pagerank``, ``distance``, ``depth``...).
    A text file holds ``f"{vertex}\\t{value!r}"`` lines for float values,
    ``f"{vertex}\\t{value}"`` otherwise, made by ``threads`` threads
    (default: every core the process may use).

    Raises
    ------
    OutputError
        The file cannot be written (naming it; for a full disk, with the
        bytes needed); nothing is left at ``path`` or beside it.
    """
    path = Path(path)
    if path.suffix == ".npy":
        if value_name == "vertex" or not value_name.isidentifier():
            value_name = "value"
        return _write_atomically(path, _npy_chunks(vertices, values, value_name))
    return _write_atomically(path, _text_chunks(vertices, values, threads))


def read_values(path) -> tuple[np.ndarray, np.ndarray]:
    """Read a file written by :func:`write_values`: (vertices, values)."""
    path = Path(path)
    if path.suffix == ".npy":
        table = np.load(path)
        return table["vertex"], table[table.dtype.names[1]]
    data = np.loadtxt(path, dtype=str, ndmin=2)
    values = data[:, 1]
    try:
        parsed = values.astype(np.int64)
    except ValueError:
        parsed = values.astype(np.float64)
    return data[:, 0].astype(np.int64), parsed


def write_iterations(path, records) -> Path:
    """Write one JSON object per iteration record (raises as :func:`write_values`)."""
    return _write_atomically(Path(path), ((json.dumps(record.as_dict()) + "\n").encode()
                                          for record in records))
