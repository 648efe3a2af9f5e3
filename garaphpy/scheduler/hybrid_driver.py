"""The hybrid driver: one run's iterations on the CPU and the GPU together (Garaph sections 4.1, 5.1).

Each iteration the policy (:class:`~garaphpy.scheduler.policy.HybridPolicy`)
decides by alpha (section 5.1) whether the CPU runs alone (with its own
notify-pull or pull choice) or both processors pull pages from one
:class:`~garaphpy.scheduler.policy.PageQueue`: the GPU from the front,
driven by the calling thread, which keeps a few pages queued on its CUDA
streams; the CPU from the back, in a worker thread (the numba kernels release
the GIL) running on one thread fewer than the run's, leaving a core to feed
the GPU.  When the tail rule leaves the CPU nothing from the start, the
iteration is the GPU engine's own (no thread hand-off); where the GPU's
device loop would also take it (a sparse frontier on resident pages), the
policy weighs the loop's cost, and if it leaves the GPU alone the loop runs
the iterations as a run on the GPU alone would, one decision covering them
(:meth:`HybridDriver.iterate_batch`).

Before all this, per run (:mod:`~garaphpy.scheduler.run_choice`): before the
first iteration, at the end of each stretch of iterations and when the
frontier crosses the cost model's switch point, the driver estimates the
time to finish on the GPU alone, the CPU alone (its own engine's shortcuts:
the union-find start of connected components on a symmetric graph) and
both, and commits to the cheapest; a processor chosen alone runs its own
iterations and batches with no per-iteration decision, as its own mode
would.

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
processors are :class:`~garaphpy.scheduler.processors.Processor` s, and this
module uses no name of theirs outside that protocol
(``tests/test_engine_boundaries.py``).

Every hybrid iteration's record gets the decision (alpha, the ratio), the
pages and edges of each processor, their busy and idle time, the bytes
moved, and the dispatcher's own time (deciding, synchronizing, combining;
no page work).
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
from . import decisions
from .frontier import Frontier
from .hybrid_batches import HybridBatches
from .policy import HybridPolicy, Observation, PageQueue
from .processors import ProcessorResult
from .records import IterationRecord
from .run_choice import CpuAlone, RunAlone, RunChoice


class HybridDriver(RunAlone, HybridBatches):
    """Runs iterations of one program on the CPU and the GPU.

    Parameters
    ----------
    cpu, gpu : Processor
        The two processors (:func:`~garaphpy.scheduler.processors.hybrid_processors`).
    vertex_state : VertexState
        Their copies of the vertex data.
    policy : HybridPolicy
        Divides the iterations.
    cpu_alone : CpuAlone, optional
        The graph's shape and the CPU alone's engine, for the per-run choice
        (:mod:`~garaphpy.scheduler.run_choice`); None: the CPU alone runs on
        ``cpu``'s engine.
    """

    mode = "hybrid"

    def __init__(self, cpu, gpu, vertex_state, policy: HybridPolicy,
                 cpu_alone: CpuAlone | None = None):
        self.cpu = cpu
        self.gpu = gpu
        self.alone = None
        self.vertex_state = vertex_state
        self.policy = policy
        #: called with (iteration, pages done) after each page of an asynchronous
        #: hybrid iteration, from either processor's thread (checkpoints after pages)
        self.page_done = None
        self.dispatch_seconds = 0.0
        self.synchronous = cpu.synchronous
        self.cpu_threads = max(1, cpu.threads - 1)
        self.pages = cpu.pages
        self.page_edges = [page.num_edges for page in self.pages]
        self.total_page_edges = sum(self.page_edges)
        # pages kept on the GPU while others stream go to the GPU's end of the queue,
        # and the CPU takes none of them; a streamed page costs the GPU its copy
        self.gpu_kept = gpu.kept_pages()
        self.page_order = sorted(range(len(self.pages)), key=lambda k: k not in self.gpu_kept)
        self.page_bus_bytes = gpu.page_bus_bytes()
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="garaphpy-cpu")
        self.worker.submit(cpu.warm_threads).result()
        self._worker_team_live = True
        self._release_unnoted = False
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
        #: the per-run choice: the GPU alone, the CPU alone, or both
        self.cpu_alone = cpu_alone
        self.run_choice = RunChoice(self.policy, cpu_alone)

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
        page, the GPU every page as in an iteration; this gives the two pull
        rates and T_pull / T_GPU."""
        if not self.pages or max(self.page_edges) == 0:
            return
        aggregates = self.cpu.aggregates(0)
        cpu_probe = self.cpu.probe(self.page_order, aggregates)
        gpu_probe = self.gpu.probe(self.page_order, self.gpu.aggregates_here(aggregates))
        self.policy.calibrate(cpu_probe.edges, cpu_probe.seconds, self.total_page_edges,
                              gpu_probe.seconds, num_edges=self.num_edges,
                              cpu_iteration_seconds=cpu_probe.empty_iteration_seconds)

    # -- the engine interface of the iteration loop (api._iterate) ----------------------
    @property
    def num_edges(self) -> int:
        """|E|."""
        return self.cpu.num_edges

    @property
    def rho(self) -> float:
        """rho of the cost model: k when a CPU reads pages from storage (section 4.2)."""
        return self.cpu.rho

    @property
    def page_source(self):
        """The run's :class:`~garaphpy.storage.page_source.PageSource`."""
        return self.cpu.page_source

    def _current(self):
        """The processor whose copy of the vertex data is current (the CPU's when both
        are; the CPU-alone engine's while it holds the data)."""
        if self.alone_holds:
            return self.alone_cpu
        return self.cpu if self.vertex_state.host_current else self.gpu

    def num_active(self) -> int:
        """Vertices active after the last iteration."""
        return self._current().num_active()

    def active_out_edges(self) -> tuple[int, np.ndarray | None]:
        """Sum of the active vertices' out-degrees (and the prefix notify needs)."""
        return self._current().active_out_edges()

    def decide(self, record: IterationRecord, direction: str) -> None:
        """Fill the record's direction, its mode (by alpha), alpha and ratio (a
        processor the per-run choice runs alone: its own decisions)."""
        if self.run_choice.choice != "both":
            self._alone_decide(record, direction)
            return
        started = time.perf_counter()
        self._note_choice(record)
        decision = self._kept_or_new_decision(record.iteration, record.active_fraction,
                                              record.rho)
        self._decided = None
        record.mode = decision.mode
        record.alpha = decision.alpha
        record.ratio = decision.ratio
        record.forced = record.forced or decision.forced
        decisions.share(record, "mode", decision.entry())
        if decision.mode == "cpu" and self.cpu.early_exit and self.cpu.notify_pull:
            # the CPU alone's own rule (Beamer's), over the settled vertices as they are
            self._synced_to_host += self._ready_cpu_alone()
            self.cpu.decide(record, direction)
        else:
            record.direction = decisions.decide(record, "direction",
                                                decisions.iteration_direction,
                                                mode=decision.mode, f=record.active_fraction,
                                                rho=record.rho, forced=direction,
                                                notify_pull=self.cpu.notify_pull)
        self.dispatch_seconds = time.perf_counter() - started

    def _ready_cpu_alone(self) -> int:
        """Before the CPU runs alone: the worker's thread team ended (waited for),
        the host's copy brought up to date, and in a run with early exit the
        settled vertices found again where the GPU wrote since (the
        iterations both processors run pull in full).  Returns the bytes
        downloaded."""
        self._release_worker_team(wait=True)
        copied = self.vertex_state.make_host_current()
        if self.cpu.early_exit and not self._settled_current:
            self.cpu.refresh_settled(*self._last_iteration)
            self._settled_current = True
        return copied

    def bring_host_current(self) -> None:
        """The host's copy of the vertex data up to date (the CPU-alone
        engine's data handed back to it, where that engine holds them)."""
        if self.alone_holds:
            self.restore_checkpoint(*self.alone_cpu.checkpoint_state())
        if not self.vertex_state.host_current:
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
        """p: the frontier's out-neighbours' in-edges over |E| (at most 1), from
        the current copy."""
        return self._current().pull_fraction()

    def aggregates(self, iteration: int):
        """Nothing yet: :meth:`iterate` computes the aggregates where the
        iteration runs (on the GPU for a GPU-alone iteration, on the host
        otherwise)."""
        return None

    def iterate(self, record: IterationRecord, prefix, aggregates) -> None:
        """One iteration in the mode :meth:`decide` chose (a processor the
        per-run choice runs alone: its own iteration)."""
        if self.run_choice.choice != "both":
            self._alone_iterate(record, prefix)
            return
        if record.mode == "cpu":
            self._iterate_cpu(record, prefix)
        else:
            started = time.perf_counter()
            self._iterate_hybrid(record)
            if record.cpu_pages and record.gpu_pages:
                self.run_choice.observe_split(time.perf_counter() - started)
            self._settled_current = False
        self._last_iteration = (record.direction == "pull", record.active_vertices)
        record.dispatch_seconds = self.dispatch_seconds
        self.run_choice.observe_dispatch(self.dispatch_seconds)

    def values_to_host(self) -> np.ndarray:
        """A copy of the committed values."""
        return self._current().values_to_host()

    def checkpoint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """The committed values and the frontier (see the checkpoint module)."""
        if self.alone_holds:
            return self.alone_cpu.checkpoint_state()
        if not self.vertex_state.host_current:
            self.vertex_state.download()
            self.vertex_state.host_current = True
        return self.cpu.checkpoint_state()

    def values_between_pages(self) -> np.ndarray:
        """The values of an asynchronous iteration between pages: a copy of the
        host values once the GPU pages launched so far are back (the CPU's
        pages write them in place)."""
        if self.alone_holds:
            return self.alone_cpu.values_between_pages()
        self.gpu.wait_pages()
        return self.cpu.values_between_pages().copy()

    def restore_checkpoint(self, values: np.ndarray, frontier: np.ndarray) -> None:
        """Continue from a checkpoint's committed values and frontier (every copy)."""
        frontier = Frontier.of_ids(frontier, values.size)
        self.cpu.restore_checkpoint(values, frontier.ids)     # its settled vertices found again
        self.gpu.restore_checkpoint(values, frontier)
        self.vertex_state.written_by("both")
        self._settled_current = True
        self.alone_holds = False

    def close(self) -> None:
        """Stop the CPU worker thread, and let the GPU's queued copies finish.

        The worker is not waited for: it has no job left, and its exit ends
        its OpenMP thread team, which took 76-185 ms of a hybrid run's close
        on the H200 host (kron22, 16 threads, 2026-12-05), while the run's
        results are ready."""
        if self.worker is not None:
            self.worker.shutdown(wait=False)
        if self.alone_cpu is not None:
            self.alone_cpu.close()
        self.gpu.close()

    # -- iterations on the CPU alone -----------------------------------------------------
    def _iterate_cpu(self, record: IterationRecord, prefix) -> None:
        """The CPU engine's iteration, its aggregates computed here (after the
        host copy is current)."""
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
        aggregates = self.cpu.iteration_aggregates(record.iteration)
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
            self._iterate_gpu_alone(record, self.gpu.iteration_aggregates(record.iteration))
            return
        joining = time.perf_counter()
        record.bytes_to_host += self.vertex_state.make_host_current()
        prices = self._page_prices() if self.plans_joins else None
        queue = PageQueue(self.page_edges, order, self.policy, page_seconds=prices,
                          gpu_pages=self.gpu_kept)
        synced = time.perf_counter()
        self.dispatch_seconds += synced - started
        aggregates = self.cpu.iteration_aggregates(record.iteration)
        self._iterate_both(record, queue, aggregates, self.gpu.aggregates_here(aggregates),
                           synced - joining)

    def _iterate_gpu_alone(self, record: IterationRecord, device_aggregates) -> None:
        """The GPU engine's iteration: a hybrid iteration the CPU does not join."""
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
        cpu, gpu = self.cpu, self.gpu
        vertex_state = self.vertex_state
        iteration = record.iteration
        cpu.begin(iteration, aggregates, self._order())
        work_started = time.perf_counter()
        gpu.begin(iteration, device_aggregates, self._order())
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
        host_l1_change = cpu.combine(record, cpu_result, gpu_result, aggregates)
        # every vertex applied on the host here (cut between pages, or split with a
        # GPU share) reached the GPU with a stale value in its page's range
        applied_here = set(gpu_result.partials).union(
            vertex for vertex, _ in cpu_result.partials)
        split_bytes = vertex_state.send_vertices(applied_here)
        vertex_state.written_by("both")
        finished = time.perf_counter()
        record.l1_change = host_l1_change + gpu_result.l1_change
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

    def _record_both(self, record: IterationRecord, cpu_result: ProcessorResult,
                     gpu_result: ProcessorResult, split_bytes: int, span: float) -> None:
        """The record of a hybrid iteration from the two processors' results
        (its L1 change set by the caller)."""
        record.activated = self.cpu.num_active()
        record.pages = len(self.pages)
        record.edges_processed = self.num_edges
        record.gather_precomputed = self.cpu.gathers_precomputed or self.gpu.gathers_precomputed
        for name, entry in {**cpu_result.decisions, **gpu_result.decisions}.items():
            decisions.share(record, name, entry)
        record.cpu_pages, record.cpu_edges = len(cpu_result.pages), cpu_result.edges
        record.gpu_pages, record.gpu_edges = len(gpu_result.pages), gpu_result.edges
        record.bytes_to_device += (gpu_result.bytes_to_device + cpu_result.bytes_to_device
                                   + split_bytes)
        record.bytes_to_host += gpu_result.bytes_to_host
        record.copy_seconds = gpu_result.copy_seconds
        record.kernel_seconds = gpu_result.kernel_seconds
        record.cpu_busy_seconds = cpu_result.busy_seconds
        record.gpu_busy_seconds = gpu_result.busy_seconds
        record.cpu_idle_seconds = max(0.0, span - cpu_result.busy_seconds)
        record.gpu_idle_seconds = max(0.0, span - gpu_result.busy_seconds)

    def _cpu_side(self, queue: PageQueue, page_done=None) -> ProcessorResult:
        """The CPU worker: pages from the back of the queue to the CPU processor
        (``page_done()`` after each)."""
        processor = self.cpu
        numba.set_num_threads(self.cpu_threads)
        with self.gpu.on_device(), parallel_section():
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
