"""A hybrid run's per-run choice: the GPU alone, the CPU alone or both (Garaph section 5.1).

Garaph's alpha (section 5.1) chooses per iteration between the CPU alone and
both processors, on the iteration's costs.  It cannot see that finishing the
run on one processor alone may cost less than the sum of the iterations'
best choices: the CPU alone starts connected components on a symmetric
graph from a union-find (one iteration where label propagation takes as
many as the graph's diameter), shortcuts labels and runs its sparse
iterations in batches; the GPU alone runs its iterations in its device loop,
and starts connected components from a union-find of its own where its
pages are resident;
and either alone pays the host nothing per iteration for deciding and
combining.  Where the store's out-edge CSR is not yet in host memory (the
storage tier, Garaph section 2.2), the CPU alone would read it on first
touch, which the GPU alone, its pages read at its set-up, does not.  So
before the first iteration, and again at the end of each stretch of
iterations or when the frontier crosses the cost model's switch point, the
hybrid driver estimates the time to finish the run each way
(:meth:`RunChoice.estimate`) and commits to the cheapest
(:func:`~garaphpy.scheduler.decisions.run_processors`), the choice and its
inputs recorded as ``decisions["run_processors"]`` in the first record it
covers.

:class:`RunAlone` is the part of
:class:`~garaphpy.scheduler.hybrid_driver.HybridDriver` that runs a chosen
processor alone: whole stretches to that processor's own loop (the GPU's
device loop and its own iterations, the CPU's batches and its own
iterations, on an engine planned for the CPU alone where the run has one:
:class:`CpuAlone`), as the single processor's run would, the driver's own
work reduced to handing over the vertex data at a switch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from .. import config
from ..storage import residency
from . import decisions
from .frontier import Frontier
from .policy import HybridPolicy, Observation
from .processors import CpuProcessor
from .records import IterationRecord
from .single_driver import SingleDriver


def shared_iteration_seconds(t_pull: float, t_gpu: float, cpu_overhead: float) -> float:
    """A dense iteration shared at both processors' full rates (Garaph section
    5.1), the CPU paying its fixed cost c_0 first: both end at
    T_GPU (T_pull + c_0) / (T_pull + T_GPU), never later than the GPU alone."""
    return min(t_gpu, t_gpu * (t_pull + cpu_overhead) / (t_pull + t_gpu))


@dataclass
class CpuAlone:
    """What a hybrid run knows of its CPU alone, and how to make its engine.

    Attributes
    ----------
    num_vertices : int
    in_degree_skew : float or None
        The graph's (:func:`decisions.in_degree_skew`): a mesh or not
        (:func:`decisions.expected_iterations`).
    union_find_start : bool
        The CPU alone's plan starts from a union-find's labels
        (:func:`decisions.union_find_start`): its run ends after one pull.
    gpu_union_find_start : bool
        The GPU's plan starts its first iteration alone from a union-find's
        labels on the device (:func:`decisions.gpu_union_find_start`): the
        GPU alone's run ends after one pull too.
    build : callable or None
        Makes the CPU engine planned for the CPU alone (sharing the run's
        compiled program and graph arrays), its frontier the run's first;
        None: the CPU alone runs on the hybrid run's CPU engine.
    edge_arrays : tuple of arrays
        What the CPU alone reads that the GPU alone does not (the out-edge
        CSR of its notifications and union-find start), mapped from the
        store's files: the part not in host memory
        (:func:`~garaphpy.storage.residency.cold_bytes`) is read from storage
        the first time it is touched.  Empty: nothing priced.
    read_speed : callable or None
        The storage's read speed, bytes a second; called only where some of
        ``edge_arrays`` is not in host memory.
    """

    num_vertices: int
    in_degree_skew: float | None = None
    union_find_start: bool = False
    build: Callable | None = None
    gpu_union_find_start: bool = False
    edge_arrays: tuple = ()
    read_speed: Callable[[], float] | None = None

    def cold_read_seconds(self) -> tuple[int | None, float]:
        """(bytes, seconds): what the CPU alone would read of :attr:`edge_arrays`
        from storage now, at :attr:`read_speed` (no bytes where the kernel
        cannot say which are resident: none priced)."""
        if not self.edge_arrays or self.read_speed is None:
            return 0, 0.0
        cold = residency.cold_bytes(self.edge_arrays)
        if not cold:
            return cold, 0.0
        return cold, cold / self.read_speed()


class RunChoice:
    """The per-run choice of one hybrid run, and when to make it again.

    Parameters
    ----------
    policy : HybridPolicy
        Its cost model gives each processor's iteration cost.
    cpu_alone : CpuAlone, optional
        The graph's shape and the CPU alone's shortcuts (None: neither known).
    """

    def __init__(self, policy: HybridPolicy, cpu_alone: CpuAlone | None = None):
        self.policy = policy
        self.cpu_alone = cpu_alone
        #: the choice in force: "both" until the first is made
        self.choice = "both"
        self.decided = False
        self.stretch_end = 0
        self.switch_point = None
        self.cpu_side = False
        self.stretch = config.HYBRID_RUN_FIRST_STRETCH
        #: the host's own seconds per iteration both may share, measured
        self.dispatch_seconds = None
        #: an iteration whose pages both processors pulled, measured whole
        self.split_seconds = None

    @staticmethod
    def applies(policy: HybridPolicy, page_done) -> bool:
        """Whether a run's policy lets it choose per run
        (:attr:`HybridPolicy.chooses_per_run`) and no hook follows each page
        (checkpoints inside asynchronous iterations)."""
        return policy.chooses_per_run and page_done is None

    def due(self, iteration: int, active_fraction: float) -> bool:
        """Whether the choice is made (again) before ``iteration``: the first
        time, at the stretch's end, or when the frontier crossed the switch
        point since the last."""
        if not self.decided or iteration >= self.stretch_end:
            return True
        point = self.switch_point
        return point is not None and (active_fraction < point) != self.cpu_side

    def observe_dispatch(self, seconds: float) -> None:
        """The host's own time in an iteration both processors were offered."""
        self.dispatch_seconds = self.policy.smooth(self.dispatch_seconds, seconds)

    def observe_split(self, seconds: float) -> None:
        """The whole time of an iteration whose pages both processors pulled
        (synchronizing and combining included): what sharing measured, in
        place of the model's."""
        self.split_seconds = self.policy.smooth(self.split_seconds, seconds)

    def estimate(self, iteration: int, active_fraction: float, rho: float, steps_left: int,
                 cpu_sync_seconds: float = 0.0, gpu_sync_seconds: float = 0.0,
                 gpu_loop: bool = False, join_seconds: float = 0.0,
                 gpu_dense: bool = False) -> dict:
        """The estimated time to finish the run each way from ``iteration``, and
        the choice (:func:`decisions.run_processors`); the entry to record
        (inputs and ``"choice"``), its ``"switch_point"`` the frontier share at
        which the cheaper processor of an iteration changes.

        Parameters
        ----------
        iteration : int
        active_fraction, rho : float
            f and rho now.
        steps_left : int
            The most iterations the run may still take.
        cpu_sync_seconds, gpu_sync_seconds : float
            Bringing that processor's copy of the vertex data up to date.
        gpu_loop : bool
            The GPU alone would run the iteration in its device loop.
        gpu_dense : bool
            The GPU would pull every page whatever the frontier (T_GPU).
        join_seconds : float
            What a CPU joining an iteration costs the host (copies, combining).

        The CPU alone also pays, once, its edges not yet in host memory
        (:meth:`CpuAlone.cold_read_seconds`; both processors too where the
        CPU takes their iterations): a GPU that holds the pages has read
        them at its set-up, the CPU's out-edge CSR is read on first touch.
        """
        policy = self.policy
        shape = self.cpu_alone
        dispatch = (config.HYBRID_DISPATCH_SECONDS if self.dispatch_seconds is None
                    else self.dispatch_seconds)
        # the first choice is free; a later one must win by the margin
        current = self.choice if self.decided else None
        entry = {"iteration": iteration, "active_fraction": active_fraction,
                 "current": current, "cpu_sync_seconds": cpu_sync_seconds,
                 "gpu_sync_seconds": gpu_sync_seconds, "gpu_loop": gpu_loop,
                 "gpu_dense": gpu_dense,
                 "dispatch_seconds": dispatch, "join_seconds": join_seconds,
                 "split_seconds": self.split_seconds,
                 "union_find_start": bool(shape and shape.union_find_start and iteration == 0),
                 "gpu_union_find_start": bool(shape and shape.gpu_union_find_start
                                              and iteration == 0)}
        t_pull, t_gpu = policy.t_pull, policy.t_gpu
        if t_pull is None or t_gpu is None:
            entry.update(cpu_seconds=None, gpu_seconds=None, both_seconds=None,
                         iterations=None, switch_point=None)
            entry["choice"] = decisions.run_processors(None, None, None, self.choice)
            return entry
        notify = t_pull if policy.t_notify is None else policy.t_notify

        def cpu_iteration(f: float) -> float:
            return decisions.cpu_iteration_seconds(f, f, rho, notify, t_pull,
                                                   policy.cpu_overhead, 0.0)

        def gpu_iteration(f: float) -> float:
            if gpu_loop:
                return min(policy.t_loop, t_gpu)
            return t_gpu if gpu_dense else policy.gpu_iteration_seconds(f)

        f = active_fraction
        cpu_each, gpu_each = cpu_iteration(f), gpu_iteration(f)
        split = (shared_iteration_seconds(t_pull, t_gpu, policy.cpu_overhead) + join_seconds
                 + dispatch if self.split_seconds is None else self.split_seconds)
        both_each = min(min(cpu_each, gpu_each) + dispatch, split)
        iterations = min(decisions.expected_iterations(
            shape.num_vertices if shape else None, policy.num_edges or 0,
            shape.in_degree_skew if shape else None, done=iteration), float(steps_left))
        if entry["union_find_start"]:
            # the union-find's pass, then one pull that confirms its labels
            cpu_total = (config.HYBRID_UNION_FIND_PULLS * t_pull + t_pull
                         + policy.cpu_overhead)
        else:
            cpu_total = iterations * cpu_each
        gpu_total = iterations * gpu_each
        if entry["gpu_union_find_start"]:
            # the same on the device, priced in the GPU's pulls over every page
            gpu_total = min(gpu_total, (config.HYBRID_UNION_FIND_PULLS + 1) * t_gpu)
        cold_bytes, cold_seconds = shape.cold_read_seconds() if shape else (0, 0.0)
        # both processors read the cold edges too where the CPU takes the iterations
        both_reads = cold_seconds if cpu_each < gpu_each else 0.0
        entry.update(iterations=iterations, cpu_iteration_seconds=cpu_each,
                     gpu_iteration_seconds=gpu_each, both_iteration_seconds=both_each,
                     cpu_cold_bytes=cold_bytes, cpu_read_seconds=cold_seconds,
                     cpu_seconds=cpu_total + cpu_sync_seconds + cold_seconds,
                     gpu_seconds=gpu_total + gpu_sync_seconds,
                     both_seconds=iterations * both_each + both_reads,
                     switch_point=decisions.frontier_switch_point(cpu_iteration, gpu_iteration))
        entry["choice"] = decisions.run_processors(entry["cpu_seconds"], entry["gpu_seconds"],
                                                   entry["both_seconds"], current)
        return entry

    def commit(self, entry: dict, iteration: int) -> str:
        """Make ``entry``'s choice the one in force from ``iteration``, for a
        stretch (``config.HYBRID_RUN_FIRST_STRETCH`` iterations, then twice
        the last, at most ``config.HYBRID_RUN_STRETCH_ITERATIONS``) or until
        the frontier crosses its switch point; the entry gets the stretch's
        end."""
        self.choice = entry["choice"]
        self.decided = True
        self.stretch_end = iteration + self.stretch
        self.stretch = min(2 * self.stretch, config.HYBRID_RUN_STRETCH_ITERATIONS)
        self.switch_point = entry.get("switch_point")
        self.cpu_side = (self.switch_point is not None
                         and entry["active_fraction"] < self.switch_point)
        entry["stretch_end"] = self.stretch_end
        return self.choice


