"""Progress lines for long work (preprocessing, long runs), through :mod:`logging`.

A :class:`Progress` emits at most one line every
``config.PROGRESS_INTERVAL_S`` seconds, so that a preprocessing of hundreds
of millions of edges shows it is alive without flooding a log.  Messages go
to the standard library's logger ``"garaphpy"`` and its children (here
``"garaphpy.preprocess"`` and the like, at INFO), so that notebooks and
servers route them like any other log; the package installs only a
``NullHandler``, so a library user sees nothing until they configure
logging (``logging.basicConfig(level=logging.INFO)``).  The command line
prints them to standard error with :func:`log_to_stderr`.

Where that handler is on, standard error is a terminal and tqdm is installed
(the ``progress`` extra: ``pip install "garaphpy[progress]"``), a
:class:`Progress` draws a tqdm bar with its rate and ETA instead of the
lines; without tqdm, or when standard error goes to a file or a pipe, the
lines stay.  Inside ``with progress:`` numba's compilation is timed
(:class:`~garaphpy.compile_clock.CompileClock`) and left out of the rate, so
that a first build's compiling does not show as a slow rate.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

from . import config

#: The package's logger; progress and status messages go to its children.
LOGGER_NAME = "garaphpy"

#: ``extra`` of a log record the command line prints itself (on standard
#: output), so that its stderr handler leaves it out: ``logger.info(text,
#: extra=PRINTED_BY_CLI)``.
PRINTED_BY_CLI = {"garaphpy_printed_by_cli": True}


#: Whether :func:`log_to_stderr` prints progress now (bars may be drawn then).
_PRINTING_TO_STDERR = [False]


def _tqdm():
    """tqdm's class, or None where it is not installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def bars_available(stream=None) -> bool:
    """Whether progress shows as tqdm bars: tqdm installed, the command line
    printing progress, and standard error (or ``stream``) a terminal."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(_PRINTING_TO_STDERR[0] and isatty is not None and isatty()
                and _tqdm() is not None)


def logger(name: str = "") -> logging.Logger:
    """The logger ``garaphpy.<name>`` (``garaphpy`` itself for ``""``)."""
    return logging.getLogger(f"{LOGGER_NAME}.{name}" if name else LOGGER_NAME)


class _StderrHandler(logging.Handler):
    """Writes each message, as it is, to the current ``sys.stderr``."""

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "garaphpy_printed_by_cli", False):
            return
        try:
            stream = sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - logging's own convention
            self.handleError(record)


@contextlib.contextmanager
def log_to_stderr(quiet: bool = False):
    """Print the ``garaphpy`` loggers' messages to standard error while inside.

    The command line's handler: INFO and above (progress, status), or only
    WARNING and above with ``quiet``; the message text alone, one line each.
    The logger's level and handlers are restored on exit.
    """
    package = logger()
    handler = _StderrHandler(logging.WARNING if quiet else logging.INFO)
    handler.setFormatter(logging.Formatter("%(message)s"))
    previous_level = package.level
    previous_printing = _PRINTING_TO_STDERR[0]
    package.addHandler(handler)
    package.setLevel(handler.level)
    _PRINTING_TO_STDERR[0] = not quiet
    try:
        yield handler
    finally:
        _PRINTING_TO_STDERR[0] = previous_printing
        package.removeHandler(handler)
        package.setLevel(previous_level)


def human_count(value: float) -> str:
    """``12345678 -> '12.3M'``."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value:.0f}"


