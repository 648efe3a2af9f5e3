"""Checkpoints: a run's state on stable storage, and resuming from it (Garaph section 2.2).

Garaph section 2.2, "Fault Tolerance": vertex data is written to secondary
storage after one or several iterations (synchronous runs) or after pages
(asynchronous runs); after a fault the run loads it and continues.

What a checkpoint holds
    The committed vertex values and the frontier (the vertices active for
    the next iteration) at the end of an iteration, the number of
    iterations done, their records (so that the resumed run's Result is
    complete), and the run's identity: the graph (store key
    and array checksums), the program (class, a digest of its functions,
    constants, value type), execution, sources, direction and stopping
    rules.  A checkpoint is only resumed by the run it came from.

When it is written
    At the end of every ``every``-th iteration, counted from the run's first
    (so a resumed run checkpoints at the same iterations), and at the end of
    the iteration during which Ctrl-C was pressed; never after the run's
    last iteration.  Asynchronous runs may also be checkpointed after pages,
    as in Garaph (``pages``: after every ``pages``-th page an engine pulls
    in an iteration's page loop, counted over the run): every value an
    asynchronous pull writes is a complete update of its vertex, so the
    values between two pages are a state the run may continue from.  Such a
    checkpoint (``checkpoint-<iterations done>.p<pages>.gck``) restarts the
    interrupted iteration with every vertex active, so that a vertex updated
    before the fault still reaches its out-neighbours.  In hybrid iterations
    both processors' pages count; notify-pull iterations are checkpointed at
    their end only.  A resumed asynchronous run reaches
    a result its program's verifier accepts, not bitwise the uninterrupted
    run's (which asynchronous runs do not promise anyway).  A resumed
    synchronous run gives bitwise the uninterrupted run's values with the
    same thread count.

How it is written
    ``checkpoint-<iterations done>.gck`` in the run's checkpoint directory,
    written to a temporary file in that directory, fsynced, renamed into
    place, and the directory fsynced: a checkpoint either exists whole or
    not at all.  The file (little-endian)::

        "GARAPHCK"  format version (u32)  header length H (u32)
        header: H bytes of JSON (iteration, identity, records, array table)
        zero padding to a multiple of 64
        arrays: values, then the frontier, each 64-byte aligned
        trailer: payload length (u64), CRC-32 of the payload (u32), "GCKE"

    The frontier is stored as ``all`` (no array), as a bitmap of |V| bits
    when it is sorted, or as its int64 list (in its order) when that is
    smaller or it is unsorted.  The newest ``keep`` checkpoints are kept.
    One run at a time uses a directory (an advisory lock); the checkpoints
    are removed when the run completes, or, when its caller asks to keep
    them, by :func:`discard` once the caller has stored the result (the
    command line: after the values and records are written and synced).

Resuming
    The newest checkpoint that reads back whole is used.  A damaged one
    (truncated, wrong checksum, not a checkpoint) is reported by a
    :class:`CheckpointWarning` naming the file and what is wrong, renamed to
    ``*.damaged``, and the previous one is tried; when none is readable the
    run stops with a :class:`~garaphpy.errors.CheckpointError`.

Engines
    The driver reads and restores an engine through two methods
    (:class:`CheckpointableEngine`): ``checkpoint_state()`` and
    ``restore_checkpoint(values, frontier)``.  Engine-internal state that does
    not change the values (the dispatcher's measured cost ratio, resident
    pages) is not saved; a resumed run starts it afresh.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import signal
import struct
import sys
import threading
import time
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from .. import config
from ..errors import CheckpointError, ConfigError, RunInterrupted, SignalInterrupt
from ..options import RunOptions, identity_options
from ..storage.filesafety import fsync_directory
from .records import IterationRecord

MAGIC = b"GARAPHCK"
END_MAGIC = b"GCKE"
FORMAT_VERSION = 1
ARRAY_ALIGNMENT = 64
_PREFIX = struct.Struct("<8sII")    # magic, format version, header length
_TRAILER = struct.Struct("<QI4s")   # payload length, CRC-32 of the payload, end magic
_NAME = re.compile(r"checkpoint-(\d{9,})(?:\.p(\d{6,}))?\.gck")
_LOCK_NAME = ".garaphpy-checkpoints.lock"
_TEMPORARY_PREFIX = ".checkpoint-"


class CheckpointWarning(UserWarning):
    """A checkpoint could not be used as it is (damaged, or another thread count)."""


class DamagedCheckpointError(CheckpointError):
    """A checkpoint file is truncated, fails its checksum or is not a checkpoint.

    Attributes
    ----------
    path : pathlib.Path
    problem : str
        What is wrong, in a few words.
    """

    def __init__(self, path: Path, problem: str):
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class CheckpointableEngine(Protocol):
    """What the checkpoints need of an engine (CPU and GPU alike)."""

    def checkpoint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """``(values, frontier)`` at an iteration boundary, on the host.

        ``values``: the committed values (a view is fine: it is written out
        before the next iteration starts); ``frontier``: the int64 ids of
        the vertices active for the next iteration.
        """

    def restore_checkpoint(self, values: np.ndarray, frontier: np.ndarray) -> None:
        """Continue from committed ``values`` and ``frontier`` at an iteration boundary."""


@dataclass
class Checkpoint:
    """One checkpoint, read back.

    Attributes
    ----------
    path : pathlib.Path
    iteration : int
        Iterations done; the resumed run continues with this one.
    values : numpy.ndarray
        Committed vertex values, by internal id.
    frontier : numpy.ndarray of int64
        Vertices active for the next iteration.
    records : list of IterationRecord
        One per iteration done.
    identity : dict
        The run it belongs to (:func:`run_identity`).
    threads : int or None
        CPU threads of the run that wrote it.
    pages : int
        0, or the pages of iteration ``iteration`` pulled when an
        asynchronous run wrote it mid-iteration.
    """

    path: Path
    iteration: int
    values: np.ndarray
    frontier: np.ndarray
    records: list
    identity: dict
    threads: int | None = None
    pages: int = 0


def checkpoint_name(iteration: int, pages: int = 0) -> str:
    """File name of the checkpoint after ``iteration`` iterations (and ``pages``
    pages of the next one)."""
    return f"checkpoint-{iteration:09d}.p{pages:06d}.gck" if pages else \
        f"checkpoint-{iteration:09d}.gck"


def list_checkpoints(directory) -> list[Path]:
    """Checkpoint files of a directory, oldest first (none if it does not exist)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = sorted((int(match.group(1)), int(match.group(2) or 0), name) for name in names
                   if (match := _NAME.fullmatch(name)))
    return [Path(directory) / name for _, _, name in found]


