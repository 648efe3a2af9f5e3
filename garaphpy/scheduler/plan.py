"""A run's plan: every choice that holds for the whole run, made once (Garaph sections 4-5).

:func:`garaphpy.run` validates its options, then makes a :class:`RunPlan`
from them, the graph, the program and the page source, by the rules of
:mod:`~garaphpy.scheduler.decisions`; the engines are built from the plan
and take no further switches.  The per-iteration choices (the direction,
the notify's form, the hybrid's mode and pages) stay with the engines and
the driver, which record them in each :class:`IterationRecord`.

The CPU's part is :class:`CpuPlan` (section 4's pull and notify-pull, with
the early exits, label shortcuts, buckets of values and fused pulls the
CPU engine adds to it, after Beamer, Afforest, delta-stepping and GAPBS):
each field a choice, each with the
entry (inputs and ``"choice"``) that :mod:`decisions` made it by in
:attr:`CpuPlan.entries`.  The GPU's part is
:class:`~garaphpy.scheduler.gpu.plan.GpuPlan`, made by
:func:`~garaphpy.scheduler.gpu.plan.plan_gpu` at the GPU engine's set-up
(its pages' plan needs what the vertex data takes on the device), and
joined to the run's plan as :attr:`RunPlan.gpu`.

Tests and benches compare a choice's two paths by turning it off
(``turned_off``, :func:`garaphpy.api.execute`): the choices that depend on it
are then made as they would be without it.  No configuration switch does.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import Any, Mapping

from .. import _numba_setup
from ..program import apply_reads_per_iteration
from . import decisions
from .records import json_value

#: The choices of :class:`CpuPlan` a test or bench may turn off (``turned_off``).
CPU_CHOICES = ("early_exit", "settling_push", "settle_rounds", "whole_settling_pull",
               "shortcut_labels", "union_find_start", "floor_skip", "value_priority",
               "priority_push", "push_rounds", "sparse_batches", "source_precompute",
               "float32_contributions", "fused_pull")

#: The choices of :class:`~garaphpy.scheduler.gpu.plan.GpuPlan` a test or bench may
#: turn off (``turned_off``), by the names of their entries where they have one.
GPU_CHOICES = ("gpu_precompute", "selective_transfers", "packed_pages", "compressed_pages",
               "pull_packed", "defer_selective_arrays", "gpu_push", "gpu_value_priority",
               "persistent_loop", "fused_push", "device_loop", "resident_selective",
               "prefetch_next_copies", "fused_launch",
               "selective_when_pays", "calibrate_transfer_rates", "settled_pages",
               "gpu_union_find_start")


#: The run's own choices a test or bench may turn off (``turned_off``): a hybrid
#: run's weighing of the GPU's set-up (:mod:`~garaphpy.scheduler.set_up_choice`).
RUN_CHOICES = ("gpu_set_up",)


@dataclass(frozen=True)
class CpuPlan:
    """The CPU engine's choices for one run (:func:`plan_cpu` makes them).

    Attributes
    ----------
    threads : int
        The run's CPU threads.
    synchronous : bool
    initially_active : {"all", "sources"}
        The program's; the settled vertices of a run with early exit start from it.
    larger_first : bool
        The program's sum is ``max`` (the floor and the buckets of values order by it).
    early_exit, settling_push, settle_rounds, whole_settling_pull : bool
        Pulls skip settled vertices (:func:`decisions.early_exit`); sparse steps
        push from the frontier (:func:`decisions.settling_push`), batched on
        kept threads (:func:`decisions.cpu_settle_rounds`); pulls run over the
        whole CSC in one launch (:func:`decisions.whole_settling_pull`).
    shortcut_labels, union_find_start, floor_skip : bool
        Pointer jumping after each iteration (:func:`decisions.shortcut_labels`),
        a union-find start (:func:`decisions.union_find_start`), the floor's
        skip (:func:`decisions.floor_skip`).
    value_priority, priority_push, push_rounds : bool
        Sparse iterations in buckets of values (:func:`decisions.value_priority`),
        pushed by one thread (:func:`decisions.cpu_priority_push`) or in rounds
        (:func:`decisions.cpu_push_rounds`); the last two only with the first.
    notify_pull : bool
        The program's notify-pull gives the pull's values
        (:func:`decisions.notify_pull_computes_pull`); without, every
        iteration pulls.
    sparse_batches : bool
        Sparse iterations may run many to one kernel call (:func:`decisions.sparse_batch`'s
        precondition: no aggregates, one CSC in host memory).
    source_precompute, float32_contributions, fused_pull : bool
        Pulls precompute the source-side gathers
        (:func:`decisions.precompute_source_gathers`), in float32
        (:func:`decisions.float32_contributions`), fused with the next
        pull's (:func:`decisions.fused_pull`).
    entries : Mapping
        Each choice's entry: its inputs and ``"choice"``, as recorded.
    """

    threads: int
    synchronous: bool
    initially_active: str = "all"
    larger_first: bool = False
    early_exit: bool = False
    settling_push: bool = False
    settle_rounds: bool = False
    whole_settling_pull: bool = False
    shortcut_labels: bool = False
    union_find_start: bool = False
    floor_skip: bool = False
    value_priority: bool = False
    priority_push: bool = False
    push_rounds: bool = False
    notify_pull: bool = True
    sparse_batches: bool = False
    source_precompute: bool = False
    float32_contributions: bool = False
    fused_pull: bool = False
    entries: Mapping = field(default_factory=lambda: types.MappingProxyType({}),
                             compare=False, repr=False)

    def entry(self, name: str) -> dict:
        """The recorded entry of choice ``name`` (``{"choice": ...}`` alone where
        it was set without inputs)."""
        return self.entries.get(name, {"choice": getattr(self, name)})

    def as_dict(self) -> dict:
        """Each choice's entry, by name, and the run's threads and execution, as
        JSON takes them."""
        return {"threads": self.threads, "synchronous": self.synchronous,
                **{name: json_value(dict(self.entry(name))) for name in CPU_CHOICES}}

    def describe(self) -> str:
        """One line: the choices taken."""
        taken = [name.replace("_", " ") for name in CPU_CHOICES if getattr(self, name)]
        return (f"CPU: {self.threads} thread(s), "
                f"{'sync' if self.synchronous else 'async'}; "
                + (", ".join(taken) if taken else "no optional path"))


@dataclass(frozen=True)
class RunPlan:
    """Every run-constant choice of one run (:func:`garaphpy.api.execute` makes it).

    Attributes
    ----------
    mode : {"cpu", "gpu", "hybrid"}
        The processors (``hybrid`` asked without a usable GPU is ``cpu``).
    execution : {"sync", "async"}
    direction : {"auto", "pull", "notify-pull"}
    max_iterations : int
    tolerance : float or None
    threads : int
    pages : str
        The page source's kind: ``"in memory"`` or ``"from storage"`` (with
        the read-ahead window and the disk speed it was sized by, where it was).
    cpu : CpuPlan or None
        The CPU engine's choices (None where the GPU runs alone).
    gpu : GpuPlan or None
        The GPU engine's choices, where it runs (made at the engine's set-up:
        :func:`~garaphpy.scheduler.gpu.plan.plan_gpu`).
    turned_off : frozenset of str
        The choices a test or bench turned off (empty in a user's run).
    distributed : dict or None
        A run partitioned over a Dask cluster (:mod:`garaphpy.distributed`):
        its scheduler, its partitions (vertex range, edges, worker), its
        checkpoint interval and its recoveries from lost workers.
    gpu_set_up : dict or None
        A hybrid run's choices, before anything is set up
        (:mod:`~garaphpy.scheduler.set_up_choice`), and their inputs: whether
        setting the GPU up can pay (``"choice"`` False ran the run on the CPU
        alone, ``mode`` ``"cpu"``) and, where it was set up, whether it runs
        alone (``"gpu_alone"`` True: ``mode`` ``"gpu"``); None where the run
        did not weigh them.
    """

    mode: str
    execution: str
    direction: str
    max_iterations: int
    tolerance: float | None
    threads: int
    pages: str = "in memory"
    cpu: CpuPlan | None = None
    gpu: Any = None
    turned_off: frozenset = frozenset()
    distributed: Any = None
    gpu_set_up: dict | None = None

    @property
    def synchronous(self) -> bool:
        return self.execution == "sync"

    def with_gpu(self, gpu_plan) -> "RunPlan":
        """This plan with the GPU engine's choices in :attr:`gpu`."""
        return dataclasses.replace(self, gpu=gpu_plan)

    def as_dict(self) -> dict:
        """The plan as JSON takes it."""
        gpu = self.gpu
        if gpu is not None and hasattr(gpu, "as_dict"):
            gpu = gpu.as_dict()
        return {"mode": self.mode, "execution": self.execution, "direction": self.direction,
                "max_iterations": self.max_iterations, "tolerance": self.tolerance,
                "threads": self.threads, "pages": self.pages,
                "cpu": None if self.cpu is None else self.cpu.as_dict(), "gpu": gpu,
                "turned_off": sorted(self.turned_off),
                "distributed": json_value(self.distributed) if self.distributed else None,
                "gpu_set_up": json_value(self.gpu_set_up) if self.gpu_set_up else None}

    def describe(self) -> str:
        """A few lines for people."""
        lines = [f"{self.mode} run, {self.execution}, direction {self.direction}, pages "
                 f"{self.pages}, at most {self.max_iterations} iterations"
                 + (f", tolerance {self.tolerance:g}" if self.tolerance is not None else "")]
        if self.cpu is not None:
            lines.append(self.cpu.describe())
        if self.gpu is not None:
            gpu = self.gpu.describe() if hasattr(self.gpu, "describe") else self.gpu
            lines.append(f"GPU: {gpu}")
        set_up = self.gpu_set_up
        if set_up is not None and not set_up["choice"]:
            lines.append(f"hybrid on the CPU alone: the run estimated at "
                         f"{set_up['cpu_seconds']:.3g} s, the GPU's at "
                         f"{set_up['gpu_seconds']:.3g} s (its set-up "
                         f"{set_up['gpu_set_up_seconds']:.3g} s)")
        elif set_up is not None and set_up.get("gpu_alone"):
            held = (f"({(set_up['page_bytes'] + set_up['vertex_bytes']) / 2**20:.1f} of "
                    f"{set_up['gpu_budget'] / 2**20:.1f} MiB with the vertex data)")
            lines.append("hybrid on the GPU alone: " + (
                f"every page fits its budget {held}"
                if set_up['page_bytes'] + set_up['vertex_bytes'] <= set_up['gpu_budget']
                else f"sharing its pulls would save less than the CPU's set-up {held}"))
        if self.turned_off:
            lines.append("turned off: " + ", ".join(sorted(self.turned_off)))
        if self.distributed:
            parts = self.distributed["partitions"]
            workers = sorted({part["worker"] for part in parts})
            lines.append(f"partitioned: {len(parts)} partition(s) over {len(workers)} Dask "
                         f"worker(s) of {self.distributed['scheduler']}")
        return "\n".join(lines)


def record_choice(entries: dict, off: frozenset, name: str, function, **inputs) -> bool:
    """Make choice ``name`` by its rule ``function`` (:func:`decisions.fixed`),
    recorded in ``entries``; a choice in ``off`` is recorded as made by its rule
    and then turned off (``choice`` False, ``turned_off`` True).  The CPU's
    plan and the GPU's make every choice without a switch among its rule's
    inputs this way."""
    entry = decisions.fixed(function, **inputs)
    if name in off:
        entry["choice"] = False
        entry["turned_off"] = True
    entries[name] = entry
    return bool(entry["choice"])


def check_turned_off(names) -> frozenset:
    """``names`` as a frozenset of :data:`CPU_CHOICES`, :data:`GPU_CHOICES` and
    :data:`RUN_CHOICES`; another name raises ValueError."""
    names = frozenset(names)
    known = CPU_CHOICES + GPU_CHOICES + RUN_CHOICES
    unknown = sorted(names - set(known))
    if unknown:
        raise ValueError(f"turned_off: {unknown} are not plan choices; expected some of "
                         f"{known}")
    return names


def plan_cpu(program, compiled, arrays, *, mode: str, synchronous: bool, threads: int,
             tolerance: float | None, symmetric: bool, policy_batches: bool = True,
             turned_off=frozenset()) -> CpuPlan:
    """The CPU engine's choices for a run of ``program`` (compiled as
    ``compiled``) over ``arrays`` (:class:`~garaphpy.scheduler.cpu_engine.GraphArrays`),
    each by its rule in :mod:`decisions`, in the order they depend on each
    other; a choice named in ``turned_off`` is off, and those made after it
    see it so.

    Parameters
    ----------
    mode : {"cpu", "hybrid"}
    synchronous : bool
    threads : int
    tolerance : float or None
        The run's.
    symmetric : bool
        The graph is undirected (the union-find start needs it).
    policy_batches : bool
        A hybrid run's policy lets one decision cover several iterations.
    """
    off = check_turned_off(turned_off)
    entries: dict[str, dict] = {}

    def choose(name, function, **inputs):
        return record_choice(entries, off, name, function, **inputs)

    reads_storage = bool(arrays.page_source.reads_storage)
    loaded = _numba_setup.WAIT_POLICY == "PASSIVE"
    entries["notify_pull"] = decisions.fixed(
        decisions.notify_pull_computes_pull,
        apply_reads_per_iteration=apply_reads_per_iteration(program))
    larger_first = program.sum == "max"
    early_exit = choose("early_exit", decisions.early_exit,
                        final_once_set=bool(program.final_once_set), synchronous=synchronous,
                        mode=mode)
    settling_push = choose("settling_push", decisions.settling_push, early_exit=early_exit,
                           reads_weights=bool(arrays.reads_weights))
    settle_rounds = choose("settle_rounds", decisions.cpu_settle_rounds,
                           settling_push=settling_push, threads=threads, loaded=loaded)
    whole = choose("whole_settling_pull", decisions.whole_settling_pull,
                   early_exit=early_exit, in_memory=not reads_storage)
    shortcut = choose("shortcut_labels", decisions.shortcut_labels,
                      declared=bool(program.shortcut_labels), mode=mode, processor="cpu")
    union_find = choose("union_find_start", decisions.union_find_start, declared=shortcut,
                        symmetric=symmetric, mode=mode)
    floor = choose("floor_skip", decisions.floor_skip,
                   declared=bool(program.gather_no_better_than_source), mode=mode)
    batches = choose("sparse_batches", decisions.sparse_batches,
                     aggregates=compiled.aggregate_call is not None,
                     reads_storage=reads_storage,
                     notify_pull=entries["notify_pull"]["choice"])
    push = choose("priority_push", decisions.cpu_priority_push,
                  declared_keeps_best=bool(program.apply_keeps_best))
    rounds = choose("push_rounds", decisions.cpu_push_rounds, push=push, threads=threads,
                    loaded=loaded)
    # a hybrid run's CPU takes buckets only in the batches its policy allows
    priority = bool(program.value_priority) and choose(
        "value_priority", decisions.value_priority, declared=True, mode=mode,
        synchronous=synchronous, batches=batches and (mode != "hybrid" or policy_batches),
        in_degree_skew=arrays.page_source.store.in_degree_skew)
    if not program.value_priority:
        entries["value_priority"] = {"declared": False, "choice": False}
    precompute = choose("source_precompute", decisions.precompute_source_gathers,
                        direction="pull", synchronous=synchronous,
                        gather_parameters=compiled.gather_parameters) and not early_exit
    entries["source_precompute"]["early_exit"] = early_exit
    entries["source_precompute"]["choice"] = precompute
    float32 = precompute and choose(
        "float32_contributions", decisions.float32_contributions,
        declared_tolerance=program.float32_gather_tolerance, run_tolerance=tolerance,
        mode=mode)
    fused = precompute and not reads_storage and not (early_exit or shortcut or floor) \
        and choose("fused_pull", decisions.fused_pull, mode=mode)
    for name, value in (("float32_contributions", float32), ("fused_pull", fused)):
        entries.setdefault(name, {"precomputed": precompute})["choice"] = bool(value)
    return CpuPlan(threads=threads, synchronous=synchronous,
                   initially_active=program.initially_active, larger_first=larger_first,
                   early_exit=early_exit, settling_push=settling_push,
                   settle_rounds=settle_rounds, whole_settling_pull=whole,
                   shortcut_labels=shortcut, union_find_start=union_find, floor_skip=floor,
                   value_priority=priority, priority_push=push and priority,
                   push_rounds=rounds and push and priority,
                   notify_pull=entries["notify_pull"]["choice"],
                   sparse_batches=batches, source_precompute=precompute,
                   float32_contributions=bool(float32), fused_pull=bool(fused),
                   entries=types.MappingProxyType(entries))
