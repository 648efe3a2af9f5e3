"""CPU and GPU processors behind one protocol (Garaph sections 3, 4.1, 5.1).

A run's driver (:mod:`~garaphpy.scheduler.driver`) sees each engine through a
:class:`Processor`: :class:`CpuProcessor` over a
:class:`~garaphpy.scheduler.cpu_engine.CpuEngine`, :class:`GpuProcessor` over
a :class:`~garaphpy.scheduler.gpu.engine.GpuEngine`.  A processor runs whole
iterations alone (``decide``, ``aggregates``, ``iterate``, ``iterate_batch``),
answers for its copy of the vertex data (``num_active``,
``active_out_edges``, ``pull_fraction``: the cost model's p,
``values_to_host``, ``checkpoint_state``, ``restore_checkpoint``), measures
itself (``probe``: the start-up calibration of section 5.1) and pulls pages
of a hybrid iteration.

A hybrid iteration hands pages to two processors as they become free
(:class:`~garaphpy.scheduler.policy.PageQueue`).  Each processor has
the same three steps:

* ``begin(iteration, aggregates, order)``: set up the iteration;
* ``process(page)``: pull one page (the GPU queues it on a stream and
  returns its events; the CPU pulls it and sends its vertex range to the
  GPU through the :class:`~garaphpy.scheduler.vertex_state.VertexState`);
* ``finish()``: wait for the pages and return a :class:`ProcessorResult`
  (pages, edges, busy time, bytes moved, the partial sums of vertices cut
  between pages, the decisions taken).

The hybrid driver (:class:`~garaphpy.scheduler.hybrid_driver.HybridDriver`)
combines the two results; it never reaches into either engine: it uses the
names of :class:`Processor` alone (``tests/test_engine_boundaries.py``).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Protocol

import numba
import numpy as np

from .. import config
from .._numba_setup import parallel_section
from ..kernels import cpu as kernels
from .records import IterationRecord
from .vertex_state import VertexState


@dataclass
class ProcessorResult:
    """What one processor did in one hybrid iteration.

    Attributes
    ----------
    processor : {"cpu", "gpu"}
    pages : list of int
        The pages it pulled, in the order it took them.
    edges : int
        Their edges.
    busy_seconds : float
        Time it worked on them (the GPU's: the union of its copy and kernel
        windows).
    bytes_to_device, bytes_to_host : int
        Bytes it moved (the CPU's pages' vertex ranges to the GPU; the GPU's
        pages and their ranges back).
    copy_seconds, kernel_seconds : float
        The GPU's copy and kernel busy time.
    l1_change : float
        The L1 change of the vertices it applied.
    activated : int
        Vertices it activated (the GPU's count; the CPU's frontier is found
        after the combination).
    partials : object
        Partial sums of vertices whose in-edges continue outside its pages:
        the CPU's as a list of (vertex, partial) in vertex order, the GPU's as
        a dict vertex -> partial (its split vertices).
    decisions : dict
        The decisions it recorded (``IterationRecord.decisions`` entries).
    """

    processor: str
    pages: list
    edges: int
    busy_seconds: float
    bytes_to_device: int = 0
    bytes_to_host: int = 0
    copy_seconds: float = 0.0
    kernel_seconds: float = 0.0
    l1_change: float = 0.0
    activated: int = 0
    partials: object = None
    decisions: dict = field(default_factory=dict)


@dataclass
class Probe:
    """A processor's start-up measurement (:meth:`Processor.probe`).

    Attributes
    ----------
    edges : int
        Edges of the pages it pulled.
    seconds : float
        The fastest time it pulled them in.
    empty_iteration_seconds : float or None
        The CPU's c_0: an iteration of an empty frontier (None on the GPU).
    """

    edges: int
    seconds: float
    empty_iteration_seconds: float | None = None


class Processor(Protocol):
    """What a driver may ask of a processor (the only names it uses).

    The pages of a hybrid iteration: :meth:`begin`, :meth:`process`,
    :meth:`finish`.  Whole iterations alone: :meth:`decide`,
    :meth:`aggregates`, :meth:`iterate`, :meth:`iterate_batch` (with
    :meth:`takes_batch`).  Its copy of the vertex data: :meth:`num_active`,
    :meth:`active_out_edges`, :meth:`pull_fraction`, :meth:`values_to_host`,
    :meth:`values_between_pages`, :meth:`checkpoint_state`,
    :meth:`restore_checkpoint`.  Its measurements: :meth:`probe`,
    :meth:`sparse_edge_seconds`, :meth:`bus_rate`.
    """

    name: str
    mode: str
    page_done: object

    @property
    def num_edges(self) -> int: ...
    @property
    def rho(self) -> float: ...
    @property
    def page_source(self): ...
    @property
    def synchronous(self) -> bool: ...
    @property
    def threads(self) -> int: ...
    @property
    def pages(self) -> list: ...
    @property
    def has_aggregates(self) -> bool: ...
    @property
    def early_exit(self) -> bool: ...
    @property
    def notify_pull(self) -> bool: ...
    @property
    def settles_by_push(self) -> bool: ...
    @property
    def gathers_precomputed(self) -> bool: ...
    @property
    def pages_in_flight(self) -> int: ...
    def kept_pages(self) -> frozenset: ...
    def page_bus_bytes(self) -> list: ...
    def bus_rate(self) -> float | None: ...
    def sparse_edge_seconds(self) -> float | None: ...
    def on_device(self): ...
    def warm_threads(self) -> None: ...
    def probe(self, order: list, aggregates) -> Probe: ...
    def begin(self, iteration: int, aggregates, order: list) -> None: ...
    def process(self, index: int): ...
    def finish(self) -> ProcessorResult: ...
    def combine(self, record: IterationRecord, own: ProcessorResult, other: ProcessorResult,
                aggregates) -> float: ...
    def decide(self, record: IterationRecord, direction: str) -> None: ...
    def aggregates(self, iteration: int): ...
    def iteration_aggregates(self, iteration: int): ...
    def aggregates_here(self, aggregates: np.ndarray): ...
    def iterate(self, record: IterationRecord, prefix, aggregates) -> None: ...
    def takes_batch(self, first_iteration: int, active_out_edges: int) -> bool: ...
    def iterates_sparse(self, iteration: int, active_out_edges: int) -> bool: ...
    def iterate_batch(self, first_iteration: int, max_steps: int, tolerance,
                      active_out_edges: int, direction: str) -> list: ...
    def refresh_settled(self, pulled_last: bool, previous_active: int) -> None: ...
    def num_active(self) -> int: ...
    def active_out_edges(self) -> tuple: ...
    def pull_fraction(self) -> float: ...
    def values_to_host(self) -> np.ndarray: ...
    def values_between_pages(self) -> np.ndarray: ...
    def wait_pages(self) -> None: ...
    def checkpoint_state(self) -> tuple: ...
    def restore_checkpoint(self, values: np.ndarray, frontier: np.ndarray) -> None: ...
    def close(self) -> None: ...


#: The names of :class:`Processor`: all a driver may use on a processor.
PROTOCOL_NAMES = frozenset(
    name for name in {**vars(Processor), **Processor.__annotations__}
    if not name.startswith("_"))


class _EngineProcessor:
    """What both processors forward to their engine unchanged."""

    engine = None

    @property
    def page_done(self):
        """Called with (iteration, pages done) after each page (checkpoints)."""
        return self.engine.page_done

    @page_done.setter
    def page_done(self, hook) -> None:
        self.engine.page_done = hook

    @property
    def mode(self) -> str:
        return self.engine.mode

    @property
    def num_edges(self) -> int:
        return self.engine.num_edges

    @property
    def rho(self) -> float:
        return self.engine.rho

    @property
    def page_source(self):
        return self.engine.page_source

    def decide(self, record: IterationRecord, direction: str) -> None:
        """The engine's direction (and its own decisions) for the iteration."""
        self.engine.decide(record, direction)

    def aggregates(self, iteration: int):
        """The engine's aggregates over its committed values."""
        return self.engine.aggregates(iteration)

    def iterate_batch(self, first_iteration: int, max_steps: int, tolerance,
                      active_out_edges: int, direction: str = "auto") -> list:
        """The engine's batch of iterations (an empty list: none run)."""
        return self.engine.iterate_batch(first_iteration, max_steps, tolerance,
                                         active_out_edges, direction)

    def num_active(self) -> int:
        return self.engine.num_active()

    def active_out_edges(self):
        return self.engine.active_out_edges()

    def values_to_host(self) -> np.ndarray:
        return self.engine.values_to_host()

    def values_between_pages(self) -> np.ndarray:
        return self.engine.values_between_pages()

    def checkpoint_state(self):
        return self.engine.checkpoint_state()

    def restore_checkpoint(self, values: np.ndarray, frontier: np.ndarray) -> None:
        self.engine.restore_checkpoint(values, frontier)

    def _fraction_of_edges(self, total) -> float:
        num_edges = self.num_edges
        return min(float(total) / num_edges, 1.0) if num_edges else 0.0