# ------------------------------------------------------------------ identity --
def run_identity(graph, program, options: RunOptions) -> dict:
    """What makes two runs the same run, as JSON-able values.

    Parameters
    ----------
    graph : garaphpy.Graph
        The graph the engine runs on (the undirected one for programs that
        need it).
    program : VertexProgram
    options : garaphpy.options.RunOptions
        The run's options as resolved (the program's defaults filled in, the
        sources as internal ids); those marked ``identity`` count
        (execution, sources, the direction setting, which changes the values
        when forced, and the stopping rules).
    """
    manifest = graph.store.manifest
    arrays = sorted((name, meta.get("crc32")) for name, meta in manifest["arrays"].items())
    program_class = type(program)
    functions = sorted((role, function.source) for role, function in
                       program_class.functions.items())
    return {
        "graph": {
            "name": manifest["input"]["name"],
            "key": manifest["key"],
            "num_vertices": int(manifest["num_vertices"]),
            "num_edges": int(manifest["num_edges"]),
            "arrays_sha256": hashlib.sha256(json.dumps(arrays).encode()).hexdigest(),
        },
        "program": f"{program_class.__module__}.{program_class.__qualname__}",
        "functions_sha256": hashlib.sha256(json.dumps(functions).encode()).hexdigest(),
        "constants": {name: program.constants[name] for name in sorted(program.constants)},
        "value_dtype": np.dtype(program_class.value_dtype).str,
        **options.identity(),
    }


