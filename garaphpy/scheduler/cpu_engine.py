"""The CPU engine: state of a run and one iteration on the CPU (Garaph section 4).

:class:`GraphArrays` holds what the kernels read (the CSC of every page, the
CSR, the per-vertex attributes); :class:`RunState` the vertex values, the
next-iteration buffer of synchronous runs (section 2.2, GlobalVertices and
its temporary copy) and the frontier.  :meth:`CpuEngine.iterate` runs one
iteration in the direction the policy chose: pull page by page with
edge-balanced parts, or notify-pull over the notified vertices.

Synchronous runs read committed values and write the next buffer, committed
at the end of the iteration (a swap after pull, a copy of the updated
vertices after notify-pull); asynchronous runs write the values in place, so
updates are visible at once.  A synchronous pull of a source-side gather
first computes it once per vertex into :attr:`CpuEngine.contributions`
(:func:`garaphpy.scheduler.policy.precompute_source_gathers`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import config
from .._numba_setup import parallel_section
from ..kernels import cpu as kernels
from ..kernels.cpu_program import CpuProgram
from ..program import monoid_identity
from . import policy
from .records import IterationRecord


@dataclass
class GraphArrays:
    """The in-memory graph the CPU kernels read.

    Attributes
    ----------
    num_vertices, num_edges : int
    in_offsets : int64 array
        CSC index.
    sources : array
        CSC sources of all pages, in edge order.
    weights : array
        CSC edge values (a 1-element dummy when unweighted).
    out_offsets, out_targets : arrays
        CSR without values (notify).
    attrs : tuple
        ``(out_degree, in_degree, weighted_in_degree, vertex, is_source)``.
    pages : list
        The store's page table (edge and vertex ranges).
    """

    num_vertices: int
    num_edges: int
    in_offsets: np.ndarray
    sources: np.ndarray
    weights: np.ndarray
    out_offsets: np.ndarray
    out_targets: np.ndarray
    attrs: tuple
    pages: list

    @classmethod
    def from_graph(cls, graph, source_vertices: np.ndarray, need_weighted_in_degree: bool):
        """Load a graph's store into memory for the CPU kernels."""
        store = graph.store
        in_offsets, sources, weights = store.csc()
        if weights is None:
            weights = np.zeros(1, np.float64)
        attrs = vertex_attributes(graph, source_vertices, in_offsets,
                                  weights if need_weighted_in_degree else None)
        return cls(store.num_vertices, store.num_edges, in_offsets, sources, weights,
                   store.out_offsets, store.out_targets, attrs, store.pages)


def vertex_attributes(graph, source_vertices: np.ndarray, in_offsets: np.ndarray,
                      weights: np.ndarray | None) -> tuple:
    """The per-vertex attributes programs may read, shared by both engines.

    Returns
    -------
    tuple
        ``(out_degree, in_degree, weighted_in_degree, vertex, is_source)``;
        ``weighted_in_degree`` is a 1-element placeholder unless ``weights``
        (the CSC edge values) are given.
    """
    store = graph.store
    n = store.num_vertices
    weighted_in = np.zeros(n if weights is not None else 1, np.float64)
    if weights is not None:
        kernels.weighted_in_degrees(in_offsets, weights, weighted_in)
    is_source = np.zeros(n, np.bool_)
    is_source[source_vertices] = True
    return (store.out_degree, store.in_degree, weighted_in,
            np.ascontiguousarray(graph.original_ids(), dtype=np.int64), is_source)


class RunState:
    """Vertex values, the synchronous next buffer, the frontier."""

    def __init__(self, arrays: GraphArrays, compiled: CpuProgram, synchronous: bool):
        n = arrays.num_vertices
        self.values = np.empty(n, compiled.value_dtype)
        with parallel_section():
            kernels.init_values(compiled.init_call, arrays.attrs, n, self.values)
        self.next = self.values.copy() if synchronous else self.values
        self.synchronous = synchronous
        self.active = np.zeros(n, np.bool_)
        self.claimed = np.zeros(n, np.uint8)
        self.frontier = np.zeros(0, np.int64)

    def swap(self) -> None:
        """Commit a synchronous pull: the next buffer becomes the values."""
        if self.synchronous:
            self.values, self.next = self.next, self.values


