"""Progress lines for long work (preprocessing, long runs).

A :class:`Progress` prints at most one line every
``config.PROGRESS_INTERVAL_S`` seconds to standard error, so that a
preprocessing of hundreds of millions of edges shows it is alive without
flooding a log.  Silent when disabled.
"""

from __future__ import annotations

import sys
import time

from . import config


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
    """Rate-limited progress reporting of one task.

    Parameters
    ----------
    task : str
        What is being done, printed first on each line.
    total : float, optional
        The amount that means done, for a percentage.
    unit : str
        What is counted (``"edges"``).
    enabled : bool
        Print nothing when False.
    stream : file, optional
        Where lines go (standard error by default).
    """

    def __init__(self, task: str, total: float | None = None, unit: str = "edges",
                 enabled: bool = True, stream=None):
        self.task = task
        self.total = total
        self.unit = unit
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.perf_counter()
        self.last_print = self.started
        self.done = 0.0

    def update(self, done: float, stage: str = "") -> None:
        """Record that ``done`` units are finished; print if it is time."""
        self.done = done
        now = time.perf_counter()
        if not self.enabled or now - self.last_print < config.PROGRESS_INTERVAL_S:
            return
        self.last_print = now
        self._print(stage, now)

    def _print(self, stage: str, now: float) -> None:
        elapsed = now - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        text = f"{self.task}: {stage + ' ' if stage else ''}{human_count(self.done)} {self.unit}"
        if self.total:
            text += f" ({100.0 * self.done / self.total:.0f}%)"
        text += f", {human_count(rate)} {self.unit}/s, {elapsed:.1f} s"
        print(text, file=self.stream, flush=True)

    def note(self, message: str) -> None:
        """Print a one-off line (a stage change), if enabled."""
        if self.enabled:
            elapsed = time.perf_counter() - self.started
            print(f"{self.task}: {message} ({elapsed:.1f} s)", file=self.stream, flush=True)