def human_bytes(value: float) -> str:
    """``1536 -> '1.5 KiB'``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value:.0f} B"


class Progress:
    """Rate-limited progress reporting of one task: a tqdm bar where
    :func:`bars_available`, else lines through :mod:`logging`.

    Used as a context manager, it times numba's compilation inside and
    leaves it out of the rate (``compile_seconds``), and closes its bar.

    Parameters
    ----------
    task : str
        What is being done, printed first on each line.
    total : float, optional
        The amount that means done, for a percentage.
    unit : str
        What is counted (``"edges"``).
    enabled : bool
        Emit nothing when False.
    stream : file, optional
        Print lines to this file instead of logging them.
    log : logging.Logger, optional
        Where lines go (at INFO); default the logger ``garaphpy.<task>``.
    """

    def __init__(self, task: str, total: float | None = None, unit: str = "edges",
                 enabled: bool = True, stream=None, log: logging.Logger | None = None):
        self.task = task
        self.total = total
        self.unit = unit
        self.enabled = enabled
        self.stream = stream
        self.log = log if log is not None else logger(task)
        self.started = time.perf_counter()
        self.last_print = self.started
        self.done = 0.0
        self._clock = None
        self._bar = None
        if enabled and stream is None and bars_available():
            self._bar = _tqdm()(total=total, desc=task, unit=f" {unit}", unit_scale=True,
                                file=sys.stderr, dynamic_ncols=True,
                                delay=config.PROGRESS_INTERVAL_S / 2)

    @property
    def compile_seconds(self) -> float:
        """numba's compilation so far inside ``with`` (0.0 outside one)."""
        return self._clock.seconds if self._clock is not None else 0.0

    def __enter__(self) -> "Progress":
        from .compile_clock import CompileClock

        self._clock = CompileClock().__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self._clock.__exit__(*exc_info)
        self.close()

    def close(self) -> None:
        """End the bar, if one is drawn."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def update(self, done: float, stage: str = "") -> None:
        """Record that ``done`` units are finished; print if it is time."""
        if self._bar is not None:
            self._bar.update(done - self.done)
            if stage:
                self._bar.set_postfix_str(stage, refresh=False)
        self.done = done
        now = time.perf_counter()
        if not self.enabled or self._bar is not None \
                or now - self.last_print < config.PROGRESS_INTERVAL_S:
            return
        self.last_print = now
        self._print(stage, now)

    def _print(self, stage: str, now: float) -> None:
        elapsed = now - self.started
        compiling = self.compile_seconds
        working = elapsed - compiling
        rate = self.done / working if working > 0 else 0.0
        text = f"{self.task}: {stage + ' ' if stage else ''}{human_count(self.done)} {self.unit}"
        if self.total:
            text += f" ({100.0 * self.done / self.total:.0f}%)"
        text += f", {human_count(rate)} {self.unit}/s, {elapsed:.1f} s"
        if compiling >= config.COMPILE_SHOWN_AFTER_SECONDS:
            text += f" (compiling {compiling:.1f} s of it)"
        self._emit(text)

    def note(self, message: str) -> None:
        """Print a one-off line (a stage change), if enabled."""
        if self.enabled:
            elapsed = time.perf_counter() - self.started
            self._emit(f"{self.task}: {message} ({elapsed:.1f} s)")

    def _emit(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        elif self.stream is not None:
            print(text, file=self.stream, flush=True)
        else:
            self.log.info(text)


def iteration_bar(max_iterations: int, enabled: bool = True) -> Progress | None:
    """A bar over a run's iterations (rate, and ETA against ``max_iterations``)
    where :func:`bars_available`; None otherwise (the caller prints its lines)."""
    if not enabled or not bars_available():
        return None
    return Progress("run", total=max_iterations, unit="iterations")


class DelayedCalls:
    """Calls made once their delay has passed unless withdrawn first, all from
    one daemon thread (``garaphpy-delayed``), started at the first call.

    For announcements such as "compiling ... for the CPU" that matter only when
    the work they name lasts: a ``threading.Timer`` per piece of work would
    start a thread on every warm run, which took 0.1-4.5 ms a start on a
    2-core machine right after a parallel region (its OpenMP threads still
    spinning on the cores), several times a run.
    """

    def __init__(self):
        self._keys = itertools.count()
        self._forget_thread()
        if hasattr(os, "register_at_fork"):     # a forked child has no such thread
            os.register_at_fork(after_in_child=self._forget_thread)

    def _forget_thread(self) -> None:
        self._condition = threading.Condition()
        self._pending: dict[int, tuple[float, Callable[[], None]]] = {}
        self._thread: threading.Thread | None = None

    def schedule(self, delay: float, call: Callable[[], None]) -> int:
        """Make ``call()`` after ``delay`` seconds; the key for :meth:`withdraw`."""
        with self._condition:
            key = next(self._keys)
            was_idle = not self._pending
            self._pending[key] = (time.monotonic() + delay, call)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True,
                                                name="garaphpy-delayed")
                self._thread.start()
            elif was_idle or delay <= 0:
                self._condition.notify()
            return key

    def withdraw(self, key: int) -> None:
        """Do not make the call of ``key``, if not made already."""
        with self._condition:
            self._pending.pop(key, None)

    def _serve(self) -> None:
        while True:
            with self._condition:
                while True:
                    if not self._pending:
                        self._condition.wait()
                        continue
                    key, (deadline, call) = min(self._pending.items(),
                                                key=lambda item: item[1][0])
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        del self._pending[key]
                        break
                    self._condition.wait(remaining)
            try:
                call()
            except Exception:       # an announcement that fails must not end the thread
                logger("progress").exception("a delayed call failed")


#: The process's :class:`DelayedCalls`.
DELAYED = DelayedCalls()
