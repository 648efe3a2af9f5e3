"""The iteration driver: one run's iterations on the CPU, the GPU, or both (Garaph sections 4.1, 5.1).

A :class:`Driver` is made with the engines of the processors a run uses:

* **the CPU alone** (mode ``cpu``): each iteration is the CPU engine's own,
  in the direction Garaph's switch chooses (notify-pull when
  f <= 1 / (2 rho), else pull; section 4.1); no policy, no GPU, no thread;
  small notify-pulls run many to a call (:meth:`Driver.iterate_batch`);
* **the GPU alone** (mode ``gpu``): each iteration is the GPU engine's pull
  over every page, or, while the frontier is small, a sparse notify-pull in
  a loop kept on the device (many iterations to one call,
  :meth:`Driver.iterate_batch`); no policy, no host copy to keep current;
* **both** (mode ``hybrid``): each iteration the policy
  (:class:`~garaphpy.scheduler.policy.HybridPolicy`) decides by alpha
  (section 5.1) whether the CPU runs alone (with its own notify-pull or
  pull choice) or both processors pull pages from one
  :class:`~garaphpy.scheduler.policy.PageQueue`: the GPU from the
  front, driven by the calling thread, which keeps a few pages queued on
  its CUDA streams; the CPU from the back, in a worker thread (the numba
  kernels release the GIL) running on one thread fewer than the run's,
  leaving a core to feed the GPU.  When the tail rule leaves the CPU
  nothing from the start, the iteration is the GPU engine's own (no
  thread hand-off); where the GPU's device loop would also take it (a
  sparse frontier on resident pages), the policy weighs the loop's cost,
  and if it leaves the GPU alone the loop runs the iterations as a run on
  the GPU alone would, one decision covering them
  (:meth:`Driver.iterate_batch`).

The rest of this page is about the two-processor case.

Vertex synchronization (section 4.1's last paragraphs).  Host memory and the
GPU each hold the vertex values and the activity:

* after a GPU page, the page's updated vertex range and activity are copied
  to host memory on the page's stream, overlapping the next pages;
* after a CPU page, its range goes to the GPU on a stream of its own,
  overlapping the CPU's next page;
* synchronous runs write both into the next-iteration buffers and commit
  both at the end of the iteration; asynchronous runs write the values in
  place, so each processor sees the other's pages as soon as they land;
* a vertex whose in-edges are cut between pages is applied on the host
  from the partial sums (the GPU's from its split accumulator) and its
  value sent to the GPU;
* a copy that is not current (the GPU's after CPU-only iterations, the
  host's after GPU-only ones) is brought up to date, as a whole, before an
  iteration that needs it.

The copies are :class:`~garaphpy.scheduler.vertex_state.VertexState`'s; the
pages go to a :class:`~garaphpy.scheduler.processors.CpuProcessor` and a
:class:`~garaphpy.scheduler.processors.GpuProcessor` (begin, process a page,
finish with a result), so this module is the driver alone and touches
neither engine's insides (it reads only their public attributes and methods).

Every hybrid iteration's record gets the decision (alpha, the ratio), the
pages and edges of each processor, their busy and idle time, the bytes
moved, and the dispatcher's own time (deciding, synchronizing, combining;
no page work).  A one-processor iteration's record is its engine's.
"""

from __future__ import annotations

import collections
import inspect
import itertools
import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from .. import config
from .._numba_setup import parallel_section, release_thread_team
from ..errors import ConfigError
from ..kernels import cpu as kernels
from . import decisions
from .policy import HybridPolicy, Observation, PageQueue
from .processors import CpuProcessor, GpuProcessor, ProcessorResult
from .records import IterationRecord
from .vertex_state import VertexState


