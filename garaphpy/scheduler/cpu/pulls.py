"""The CPU engine's pulls (Garaph section 4.1) and notify-pulls (section 4.2).

:class:`Pulls` owns the pulls of an iteration: page by page with
edge-balanced parts (:meth:`Pulls.pull_page`, the cut vertices applied by
:meth:`Pulls.finish_pull`), fused with the next pull's contributions and
aggregates (``CpuPlan.fused_pull``), or skipped where every vertex is at the
floor; the notify-pull over the vertices the frontier notifies; the
source-side contributions computed once per vertex
(``CpuPlan.source_precompute``); the program's aggregates; and the warm-up
of their kernels.  :class:`~garaphpy.scheduler.cpu.engine.CpuEngine`
forwards its read-only names.
"""

from __future__ import annotations

import numpy as np

from ... import config
from ..._numba_setup import parallel_section
from ...kernels import cpu as kernels
from ...kernels.cpu.arguments import apply_context, page_range
from ...kernels.cpu.exact_sum import merge_parts
from ...kernels.cpu_program import CpuProgram
from .. import decisions
from ..frontier import Frontier
from ..cpu_state import GraphArrays, RunState
from ..plan import CpuPlan
from ..records import IterationRecord
from . import team
from .settling import Settling


class Pulls:
    """The pulls and notify-pulls of one compiled program on the CPU.

    Parameters
    ----------
    arrays, compiled, state, plan :
        The engine's.
    settling : Settling
        The run's settled vertices and floor.
    stats, aggregate_identities, no_aggregates, boundary_vertex, boundary_accum :
        The engine's arrays (statistics, written in place; the aggregates'
        identities; the aggregates of a program without any; the warm-up's
        cut vertex scratch).
    warm_up : callable
        The engine's :meth:`~garaphpy.scheduler.cpu.engine.CpuEngine.warm_up`.
    all_vertices : callable
        0..|V|-1, made once per run.
    disk_reads : DiskReads, optional
        The pages a pull needs when pages come from disk: with early exit,
        a pull skips a page whose vertices are settled or without in-edges.
    """

    def __init__(self, arrays: GraphArrays, compiled: CpuProgram, state: RunState,
                 plan: CpuPlan, settling: Settling, *, stats: np.ndarray,
                 aggregate_identities: np.ndarray, no_aggregates: np.ndarray,
                 boundary_vertex: np.ndarray, boundary_accum: np.ndarray, warm_up,
                 all_vertices, disk_reads=None):
        self.arrays = arrays
        self.compiled = compiled
        self.state = state
        self.plan = plan
        self.settling = settling
        self.stats = stats
        self.aggregate_identities = aggregate_identities
        self.no_aggregates = no_aggregates
        self.boundary_vertex = boundary_vertex
        self.boundary_accum = boundary_accum
        self.warm_up = warm_up
        self.all_vertices = all_vertices
        self.disk_reads = disk_reads
        self.threads = plan.threads
        self.early_exit = plan.early_exit
        #: whether sparse iterations push from the frontier (``plan.settling_push``)
        self.settles_by_push = plan.settling_push
        #: whether pulls compute the gather once per source vertex first, into
        #: ``contributions`` (float32 where the plan says)
        self.precompute_source_gathers = plan.source_precompute
        self.contributions = None
        if plan.source_precompute:
            self.contributions = arrays.buffers.empty(
                arrays.num_vertices,
                np.float32 if plan.float32_contributions else compiled.accum_dtype)
        #: pulls also make the next pull's contributions and the next iteration's
        #: aggregates (``plan.fused_pull``): into ``next_contributions``,
        #: in parts of whole vertices starting at ``part_starts``
        self.fused_pull = plan.fused_pull
        self.next_contributions = None
        self.part_starts = None
        #: the iteration whose contributions (and ``carried_aggregates``) the last
        #: fused pull made, -1 when none: a later one (a notify-pull changed the
        #: values in between) or a restored checkpoint computes them again
        self.carried_iteration = -1
        self.carried_aggregates = None
        #: called with (iteration, pages done) after each page of an asynchronous
        #: pull (checkpoints after pages, set by the checkpointer)
        self.page_done = None
        if plan.fused_pull:
            # mapped now, by every thread, as the values were at setup
            self.next_contributions = arrays.buffers.zeros(
                arrays.num_vertices, self.contributions.dtype, mapped=True)
            self.part_starts = kernels.balanced_vertex_starts(
                self.arrays.in_offsets,
                self.threads * max(1, int(config.CPU_FUSED_PULL_PARTS_PER_THREAD)))

    def warm_aggregates(self) -> np.ndarray:
        """What the warm-ups pass the kernels for the aggregates: the aggregates'
        identities (their type and length), the program's aggregate kernel
        compiled over no vertex; no pass over the vertices (the first
        iteration makes the aggregates)."""
        compiled = self.compiled
        if compiled.aggregate_call is None:
            return self.no_aggregates
        with parallel_section(), compiled.compiling():
            compiled.kernels.compute_aggregates(
                self.state.values, self.arrays.attrs, self.arrays.num_vertices, 0,
                self.aggregate_identities, np.zeros(2, np.int64))
        return self.aggregate_identities.copy()

    def warm_up_pull(self) -> None:
        arrays, compiled, state = self.arrays, self.compiled, self.state
        aggregates = self.warm_aggregates()
        with parallel_section():
            if self.precompute_source_gathers:
                compiled.kernels.source_contributions(state.values[:0], arrays.attrs,
                                                      self.contributions)
            if not self.fused_pull:     # a fused run's pulls take the fused kernel alone
                pull_kernel, gather_values, extra = self._pull_kernel()
                pull_kernel(
                    compiled.identity, (arrays.in_offsets, arrays.sources, arrays.weights, 0),
                    page_range(0, 0, 0, 0), (state.values, state.next, gather_values),
                    apply_context(arrays.attrs, aggregates, arrays.num_vertices, 0), 1,
                    (state.active, self.stats, self.boundary_vertex, self.boundary_accum),
                    extra)
                compiled.kernels.apply_vertices(
                    apply_context(arrays.attrs, aggregates, arrays.num_vertices, 0),
                    np.zeros(0, np.int64), np.zeros(0, compiled.accum_dtype),
                    (state.values, state.next), state.active, self.stats)
            else:
                self.compiled.fused_pull_kernel()(
                    compiled.identity, (arrays.in_offsets, arrays.sources),
                    (state.values, state.next, self.contributions, self.next_contributions),
                    apply_context(arrays.attrs, aggregates, arrays.num_vertices, 0),
                    (state.active, self.stats), (np.zeros(1, np.int64), 1),
                    self.aggregate_identities)
            if self.plan.whole_settling_pull:     # over no vertex
                _, sources, weights = arrays.page_source.csc()
                settling = self.settling
                compiled.kernels.pull_settling_whole(
                    compiled.identity,
                    (arrays.in_offsets, sources, arrays.edge_weights(weights)), state.values,
                    apply_context(arrays.attrs, aggregates, 0, 0), state.active,
                    (settling.settled, settling.settled_bits, settling.in_edge_bits,
                     state.claimed, settling.settling_found),
                    (np.zeros(2), np.zeros(1, np.int64), np.zeros(1, np.int64)), 1, (0, 0))
            if self.settling.floor_mode:
                floor = np.zeros(1, state.values.dtype)
                kernels.best_source_value(state.values[:0], arrays.attrs[0], self.settling.floor_mode,
                                          floor)
                kernels.all_at_floor(state.values[:0], arrays.attrs[1], self.settling.floor_mode, floor)
        kernels.active_vertex_ids(np.zeros(0, np.bool_), self.threads)
        kernels.all_vertex_ids(0, self.threads)
        kernels.frontier_degrees(np.zeros(0, np.int64), arrays.out_offsets, self.threads)

    def warm_up_notify_pull(self) -> None:
        arrays, compiled, state = self.arrays, self.compiled, self.state
        aggregates = self.warm_aggregates()
        empty = np.zeros(0, np.int64)
        empty_prefix = np.zeros(1, np.int64)
        with parallel_section():
            if self.settles_by_push:
                compiled.kernels.push_settling(
                    compiled.identity, (empty, empty_prefix),
                    (arrays.out_offsets, arrays.out_targets, arrays.weights, arrays.in_offsets),
                    (state.values, state.next),
                    apply_context(arrays.attrs, aggregates, arrays.num_vertices, 0), 1,
                    self.stats, (self.settling.settled, state.claimed,
                                 self.settling.unsettled_delta))
            compiled.kernels.pull_vertices(
                compiled.identity, (empty, empty_prefix, empty), (arrays.sources, arrays.weights),
                (state.values, state.next),
                apply_context(arrays.attrs, aggregates, arrays.num_vertices, 0), 1,
                self.stats, (self.early_exit, self.settling.settled, state.claimed,
                             self.settling.unsettled_delta))
        kernels.degree_prefix(empty, arrays.out_offsets)
        kernels.frontier_degrees(empty, arrays.out_offsets, self.threads)
        # a run with early exit never takes the dense notify (decisions.dense_notify)
        for notify in (kernels.notify,) + (() if self.early_exit else (kernels.notify_dense,)):
            arguments = (empty, empty_prefix, arrays.out_offsets, arrays.out_targets,
                         state.claimed, 1) + ((self.threads,) if notify is kernels.notify_dense
                                              else ())
            notify(*arguments)
        kernels.reset_flags(empty, state.claimed)
        kernels.commit_vertices(empty, state.next, state.values)

    def aggregates(self, iteration: int) -> np.ndarray:
        """The program's aggregates over the committed values."""
        compiled = self.compiled
        if compiled.aggregate_call is None:
            return self.no_aggregates
        if self.carried_iteration == iteration:     # made by the last (fused) pull
            return self.carried_aggregates.copy()
        with parallel_section(), compiled.compiling():
            partial, sums = compiled.kernels.compute_aggregates(
                self.state.values, self.arrays.attrs, self.arrays.num_vertices, iteration,
                self.aggregate_identities, self._aggregate_parts())
        return merge_parts(partial, sums, compiled.aggregate_monoids)

    def _aggregate_parts(self) -> np.ndarray:
        """The vertex parts of :meth:`aggregates`: the fused pull's where it has
        them, else one block of equal vertices per thread (the sums are the
        same bits whatever the parts)."""
        if self.part_starts is not None:
            return self.part_starts
        n, threads = self.arrays.num_vertices, self.threads
        block = (n + threads - 1) // threads
        return np.minimum(np.arange(threads + 1, dtype=np.int64) * block, n)

    def pull(self, record: IterationRecord, aggregates: np.ndarray) -> None:
        self.begin_pull(record)
        if self.early_exit:
            self.settling.pack_settled()
            decisions.share(record, "whole_settling_pull",
                            self.plan.entry("whole_settling_pull"))
            if self.plan.whole_settling_pull:
                self.settling.pull_settling_whole(record, aggregates)
                return
        decisions.share(record, "cpu_fused_pull", self.plan.entry("fused_pull"))
        if self.fused_pull:
            self._pull_fused(record, aggregates)
            return
        if self.settling.floor_now:
            settled = bool(kernels.all_at_floor(self.state.values, self.arrays.attrs[1],
                                                self.settling.floor_now, self.settling.floor))
            record.decisions["cpu_floor_skip"]["all_at_floor"] = settled
            if settled:
                if "cpu_pull_read_ahead" in record.decisions:
                    self.arrays.page_source.cancel_prefetch("cpu")
                self._pull_at_floor(record)
                return
        pending = []
        pages = self.arrays.pages
        needed = self._pages_to_pull()
        cursor = self.page_cursor(range(len(pages)) if needed is None
                                  else np.flatnonzero(needed).tolist())
        try:
            for done, page in enumerate(pages, 1):
                if needed is not None and not needed[page.index]:
                    self._keep_settled_page(page)
                else:
                    pending.extend(self.pull_page(page, record.iteration, aggregates,
                                                  self.threads, data=cursor.get(page.index)))
                if self.page_done is not None and not self.state.synchronous:
                    self.page_done(record.iteration, done)
        finally:
            cursor.close()
        unsettled = int(self.settling.unsettled_edges[0])
        self.finish_pull(record, pending, aggregates)
        if self.early_exit:     # the whole pull settles its vertices as it finds them
            self.settling.settle_frontier()
        record.pages = len(pages) if needed is None else int(needed.sum())
        # with early exit, the in-edges of the vertices not settled: what it read at most
        record.edges_processed = unsettled if self.early_exit else self.arrays.num_edges

    def read_ahead(self, record: IterationRecord) -> None:
        """Start the reads of this iteration's pull over every page before the
        work that precedes it (the union-find start), so that the disk reads
        while the cores work (:meth:`HostPages.prefetch
        <garaphpy.storage.host_pages.HostPages.prefetch>`); its walk takes
        them.  Only where the pull walks every page in order (no early exit,
        no fused pull) and pages come from storage; recorded as
        ``decisions["cpu_pull_read_ahead"]``.  A pull that then reads
        nothing (every vertex at the floor) drops them (:meth:`pull`)."""
        if self.early_exit or self.fused_pull or not self.arrays.page_source.reads_storage:
            return
        started = self.arrays.page_source.prefetch(range(len(self.arrays.pages)), "cpu")
        decisions.note(record, "cpu_pull_read_ahead", bool(started))

    def _pages_to_pull(self) -> np.ndarray | None:
        """Per page, whether this pull reads it: with early exit and pages from
        disk, the pages holding a vertex with in-edges not yet settled
        (:meth:`DiskReads.pull_pages <garaphpy.scheduler.cpu.disk_reads.DiskReads.pull_pages>`);
        None: every page."""
        if not (self.early_exit and self.disk_reads is not None
                and self.disk_reads.from_disk):
            return None
        return self.disk_reads.pull_pages()

    def _keep_settled_page(self, page) -> None:
        """What :meth:`pull_page` does with a page whose vertices are settled or
        without in-edges, without reading it: each keeps its value and stays
        inactive (one without in-edges takes nothing: the program's
        declaration, as the whole-CSC pull passes it over)."""
        state, vertices = self.state, slice(page.first_vertex, page.end_vertex)
        state.next[vertices] = state.values[vertices]
        state.active[vertices] = False

    def _pull_fused(self, record: IterationRecord, aggregates: np.ndarray) -> None:
        """A pull of the whole CSC that also makes the next pull's contributions and
        the next iteration's aggregates (:func:`garaphpy.kernels.cpu.pull_fused`)."""
        arrays, compiled, state = self.arrays, self.compiled, self.state
        _, sources, _ = arrays.page_source.csc()
        # written in place: each vertex reads only its own old value
        partial, sums = self.compiled.fused_pull_kernel()(
            compiled.identity, (arrays.in_offsets, sources),
            (state.values, state.values, self.contributions, self.next_contributions),
            apply_context(arrays.attrs, aggregates, arrays.num_vertices, record.iteration),
            (state.active, self.stats), (self.part_starts, team.team_size()),
            self.aggregate_identities)
        self.contributions, self.next_contributions = self.next_contributions, \
            self.contributions
        if compiled.aggregate_call is not None:
            self.carried_aggregates = merge_parts(partial, sums, compiled.aggregate_monoids)
        self.carried_iteration = record.iteration + 1
        self.finish_pull(record, [], aggregates, in_place=True)
        record.pages = len(arrays.pages)
        record.edges_processed = arrays.num_edges

    def _pull_at_floor(self, record: IterationRecord) -> None:
        """A pull in which every vertex with in-edges is at the floor: each would
        read none of them, and keep its value (``apply_keeps_best``), so none is
        read, applied or activated; the frontier ends empty.  Recorded in
        ``decisions["cpu_floor_skip"]`` as ``all_at_floor``."""
        state = self.state
        state.active[:] = False
        state.frontier = np.zeros(0, np.int64)
        record.updated_vertices = 0
        record.pages = 0
        record.edges_processed = 0

    def begin_pull(self, record: IterationRecord) -> None:
        """Start a pull: the source-side contributions, once per vertex, if they pay."""
        self.warm_up(("pull",))
        arrays, compiled, state = self.arrays, self.compiled, self.state
        if self.precompute_source_gathers and self.carried_iteration != record.iteration:
            # contribution[u] = gather(u) from the committed values, once per vertex
            # (unless the last pull, fused, made them from these values)
            compiled.kernels.source_contributions(state.values, arrays.attrs,
                                                  self.contributions)
        record.gather_precomputed = self.precompute_source_gathers
        self.settling.begin_floor(record)
        decisions.note(record, "cpu_precompute", self.precompute_source_gathers,
                       direction="pull", synchronous=state.synchronous,
                       gather_parameters=compiled.gather_parameters,
                       contribution_dtype=(self.contributions.dtype.name
                                           if self.precompute_source_gathers else None))

    def page_cursor(self, order):
        """The CPU's walk over the pages ``order`` (the page source's cursor)."""
        return self.arrays.page_source.cursor(order, "cpu")

    def pull_page(self, page, iteration: int, aggregates: np.ndarray, threads: int,
                  stats: np.ndarray | None = None, values_write: np.ndarray | None = None,
                  active: np.ndarray | None = None, *, data,
                  full: bool = False) -> list[tuple[int, object]]:
        """Pull one page after :meth:`begin_pull` (its vertices applied, their
        activity in ``state.active``).

        Parameters
        ----------
        stats, values_write, active : arrays, optional
            Where the statistics, the new values and the activity go instead
            of the engine's (a start-up probe writes into scratch arrays).
        data : garaphpy.storage.store.Page
            The page's edges, read through :meth:`page_cursor` (or the page
            source's ``read_page``).
        full : bool
            Every in-edge of every vertex, whatever the run's early exit
            (:meth:`full_pull_changes`).

        Returns
        -------
        list of (vertex, partial sum)
            The vertices whose in-edges continue outside the page, with the
            partial sum gathered here; :meth:`finish_pull` applies them.
        """
        arrays, compiled, state = self.arrays, self.compiled, self.state
        pull_kernel, gather_values, extra = self._pull_kernel(full)
        parts = max(1, min(threads, page.num_edges // config.CPU_MIN_PART_EDGES))
        if self.early_exit and not full:    # parts of equal vertex counts: many, for balance
            parts = max(1, min(threads * config.CPU_CHUNKS_PER_THREAD,
                               page.end_vertex - page.first_vertex))
        boundary_vertex, boundary_accum = np.empty(2, np.int64), \
            np.empty(2, compiled.accum_dtype)
        weights = arrays.edge_weights(data.weights)
        count = pull_kernel(
            compiled.identity, (arrays.in_offsets, data.sources, weights, int(page.edge_begin)),
            page_range(page.edge_begin, page.edge_begin + page.num_edges, page.first_vertex,
                       page.end_vertex),
            (state.values, state.next if values_write is None else values_write,
             gather_values),
            apply_context(arrays.attrs, aggregates, arrays.num_vertices, iteration), parts,
            (state.active if active is None else active, self.stats if stats is None else stats,
             boundary_vertex, boundary_accum),
            extra)
        return [(int(boundary_vertex[i]), boundary_accum[i]) for i in range(count)]

    def finish_pull(self, record: IterationRecord, pending: list, aggregates: np.ndarray,
                    extra: dict | None = None, activated_elsewhere: int = 0,
                    in_place: bool = False) -> None:
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
        in_place : bool
            The pull wrote its values into ``state.values`` (nothing to swap).
        """
        arrays, compiled, state = self.arrays, self.compiled, self.state
        if pending or extra:
            vertices, accums = _combine_partials(pending, compiled, extra)
            compiled.kernels.apply_vertices(
                apply_context(arrays.attrs, aggregates, arrays.num_vertices, record.iteration),
                vertices, accums, (state.values, state.next), state.active, self.stats)
        if not in_place:
            state.swap()
        if int(self.stats[1]) + activated_elsewhere == arrays.num_vertices:
            # every vertex activated (PageRank): the frontier is all of them, no O(|V|) scan
            state.frontier = self.all_vertices()
        else:
            state.frontier = Frontier.of_flags(state.active, self.threads).ids
        record.updated_vertices = arrays.num_vertices

    def full_pull_changes(self, iteration: int, aggregates: np.ndarray) -> np.ndarray:
        """The vertices one full pull (every in-edge of every vertex, no early
        exit) would change or activate now, computed into scratch arrays: none
        at a fixed point.  The check of a user's ``final_once_set``."""
        arrays, compiled, state = self.arrays, self.compiled, self.state
        scratch_values = state.values.copy()
        scratch_active = np.zeros(arrays.num_vertices, np.bool_)
        stats = np.zeros(2, np.float64)
        pending = []
        cursor = self.page_cursor(range(len(arrays.pages)))
        try:
            with parallel_section():
                for page in arrays.pages:
                    pending.extend(self.pull_page(page, iteration, aggregates, self.threads,
                                                  stats, scratch_values, scratch_active,
                                                  data=cursor.get(page.index), full=True))
                if pending:
                    vertices, accums = _combine_partials(pending, compiled)
                    compiled.kernels.apply_vertices(
                        apply_context(arrays.attrs, aggregates, arrays.num_vertices, iteration),
                        vertices, accums, (state.values, scratch_values), scratch_active, stats)
        finally:
            cursor.close()
        return np.flatnonzero(scratch_active | (scratch_values != state.values))

    def _pull_kernel(self, full: bool = False):
        """The program's pull kernel (gathering over the values, reading the
        precomputed contributions, or skipping settled vertices unless
        ``full``), the array its gather reads, and its last argument (the
        settled vertices, or the floor)."""
        if self.early_exit and not full:
            return (self.compiled.kernels.pull_range_settling, self.state.values,
                    (self.settling.settled, self.settling.settled_bits))
        floor = (0 if full else int(self.settling.floor_now), self.settling.floor)
        if self.precompute_source_gathers:
            return self.compiled.kernels.pull_range_precomputed, self.contributions, floor
        return self.compiled.kernels.pull_range, self.state.values, floor

    def notify_pull(self, record: IterationRecord, prefix, aggregates: np.ndarray) -> None:
        arrays, compiled, state = self.arrays, self.compiled, self.state
        chunks = self.threads * config.CPU_CHUNKS_PER_THREAD
        frontier = state.frontier
        if prefix is None:
            prefix = kernels.frontier_degree_prefix(frontier, arrays.out_offsets,
                                                    self.threads)
        if self.settles_by_push:
            decisions.share(record, "settling_push", self.plan.entry("settling_push"))
            self.settling.push_settling(record, prefix, aggregates)
            return
        if decisions.decide(record, "dense_notify", decisions.dense_notify,
                            active_out_edges=int(prefix[-1]),
                            num_vertices=arrays.num_vertices, early_exit=self.early_exit):
            notified = kernels.notify_dense(frontier, prefix, arrays.out_offsets,
                                            arrays.out_targets, state.claimed, chunks,
                                            self.threads)
        else:
            notified = kernels.notify(frontier, prefix, arrays.out_offsets, arrays.out_targets,
                                      state.claimed, chunks)
            kernels.reset_flags(notified, state.claimed)
        notified = arrays.page_source.arrange_vertices(notified)
        in_prefix = kernels.frontier_degree_prefix(notified, arrays.in_offsets,
                                                   self.threads)
        # the floor's pass over every vertex costs less than the gather it may save
        if self.settling.floor_mode and int(in_prefix[-1]) >= arrays.num_vertices \
                and self.settling.take_floor(record, notified=int(notified.size)):
            notified = kernels.above_floor(notified, state.values, self.settling.floor_mode, self.settling.floor)
            in_prefix = kernels.frontier_degree_prefix(notified, arrays.in_offsets,
                                                       self.threads)
        sources, weights, edge_starts, record.pages = arrays.page_source.vertex_in_edges(
            notified, in_prefix, arrays.in_offsets, kernels.gather_vertex_edges, arrays.weights,
            arrays.reads_weights)
        self.settling.unsettled_delta[0] = 0
        state.frontier = compiled.kernels.pull_vertices(
            compiled.identity, (notified, in_prefix, edge_starts), (sources, weights),
            (state.values, state.next),
            apply_context(arrays.attrs, aggregates, arrays.num_vertices, record.iteration),
            chunks, self.stats, (bool(self.early_exit), self.settling.settled, state.claimed,
                                 self.settling.unsettled_delta))
        self.settling.unsettled_edges[0] -= self.settling.unsettled_delta[0]
        if state.synchronous:
            kernels.commit_vertices(notified, state.next, state.values)
        record.updated_vertices = int(notified.size)
        record.edges_processed = int(in_prefix[-1])


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
