"""CPU and GPU processors of pages behind one narrow interface (Garaph sections 3, 4.1, 5.1).

A hybrid iteration hands pages to two processors as they become free
(:class:`~garaphpy.scheduler.policy.PageQueue`).  Each processor has
the same three steps:

* ``begin(iteration, aggregates)``: set up the iteration;
* ``process(page)``: pull one page (the GPU queues it on a stream and
  returns its events; the CPU pulls it and sends its vertex range to the
  GPU through the :class:`~garaphpy.scheduler.vertex_state.VertexState`);
* ``finish()``: wait for the pages and return a :class:`ProcessorResult`
  (pages, edges, busy time, bytes moved, the partial sums of vertices cut
  between pages, the decisions taken).

The driver (:class:`~garaphpy.scheduler.driver.Driver`)
combines the two results; it never reaches into either engine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import config
from .records import IterationRecord


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


class CpuProcessor:
    """The CPU's side of a hybrid iteration: pull pages, send their ranges to the GPU.

    Parameters
    ----------
    engine : CpuEngine
    vertex_state : VertexState
    threads : int
        Kernel threads of the CPU's pages (one fewer than the run's: a core
        feeds the GPU).
    """

    name = "cpu"

    def __init__(self, engine, vertex_state, threads: int):
        self.engine = engine
        self.vertex_state = vertex_state
        self.threads = threads
        self.pages = engine.arrays.pages

    def begin(self, iteration: int, aggregates: np.ndarray, order: list[int]) -> None:
        """Start an iteration whose pages the CPU takes from the back of ``order``
        (the read-ahead of pages from storage follows it)."""
        self.engine.reset_statistics()
        self.iteration = iteration
        self.aggregates = aggregates
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
        engine, page = self.engine, self.pages[index]
        started = time.perf_counter()
        if not self.begun:
            # the precompute only once a page is the CPU's: the GPU may take them all
            engine.begin_pull(self.record)
            self.begun = True
        # every in-edge: the settled vertices the CPU knows may lag the GPU's writes
        self.pending.extend(engine.pull_page(page, self.iteration, self.aggregates,
                                             self.threads, data=self.cursor.get(index),
                                             full=True))
        self.busy += time.perf_counter() - started
        self.taken.append(index)
        self.sent += self.vertex_state.send_range(page.first_vertex, page.end_vertex)

    def finish(self) -> ProcessorResult:
        """End the walk over the pages; the partial sums in vertex order."""
        self.cursor.close()
        # the pages' partial sums of vertices the pages cut, in page order
        self.pending.sort(key=lambda item: item[0])
        return ProcessorResult("cpu", self.taken, sum(self.pages[p].num_edges for p in self.taken),
                               self.busy, bytes_to_device=self.sent, partials=self.pending,
                               decisions=self.record.decisions)


class GpuProcessor:
    """The GPU's side of a hybrid iteration: pages queued on its streams, each
    page's updated range copied back to the host's pinned arrays.

    Parameters
    ----------
    engine : GpuEngine
    vertex_state : VertexState
    """

    name = "gpu"

    def __init__(self, engine, vertex_state):
        self.engine = engine
        self.vertex_state = vertex_state

    @property
    def pages_in_flight(self) -> int:
        """Pages the driver keeps queued on the GPU at once."""
        return max(config.HYBRID_GPU_PAGES_IN_FLIGHT, len(self.engine.streams))

    def begin(self, iteration: int, aggregates) -> None:
        """Reset the GPU's statistics (and precompute); pages launch after it."""
        host = self.vertex_state.host
        self.iteration = iteration
        self.aggregates = aggregates
        self.host_values = host.next
        self.host_active = host.active.view(np.uint8)
        self.timings = []
        self.taken = []
        self.engine.begin_iteration(iteration)

    def process(self, index: int):
        """Queue page ``index``; returns its events (``done`` to wait on)."""
        timing = self.engine.launch_page(index, self.aggregates, self.iteration,
                                         self.host_values, self.host_active)
        self.timings.append(timing)
        self.taken.append(index)
        return timing

    def finish(self) -> ProcessorResult:
        """Wait for the pages and commit the GPU's copy; the split vertices are
        left to the caller (their GPU partial sums are in the result)."""
        engine = self.engine
        record = IterationRecord(self.iteration, "hybrid", "pull", False, 1.0, 1.0, 0)
        counters = engine.end_iteration(record, self.timings, self.aggregates,
                                        apply_split=False, shortcut=False)
        partials = engine.split_partials(self.taken)
        return ProcessorResult("gpu", self.taken, record.gpu_edges, record.gpu_busy_seconds,
                               bytes_to_device=record.bytes_to_device,
                               bytes_to_host=record.bytes_to_host,
                               copy_seconds=record.copy_seconds,
                               kernel_seconds=record.kernel_seconds,
                               l1_change=record.l1_change, activated=int(counters[0]),
                               partials=partials, decisions=record.decisions)
