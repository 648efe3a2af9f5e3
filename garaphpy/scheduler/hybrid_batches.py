"""A hybrid run's batches of iterations and its division of pages (Garaph section 5.1).

:class:`HybridBatches` is the part of
:class:`~garaphpy.scheduler.hybrid_driver.HybridDriver` that hands
iterations one processor would run alone to that processor's batch (the
GPU's device loop, the CPU's sparse notify-pulls or steps in buckets of
values), one policy decision covering them, and that decides whether the
CPU joins an iteration (the tail rule, or the policy's plan over the pages'
prices).  Like the driver it speaks to the processors through
:class:`~garaphpy.scheduler.processors.Processor` alone.
"""

from __future__ import annotations

import time

from . import decisions
from .policy import Observation
from .records import IterationRecord


class HybridBatches:
    """Batches and page division of :class:`~garaphpy.scheduler.hybrid_driver.HybridDriver`
    (a mixin: the driver holds the state it reads)."""

    def iterate_batch(self, first_iteration: int, max_steps: int, tolerance, active_out_edges: int,
                      direction: str = "auto") -> list[IterationRecord]:
        """Iterations that the GPU would run alone go to its device loop
        (:meth:`_device_loop_batch`), those the CPU would run alone to its
        batch (:meth:`_cpu_batch`); the rest are taken one by one (an empty
        list: nothing was done).  First the per-run choice, where due
        (:meth:`~garaphpy.scheduler.run_choice.RunAlone._choose_processors`):
        a processor it runs alone takes the iterations in its own batch."""
        if self._choose_processors(first_iteration, max_steps, active_out_edges) != "both":
            return self._alone_batch(first_iteration, max_steps, tolerance, active_out_edges,
                                     direction)
        return (self._device_loop_batch(first_iteration, max_steps, tolerance,
                                        active_out_edges, direction)
                or self._cpu_batch(first_iteration, max_steps, tolerance, active_out_edges,
                                   direction))

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
                and self.gpu.takes_batch(first_iteration, active_out_edges)):
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
        self._note_choice(first)
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
                and max_steps >= 1 and cpu.takes_batch(first_iteration, active_out_edges)):
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
        self._note_choice(first)
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
        bus = self.gpu.bus_rate()
        return {"cpu": [policy.page_seconds("cpu", edges) for edges in self.page_edges],
                "gpu": [policy.page_seconds("gpu", edges, bus_bytes, bus)
                        for edges, bus_bytes in zip(self.page_edges, self.page_bus_bytes)]}

