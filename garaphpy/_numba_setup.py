"""numba's threading layer, chosen before the first parallel launch.

The CPU engine runs its kernels while another Python thread feeds the GPU,
so the layer must be thread-safe: TBB or OpenMP ("threadsafe").  numba's
default fallback, workqueue, is not; where neither library is installed
garaphpy serializes its parallel launches through :data:`PARALLEL_LOCK`.
A user's own ``NUMBA_THREADING_LAYER`` is respected.

The OpenMP wait policy stays libgomp's default (workers spin a while after
a parallel region): on 16 cores a shorter spin (``GOMP_SPINCOUNT=10000``)
made in-memory iterations 15% slower and sleeping at once
(``OMP_WAIT_POLICY=PASSIVE``) two to three times slower, while neither
sped up PageRank streamed from storage beside the page readers
(``bench/wait_policy.py``, BENCHMARKS.md).  Spinning workers do hurt where
the machine is shared with other busy processes: a worker that loses its
core to another process holds every other worker at each barrier.  On a
2-core machine with one busy-loop process beside it, BFS on web-NotreDame
took 380-590 ms on 2 spinning threads against 23 ms on 2 passive ones (and
46-70 ms on one thread).  So where at least
``config.LOADED_MACHINE_BUSY_CORES`` cores are busy when garaphpy is
imported (sampled over the imports, :func:`busy_cores`), the
workers wait passively (``OMP_WAIT_POLICY=PASSIVE``, :data:`WAIT_POLICY`);
an idle machine keeps the spinning default.  A user's own
``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is respected.

Ctrl-C while numba compiles can land in one of llvmlite's ctypes callbacks
(the object-cache notification inside ``LLVMPY_FinalizeObject``), where
ctypes reports the KeyboardInterrupt through ``sys.unraisablehook`` (a raw
"Exception ignored" traceback) and drops it: the run went on and exited 0.
:class:`KeptInterrupts` remembers every SIGINT, silences that report, and
raises the KeyboardInterrupt again once the compiling code returns; numba
may instead fail on ("no compiled object yet"), and that error becomes the
KeyboardInterrupt it follows.  The store build and the engines' set-up run
inside it.

A SIGINT can also land inside the constructor of one of llvmlite's wrapper
objects, before it stores its pointer.  When the interrupt's traceback lets
go of that half-built object, its destructor fails with an AttributeError,
printed as another raw traceback after garaphpy's "interrupted" line.  After
an interrupt, :func:`forgive_half_built_llvm_objects` drops exactly those
reports; every other unraisable exception is still printed.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import signal
import sys
import threading

import numba

from .errors import SignalInterrupt

#: Held around parallel kernel launches when only workqueue is available.
#: Re-entrant: a launch may come inside another's section in the same thread
#: (a CPU consumer decoding the page it takes inside its walk's section).
PARALLEL_LOCK = threading.RLock()


def _threadsafe_layer_available() -> bool:
    for module in ("tbbpool", "omppool"):
        try:
            importlib.import_module(f"numba.np.ufunc.{module}")
            return True
        except ImportError:
            continue
    return False


def busy_cores(sample_seconds: float) -> float:
    """Cores' worth of other processes' work on the machine: over garaphpy's
    import, at least ``sample_seconds`` (:func:`garaphpy.config.other_processes_busy_cores`),
    or where that cannot be read, psutil's sample over ``sample_seconds``."""
    from . import config

    others = config.other_processes_busy_cores(sample_seconds)
    if others is not None:
        return others
    import psutil

    return psutil.cpu_percent(interval=sample_seconds) / 100.0 * (psutil.cpu_count() or 1)


def _choose_wait_policy() -> str:
    """OpenMP's wait policy for this process (before libgomp reads it)."""
    from . import config

    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return os.environ.get("OMP_WAIT_POLICY", "user's GOMP_SPINCOUNT")
    if busy_cores(config.LOAD_SAMPLE_SECONDS) >= config.LOADED_MACHINE_BUSY_CORES:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        return "PASSIVE"
    return "default (spin, then sleep)"


#: The wait policy chosen at import (see the module docstring).
WAIT_POLICY = _choose_wait_policy()

if "NUMBA_THREADING_LAYER" not in os.environ and _threadsafe_layer_available():
    numba.config.THREADING_LAYER = "threadsafe"
    THREADSAFE = True
else:
    THREADSAFE = os.environ.get("NUMBA_THREADING_LAYER", "") in ("tbb", "omp", "threadsafe",
                                                                  "safe")


def parallel_section():
    """Context for a parallel launch: a no-op with a thread-safe layer."""
    return contextlib.nullcontext() if THREADSAFE else PARALLEL_LOCK


#: [libgomp's ``omp_pause_resource_all`` or None], once the layer is known
_LIBGOMP_PAUSE: list = []