class Stretch:
    """Iterations a hybrid run hands to one processor alone, run by the
    iteration loop on that processor's own driver (the code of its mode,
    its batches included) until :attr:`end`, or until the frontier crosses
    the choice's switch point, where the choice is made again.

    Parameters
    ----------
    owner : RunAlone
        The hybrid driver that handed the stretch over.
    processor : Processor
        The processor that runs it.
    driver : SingleDriver
        That processor's own driver.
    end : int
        The iteration the stretch ends before.
    switch_point : float or None
        The frontier share at which the cheaper processor changes.
    cpu_side : bool
        Whether the frontier was below the switch point when the choice was made.
    """

    def __init__(self, owner: RunAlone, processor, driver: SingleDriver, end: int,
                 switch_point: float | None, cpu_side: bool):
        self.owner = owner
        self.processor = processor
        self.driver = driver
        self.end = end
        self.switch_point = switch_point
        self.cpu_side = cpu_side
        self.num_edges = driver.num_edges

    def crossed(self, active_out_edges: int) -> bool:
        """Whether the frontier, of ``active_out_edges`` out-edges, crossed the
        switch point since the choice (:meth:`RunChoice.due`)."""
        point = self.switch_point
        return point is not None and (
            decisions.active_fraction(active_out_edges, self.num_edges) < point) != self.cpu_side

    def note(self, first: IterationRecord) -> None:
        """The stretch's first record gets the choice's entry and the copies made
        for it."""
        self.owner.stretch_began(first)

    def done(self, records: list[IterationRecord]) -> None:
        """The stretch's iterations, ``records``, are over."""
        self.owner.stretch_ended(self.processor, records)


