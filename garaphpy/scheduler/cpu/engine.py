"""The CPU engine: state of a run and one iteration on the CPU (Garaph section 4).

:class:`~garaphpy.scheduler.cpu_state.GraphArrays` holds what the kernels
read, :class:`~garaphpy.scheduler.cpu_state.RunState` the vertex values and
the frontier.  :meth:`CpuEngine.iterate` runs one iteration in the direction
:mod:`~garaphpy.scheduler.decisions` chose: pull page by page with
edge-balanced parts, or notify-pull over the notified vertices.

Synchronous runs read committed values and write the next buffer, committed
at the end of the iteration (a swap after pull, a copy of the updated
vertices after notify-pull); asynchronous runs write the values in place, so
updates are visible at once.  A synchronous pull of a source-side gather
first computes it once per vertex into :attr:`CpuEngine.contributions`
(:func:`garaphpy.scheduler.decisions.precompute_source_gathers`).  On the
CPU alone, with the edges one CSC in host memory, such a pull also makes the
next pull's contributions and the next iteration's aggregates as it writes
each new value (``CpuPlan.fused_pull``, GAPBS's PageRank loop).
A program final once set pulls with early exit there in one launch over
the whole CSC, in place (``CpuPlan.whole_settling_pull``, Beamer's
bottom-up step as GAPBS runs it).

:class:`CpuEngine` is what the driver, the processors and the checkpointer
use; it is made of parts, each owning one thing:

* :class:`~garaphpy.scheduler.cpu.settling.Settling`: the settled vertices
  of a run with early exit, the whole-CSC settling pull and the settling
  push, the floor skip, the union-find start and the shortcut labels;
* :class:`~garaphpy.scheduler.cpu.pulls.Pulls`: the pulls (page by page,
  fused, at the floor), the notify-pull, the source-side contributions, the
  aggregates and the warm-up of their kernels;
* :class:`~garaphpy.scheduler.cpu.batches.SparseBatches`: sparse iterations
  many to a kernel call, and the buckets of values with their push rounds.

The run's :class:`~garaphpy.scheduler.plan.CpuPlan` says which are on.
"""

from __future__ import annotations

import time

import numpy as np

from ... import config
from ..._numba_setup import parallel_section
from ...kernels import cpu as kernels
from ...kernels.cpu_program import CpuProgram
from ...monoids import monoid_identity
from .. import decisions, disk_decisions
from ..frontier import Frontier
from ..cpu_state import GraphArrays, RunState
from ..plan import CpuPlan
from ..records import IterationRecord
from .batches import SparseBatches
from .disk_reads import DiskReads
from .pulls import Pulls
from .settling import Settling