def _libgomp_pause():
    """libgomp's ``omp_pause_resource_all``, from the copy numba's OpenMP layer
    loaded (None where that layer is not in use, or libgomp predates it)."""
    if _LIBGOMP_PAUSE:
        return _LIBGOMP_PAUSE[0]
    try:
        layer = numba.threading_layer()
    except ValueError:      # no parallel launch yet: no team to release
        return None
    pause = None
    if layer == "omp":
        try:
            with open("/proc/self/maps") as maps:
                paths = sorted({line.split()[-1] for line in maps if "libgomp" in line})
        except OSError:     # not Linux
            paths = []
        for path in paths:
            pause = getattr(ctypes.CDLL(path), "omp_pause_resource_all", None)
            if pause is not None:
                pause.argtypes, pause.restype = [ctypes.c_int], ctypes.c_int
                break
    _LIBGOMP_PAUSE.append(pause)
    return pause


def release_thread_team() -> bool:
    """End the calling thread's OpenMP thread team, if numba's OpenMP layer made one.

    A thread that launched a parallel loop keeps its team (libgomp's pool)
    until it exits.  Beside another thread's team that leaves libgomp managing
    more threads than there are CPUs, and then every team's threads spin 100
    rounds instead of 300,000 before they sleep (``env.c``,
    ``gomp_throttled_spin_count_var``): each parallel region of the other
    team pays its threads' wake-ups (``bench/omp_teams.py``).  A hybrid run's
    CPU worker calls this when the run goes on without it; its next parallel
    loop makes the team again.  ``omp_pause_resource_all(omp_pause_soft)``
    (OpenMP 5.0) frees only the calling thread's pool in libgomp.  Returns
    whether a team was released; a no-op with TBB, workqueue or an OpenMP
    runtime other than libgomp.
    """
    pause = _libgomp_pause()
    return pause is not None and pause(1) == 0


def _is_half_built_llvm_object(unraisable) -> bool:
    """Whether ``unraisable`` is the destructor of an llvmlite object whose
    constructor an interrupt cut short (it never set ``_as_parameter_``)."""
    destructor = unraisable.object
    return (isinstance(unraisable.exc_value, AttributeError)
            and "'_as_parameter_'" in str(unraisable.exc_value)
            and getattr(destructor, "__module__", "").startswith("llvmlite.")
            and getattr(destructor, "__name__", "") == "__del__")


def forgive_half_built_llvm_objects() -> None:
    """From now on, drop the destructor errors of llvmlite objects half built
    when an interrupt came (see the module docstring); idempotent."""
    previous_hook = sys.unraisablehook
    if getattr(previous_hook, "forgives_half_built_llvm_objects", False):
        return

    def hook(unraisable) -> None:
        if not _is_half_built_llvm_object(unraisable):
            previous_hook(unraisable)

    hook.forgives_half_built_llvm_objects = True
    sys.unraisablehook = hook


class KeptInterrupts:
    """While active, a SIGINT raises KeyboardInterrupt as usual *and* is
    remembered, so one that a ctypes callback swallowed is raised again by
    :meth:`check` (see the module docstring).

    Usable as a context manager (checks on a normal exit, and turns an error
    raised after a swallowed SIGINT into the KeyboardInterrupt it follows) or
    with explicit :meth:`check` and :meth:`restore`.  Does nothing outside the
    main thread or where SIGINT has a handler other than Python's default.
    """

    def __init__(self):
        self.pressed = False
        #: the stop signal of an interrupt a callback dropped (None: Ctrl-C's)
        self.signal_number = None
        self.active = threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.default_int_handler
        if self.active:
            signal.signal(signal.SIGINT, self._remember)
            self._unraisablehook = sys.unraisablehook
            sys.unraisablehook = self._silence_dropped_interrupt

    def _silence_dropped_interrupt(self, unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            self.pressed = True     # raised again by check()
            # a stop signal (SIGTERM's SignalInterrupt) is raised again as itself
            self.signal_number = getattr(unraisable.exc_value, "signal_number",
                                         self.signal_number)
            return
        self._unraisablehook(unraisable)

    def _remember(self, signum, frame):
        self.pressed = True
        raise KeyboardInterrupt

    def _interrupt(self) -> KeyboardInterrupt:
        """The interrupt to raise again: Ctrl-C's, or the stop signal's."""
        if self.signal_number in (None, signal.SIGINT):
            return KeyboardInterrupt()
        return SignalInterrupt(self.signal_number)

    def restore(self) -> None:
        """Put Python's default handler back (idempotent)."""
        if self.active:
            self.active = False
            signal.signal(signal.SIGINT, signal.default_int_handler)
            sys.unraisablehook = self._unraisablehook
            if self.pressed:
                forgive_half_built_llvm_objects()

    def check(self) -> None:
        """Restore the default handler; raise KeyboardInterrupt if a SIGINT came."""
        self.restore()
        if self.pressed:
            self.pressed = False
            raise self._interrupt()

    def __enter__(self) -> "KeptInterrupts":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self.check()
            return
        self.restore()
        self.raise_interrupt_behind(error)

    def raise_interrupt_behind(self, error: BaseException) -> None:
        """Raise the swallowed SIGINT that ``error`` followed, if one came:
        numba fails on after one ("no compiled object yet")."""
        if self.pressed and not isinstance(error, KeyboardInterrupt):
            self.pressed = False
            raise self._interrupt() from error