class Driver:
    """Runs iterations of one program on the CPU, the GPU, or the CPU and the GPU.

    Parameters
    ----------
    cpu : CpuEngine, optional
        The CPU engine of the run, warmed up.
    gpu : GpuEngine, optional
        The GPU engine of the same run.
    policy : HybridPolicy, optional
        Divides the iterations of a run on both processors (default: a new
        :class:`HybridPolicy`); a run on one processor takes none.

    Attributes
    ----------
    mode : {"cpu", "gpu", "hybrid"}
        The processors: the CPU alone, the GPU alone, or both.
    alone : CpuEngine or GpuEngine or None
        The engine of a one-processor run (None when both run).

    Raises
    ------
    garaphpy.errors.ConfigError
        Neither engine given, or a policy for a run on one processor.
    """

    def __init__(self, cpu=None, gpu=None, policy: HybridPolicy | None = None):
        if cpu is None and gpu is None:
            raise ConfigError("Driver: expected a CPU engine, a GPU engine or both; got neither")
        self.cpu = cpu
        self.gpu = gpu
        self.alone = gpu if cpu is None else cpu if gpu is None else None
        #: the engine whose |E|, rho and page source are the run's: the CPU's where
        #: there is one (rho prices its direction choice)
        self.primary = cpu if cpu is not None else gpu
        #: called with (iteration, pages done) after each page of an asynchronous
        #: hybrid iteration, from either processor's thread (checkpoints after pages)
        self.page_done = None
        self.dispatch_seconds = 0.0
        self.policy = policy
        self.vertex_state = None
        self.worker = None
        if self.alone is not None:
            if policy is not None:
                raise ConfigError(f"policy: a HybridPolicy divides iterations between the CPU "
                                  f"and the GPU; a run on the {self.alone.mode.upper()} alone "
                                  "takes none")
            self.mode = self.alone.mode
            return
        self.mode = "hybrid"
        self._set_up_both(cpu, gpu, HybridPolicy() if policy is None else policy)

    # -- set-up of a run on both processors ------------------------------------------------
    def _set_up_both(self, cpu, gpu, policy: HybridPolicy) -> None:
        """The policy, the two copies of the vertex data, the processors, the CPU
        worker thread and the start-up calibration of a hybrid run."""
        self.cupy = gpu.cupy
        self.policy = policy
        self.synchronous = cpu.state.synchronous
        self.threads = cpu.threads
        self.cpu_threads = max(1, cpu.threads - 1)
        self.pages = cpu.arrays.pages
        self.page_edges = [page.num_edges for page in self.pages]
        self.total_page_edges = sum(self.page_edges)
        # pages kept on the GPU while others stream go to the GPU's end of the queue,
        # and the CPU takes none of them; a streamed page costs the GPU its copy
        streaming = not gpu.plan.resident
        self.gpu_kept = (frozenset(np.flatnonzero(gpu.kept_pages).tolist()) if streaming
                         else frozenset())
        self.page_order = sorted(range(len(self.pages)), key=lambda k: k not in self.gpu_kept)
        self.page_bus_bytes = [int(gpu.page_bus_bytes[k]) if streaming and k not in self.gpu_kept
                               else 0 for k in range(len(self.pages))]
        self.vertex_state = VertexState(cpu.state, gpu, self.threads, self.policy.smooth)
        self.cpu_processor = CpuProcessor(cpu, self.vertex_state, self.cpu_threads)
        self.gpu_processor = GpuProcessor(gpu, self.vertex_state)
        self.device_id = self.cupy.cuda.Device().id
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="garaphpy-cpu")
        self.worker.submit(self._start_worker_threads).result()
        self._worker_team_live = True
        self._release_unnoted = False
        self.has_aggregates = bool(cpu.compiled.aggregate_monoids)
        # per vertex, the in-edges of its out-neighbours: summed over a frontier, what a
        # notify-pull would gather at most (the cost model's p)
        arrays = cpu.arrays
        self.neighbour_in_edges = np.empty(arrays.num_vertices, np.int64)
        with parallel_section():
            kernels.out_neighbour_in_degrees(arrays.out_offsets, arrays.out_targets,
                                             arrays.in_offsets, self.neighbour_in_edges)
        with gpu.main_stream:       # the stream of the GPU's kernels that read them
            self.device_neighbour_in_edges = self.cupy.asarray(self.neighbour_in_edges)
            self.no_device_aggregates = self.cupy.zeros(1, np.float64)
        self._device_pull_fraction()        # compiles its kernels here, not in a run
        self.decide_keywords = _accepts_keywords(self.policy.decide, (
            "cpu_sync_seconds", "gpu_sync_seconds", "pull_fraction"))
        self.decide_loop = _accepts_keywords(self.policy.decide, ("gpu_loop",))
        self.decide_dense = _accepts_keywords(self.policy.decide, ("gpu_dense",))
        # a policy's own should_take divides the pages by itself: no join plan, no prices
        self.plans_joins = type(self.policy).should_take is HybridPolicy.should_take
        #: (iteration, decision) made while offering the iteration to the device loop,
        #: which :meth:`decide` takes instead of deciding again
        self._decided = None
        self._synced_to_device = 0     # bytes of a copy made for a loop that ran nothing
        self._synced_to_host = 0       # ... for a CPU batch that ran nothing
        self._join_plan = None          # the last plan_join, for the iteration's record
        #: whether the CPU's settled vertices (a run with early exit) know every write
        #: so far, and (pulled, frontier size) of the last iteration: Beamer's inputs
        self._settled_current = True
        self._last_iteration = (False, 0)
        if self.policy.ratio is None or self.policy.cpu_seconds_per_edge is None \
                or self.policy.gpu_seconds_per_edge is None:
            self._calibrate()
        self.policy.seed_sparse_pass(config.HYBRID_GPU_SPARSE_OVERHEAD_SECONDS,
                                     gpu.sparse_edge_seconds())

    def _start_worker_threads(self) -> None:
        """Runs in the CPU worker: its thread team of numba's parallel layer is
        made here, at set-up, instead of in the first hybrid iteration."""
        numba.set_num_threads(self.cpu_threads)
        with parallel_section():
            kernels.frontier_of(np.ones(self.cpu_threads * 2, np.bool_), self.cpu_threads)

    def _release_worker_team(self, record: IterationRecord | None = None,
                             wait: bool = False) -> None:
        """The run goes on without the CPU worker: its thread team ends (in the
        worker), so that the main thread's team is the only one libgomp
        manages and keeps its spinning between parallel regions
        (:func:`~garaphpy._numba_setup.release_thread_team`).  The worker's
        next joined iteration makes the team again.  ``wait``: before the
        CPU runs alone, whose team would otherwise share the cores with the
        threads being ended (its first iteration after the GPU's took 10-40
        ms instead of 1-2 on rmat:22; the release takes about 0.5 ms);
        the GPU's iterations do not wait.  The release is noted in the
        decisions of ``record``, or, without one, of the next record this is
        called with."""
        if self._worker_team_live:
            self._worker_team_live = False
            released = self.worker.submit(release_thread_team)
            if wait:
                released.result()
            self._release_unnoted = True
        if record is not None and self._release_unnoted:
            self._release_unnoted = False
            decisions.note(record, "worker_team_released", True)

    def _calibrate(self) -> None:
        """The start-up probe, into scratch buffers: the CPU pulls the largest
        page, the GPU every page as in an iteration (one page alone would
        leave most of the card idle and overstate its time per edge); this
        gives the two pull rates and T_pull / T_GPU."""
        page_index = int(np.argmax(self.page_edges)) if self.pages else 0
        if not self.pages or self.page_edges[page_index] == 0:
            return
        page = self.pages[page_index]
        data = self.page_source.read_page(page_index, "cpu")
        aggregates = self.cpu.aggregates(0)
        device_aggregates = self._device_aggregates(aggregates)
        gpu_seconds = self.gpu.probe_pages(self.page_order, device_aggregates)
        cpu = self.cpu
        scratch_values = np.empty_like(cpu.state.values)
        scratch_active = np.zeros_like(cpu.state.active)
        scratch_stats = np.zeros(2, np.float64)
        record = IterationRecord(0, "hybrid", "pull", False, 1.0, 1.0, 0)
        best = np.inf
        previous = numba.get_num_threads()
        numba.set_num_threads(self.cpu_threads)
        try:
            with parallel_section():
                for _ in range(2):
                    started = time.perf_counter()
                    cpu.begin_pull(record)
                    cpu.pull_page(page, 0, aggregates, self.cpu_threads, scratch_stats,
                                  scratch_values, scratch_active, data=data, full=True)
                    best = min(best, time.perf_counter() - started)
        finally:
            numba.set_num_threads(previous)
        self.policy.calibrate(page.num_edges, best, self.total_page_edges, gpu_seconds,
                              num_edges=self.num_edges,
                              cpu_iteration_seconds=self._cpu_iteration_overhead(aggregates))

    def _cpu_iteration_overhead(self, aggregates) -> float:
        """c_0: a CPU notify-pull iteration of an empty frontier (every kernel
        launched, no work), the fastest of three; the run's state is restored."""
        cpu, state = self.cpu, self.cpu.state
        frontier = state.frontier
        best = np.inf
        try:
            for _ in range(3):
                state.frontier = np.zeros(0, np.int64)
                record = IterationRecord(0, "cpu", "notify-pull", False, 0.0, 1.0, 0)
                started = time.perf_counter()
                cpu.iterate(record, None, aggregates)
                best = min(best, time.perf_counter() - started)
        finally:
            state.frontier = frontier
        return float(best)

    # -- copies between the two memories ----------------------------------------------------
    def _device_aggregates(self, aggregates: np.ndarray):
        if not self.has_aggregates:
            return self.no_device_aggregates
        with self.gpu.main_stream:
            return self.cupy.asarray(aggregates)

    # -- the engine interface of the iteration loop (api._iterate) ----------------------
    @property
    def num_edges(self) -> int:
        """|E|."""
        return self.primary.num_edges

    @property
    def rho(self) -> float:
        """rho of the cost model: k when a CPU reads pages from storage (section 4.2)."""
        return self.primary.rho

    @property
    def page_source(self):
        """The run's :class:`~garaphpy.storage.page_source.PageSource`."""
        return self.primary.page_source

    def num_active(self) -> int:
        """Vertices active after the last iteration."""
        if self.alone is not None:
            return self.alone.num_active()
        return self.cpu.num_active() if self.vertex_state.host_current else \
            self.gpu.num_active()

    def active_out_edges(self) -> tuple[int, np.ndarray | None]:
        """Sum of the active vertices' out-degrees (and the prefix notify needs)."""
        if self.alone is not None:
            return self.alone.active_out_edges()
        return self.cpu.active_out_edges() if self.vertex_state.host_current else \
            self.gpu.active_out_edges()

    def decide(self, record: IterationRecord, direction: str) -> None:
        """Fill the record's direction, and on both processors its mode (by alpha),
        alpha and ratio.

        One processor: its engine's choice (the CPU's Garaph switch, the GPU's
        pull).
        """
        if self.alone is not None:
            self.alone.decide(record, direction)
            return
        started = time.perf_counter()
        decision = self._kept_or_new_decision(record.iteration, record.active_fraction,
                                              record.rho)
        self._decided = None
        record.mode = decision.mode
        record.alpha = decision.alpha
        record.ratio = decision.ratio
        record.forced = record.forced or decision.forced
        decisions.share(record, "mode", decision.entry())
        if decision.mode == "cpu" and self.cpu.early_exit:
            # the CPU alone's own rule (Beamer's), over the settled vertices as they are
            self._synced_to_host += self._ready_cpu_alone()
            self.cpu.decide(record, direction)
        else:
            record.direction = decisions.decide(record, "direction",
                                                decisions.iteration_direction,
                                                mode=decision.mode, f=record.active_fraction,
                                                rho=record.rho, forced=direction)
        self.dispatch_seconds = time.perf_counter() - started

    def _ready_cpu_alone(self) -> int:
        """Before the CPU runs alone: the worker's thread team ended (waited for),
        the host's copy brought up to date, and in a run with early exit
        (``CpuPlan.early_exit``) the settled vertices found again
        where the GPU wrote since (:meth:`CpuEngine.refresh_settled`; the
        iterations both processors run pull in full,
        :class:`~garaphpy.scheduler.processors.CpuProcessor`).  Returns the
        bytes downloaded."""
        self._release_worker_team(wait=True)
        copied = self.vertex_state.make_host_current()
        if self.cpu.early_exit and not self._settled_current:
            self.cpu.refresh_settled(*self._last_iteration)
            self._settled_current = True
        return copied

    def bring_host_current(self) -> None:
        """The host's copy of the vertex data up to date (a run on both
        processors; one processor holds its only copy)."""
        if self.alone is None and not self.vertex_state.host_current:
            self.vertex_state.make_host_current()

    def _decision(self, iteration: int, active_fraction: float, rho: float,
                  gpu_loop: bool = False):
        """The policy's decision for ``iteration`` (recorded in its decisions)."""
        cpu_sync, gpu_sync = self.vertex_state.sync_seconds()
        # a user's policy written against the paper's inputs alone gets just those
        # a CPU that settles by pushing reads the frontier's out-edges alone: p is f
        pull_fraction = None if self.cpu.settles_by_push else self._pull_fraction
        keywords = dict(cpu_sync_seconds=cpu_sync, gpu_sync_seconds=gpu_sync,
                        pull_fraction=pull_fraction) if self.decide_keywords else {}
        if gpu_loop:
            keywords["gpu_loop"] = True
        elif self.decide_dense and not self.gpu.iterates_sparse(
                iteration, round(active_fraction * self.num_edges)):
            keywords["gpu_dense"] = True
        return self.policy.decide(iteration, active_fraction, rho, **keywords)

    def _pull_fraction(self) -> float:
        """p: the frontier's out-neighbours' in-edges over |E| (at most 1)."""
        if not self.num_edges:
            return 0.0
        if self.vertex_state.host_current:
            with parallel_section():
                total = kernels.sum_over(self.cpu.state.frontier, self.neighbour_in_edges)
        else:
            total = self._device_pull_fraction()
        return min(float(total) / self.num_edges, 1.0)

    def _device_pull_fraction(self) -> int:
        """The sum of ``neighbour_in_edges`` over the GPU's active vertices."""
        n = self.neighbour_in_edges.size
        with self.gpu.main_stream:
            active = self.gpu.active[:n].view(np.bool_)
            # a temporary and cupy's sum (CUB, every block): a custom ReductionKernel
            # reduces to one value in a single block, 2.6 ms against 0.07 on rmat:22
            return int(self.cupy.where(active, self.device_neighbour_in_edges, 0).sum())

    def aggregates(self, iteration: int):
        """One processor: its engine's aggregates over the committed values.

        Both: nothing yet; :meth:`iterate` computes the aggregates where the
        iteration runs (on the GPU for a GPU-alone iteration, on the host
        otherwise).
        """
        if self.alone is not None:
            return self.alone.aggregates(iteration)
        return None

    def _host_aggregates(self, iteration: int) -> np.ndarray:
        return self.cpu.aggregates(iteration) if self.has_aggregates else \
            self.cpu.no_aggregates

    def iterate(self, record: IterationRecord, prefix, aggregates) -> None:
        """One iteration in the mode :meth:`decide` chose (``aggregates`` is what
        :meth:`aggregates` returned)."""
        if self.alone is not None:
            if self.gpu is None:
                self._iterate_cpu(record, prefix, aggregates)
            else:
                self._iterate_gpu_alone(record, aggregates)
            return
        if record.mode == "cpu":
            self._iterate_cpu(record, prefix)
        else:
            self._iterate_hybrid(record)
            self._settled_current = False
        self._last_iteration = (record.direction == "pull", record.active_vertices)
        record.dispatch_seconds = self.dispatch_seconds

    def iterate_batch(self, first_iteration: int, max_steps: int, tolerance, active_out_edges: int,
                      direction: str = "auto") -> list[IterationRecord]:
        """Several iterations in one call where the processor can run them so: the
        CPU alone batches small notify-pulls (:meth:`CpuEngine.iterate_batch`),
        the GPU alone loops its sparse iterations on the device
        (:meth:`GpuEngine.iterate_batch`); hybrid runs hand iterations that
        the GPU would run alone to its device loop (:meth:`_device_loop_batch`),
        those the CPU would run alone to its batch (:meth:`_cpu_batch`), and
        take the rest one by one (an empty list: nothing was done)."""
        if self.alone is None:
            return (self._device_loop_batch(first_iteration, max_steps, tolerance,
                                            active_out_edges, direction)
                    or self._cpu_batch(first_iteration, max_steps, tolerance, active_out_edges,
                                       direction))
        return self.alone.iterate_batch(first_iteration, max_steps, tolerance, active_out_edges,
                                        direction)

    def _device_loop_batch(self, first_iteration: int, max_steps: int, tolerance,
                           active_out_edges: int, direction: str) -> list[IterationRecord]:
        """A hybrid run's iterations in the GPU's device loop, as a run on the GPU
        alone would run them, where :func:`decisions.hybrid_device_loop` says
        so: the policy, weighing the loop's cost (``gpu_loop``), chose the GPU,
        and the CPU would take no page.  One
        :class:`~garaphpy.scheduler.policy.Decision` covers the batch
        (:meth:`HybridPolicy.cover`); the first record gets its entry, the
        others the same entry with ``batch_of``, the iteration that decided.
        After the batch the policy decides again.  An iteration offered and
        not looped keeps its decision for :meth:`decide`."""
        started = time.perf_counter()
        if not (self.policy.batches and self.decide_loop and direction == "auto"
                and self.page_done is None and max_steps >= 1
                and self.gpu.loop_takes(first_iteration, active_out_edges)):
            return []
        if self._cpu_joins(self._order()):
            return []
        f = decisions.active_fraction(active_out_edges, self.num_edges)
        decision = self._decision(first_iteration, f, self.rho, gpu_loop=True)
        if not decisions.hybrid_device_loop(decision.mode, False, True, self.policy.batches,
                                            direction):
            self._decided = (first_iteration, decision)
            return []
        self._release_worker_team()
        synced = self.vertex_state.make_device_current()
        dispatch_seconds = time.perf_counter() - started
        looped = time.perf_counter()
        records = self.gpu.iterate_batch(first_iteration, max_steps, tolerance,
                                         active_out_edges, direction)
        loop_seconds = time.perf_counter() - looped
        if not records:
            self._decided = (first_iteration, decision)
            self._synced_to_device += synced
            return []
        self.vertex_state.written_by("gpu")
        self._settled_current = False
        self._last_iteration = (False, records[-1].active_vertices)
        first = self._cover_batch(decision, records, first_iteration)
        decisions.note(first, "hybrid_device_loop", True, mode=decision.mode, cpu_joins=False,
                       loop_takes=True, batches=self.policy.batches, forced=direction,
                       iterations=len(records))
        self._release_worker_team(first)
        first.bytes_to_device += synced + self._synced_to_device
        self._synced_to_device = 0
        first.dispatch_seconds = dispatch_seconds
        self.policy.observe(Observation("hybrid", "device-loop", f, self.rho, self.num_edges,
                                        gpu_iteration_seconds=loop_seconds / len(records)))
        return records

    def _cpu_batch(self, first_iteration: int, max_steps: int, tolerance,
                   active_out_edges: int, direction: str) -> list[IterationRecord]:
        """A hybrid run's iterations in the CPU engine's own batch
        (:meth:`CpuEngine.iterate_batch`: sparse notify-pulls many to a call,
        or steps in buckets of values), as a run on the CPU alone would run
        them, where the policy chose the CPU alone for the first of them.  One
        :class:`~garaphpy.scheduler.policy.Decision` covers the batch
        (:meth:`HybridPolicy.cover`); the policy decides again after it, and
        learns nothing from it (its steps are not the notify-pulls it
        prices).  The host's copy is brought up to date first.  An iteration
        the engine does not batch keeps its decision for :meth:`decide`."""
        cpu = self.cpu
        if not (self.policy.batches and direction == "auto" and self.page_done is None
                and max_steps >= 1 and cpu.may_batch(active_out_edges)):
            return []
        started = time.perf_counter()
        decision = self._kept_or_new_decision(
            first_iteration, decisions.active_fraction(active_out_edges, self.num_edges),
            self.rho)
        self._decided = (first_iteration, decision)
        if decision.mode != "cpu":
            return []
        self._synced_to_host += self._ready_cpu_alone()
        dispatch_seconds = time.perf_counter() - started
        records = cpu.iterate_batch(first_iteration, max_steps, tolerance, active_out_edges,
                                    direction)
        if not records:
            return []
        self._decided = None
        self.vertex_state.written_by("cpu")
        self._last_iteration = (records[-1].direction == "pull", records[-1].active_vertices)
        first = self._cover_batch(decision, records, first_iteration)
        for record in records:
            record.cpu_pages = record.pages
        decisions.note(first, "hybrid_cpu_batch", True, mode=decision.mode,
                       batches=self.policy.batches, iterations=len(records))
        self._release_worker_team(first)
        first.bytes_to_host += self._synced_to_host
        self._synced_to_host = 0
        first.dispatch_seconds = dispatch_seconds
        return records

    def _kept_or_new_decision(self, iteration: int, active_fraction: float, rho: float):
        """The decision made for ``iteration`` while it was offered to a batch
        that did not take it, else the policy's decision now."""
        if self._decided is not None and self._decided[0] == iteration:
            return self._decided[1]
        return self._decision(iteration, active_fraction, rho)

    def _cover_batch(self, decision, records: list[IterationRecord],
                     first_iteration: int) -> IterationRecord:
        """``decision`` covers the batch ``records`` (:meth:`HybridPolicy.cover`):
        each record gets its mode, alpha and ratio; the first its entry, the
        others the same entry with ``batch_of``, the iteration that decided.
        Returns the first record."""
        self.policy.cover(decision, len(records))
        entry = decision.entry()
        # one dict for the batch's later iterations (thousands on a grid's BFS)
        covered_entry = {**entry, "batch_of": first_iteration}
        mode, alpha, ratio, forced = decision.mode, decision.alpha, decision.ratio, \
            decision.forced
        for record in records:
            record.mode, record.alpha, record.ratio = mode, alpha, ratio
            record.forced = record.forced or forced
            decisions.share(record, "mode", covered_entry)
        first = records[0]
        decisions.share(first, "mode", entry)
        return first

    def _cpu_joins(self, order: list[int]) -> bool:
        """Whether the CPU would take a page of a hybrid iteration over ``order``:
        the policy's :meth:`~HybridPolicy.plan_join` on the pages' prices
        (kept in :attr:`_join_plan` for the record), or, where those are not
        known or the policy divides pages itself, the tail rule (its own
        :meth:`should_take`) on the last page."""
        self._join_plan = None
        if not order or order[-1] in self.gpu_kept:
            return False
        prices = self._page_prices() if self.plans_joins and self.policy.tail_rule else None
        if prices is None:
            return self.policy.should_take("cpu", self.page_edges[order[-1]], 0.0, 0.0,
                                           self.total_page_edges)
        vertex_state = self.vertex_state
        join_seconds = self.policy.join_seconds
        if join_seconds is None:        # before any is measured: the copies it needs
            join_seconds = vertex_state.sync_seconds()[0] + vertex_state.download_seconds
        self._join_plan = self.policy.plan_join(
            [prices["cpu"][k] for k in order], [prices["gpu"][k] for k in order],
            self.policy.t_gpu, join_seconds)
        return self._join_plan["choice"]

    def _page_prices(self) -> dict | None:
        """``{"cpu": [...], "gpu": [...]}``: each page's estimated time on each
        processor (:meth:`HybridPolicy.page_seconds`, a streamed page's copy at
        the GPU engine's measured bus rate); None before both rates are known."""
        policy = self.policy
        if policy.cpu_seconds_per_edge is None or policy.gpu_seconds_per_edge is None:
            return None
        bus = self.gpu.transfer_rates.bus
        return {"cpu": [policy.page_seconds("cpu", edges) for edges in self.page_edges],
                "gpu": [policy.page_seconds("gpu", edges, bus_bytes, bus)
                        for edges, bus_bytes in zip(self.page_edges, self.page_bus_bytes)]}

    def values_to_host(self) -> np.ndarray:
        """A copy of the committed values."""
        if self.alone is not None:
            return self.alone.values_to_host()
        if self.vertex_state.host_current:
            return self.cpu.values_to_host()
        return self.gpu.values_to_host()

    def checkpoint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """The committed values and the frontier (see the checkpoint module)."""
        if self.alone is not None:
            return self.alone.checkpoint_state()
        if not self.vertex_state.host_current:
            self.vertex_state.download()
            self.vertex_state.host_current = True
        return self.cpu.checkpoint_state()

    def values_between_pages(self) -> np.ndarray:
        """The values of an asynchronous iteration between pages: the engine's own
        on one processor; on both, a copy of the host values once the GPU pages
        launched so far are back (the CPU's pages write them in place)."""
        if self.alone is not None:
            return self.alone.values_between_pages()
        for stream in self.gpu.page_streams:
            stream.synchronize()
        return self.cpu.state.values.copy()

    def restore_checkpoint(self, values: np.ndarray, frontier: np.ndarray) -> None:
        """Continue from a checkpoint's committed values and frontier (every copy)."""
        if self.alone is not None:
            self.alone.restore_checkpoint(values, frontier)
            return
        self.cpu.restore_checkpoint(values, frontier)     # its settled vertices found again
        self.gpu.restore_checkpoint(values, frontier)
        self.vertex_state.written_by("both")
        self._settled_current = True

    def close(self) -> None:
        """Stop the CPU worker thread of a run on both processors, and let the
        GPU's queued copies finish."""
        if self.worker is not None:
            self.worker.shutdown(wait=True)
        if self.gpu is not None:
            self.gpu.close()

    # -- iterations on the CPU alone -----------------------------------------------------
    def _iterate_cpu(self, record: IterationRecord, prefix, aggregates=None) -> None:
        """The CPU engine's iteration; ``aggregates``: its own on a run on the CPU
        alone, computed here (after the host copy is current) in a hybrid run."""
        if self.alone is not None:      # the one processor: no other copy, no policy
            self.cpu.iterate(record, prefix, aggregates)
            return
        started = time.perf_counter()
        self._release_worker_team(record, wait=True)
        record.bytes_to_device += self._synced_to_device
        self._synced_to_device = 0
        if self._synced_to_host:     # downloaded for a CPU batch that ran nothing
            record.bytes_to_host += self._synced_to_host
            self._synced_to_host = 0
            prefix = None
        copied = self._ready_cpu_alone()
        if copied:
            record.bytes_to_host += copied
            prefix = None   # the frontier was just rebuilt
        synced = time.perf_counter()
        aggregates = self._host_aggregates(record.iteration)
        self.cpu.iterate(record, prefix, aggregates)
        done = time.perf_counter()
        self.vertex_state.written_by("cpu")
        record.cpu_pages = record.pages
        record.cpu_edges = record.edges_processed
        record.cpu_busy_seconds = done - synced
        self.dispatch_seconds += synced - started
        self.policy.observe(Observation("cpu", record.direction, record.active_fraction,
                                        record.rho, self.num_edges,
                                        cpu_edges=record.edges_processed,
                                        cpu_seconds=record.cpu_busy_seconds,
                                        pull_fraction=record.edges_processed
                                        / max(self.num_edges, 1)))

    # -- hybrid iterations ------------------------------------------------------------------
    def _order(self) -> list[int]:
        """Pages from the GPU's end to the CPU's: those kept on the GPU first,
        then the streamed ones, each in page order."""
        return self.page_order

    def _iterate_hybrid(self, record: IterationRecord) -> None:
        started = time.perf_counter()
        order = self._order()
        cpu_joins = self._cpu_joins(order)
        decisions.note(record, "cpu_joins", cpu_joins, pages=len(order),
                       tail_rule=self.policy.tail_rule, plan=self._join_plan)
        record.bytes_to_device += self.vertex_state.make_device_current() + self._synced_to_device
        self._synced_to_device = 0
        if not cpu_joins:
            self._release_worker_team(record)
            self.dispatch_seconds += time.perf_counter() - started
            device_aggregates = (self.gpu.aggregates(record.iteration) if self.has_aggregates
                                 else self.no_device_aggregates)
            self._iterate_gpu_alone(record, device_aggregates)
            return
        joining = time.perf_counter()
        record.bytes_to_host += self.vertex_state.make_host_current()
        prices = self._page_prices() if self.plans_joins else None
        queue = PageQueue(self.page_edges, order, self.policy, page_seconds=prices,
                          gpu_pages=self.gpu_kept)
        synced = time.perf_counter()
        self.dispatch_seconds += synced - started
        aggregates = self._host_aggregates(record.iteration)
        self._iterate_both(record, queue, aggregates, self._device_aggregates(aggregates),
                           synced - joining)

    def _iterate_gpu_alone(self, record: IterationRecord, device_aggregates) -> None:
        """The GPU engine's iteration: a hybrid iteration the CPU does not join,
        or every iteration of a run on the GPU alone."""
        if self.alone is not None:      # the one processor: no other copy, no policy
            self.gpu.iterate(record, None, device_aggregates)
            return
        gpu_started = time.perf_counter()
        self.gpu.iterate(record, None, device_aggregates)
        gpu_seconds = time.perf_counter() - gpu_started
        self.vertex_state.written_by("gpu")
        record.gpu_idle_seconds = max(0.0, gpu_seconds - record.gpu_busy_seconds)
        setup = record.decisions.get("selective_arrays", {}).get("seconds", 0.0)
        self.policy.observe(Observation("hybrid", "pull", record.active_fraction, record.rho,
                                        self.num_edges, gpu_edges=record.gpu_edges,
                                        gpu_seconds=record.gpu_busy_seconds,
                                        gpu_iteration_seconds=gpu_seconds,
                                        gpu_setup_seconds=setup))

    def _iterate_both(self, record: IterationRecord, queue: PageQueue, aggregates,
                      device_aggregates, sync_seconds: float = 0.0) -> None:
        """Both processors pull the pages of ``queue``; ``sync_seconds``: what
        bringing the host's copy up to date took (with the combining after
        the pages, what joining cost, which the policy learns)."""
        cpu, gpu = self.cpu_processor, self.gpu_processor
        vertex_state = self.vertex_state
        iteration = record.iteration
        cpu.begin(iteration, aggregates, self._order())
        work_started = time.perf_counter()
        gpu.begin(iteration, device_aggregates)
        pages_done = itertools.count(1)
        page_done = None
        if self.page_done is not None and not self.synchronous:
            def page_done() -> None:
                self.page_done(iteration, next(pages_done))
        cpu_job = self.worker.submit(self._cpu_side, queue, page_done)
        self._worker_team_live = True

        # the GPU's side, in this thread: keep a few pages queued on the streams
        in_flight = collections.deque()
        limit = gpu.pages_in_flight
        while True:
            while len(in_flight) < limit:
                page = queue.take("gpu")
                if page is None:
                    break
                in_flight.append(gpu.process(page))
            if not in_flight:
                break
            in_flight.popleft().done.synchronize()
            if page_done is not None:
                page_done()
        queue.finished("gpu")
        gpu_done = time.perf_counter()
        cpu_result = cpu_job.result()
        cpu_done = time.perf_counter()

        # combine: split vertices, the GPU's statistics, commit both copies
        vertex_state.wait_sends()
        gpu_result = gpu.finish()
        self.cpu.finish_pull(record, cpu_result.partials, aggregates, gpu_result.partials,
                             activated_elsewhere=gpu_result.activated)
        # every vertex applied on the host here (cut between pages, or split with a
        # GPU share) reached the GPU with a stale value in its page's range
        applied_here = set(gpu_result.partials).union(
            vertex for vertex, _ in cpu_result.partials)
        split_bytes = vertex_state.send_vertices(applied_here)
        vertex_state.written_by("both")
        finished = time.perf_counter()
        self._record_both(record, cpu_result, gpu_result, split_bytes,
                          max(gpu_done, cpu_done) - work_started)
        decisions.note(record, "pages", {"cpu": queue.taken["cpu"], "gpu": queue.taken["gpu"]},
                       declined=dict(queue.declined), tail_rule=self.policy.tail_rule)
        combining = finished - max(gpu_done, cpu_done)
        self.dispatch_seconds += combining
        self.policy.observe(Observation(
            "hybrid", "pull", record.active_fraction, record.rho, self.num_edges,
            cpu_edges=record.cpu_edges, gpu_edges=record.gpu_edges,
            cpu_seconds=cpu_result.busy_seconds, gpu_seconds=record.gpu_busy_seconds,
            join_seconds=sync_seconds + combining))

    def _record_both(self, record: IterationRecord, cpu: ProcessorResult,
                     gpu: ProcessorResult, split_bytes: int, span: float) -> None:
        """The record of a hybrid iteration from the two processors' results."""
        record.l1_change = self.cpu.l1_change + gpu.l1_change
        record.activated = self.cpu.num_active()
        record.pages = len(self.pages)
        record.edges_processed = self.num_edges
        record.gather_precomputed = self.cpu.precompute_source_gathers or self.gpu.precompute
        for name, entry in {**cpu.decisions, **gpu.decisions}.items():
            decisions.share(record, name, entry)
        record.cpu_pages, record.cpu_edges = len(cpu.pages), cpu.edges
        record.gpu_pages, record.gpu_edges = len(gpu.pages), gpu.edges
        record.bytes_to_device += gpu.bytes_to_device + cpu.bytes_to_device + split_bytes
        record.bytes_to_host += gpu.bytes_to_host
        record.copy_seconds = gpu.copy_seconds
        record.kernel_seconds = gpu.kernel_seconds
        record.cpu_busy_seconds = cpu.busy_seconds
        record.gpu_busy_seconds = gpu.busy_seconds
        record.cpu_idle_seconds = max(0.0, span - cpu.busy_seconds)
        record.gpu_idle_seconds = max(0.0, span - gpu.busy_seconds)

    def _cpu_side(self, queue: PageQueue, page_done=None) -> ProcessorResult:
        """The CPU worker: pages from the back of the queue to the CPU processor
        (``page_done()`` after each)."""
        numba.set_num_threads(self.cpu_threads)
        processor = self.cpu_processor
        with self.cupy.cuda.Device(self.device_id), parallel_section():
            while True:
                index = queue.take("cpu")
                if index is None:
                    break
                processor.process(index)
                if page_done is not None:
                    page_done()
        result = processor.finish()
        queue.finished("cpu")
        return result


def _accepts_keywords(function, names) -> bool:
    """Whether ``function`` takes every keyword in ``names`` (or ``**kwargs``)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return True
    return set(names) <= {p.name for p in parameters}