def identity_differences(stored: dict, current: dict, graph=None) -> list[str]:
    """How the run that wrote a checkpoint differs from this one, one phrase per item."""
    differences = []
    old_graph, new_graph = stored.get("graph", {}), current["graph"]
    if old_graph != new_graph:
        def graph_text(g):
            return (f"{g.get('name')} ({g.get('num_vertices', 0):,} vertices, "
                    f"{g.get('num_edges', 0):,} edges, store key {str(g.get('key'))[:12]})")
        old_text, new_text = graph_text(old_graph), graph_text(new_graph)
        differences.append(f"graph {old_text}, this run {new_text}" if old_text != new_text
                           else f"graph {new_text} with other data (its arrays' checksums "
                                "differ)")
    labels = {"program": "program", "constants": "constants", "value_dtype": "value type",
              **{name: name for name in identity_options() if name != "sources"}}
    for key, label in labels.items():
        if stored.get(key) != current[key]:
            differences.append(f"{label} {stored.get(key)!r}, this run {current[key]!r}")
    if stored.get("program") == current["program"] and \
            stored.get("functions_sha256") != current["functions_sha256"]:
        differences.append(f"the functions of {current['program']} have changed since")
    if stored.get("sources") != current["sources"]:
        def ids(internal):
            if graph is None or old_graph != new_graph or not internal:
                return internal
            return [int(v) for v in graph.original_ids(np.asarray(internal, np.int64))]
        differences.append(f"sources {ids(stored.get('sources'))}, this run "
                           f"{ids(current['sources'])}")
    return differences


# ---------------------------------------------------------------- the file --
def _aligned(offset: int) -> int:
    return -(-offset // ARRAY_ALIGNMENT) * ARRAY_ALIGNMENT


def _encode_frontier(frontier: np.ndarray, num_vertices: int) -> tuple[str, np.ndarray]:
    frontier = np.ascontiguousarray(frontier, np.int64)
    increasing = frontier.size < 2 or bool(np.all(frontier[1:] > frontier[:-1]))
    if increasing and frontier.size == num_vertices:
        return "all", np.zeros(0, np.uint8)
    if increasing and (num_vertices + 7) // 8 < frontier.nbytes:
        mask = np.zeros(num_vertices, np.bool_)
        mask[frontier] = True
        return "bitmap", np.packbits(mask, bitorder="little")
    return "list", frontier


def _decode_frontier(encoding: str, data: np.ndarray, num_vertices: int) -> np.ndarray:
    if encoding == "all":
        return np.arange(num_vertices, dtype=np.int64)
    if encoding == "bitmap":
        mask = np.unpackbits(data, count=num_vertices, bitorder="little")
        return np.flatnonzero(mask).astype(np.int64)
    if encoding == "list":
        return data.astype(np.int64, copy=False)
    raise ValueError(f"unknown frontier encoding {encoding!r}")


class RecordRows:
    """The records' JSON rows, each record converted once.

    Every checkpoint holds the records of all iterations before it, so a run of
    n iterations with a checkpoint every k would convert n^2 / 2k records; this
    keeps the rows of the records already converted (by identity) and makes
    only the new ones, and the last one again (its iteration may still be
    completing).
    """

    def __init__(self):
        self._converted: list[tuple[object, dict]] = []
        self._lock = threading.Lock()

    def __call__(self, records: list) -> list[dict]:
        with self._lock:
            kept = 0
            limit = min(len(self._converted), len(records) - 1)
            while kept < limit and self._converted[kept][0] is records[kept]:
                kept += 1
            del self._converted[kept:]
            self._converted.extend((record, record.as_dict()) for record in records[kept:])
            return [row for _, row in self._converted]


def _rows_of(records: list) -> list[dict]:
    return [record.as_dict() for record in records]


def write_checkpoint(directory, iteration: int, identity: dict, values: np.ndarray,
                     frontier: np.ndarray, records: list, threads: int | None = None,
                     pages: int = 0, rows_of=_rows_of) -> Path:
    """Write one checkpoint atomically; returns its path.

    Parameters
    ----------
    directory : str or os.PathLike
        An existing directory.
    iteration : int
        Iterations done.
    identity : dict
        :func:`run_identity` of the run.
    values : numpy.ndarray
        Committed vertex values (written as they are, without a copy).
    frontier : numpy.ndarray of int
        Vertices active for the next iteration.
    records : list of IterationRecord
    threads : int, optional
        CPU threads of the run (a resumed run with another count is warned
        that floating-point sums may differ in the last bits).
    pages : int
        Pages of iteration ``iteration`` already pulled (an asynchronous
        run's checkpoint after pages), else 0.
    rows_of : callable
        Makes the records' JSON rows (a :class:`RecordRows` keeps them between
        checkpoints).
    """
    directory = Path(directory)
    values = np.ascontiguousarray(values)
    encoding, frontier_data = _encode_frontier(frontier, values.size)
    table, offset = {}, 0
    for name, array in (("values", values), ("frontier", frontier_data)):
        table[name] = {"dtype": array.dtype.str, "count": int(array.size), "offset": offset}
        offset = _aligned(offset + array.nbytes)
    header = json.dumps({
        "iteration": int(iteration),
        "pages": int(pages),
        "identity": identity,
        "threads": threads,
        "frontier_encoding": encoding,
        "arrays": table,
        "records": rows_of(records),
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }).encode()
    data_start = _aligned(_PREFIX.size + len(header))
    final = directory / checkpoint_name(iteration, pages)
    temporary = directory / f".{final.name}.tmp-{os.getpid()}"
    crc = 0
    written = 0
    try:
        with open(temporary, "xb") as handle:
            def put(chunk) -> None:
                nonlocal crc, written
                crc = zlib.crc32(chunk, crc)
                handle.write(chunk)
                written += len(chunk)

            put(_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header)) + header)
            for name, array in (("values", values), ("frontier", frontier_data)):
                put(bytes(data_start + table[name]["offset"] - written))
                put(array.reshape(-1).view(np.uint8))
            handle.write(_TRAILER.pack(written, crc, END_MAGIC))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, final)
        fsync_directory(directory)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return final