class CpuProcessor(_EngineProcessor):
    """The CPU engine as a :class:`Processor`; in a hybrid run, the CPU's side of
    an iteration: pull pages, send their ranges to the GPU.

    Parameters
    ----------
    engine : CpuEngine
    vertex_state : VertexState, optional
        The copies of a hybrid run (None: the CPU alone).
    threads : int, optional
        Kernel threads of the CPU's pages in a hybrid run (one fewer than the
        run's: a core feeds the GPU).
    """

    name = "cpu"

    def __init__(self, engine, vertex_state=None, threads: int | None = None):
        self.engine = engine
        self.vertex_state = vertex_state
        self._threads = threads
        self._pages = engine.arrays.pages
        self._neighbour_in_edges = None

    @property
    def threads(self) -> int:
        """The run's threads (the engine's)."""
        return self.engine.threads

    @property
    def pages(self) -> list:
        return self._pages

    @property
    def synchronous(self) -> bool:
        return self.engine.state.synchronous

    @property
    def has_aggregates(self) -> bool:
        return bool(self.engine.compiled.aggregate_monoids)

    @property
    def early_exit(self) -> bool:
        return self.engine.early_exit

    @property
    def notify_pull(self) -> bool:
        """Whether the program's notify-pull gives the pull's values (the plan's
        :attr:`~garaphpy.scheduler.plan.CpuPlan.notify_pull`)."""
        return self.engine.plan.notify_pull

    @property
    def settles_by_push(self) -> bool:
        return self.engine.settles_by_push

    @property
    def gathers_precomputed(self) -> bool:
        return self.engine.precompute_source_gathers

    @property
    def pages_in_flight(self) -> int:
        return 1

    def kept_pages(self) -> frozenset:
        """Pages only this processor takes: none."""
        return frozenset()

    def page_bus_bytes(self) -> list:
        """Bytes each page costs to reach the processor: none (host memory)."""
        return [0] * len(self._pages)

    def bus_rate(self) -> None:
        return None

    def sparse_edge_seconds(self) -> None:
        return None

    def on_device(self):
        return contextlib.nullcontext()

    @property
    def neighbour_in_edges(self) -> np.ndarray:
        """Per vertex, the in-edges of its out-neighbours (the cost model's p over
        a frontier), counted the first time they are asked for: a run that
        never weighs a notify-pull against a pull (one processor alone, a
        pull-only program) never pays the pass over the out-edges."""
        if self._neighbour_in_edges is None:
            self.count_neighbour_in_edges()
        return self._neighbour_in_edges

    def count_neighbour_in_edges(self) -> np.ndarray:
        """Per vertex, the in-edges of its out-neighbours: summed over a frontier,
        what a notify-pull would gather at most (the cost model's p)."""
        arrays = self.engine.arrays
        counts = np.empty(arrays.num_vertices, np.int64)
        with parallel_section():
            kernels.out_neighbour_in_degrees(arrays.out_offsets, arrays.out_targets,
                                             arrays.in_offsets, counts)
        self._neighbour_in_edges = counts
        return counts

    def pull_fraction(self) -> float:
        """p: the frontier's out-neighbours' in-edges over |E| (at most 1)."""
        if not self.num_edges:
            return 0.0
        with parallel_section():
            total = kernels.sum_over(self.engine.state.frontier, self.neighbour_in_edges)
        return self._fraction_of_edges(total)

    def warm_threads(self) -> None:
        """In the thread that will pull the CPU's pages: numba's thread team of
        :attr:`threads` made now, not in the first hybrid iteration."""
        numba.set_num_threads(self._threads)
        with parallel_section():
            kernels.frontier_of(np.ones(self._threads * 2, np.bool_), self._threads)

    def probe(self, order: list, aggregates) -> Probe:
        """The largest page pulled twice into scratch buffers on the hybrid
        run's threads (the fastest kept), and c_0, an empty frontier's
        iteration; the run's state is left as it was."""
        pages = self._pages
        page_index = int(np.argmax([page.num_edges for page in pages]))
        page = pages[page_index]
        engine = self.engine
        data = engine.page_source.read_page(page_index, "cpu")
        scratch_values = np.empty_like(engine.state.values)
        scratch_active = np.zeros_like(engine.state.active)
        scratch_stats = np.zeros(2, np.float64)
        record = IterationRecord(0, "hybrid", "pull", False, 1.0, 1.0, 0)
        best = np.inf
        previous = numba.get_num_threads()
        numba.set_num_threads(self._threads)
        try:
            with parallel_section():
                for _ in range(2):
                    started = time.perf_counter()
                    engine.begin_pull(record)
                    engine.pull_page(page, 0, aggregates, self._threads, scratch_stats,
                                     scratch_values, scratch_active, data=data, full=True)
                    best = min(best, time.perf_counter() - started)
        finally:
            numba.set_num_threads(previous)
        return Probe(page.num_edges, best, self._empty_iteration_seconds(aggregates))

    def _empty_iteration_seconds(self, aggregates) -> float:
        """c_0: a notify-pull iteration of an empty frontier (every kernel
        launched, no work), the fastest of three; the run's state is restored."""
        state = self.engine.state
        frontier = state.frontier
        best = np.inf
        try:
            for _ in range(3):
                state.frontier = np.zeros(0, np.int64)
                record = IterationRecord(0, "cpu", "notify-pull", False, 0.0, 1.0, 0)
                started = time.perf_counter()
                self.engine.iterate(record, None, aggregates)
                best = min(best, time.perf_counter() - started)
        finally:
            state.frontier = frontier
        return float(best)

    def iteration_aggregates(self, iteration: int) -> np.ndarray:
        """The aggregates a hybrid iteration's host side reads."""
        engine = self.engine
        return engine.aggregates(iteration) if self.has_aggregates else engine.no_aggregates

    def aggregates_here(self, aggregates: np.ndarray) -> np.ndarray:
        """Host aggregates, in host memory: themselves."""
        return aggregates

    def iterate(self, record: IterationRecord, prefix, aggregates) -> None:
        """The CPU engine's iteration."""
        self.engine.iterate(record, prefix, aggregates)

    def takes_batch(self, first_iteration: int, active_out_edges: int) -> bool:
        """Whether the engine would batch iterations from here."""
        return self.engine.may_batch(active_out_edges)

    def iterates_sparse(self, iteration: int, active_out_edges: int) -> bool:
        """Whether the iteration would be a sparse one (the CPU: one its batch takes)."""
        return self.engine.may_batch(active_out_edges)

    def refresh_settled(self, pulled_last: bool, previous_active: int) -> None:
        """The settled vertices found again after another processor's writes."""
        self.engine.refresh_settled(pulled_last, previous_active)

    def wait_pages(self) -> None:
        """Nothing: the CPU's pages are done when :meth:`process` returns."""

    def close(self) -> None:
        """Nothing to stop."""

    # -- the pages of a hybrid iteration --------------------------------------------------
    def begin(self, iteration: int, aggregates: np.ndarray, order: list[int]) -> None:
        """Start an iteration whose pages the CPU takes from the back of ``order``
        (the read-ahead of pages from storage follows it)."""
        self.engine.reset_statistics()
        self.iteration = iteration
        self.page_aggregates = aggregates
        self.taken = []
        self.pending = []
        self.busy = 0.0
        self.sent = 0
        self.record = IterationRecord(iteration, "hybrid", "pull", False, 1.0, 1.0, 0)
        self.begun = False
        self.cursor = self.engine.page_cursor(reversed(order))

    def process(self, index: int) -> None:
        """Pull page ``index`` into the host's next values and send its range to the GPU
        (in full: a run with early exit skips settled vertices only in the
        iterations its CPU runs alone)."""
        engine, page = self.engine, self._pages[index]
        started = time.perf_counter()
        if not self.begun:
            # the precompute only once a page is the CPU's: the GPU may take them all
            engine.begin_pull(self.record)
            self.begun = True
        # every in-edge: the settled vertices the CPU knows may lag the GPU's writes
        self.pending.extend(engine.pull_page(page, self.iteration, self.page_aggregates,
                                             self._threads, data=self.cursor.get(index),
                                             full=True))
        self.busy += time.perf_counter() - started
        self.taken.append(index)
        self.sent += self.vertex_state.send_range(page.first_vertex, page.end_vertex)

    def finish(self) -> ProcessorResult:
        """End the walk over the pages; the partial sums in vertex order."""
        self.cursor.close()
        # the pages' partial sums of vertices the pages cut, in page order
        self.pending.sort(key=lambda item: item[0])
        return ProcessorResult("cpu", self.taken, sum(self._pages[p].num_edges for p in self.taken),
                               self.busy, bytes_to_device=self.sent, partials=self.pending,
                               decisions=self.record.decisions)

    def combine(self, record: IterationRecord, own: ProcessorResult, other: ProcessorResult,
                aggregates) -> float:
        """Apply the vertices cut between pages from both processors' partial
        sums and commit the host's copy; returns the host's L1 change."""
        self.engine.finish_pull(record, own.partials, aggregates, other.partials,
                                activated_elsewhere=other.activated)
        return self.engine.l1_change


