"""The CPU engine's batches of sparse iterations (beyond Garaph's section 4).

:class:`SparseBatches` owns the iterations run many to a kernel call: small
notify-pulls one after another (``CpuPlan.sparse_batches``), settling steps
on kept threads (``CpuPlan.settle_rounds``), and the steps of a program run
in buckets of values (``CpuPlan.value_priority``, Meyer and Sanders'
delta-stepping as GAPBS runs it), pushed where the plan says
(``priority_push``, ``push_rounds``).
:class:`~garaphpy.scheduler.cpu.engine.CpuEngine` forwards its read-only names.
"""

from __future__ import annotations

import time

import numpy as np

from ... import config
from ..._numba_setup import parallel_section
from ...kernels import cpu as kernels
from ...kernels.cpu.arguments import apply_context
from ...kernels.cpu_program import CpuProgram
from .. import decisions
from ..cpu_state import GraphArrays, RunState
from ..plan import CpuPlan
from ..records import IterationRecord
from . import team
from .settling import Settling


class SparseBatches:
    """Sparse iterations many to a kernel call, and the buckets of values.

    Parameters
    ----------
    arrays, compiled, state, plan :
        The engine's.
    settling : Settling
        The run's settled vertices (read and counted by the steps).
    no_aggregates : numpy.ndarray
        The aggregates of a program without any.
    warm_up : callable
        The engine's :meth:`~garaphpy.scheduler.cpu.engine.CpuEngine.warm_up`.
    """

    mode = "cpu"

    def __init__(self, arrays: GraphArrays, compiled: CpuProgram, state: RunState,
                 plan: CpuPlan, settling: Settling, no_aggregates: np.ndarray, warm_up):
        self.arrays = arrays
        self.compiled = compiled
        self.state = state
        self.plan = plan
        self.settling = settling
        self.no_aggregates = no_aggregates
        self.warm_up = warm_up
        self.threads = plan.threads
        self.rho = arrays.page_source.rho
        self.early_exit = plan.early_exit
        #: whether this run may batch sparse iterations (``plan.sparse_batches``)
        self.batches = plan.sparse_batches
        #: whether sparse iterations push from the frontier (``plan.settling_push``)
        self.settles_by_push = plan.settling_push
        self.settle_rounds_failed = False
        self._degrees_match_cache = None
        #: sparse notify-pulls run one by one so far (batches start after
        #: ``config.CPU_SPARSE_BATCH_AFTER`` of them)
        self.sparse_singles = 0
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
        if plan.value_priority:
            self._set_up_value_priority()

    def _set_up_value_priority(self) -> None:
        """Take sparse iterations in buckets of values (a program declaring
        ``value_priority``, run asynchronously: ``plan.value_priority``),
        larger values first for a max sum.  The width is
        :func:`decisions.bucket_width`'s.  With ``plan.priority_push`` (a
        program declaring ``apply_keeps_best``), the steps small enough for
        one thread push over the frontier's out-edges
        (:func:`garaphpy.kernels.cpu.priority_iterations`); their edge values
        are then placed in the out-edges' order, once a graph: the store keeps
        them for its later runs in memory
        (:meth:`~garaphpy.storage.page_source.InMemoryPages.out_edge_values`).  With
        ``plan.push_rounds`` too every bucket is pushed in parallel rounds
        (:func:`garaphpy.kernels.cpu.priority_push_rounds`) until their
        threads fail to meet once; then as above."""
        arrays, plan = self.arrays, self.plan
        self.push = plan.priority_push
        self.push_rounds = plan.priority_push and plan.push_rounds
        self.push_weights = arrays.edge_weights(None)
        if self.push and arrays.reads_weights and arrays.num_edges:
            from ...kernels.gpu_subgraph import out_edge_values

            offsets = arrays.out_offsets
            self.push_weights = arrays.page_source.out_edge_values(
                lambda sources, weights: out_edge_values(offsets, [(sources, weights)],
                                                         weights.dtype))
        mean_edge_value = None
        if config.CPU_BUCKET_WIDTH is None and arrays.reads_weights and arrays.num_edges:
            _, _, weights = arrays.page_source.csc()
            mean_edge_value = kernels.total(weights) / arrays.num_edges
        self.bucket_width = decisions.bucket_width(
            config.CPU_BUCKET_WIDTH, mean_edge_value,
            arrays.num_edges / max(arrays.num_vertices, 1))
        self.pending = arrays.buffers.zeros(arrays.num_vertices, np.uint8)

    def _sparse_batch_takes(self, active_out_edges: int, direction: str) -> bool:
        """:func:`decisions.sparse_batch` on the next iteration, in a run that batches."""
        arrays = self.arrays
        chosen = decisions.settling_direction(**self.settling.settling_inputs(
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
        settle_rounds = self.bucket_width is None and self.settles_in_rounds()
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
        settle_rounds = settle_rounds and self.settles_in_rounds()
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
                    **self.settling.settling_inputs(edges, "auto"), "active_vertices": active,
                    "unsettled_in_edges": unsettled})
                self.settling.after_iteration(False, active)
            else:
                decisions.note(record, "direction", "notify-pull", f=f, rho=self.rho,
                               forced="auto", notify_pull=True)
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
                frontier, (arrays.out_offsets, arrays.out_targets, self.push_weights),
                state.values,
                apply_context(arrays.attrs, self.no_aggregates, arrays.num_vertices,
                              first_iteration),
                int(steps), (counters, changes), (float(self.bucket_width), self.larger_first),
                team.team_size())
            if taken >= 0:
                return left, taken
            self.push_rounds = False    # the threads did not meet: step by step from now on
            self.push_rounds_failed = True
        _, sources, weights = arrays.page_source.csc()
        return compiled.kernels.priority_iterations(
            compiled.identity, frontier, state.claimed,
            (arrays.out_offsets, arrays.out_targets, arrays.in_offsets, sources,
             arrays.edge_weights(weights)),
            state.values,
            apply_context(arrays.attrs, self.no_aggregates, arrays.num_vertices,
                          first_iteration),
            (arrays.num_edges, 1.0 / (config.NOTIFY_PULL_COST_FACTOR * self.rho),
             config.NOTIFY_DENSE_FACTOR),
            self._batch_schedule(steps), (counters, changes),
            (float(self.bucket_width), self.larger_first, self.pending, self.push,
             self.push_weights))

    def settles_in_rounds(self) -> bool:
        """Whether this run's batches of settling steps run on kept threads
        (:func:`decisions.cpu_settle_rounds`; off for good once their threads
        failed to meet)."""
        return self.plan.settle_rounds and not self.settle_rounds_failed

    def _sparse_iterations(self, frontier, first_iteration, steps, tolerance, counters,
                           changes):
        arrays, compiled, state = self.arrays, self.compiled, self.state
        if self.settles_in_rounds():
            left, taken = compiled.kernels.settle_push_rounds(
                compiled.identity, frontier,
                (arrays.out_offsets, arrays.out_targets, arrays.in_offsets, arrays.weights),
                (state.values, state.next, state.synchronous),
                apply_context(arrays.attrs, self.no_aggregates, arrays.num_vertices,
                              first_iteration),
                (int(steps), -np.inf if tolerance is None else float(tolerance),
                 float(config.CPU_SETTLING_PULL_FACTOR * self.rho),
                 decisions.round_serial_edges(self.threads)),
                (self.settling.settled, state.claimed, self.settling.unsettled_edges,
                 self.degrees_match()),
                (counters, changes), team.team_size())
            if taken >= 0:
                return left, taken
            self.settle_rounds_failed = True    # the threads did not meet: launches from now on
        _, sources, weights = arrays.page_source.csc()
        return compiled.kernels.sparse_iterations(
            compiled.identity, frontier, state.claimed,
            (arrays.out_offsets, arrays.out_targets, arrays.in_offsets, sources,
             arrays.edge_weights(weights)),
            (state.values, state.next, state.synchronous),
            apply_context(arrays.attrs, self.no_aggregates, arrays.num_vertices,
                          first_iteration),
            (arrays.num_edges, 1.0 / (config.NOTIFY_PULL_COST_FACTOR * self.rho),
             config.NOTIFY_DENSE_FACTOR, -np.inf if tolerance is None else float(tolerance),
             float(config.CPU_SETTLING_PULL_FACTOR * self.rho)),
            self._batch_schedule(steps), (counters, changes),
            (self.early_exit, self.settling.settled, self.settling.unsettled_edges,
             self.settles_by_push, self.degrees_match()))

    def _batch_schedule(self, steps: int) -> tuple:
        """The ``schedule`` group of the batch kernels: ``(max_steps,
        serial_edges, chunks, threads)``."""
        return (int(steps), decisions.serial_step_edges(self.threads),
                self.threads * config.CPU_CHUNKS_PER_THREAD, self.threads)

    def degrees_match(self) -> bool:
        """Whether every vertex has as many in-edges as out-edges (a symmetric
        graph: the settled in-edges are then counted from the out-degrees)."""
        if self._degrees_match_cache is None:
            out_degree, in_degree = self.arrays.attrs[0], self.arrays.attrs[1]
            self._degrees_match_cache = bool(np.array_equal(out_degree, in_degree))
        return self._degrees_match_cache

    def warm_up_batch(self) -> None:
        empty = np.zeros((0, len(kernels.SPARSE_COUNTERS)), np.int64)
        batch = self._priority_iterations if self.bucket_width is not None \
            else self._sparse_iterations
        with parallel_section():
            batch(np.zeros(0, np.int64), 0, 0, None, empty, np.zeros(0))