def read_checkpoint(path) -> Checkpoint:
    """Read a checkpoint and check it whole.

    Raises
    ------
    DamagedCheckpointError
        Naming the file and what is wrong: truncated, checksum mismatch,
        not a checkpoint, another format version, unreadable.
    """
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            buffer = bytearray(size)
            got = handle.readinto(buffer)
    except OSError as error:
        raise DamagedCheckpointError(path, f"unreadable ({error.strerror})") from None
    if got != size:
        raise DamagedCheckpointError(path, f"truncated while reading ({got} of {size} bytes)")
    if size < _PREFIX.size:
        raise DamagedCheckpointError(path, f"truncated: {size} bytes, not even a header")
    magic, version, header_length = _PREFIX.unpack_from(buffer, 0)
    if magic != MAGIC:
        raise DamagedCheckpointError(path, "not a garaphpy checkpoint (wrong magic number)")
    if version != FORMAT_VERSION:
        raise DamagedCheckpointError(path, f"checkpoint format version {version}; this "
                                           f"garaphpy reads version {FORMAT_VERSION}")
    trailer = _TRAILER.unpack_from(buffer, size - _TRAILER.size) \
        if size >= _PREFIX.size + _TRAILER.size else None
    if trailer is None or trailer[2] != END_MAGIC or trailer[0] != size - _TRAILER.size:
        expected = _expected_size(buffer, header_length)
        of = f" of the {expected:,} it should have" if expected and expected > size else ""
        raise DamagedCheckpointError(
            path, f"truncated or incomplete: {size:,} bytes{of}, and no valid end marker")
    payload_length, stored_crc, _ = trailer
    computed = zlib.crc32(memoryview(buffer)[:payload_length])
    if computed != stored_crc:
        raise DamagedCheckpointError(path, f"checksum mismatch (CRC-32 stored {stored_crc:08x}, "
                                           f"computed {computed:08x}): the file is damaged")
    try:
        header = json.loads(bytes(buffer[_PREFIX.size:_PREFIX.size + header_length]))
        data_start = _aligned(_PREFIX.size + header_length)
        arrays = {}
        for name, meta in header["arrays"].items():
            dtype = np.dtype(meta["dtype"])
            start = data_start + int(meta["offset"])
            if start + dtype.itemsize * int(meta["count"]) > payload_length:
                raise ValueError(f"array {name} runs past the payload")
            arrays[name] = np.frombuffer(buffer, dtype, int(meta["count"]), start)
        values = arrays["values"]
        frontier = _decode_frontier(header["frontier_encoding"], arrays["frontier"],
                                    values.size)
        known = {f.name for f in dataclasses.fields(IterationRecord)}
        records = [IterationRecord(**{k: v for k, v in row.items() if k in known})
                   for row in header["records"]]
        iteration = int(header["iteration"])
        if len(records) != iteration:
            raise ValueError(f"{len(records)} records for {iteration} iterations")
    except (KeyError, TypeError, ValueError) as error:
        raise DamagedCheckpointError(path, f"malformed content ({error})") from None
    return Checkpoint(path=path, iteration=iteration, values=values, frontier=frontier,
                      records=records, identity=header["identity"],
                      threads=header.get("threads"), pages=int(header.get("pages", 0)))