class GpuProcessor(_EngineProcessor):
    """The GPU engine as a :class:`Processor`; in a hybrid run, the GPU's side of
    an iteration: pages queued on its streams, each page's updated range
    copied back to the host's pinned arrays.

    Parameters
    ----------
    engine : GpuEngine
    vertex_state : VertexState, optional
        The copies of a hybrid run (None: the GPU alone).
    neighbour_in_edges : callable, optional
        A hybrid run's: gives the per-vertex in-edges of the out-neighbours
        (:attr:`CpuProcessor.neighbour_in_edges`), copied to the GPU the first
        time :meth:`pull_fraction` needs them.
    """

    name = "gpu"

    def __init__(self, engine, vertex_state=None, neighbour_in_edges=None):
        self.engine = engine
        self.vertex_state = vertex_state
        self._neighbour_in_edges = neighbour_in_edges
        self._device_neighbour_in_edges = None
        if neighbour_in_edges is not None:
            cupy = engine.cupy
            with engine.main_stream:
                self.no_device_aggregates = cupy.zeros(1, np.float64)
            self.device_id = cupy.cuda.Device().id

    @property
    def device_neighbour_in_edges(self):
        """:attr:`CpuProcessor.neighbour_in_edges` on the device, copied on first use."""
        if self._device_neighbour_in_edges is None and self._neighbour_in_edges is not None:
            engine = self.engine
            with engine.main_stream:       # the stream of the GPU's kernels that read them
                self._device_neighbour_in_edges = engine.cupy.asarray(
                    self._neighbour_in_edges())
        return self._device_neighbour_in_edges

    @property
    def threads(self) -> int:
        return 1

    @property
    def pages(self) -> list:
        return self.engine.pages

    @property
    def synchronous(self) -> bool:
        return self.engine.synchronous

    @property
    def has_aggregates(self) -> bool:
        return bool(self.engine.program.aggregate_monoids)

    @property
    def early_exit(self) -> bool:
        return False

    @property
    def notify_pull(self) -> bool:
        """The device loop's input of the same rule (its sparse passes notify-pull)."""
        return bool(self.engine.gpu_plan.device_loop_entry(False)["notify_pull"])

    @property
    def settles_by_push(self) -> bool:
        return False

    @property
    def gathers_precomputed(self) -> bool:
        return self.engine.precompute

    @property
    def pages_in_flight(self) -> int:
        """Pages the driver keeps queued on the GPU at once."""
        return max(config.HYBRID_GPU_PAGES_IN_FLIGHT, len(self.engine.streams))

    def kept_pages(self) -> frozenset:
        """Pages kept on the GPU while others stream (none when every page is
        resident): the GPU's end of a hybrid queue, which the CPU takes none of."""
        engine = self.engine
        if engine.plan.resident:
            return frozenset()
        return frozenset(np.flatnonzero(engine.kept_pages).tolist())

    def page_bus_bytes(self) -> list:
        """Bytes each page's copy costs the GPU (a streamed page's; 0 for the rest)."""
        engine = self.engine
        kept = self.kept_pages()
        streaming = not engine.plan.resident
        return [int(engine.page_bus_bytes[k]) if streaming and k not in kept else 0
                for k in range(len(engine.pages))]

    def bus_rate(self) -> float:
        """The measured host-to-device rate of page copies."""
        return self.engine.transfer_rates.bus

    def sparse_edge_seconds(self) -> float | None:
        return self.engine.sparse_edge_seconds()

    def on_device(self):
        """The GPU's device as the current one (for another thread)."""
        return self.engine.cupy.cuda.Device(self.device_id)

    def warm_threads(self) -> None:
        """Nothing: the GPU's side runs in the calling thread."""

    def frontier_in_edges(self) -> int:
        """The sum of the out-neighbours' in-edges over the GPU's active vertices."""
        n = self.device_neighbour_in_edges.size
        engine = self.engine
        with engine.main_stream:
            active = engine.active[:n].view(np.bool_)
            # a temporary and cupy's sum (CUB, every block): a custom ReductionKernel
            # reduces to one value in a single block, 2.6 ms against 0.07 on rmat:22
            return int(engine.cupy.where(active, self.device_neighbour_in_edges, 0).sum())

    def pull_fraction(self) -> float:
        """p over the GPU's copy of the frontier."""
        if not self.num_edges:
            return 0.0
        return self._fraction_of_edges(self.frontier_in_edges())

    def probe(self, order: list, aggregates) -> Probe:
        """Every page of ``order`` as in an iteration (one page alone would leave
        most of the card idle and overstate its time per edge), into scratch
        buffers."""
        seconds = self.engine.probe_pages(order, aggregates)
        pages = self.engine.pages
        return Probe(sum(pages[k].num_edges for k in order), seconds)

    def iteration_aggregates(self, iteration: int):
        """The aggregates a GPU iteration of a hybrid run reads (device memory)."""
        return (self.engine.aggregates(iteration) if self.has_aggregates
                else self.no_device_aggregates)

    def aggregates_here(self, aggregates: np.ndarray):
        """Host aggregates copied to the GPU (a placeholder when there are none)."""
        if not self.has_aggregates:
            return self.no_device_aggregates
        with self.engine.main_stream:
            return self.engine.cupy.asarray(aggregates)

    def iterate(self, record: IterationRecord, prefix, aggregates) -> None:
        """The GPU engine's iteration (it counts its own frontier: no prefix)."""
        self.engine.iterate(record, None, aggregates)

    def takes_batch(self, first_iteration: int, active_out_edges: int) -> bool:
        """Whether the device loop would take the iterations from here."""
        return self.engine.loop_takes(first_iteration, active_out_edges)

    def iterates_sparse(self, iteration: int, active_out_edges: int) -> bool:
        """Whether the GPU would run the iteration as a sparse pass."""
        return self.engine.iterates_sparse(iteration, active_out_edges)

    def refresh_settled(self, pulled_last: bool, previous_active: int) -> None:
        """Nothing: the GPU keeps no settled vertices."""

    def wait_pages(self) -> None:
        """Wait for the copies of the pages launched so far."""
        for stream in self.engine.page_streams:
            stream.synchronize()

    def close(self) -> None:
        """Let the GPU's queued copies finish."""
        self.engine.close()

    # -- the pages of a hybrid iteration --------------------------------------------------
    def begin(self, iteration: int, aggregates, order: list | None = None) -> None:
        """Reset the GPU's statistics (and precompute); pages launch after it."""
        host = self.vertex_state.host
        self.iteration = iteration
        self.page_aggregates = aggregates
        self.host_values = host.next
        self.host_active = host.active.view(np.uint8)
        self.timings = []
        self.taken = []
        self.engine.begin_iteration(iteration)

    def process(self, index: int):
        """Queue page ``index``; returns its events (``done`` to wait on)."""
        timing = self.engine.launch_page(index, self.page_aggregates, self.iteration,
                                         self.host_values, self.host_active)
        self.timings.append(timing)
        self.taken.append(index)
        return timing

    def finish(self) -> ProcessorResult:
        """Wait for the pages and commit the GPU's copy; the split vertices are
        left to the caller (their GPU partial sums are in the result)."""
        engine = self.engine
        record = IterationRecord(self.iteration, "hybrid", "pull", False, 1.0, 1.0, 0)
        counters = engine.end_iteration(record, self.timings, self.page_aggregates,
                                        apply_split=False, shortcut=False)
        partials = engine.split_partials(self.taken)
        return ProcessorResult("gpu", self.taken, record.gpu_edges, record.gpu_busy_seconds,
                               bytes_to_device=record.bytes_to_device,
                               bytes_to_host=record.bytes_to_host,
                               copy_seconds=record.copy_seconds,
                               kernel_seconds=record.kernel_seconds,
                               l1_change=record.l1_change, activated=int(counters[0]),
                               partials=partials, decisions=record.decisions)

    def combine(self, record: IterationRecord, own: ProcessorResult, other: ProcessorResult,
                aggregates) -> float:
        """The host combines a hybrid iteration (:meth:`CpuProcessor.combine`)."""
        raise NotImplementedError("the GPU's pages are combined on the host")


def hybrid_processors(cpu_engine, gpu_engine, smooth) -> tuple:
    """``(cpu, gpu, vertex_state)`` of a run on both processors: the two copies
    of the vertex data (:class:`VertexState`, its copies timed with
    ``smooth``) and a processor over each engine, the CPU's on one thread
    fewer than the run's (a core feeds the GPU)."""
    vertex_state = VertexState(cpu_engine.state, gpu_engine, cpu_engine.threads, smooth)
    cpu = CpuProcessor(cpu_engine, vertex_state, max(1, cpu_engine.threads - 1))
    gpu = GpuProcessor(gpu_engine, vertex_state, lambda: cpu.neighbour_in_edges)
    return cpu, gpu, vertex_state