class CpuEngine:
    """Runs iterations of one compiled program on the CPU, as its
    :class:`~garaphpy.scheduler.plan.CpuPlan` says."""

    mode = "cpu"

    def __init__(self, arrays: GraphArrays, compiled: CpuProgram, state: RunState,
                 plan: CpuPlan):
        self.arrays = arrays
        self.compiled = compiled
        self.state = state
        #: the run's choices for this engine, made once
        self.plan = plan
        self.threads = plan.threads
        self.aggregate_identities = np.array(
            [monoid_identity(m, np.float64) for m in compiled.aggregate_monoids], np.float64)
        self.no_aggregates = np.zeros(1, np.float64)
        self.boundary_vertex = np.empty(2, np.int64)
        self.boundary_accum = np.empty(2, compiled.accum_dtype)
        self.stats = np.zeros(2, np.float64)
        self.all_vertices = None
        #: rho of section 4.2: k when pages come from secondary storage
        self.rho = arrays.page_source.rho
        #: the directions whose kernels :meth:`warm_up` has compiled
        self.warm_directions = set()
        self.settling = Settling(arrays, compiled, state, plan, self.stats,
                                 self._all_vertices)
        #: which pages each direction reads when pages come from disk
        self.disk_reads = DiskReads(arrays, plan, lambda: self.settling.settled)
        self.pulls = Pulls(arrays, compiled, state, plan, self.settling, stats=self.stats,
                           aggregate_identities=self.aggregate_identities,
                           no_aggregates=self.no_aggregates,
                           boundary_vertex=self.boundary_vertex,
                           boundary_accum=self.boundary_accum, warm_up=self.warm_up,
                           all_vertices=self._all_vertices, disk_reads=self.disk_reads)
        self.sparse = SparseBatches(arrays, compiled, state, plan, self.settling,
                                    self.no_aggregates, self.warm_up)

    @property
    def page_source(self):
        """The run's :class:`~garaphpy.storage.page_source.PageSource`."""
        return self.arrays.page_source

    @property
    def batches(self) -> bool:
        """Whether this run may batch sparse iterations (:meth:`iterate_batch`;
        ``plan.sparse_batches``)."""
        return self.plan.sparse_batches

    @property
    def settles_by_push(self) -> bool:
        """Whether this run's sparse iterations on the CPU alone push from the
        frontier, reading its out-edges alone (``plan.settling_push``)."""
        return self.plan.settling_push

    @property
    def page_done(self):
        """Called with (iteration, pages done) after each page of an
        asynchronous pull (``pulls.page_done``, set by the checkpointer)."""
        return self.pulls.page_done

    @page_done.setter
    def page_done(self, hook) -> None:
        self.pulls.page_done = hook

    @property
    def carried_iteration(self) -> int:
        """The iteration whose contributions the last fused pull made
        (``pulls.carried_iteration``)."""
        return self.pulls.carried_iteration

    @carried_iteration.setter
    def carried_iteration(self, iteration: int) -> None:
        self.pulls.carried_iteration = iteration

    def warm_up(self, directions=None) -> None:
        """Compile the kernels of ``directions`` for this program's types on empty work.

        Keeps numba's compilation out of the iterations' times, and compiles
        only the paths a run takes: by default the direction of the first
        iteration (Garaph's switch over the initial frontier); :meth:`iterate`
        and :meth:`begin_pull` warm a direction up when it is first taken.
        Kernels already compiled, or in numba's disk cache, cost no more
        than their loading.

        Parameters
        ----------
        directions : iterable of {"pull", "notify-pull", "batch"}, optional
            ``"batch"``: the kernel of :meth:`iterate_batch`.
        """
        if directions is None:
            active_edges, _ = self.active_out_edges()
            arrays = self.arrays
            # a run batches only after config.CPU_SPARSE_BATCH_AFTER single iterations,
            # but for one in buckets of values
            batches_first = self.sparse.bucket_width is not None or (
                self.batches and config.CPU_SPARSE_BATCH_AFTER == 0
                and decisions.sparse_batch(active_edges, arrays.num_edges,
                                           arrays.num_vertices, self.rho))
            directions = ("batch",) if batches_first else (decisions.choose_direction(
                decisions.active_fraction(active_edges, arrays.num_edges), self.rho,
                notify_pull=self.plan.notify_pull),)
        for direction in directions:
            kernels_of_program = self.compiled.kernels
            batch_kernel = kernels_of_program.priority_push_rounds if self.sparse.push_rounds \
                else kernels_of_program.priority_iterations if self.sparse.bucket_width is not None \
                else kernels_of_program.settle_push_rounds if self.sparse.settles_in_rounds() \
                else kernels_of_program.sparse_iterations
            if direction == "batch" and batch_kernel.signatures:
                # compiled in this process already: a warm-up (and the compile
                # announcement's timer thread) would cost a run more than the batch saves
                self.warm_directions.add(direction)
            if direction not in self.warm_directions:
                with self.compiled.compiling():
                    {"pull": self.pulls.warm_up_pull, "notify-pull": self.pulls.warm_up_notify_pull,
                     "batch": self.sparse.warm_up_batch}[direction]()
                self.warm_directions.add(direction)
                self.stats[:] = 0.0


    # -- the engine interface of the iteration driver -----------------------
    @property
    def num_edges(self) -> int:
        """|E| of the graph the engine runs on."""
        return self.arrays.num_edges

    def reset_statistics(self) -> None:
        """Zero the iteration's L1 change and activation count (before pages are
        pulled one by one, as a hybrid iteration does)."""
        self.stats[:] = 0.0

    @property
    def l1_change(self) -> float:
        """The L1 change summed since :meth:`reset_statistics`."""
        return float(self.stats[0])

    def num_active(self) -> int:
        """Vertices in the frontier (active after the last iteration)."""
        return int(self.state.frontier.size)

    def values_to_host(self) -> np.ndarray:
        """A copy of the committed vertex values."""
        return self.state.values.copy()

    def checkpoint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """The committed values and the frontier, between iterations (no copies).

        See :class:`garaphpy.scheduler.checkpoint.CheckpointableEngine`.
        """
        return self.state.values, self.state.frontier

    def values_between_pages(self) -> np.ndarray:
        """The values of an asynchronous pull between two pages (no copy)."""
        return self.state.values

    def set_frontier(self, frontier) -> None:
        """The active vertices: a :class:`~garaphpy.scheduler.frontier.Frontier`
        or sorted vertex ids (the engine keeps a copy of the ids)."""
        self.state.frontier = np.array(Frontier.of(frontier, self.arrays.num_vertices).ids,
                                       dtype=np.int64)

    def restore_checkpoint(self, values: np.ndarray, frontier: np.ndarray) -> None:
        """Continue from a checkpoint's committed values and frontier."""
        state = self.state
        state.values[:] = values
        if state.synchronous:
            state.next[:] = values
        self.set_frontier(frontier)
        self.pulls.carried_iteration = -1
        if self.settling.early_exit:
            self.settling.find_settled_again()

    # -- per-iteration pieces ------------------------------------------------

    def active_out_edges(self) -> tuple[int, np.ndarray | None]:
        """Sum of the frontier's out-degrees, and the prefix notify needs (None for
        a frontier of at least half the vertices, which mostly pulls, and for
        one a whole-CSC pull counted as it listed it: a notify-pull then
        makes the prefix itself)."""
        frontier = self.state.frontier
        if frontier.size == self.arrays.num_vertices:
            return self.arrays.num_edges, None
        if frontier is self.settling.counted_frontier:      # counted as the pull listed it
            return int(self.settling.found_out_edges[0]), None
        if 2 * frontier.size >= self.arrays.num_vertices:
            return kernels.frontier_degrees(frontier, self.arrays.out_offsets, self.threads), None
        prefix = kernels.frontier_degree_prefix(frontier, self.arrays.out_offsets,
                                                self.threads)
        return int(prefix[-1]), prefix

    def decide(self, record: IterationRecord, direction: str) -> None:
        """The iteration's direction: Garaph's switch (Beamer's for a run with early
        exit), or the forced one (recorded); with pages from disk in a
        synchronous run, each direction's reads counted
        (:meth:`_decide_from_disk`).  An asynchronous pull sweeps the pages in
        order, carrying a change many hops in one iteration, which a price of
        one iteration does not see: such runs keep Garaph's rule (rho = k)."""
        if self.disk_reads.from_disk and self.plan.notify_pull and self.state.synchronous:
            self._decide_from_disk(record, direction)
            return
        if self.settling.early_exit and self.plan.notify_pull:
            record.direction = decisions.decide(
                record, "direction", decisions.settling_direction,
                **self.settling.settling_inputs(round(record.active_fraction * self.arrays.num_edges),
                                        direction))
            return
        record.direction = decisions.decide(record, "direction", decisions.choose_direction,
                                            f=record.active_fraction, rho=record.rho,
                                            forced=direction, notify_pull=self.plan.notify_pull)

    def _decide_from_disk(self, record: IterationRecord, direction: str) -> None:
        """The in-memory rule over compute alone (rho = 1: whole pages are read
        either way), then :func:`disk_decisions.disk_direction` with the disk
        bytes of the pages each direction needs; recorded as
        ``decisions["direction"]``, the in-memory rule's entry as its
        ``memory_rule``."""
        arrays = self.arrays
        active_out_edges = round(record.active_fraction * arrays.num_edges)
        settling = self.settling.early_exit
        if settling:
            memory_rule = self.settling.settling_inputs(active_out_edges, direction)
            memory_rule["rho"] = config.RHO_IN_MEMORY
            memory_rule["choice"] = decisions.settling_direction(**memory_rule)
            pull_edges = memory_rule["unsettled_in_edges"] + arrays.num_vertices
        else:
            memory_rule = dict(f=record.active_fraction, rho=config.RHO_IN_MEMORY,
                               forced=direction)
            memory_rule["choice"] = decisions.choose_direction(**memory_rule)
            pull_edges = arrays.num_edges
        inputs = dict(chosen=memory_rule["choice"], pull_edges=float(pull_edges),
                      sparse_edges=disk_decisions.sparse_edge_units(
                          active_out_edges, arrays.num_edges, settling),
                      **self.disk_reads.inputs(self.state.frontier), forced=direction)
        record.direction = decisions.note(
            record, "direction", disk_decisions.disk_direction(**inputs),
            memory_rule=memory_rule, **inputs)["choice"]


    def iterate(self, record: IterationRecord, prefix, aggregates: np.ndarray) -> None:
        """One iteration in ``record.direction``; fills the record's counters."""
        self.warm_up((record.direction,))
        started = time.perf_counter()
        self._iterate(record, prefix, aggregates)
        record.cpu_busy_seconds = time.perf_counter() - started
        record.cpu_pages = record.pages
        record.cpu_edges = record.edges_processed


    def _iterate(self, record: IterationRecord, prefix, aggregates: np.ndarray) -> None:
        self.stats[:] = 0.0
        with parallel_section():
            if self.settling.union_find_pending and record.direction == "pull":
                self.pulls.read_ahead(record)
            self.settling.start_from_union_find(record)
            if record.direction == "pull":
                self.pulls.pull(record, aggregates)
            else:
                self.pulls.notify_pull(record, prefix, aggregates)
            if self.settling.shortcut:
                self.settling.shortcut_labels(record)
        self.settling.after_iteration(record.direction == "pull", record.active_vertices)
        record.l1_change = float(self.stats[0])
        record.activated = int(self.state.frontier.size)


    def _all_vertices(self) -> np.ndarray:
        """0..|V|-1, the store's (made once per store, shared by its runs:
        read-only, like every frontier), or made once for this run where the
        engine's vertices are not the store's."""
        if self.all_vertices is None:
            store = self.arrays.page_source.store
            self.all_vertices = store.vertex_range \
                if store.num_vertices == self.arrays.num_vertices \
                else kernels.all_vertex_ids(self.arrays.num_vertices, self.threads)
        return self.all_vertices

    def refresh_settled(self, pulled_last: bool, previous_active: int) -> None:
        """:meth:`Settling.refresh_settled <garaphpy.scheduler.cpu.settling.Settling.refresh_settled>`."""
        self.settling.refresh_settled(pulled_last, previous_active)

    def aggregates(self, iteration: int) -> np.ndarray:
        """The program's aggregates over the committed values
        (:meth:`Pulls.aggregates <garaphpy.scheduler.cpu.pulls.Pulls.aggregates>`)."""
        return self.pulls.aggregates(iteration)

    def may_batch(self, active_out_edges: int) -> bool:
        """:meth:`SparseBatches.may_batch <garaphpy.scheduler.cpu.batches.SparseBatches.may_batch>`."""
        return self.sparse.may_batch(active_out_edges)

    def iterate_batch(self, first_iteration: int, max_steps: int, tolerance: float | None,
                      active_out_edges: int, direction: str = "auto") -> list[IterationRecord]:
        """:meth:`SparseBatches.iterate_batch <garaphpy.scheduler.cpu.batches.SparseBatches.iterate_batch>`."""
        return self.sparse.iterate_batch(first_iteration, max_steps, tolerance,
                                         active_out_edges, direction)

    def begin_pull(self, record: IterationRecord) -> None:
        """:meth:`Pulls.begin_pull <garaphpy.scheduler.cpu.pulls.Pulls.begin_pull>`."""
        self.pulls.begin_pull(record)

    def page_cursor(self, order):
        """The CPU's walk over the pages ``order`` (the page source's cursor)."""
        return self.pulls.page_cursor(order)

    def pull_page(self, page, iteration: int, aggregates: np.ndarray, threads: int,
                  stats: np.ndarray | None = None, values_write: np.ndarray | None = None,
                  active: np.ndarray | None = None, *, data,
                  full: bool = False) -> list[tuple[int, object]]:
        """:meth:`Pulls.pull_page <garaphpy.scheduler.cpu.pulls.Pulls.pull_page>`."""
        return self.pulls.pull_page(page, iteration, aggregates, threads, stats,
                                    values_write, active, data=data, full=full)

    def finish_pull(self, record: IterationRecord, pending: list, aggregates: np.ndarray,
                    extra: dict | None = None, activated_elsewhere: int = 0,
                    in_place: bool = False) -> None:
        """:meth:`Pulls.finish_pull <garaphpy.scheduler.cpu.pulls.Pulls.finish_pull>`."""
        self.pulls.finish_pull(record, pending, aggregates, extra, activated_elsewhere,
                               in_place)

    def full_pull_changes(self, iteration: int, aggregates: np.ndarray) -> np.ndarray:
        """:meth:`Pulls.full_pull_changes <garaphpy.scheduler.cpu.pulls.Pulls.full_pull_changes>`."""
        return self.pulls.full_pull_changes(iteration, aggregates)


def _forward(part: str, names: tuple) -> None:
    """Read-only attributes of :class:`CpuEngine` that are its part's
    (``engine.settled`` is ``engine.settling.settled``)."""
    for name in names:
        def read(self, name=name):
            return getattr(getattr(self, part), name)
        setattr(CpuEngine, name, property(read, doc=f"``{part}.{name}``"))


#: What the driver, the processors, the checkpointer, the benches and the tests
#: read of the engine's parts.
FORWARDED = {
    "settling": ("early_exit", "settled", "settled_bits", "in_edge_bits", "unsettled_edges",
                 "unsettled_delta", "settling_found", "found_out_edges", "floor_mode",
                 "floor", "pulled_last", "previous_active", "shortcut",
                 "union_find_pending"),
    "pulls": ("precompute_source_gathers", "contributions", "fused_pull",
              "next_contributions", "part_starts", "carried_aggregates"),
    "sparse": ("bucket_width", "larger_first", "pending", "push", "push_weights",
               "push_rounds", "push_rounds_failed", "settle_rounds_failed",
               "sparse_singles"),
}
for _part, _names in FORWARDED.items():
    _forward(_part, _names)