def _expected_size(buffer: bytearray, header_length: int) -> int | None:
    """The size a file should have by its header, when the header is readable."""
    try:
        header = json.loads(bytes(buffer[_PREFIX.size:_PREFIX.size + header_length]))
        end = max(int(meta["offset"]) + np.dtype(meta["dtype"]).itemsize * int(meta["count"])
                  for meta in header["arrays"].values())
    except (KeyError, TypeError, ValueError):
        return None
    return _aligned(_PREFIX.size + header_length) + end + _TRAILER.size


# ------------------------------------------------------------------- a run --
def _pages(value, execution: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"checkpoint_pages={value!r}: expected a positive integer")
    if execution != "async":
        raise ConfigError("checkpoint_pages: only asynchronous runs checkpoint after pages "
                          "(a synchronous iteration commits nothing before its end; use "
                          "checkpoint_every)")
    return value


def _every(value) -> int:
    if value is None:
        return config.CHECKPOINT_EVERY
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"checkpoint_every={value!r}: expected a non-negative integer "
                          "(0: only at Ctrl-C)")
    return value


class Checkpointer:
    """A run's checkpoints: what it resumes from, what it writes, and Ctrl-C.

    Parameters
    ----------
    directory : str or os.PathLike
        Created if missing.
    every : int
        Write after every ``every``-th iteration; 0: only at Ctrl-C.
    identity : dict
        :func:`run_identity` of the run.
    threads : int, optional
        CPU threads of the run.
    keep : int
        Newest checkpoints kept.
    graph : garaphpy.Graph, optional
        To name sources in the user's ids when a resume is refused.
    pages : int
        Asynchronous runs: also write after every ``pages``-th page pulled
        (0: at iteration ends only).

    Use :meth:`open` first, :meth:`attach` once the engine exists,
    :meth:`after_iteration` inside :meth:`interrupts_at_iteration_end`,
    :meth:`run_completed` when the run is done and :meth:`close` at the end
    (a ``finally``).
    """

    def __init__(self, directory, every: int, identity: dict, threads: int | None = None,
                 keep: int | None = None, graph=None, pages: int = 0):
        if keep is None:
            keep = config.CHECKPOINT_KEEP
        self.directory = Path(directory)
        self.every = every
        self.pages = pages
        self._pages_since = 0
        self._page_lock = threading.Lock()
        self._records: list | None = None
        self._record_rows = RecordRows()
        self.identity = identity
        self.threads = threads
        self.keep = max(1, keep)
        self.graph = graph
        self.resumed: Checkpoint | None = None
        #: (iteration, path, seconds) of every checkpoint this run wrote
        self.written: list[tuple[int, Path, float]] = []
        self.stop_requested = False
        #: the signal that requested the stop (SIGINT for Ctrl-C)
        self.stop_signal = signal.SIGINT
        self._lock_handle = None

    # -- start and end -------------------------------------------------------
    def open(self, resume: bool, execution_asked: bool = True) -> Checkpoint | None:
        """Lock the directory; read the checkpoint to resume from.

        Parameters
        ----------
        resume : bool
            Continue from the newest valid checkpoint; else start afresh,
            which the directory must allow (no checkpoint of an earlier run).
        execution_asked : bool
            Whether the run's execution was asked for.  When it was not, and
            the checkpoint differs from the run in its execution alone, the
            run resumes in the checkpoint's execution (a program's default
            execution may have changed since it was written), with a
            :class:`CheckpointWarning`; ``self.identity["execution"]`` then
            names it.

        Returns
        -------
        Checkpoint or None
            None when starting afresh.

        Raises
        ------
        CheckpointError
            The directory is unusable or locked by another run; resuming
            with no valid checkpoint (none at all starts the run, with a
            :class:`CheckpointWarning`) or onto a different run; starting
            afresh over an earlier run's checkpoints.
        """
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock_handle = open(self.directory / _LOCK_NAME, "a")
        except OSError as error:
            raise CheckpointError(f"{self.directory}: cannot use as checkpoint directory "
                                  f"({error.strerror})") from None
        try:
            fcntl.flock(self._lock_handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_handle.close()
            self._lock_handle = None
            raise CheckpointError(f"{self.directory}: another run is using this checkpoint "
                                  "directory") from None
        self._remove_temporaries()
        existing = list_checkpoints(self.directory)
        if not resume:
            if existing:
                raise CheckpointError(
                    f"{self.directory}: holds checkpoints of an earlier run (newest: "
                    f"{existing[-1].name}); resume it (--resume, or resume=True), or remove "
                    "them to start afresh")
            return None
        if not existing:    # killed before its first checkpoint: nothing is lost
            warnings.warn(f"{self.directory}: no checkpoint to resume from (the run stopped "
                          "before its first); starting the run from the beginning",
                          CheckpointWarning, stacklevel=3)
            return None
        checkpoint = self._newest_valid(existing)
        self._adopt_execution(checkpoint, execution_asked)
        differences = identity_differences(checkpoint.identity, self.identity, self.graph)
        if differences:
            raise CheckpointError(f"{checkpoint.path}: written by a different run, refusing to "
                                  f"resume: {'; '.join(differences)} (resume it with the run's "
                                  "own graph, program and options, or start afresh in another "
                                  "checkpoint_dir)")
        if checkpoint.values.dtype != np.dtype(self.identity["value_dtype"]) or \
                checkpoint.values.size != self.identity["graph"]["num_vertices"]:
            raise CheckpointError(f"{checkpoint.path}: {checkpoint.values.size} values of "
                                  f"{checkpoint.values.dtype}, expected "
                                  f"{self.identity['graph']['num_vertices']} of "
                                  f"{np.dtype(self.identity['value_dtype'])}")
        if checkpoint.threads is not None and self.threads is not None and \
                checkpoint.threads != self.threads:
            warnings.warn(f"{checkpoint.path}: written by a run with {checkpoint.threads} "
                          f"threads, resumed with {self.threads}: floating-point sums may "
                          "differ from an uninterrupted run in the last bits",
                          CheckpointWarning, stacklevel=3)
        self.resumed = checkpoint
        return checkpoint

    def _adopt_execution(self, checkpoint: Checkpoint, execution_asked: bool) -> None:
        """Take the checkpoint's execution where the run asked for none and the
        execution is all that differs (see :meth:`open`)."""
        stored = checkpoint.identity.get("execution")
        current = self.identity["execution"]
        if execution_asked or stored == current or stored not in ("sync", "async") \
                or (self.pages and stored != "async"):
            return
        adopted = dict(self.identity, execution=stored)
        if identity_differences(checkpoint.identity, adopted, self.graph):
            return
        self.identity = adopted
        warnings.warn(f"{checkpoint.path}: written by a {stored} run; resuming it {stored} "
                      f"(this program's default execution is now {current!r}; pass "
                      f"execution={stored!r} to say so, or start afresh for {current!r})",
                      CheckpointWarning, stacklevel=4)

    def _newest_valid(self, existing: list[Path]) -> Checkpoint:
        problems = []
        for path in reversed(existing):
            try:
                checkpoint = read_checkpoint(path)
            except DamagedCheckpointError as error:
                problems.append(str(error))
                damaged = path.with_name(path.name + ".damaged")
                with contextlib.suppress(OSError):
                    os.replace(path, damaged)
                older = "; trying the previous one" if path != existing[0] else ""
                warnings.warn(f"{error} (kept as {damaged.name}){older}", CheckpointWarning,
                              stacklevel=4)
                continue
            return checkpoint
        raise CheckpointError(f"{self.directory}: no valid checkpoint to resume from: "
                              + "; ".join(problems))

    def attach(self, engine) -> None:
        """Check that ``engine`` can be checkpointed; give it the resumed state, if any.

        Raises
        ------
        ConfigError
            The engine offers no checkpoints (:class:`CheckpointableEngine`).
        """
        if not all(callable(getattr(engine, name, None))
                   for name in ("checkpoint_state", "restore_checkpoint")):
            raise ConfigError(f"checkpoint_dir: the {getattr(engine, 'mode', '?')} engine "
                              "does not support checkpoints yet")
        if self.resumed is not None:
            engine.restore_checkpoint(self.resumed.values, self.resumed.frontier)
        if self.pages:
            # the driver's iterations on one processor run that processor's engine's
            # page loop; its hybrid iterations, its own
            for pulling in (engine, getattr(engine, "cpu", None), getattr(engine, "gpu", None)):
                if pulling is not None:
                    pulling.page_done = self._page_hook(pulling)

    def track(self, records: list) -> None:
        """The driver's list of completed records (read by checkpoints after pages)."""
        self._records = records

    def _page_hook(self, engine):
        def page_done(iteration: int, pages: int) -> None:
            with self._page_lock:       # hybrid iterations: called from both processors
                self._pages_since += 1
                if self._pages_since >= self.pages:
                    self._pages_since = 0
                    self.after_page(engine, iteration, pages)
        return page_done

    def after_page(self, engine, iteration: int, pages: int) -> Path | None:
        """Write a checkpoint of an asynchronous iteration after ``pages`` of its
        pages: the values as they are, every vertex active (see the module)."""
        records = self._records if self._records is not None else []
        if len(records) != iteration:
            return None
        started = time.perf_counter()
        values = engine.values_between_pages()
        frontier = np.arange(values.size, dtype=np.int64)
        try:
            path = write_checkpoint(self.directory, iteration, self.identity, values, frontier,
                                    records, self.threads, pages=pages,
                                    rows_of=self._record_rows)
        except OSError as error:
            warnings.warn(f"{self.directory / checkpoint_name(iteration, pages)}: cannot "
                          f"write the checkpoint ({error.strerror or error}); the run goes on",
                          CheckpointWarning, stacklevel=3)
            return None
        self._drop_old(path)
        self.written.append((iteration, path, time.perf_counter() - started))
        return path

    def _drop_old(self, path: Path) -> None:
        for old in list_checkpoints(self.directory)[:-self.keep]:
            if old != path:
                old.unlink(missing_ok=True)

    def records(self) -> list:
        """The records of the iterations before this run: the resumed ones, or none."""
        return list(self.resumed.records) if self.resumed is not None else []

    def run_completed(self) -> None:
        """The run's result exists: its checkpoints are no longer needed."""
        for path in list_checkpoints(self.directory):
            path.unlink(missing_ok=True)

    def close(self) -> None:
        """Release the directory; remove it when no checkpoint is left in it."""
        if self._lock_handle is None:
            return
        if not list_checkpoints(self.directory):
            (self.directory / _LOCK_NAME).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.directory.rmdir()
        self._lock_handle.close()
        self._lock_handle = None

    def _remove_temporaries(self) -> None:
        for name in os.listdir(self.directory):
            if name.startswith(_TEMPORARY_PREFIX) and ".gck.tmp-" in name:
                (self.directory / name).unlink(missing_ok=True)

    # -- during the run ------------------------------------------------------
    def after_iteration(self, engine: CheckpointableEngine, records: list) -> Path | None:
        """At the end of an iteration the run continues after: checkpoint when due.

        Writes when ``len(records)`` is a multiple of ``every`` or Ctrl-C
        was pressed; after a Ctrl-C raises :class:`RunInterrupted`.  A
        periodic checkpoint that cannot be written (a full disk) is a
        :class:`CheckpointWarning` and the run goes on; the one of a Ctrl-C
        is a :class:`~garaphpy.errors.CheckpointError`.
        """
        done = len(records)
        if not (self.stop_requested or (self.every and done % self.every == 0)):
            return None
        started = time.perf_counter()
        values, frontier = engine.checkpoint_state()
        try:
            path = write_checkpoint(self.directory, done, self.identity, values, frontier,
                                    records, self.threads, rows_of=self._record_rows)
        except OSError as error:
            problem = (f"{self.directory / checkpoint_name(done)}: cannot write the checkpoint "
                       f"({error.strerror or error})")
            if self.stop_requested:
                raise CheckpointError(f"interrupted, and {problem}") from None
            warnings.warn(f"{problem}; the run goes on", CheckpointWarning, stacklevel=3)
            return None
        self._drop_old(path)
        self.written.append((done, path, time.perf_counter() - started))
        if self.stop_requested:
            raise RunInterrupted(path, done, int(self.stop_signal))
        return path

    @contextlib.contextmanager
    def interrupts_at_iteration_end(self, stop_signals=(signal.SIGINT,)):
        """While inside, Ctrl-C (and the other ``stop_signals``) stops the run at
        the end of the iteration.

        The first such signal only sets :attr:`stop_requested` and
        :attr:`stop_signal` (and says so on stderr); a second one raises
        KeyboardInterrupt (:class:`~garaphpy.errors.SignalInterrupt` for
        signals other than SIGINT) at once.  Nothing changes outside the main
        thread; SIGINT is taken only where it has Python's default handler,
        and no signal that is ignored (``nohup``) is taken.  The previous
        handlers are back on leaving.
        """
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        taken = [number for number in dict.fromkeys(stop_signals)
                 if (signal.getsignal(number) is signal.default_int_handler
                     if number == signal.SIGINT
                     else signal.getsignal(number) is not signal.SIG_IGN)]

        def request_stop(signum, frame):
            if self.stop_requested:
                for number, handler in previous.items():
                    signal.signal(number, handler)
                raise KeyboardInterrupt if signum == signal.SIGINT else SignalInterrupt(signum)
            self.stop_requested = True
            self.stop_signal = signum
            name, again = (("interrupt", "Ctrl-C again") if signum == signal.SIGINT
                           else (signal.Signals(signum).name, "a second one"))
            print(f"garaphpy: {name}: stopping at the end of this iteration to write a "
                  f"checkpoint ({again} stops at once, without one)", file=sys.stderr,
                  flush=True)

        previous = {number: signal.signal(number, request_stop) for number in taken}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)


