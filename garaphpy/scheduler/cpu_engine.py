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
"""

from __future__ import annotations

import time

import numba
import numpy as np

from .. import config
from .._numba_setup import parallel_section
from ..kernels import cpu as kernels
from ..kernels import union_find
from ..kernels.cpu_program import CpuProgram
from ..kernels.gpu_subgraph import out_edge_values
from ..monoids import MONOIDS, monoid_identity
from . import decisions
# vertex_attributes and weighted_in_degree: the GPU engine still imports them from here
from .frontier import Frontier
from .cpu_state import (GraphArrays, RunState, vertex_attributes,  # noqa: F401
                        weighted_in_degree)
from .plan import CpuPlan
from .records import IterationRecord


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
        #: whether pulls compute the gather once per source vertex first, into
        #: ``contributions`` (float32 where the plan says)
        self.precompute_source_gathers = plan.source_precompute
        self.contributions = None
        if plan.source_precompute:
            self.contributions = np.empty(arrays.num_vertices, np.float32
                                          if plan.float32_contributions
                                          else compiled.accum_dtype)
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
        self.all_vertices = None
        #: called with (iteration, pages done) after each page of an asynchronous
        #: pull (checkpoints after pages, set by the checkpointer)
        self.page_done = None
        #: rho of section 4.2: k when pages come from secondary storage
        self.rho = arrays.page_source.rho
        #: the directions whose kernels :meth:`warm_up` has compiled
        self.warm_directions = set()
        #: pulls skip settled vertices and stop at the activating in-edge
        #: (``plan.early_exit``); ``settled`` marks the vertices once active,
        #: ``unsettled_edges[0]`` counts the in-edges of the others
        self.early_exit = plan.early_exit
        self.settle_rounds_failed = False
        #: the vertices a whole-CSC pull (``plan.whole_settling_pull``) activates
        self.settling_found = None
        #: the frontier such a pull made last, and its out-degree sum
        self._counted_frontier = None
        self.found_out_edges = np.zeros(1, np.int64)
        self.settled = np.zeros(1, np.bool_)
        #: the program's initial values, made by the first :meth:`refresh_settled`
        self._initial_values = None
        self._initial_value = None      # the one initial value of every non-source
        #: ``settled`` packed at each pull's start, with early exit
        self.settled_bits = np.zeros(0, np.uint64)
        #: which vertices have in-edges, packed alike, for the whole-CSC pulls
        #: (vertices without any are passed over)
        self.in_edge_bits = np.zeros(0, np.uint64)
        self.unsettled_edges = np.zeros(1, np.int64)
        self._degrees_match_cache = None
        #: pulls skip the vertices as good as the best source (``plan.floor_skip``):
        #: kernels.FLOOR_MIN or FLOOR_MAX, 0 when not; ``floor[0]``, this pull's floor
        self.floor_mode = 0
        if plan.floor_skip:
            self.floor_mode = kernels.FLOOR_MAX if plan.larger_first else kernels.FLOOR_MIN
        self.floor = np.zeros(1, state.values.dtype)
        self._floor_now = 0
        self.unsettled_delta = np.zeros(1, np.int64)     # what a notify-pull settled
        self.pulled_last = False
        self.previous_active = 0
        #: sparse notify-pulls run one by one so far (batches start after
        #: ``config.CPU_SPARSE_BATCH_AFTER`` of them)
        self.sparse_singles = 0
        #: iterations end with pointer jumping over the labels (``plan.shortcut_labels``)
        self.shortcut = plan.shortcut_labels
        #: the first iteration starts from a union-find's labels
        #: (``plan.union_find_start``); False once done
        self.union_find_pending = plan.union_find_start
        #: sparse iterations run in buckets of this width of values
        #: (``plan.value_priority``); None: in frontier order
        self.bucket_width = None
        self.larger_first = plan.larger_first
        self.pending = np.zeros(1, np.uint8)
        #: ... whose steps for one thread push (edge values in the out-edges' order)
        self.push = False
        self.push_weights = None
        self.push_rounds = False
        self.push_rounds_failed = False
        self._set_up()

    def _set_up(self) -> None:
        """The arrays and the compiled kernels of the plan's paths."""
        plan = self.plan
        if plan.early_exit:
            self._set_up_early_exit()
        if plan.fused_pull:
            # mapped now, by every thread, as the values were at setup
            self.next_contributions = kernels.touch(np.empty_like(self.contributions))
            self.part_starts = kernels.balanced_vertex_starts(
                self.arrays.in_offsets,
                self.threads * max(1, int(config.CPU_FUSED_PULL_PARTS_PER_THREAD)))
        if plan.shortcut_labels:
            empty = np.zeros(0, np.int64)
            with parallel_section():        # compiled now, outside the timed iterations
                kernels.shortcut_labels(empty, self.state.values, self.arrays.attrs[3],
                                        self.state.active, False)
        if plan.union_find_start:
            arrays = self.arrays
            one_vertex = np.zeros(2, arrays.out_offsets.dtype)
            with parallel_section():        # compiled now, outside the timed iterations
                parent, _ = union_find.component_roots(one_vertex, arrays.out_targets[:0])
                union_find.write_labels(parent, arrays.attrs[3][:1],
                                        self.state.values[:1].copy())
        if plan.value_priority:
            self._set_up_value_priority()

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

    def _set_up_early_exit(self) -> None:
        """Pull with early exit (a program final once set, run synchronously:
        ``plan.early_exit``).  The settled vertices are found from the state
        as it stands (a run's start; a restored checkpoint finds them again)."""
        self._find_settled(self.plan.initially_active)
        self.settled_bits = np.zeros((self.arrays.num_vertices + 63) // 64, np.uint64)
        if self.plan.whole_settling_pull:
            in_offsets = self.arrays.in_offsets
            self.in_edge_bits = np.empty_like(self.settled_bits)
            with parallel_section():
                # mapped now, by every thread, not by the first pull's writes
                self.settling_found = kernels.touch(np.empty(self.arrays.num_vertices,
                                                             np.int64))
                kernels.pack_flags(in_offsets[1:] != in_offsets[:-1], self.in_edge_bits)

    def _union_find_start(self, record: IterationRecord) -> None:
        started = time.perf_counter()
        arrays, state = self.arrays, self.state
        roots, skipped = union_find.component_roots(arrays.out_offsets, arrays.out_targets)
        dropped = union_find.write_labels(roots, arrays.attrs[3], state.values)
        if state.synchronous:
            state.next[:] = state.values
        decisions.note(record, "cpu_union_find_start", True, dropped=int(dropped),
                       largest_root=skipped, seconds=time.perf_counter() - started)

    def _take_floor(self, record: IterationRecord, **inputs) -> bool:
        """``floor[0]``: the best committed value of a vertex with out-edges (a pull
        improves values only from sources at least as bad as it), noted in the
        record; whether there is such a vertex."""
        found = bool(kernels.best_source_value(self.state.values, self.arrays.attrs[0],
                                               self.floor_mode, self.floor))
        decisions.note(record, "cpu_floor_skip", found, floor=self.floor[0].item(), **inputs)
        return found

    def _set_up_value_priority(self) -> None:
        """Take sparse iterations in buckets of values (a program declaring
        ``value_priority``, run asynchronously: ``plan.value_priority``),
        larger values first for a max sum.  The width is
        :func:`decisions.bucket_width`'s.  With ``plan.priority_push`` (a
        program declaring ``apply_keeps_best``), the steps small enough for
        one thread push over the frontier's out-edges
        (:func:`garaphpy.kernels.cpu.priority_iterations`); their edge values
        are then placed in the out-edges' order, once.  With
        ``plan.push_rounds`` too every bucket is pushed in parallel rounds
        (:func:`garaphpy.kernels.cpu.priority_push_rounds`) until their
        threads fail to meet once; then as above."""
        arrays, plan = self.arrays, self.plan
        self.push = plan.priority_push
        self.push_rounds = plan.priority_push and plan.push_rounds
        self.push_weights = arrays.edge_weights(None)
        if self.push and arrays.reads_weights and arrays.num_edges:
            _, sources, weights = arrays.page_source.csc()
            self.push_weights = out_edge_values(arrays.out_offsets, [(sources, weights)],
                                                weights.dtype)
        mean_edge_value = None
        if config.CPU_BUCKET_WIDTH is None and arrays.reads_weights and arrays.num_edges:
            _, _, weights = arrays.page_source.csc()
            mean_edge_value = kernels.total(weights) / arrays.num_edges
        self.bucket_width = decisions.bucket_width(
            config.CPU_BUCKET_WIDTH, mean_edge_value,
            arrays.num_edges / max(arrays.num_vertices, 1))
        self.pending = np.zeros(arrays.num_vertices, np.uint8)

    def _shortcut_labels(self, record: IterationRecord) -> None:
        """Pointer jumping after an iteration, recorded as
        ``decisions["shortcut_labels"]``: after a notify-pull over the frontier
        (O(frontier)); after a pull over an even sample of the frontier, then
        over every vertex if enough of the sample's labels dropped
        (:func:`decisions.shortcut_every_vertex`), those whose label drops
        joining the frontier."""
        state, ids, n = self.state, self.arrays.attrs[3], self.arrays.num_vertices
        if record.direction != "pull":
            dropped = kernels.shortcut_labels(state.frontier, state.values, ids, state.active,
                                              False)
            decisions.note(record, "shortcut_labels", "frontier",
                           vertices=int(state.frontier.size), dropped=int(dropped))
            return
        # the sample is of the frontier: its vertices need no marking
        step = max(1, state.frontier.size // config.CPU_SHORTCUT_SAMPLE)
        sample = np.ascontiguousarray(state.frontier[::step])
        sample_dropped = kernels.shortcut_labels(sample, state.values, ids, state.active, False)
        every = decisions.shortcut_every_vertex(int(sample_dropped), int(sample.size),
                                                config.CPU_SHORTCUT_MIN_DROP)
        dropped = sample_dropped
        if every:
            dropped += kernels.shortcut_labels(self._all_vertices(), state.values, ids,
                                               state.active, True)
        decisions.note(record, "shortcut_labels", "all" if every else "sample",
                       sample_size=int(sample.size), sample_dropped=int(sample_dropped),
                       min_fraction=config.CPU_SHORTCUT_MIN_DROP,
                       vertices=n if every else int(sample.size), dropped=int(dropped))
        if every and dropped > sample_dropped:
            state.frontier = Frontier.of_flags(state.active, self.threads).ids

    def _find_settled(self, initially_active: str) -> None:
        """settled = the vertices whose value left its initial one, the sources
        (every vertex where ``initially_active`` is ``"all"``), and the
        frontier; each claimed for good (the sparse notify passes them over);
        and the in-edges of the others counted (:meth:`_settle_from_values`)."""
        self._initially_active = initially_active
        if self.settled.size != self.arrays.num_vertices:
            self.settled = np.zeros(self.arrays.num_vertices, np.bool_)
        self._settle_from_values()

    def refresh_settled(self, pulled_last: bool, previous_active: int) -> None:
        """The settled vertices found again from the values, after another
        processor wrote them: a hybrid run's CPU about to run an iteration alone
        after the GPU's (:meth:`_find_settled`'s rule).  ``pulled_last`` and
        ``previous_active``: whether the last iteration pulled, and its
        frontier's size, which Beamer's rule reads
        (:func:`decisions.settling_direction`)."""
        self._settle_from_values()
        self.pulled_last = bool(pulled_last)
        self.previous_active = int(previous_active)

    def _settle_from_values(self) -> None:
        """:meth:`_find_settled`'s rule over the values as they stand, in parallel
        (:func:`kernels.settled_from_values`, then the frontier); the initial
        values are made once, and where every vertex but the sources starts
        from one value, that value alone is compared
        (:func:`kernels.settled_from_value`)."""
        arrays, state = self.arrays, self.state
        is_source = arrays.attrs[4]
        if self._initial_values is None:
            self._initial_values = np.empty_like(state.values)
            with parallel_section(), self.compiled.compiling():
                self.compiled.kernels.init_values(arrays.attrs, arrays.num_vertices,
                                                  self._initial_values)
            first_other = int(np.argmin(is_source)) if is_source.size else 0
            if is_source.size and not is_source[first_other]:
                value = self._initial_values[first_other]
                with parallel_section():
                    if kernels.count_unequal(self._initial_values, value, is_source) == 0:
                        self._initial_value = value
        everything = self._initially_active == "all"
        with parallel_section():
            if self._initial_value is not None:
                unsettled = kernels.settled_from_value(
                    state.values, self._initial_value, is_source, everything, self.settled,
                    state.claimed, arrays.in_offsets)
            else:
                unsettled = kernels.settled_from_values(
                    state.values, self._initial_values, is_source, everything, self.settled,
                    state.claimed, arrays.in_offsets)
            unsettled -= kernels.mark_settled(state.frontier, self.settled, state.claimed,
                                              arrays.in_offsets)
        self.unsettled_edges[0] = unsettled

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
            batches_first = self.bucket_width is not None or (
                self.batches and config.CPU_SPARSE_BATCH_AFTER == 0
                and decisions.sparse_batch(active_edges, arrays.num_edges,
                                           arrays.num_vertices, self.rho))
            directions = ("batch",) if batches_first else (decisions.choose_direction(
                decisions.active_fraction(active_edges, arrays.num_edges), self.rho),)
        for direction in directions:
            kernels_of_program = self.compiled.kernels
            batch_kernel = kernels_of_program.priority_push_rounds if self.push_rounds \
                else kernels_of_program.priority_iterations if self.bucket_width is not None \
                else kernels_of_program.settle_push_rounds if self._settles_in_rounds() \
                else kernels_of_program.sparse_iterations
            if direction == "batch" and batch_kernel.signatures:
                # compiled in this process already: a warm-up (and the compile
                # announcement's timer thread) would cost a run more than the batch saves
                self.warm_directions.add(direction)
            if direction not in self.warm_directions:
                with self.compiled.compiling():
                    {"pull": self._warm_up_pull, "notify-pull": self._warm_up_notify_pull,
                     "batch": self._warm_up_batch}[direction]()
                self.warm_directions.add(direction)
                self.stats[:] = 0.0

    def _warm_up_pull(self) -> None:
        arrays, compiled, state = self.arrays, self.compiled, self.state
        aggregates = self.aggregates(0)
        with parallel_section():
            if self.precompute_source_gathers:
                compiled.kernels.source_contributions(state.values[:0], arrays.attrs,
                                                      self.contributions)
            pull_kernel, gather_values, extra = self._pull_kernel()
            pull_kernel(
                compiled.identity, arrays.in_offsets, arrays.sources, arrays.weights, 0, 0, 0,
                0, 0, state.values, state.next, gather_values, arrays.attrs, aggregates,
                arrays.num_vertices, 0, state.active, 1, self.boundary_vertex,
                self.boundary_accum, self.stats, *extra)
            compiled.kernels.apply_vertices(
                arrays.attrs, aggregates, arrays.num_vertices, 0, np.zeros(0, np.int64),
                np.zeros(0, compiled.accum_dtype), state.values, state.next, state.active,
                self.stats)
            if self.fused_pull:
                self._fused_kernel()(
                    compiled.identity, arrays.in_offsets, arrays.sources, state.values,
                    state.next, self.contributions, self.next_contributions, arrays.attrs,
                    aggregates, arrays.num_vertices, 0, state.active, np.zeros(1, np.int64),
                    self.aggregate_identities, self.stats, 1)
            if self.plan.whole_settling_pull:     # over no vertex
                _, sources, weights = arrays.page_source.csc()
                compiled.kernels.pull_settling_whole(
                    compiled.identity, arrays.in_offsets, sources, arrays.edge_weights(weights),
                    state.values, arrays.attrs, aggregates, 0, 0, state.active, self.settled,
                    self.settled_bits, self.in_edge_bits, state.claimed, self.settling_found,
                    np.zeros(2), np.zeros(1, np.int64), np.zeros(1, np.int64), 1)
            if self.floor_mode:
                floor = np.zeros(1, state.values.dtype)
                kernels.best_source_value(state.values[:0], arrays.attrs[0], self.floor_mode,
                                          floor)
                kernels.all_at_floor(state.values[:0], arrays.attrs[1], self.floor_mode, floor)
        kernels.active_vertex_ids(np.zeros(0, np.bool_), self.threads)
        kernels.vertex_ids(np.zeros(0, np.int64))
        kernels.frontier_degree_sum(np.zeros(0, np.int64), arrays.out_offsets)

    def _warm_up_notify_pull(self) -> None:
        arrays, compiled, state = self.arrays, self.compiled, self.state
        empty = np.zeros(0, np.int64)
        empty_prefix = np.zeros(1, np.int64)
        with parallel_section():
            if self.settles_by_push:
                compiled.kernels.push_settling(
                    compiled.identity, empty, empty_prefix, arrays.out_offsets,
                    arrays.out_targets, arrays.weights, state.values, state.next,
                    arrays.attrs, self.aggregates(0), arrays.num_vertices, 0, 1, self.stats,
                    self.settled, state.claimed, arrays.in_offsets, self.unsettled_delta)
            compiled.kernels.pull_vertices(
                compiled.identity, empty, empty_prefix, empty, arrays.sources, arrays.weights,
                state.values, state.next, arrays.attrs, self.aggregates(0),
                arrays.num_vertices, 0, 1, self.stats, self.early_exit, self.settled,
                state.claimed, self.unsettled_delta)
        kernels.degree_prefix(empty, arrays.out_offsets)
        kernels.frontier_degree_sum(empty, arrays.out_offsets)
        # a run with early exit never takes the dense notify (decisions.dense_notify)
        for notify in (kernels.notify,) + (() if self.early_exit else (kernels.notify_dense,)):
            arguments = (empty, empty_prefix, arrays.out_offsets, arrays.out_targets,
                         state.claimed, 1) + ((self.threads,) if notify is kernels.notify_dense
                                              else ())
            notify(*arguments)
        kernels.reset_flags(empty, state.claimed)
        kernels.commit_vertices(empty, state.next, state.values)

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
        self.carried_iteration = -1
        if self.early_exit:
            self._find_settled(self._initially_active)

    # -- per-iteration pieces ------------------------------------------------
    def aggregates(self, iteration: int) -> np.ndarray:
        """The program's aggregates over the committed values."""
        compiled = self.compiled
        if compiled.aggregate_call is None:
            return self.no_aggregates
        if self.carried_iteration == iteration:     # made by the last (fused) pull
            return self.carried_aggregates.copy()
        with parallel_section(), compiled.compiling():
            partial = compiled.kernels.compute_aggregates(
                self.state.values, self.arrays.attrs, self.arrays.num_vertices, iteration,
                self.aggregate_identities, self._aggregate_parts())
        return self._merged_aggregates(partial)

    def _aggregate_parts(self) -> np.ndarray:
        """The vertex parts of :meth:`aggregates`: the fused pull's where it has
        them (the same sums, bit for bit, as the pull's own), else one block
        of equal vertices per thread."""
        if self.part_starts is not None:
            return self.part_starts
        n, threads = self.arrays.num_vertices, self.threads
        block = (n + threads - 1) // threads
        return np.minimum(np.arange(threads + 1, dtype=np.int64) * block, n)

    def _merged_aggregates(self, partial: np.ndarray) -> np.ndarray:
        """Rows of partial aggregates merged, each column with its monoid."""
        compiled = self.compiled
        result = self.aggregate_identities.copy()
        for i, monoid in enumerate(compiled.aggregate_monoids):
            column = partial[:, i]
            result[i] = getattr(column, MONOIDS[monoid].numpy_reduce)()
        return result

    def active_out_edges(self) -> tuple[int, np.ndarray | None]:
        """Sum of the frontier's out-degrees, and the prefix notify needs (None for
        a frontier of at least half the vertices, which mostly pulls, and for
        one a whole-CSC pull counted as it listed it: a notify-pull then
        makes the prefix itself)."""
        frontier = self.state.frontier
        if frontier.size == self.arrays.num_vertices:
            return self.arrays.num_edges, None
        if frontier is self._counted_frontier:      # counted as the pull listed it
            return int(self.found_out_edges[0]), None
        if 2 * frontier.size >= self.arrays.num_vertices:
            return int(kernels.frontier_degree_sum(frontier, self.arrays.out_offsets)), None
        prefix = kernels.frontier_degree_prefix(frontier, self.arrays.out_offsets,
                                                self.threads)
        return int(prefix[-1]), prefix

    def decide(self, record: IterationRecord, direction: str) -> None:
        """The iteration's direction: Garaph's switch (Beamer's for a run with early
        exit), or the forced one (recorded)."""
        if self.early_exit:
            record.direction = decisions.decide(
                record, "direction", decisions.settling_direction,
                **self._settling_inputs(round(record.active_fraction * self.arrays.num_edges),
                                        direction))
            return
        record.direction = decisions.decide(record, "direction", decisions.choose_direction,
                                            f=record.active_fraction, rho=record.rho,
                                            forced=direction)

    def _settling_inputs(self, active_out_edges: int, forced: str) -> dict:
        return dict(active_out_edges=int(active_out_edges),
                    active_vertices=int(self.state.frontier.size),
                    unsettled_in_edges=int(self.unsettled_edges[0]),
                    num_vertices=self.arrays.num_vertices, pulled_last=self.pulled_last,
                    previous_active=self.previous_active, rho=self.rho, forced=forced)

    def iterate(self, record: IterationRecord, prefix, aggregates: np.ndarray) -> None:
        """One iteration in ``record.direction``; fills the record's counters."""
        self.warm_up((record.direction,))
        started = time.perf_counter()
        self._iterate(record, prefix, aggregates)
        record.cpu_busy_seconds = time.perf_counter() - started
        record.cpu_pages = record.pages
        record.cpu_edges = record.edges_processed

    # -- batches of sparse iterations (issue 19) --------------------------------
    def _sparse_batch_takes(self, active_out_edges: int, direction: str) -> bool:
        """:func:`decisions.sparse_batch` on the next iteration, in a run that batches."""
        arrays = self.arrays
        chosen = decisions.settling_direction(**self._settling_inputs(
            active_out_edges, direction)) if self.early_exit else None
        return self.batches and decisions.sparse_batch(
            active_out_edges, arrays.num_edges, arrays.num_vertices, self.rho,
            forced=direction, direction=chosen)

    def may_batch(self, active_out_edges: int) -> bool:
        """Whether :meth:`iterate_batch` may take the next iteration (direction
        ``"auto"``): in buckets of values, or as a sparse batch (which may
        still wait for ``config.CPU_SPARSE_BATCH_AFTER`` single iterations)."""
        return self.bucket_width is not None or self._sparse_batch_takes(active_out_edges,
                                                                          "auto")

    def iterate_batch(self, first_iteration: int, max_steps: int, tolerance: float | None,
                      active_out_edges: int, direction: str = "auto") -> list[IterationRecord]:
        """Up to ``max_steps`` iterations from ``first_iteration`` in one kernel call,
        when the next one is a sparse notify-pull (:func:`decisions.sparse_batch`),
        or in buckets of values (``plan.value_priority``,
        :func:`garaphpy.kernels.cpu.priority_iterations`: every iteration the
        kernel admits, none when the direction is forced).

        Each step is the iteration :meth:`iterate` would run, with the same
        values, frontier and counters; the batch ends before an iteration
        the rule refuses, and after one whose L1 change is below
        ``tolerance``, but for steps in buckets of values, whose change
        measures one bucket: such a run goes on while any vertex is pending.
        The steps share the batch's time evenly (the kernel
        does not time them one by one).

        Returns
        -------
        list of IterationRecord
            One per iteration run; empty when the next iteration is not
            batched (nothing was done).
        """
        arrays, state = self.arrays, self.state
        if self.bucket_width is not None:
            # buckets of values: every iteration the kernel admits, the first included
            if max_steps < 1 or direction != "auto":
                return []
            kernel = self._priority_iterations
        else:
            if max_steps < 1 or not self._sparse_batch_takes(active_out_edges, direction):
                return []
            if self.sparse_singles < config.CPU_SPARSE_BATCH_AFTER:
                self.sparse_singles += 1
                return []
            kernel = self._sparse_iterations
        self.warm_up(("batch",))
        rounds = self.bucket_width is not None and self.push_rounds
        settle_rounds = self.bucket_width is None and self._settles_in_rounds()
        steps = min(max_steps, config.CPU_PUSH_ROUND_STEPS if rounds or settle_rounds
                    else config.CPU_SPARSE_BATCH_STEPS)
        counters = np.empty((steps, len(kernels.SPARSE_COUNTERS)), np.int64)
        changes = np.empty(steps, np.float64)
        started = time.perf_counter()
        with parallel_section():
            # a bucket's change measures that bucket alone: no test of the fixed point
            frontier, taken = kernel(state.frontier, first_iteration, steps,
                                     None if self.bucket_width is not None else tolerance,
                                     counters, changes)
        # where the threads did not meet, the kernel stepped instead and turned the rounds off
        rounds = rounds and self.push_rounds
        settle_rounds = settle_rounds and self._settles_in_rounds()
        seconds = (time.perf_counter() - started) / max(taken, 1)
        state.frontier = frontier
        serial_edges = decisions.round_serial_edges(self.threads) if settle_rounds \
            else decisions.serial_step_edges(self.threads)
        # the entries every step of the batch shares (read only)
        shared = {"sparse_batch": {"steps": taken, "choice": True}}
        if self.bucket_width is not None:
            shared["value_priority"] = {
                "bucket_width": self.bucket_width, "larger_first": self.larger_first,
                "push": self.push, "rounds": rounds, "rounds_failed": self.push_rounds_failed,
                "choice": True}
        if rounds:      # no notify, no serial step: each round is pushed by the team
            shared["dense_notify"] = {"choice": False, "push_rounds": True}
            shared["serial_step"] = {"choice": False, "push_rounds": True}
        if settle_rounds:
            shared["settle_rounds"] = self.plan.entry("settle_rounds")
            shared["dense_notify"] = {"choice": False, "settle_rounds": True}
        records = []
        for step, (active, edges, updated, processed, activated, serial, unsettled) in enumerate(
                counters[:taken].tolist()):
            f = decisions.active_fraction(edges, arrays.num_edges)
            record = IterationRecord(first_iteration + step, self.mode, "notify-pull", False,
                                     f, self.rho, active, updated_vertices=updated,
                                     edges_processed=processed, activated=activated,
                                     l1_change=float(changes[step]), cpu_edges=processed,
                                     cpu_busy_seconds=seconds, seconds=seconds)
            for name, entry in shared.items():
                decisions.share(record, name, entry)
            # the kernel made these choices by the rules of the decisions module
            if self.early_exit:     # Beamer's rule, with the inputs the kernel saw
                decisions.note(record, "direction", "notify-pull", **{
                    **self._settling_inputs(edges, "auto"), "active_vertices": active,
                    "unsettled_in_edges": unsettled})
                self.pulled_last, self.previous_active = False, active
            else:
                decisions.note(record, "direction", "notify-pull", f=f, rho=self.rho,
                               forced="auto")
            if settle_rounds:   # the team's levels: one thread takes the small ones
                decisions.note(record, "serial_step", bool(serial), edges_processed=processed,
                               serial_edges=serial_edges, settle_rounds=True)
            elif not rounds:
                # a bucket may notify over a bitmap; a plain batch stops before such a step
                dense = self.bucket_width is not None and decisions.dense_notify(
                    edges, arrays.num_vertices)
                decisions.note(record, "dense_notify", dense, active_out_edges=edges,
                               num_vertices=arrays.num_vertices, early_exit=self.early_exit)
                decisions.note(record, "serial_step", bool(serial), edges_processed=processed,
                               serial_edges=serial_edges)
            records.append(record)
        return records

    def _priority_iterations(self, frontier, first_iteration, steps, tolerance, counters,
                             changes):
        arrays, compiled, state = self.arrays, self.compiled, self.state
        if self.push_rounds:
            left, taken = compiled.kernels.priority_push_rounds(
                frontier, arrays.out_offsets, arrays.out_targets, self.push_weights,
                state.values, arrays.attrs, self.no_aggregates, arrays.num_vertices,
                first_iteration, steps, counters, changes, float(self.bucket_width),
                self.larger_first, _team_size())
            if taken >= 0:
                return left, taken
            self.push_rounds = False    # the threads did not meet: step by step from now on
            self.push_rounds_failed = True
        _, sources, weights = arrays.page_source.csc()
        return compiled.kernels.priority_iterations(
            compiled.identity, frontier, arrays.out_offsets, arrays.out_targets,
            arrays.in_offsets, sources, arrays.edge_weights(weights), state.values,
            arrays.attrs, self.no_aggregates, arrays.num_vertices, arrays.num_edges,
            first_iteration, steps, decisions.serial_step_edges(self.threads),
            1.0 / (config.NOTIFY_PULL_COST_FACTOR * self.rho), config.NOTIFY_DENSE_FACTOR,
            state.claimed, self.threads * config.CPU_CHUNKS_PER_THREAD, self.threads,
            counters, changes, float(self.bucket_width), self.larger_first, self.pending,
            self.push, self.push_weights)

    def _settles_in_rounds(self) -> bool:
        """Whether this run's batches of settling steps run on kept threads
        (:func:`decisions.cpu_settle_rounds`; off for good once their threads
        failed to meet)."""
        return self.plan.settle_rounds and not self.settle_rounds_failed

    def _sparse_iterations(self, frontier, first_iteration, steps, tolerance, counters,
                           changes):
        arrays, compiled, state = self.arrays, self.compiled, self.state
        if self._settles_in_rounds():
            left, taken = compiled.kernels.settle_push_rounds(
                compiled.identity, frontier, arrays.out_offsets, arrays.out_targets,
                arrays.in_offsets, arrays.weights, state.values, state.next,
                state.synchronous, arrays.attrs, self.no_aggregates, arrays.num_vertices,
                first_iteration, steps, -np.inf if tolerance is None else float(tolerance),
                self.settled, state.claimed, self.unsettled_edges,
                float(config.CPU_SETTLING_PULL_FACTOR * self.rho), self._degrees_match(),
                decisions.round_serial_edges(self.threads), counters, changes, _team_size())
            if taken >= 0:
                return left, taken
            self.settle_rounds_failed = True    # the threads did not meet: launches from now on
        _, sources, weights = arrays.page_source.csc()
        return compiled.kernels.sparse_iterations(
            compiled.identity, frontier, arrays.out_offsets, arrays.out_targets,
            arrays.in_offsets, sources, arrays.edge_weights(weights),
            state.values, state.next, state.synchronous, arrays.attrs, self.no_aggregates,
            arrays.num_vertices, arrays.num_edges, first_iteration, steps,
            decisions.serial_step_edges(self.threads),
            1.0 / (config.NOTIFY_PULL_COST_FACTOR * self.rho),
            config.NOTIFY_DENSE_FACTOR, -np.inf if tolerance is None else float(tolerance),
            state.claimed, self.threads * config.CPU_CHUNKS_PER_THREAD, self.threads, counters,
            changes, self.early_exit, self.settled, self.unsettled_edges,
            float(config.CPU_SETTLING_PULL_FACTOR * self.rho), self.settles_by_push,
            self._degrees_match())

    def _degrees_match(self) -> bool:
        """Whether every vertex has as many in-edges as out-edges (a symmetric
        graph: the settled in-edges are then counted from the out-degrees)."""
        if self._degrees_match_cache is None:
            out_degree, in_degree = self.arrays.attrs[0], self.arrays.attrs[1]
            self._degrees_match_cache = bool(np.array_equal(out_degree, in_degree))
        return self._degrees_match_cache

    def _warm_up_batch(self) -> None:
        empty = np.zeros((0, len(kernels.SPARSE_COUNTERS)), np.int64)
        batch = self._priority_iterations if self.bucket_width is not None \
            else self._sparse_iterations
        with parallel_section():
            batch(np.zeros(0, np.int64), 0, 0, None, empty, np.zeros(0))

    def _iterate(self, record: IterationRecord, prefix, aggregates: np.ndarray) -> None:
        self.stats[:] = 0.0
        with parallel_section():
            if self.union_find_pending:
                self.union_find_pending = False
                if record.iteration == 0:       # not a run resumed from a checkpoint
                    self._union_find_start(record)
            if record.direction == "pull":
                self._pull(record, aggregates)
            else:
                self._notify_pull(record, prefix, aggregates)
            if self.shortcut:
                self._shortcut_labels(record)
        self.pulled_last = record.direction == "pull"
        self.previous_active = record.active_vertices
        record.l1_change = float(self.stats[0])
        record.activated = int(self.state.frontier.size)

    def _pull(self, record: IterationRecord, aggregates: np.ndarray) -> None:
        self.begin_pull(record)
        if self.early_exit:
            kernels.pack_flags(self.settled, self.settled_bits)
            decisions.share(record, "whole_settling_pull",
                            self.plan.entry("whole_settling_pull"))
            if self.plan.whole_settling_pull:
                self._pull_settling_whole(record, aggregates)
                return
        decisions.share(record, "cpu_fused_pull", self.plan.entry("fused_pull"))
        if self.fused_pull:
            self._pull_fused(record, aggregates)
            return
        if self._floor_now:
            settled = bool(kernels.all_at_floor(self.state.values, self.arrays.attrs[1],
                                                self._floor_now, self.floor))
            record.decisions["cpu_floor_skip"]["all_at_floor"] = settled
            if settled:
                self._pull_at_floor(record)
                return
        pending = []
        pages = self.arrays.pages
        cursor = self.page_cursor(range(len(pages)))
        try:
            for done, page in enumerate(pages, 1):
                pending.extend(self.pull_page(page, record.iteration, aggregates, self.threads,
                                              data=cursor.get(page.index)))
                if self.page_done is not None and not self.state.synchronous:
                    self.page_done(record.iteration, done)
        finally:
            cursor.close()
        unsettled = int(self.unsettled_edges[0])
        self.finish_pull(record, pending, aggregates)
        if self.early_exit:     # the whole pull settles its vertices as it finds them
            self.unsettled_edges[0] -= kernels.mark_settled(
                self.state.frontier, self.settled, self.state.claimed, self.arrays.in_offsets)
        record.pages = len(self.arrays.pages)
        # with early exit, the in-edges of the vertices not settled: what it read at most
        record.edges_processed = unsettled if self.early_exit else self.arrays.num_edges

    def _pull_fused(self, record: IterationRecord, aggregates: np.ndarray) -> None:
        """A pull of the whole CSC that also makes the next pull's contributions and
        the next iteration's aggregates (:func:`garaphpy.kernels.cpu.pull_fused`)."""
        arrays, compiled, state = self.arrays, self.compiled, self.state
        _, sources, _ = arrays.page_source.csc()
        # written in place: each vertex reads only its own old value
        partial = self._fused_kernel()(
            compiled.identity, arrays.in_offsets, sources, state.values, state.values,
            self.contributions, self.next_contributions, arrays.attrs, aggregates,
            arrays.num_vertices, record.iteration, state.active, self.part_starts,
            self.aggregate_identities, self.stats, _team_size())
        self.contributions, self.next_contributions = self.next_contributions, \
            self.contributions
        if compiled.aggregate_call is not None:
            self.carried_aggregates = self._merged_aggregates(partial)
        self.carried_iteration = record.iteration + 1
        self.finish_pull(record, [], aggregates, in_place=True)
        record.pages = len(arrays.pages)
        record.edges_processed = arrays.num_edges

    def _pull_settling_whole(self, record: IterationRecord, aggregates: np.ndarray) -> None:
        """Beamer's bottom-up step in one launch over the whole CSC, in place, the
        vertices it activates settled and listed as the next frontier
        (:func:`garaphpy.kernels.cpu.pull_settling_whole`)."""
        arrays, compiled, state = self.arrays, self.compiled, self.state
        _, sources, weights = arrays.page_source.csc()
        unsettled = int(self.unsettled_edges[0])
        self.unsettled_delta[0] = 0
        state.frontier = compiled.kernels.pull_settling_whole(
            compiled.identity, arrays.in_offsets, sources, arrays.edge_weights(weights),
            state.values, arrays.attrs, aggregates, arrays.num_vertices, record.iteration,
            state.active, self.settled, self.settled_bits, self.in_edge_bits, state.claimed,
            self.settling_found, self.stats, self.unsettled_delta, self.found_out_edges,
            _team_size())
        self._counted_frontier = state.frontier
        self.unsettled_edges[0] -= self.unsettled_delta[0]
        record.pages = len(arrays.pages)
        record.updated_vertices = arrays.num_vertices
        # the in-edges of the vertices not settled: what it read at most
        record.edges_processed = unsettled

    def _fused_kernel(self):
        kernels_of_program = self.compiled.kernels
        return kernels_of_program.pull_fused if self.compiled.aggregate_call is None \
            else kernels_of_program.pull_fused_aggregates

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
        self._floor_now = 0
        if self.floor_mode and self._take_floor(record):
            self._floor_now = self.floor_mode
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
            compiled.identity, arrays.in_offsets, data.sources,
            weights, page.edge_begin, page.edge_begin, page.edge_begin + page.num_edges,
            page.first_vertex, page.end_vertex, state.values,
            state.next if values_write is None else values_write, gather_values,
            arrays.attrs, aggregates, arrays.num_vertices, iteration,
            state.active if active is None else active,
            parts, boundary_vertex, boundary_accum, self.stats if stats is None else stats,
            *extra)
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
            compiled.kernels.apply_vertices(arrays.attrs, aggregates, arrays.num_vertices,
                                            record.iteration, vertices, accums, state.values,
                                            state.next, state.active, self.stats)
        if not in_place:
            state.swap()
        if int(self.stats[1]) + activated_elsewhere == arrays.num_vertices:
            # every vertex activated (PageRank): the frontier is all of them, no O(|V|) scan
            state.frontier = self._all_vertices()
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
                        arrays.attrs, aggregates, arrays.num_vertices, iteration, vertices,
                        accums, state.values, scratch_values, scratch_active, stats)
        finally:
            cursor.close()
        return np.flatnonzero(scratch_active | (scratch_values != state.values))

    def _all_vertices(self) -> np.ndarray:
        """0..|V|-1, made once per run (treated as read-only, like every frontier)."""
        if self.all_vertices is None:
            self.all_vertices = kernels.vertex_ids(np.empty(self.arrays.num_vertices, np.int64))
        return self.all_vertices

    def _pull_kernel(self, full: bool = False):
        """The program's pull kernel (gathering over the values, reading the
        precomputed contributions, or skipping settled vertices unless
        ``full``), the array its gather reads, and its further arguments."""
        if self.early_exit and not full:
            return (self.compiled.kernels.pull_range_settling, self.state.values,
                    (self.settled, self.settled_bits))
        floor = (0 if full else self._floor_now, self.floor)
        if self.precompute_source_gathers:
            return self.compiled.kernels.pull_range_precomputed, self.contributions, floor
        return self.compiled.kernels.pull_range, self.state.values, floor

    def _notify_pull(self, record: IterationRecord, prefix, aggregates: np.ndarray) -> None:
        arrays, compiled, state = self.arrays, self.compiled, self.state
        chunks = self.threads * config.CPU_CHUNKS_PER_THREAD
        frontier = state.frontier
        if prefix is None:
            prefix = kernels.frontier_degree_prefix(frontier, arrays.out_offsets,
                                                    self.threads)
        if self.settles_by_push:
            decisions.share(record, "settling_push", self.plan.entry("settling_push"))
            self._push_settling(record, prefix, aggregates)
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
        if self.floor_mode and int(in_prefix[-1]) >= arrays.num_vertices \
                and self._take_floor(record, notified=int(notified.size)):
            notified = kernels.above_floor(notified, state.values, self.floor_mode, self.floor)
            in_prefix = kernels.frontier_degree_prefix(notified, arrays.in_offsets,
                                                       self.threads)
        sources, weights, edge_starts, record.pages = arrays.page_source.vertex_in_edges(
            notified, in_prefix, arrays.in_offsets, kernels.gather_vertex_edges, arrays.weights,
            arrays.reads_weights)
        self.unsettled_delta[0] = 0
        state.frontier = compiled.kernels.pull_vertices(
            compiled.identity, notified, in_prefix, edge_starts, sources,
            weights, state.values, state.next, arrays.attrs, aggregates,
            arrays.num_vertices, record.iteration, chunks, self.stats, self.early_exit,
            self.settled, state.claimed, self.unsettled_delta)
        self.unsettled_edges[0] -= self.unsettled_delta[0]
        if state.synchronous:
            kernels.commit_vertices(notified, state.next, state.values)
        record.updated_vertices = int(notified.size)
        record.edges_processed = int(in_prefix[-1])

    def _push_settling(self, record: IterationRecord, prefix, aggregates: np.ndarray) -> None:
        """Beamer's top-down step (:func:`garaphpy.kernels.cpu.push_settling`): the
        record's ``edges_processed`` are the frontier's out-edges, its
        ``updated_vertices`` the vertices written (those a notify lists)."""
        arrays, compiled, state = self.arrays, self.compiled, self.state
        self.unsettled_delta[0] = 0
        written, state.frontier = compiled.kernels.push_settling(
            compiled.identity, state.frontier, prefix, arrays.out_offsets, arrays.out_targets,
            arrays.weights, state.values, state.next, arrays.attrs, aggregates,
            arrays.num_vertices, record.iteration, self.threads * config.CPU_CHUNKS_PER_THREAD,
            self.stats, self.settled, state.claimed, arrays.in_offsets, self.unsettled_delta)
        self.unsettled_edges[0] -= self.unsettled_delta[0]
        if state.synchronous:
            kernels.commit_vertices(written, state.next, state.values)
        record.updated_vertices = int(written.size)
        record.edges_processed = int(prefix[-1])


def _team_size() -> int:
    """The threads of a kernel that keeps them for many rounds: numba's for
    this thread now (one iteration of ``numba.prange(team)`` each)."""
    return numba.get_num_threads()


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
