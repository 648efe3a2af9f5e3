"""``garaphpy.run``: run a vertex program on a graph (Garaph sections 2.2-2.3, 4, 5).

This is the run's loop (Gunrock's "enactor"): it validates the run,
compiles the program, makes the engines of the mode (the CPU's, the GPU's,
or both) behind one :class:`~garaphpy.scheduler.driver.Driver`, and loops
— aggregates, active fraction f, the decisions (direction, and in hybrid
runs the mode by alpha), one iteration, the record — until no vertex is
active, the L1 change falls below the tolerance, or the iteration limit
is reached.
Non-convergence is reported (``Result.converged`` is False and a
:class:`NotConvergedWarning` is issued, or :class:`NotConvergedError` is
raised on request), never silent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import signal
import time
import warnings
from typing import TYPE_CHECKING, Any

import numba
import numpy as np

from . import _numba_setup, config
from .errors import ConfigError, GaraphError
from .options import DIRECTIONS, EXECUTIONS, MAX_ITERATIONS, MODES, RunOptions
from .paths import cache_directory
from .program import ProgramError, VertexProgram, default_execution, run_tolerance
from .scheduler import checkpoint
from .scheduler import decisions as direction_policy
from .scheduler.dispatcher import HybridPolicy
from .scheduler.records import IterationRecord, Result

if TYPE_CHECKING:
    from .graph import Graph


class NotConvergedError(GaraphError):
    """A run reached its iteration limit with vertices still active."""


class NotConvergedWarning(UserWarning):
    """A run reached its iteration limit with vertices still active."""


_COMPILED: dict = {}


def _compiled_program(program: VertexProgram, parallel: bool = True):
    """Compile once per (program class, constants, parallel or not) and process;
    the generated module and numba's cache of it are kept across processes in
    :func:`_program_cache_directory`.  A run on one thread takes the serial
    kernels, which compile in a fraction of the time."""
    from .kernels.cpu_program import compile_program

    key = (type(program), tuple(sorted(program.constants.items())), parallel)
    if key not in _COMPILED:
        _COMPILED[key] = compile_program(program, _program_cache_directory(), parallel)
    return _COMPILED[key]


_INIT_CHECKS: dict = {}


def _check_initial_values(graph, program: VertexProgram, source_vertices: np.ndarray) -> None:
    """Refuse, naming init's file and line, an integer program whose init
    gives a vertex a value its dtype cannot hold (before CPU or GPU set up)."""
    from .kernels.cpu_program import compile_init_check
    from .program import check_initial_values
    from .scheduler.cpu_engine import vertex_attributes, weighted_in_degree

    if np.dtype(type(program).value_dtype).kind not in "iu":
        return
    key = (type(program), tuple(sorted(program.constants.items())))
    if key not in _INIT_CHECKS:
        _INIT_CHECKS[key] = compile_init_check(program)
    first_out_of_range = _INIT_CHECKS[key]
    weighted_in = weighted_in_degree(graph.store) \
        if "weighted_in_degree" in type(program).functions["init"].parameters else None

    def find():
        attrs = vertex_attributes(graph, source_vertices, weighted_in)
        vertex, number = first_out_of_range(attrs, graph.num_vertices)
        if vertex < 0:
            return None
        return int(graph.original_ids(np.array([vertex]))[0]), float(number)

    check_initial_values(program, find)


def _program_cache_directory():
    """Where compiled program modules are kept: ``cache_directory() / "programs"``."""
    return cache_directory() / "programs"


def _program_instance(program) -> VertexProgram:
    if isinstance(program, str):
        from .programs import get_program

        return get_program(program)
    if isinstance(program, type) and issubclass(program, VertexProgram):
        return program()
    if isinstance(program, VertexProgram):
        return program
    raise ConfigError(f"program: expected a VertexProgram (class or instance) or the name of a "
                      f"built-in program, got {program!r}")


class IgnoredSourcesWarning(UserWarning):
    """``sources`` were given to a program that does not use them (PageRank, CC, ...)."""


def uses_sources(program: VertexProgram) -> bool:
    """Whether ``program`` reads its sources: it needs them, starts from them,
    or a function asks for ``is_source``."""
    return bool(program.needs_sources or program.initially_active == "sources"
                or "is_source" in _uses(program))


def _source_vertices(graph, program: VertexProgram, sources) -> np.ndarray:
    if sources is None:
        sources = []
    if not uses_sources(program):
        if np.atleast_1d(np.asarray(sources)).size:
            warnings.warn(f"sources: {type(program).__name__} does not use source vertices; "
                          f"ignoring sources={sources!r}", IgnoredSourcesWarning, stacklevel=3)
        return np.zeros(0, np.int64)
    original = np.atleast_1d(np.asarray(sources))
    if original.size and not np.issubdtype(original.dtype, np.integer) and graph.labels is None:
        raise ConfigError(f"sources: expected vertex ids (integers), got {sources!r}")
    if program.needs_sources and original.size == 0:
        raise ConfigError(f"sources: {type(program).__name__} needs at least one source vertex")
    try:
        return np.unique(graph.internal_ids(original)).astype(np.int64) if original.size \
            else np.zeros(0, np.int64)
    except KeyError as error:
        raise ConfigError(f"sources: {error.args[0]}") from None


def run(graph: Graph, program: str | type[VertexProgram] | VertexProgram, *,
        mode: str = "hybrid", execution: str | None = None,
        max_iterations: int | None = None, tolerance: float | None = None, sources: Any = None,
        threads: int | None = None, direction: str = "auto", raise_on_nonconvergence=False,
        on_iteration=None, gpu_memory: int | None = None, n_streams: int | None = None,
        checkpoint_dir=None, checkpoint_every: int | None = None, resume: bool = False,
        policy: HybridPolicy | None = None, host_memory: int | None = None,
        read_ratio: float | None = None, readahead_bytes: int | None = None,
        checkpoint_pages: int | None = None, keep_checkpoints: bool = False,
        stop_signals=(signal.SIGINT,)) -> Result:
    """Run a vertex program on a graph.

    The keywords are the fields of :class:`garaphpy.options.RunOptions`,
    where each is declared once with its type, range and configuration key.

    Parameters
    ----------
    graph : garaphpy.Graph
    program : VertexProgram, VertexProgram subclass, or str
        A program instance (``PageRank(damping=0.9)``), class, or a built-in
        program's name (``"sssp"``).
    mode : {"hybrid", "cpu", "gpu"}
        Which processors run the iterations: ``hybrid`` (the default: each
        iteration the dispatcher picks the CPU alone or CPU and GPU together
        by Garaph's cost ratio alpha, see ``policy``; without a usable GPU it
        warns once, with :class:`GpuFallbackWarning`, and runs on the CPU),
        ``cpu`` (numba kernels, notify-pull or pull), ``gpu`` (pull kernels
        over pages streamed to or resident on the GPU; needs cupy and a CUDA
        device).
    execution : {"sync", "async"}, optional
        Default: the program's ``execution``, on every processor (the
        built-in SSSP, CC and SSWP run asynchronously: same values, fewer
        iterations, and the hybrid's CPU turns in buckets of values).
    max_iterations : int, optional
        Default: the program's.
    tolerance : float, optional
        Stop once the L1 change of an iteration falls below it (default:
        the program's, None for none).
    sources : int or sequence of int, optional
        Source vertices, in the user's ids; only for programs that use them
        (:func:`uses_sources`); given to another program they are ignored
        with an :class:`IgnoredSourcesWarning`.
    threads : int, optional
        CPU threads (default: one per ``config.DEFAULT_EDGES_PER_THREAD``
        edges, at most every core, so a small graph runs on one thread; a
        run streaming pages from storage leaves
        ``config.STREAMING_CORES_PER_DIRECTORY`` cores per storage
        directory, at most a quarter, to the page readers).  More than the
        process's cores is capped to them, with a :class:`ThreadsCappedWarning`.
    direction : {"auto", "pull", "notify-pull"}
        The CPU's direction (in ``hybrid`` runs, that of the CPU-only
        iterations; hybrid iterations pull); ``auto`` follows Garaph's switch
        (:func:`garaphpy.scheduler.decisions.choose_direction`), the others
        force one for study.  On the GPU alone: ``pull`` keeps every
        iteration a pull over every shard, ``notify-pull`` makes every one a
        sparse pass in the device loop (which needs resident pages and no
        aggregates; :func:`~garaphpy.scheduler.decisions.gpu_sparse_pass`).  Notify-pull updates only the out-neighbours of
        active vertices, so forcing it is only equivalent to pull for
        programs whose apply leaves a vertex unchanged when none of its
        in-neighbours changed (SSSP, BFS, CC, SSWP), not for PageRank.
    raise_on_nonconvergence : bool
        Raise :class:`NotConvergedError` instead of warning.
    on_iteration : callable, optional
        Called with each :class:`IterationRecord` as it completes.  On the
        CPU alone, small notify-pull iterations run in batches (up to
        ``config.CPU_SPARSE_BATCH_STEPS``, never past a checkpoint that is
        due), and so do the GPU's sparse iterations in its device loop (up
        to ``config.GPU_LOOP_MAX_STEPS``): their records come after the
        batch, each with an even share of its time, and the run's values
        are then those of the batch's end (a Ctrl-C, too, acts there).
    policy : garaphpy.scheduler.dispatcher.HybridPolicy, optional
        The hybrid dispatcher's policy (``hybrid`` mode): configure it
        (threshold, a forced mode, the initial ratio T_pull / T_GPU), read its
        ``decisions`` after the run, or pass a subclass with your own
        ``decide`` or ``should_take``.  Default: a new ``HybridPolicy()``,
        which measures the initial ratio with a one-page probe at start-up.
    gpu_memory : int, optional
        GPU memory the run may use, in bytes (``gpu`` and ``hybrid``; default: 80% of
        the free memory).  When the pages and the vertex data fit, pages
        stay on the GPU; otherwise they are streamed every iteration.
    n_streams : int, optional
        CUDA streams pages are pipelined on (``gpu`` mode; default 4).
    host_memory : int, optional
        Host memory the run may use, in bytes (default:
        :data:`garaphpy.config.HOST_CACHE_FRACTION` of the memory available
        now).  The vertex data come first; when every page fits beside them
        the graph is held in memory, otherwise a prefix of the pages is
        cached and the rest is read from the storage directories every
        iteration (Garaph section 2.2), with the same results.
    readahead_bytes : int, optional
        Page buffers each processor's reader may fill ahead of it when pages
        come from storage (rounded up to whole pages; default: a few pages,
        at most a quarter of the budget left beside the vertex data, see
        :func:`garaphpy.storage.host_budget.plan_run_pages`).
    read_ratio : float, optional
        k, the sequential over random read speed of the storage directories
        (rho of the notify-pull switch and of alpha when pages come from
        storage, section 4.2).  Default :data:`garaphpy.config.READ_RATIO`,
        else measured once per directory and cached.
    checkpoint_dir : str or os.PathLike, optional
        Write checkpoints here (created if missing; one run at a time);
        None: no checkpoints.  The committed values, the frontier and the
        records are written atomically after every ``checkpoint_every``-th
        iteration and when Ctrl-C is pressed; they are removed when the run
        completes, unless ``keep_checkpoints``
        (:mod:`garaphpy.scheduler.checkpoint`).  A directory
        holding an earlier run's checkpoints is refused unless ``resume``.
    checkpoint_every : int, optional
        Iterations between checkpoints (default
        :data:`garaphpy.config.CHECKPOINT_EVERY`, 10); 0: only at Ctrl-C.
    checkpoint_pages : int, optional
        Asynchronous runs: also write a checkpoint after every
        ``checkpoint_pages``-th page pulled (Garaph section 2.2); a run
        resumed from one restarts that iteration with every vertex active.
    stop_signals : tuple of int
        With checkpoints on, the signals that stop the run at the end of the
        current iteration after writing a checkpoint, as Ctrl-C does
        (default SIGINT alone; the command line adds SIGTERM and SIGHUP).
        Taken in the main thread only, never where the signal is ignored, and
        SIGINT only where Python's default handler is in place; the previous
        handlers are restored when the run ends.
        :class:`~garaphpy.errors.RunInterrupted` names the signal
        (``signal_number``).
    keep_checkpoints : bool
        Leave the checkpoints in ``checkpoint_dir`` when the run completes,
        for a caller that removes them (:func:`garaphpy.scheduler.checkpoint.discard`)
        only once it has stored the result: a kill before that still resumes.
        Default False: they are removed when the run completes.
    resume : bool
        Continue from the newest valid checkpoint in ``checkpoint_dir``,
        which the same run (graph, program and constants, execution,
        sources, direction, stopping rules) must have written: same
        iteration numbering and stopping rules, the earlier records come
        first in ``Result.iterations``.  A damaged checkpoint is skipped with
        a :class:`~garaphpy.scheduler.checkpoint.CheckpointWarning`.

    Returns
    -------
    Result

    Raises
    ------
    garaphpy.errors.CheckpointError
        Resuming without a valid checkpoint or onto a different run;
        starting afresh over an earlier run's checkpoints.
    garaphpy.errors.RunInterrupted
        Ctrl-C with checkpoints on: raised after the checkpoint is written
        (a KeyboardInterrupt naming the checkpoint).
    """
    options = RunOptions.from_arguments(locals())   # the keywords, before any is rebound
    from .scheduler.cpu_engine import CpuEngine, GraphArrays, RunState
    from .scheduler.driver import Driver

    setup_started = time.perf_counter()
    program = _program_instance(program)
    if mode not in MODES:
        raise ConfigError(f"mode={mode!r}: expected one of {MODES}")
    if policy is not None and not isinstance(policy, HybridPolicy):
        raise ConfigError(f"policy: expected a garaphpy.HybridPolicy (or subclass), got "
                          f"{policy!r}")
    if mode == "hybrid":
        mode = _hybrid_or_fallback()
    execution_asked = execution is not None
    execution = direction_policy.run_execution(execution, default_execution(program))
    if execution not in EXECUTIONS:
        raise ConfigError(f"execution={execution!r}: expected one of {EXECUTIONS}")
    if direction not in DIRECTIONS:
        raise ConfigError(f"direction={direction!r}: expected one of {DIRECTIONS}")
    max_iterations = program.max_iterations if max_iterations is None else max_iterations
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) \
            or not 1 <= max_iterations <= MAX_ITERATIONS:
        raise ConfigError(f"max_iterations={max_iterations!r}: expected an integer from 1 "
                          f"to {MAX_ITERATIONS}")
    tolerance = run_tolerance(program, tolerance)
    threads_chosen = threads is not None
    threads = _threads(threads, graph.num_edges)
    if program.needs_weights and not graph.weighted:
        raise ConfigError(f"{type(program).__name__} needs edge weights, and the graph has none")
    outside = graph.store.weight_domain_error(program.weight_domain, type(program).__name__)
    if outside is not None:
        raise outside
    if program.needs_undirected and graph.directed:
        graph = graph.as_undirected()
    source_vertices = _source_vertices(graph, program, sources)
    with _numba_setup.KeptInterrupts():
        _check_initial_values(graph, program, source_vertices)
    # the checkpoint identity is that of the options as resolved for this run
    resolved = dataclasses.replace(options, execution=execution, max_iterations=max_iterations,
                                   tolerance=tolerance, sources=source_vertices)
    checkpoints = checkpoint.for_run(resolved, graph=graph, program=program, threads=threads)

    previous_threads = numba.get_num_threads()
    numba.set_num_threads(threads)
    compiling = _numba_setup.KeptInterrupts()   # until the engines are compiled
    try:
        if "weight" in _uses(program) and not graph.weighted:
            raise ConfigError(f"{type(program).__name__}.gather reads the edge weight, and the "
                              "graph has none")
        resumed = checkpoints.open(resume, execution_asked) if checkpoints is not None \
            else None
        if resumed is not None:     # the checkpoint's own, where the run asked for none
            execution = checkpoints.identity["execution"]
        initially_active = (np.arange(graph.num_vertices, dtype=np.int64)
                            if program.initially_active == "all" else source_vertices.copy())
        pages = page_source(graph.store, mode, host_memory, read_ratio, readahead_bytes)
        if pages.reads_storage and not threads_chosen:
            threads = _threads_beside_readers(threads, len(graph.store.storage_dirs))
            numba.set_num_threads(threads)
        cpu_engine = gpu_engine = None
        if mode != "gpu":
            compiled = _compiled_program(program, parallel=threads > 1)
            arrays = GraphArrays.from_graph(graph, source_vertices,
                                            "weighted_in_degree" in _uses(program), pages,
                                            reads_weights="weight" in _uses(program))
            state = RunState(arrays, compiled, execution == "sync")
            state.frontier = initially_active
            cpu_engine = CpuEngine(arrays, compiled, state, threads)
            early_exit = direction_policy.early_exit(program.final_once_set,
                                                     execution == "sync", mode,
                                                     config.CPU_EARLY_EXIT)
            if early_exit:
                cpu_engine.enable_early_exit(program.initially_active)
            if direction_policy.shortcut_labels(program.shortcut_labels, mode,
                                                config.CPU_SHORTCUT_LABELS, processor="cpu"):
                _check_shortcut_labels(program, compiled, arrays.attrs, arrays.weights,
                                       arrays.attrs[3], state.values)
                cpu_engine.enable_shortcut_labels()
                if direction_policy.union_find_start(True, not graph.directed, mode,
                                                     config.CPU_UNION_FIND_START):
                    cpu_engine.enable_union_find_start()
            if direction_policy.floor_skip(program.gather_no_better_than_source, mode,
                                           config.CPU_FLOOR_SKIP):
                cpu_engine.enable_floor_skip(larger_first=program.sum == "max")
            push = direction_policy.cpu_priority_push(program.apply_keeps_best,
                                                      config.CPU_PRIORITY_PUSH)
            push_rounds = direction_policy.cpu_push_rounds(
                push, threads, _numba_setup.WAIT_POLICY == "PASSIVE", config.CPU_PUSH_ROUNDS)
            # a hybrid run's CPU takes buckets only in the batches its policy allows
            batches = cpu_engine.batches and (mode != "hybrid" or policy is None
                                              or policy.batches)
            if program.value_priority and direction_policy.value_priority(
                    True, mode, execution == "sync", batches,
                    direction_policy.in_degree_skew(arrays.attrs[1]),
                    config.CPU_VALUE_PRIORITY, push_rounds=push_rounds):
                if push and not type(program).__module__.startswith("garaphpy.programs"):
                    _check_apply_keeps_best(program, compiled)
                cpu_engine.enable_value_priority(larger_first=program.sum == "max", push=push,
                                                 rounds=push_rounds)
            if direction_policy.float32_contributions(
                    program.float32_gather_tolerance, tolerance, mode,
                    config.CPU_FLOAT32_CONTRIBUTIONS):
                cpu_engine.hold_contributions_in_float32()
            if direction_policy.fused_pull(mode, config.CPU_FUSED_PULL):
                cpu_engine.enable_fused_pull()
            # hybrid runs probe and time both directions: compile both first
            # hybrid runs also hand the CPU's batches the iterations it runs alone
            cpu_engine.warm_up(("pull", "notify-pull") + (("batch",) if cpu_engine.batches
                                                         else ())
                               if mode == "hybrid"
                               else None if direction == "auto" else (direction,))
        if mode != "cpu":
            from .scheduler.gpu_engine import GpuEngine

            gpu_engine = GpuEngine(graph, program, source_vertices, execution == "sync",
                                   gpu_memory=gpu_memory, n_streams=n_streams,
                                   page_source=pages)
            gpu_engine.set_frontier(initially_active)
            if direction_policy.shortcut_labels(program.shortcut_labels, mode,
                                                config.GPU_SHORTCUT_LABELS, processor="gpu"):
                # built-in programs' functions are tested; a user's are probed on the CPU
                user = not type(program).__module__.startswith("garaphpy.programs")
                compiled = _compiled_program(program, parallel=False) if user else None
                ids = graph.original_ids(np.arange(graph.num_vertices)).astype(np.int64)
                degree = graph.store.out_degree.dtype
                attr_types = (degree, degree, np.float64, np.int64, np.bool_)
                _check_shortcut_labels(
                    program, compiled, tuple(np.zeros(1, t) for t in attr_types),
                    np.zeros(1), ids, gpu_engine.values_to_host())
                gpu_engine.enable_shortcut_labels(ids)
            if mode == "gpu" and gpu_engine.push_entry["choice"] and \
                    not type(program).__module__.startswith("garaphpy.programs"):
                _check_apply_keeps_best(program, _compiled_program(program, parallel=False))
        # every mode is one driver: the CPU alone, the GPU alone, or both
        engine = Driver(cpu_engine, gpu_engine, policy if mode == "hybrid" else None)
        compiling.check()
        if checkpoints is not None:
            checkpoints.attach(engine)      # restores the resumed state, if any
        setup_seconds = time.perf_counter() - setup_started
        with (checkpoint.interrupts_at_iteration_end(checkpoints, stop_signals)
              if checkpoints is not None else _numba_setup.KeptInterrupts()), \
                _collections_paused(config.PAUSE_GC_IN_ITERATIONS):
            records, converged, stop_reason = _iterate(engine, program, max_iterations,
                                                       tolerance, direction, on_iteration,
                                                       checkpoints)
        if cpu_engine is not None and converged \
                and not type(program).__module__.startswith("garaphpy.programs"):
            engine.bring_host_current()     # the GPU may have run the last iterations
            _check_skipping_declarations(program, graph, cpu_engine, len(records))
        if checkpoints is not None and not keep_checkpoints:
            checkpoints.run_completed()
    except Exception as error:
        compiling.raise_interrupt_behind(error)
        raise
    finally:
        compiling.restore()
        numba.set_num_threads(previous_threads)
        if checkpoints is not None:
            checkpoints.close()
        if "engine" in locals():
            engine.close()
        if "pages" in locals():
            pages.close()
    seconds = sum(r.seconds for r in records)
    values = program.finalize(engine.values_to_host())
    result = Result(program=program, graph=graph, values=values, sources=source_vertices,
                    mode=mode, execution=execution, converged=converged,
                    stop_reason=stop_reason, num_iterations=len(records), iterations=records,
                    seconds=seconds, setup_seconds=setup_seconds, tolerance=tolerance,
                    max_iterations=max_iterations,
                    resumed_from=None if resumed is None else str(resumed.path))
    if not converged:
        message = (f"{type(program).__name__} did not converge in {max_iterations} iterations "
                   f"({records[-1].activated if records else 0} vertices still active)")
        if raise_on_nonconvergence:
            raise NotConvergedError(message)
        warnings.warn(message, NotConvergedWarning, stacklevel=2)
    return result


#: The declarations that let a run's CPU pulls skip in-edges, and what a false one did.
_SKIPPING_DECLARATIONS = {
    "final_once_set": "its values are not final once set, so the early exits gave wrong ones",
    "gather_no_better_than_source": "a gather is better than its source's value, so the "
                                    "skipped vertices could still have changed",
}


def _check_skipping_declarations(program, graph, cpu_engine, iteration: int) -> None:
    """A user's declarations that let the run's pulls skip in-edges (early exit:
    ``final_once_set``; the floor: ``gather_no_better_than_source``), checked at
    the end of a converged run by one full pull, which must change nothing (the
    built-in programs' declarations are tested instead).

    Raises
    ------
    ProgramError
        Naming the program, the declarations used and a vertex (in the user's
        ids) the full pull changes.
    """
    used = [name for name, on in (("final_once_set", cpu_engine.early_exit),
                                  ("gather_no_better_than_source", cpu_engine.floor_mode))
            if on]
    if not used:
        return
    changed = cpu_engine.full_pull_changes(iteration, cpu_engine.aggregates(iteration))
    if changed.size:
        vertex = int(graph.original_ids(changed[:1])[0])
        declared = " and ".join(f"{name} = True" for name in used)
        consequence = "; or ".join(_SKIPPING_DECLARATIONS[name] for name in used)
        raise ProgramError(
            f"{type(program).__name__} declares {declared}, but after its run "
            f"a full pull still changes {changed.size} vertices (vertex {vertex}, for one): "
            f"{consequence}; remove the declaration")


def _check_shortcut_labels(program, compiled, attrs, weights, ids: np.ndarray,
                           initial: np.ndarray) -> None:
    """A declaration of ``shortcut_labels`` checked before a run shortcuts labels:
    every initial value is the vertex's own user id (``ids``), ``gather``
    passes a label on unchanged and ``apply`` keeps the smaller of two (on
    probe labels, through the CPU-compiled ``compiled``; None skips the
    probes).  The class's declarations were checked when it was defined.

    Raises
    ------
    ProgramError
        Naming what does not hold (and a vertex, in the user's ids).
    """
    name = type(program).__name__
    wrong = np.flatnonzero(initial != ids)
    if wrong.size:
        vertex = int(ids[wrong[0]])
        raise ProgramError(
            f"{name} declares shortcut_labels = True, but init gives vertex {vertex} the "
            f"value {initial[wrong[0]]} instead of its own id ({wrong.size} vertices differ)")
    if compiled is None:
        return
    dtype = compiled.value_dtype
    info = np.iinfo(dtype)
    labels = np.array([v for v in (0, 1, 7, 1 << 40, -5, info.max - 1, info.min)
                       if info.min <= v <= info.max], dtype)
    attrs = tuple(np.zeros(max(len(labels), 1), a.dtype) for a in attrs)
    for u, label in enumerate(labels):
        got = compiled.gather_call(labels, weights, attrs, u, 0, 0)
        if got != label:
            raise ProgramError(f"{name} declares shortcut_labels = True, but gather turns the "
                               f"label {label} into {got}: it must pass labels on unchanged")
        for other in labels:
            got = compiled.apply_call(attrs, np.zeros(1), len(labels), 1, 0, label, other)
            if got != min(label, other):
                raise ProgramError(f"{name} declares shortcut_labels = True, but apply of "
                                   f"value {label} and sum {other} gives {got}: it must keep "
                                   "the smaller")


def _check_apply_keeps_best(program, compiled) -> None:
    """A declaration of ``apply_keeps_best`` checked before a push (the GPU's
    device loop, the CPU's steps in buckets of values):
    ``apply`` of probe values and sums returns the better of the two under
    the program's sum (the class's declarations were checked when it was
    defined).

    Raises
    ------
    ProgramError
        Naming the value and sum where it does not hold.
    """
    name = type(program).__name__
    best = min if type(program).sum == "min" else max
    dtype = compiled.value_dtype
    if dtype.kind == "f":
        probes = [0.0, 1.5, -2.0, 7.0, 1e300, -1e300, math.inf, -math.inf]
    else:
        info = np.iinfo(dtype)
        probes = [v for v in (0, 1, 7, -5, 1 << 40, info.max - 1, info.min + 1)
                  if info.min <= v <= info.max]
    values = np.array(probes, dtype)
    attrs = tuple(np.zeros(1, t) for t in (np.int64, np.int64, np.float64, np.int64, np.bool_))
    for value in values:
        for other in values:
            got = compiled.apply_call(attrs, np.zeros(1), 1, 1, 0, value, other)
            if got != best(value, other):
                raise ProgramError(f"{name} declares apply_keeps_best = True, but apply of "
                                   f"value {value} and sum {other} gives {got}: it must keep "
                                   f"the {type(program).sum} of the two")


class GpuFallbackWarning(UserWarning):
    """``mode="hybrid"`` found no usable GPU (no cupy, or no CUDA device) and runs on the CPU."""


_FALLBACK_WARNED = False


def _hybrid_or_fallback() -> str:
    """``"hybrid"`` when a GPU is usable, else ``"cpu"`` with one warning per process."""
    global _FALLBACK_WARNED
    from .kernels.gpu import GpuUnavailableError, cupy_module

    try:
        cupy_module()
    except GpuUnavailableError as error:
        if not _FALLBACK_WARNED:
            _FALLBACK_WARNED = True
            warnings.warn(f"mode='hybrid' runs on the CPU only: {error}", GpuFallbackWarning,
                          stacklevel=3)
        return "cpu"
    return "hybrid"


def page_source(store, mode: str, host_memory: int | None = None,
                read_ratio: float | None = None, readahead_bytes: int | None = None):
    """The run's :class:`~garaphpy.storage.page_source.PageSource`: every page in
    memory when the host budget holds them beside the vertex data, else
    cached and streamed pages (:class:`~garaphpy.storage.host_pages.HostPages`);
    see :func:`garaphpy.storage.host_budget.plan_run_pages`.
    """
    from .storage.host_budget import plan_run_pages
    from .storage.page_source import open_page_source
    from .storage.read_ratio import check_read_ratio, storage_read_ratio

    if read_ratio is not None:
        check_read_ratio(read_ratio, "read_ratio")
    plan, readahead = plan_run_pages(store, 2 if mode == "hybrid" else 1, host_memory,
                                     readahead_bytes)
    pages = open_page_source(store, plan,
                             lambda: storage_read_ratio(store.storage_dirs, read_ratio),
                             readahead_bytes=readahead)
    if mode != "cpu":
        from .kernels.gpu import pinned_empty

        pages.use_allocator("gpu", pinned_empty, cache=True)
    return pages


def _threads_beside_readers(threads: int, directories: int) -> int:
    """CPU threads of a run whose pages stream from ``directories``: the
    default thread count leaves ``config.STREAMING_CORES_PER_DIRECTORY`` cores
    per directory to its reader and checksum threads, up to a quarter of them
    (kernel threads that take every core slow the reads down)."""
    reserved = min(threads // 4, config.STREAMING_CORES_PER_DIRECTORY * directories)
    return max(1, threads - reserved)


def _uses(program: VertexProgram) -> set:
    return {p for f in type(program).functions.values() for p in f.parameters}


class ThreadsCappedWarning(UserWarning):
    """More ``threads`` were asked for than this process can run; the run uses fewer."""


def _threads(threads, num_edges: int | None = None) -> int:
    available = min(numba.config.NUMBA_NUM_THREADS, config.usable_cores())
    if threads is None:
        return min(config.default_threads(num_edges), available)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"threads={threads!r}: expected a positive integer")
    if threads > available:
        warnings.warn(f"threads={threads}: this machine gives the process {available} "
                      f"core(s); using {available} (more threads than cores only wait on "
                      "each other)", ThreadsCappedWarning, stacklevel=3)
        return available
    return threads


@contextlib.contextmanager
def _collections_paused(pause: bool):
    """Python's cyclic garbage collector off inside (``config.PAUSE_GC_IN_ITERATIONS``),
    as it was after."""
    was_enabled = gc.isenabled()
    if pause and was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if pause and was_enabled:
            gc.enable()


def _iterate(engine, program, max_iterations, tolerance, direction, on_iteration,
             checkpoints=None):
    # a resumed run continues the numbering after the checkpoint's iterations
    records = checkpoints.records() if checkpoints is not None else []
    if checkpoints is not None:
        checkpoints.track(records)
    rho = getattr(engine, "rho", config.RHO_IN_MEMORY)
    pages = engine.page_source
    num_edges = engine.num_edges
    every = checkpoints.every if checkpoints is not None else 0
    iteration = len(records)
    while iteration < max_iterations:
        started = time.perf_counter()
        active_vertices = engine.num_active()
        if active_vertices == 0:
            return records, True, "no active vertex"
        active_edges, prefix = engine.active_out_edges()
        # a batch ends at the next checkpoint, so that checkpoints stay where they are due
        steps = max_iterations - iteration
        if every:
            steps = min(steps, every - iteration % every)
        batch = engine.iterate_batch(iteration, steps, tolerance, active_edges, direction)
        if batch:
            seconds = (time.perf_counter() - started) / len(batch)
            for record in batch:
                record.seconds = seconds
                records.append(record)
                if on_iteration is not None:
                    on_iteration(record)
            iteration += len(batch)
            # a step in buckets of values changes one bucket: not a convergence test
            if tolerance is not None and batch[-1].l1_change < tolerance \
                    and "value_priority" not in batch[-1].decisions:
                return records, True, "tolerance"
            if checkpoints is not None and iteration < max_iterations and engine.num_active():
                checkpoints.after_iteration(engine, records)
            continue
        f = direction_policy.active_fraction(active_edges, num_edges)
        record = IterationRecord(iteration=iteration, mode=engine.mode, direction="pull",
                                 forced=direction != "auto", active_fraction=f, rho=rho,
                                 active_vertices=active_vertices)
        engine.decide(record, direction)
        aggregates = engine.aggregates(iteration)
        read_before = pages.bytes_read
        engine.iterate(record, prefix, aggregates)
        record.bytes_read = pages.bytes_read - read_before
        record.seconds = time.perf_counter() - started
        records.append(record)
        if on_iteration is not None:
            on_iteration(record)
        if tolerance is not None and record.l1_change < tolerance:
            return records, True, "tolerance"
        iteration += 1
        if checkpoints is not None and iteration < max_iterations and engine.num_active():
            checkpoints.after_iteration(engine, records)
    if engine.num_active() == 0:
        return records, True, "no active vertex"
    return records, bool(program.run_until_limit), "iteration limit"
