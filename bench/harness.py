"""The one benchmark harness of bench/: every script declares cases, this runs them.

A benchmark script (``bench/cpu.py``, ``bench/gpu.py``, ...) is a
*configuration* of this module: it parses its own options beside the common
ones (:func:`add_common_options`: ``--trials``, ``--warmup``, ``--json``,
``--quiet``), declares its measurements as :class:`Case` objects and hands
them to :func:`run_cases`.  For every case the harness

1. runs ``setup`` once, untimed (load a graph, build a store, compile);
2. runs the timed callable ``warmup`` times, outside the timed region
   (numba and NVRTC compile, caches fill, the GPU clocks up);
3. runs it ``trials`` times, each timed with :func:`time.perf_counter`
   around the call, or by the case's own clock where the callable returns a
   :class:`Measurement` with ``seconds`` set (the engine's iteration time,
   CUDA events: :func:`cuda_event_seconds` is the hook for GPU time);
4. runs ``verify`` on every trial's result: a verification that fails marks
   the row ``failed`` and :func:`exit_status` makes the script exit 1;
5. writes one JSON row: the case's name and parameters, every trial's time,
   their median and minimum, the verification, the script's own figures
   and the machine (:func:`machine_info`: CPU model and cores, memory, the
   GPU's name, driver and CUDA version where cupy sees one, the versions of
   Python, numpy, numba and cupy, the git commit, the date).

Rows are appended to the JSON-lines file named by ``--json``, one line per
case, so several runs of several scripts may share one file.  GAPBS's
``benchmark.h`` (a warm-up, trials, a verifier after each trial) is the model.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

#: The repository holding bench/ (its git commit goes into every row).
REPOSITORY = Path(__file__).resolve().parents[1]

#: Verification states of a row.
PASSED, FAILED, UNVERIFIED = "passed", "failed", "unverified"


class VerificationError(AssertionError):
    """Raised by a case's ``verify`` callback (or by the callable itself)
    when a result is wrong; the row is then written with status ``failed``."""


@dataclass
class Measurement:
    """What a timed callable may return instead of a bare result.

    Attributes
    ----------
    result
        The value ``verify`` checks.
    seconds
        The trial's time by the case's own clock (CUDA events, the engine's
        iteration time); None keeps the harness's ``perf_counter`` time.
    metrics
        Further per-trial figures (copied into the row's ``metrics`` list).
    """

    result: Any = None
    seconds: float | None = None
    metrics: dict = field(default_factory=dict)


@dataclass
class Case:
    """One measurement of a benchmark script.

    Attributes
    ----------
    name
        Unique within the script, e.g. ``"pull/engine"``.
    run
        The timed callable. Called with the value ``setup`` returned (or with
        no argument where there is no ``setup``); returns a result, or a
        :class:`Measurement`.
    params
        What the case measures (graph, program, threads, ...): JSON values.
    setup
        Untimed, once, before the warm-up; its value is passed to ``run``.
    verify
        Called with each trial's result: returns None or True when it is
        right, or False or a message (or raises :class:`VerificationError` /
        ``AssertionError``) when it is wrong.
    teardown
        Untimed, once, after the trials (also after a failure).
    summarize
        Called with the finished row; returns the script's derived figures
        (ratios, G edges/s), stored under ``figures``.
    trials, warmup
        Overrides of the script's ``--trials`` / ``--warmup`` for this case
        (a case that measures a whole sweep inside one call, say).
    warm_up
        What a warm-up runs, where a shorter call compiles and fills the same
        paths as ``run`` (a 2-iteration run before 4,000-iteration trials);
        called like ``run``.  Default: ``run`` itself.
    """

    name: str
    run: Callable[..., Any]
    params: dict = field(default_factory=dict)
    setup: Callable[[], Any] | None = None
    verify: Callable[[Any], Any] | None = None
    teardown: Callable[[Any], None] | None = None
    summarize: Callable[[dict], dict] | None = None
    trials: int | None = None
    warmup: int | None = None
    warm_up: Callable[..., Any] | None = None


# --- machine information -----------------------------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            return next((line.split(":", 1)[1].strip() for line in handle
                         if line.startswith("model name")), "") or platform.processor()
    except OSError:
        return platform.processor()


def _git_commit() -> str:
    try:
        completed = subprocess.run(["git", "-C", str(REPOSITORY), "rev-parse", "HEAD"],
                                   capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    commit = completed.stdout.strip()
    if commit:
        dirty = subprocess.run(["git", "-C", str(REPOSITORY), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        commit += "-dirty" if dirty else ""
    return commit


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:  # not installed, or a broken install
        return None


def gpu_info() -> dict | None:
    """The GPU cupy sees (name, memory, driver and CUDA runtime versions), or
    None where cupy is missing or finds no usable device."""
    try:
        import cupy
        runtime = cupy.cuda.runtime
        if runtime.getDeviceCount() < 1:
            return None
        device = cupy.cuda.Device()
        properties = runtime.getDeviceProperties(device.id)
        name = properties["name"]
        return {"name": name.decode() if isinstance(name, bytes) else str(name),
                "memory_bytes": int(properties["totalGlobalMem"]),
                "compute_capability": device.compute_capability,
                "driver": _cuda_version(runtime.driverGetVersion()),
                "cuda_runtime": _cuda_version(runtime.runtimeGetVersion()),
                "nvidia_driver": _nvidia_driver()}
    except Exception:  # ImportError, no driver, no device
        return None


def _cuda_version(number: int) -> str:
    return f"{number // 1000}.{number % 1000 // 10}"


def _nvidia_driver() -> str:
    try:
        return Path("/proc/driver/nvidia/version").read_text().split("Kernel Module")[1]\
            .split()[0]
    except (OSError, IndexError):
        return ""


@functools.cache
def machine_info() -> dict:
    """Every row's description of what ran it (computed once per process)."""
    try:
        import psutil
        memory = psutil.virtual_memory().total
        physical = psutil.cpu_count(logical=False)
    except ImportError:
        memory, physical = None, None
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    try:
        import numba
        numba_threads = numba.config.NUMBA_NUM_THREADS
    except ImportError:
        numba_threads = None
    return {"host": platform.node(), "cpu_model": _cpu_model(),
            "cpu_count": os.cpu_count(), "cpu_physical": physical,
            "cpu_affinity": affinity, "numba_threads": numba_threads,
            "memory_bytes": memory, "platform": platform.platform(),
            "gpu": gpu_info(),
            "python": platform.python_version(), "numpy": _version("numpy"),
            "numba": _version("numba"), "cupy": _version("cupy"),
            "garaphpy": _version("garaphpy") or "", "git_commit": _git_commit()}


# --- timing hooks ------------------------------------------------------------------


def cuda_event_seconds(call: Callable[[], Any], stream=None) -> tuple[float, Any]:
    """GPU time of ``call``: CUDA events recorded before and after it on
    ``stream`` (cupy's current stream by default), then synchronized.  Returns
    ``(seconds, what call returned)``; wrap it in a :class:`Measurement` to
    make a trial's time GPU time."""
    import cupy

    stream = stream or cupy.cuda.get_current_stream()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    value = call()
    end.record(stream)
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1e3, value


# --- measuring ---------------------------------------------------------------------


def _check(verify, result) -> str | None:
    """None when ``verify`` accepts ``result``, else why not."""
    try:
        verdict = verify(result)
    except AssertionError as error:  # VerificationError included
        return str(error) or error.__class__.__name__
    if verdict is None or verdict is True:
        return None
    return "verification returned False" if verdict is False else str(verdict)


def _jsonable(value):
    """json.dumps's fallback: numpy scalars and arrays, paths, sets."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (Path, set, frozenset, tuple)):
        return str(value) if isinstance(value, Path) else list(value)
    return repr(value)


def measure(case: Case, *, trials: int = 3, warmup: int = 1,
            benchmark: str = "", quiet: bool = True) -> dict:
    """Run one case (setup, warm-up, timed trials, verification) and return its row.

    An exception inside ``run`` or ``setup`` is not caught: a benchmark that
    crashes should say so with its traceback.  A wrong result is caught and
    recorded (status ``failed``), and the remaining trials still run.
    """
    return measure_in_turns([case], trials=trials, warmup=warmup, benchmark=benchmark,
                            quiet=quiet)[0]


def measure_in_turns(cases: Iterable[Case], *, trials: int = 3, warmup: int = 1,
                     benchmark: str = "", quiet: bool = True, leave_on: tuple = ()) -> list:
    """Run several cases whose times are compared, their trials in turns.

    Every case's setup and warm-up come first, in order; then trial 1 of
    every case, trial 2 of every case, and so on, so that a drift of the
    machine over the minutes the cases take (clocks, the page cache, a
    neighbour's load) falls on each case alike instead of on whichever ran
    last.  One case alone is :func:`measure`.

    Parameters
    ----------
    cases : iterable of Case
    trials, warmup, benchmark, quiet
        As :func:`measure` (a case's own ``trials``/``warmup`` override them).
    leave_on : tuple of exception types
        A case whose setup, warm-up or trial raises one of these leaves the
        turns (torn down at once) and the others go on; its entry in the
        returned list is the exception.  Any other exception propagates,
        after every case's teardown.

    Returns
    -------
    list
        Per case, in order, its row (as :func:`measure` makes it) or the
        exception that made it leave.
    """
    turns = [_Turns(case, trials, warmup) for case in cases]
    leave_on = tuple(leave_on)
    try:
        for turn in turns:
            turn.guarded(turn.start, leave_on)
        for trial in range(max((turn.trials for turn in turns), default=0)):
            for turn in turns:
                if turn.left is None and trial < turn.trials:
                    turn.guarded(lambda: turn.trial(trial, quiet), leave_on)
    finally:
        for turn in turns:
            turn.tear_down()
    return [turn.left if turn.left is not None else turn.row(benchmark) for turn in turns]


class _Turns:
    """One case's state while :func:`measure_in_turns` runs it."""

    def __init__(self, case: Case, trials: int, warmup: int):
        self.case = case
        self.trials = case.trials if case.trials is not None else trials
        self.warmup = case.warmup if case.warmup is not None else warmup
        if self.trials < 1:
            raise ValueError(f"case {case.name!r}: trials={self.trials}, expected >= 1")
        if self.warmup < 0:
            raise ValueError(f"case {case.name!r}: warmup={self.warmup}, expected >= 0")
        self.left = None
        self.set_up = False
        self.seconds, self.wall, self.metrics, self.failures = [], [], [], []

    def start(self) -> None:
        """Setup (untimed, once), then the warm-up runs."""
        case = self.case
        self.started = time.time()
        self.context = case.setup() if case.setup is not None else None
        self.set_up = True
        self.call = (lambda: case.run(self.context)) if case.setup is not None else case.run
        warm = case.warm_up or case.run
        warm_call = (lambda: warm(self.context)) if case.setup is not None else warm
        for _ in range(self.warmup):
            warm_call()

    def trial(self, trial: int, quiet: bool) -> None:
        """One timed trial, verified."""
        case = self.case
        began = time.perf_counter()
        value = self.call()
        elapsed = time.perf_counter() - began
        if isinstance(value, Measurement):
            measured, result, extra = value.seconds, value.result, value.metrics
        else:
            measured, result, extra = None, value, {}
        self.wall.append(elapsed)
        self.seconds.append(elapsed if measured is None else float(measured))
        self.metrics.append(dict(extra))
        if case.verify is not None:
            problem = _check(case.verify, result)
            if problem is not None:
                self.failures.append(f"trial {trial + 1}: {problem}")
        if not quiet:
            print(f"  {case.name}: trial {trial + 1}/{self.trials} "
                  f"{self.seconds[-1] * 1e3:.3f} ms", file=sys.stderr, flush=True)

    def guarded(self, step, leave_on: tuple) -> None:
        """``step()``; an exception of ``leave_on`` makes the case leave."""
        try:
            step()
        except leave_on as error:
            self.left = error
            self.tear_down()

    def tear_down(self) -> None:
        """The case's teardown, once, where its setup ran."""
        if self.set_up:
            self.set_up = False
            if self.case.teardown is not None:
                self.case.teardown(self.context)

    def row(self, benchmark: str) -> dict:
        case, seconds = self.case, self.seconds
        status = UNVERIFIED if case.verify is None else (FAILED if self.failures else PASSED)
        row = {"benchmark": benchmark, "case": case.name, "params": dict(case.params),
               "warmup": self.warmup, "trials": self.trials, "trials_s": seconds,
               "median_s": statistics.median(seconds), "min_s": min(seconds),
               "wall_s": self.wall, "metrics": self.metrics if any(self.metrics) else [],
               "verification": {"status": status, "failures": self.failures},
               "date": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(self.started)),
               "machine": machine_info()}
        if case.summarize is not None:
            row["figures"] = case.summarize(row)
        return row


# --- the common command line -------------------------------------------------------


def add_common_options(parser: argparse.ArgumentParser, *, trials: int = 3,
                       warmup: int = 1, trials_aliases: Iterable[str] = ("--repeat",),
                       json_help: str = "append one JSON row per case to this JSON-lines file"
                       ) -> argparse.ArgumentParser:
    """Add ``--trials`` (with the older ``--repeat`` of the scripts as an
    alias), ``--warmup``, ``--json`` and ``--quiet`` to a script's parser."""
    group = parser.add_argument_group("harness (bench/harness.py)")
    group.add_argument("--trials", *trials_aliases, dest="trials", type=int, default=trials,
                       help=f"timed trials of every case (default {trials})")
    group.add_argument("--warmup", type=int, default=warmup,
                       help=f"untimed runs of every case before its trials (default {warmup})")
    group.add_argument("--json", default=None, metavar="FILE", help=json_help)
    group.add_argument("--quiet", action="store_true",
                       help="no progress lines on stderr")
    return parser


def check_common_options(parser: argparse.ArgumentParser, args) -> None:
    """Reject impossible harness options with an error that names them."""
    if args.trials < 1:
        parser.error(f"--trials={args.trials}: expected >= 1")
    if args.warmup < 0:
        parser.error(f"--warmup={args.warmup}: expected >= 0")


def _open(path: Path, mode: str):
    """A text handle on ``path``, gzip-compressed where it ends in .gz (appending
    adds a gzip member, which readers of the file see as one stream)."""
    import gzip

    return gzip.open(path, mode + "t") if path.suffix == ".gz" else path.open(mode)


def write_rows(path: str | Path | None, rows: Iterable[dict]) -> None:
    """Append rows to a JSON-lines file, gzip-compressed where it ends in .gz
    (nothing where ``path`` is None)."""
    if not path:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _open(path, "a") as handle:
        for row in rows:
            handle.write(json.dumps(row, default=_jsonable, allow_nan=True) + "\n")


def read_rows(path: str | Path) -> list[dict]:
    """The rows of a JSON-lines file written by :func:`write_rows`."""
    with _open(Path(path), "r") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def run_cases(benchmark: str, cases: Iterable[Case], args, *,
              extra: dict | None = None) -> list[dict]:
    """Measure every case with the script's common options and append each row
    to ``args.json`` as soon as it is done (a crash keeps the rows before it).

    ``extra`` is merged into every row's ``params`` (the script's options that
    apply to all of its cases)."""
    rows = []
    quiet = getattr(args, "quiet", False)
    for case in cases:
        if extra:
            case.params = {**extra, **case.params}
        if not quiet:
            print(f"{benchmark}: {case.name} ...", file=sys.stderr, flush=True)
        row = measure(case, trials=args.trials, warmup=args.warmup,
                      benchmark=benchmark, quiet=quiet)
        row["args"] = {key: value for key, value in vars(args).items()}
        rows.append(row)
        write_rows(args.json, [row])
        if row["verification"]["status"] == FAILED:
            print(f"{benchmark}: {case.name} FAILED verification: "
                  f"{'; '.join(row['verification']['failures'])}", file=sys.stderr, flush=True)
    return rows


def write_record(path: str | Path | None, benchmark: str, name: str, record: dict,
                 args=None) -> None:
    """Append one row of figures that are not a timed case (a bandwidth
    probe's summary, a build's layout), with the machine information."""
    row = {"benchmark": benchmark, "case": name, "record": record,
           "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine_info()}
    if args is not None:
        row["args"] = dict(vars(args))
    write_rows(path, [row])


def failed(rows: Iterable[dict]) -> list[dict]:
    """The rows whose verification failed."""
    return [row for row in rows
            if row.get("verification", {}).get("status") == FAILED]


def exit_status(rows: Iterable[dict]) -> int:
    """1 when any row failed its verification, else 0 (a script's return code)."""
    return 1 if failed(rows) else 0


def same_as_first(reference: dict, name: str, *, rtol: float | None = None,
                  atol: float = 0.0, counters: tuple = ()):
    """A ``verify`` for cases that must give one answer: the first result seen
    is kept as ``reference["result"]`` and every result is compared with it.

    Parameters
    ----------
    reference : dict
        Shared by the cases compared (the first case run gives the reference).
    name : str
        What the reference is, for the message ("the resident run").
    rtol, atol : float
        Float values within these tolerances pass (``rtol`` None: bitwise,
        as for any values that are not floats).
    counters : tuple of str
        IterationRecord fields that must match iteration by iteration too.
    """
    def verify(result) -> str | None:
        expected = reference.setdefault("result", result)
        if rtol is None or result.values.dtype.kind != "f":
            same = np.array_equal(result.values, expected.values)
        else:
            same = np.allclose(result.values, expected.values, rtol=rtol, atol=atol)
        if not same:
            return f"values differ from {name}'s"
        if counters and [[getattr(r, c) for c in counters] for r in result.iterations] != \
                [[getattr(r, c) for c in counters] for r in expected.iterations]:
            return f"iteration counters differ from {name}'s"
        return None
    return verify


def row_of(rows: Iterable[dict], name: str) -> dict:
    """The row of case ``name`` (KeyError naming it where there is none)."""
    for row in rows:
        if row["case"] == name:
            return row
    raise KeyError(f"no row for case {name!r}")


def median_of(values: Iterable[float]) -> float:
    """Median of a sequence, NaN for an empty one."""
    values = list(values)
    return statistics.median(values) if values else math.nan