def for_run(options: RunOptions, *, graph, program,
            threads: int | None) -> Checkpointer | None:
    """The run's :class:`Checkpointer` from :func:`garaphpy.run`'s resolved
    options (:func:`run_identity`), or None when checkpoints are off.

    Validates ``checkpoint_dir``, ``checkpoint_every``, ``checkpoint_pages``
    and ``resume`` (naming them); touches no file.
    """
    checkpoint_dir, resume = options.checkpoint_dir, options.resume
    every = _every(options.checkpoint_every)
    pages = _pages(options.checkpoint_pages, options.execution)
    if not isinstance(resume, bool):
        raise ConfigError(f"resume={resume!r}: expected True or False")
    if checkpoint_dir is None:
        if resume:
            raise ConfigError("resume=True needs checkpoint_dir (where the checkpoints are)")
        if pages:
            raise ConfigError("checkpoint_pages needs checkpoint_dir (where the checkpoints go)")
        return None
    if not isinstance(checkpoint_dir, (str, os.PathLike)) or not str(checkpoint_dir):
        raise ConfigError(f"checkpoint_dir={checkpoint_dir!r}: expected a directory path")
    identity = run_identity(graph, program, options)
    return Checkpointer(checkpoint_dir, every, identity, threads=threads, graph=graph,
                        pages=pages)


def discard(directory) -> None:
    """Remove a completed run's checkpoints, its lock file and the directory when
    nothing else is left in it (after ``garaphpy.run(..., keep_checkpoints=True)``
    once the result is stored)."""
    directory = Path(directory)
    if not directory.is_dir():
        return
    for path in list_checkpoints(directory):
        path.unlink(missing_ok=True)
    (directory / _LOCK_NAME).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        directory.rmdir()


def interrupts_at_iteration_end(checkpointer: Checkpointer | None,
                                stop_signals=(signal.SIGINT,)):
    """:meth:`Checkpointer.interrupts_at_iteration_end`, or nothing without checkpoints."""
    if checkpointer is None:
        return contextlib.nullcontext()
    return checkpointer.interrupts_at_iteration_end(stop_signals)
