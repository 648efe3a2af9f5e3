"""The seconds numba spends compiling, measured apart from a run's iterations.

Garaph reports an iteration's time as the work of the iteration (section 6);
with numba, the first call of a kernel for a program's types compiles it, or
loads it from numba's disk cache, inside whatever call comes first.  The run
compiles the kernels of its first iteration before it starts
(``CpuEngine.warm_up``); a direction first taken later compiles its kernels
then.  A :class:`CompileClock` adds up the time numba holds its global
compiler lock (numba's ``numba:compiler_lock`` event: compilation and cache
loading, nothing else), so that a run records its compilation apart
(``Result.compile_seconds``, ``IterationRecord.compile_seconds``) and takes it
out of the set-up and iteration times.
"""

from __future__ import annotations

import threading
import time

from numba.core import event

#: numba's event around every compilation and every load from its disk cache
COMPILER_LOCK_EVENT = "numba:compiler_lock"
#: ... and its event around a compilation proper (none for a cache load)
COMPILE_EVENT = "numba:compile"


class CompileClock(event.Listener):
    """Seconds spent in numba's compiler while installed (``with`` block).

    Nested and concurrent compilations count once: the clock runs while at
    least one thread holds the compiler lock.
    """

    def __init__(self):
        self._depth = 0
        self._started = 0.0
        self._seconds = 0.0
        self._lock = threading.Lock()
        #: functions numba compiled (not loaded from its cache) while installed
        self.compiled = 0

    def on_start(self, event_) -> None:
        if event_.kind == COMPILE_EVENT:
            self.compiled += 1
            return
        with self._lock:
            if self._depth == 0:
                self._started = time.perf_counter()
            self._depth += 1

    def on_end(self, event_) -> None:
        if event_.kind == COMPILE_EVENT:
            return
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                self._seconds += time.perf_counter() - self._started

    @property
    def seconds(self) -> float:
        """Compilation so far (a compilation under way counted to now)."""
        with self._lock:
            running = time.perf_counter() - self._started if self._depth else 0.0
            return self._seconds + running

    def __enter__(self) -> "CompileClock":
        event.register(COMPILER_LOCK_EVENT, self)
        event.register(COMPILE_EVENT, self)
        return self

    def __exit__(self, *exc_info) -> None:
        event.unregister(COMPILE_EVENT, self)
        event.unregister(COMPILER_LOCK_EVENT, self)

    def describe(self, what: str) -> str:
        """One line for people: ``"compiling SSSP for the CPU: 6.1 s"``, or
        ``"SSSP for the CPU loaded from numba's cache: 0.3 s"`` when every
        kernel came from the cache."""
        if self.compiled:
            return f"compiling {what}: {self.seconds:.1f} s"
        return f"{what} loaded from numba's cache: {self.seconds:.1f} s"