class CpuEngine:
    """Runs iterations of one compiled program on the CPU."""

    mode = "cpu"

    def __init__(self, arrays: GraphArrays, compiled: CpuProgram, state: RunState,
                 threads: int):
        self.arrays = arrays
        self.compiled = compiled
        self.state = state
        self.threads = threads
        self.aggregate_identities = np.array(
            [monoid_identity(m, np.float64) for m in compiled.aggregate_monoids], np.float64)
        self.no_aggregates = np.zeros(1, np.float64)
        self.boundary_vertex = np.empty(2, np.int64)
        self.boundary_accum = np.empty(2, compiled.accum_dtype)
        self.stats = np.zeros(2, np.float64)
        #: whether pulls compute the gather once per source vertex first, into
        #: ``contributions`` (decided once: it depends on the run, not the iteration)
        self.precompute_source_gathers = policy.precompute_source_gathers(
            "pull", state.synchronous, compiled.gather_parameters,
            compiled.source_gather_call is not None)
        self.contributions = (np.empty(arrays.num_vertices, compiled.accum_dtype)
                              if self.precompute_source_gathers else None)
        self.all_vertices = None

    def warm_up(self) -> None:
        """Compile every kernel for this program's types on empty work.

        Keeps numba's compilation out of the first iteration's time.
        """
        arrays, compiled, state = self.arrays, self.compiled, self.state
        empty = np.zeros(0, np.int64)
        aggregates = self.aggregates(0)
        with parallel_section():
            if self.precompute_source_gathers:
                kernels.source_contributions(compiled.source_gather_call, state.values[:0],
                                             arrays.attrs, self.contributions)
            gather_call, gather_values = self._pull_gather()
            kernels.pull_range(
                gather_call, compiled.apply_call, compiled.activate_call,
                compiled.combine, compiled.identity, arrays.in_offsets, arrays.sources,
                arrays.weights, 0, 0, 0, 0, 0, state.values, state.next, gather_values,
                arrays.attrs, aggregates, arrays.num_vertices, 0, state.active, 1,
                self.boundary_vertex, self.boundary_accum, self.stats)
            kernels.apply_vertices(compiled.apply_call, compiled.activate_call, arrays.attrs,
                                   aggregates, arrays.num_vertices, 0, empty,
                                   np.zeros(0, compiled.accum_dtype), state.values, state.next,
                                   state.active, self.stats)
            kernels.pull_vertices(
                compiled.gather_call, compiled.apply_call, compiled.activate_call,
                compiled.combine, compiled.identity, empty, np.zeros(1, np.int64),
                arrays.in_offsets, arrays.sources, arrays.weights, state.values, state.next,
                arrays.attrs, aggregates, arrays.num_vertices, 0, 1, self.stats)
        empty_prefix = np.zeros(1, np.int64)
        kernels.degree_prefix(empty, arrays.out_offsets)
        for notify in (kernels.notify, kernels.notify_dense):
            arguments = (empty, empty_prefix, arrays.out_offsets, arrays.out_targets,
                         state.claimed, 1) + ((self.threads,) if notify is kernels.notify_dense
                                              else ())
            notify(*arguments)
        kernels.reset_flags(empty, state.claimed)
        kernels.commit_vertices(empty, state.next, state.values)
        kernels.frontier_of(np.zeros(0, np.bool_), self.threads)
        self.stats[:] = 0.0

    # -- the engine interface of the iteration driver -----------------------
    @property
    def num_edges(self) -> int:
        """|E| of the graph the engine runs on."""
        return self.arrays.num_edges

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

    def restore_checkpoint(self, values: np.ndarray, frontier: np.ndarray) -> None:
        """Continue from a checkpoint's committed values and frontier."""
        state = self.state
        state.values[:] = values
        if state.synchronous:
            state.next[:] = values
        state.frontier = np.array(frontier, dtype=np.int64)

    # -- per-iteration pieces ------------------------------------------------
    def aggregates(self, iteration: int) -> np.ndarray:
        """The program's aggregates over the committed values."""
        compiled = self.compiled
        if compiled.aggregate_call is None:
            return self.no_aggregates
        with parallel_section():
            partial = kernels.compute_aggregates(
                compiled.aggregate_call, self.state.values, self.arrays.attrs,
                self.arrays.num_vertices, iteration, self.aggregate_identities, self.threads)
        result = self.aggregate_identities.copy()
        for i, monoid in enumerate(compiled.aggregate_monoids):
            column = partial[:, i]
            result[i] = {"add": column.sum, "min": column.min, "max": column.max}[monoid]()
        return result

    def active_out_edges(self) -> tuple[int, np.ndarray | None]:
        """Sum of the frontier's out-degrees (and the prefix notify needs)."""
        frontier = self.state.frontier
        if frontier.size == self.arrays.num_vertices:
            return self.arrays.num_edges, None
        prefix = kernels.degree_prefix(frontier, self.arrays.out_offsets)
        return int(prefix[-1]), prefix

    def decide(self, record: IterationRecord, direction: str) -> None:
        """The iteration's direction: Garaph's switch, or the forced one."""
        record.direction = policy.choose_direction(record.active_fraction, record.rho,
                                                   direction)

    def iterate(self, record: IterationRecord, prefix, aggregates: np.ndarray) -> None:
        """One iteration in ``record.direction``; fills the record's counters."""
        started = time.perf_counter()
        self._iterate(record, prefix, aggregates)
        record.cpu_busy_seconds = time.perf_counter() - started
        record.cpu_pages = record.pages
        record.cpu_edges = record.edges_processed

    def _iterate(self, record: IterationRecord, prefix, aggregates: np.ndarray) -> None:
        self.stats[:] = 0.0
        with parallel_section():
            if record.direction == "pull":
                self._pull(record, aggregates)
            else:
                self._notify_pull(record, prefix, aggregates)
        record.l1_change = float(self.stats[0])
        record.activated = int(self.state.frontier.size)

    def _pull(self, record: IterationRecord, aggregates: np.ndarray) -> None:
        self.begin_pull(record)
        pending = []
        for page in self.arrays.pages:
            pending.extend(self.pull_page(page, record.iteration, aggregates, self.threads))
        self.finish_pull(record, pending, aggregates)
        record.pages = len(self.arrays.pages)
        record.edges_processed = self.arrays.num_edges

    def begin_pull(self, record: IterationRecord) -> None:
        """Start a pull: the source-side contributions, once per vertex, if they pay."""
        arrays, compiled, state = self.arrays, self.compiled, self.state
        if self.precompute_source_gathers:
            # contribution[u] = gather(u) from the committed values, once per vertex
            kernels.source_contributions(compiled.source_gather_call, state.values,
                                         arrays.attrs, self.contributions)
        record.gather_precomputed = self.precompute_source_gathers

    def pull_page(self, page, iteration: int, aggregates: np.ndarray, threads: int,
                  stats: np.ndarray | None = None, values_write: np.ndarray | None = None,
                  active: np.ndarray | None = None) -> list[tuple[int, object]]:
        """Pull one page after :meth:`begin_pull` (its vertices applied, their
        activity in ``state.active``).

        Parameters
        ----------
        stats, values_write, active : arrays, optional
            Where the statistics, the new values and the activity go instead
            of the engine's (a start-up probe writes into scratch arrays).

        Returns
        -------
        list of (vertex, partial sum)
            The vertices whose in-edges continue outside the page, with the
            partial sum gathered here; :meth:`finish_pull` applies them.
        """
        arrays, compiled, state = self.arrays, self.compiled, self.state
        gather_call, gather_values = self._pull_gather()
        parts = max(1, min(threads, page.num_edges // config.CPU_MIN_PART_EDGES))
        boundary_vertex, boundary_accum = np.empty(2, np.int64), \
            np.empty(2, compiled.accum_dtype)
        count = kernels.pull_range(
            gather_call, compiled.apply_call, compiled.activate_call,
            compiled.combine, compiled.identity, arrays.in_offsets, arrays.sources,
            arrays.weights, 0, page.edge_begin, page.edge_begin + page.num_edges,
            page.first_vertex, page.end_vertex, state.values,
            state.next if values_write is None else values_write, gather_values,
            arrays.attrs, aggregates, arrays.num_vertices, iteration,
            state.active if active is None else active,
            parts, boundary_vertex, boundary_accum, self.stats if stats is None else stats)
        return [(int(boundary_vertex[i]), boundary_accum[i]) for i in range(count)]

    def finish_pull(self, record: IterationRecord, pending: list, aggregates: np.ndarray,
                    extra: dict | None = None, activated_elsewhere: int = 0) -> None:
        """Apply the vertices cut between pages, commit, and find the frontier.

        Parameters
        ----------
        pending : list of (vertex, partial sum)
            What :meth:`pull_page` returned, in page order.
        extra : dict, optional
            vertex -> partial sum gathered elsewhere (the GPU's share of a
            vertex cut between a CPU and a GPU page); combined in.
        activated_elsewhere : int
            Vertices another processor activated in ``state.active`` this
            iteration (so that "all activated" is seen without a scan).
        """
        arrays, compiled, state = self.arrays, self.compiled, self.state
        if pending or extra:
            vertices, accums = _combine_partials(pending, compiled, extra)
            kernels.apply_vertices(compiled.apply_call, compiled.activate_call, arrays.attrs,
                                   aggregates, arrays.num_vertices, record.iteration, vertices,
                                   accums, state.values, state.next, state.active, self.stats)
        state.swap()
        if int(self.stats[1]) + activated_elsewhere == arrays.num_vertices:
            # every vertex activated (PageRank): the frontier is all of them, no O(|V|) scan
            state.frontier = self._all_vertices()
        else:
            state.frontier = kernels.frontier_of(state.active, self.threads)
        record.updated_vertices = arrays.num_vertices

    def _all_vertices(self) -> np.ndarray:
        """0..|V|-1, made once per run (treated as read-only, like every frontier)."""
        if self.all_vertices is None:
            self.all_vertices = np.arange(self.arrays.num_vertices, dtype=np.int64)
        return self.all_vertices

    def _pull_gather(self):
        """The pull's gather accessor and the array it reads."""
        if self.precompute_source_gathers:
            return kernels.read_source_contribution, self.contributions
        return self.compiled.gather_call, self.state.values

    def _notify_pull(self, record: IterationRecord, prefix, aggregates: np.ndarray) -> None:
        arrays, compiled, state = self.arrays, self.compiled, self.state
        chunks = self.threads * config.CPU_CHUNKS_PER_THREAD
        frontier = state.frontier
        if prefix is None:
            prefix = kernels.degree_prefix(frontier, arrays.out_offsets)
        if prefix[-1] * config.NOTIFY_DENSE_FACTOR > arrays.num_vertices:
            notified = kernels.notify_dense(frontier, prefix, arrays.out_offsets,
                                            arrays.out_targets, state.claimed, chunks,
                                            self.threads)
        else:
            notified = kernels.notify(frontier, prefix, arrays.out_offsets, arrays.out_targets,
                                      state.claimed, chunks)
            kernels.reset_flags(notified, state.claimed)
        in_prefix = kernels.degree_prefix(notified, arrays.in_offsets)
        state.frontier = kernels.pull_vertices(
            compiled.gather_call, compiled.apply_call, compiled.activate_call, compiled.combine,
            compiled.identity, notified, in_prefix, arrays.in_offsets, arrays.sources,
            arrays.weights, state.values, state.next, arrays.attrs, aggregates,
            arrays.num_vertices, record.iteration, chunks, self.stats)
        if state.synchronous:
            kernels.commit_vertices(notified, state.next, state.values)
        record.updated_vertices = int(notified.size)
        record.edges_processed = int(in_prefix[-1])
        record.pages = 0


def _combine_partials(pending: list, compiled: CpuProgram, extra: dict | None = None):
    """Combine the partial sums of each vertex (pending pages are in vertex order;
    ``extra`` maps further vertices to partial sums)."""
    merged = {} if extra is None else dict(extra)
    combine = compiled.combine
    for vertex, accum in pending:
        merged[vertex] = combine(merged[vertex], accum) if vertex in merged else accum
    vertices = np.array(sorted(merged), np.int64)
    return vertices, np.array([merged[v] for v in vertices.tolist()],
                              dtype=compiled.accum_dtype)
