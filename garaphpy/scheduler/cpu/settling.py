"""The CPU engine's settling features (Garaph section 4, beyond the paper).

:class:`Settling` owns what a run of a program final once set keeps about
its settled vertices (early exit: the settled flags and bitmap, the in-edges
left unsettled, Beamer's direction inputs), the whole-CSC settling pull and
the settling push, the floor a pull skips below (``CpuPlan.floor_skip``),
the union-find start (``CpuPlan.union_find_start``) and the pointer jumping
over labels (``CpuPlan.shortcut_labels``).  :class:`~garaphpy.scheduler.cpu.engine.CpuEngine`
forwards its read-only names.
"""

from __future__ import annotations

import time

import numpy as np

from ... import config
from ..._numba_setup import parallel_section
from ...kernels import cpu as kernels
from ...kernels import union_find
from ...kernels.cpu.arguments import apply_context
from ...kernels.cpu_program import CpuProgram
from .. import decisions
from ..frontier import Frontier
from ..cpu_state import GraphArrays, RunState, one_initial_value
from ..plan import CpuPlan
from ..records import IterationRecord
from . import team


class Settling:
    """The settled vertices of a run with early exit, the floor skip, the
    union-find start and the shortcut labels, as the plan says.

    Parameters
    ----------
    arrays, compiled, state, plan :
        The engine's.
    stats : numpy.ndarray
        The engine's statistics (L1 change, activations), written in place.
    all_vertices : callable
        0..|V|-1, made once per run.
    """

    def __init__(self, arrays: GraphArrays, compiled: CpuProgram, state: RunState,
                 plan: CpuPlan, stats: np.ndarray, all_vertices):
        self.arrays = arrays
        self.compiled = compiled
        self.state = state
        self.plan = plan
        self.threads = plan.threads
        self.stats = stats
        self.all_vertices = all_vertices
        #: rho of section 4.2: k when pages come from secondary storage
        self.rho = arrays.page_source.rho
        #: pulls skip settled vertices and stop at the activating in-edge
        #: (``plan.early_exit``); ``settled`` marks the vertices once active,
        #: ``unsettled_edges[0]`` counts the in-edges of the others
        self.early_exit = plan.early_exit
        #: the vertices a whole-CSC pull (``plan.whole_settling_pull``) activates
        self.settling_found = None
        #: the frontier such a pull made last, and its out-degree sum
        self.counted_frontier = None
        self.found_out_edges = np.zeros(1, np.int64)
        self.settled = np.zeros(1, np.bool_)
        #: the program's initial values, made by the first :meth:`find_settled`
        #: where the state found no one initial value
        self._initial_values = None
        self._initial_value = None      # the one initial value of every non-source
        self._initially_active = None
        #: ``settled`` packed at each pull's start, with early exit
        self.settled_bits = np.zeros(0, np.uint64)
        #: which vertices have in-edges, packed alike, for the whole-CSC pulls
        #: (vertices without any are passed over)
        self.in_edge_bits = np.zeros(0, np.uint64)
        self.unsettled_edges = np.zeros(1, np.int64)
        #: pulls skip the vertices as good as the best source (``plan.floor_skip``):
        #: kernels.FLOOR_MIN or FLOOR_MAX, 0 when not; ``floor[0]``, this pull's floor;
        #: ``floor_now``, this pull's mode (0 when it has no floor)
        self.floor_mode = 0
        if plan.floor_skip:
            self.floor_mode = kernels.FLOOR_MAX if plan.larger_first else kernels.FLOOR_MIN
        self.floor = np.zeros(1, state.values.dtype)
        self.floor_now = 0
        self.unsettled_delta = np.zeros(1, np.int64)     # what a notify-pull settled
        self.pulled_last = False
        self.previous_active = 0
        #: iterations end with pointer jumping over the labels (``plan.shortcut_labels``)
        self.shortcut = plan.shortcut_labels
        #: the first iteration starts from a union-find's labels
        #: (``plan.union_find_start``); False once done
        self.union_find_pending = plan.union_find_start
        self._set_up()

    def _set_up(self) -> None:
        """The arrays and the compiled kernels of the plan's settling paths."""
        plan = self.plan
        if plan.early_exit:
            self._set_up_early_exit()
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
                union_find.link_rounds_ahead(one_vertex, arrays.out_targets[:0], parent, 0, 2)
                union_find.write_labels(parent, arrays.attrs[3][:1],
                                        self.state.values[:1].copy())

    def start_from_union_find(self, record: IterationRecord) -> None:
        """The union-find start, before the run's first iteration (once;
        not in a run resumed from a checkpoint)."""
        if self.union_find_pending:
            self.union_find_pending = False
            if record.iteration == 0:
                self._union_find_start(record)

    def after_iteration(self, pulled: bool, active_vertices: int) -> None:
        """Note whether the iteration run pulled, and its frontier's size
        (Beamer's rule reads them: :func:`decisions.settling_direction`)."""
        self.pulled_last = pulled
        self.previous_active = active_vertices

    def pack_settled(self) -> None:
        """``settled`` packed into ``settled_bits``, at a pull's start."""
        kernels.pack_flags(self.settled, self.settled_bits)

    def settle_frontier(self) -> None:
        """The frontier a whole pull found, settled (its in-edges no longer counted)."""
        self.unsettled_edges[0] -= kernels.mark_settled(
            self.state.frontier, self.settled, self.state.claimed, self.arrays.in_offsets)

    def begin_floor(self, record: IterationRecord) -> int:
        """This pull's floor (``floor_now``): the floor mode where a source
        sets one (:meth:`take_floor`), else 0."""
        self.floor_now = 0
        if self.floor_mode and self.take_floor(record):
            self.floor_now = self.floor_mode
        return self.floor_now

    def _set_up_early_exit(self) -> None:
        """Pull with early exit (a program final once set, run synchronously:
        ``plan.early_exit``).  The settled vertices are found from the state
        as it stands (a run's start; a restored checkpoint finds them again)."""
        arrays = self.arrays
        self.find_settled(self.plan.initially_active)
        self.settled_bits = arrays.buffers.zeros((arrays.num_vertices + 63) // 64, np.uint64)
        if self.plan.whole_settling_pull:
            # mapped now, by every thread, not by the first pull's writes
            self.settling_found = arrays.buffers.zeros(arrays.num_vertices, np.int64,
                                                       mapped=True)
            store = arrays.page_source.store
            if arrays.in_offsets is store.in_offsets:      # the store's: made once for its runs
                self.in_edge_bits = store.in_edge_bits
            else:
                in_offsets = arrays.in_offsets
                self.in_edge_bits = np.empty_like(self.settled_bits)
                with parallel_section():
                    kernels.pack_flags(in_offsets[1:] != in_offsets[:-1], self.in_edge_bits)

    def _union_find_start(self, record: IterationRecord) -> None:
        """Every vertex's label from Afforest over the store's CSR
        (:func:`~garaphpy.kernels.union_find.component_roots`, the partitions'
        kernel too), recorded as ``decisions["cpu_union_find_start"]``.

        Its first rounds read the CSR, not the first out-edges laid out one
        row a round as a partition's start reads them
        (:func:`~garaphpy.kernels.union_find.sampled_edges`): a partition
        lays them out at set-up, beside the CSR it makes there; here the
        CSR is the store's, and a layout made in the start costs more than
        its ordered reads save (1.12x, 1.18x and 0.99x the CSR start on
        rmat:20 made symmetric, grid:1000x1000 and USA-road-NE; dev VM, 2
        threads, 2026-12-05).
        """
        started = time.perf_counter()
        arrays, state = self.arrays, self.state
        roots, skipped = union_find.component_roots(arrays.out_offsets, arrays.out_targets)
        dropped = union_find.write_labels(roots, arrays.attrs[3], state.values)
        if state.synchronous:
            state.next[:] = state.values
        decisions.note(record, "cpu_union_find_start", True, dropped=int(dropped),
                       largest_root=skipped, seconds=time.perf_counter() - started)

    def take_floor(self, record: IterationRecord, **inputs) -> bool:
        """``floor[0]``: the best committed value of a vertex with out-edges (a pull
        improves values only from sources at least as bad as it), noted in the
        record; whether there is such a vertex."""
        found = bool(kernels.best_source_value(self.state.values, self.arrays.attrs[0],
                                               self.floor_mode, self.floor))
        decisions.note(record, "cpu_floor_skip", found, floor=self.floor[0].item(), **inputs)
        return found

    def shortcut_labels(self, record: IterationRecord) -> None:
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
            dropped += kernels.shortcut_labels(self.all_vertices(), state.values, ids,
                                               state.active, True)
        decisions.note(record, "shortcut_labels", "all" if every else "sample",
                       sample_size=int(sample.size), sample_dropped=int(sample_dropped),
                       min_fraction=config.CPU_SHORTCUT_MIN_DROP,
                       vertices=n if every else int(sample.size), dropped=int(dropped))
        if every and dropped > sample_dropped:
            state.frontier = Frontier.of_flags(state.active, self.threads).ids

    def find_settled(self, initially_active: str) -> None:
        """settled = the vertices whose value left its initial one, the sources
        (every vertex where ``initially_active`` is ``"all"``), and the
        frontier; each claimed for good (the sparse notify passes them over);
        and the in-edges of the others counted (:meth:`_settle_from_values`)."""
        self._initially_active = initially_active
        if self.settled.size != self.arrays.num_vertices:
            self.settled = self.arrays.buffers.zeros(self.arrays.num_vertices, np.bool_)
        self._settle_from_values()

    def refresh_settled(self, pulled_last: bool, previous_active: int) -> None:
        """The settled vertices found again from the values, after another
        processor wrote them: a hybrid run's CPU about to run an iteration alone
        after the GPU's (:meth:`find_settled`'s rule).  ``pulled_last`` and
        ``previous_active``: whether the last iteration pulled, and its
        frontier's size, which Beamer's rule reads
        (:func:`decisions.settling_direction`)."""
        self._settle_from_values()
        self.pulled_last = bool(pulled_last)
        self.previous_active = int(previous_active)

    def _settle_from_values(self) -> None:
        """:meth:`find_settled`'s rule over the values as they stand, in parallel
        (:func:`kernels.settled_from_values`, then the frontier).  Where every
        vertex but the sources starts from one value, that value alone is
        compared (:func:`kernels.settled_from_value`): the state found it as
        it made the initial values (``RunState.initial_value``); else the
        initial values are made again here, once."""
        arrays, state = self.arrays, self.state
        is_source = arrays.attrs[4]
        if self._initial_values is None and self._initial_value is None:
            # the state's, found as it made the initial values; else they are made again
            self._initial_value = state.initial_value
            if self._initial_value is None:
                self._initial_values = np.empty_like(state.values)
                with parallel_section(), self.compiled.compiling():
                    self.compiled.kernels.init_values(arrays.attrs, arrays.num_vertices,
                                                      self._initial_values)
                self._initial_value = one_initial_value(self._initial_values, is_source)
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

    def settling_inputs(self, active_out_edges: int, forced: str) -> dict:
        return dict(active_out_edges=int(active_out_edges),
                    active_vertices=int(self.state.frontier.size),
                    unsettled_in_edges=int(self.unsettled_edges[0]),
                    num_vertices=self.arrays.num_vertices, pulled_last=self.pulled_last,
                    previous_active=self.previous_active, rho=self.rho, forced=forced)

    def pull_settling_whole(self, record: IterationRecord, aggregates: np.ndarray) -> None:
        """Beamer's bottom-up step in one launch over the whole CSC, in place, the
        vertices it activates settled and listed as the next frontier
        (:func:`garaphpy.kernels.cpu.pull_settling_whole`)."""
        arrays, compiled, state = self.arrays, self.compiled, self.state
        _, sources, weights = arrays.page_source.csc()
        unsettled = int(self.unsettled_edges[0])
        self.unsettled_delta[0] = 0
        state.frontier = compiled.kernels.pull_settling_whole(
            compiled.identity, (arrays.in_offsets, sources, arrays.edge_weights(weights)),
            state.values,
            apply_context(arrays.attrs, aggregates, arrays.num_vertices, record.iteration),
            state.active,
            (self.settled, self.settled_bits, self.in_edge_bits, state.claimed,
             self.settling_found),
            (self.stats, self.unsettled_delta, self.found_out_edges), team.team_size(),
            (0, arrays.num_vertices))
        self.counted_frontier = state.frontier
        self.unsettled_edges[0] -= self.unsettled_delta[0]
        record.pages = len(arrays.pages)
        record.updated_vertices = arrays.num_vertices
        # the in-edges of the vertices not settled: what it read at most
        record.edges_processed = unsettled

    def push_settling(self, record: IterationRecord, prefix, aggregates: np.ndarray) -> None:
        """Beamer's top-down step (:func:`garaphpy.kernels.cpu.push_settling`): the
        record's ``edges_processed`` are the frontier's out-edges, its
        ``updated_vertices`` the vertices written (those a notify lists)."""
        arrays, compiled, state = self.arrays, self.compiled, self.state
        self.unsettled_delta[0] = 0
        written, state.frontier = compiled.kernels.push_settling(
            compiled.identity, (state.frontier, prefix),
            (arrays.out_offsets, arrays.out_targets, arrays.weights, arrays.in_offsets),
            (state.values, state.next),
            apply_context(arrays.attrs, aggregates, arrays.num_vertices, record.iteration),
            self.threads * config.CPU_CHUNKS_PER_THREAD, self.stats,
            (self.settled, state.claimed, self.unsettled_delta))
        self.unsettled_edges[0] -= self.unsettled_delta[0]
        if state.synchronous:
            kernels.commit_vertices(written, state.next, state.values)
        record.updated_vertices = int(written.size)
        record.edges_processed = int(prefix[-1])

    def find_settled_again(self) -> None:
        """:meth:`find_settled` with the run's start as first found (a
        restored checkpoint's values)."""
        self.find_settled(self._initially_active)
