"""A hybrid run started on the CPU while the GPU is set up, then relayed (Garaph section 5.1).

Garaph keeps both processors busy.  Before a run's first iteration the GPU
is not busy but idle: setting it up (its engine, the pages copied, the
kernels loaded) takes 20-80 ms on a road network or a grid in a process
that has set a GPU up before, and the CPU alone runs a mesh's sparse
levels at a cost within a small factor of the GPU's device loop
(BENCHMARKS.md: 22-26 against 8-10 us a level on the H200 host).  Which
one finishes such a run first turns on the run's number of levels, which
nothing knows before it ends, so a choice made before the first iteration
(:mod:`~garaphpy.scheduler.set_up_choice`) misses by the error of its
guess.

The relay does not guess: the GPU is set up on a thread of its own while
the CPU alone runs the first iterations, in batches short enough that it
sees the GPU become ready.  Then, once, it compares what the rest of the
run would cost each way (:func:`hand_over_pays`): the CPU's levels at the
cost it measured, against the GPU's device loop and the copy of the
vertex values the hand-over makes; where the GPU wins it takes the run from
the CPU's committed values and frontier (the hand-over of
:mod:`~garaphpy.scheduler.run_choice`, as a checkpoint restores them), and
runs it to its end as the GPU's own mode would.  A run the CPU ends
before the GPU is ready is the CPU's own; the GPU's set-up then finishes on
its thread and is let go, without the run waiting for it.

The choice and its inputs are recorded as ``decisions["relay"]`` in the
first record the GPU runs (where the CPU keeps the run, in its next record).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

from .. import config, progress
from . import decisions
from .frontier import Frontier
from .records import IterationRecord
from .single_driver import SingleDriver

#: How long a batch of the CPU's levels may run while the GPU is set up, in
#: seconds: the delay the relay adds, at most, to the GPU's taking the run.
#: Each batch costs the CPU 40-100 us beside its levels (grid:1000x1000 BFS and
#: SSSP, 2 threads, the dev VM, 2026-12-05): the CPU's whole run, the GPU never
#: ready, took 1.04-1.09x the CPU mode's at 2 ms, 1.02 (BFS) at 10 ms.
CHECK_SECONDS = 4e-3

#: The CPU's first batch while the GPU is set up, in levels (before one is timed).
FIRST_BATCH_STEPS = 16


def hand_over_pays(cpu_level_seconds: float, gpu_level_seconds: float, levels_left: float,
                   hand_over_seconds: float) -> bool:
    """Whether the GPU should take the rest of a run from the CPU: its
    ``levels_left`` expected levels cost the GPU less, at
    ``gpu_level_seconds`` each, than the CPU's measured
    ``cpu_level_seconds``, by more than the hand-over costs."""
    return levels_left * (cpu_level_seconds - gpu_level_seconds) > hand_over_seconds


class _Handed:
    """The rest of a relayed run, handed to the GPU's own driver: a stretch
    of the iteration loop (:class:`~garaphpy.scheduler.run_choice.Stretch`'s
    interface) that ends where the run does."""

    def __init__(self, relay: "RelayDriver", driver: SingleDriver, end: int):
        self.relay = relay
        self.driver = driver
        self.end = end

    @staticmethod
    def crossed(active_out_edges: int) -> bool:
        """Never: the GPU keeps the run to its end."""
        return False

    def note(self, first: IterationRecord) -> None:
        """The GPU's first record gets the relay's choice."""
        self.relay.note_choice(first)

    def done(self, records: list[IterationRecord]) -> None:
        """Nothing to learn: the run is over."""


class RelayDriver:
    """Runs a frontier program on the CPU alone while the GPU is set up, then
    hands the run to the GPU where that pays (see the module docstring).

    Parameters
    ----------
    cpu : SingleDriver
        The CPU alone's driver, its engine warmed up and its frontier the run's first.
    gpu_set_up : concurrent.futures.Future
        The GPU's set-up, under way (:func:`start_gpu_set_up`): the GPU alone's
        own driver and its plan (or None), once made.
    graph_shape : tuple
        (|V|, |E|, in-degree skew): the levels the run is expected to take
        (:func:`decisions.expected_iterations`).

    Attributes
    ----------
    mode : str
        The processor running now: ``"cpu"``, then ``"gpu"`` once handed over.
    cpu : Processor
        The CPU's processor (its engine probes a user's declarations at the end).
    cpu_driver, gpu : SingleDriver or None
        The CPU's driver, and the GPU's once it took the run (None before).
    gpu_plan : GpuPlan or None
        The GPU's plan, once it took the run.
    """

    def __init__(self, cpu: SingleDriver, gpu_set_up: Future, graph_shape: tuple):
        self.cpu_driver = cpu
        self.cpu = cpu.cpu
        self.gpu = None
        self.gpu_plan = None
        self.current = cpu
        self.graph_shape = graph_shape
        self.entry = None           # the relay's choice, once made
        self._entry_noted = False
        self._level_seconds = None  # the CPU's last iteration or batch, a level
        self._failed = False
        self._gpu: Future = gpu_set_up
        self._started = time.perf_counter()

    # -- what the iteration loop reads: the processor running now -----------------------
    @property
    def mode(self) -> str:
        """The processor running now."""
        return self.current.mode

    @property
    def rho(self) -> float:
        """rho of the cost model (section 4.2), the running processor's."""
        return self.current.rho

    @property
    def page_source(self):
        """The run's :class:`~garaphpy.storage.page_source.PageSource`."""
        return self.current.page_source

    @property
    def num_edges(self) -> int:
        """|E|."""
        return self.current.num_edges

    @property
    def page_done(self):
        """Called with (iteration, pages done) after each page."""
        return self.current.page_done

    @page_done.setter
    def page_done(self, hook) -> None:
        self.current.page_done = hook

    def num_active(self) -> int:
        """Vertices active after the last iteration."""
        return self.current.num_active()

    def active_out_edges(self):
        """Sum of the active vertices' out-degrees (and the prefix notify needs)."""
        return self.current.active_out_edges()

    def decide(self, record: IterationRecord, direction: str) -> None:
        """The running processor's decisions for ``record``."""
        self.current.decide(record, direction)
        self.note_choice(record)

    def aggregates(self, iteration: int):
        """The running processor's aggregates over the committed values."""
        return self.current.aggregates(iteration)

    def iterate(self, record: IterationRecord, prefix, aggregates) -> None:
        """One iteration of the running processor, timed (the CPU's cost a level)."""
        started = time.perf_counter()
        self.current.iterate(record, prefix, aggregates)
        self._level_seconds = time.perf_counter() - started

    def iterate_batch(self, first_iteration: int, max_steps: int, tolerance,
                      active_out_edges: int, direction: str = "auto") -> list[IterationRecord]:
        """The CPU's batch, short while the GPU is set up (``CHECK_SECONDS``),
        so that the GPU takes the run soon after it is ready."""
        if self.entry is None:
            max_steps = min(max_steps, self._steps_between_checks())
        started = time.perf_counter()
        records = self.current.iterate_batch(first_iteration, max_steps, tolerance,
                                             active_out_edges, direction)
        if records:
            self._level_seconds = (time.perf_counter() - started) / len(records)
            self.note_choice(records[0])
        return records

    def _steps_between_checks(self) -> int:
        if self._level_seconds is None:
            return FIRST_BATCH_STEPS
        return max(1, int(CHECK_SECONDS / max(self._level_seconds, 1e-9)))

    # -- the hand-over --------------------------------------------------------------------
    def stretch(self, iteration: int, steps_left: int, active_out_edges: int) -> _Handed | None:
        """The rest of the run on the GPU, where it is ready and taking the run
        pays (:func:`hand_over_pays`, decided once); None: the CPU goes on."""
        if self.entry is not None or not self._gpu.done():
            return None
        if self._gpu.exception() is not None:
            self._failed = True
            raise self._gpu.exception()      # the set-up's error is the run's
        gpu, gpu_plan = self._gpu.result()
        num_vertices, num_edges, skew = self.graph_shape
        levels_left = min(decisions.expected_iterations(num_vertices, num_edges, skew,
                                                        done=iteration), steps_left)
        values, frontier = self.cpu_driver.checkpoint_state()
        moved = values.nbytes + frontier.nbytes
        # ready before the CPU's first batch: the CPU's cost a level as the set-up priced it
        cpu_level = self._level_seconds
        if cpu_level is None:
            cpu_level = config.HYBRID_CPU_LEVEL_SECONDS
        gpu_level = (config.HYBRID_LOOP_ITERATION_SECONDS
                     + active_out_edges / config.HYBRID_GPU_EDGES_PER_SECOND)
        hand_over = moved / config.GPU_BUS_BYTES_PER_SECOND
        entry = self.entry = decisions.fixed(
            hand_over_pays, cpu_level_seconds=cpu_level, gpu_level_seconds=gpu_level,
            levels_left=levels_left, hand_over_seconds=hand_over)
        entry.update(iteration=iteration, cpu_levels_timed=self._level_seconds is not None,
                     gpu_ready_seconds=time.perf_counter() - self._started,
                     handed_over_bytes=moved if entry["choice"] else 0)
        if not entry["choice"]:
            gpu.close()
            return None
        self.gpu, self.gpu_plan = gpu, gpu_plan
        gpu.restore_checkpoint(values, Frontier.of(frontier, values.size))
        self.current = gpu
        progress.logger("hybrid").info(
            f"hybrid: the GPU takes the run at iteration {iteration} (ready after "
            f"{entry['gpu_ready_seconds'] * 1e3:.1f} ms)")
        return _Handed(self, gpu, iteration + steps_left)

    def note_choice(self, record: IterationRecord) -> None:
        """``record`` gets the relay's choice, if it was made and not yet recorded."""
        if self.entry is not None and not self._entry_noted:
            self._entry_noted = True
            record.decisions["relay"] = self.entry

    # -- the run's end --------------------------------------------------------------------
    def bring_host_current(self) -> None:
        """The CPU's copy made current from the GPU's, where the GPU ran the end."""
        if self.current is not self.cpu_driver:
            values, frontier = self.current.checkpoint_state()
            self.cpu_driver.restore_checkpoint(values, Frontier.of(frontier, values.size))

    def values_to_host(self):
        """A copy of the committed values."""
        return self.current.values_to_host()

    def checkpoint_state(self):
        """The committed values and the frontier."""
        return self.current.checkpoint_state()

    def close(self) -> None:
        """Close both drivers; a GPU still being set up is closed once it is, on its
        own thread (the run does not wait for it)."""
        self.cpu_driver.close()
        if self.gpu is not None:
            self.gpu.close()
        elif self.entry is None and not self._failed:
            self._gpu.add_done_callback(close_unused_set_up)


def start_gpu_set_up(build: Callable[[], tuple]) -> Future:
    """``build()`` (the GPU's set-up, returning its driver and plan) started on a
    thread of its own; its future."""
    setting_up = ThreadPoolExecutor(max_workers=1, thread_name_prefix="garaphpy-gpu-set-up")
    try:
        return setting_up.submit(build)
    finally:
        setting_up.shutdown(wait=False)


def close_unused_set_up(future: Future) -> None:
    """Close the driver a set-up made, once made (its error, if any, only logged:
    the run it was made for ended without it)."""
    error = future.exception()
    if error is not None:
        progress.logger("hybrid").warning(f"hybrid: the GPU's set-up, not needed, failed: "
                                          f"{error}")
        return
    future.result()[0].close()