class RunAlone:
    """The hand-over of a hybrid run to one processor alone (a mixin of
    :class:`~garaphpy.scheduler.hybrid_driver.HybridDriver`: the driver holds
    the state it reads: ``cpu``, ``gpu``, ``vertex_state``, ``policy``,
    ``run_choice``, ``cpu_alone``)."""

    #: the processor over the CPU-alone engine (:class:`CpuAlone`), once made
    alone_cpu = None
    #: whether that engine holds the run's current vertex data
    alone_holds = False
    #: the next iteration's frontier prefix is stale (the holder just changed)
    _prefix_stale = False
    #: an entry of the per-run choice not yet recorded
    _choice_entry = None
    #: the last iteration run alone, not yet observed by the policy:
    #: (record, processor, seconds); one is observed a stretch
    _unobserved = None

    # -- stretches on one processor ---------------------------------------------------------
    def stretch(self, iteration: int, steps_left: int, active_out_edges: int) -> Stretch | None:
        """Where the per-run choice (made again where due) runs one processor
        alone from ``iteration``: the :class:`Stretch` the iteration loop runs
        on that processor's own driver, its copy of the vertex data brought up
        to date first; None where both processors share the iterations."""
        if self._choose_processors(iteration, steps_left, active_out_edges) == "both":
            return None
        processor = self._ready_alone()
        # the processor's writes make its copy the current one from the first iteration on
        if processor is self.gpu:
            self.vertex_state.written_by("gpu")
            self._settled_current = False
        elif processor is self.cpu:
            self.vertex_state.written_by("cpu")
        run_choice = self.run_choice
        return Stretch(self, processor, SingleDriver(processor), run_choice.stretch_end,
                       run_choice.switch_point, run_choice.cpu_side)

    def stretch_began(self, first: IterationRecord) -> None:
        """The first record of a stretch: the choice that made it, and the copies
        made for it."""
        self._note_choice(first)
        first.bytes_to_device += self._synced_to_device
        first.bytes_to_host += self._synced_to_host
        self._synced_to_device = self._synced_to_host = 0

    def stretch_ended(self, processor, records: list[IterationRecord]) -> None:
        """After a stretch on ``processor``: Beamer's inputs for the CPU's settled
        vertices, and the stretch's last iteration for the policy's cost model
        (one observation a stretch)."""
        if not records:
            return
        last = records[-1]
        self._last_iteration = (last.direction == "pull", last.active_vertices)
        if processor is self.gpu and "device_loop" in last.decisions:
            self.policy.observe(Observation("hybrid", "device-loop", last.active_fraction,
                                            self.rho, self.num_edges,
                                            gpu_iteration_seconds=last.seconds))
        else:
            self.policy.observe(self._alone_observation(last, processor, last.seconds))

    # -- the choice -----------------------------------------------------------------------
    def _choose_processors(self, iteration: int, steps_left: int, active_out_edges: int) -> str:
        """The per-run choice in force for ``iteration`` (made again where due:
        :meth:`RunChoice.due`); a change of processors hands the vertex data over."""
        run_choice = self.run_choice
        if run_choice is None or not RunChoice.applies(self.policy, self.page_done):
            return "both"
        f = decisions.active_fraction(active_out_edges, self.num_edges)
        if not run_choice.due(iteration, f):
            return run_choice.choice
        if self._unobserved is not None:
            self.policy.observe(self._alone_observation(*self._unobserved))
            self._unobserved = None
        cpu_sync, gpu_sync = self._sync_seconds_now()
        loop = bool(self.gpu.takes_batch(iteration, active_out_edges))
        dense = not loop and not self.gpu.iterates_sparse(iteration, active_out_edges)
        join = self.policy.join_seconds
        if join is None:
            join = self.vertex_state.download_seconds
        before = run_choice.choice
        entry = run_choice.estimate(iteration, f, self.rho, steps_left, cpu_sync, gpu_sync,
                                    gpu_loop=loop, join_seconds=join, gpu_dense=dense)
        after = run_choice.commit(entry, iteration)
        if after != before:
            entry["handed_over_bytes"] = self._hand_over(after, iteration, entry)
        self._choice_entry = entry
        return after

    def _sync_seconds_now(self) -> tuple[float, float]:
        """(CPU, GPU): bringing each one's copy up to date now (the CPU-alone
        engine's holding the data costs the GPU an upload of the values)."""
        cpu_sync, gpu_sync = self.vertex_state.sync_seconds()
        if self.alone_holds:
            return 0.0, max(gpu_sync, self.vertex_state.upload_seconds)
        return cpu_sync, gpu_sync

    def _note_choice(self, record: IterationRecord) -> None:
        """The per-run choice made for ``record``'s iteration, in its decisions."""
        if self._choice_entry is not None:
            entry, self._choice_entry = self._choice_entry, None
            decisions.note(record, "run_processors", entry.pop("choice"), **entry)

    # -- handing the vertex data over ------------------------------------------------------
    def _hand_over(self, after: str, iteration: int, entry: dict) -> int:
        """The vertex data moved for the choice ``after``, made before
        ``iteration``: into the CPU-alone engine (none before the first
        iteration: the engine starts from the run's first frontier), or from
        it back to the hybrid run's copies; ``entry``, the choice's, gets
        whether the CPU-alone engine runs it.  Returns the bytes moved."""
        moved = 0
        if self.alone_holds and after == "gpu":
            # the GPU's copy alone: the host's is brought up to date when it is needed
            values, frontier = self.alone_cpu.checkpoint_state()
            self.gpu.restore_checkpoint(values, Frontier.of_ids(frontier, values.size))
            self.vertex_state.written_by("gpu")
            self._settled_current = False
            self.alone_holds = False
            moved = values.nbytes + frontier.nbytes
        elif self.alone_holds and after == "both":
            values, frontier = self.alone_cpu.checkpoint_state()
            self.restore_checkpoint(values, frontier)
            moved = values.nbytes + frontier.nbytes
        elif after == "cpu" and self._uses_cpu_alone_engine(entry):
            fresh = self.alone_cpu is None and iteration == 0
            if self.alone_cpu is None:
                self.alone_cpu = CpuProcessor(self.cpu_alone.build())
            if not fresh:
                values, frontier = self.checkpoint_state()
                self.alone_cpu.restore_checkpoint(values, frontier)
                moved = values.nbytes + frontier.nbytes
            self.alone_holds = True
            self._release_worker_team(wait=True)
        self._prefix_stale = after != "both"
        return moved

    def _uses_cpu_alone_engine(self, entry: dict) -> bool:
        """Whether the CPU alone runs on its own engine (made now where it is
        not yet: :func:`decisions.cpu_alone_engine`), noted in ``entry``."""
        shape = self.cpu_alone
        if shape is None or shape.build is None:
            return False
        if self.alone_cpu is not None:
            entry["cpu_alone_engine"] = {"made": True, "choice": True}
            return True
        build = config.HYBRID_CPU_ALONE_BUILD_COPIES * self.vertex_state.download_seconds
        choice = decisions.cpu_alone_engine(entry["union_find_start"], entry.get("cpu_seconds"),
                                            build)
        entry["cpu_alone_engine"] = {"build_seconds": build, "choice": choice}
        return choice

    def _alone(self):
        """The processor the choice runs alone: the GPU, or the CPU (its own
        engine where the run has one)."""
        if self.run_choice.choice == "gpu":
            return self.gpu
        return self.alone_cpu if self.alone_holds else self.cpu

    # -- iterations on one processor --------------------------------------------------------
    def _alone_batch(self, first_iteration: int, max_steps: int, tolerance,
                     active_out_edges: int, direction: str) -> list[IterationRecord]:
        """The chosen processor's own batch (the GPU's device loop, the CPU's
        batches), as its run alone would take it, to the stretch's end at
        most (an empty list: none)."""
        processor = self._ready_alone()
        steps = max(1, min(max_steps, self.run_choice.stretch_end - first_iteration))
        looped = time.perf_counter()
        records = processor.iterate_batch(first_iteration, steps, tolerance,
                                          active_out_edges, direction)
        if not records:
            return []
        seconds = time.perf_counter() - looped
        self._after_alone(records[-1], processor)
        first = records[0]
        self._note_choice(first)
        first.bytes_to_device += self._synced_to_device
        first.bytes_to_host += self._synced_to_host
        self._synced_to_device = self._synced_to_host = 0
        if processor is self.gpu:
            self.policy.observe(Observation(
                "hybrid", "device-loop", decisions.active_fraction(active_out_edges,
                                                                   self.num_edges),
                self.rho, self.num_edges, gpu_iteration_seconds=seconds / len(records)))
        return records

    def _alone_decide(self, record: IterationRecord, direction: str) -> None:
        """The chosen processor's own decisions for ``record``."""
        processor = self._ready_alone()
        record.mode = processor.name
        processor.decide(record, direction)
        self._note_choice(record)

    def _alone_iterate(self, record: IterationRecord, prefix) -> None:
        """The chosen processor's own iteration, its aggregates its own."""
        processor = self._alone()
        if self._prefix_stale:
            prefix, self._prefix_stale = None, False
        record.bytes_to_device += self._synced_to_device
        record.bytes_to_host += self._synced_to_host
        self._synced_to_device = self._synced_to_host = 0
        started = time.perf_counter()
        processor.iterate(record, prefix, processor.aggregates(record.iteration))
        self._unobserved = (record, processor, time.perf_counter() - started)
        self._after_alone(record, processor)

    def _ready_alone(self):
        """The chosen processor, its copy of the vertex data brought up to date
        (the bytes are added to the next record)."""
        processor = self._alone()
        if processor is self.gpu:
            self._release_worker_team()
            self._synced_to_device += self.vertex_state.make_device_current()
        elif processor is self.cpu:
            self._synced_to_host += self._ready_cpu_alone()
        return processor

    def _after_alone(self, last: IterationRecord, processor) -> None:
        """After one processor's iterations: whose copy is current, and what
        the CPU's settled vertices need."""
        if processor is self.gpu:
            self.vertex_state.written_by("gpu")
            self._settled_current = False
        elif processor is self.cpu:
            self.vertex_state.written_by("cpu")
        self._last_iteration = (last.direction == "pull", last.active_vertices)

    def _alone_observation(self, record: IterationRecord, processor,
                           seconds: float) -> Observation:
        """What a one-processor iteration tells the policy's cost model."""
        if processor is self.gpu:
            return Observation("hybrid", "pull", record.active_fraction, record.rho,
                               self.num_edges, gpu_edges=record.gpu_edges,
                               gpu_seconds=record.gpu_busy_seconds,
                               gpu_iteration_seconds=seconds)
        return Observation("cpu", record.direction, record.active_fraction, record.rho,
                           self.num_edges, cpu_edges=record.edges_processed,
                           cpu_seconds=seconds,
                           pull_fraction=record.edges_processed / max(self.num_edges, 1))

