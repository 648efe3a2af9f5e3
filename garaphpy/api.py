"""``garaphpy.run``: run a vertex program on a graph (Garaph sections 2.2-2.3, 4, 5).

This is the run's loop (Gunrock's "enactor"), in four steps
(:func:`execute`): it validates the options (:func:`_validated`), makes the
run's plan, every choice that holds for the whole run
(:mod:`garaphpy.scheduler.plan`), builds the engines of the plan (the
CPU's, the GPU's, or both) behind one
:class:`~garaphpy.scheduler.driver.Driver`, and drives it — aggregates,
active fraction f, the decisions (direction, and in hybrid runs the mode by
alpha), one iteration, the record — until no vertex is active, the L1
change falls below the tolerance, or the iteration limit is reached.
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
import weakref
from typing import TYPE_CHECKING, Any

import numba
import numpy as np

from . import _numba_setup, config, progress
from .compile_clock import CompileClock
from .errors import ConfigError, GaraphError, caller_stacklevel
from .options import DIRECTIONS, EXECUTIONS, MAX_ITERATIONS, MODES, RunOptions
from .paths import cache_directory
from .program import (ProgramError, VertexProgram, apply_reads_per_iteration, default_execution,
                      run_tolerance)
from .scheduler import decisions, set_up_choice
from .scheduler.policy import HybridPolicy
from .scheduler.plan import GPU_CHOICES, RunPlan, check_turned_off, plan_cpu
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


#: Per opened store, the initial values found in range: (program class,
#: constants, sources) of the checks passed (:func:`_check_initial_values`).
_INITIAL_VALUES_FIT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _check_initial_values(graph, program: VertexProgram, source_vertices: np.ndarray,
                          parallel: bool) -> None:
    """Refuse, naming init's file and line, an integer program whose init
    gives a vertex a value its dtype cannot hold (before CPU or GPU set up).
    The check is a function of the program's compiled module (the one the
    run's CPU part takes: ``parallel`` as there), cached on disk with it, and
    of the graph's store and the sources: a check passed is not made again
    for the same program (class and constants, as :func:`_compiled_program`
    keys it), store and sources."""
    from .program import check_initial_values
    from .scheduler.cpu_state import store_weighted_in_degree, vertex_attributes

    if np.dtype(type(program).value_dtype).kind not in "iu":
        return
    key = (type(program), tuple(sorted(program.constants.items())),
           source_vertices.tobytes())
    passed = _INITIAL_VALUES_FIT.setdefault(graph.store, set())
    if key in passed:
        return
    first_out_of_range = _compiled_program(program, parallel).kernels.first_out_of_range

    def find():
        weighted_in = store_weighted_in_degree(graph.store) \
            if "weighted_in_degree" in type(program).functions["init"].parameters else None
        attrs = vertex_attributes(graph, source_vertices, weighted_in)
        vertex, number = first_out_of_range(attrs, graph.num_vertices)
        if vertex < 0:
            return None
        return int(graph.original_ids(np.array([vertex]))[0]), float(number)

    check_initial_values(program, find)
    passed.add(key)


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
                          f"ignoring sources={sources!r}", IgnoredSourcesWarning,
                          stacklevel=caller_stacklevel())
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
        stop_signals=(signal.SIGINT,), client=None, scheduler: str | None = None,
        partitions: int | None = None) -> Result:
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
        aggregates; :func:`~garaphpy.scheduler.decisions.gpu_sparse_pass`).
        Notify-pull recomputes only the out-neighbours of active vertices,
        and gives the pull's values: a program whose apply reads an
        aggregate or the iteration (PageRank) always pulls, and refuses a
        forced ``notify-pull`` (:func:`~garaphpy.scheduler.decisions.notify_pull_computes_pull`);
        a forced notify-pull of a program whose vertices all start active
        pulls the first iteration, which applies the vertices without
        in-edges (:func:`~garaphpy.scheduler.decisions.iteration_forced_direction`).
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
    policy : garaphpy.scheduler.policy.HybridPolicy, optional
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
        come from storage (rounded up to whole pages; default: sized by the
        storage directories' measured read speed, at most a quarter of the
        budget left beside the vertex data, see
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
    client : dask.distributed.Client, optional
        Run partitioned over the workers of this Dask cluster
        (:mod:`garaphpy.distributed`; ``pip install garaphpy[dask]``): the
        graph's pages are cut into ``partitions`` by destination vertex
        range, balanced by edges; each worker opens the store by its path (a
        shared file system), pulls its own vertices with the CPU kernels,
        or on its GPU where its Dask resources name one (``resources={"GPU":
        1}``; ``mode='cpu'`` keeps every worker on its CPU, ``mode='gpu'``
        uses only the workers with a GPU), and sends its changed values only
        to the workers that read them.
        Such a run is synchronous, pulls every iteration, writes a
        checkpoint per partition every ``checkpoint_every`` iterations
        (default :data:`garaphpy.config.CHECKPOINT_EVERY`; into
        ``checkpoint_dir``, default a directory beside the store) and, when
        a worker is lost, makes its partitions again on live workers from
        the last checkpoint.  Each record names its ``workers`` and
        ``exchanged_bytes``.
    scheduler : str, optional
        A Dask scheduler's address (``tcp://host:8786``): as ``client``,
        with a client connected there for the run.
    partitions : int, optional
        Partitioned runs: the number of partitions (default: one per worker).
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
    return execute(graph, program, RunOptions.from_arguments(locals()))


def execute(graph, program, options: RunOptions | None = None, *, turned_off=(),
            **keywords) -> Result:
    """:func:`run` with its keywords as ``options`` (or as ``keywords``): validate,
    plan, build, drive.

    The internal entry of tests and benches that compare the two paths of a
    plan choice: ``turned_off`` names choices of
    :class:`~garaphpy.scheduler.plan.CpuPlan` (:data:`~garaphpy.scheduler.plan.CPU_CHOICES`),
    of :class:`~garaphpy.scheduler.gpu.plan.GpuPlan`
    (:data:`~garaphpy.scheduler.plan.GPU_CHOICES`) and of the run
    (:data:`~garaphpy.scheduler.plan.RUN_CHOICES`) made off, and the choices
    that depend on them are made as they would be without them.  Not a user
    setting: a user's run turns nothing off.
    """
    options = options if options is not None else RunOptions(**keywords)
    turned_off = check_turned_off(turned_off)
    with CompileClock() as clock:
        return _execute(graph, program, options, turned_off, clock)


def _execute(graph, program, options: RunOptions, turned_off, clock: CompileClock) -> Result:
    """:func:`execute` with numba's compilation timed apart by ``clock``."""
    if options.client is not None or options.scheduler is not None:
        return _execute_partitioned(graph, program, options, clock, turned_off)
    setup_started = time.perf_counter()
    run_ = _validated(graph, program, options, turned_off)
    graph, program = run_.graph, run_.program
    checkpoints = _checkpointer(run_, graph, program)
    previous_threads = numba.get_num_threads()
    numba.set_num_threads(run_.threads)
    compiling = _numba_setup.KeptInterrupts()   # until the engines are compiled
    engine = pages = resumed = None
    try:
        if "weight" in _uses(program) and not graph.weighted:
            raise ConfigError(f"{type(program).__name__}.gather reads the edge weight, and the "
                              "graph has none")
        if checkpoints is not None:
            resumed = checkpoints.open(options.resume, options.execution is not None)
        if resumed is not None:     # the checkpoint's own, where the run asked for none
            run_.execution = checkpoints.identity["execution"]
        pages = page_source(graph.store, run_.mode, options.host_memory, options.read_ratio,
                            options.readahead_bytes)
        if pages.reads_storage and options.threads is None:
            run_.threads = _threads_beside_readers(run_.threads,
                                                   len(graph.store.storage_dirs))
            numba.set_num_threads(run_.threads)
        plan, cpu_parts = _plan(run_, pages, options.policy, turned_off)
        copied_page_bytes = set_up_choice.gpu_copied_bytes(graph.store, options.gpu_memory)
        engine, plan = _build(plan, run_, pages, cpu_parts, options)
        compiling.check()
        if checkpoints is not None:
            checkpoints.attach(engine)      # restores the resumed state, if any
        if plan.mode == "gpu":
            # the GPU alone runs no CPU kernel between its iterations: the team of the
            # set-up's parallel loops (the frontier's flags) would spin beside them
            _numba_setup.release_thread_team()
        setup_compile_seconds = clock.seconds
        setup_seconds = time.perf_counter() - setup_started - setup_compile_seconds
        if plan.mode != "cpu":
            _GPU_SET_UPS.note(type(program).__name__, setup_seconds, copied_page_bytes)
        _announce_compilation(clock, program, plan.mode)
        records, converged, stop_reason = _drive(engine, program, plan, checkpoints, options,
                                                 clock)
        if engine.cpu is not None and converged and not _built_in(program):
            engine.bring_host_current()     # the GPU may have run the last iterations
            _check_skipping_declarations(program, graph, engine.cpu.engine, len(records))
        if checkpoints is not None and not options.keep_checkpoints:
            checkpoints.run_completed()
    except Exception as error:
        compiling.raise_interrupt_behind(error)
        raise
    finally:
        compiling.restore()
        numba.set_num_threads(previous_threads)
        if checkpoints is not None:
            checkpoints.close()
        if engine is not None:
            engine.close()
        if pages is not None:
            pages.close()
    values = program.finalize(engine.values_to_host())     # a copy: the user's own
    if cpu_parts is not None:   # for the graph's later runs
        cpu_parts[1].buffers.give_back()
    result = Result(program=program, graph=graph, values=values, sources=run_.sources,
                    mode=plan.mode,
                    execution=plan.execution, converged=converged, stop_reason=stop_reason,
                    num_iterations=len(records), iterations=records,
                    seconds=sum(r.seconds for r in records), setup_seconds=setup_seconds,
                    compile_seconds=setup_compile_seconds
                    + sum(r.compile_seconds for r in records),
                    tolerance=plan.tolerance, max_iterations=plan.max_iterations,
                    resumed_from=None if resumed is None else str(resumed.path), plan=plan)
    return _reported(result, options)


def _reported(result: Result, options: RunOptions) -> Result:
    """``result``, its non-convergence warned about (or raised, on request)."""
    program, plan, records, converged = result.program, result.plan, result.iterations, \
        result.converged
    if not converged:
        message = (f"{type(program).__name__} did not converge in {plan.max_iterations} "
                   f"iterations ({records[-1].activated if records else 0} vertices still "
                   "active)")
        if options.raise_on_nonconvergence:
            raise NotConvergedError(message)
        warnings.warn(message, NotConvergedWarning, stacklevel=caller_stacklevel())
    return result


#: Options a partitioned run over a Dask cluster does not take, and why.
_NOT_PARTITIONED = {
    "resume": "it restarts lost partitions from its own checkpoints",
    "checkpoint_pages": "it checkpoints between iterations",
    "policy": "each worker pulls on one processor, its GPU where its resources name one",
}


def _execute_partitioned(graph, program, options: RunOptions, clock: CompileClock,
                         turned_off=frozenset()) -> Result:
    """A run partitioned over the workers of a Dask cluster (:mod:`garaphpy.distributed`):
    validated as any run, then planned, built and driven by the cluster (``turned_off``:
    the plan choices of :func:`execute` it weighs, ``float32_contributions``)."""
    from .distributed.run import run_mode, run_partitioned

    for name, reason in _NOT_PARTITIONED.items():
        if getattr(options, name) not in (None, False):
            raise ConfigError(f"{name}: not taken by a run over a Dask cluster ({reason})")
    if options.execution == "async" or options.direction == "notify-pull":
        name, value = ("execution", "async") if options.execution == "async" \
            else ("direction", "notify-pull")
        raise ConfigError(f"{name}={value!r}: a run over a Dask cluster is synchronous and "
                          "pulls every iteration")
    started = time.perf_counter()
    run_ = _validated(graph, program, dataclasses.replace(options, mode="cpu"))
    graph, program = run_.graph, run_.program
    if "weight" in _uses(program) and not graph.weighted:
        raise ConfigError(f"{type(program).__name__}.gather reads the edge weight, and the "
                          "graph has none")
    outcome = run_partitioned(
        graph, program, run_.sources, client=options.client, scheduler=options.scheduler,
        partitions=options.partitions, threads=options.threads,
        max_iterations=run_.max_iterations, tolerance=run_.tolerance,
        checkpoint_every=options.checkpoint_every, checkpoint_dir=options.checkpoint_dir,
        keep_checkpoints=options.keep_checkpoints, on_iteration=options.on_iteration,
        program_cache=str(_program_cache_directory()), mode=options.mode,
        turned_off=turned_off)
    records = outcome.records
    mode = run_mode(p["processor"] for p in outcome.description["partitions"])
    plan = RunPlan(mode=mode, execution="sync", direction="pull",
                   max_iterations=run_.max_iterations, tolerance=run_.tolerance,
                   threads=run_.threads, distributed=outcome.description)
    result = Result(program=program, graph=graph, values=program.finalize(outcome.values),
                    sources=run_.sources, mode=mode, execution="sync",
                    converged=outcome.converged, stop_reason=outcome.stop_reason,
                    num_iterations=len(records), iterations=records,
                    seconds=sum(r.seconds for r in records),
                    setup_seconds=max(0.0, time.perf_counter() - started - clock.seconds
                                      - sum(r.seconds for r in records)),
                    compile_seconds=clock.seconds,
                    tolerance=run_.tolerance, max_iterations=run_.max_iterations, plan=plan)
    return _reported(result, options)


@dataclasses.dataclass
class _ValidatedRun:
    """A run's options checked and resolved against the graph and the program."""

    graph: object
    program: VertexProgram
    resolved: RunOptions    # the checkpoint identity's: the program's defaults filled in
    mode: str
    execution: str
    direction: str
    max_iterations: int
    tolerance: float | None
    threads: int
    sources: np.ndarray     # internal ids
    gpu_set_up: dict | None = None   # the hybrid's choice to set the GPU up


def _validated(graph, program, options: RunOptions,
               turned_off=frozenset()) -> _ValidatedRun:
    """Check every option (one-line :class:`ConfigError` naming it) and the
    program's initial values; resolve the defaults from the program."""
    program = _program_instance(program)
    mode, policy = options.mode, options.policy
    if mode not in MODES:
        raise ConfigError(f"mode={mode!r}: expected one of {MODES}")
    if policy is not None and not isinstance(policy, HybridPolicy):
        raise ConfigError(f"policy: expected a garaphpy.HybridPolicy (or subclass), got "
                          f"{policy!r}")
    execution = decisions.run_execution(options.execution, default_execution(program))
    if execution not in EXECUTIONS:
        raise ConfigError(f"execution={execution!r}: expected one of {EXECUTIONS}")
    if options.direction not in DIRECTIONS:
        raise ConfigError(f"direction={options.direction!r}: expected one of {DIRECTIONS}")
    per_iteration = apply_reads_per_iteration(program)
    if options.direction == "notify-pull" and per_iteration:
        raise ConfigError(f"direction='notify-pull': {type(program).__name__}.apply reads "
                          f"{per_iteration}, which may change every vertex each iteration; "
                          "only a pull computes them (use 'pull' or 'auto')")
    max_iterations = options.max_iterations
    max_iterations = program.max_iterations if max_iterations is None else max_iterations
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) \
            or not 1 <= max_iterations <= MAX_ITERATIONS:
        raise ConfigError(f"max_iterations={max_iterations!r}: expected an integer from 1 "
                          f"to {MAX_ITERATIONS}")
    tolerance = run_tolerance(program, options.tolerance)
    threads = _threads(options.threads, graph.num_edges)
    if program.needs_weights and not graph.weighted:
        raise ConfigError(f"{type(program).__name__} needs edge weights, and the graph has none")
    outside = graph.store.weight_domain_error(program.weight_domain, type(program).__name__)
    if outside is not None:
        raise outside
    if program.needs_undirected and graph.directed:
        graph = graph.as_undirected()
    source_vertices = _source_vertices(graph, program, options.sources)
    with _numba_setup.KeptInterrupts():
        _check_initial_values(graph, program, source_vertices, parallel=threads > 1)
    resolved = dataclasses.replace(options, execution=execution, max_iterations=max_iterations,
                                   tolerance=tolerance, sources=source_vertices)
    gpu_set_up = None
    if mode == "hybrid":
        gpu_set_up = _gpu_set_up_choice(graph, program, options, threads, max_iterations,
                                        tolerance, turned_off)
        mode = "cpu" if gpu_set_up is not None and not gpu_set_up["choice"] \
            else _hybrid_or_fallback()
        if mode == "hybrid" and gpu_set_up is not None and options.policy is None \
                and options.direction == "auto":
            mode = set_up_choice.gpu_alone_mode(graph, options.gpu_memory, gpu_set_up)
    return _ValidatedRun(graph, program, resolved, mode, execution, options.direction,
                         max_iterations, tolerance, threads, source_vertices, gpu_set_up)


def _gpu_set_up_choice(graph, program, options: RunOptions, threads: int,
                       max_iterations: int, tolerance: float | None,
                       turned_off) -> dict | None:
    """A hybrid run's first choice, before cupy is imported
    (:func:`set_up_choice.weigh_gpu_set_up`, with this process's measured
    set-ups); None where the run does not weigh it (``turned_off``
    ``"gpu_set_up"``, or a policy that does not choose per run)."""
    policy = options.policy
    if "gpu_set_up" in turned_off or (policy is not None and not policy.chooses_per_run):
        return None
    return set_up_choice.weigh_gpu_set_up(
        graph, type(program).__name__, options, threads, max_iterations, tolerance,
        weighted=bool(graph.weighted and "weight" in _uses(program)),
        shortcut_labels=bool(program.shortcut_labels),
        final_once_set=bool(program.final_once_set), measured=_GPU_SET_UPS)


#: What this process measured of its GPU set-ups.
_GPU_SET_UPS = set_up_choice.MeasuredSetUps()


def _plan(run_: _ValidatedRun, pages, policy, turned_off) -> tuple[RunPlan, tuple | None]:
    """The run's plan (:mod:`garaphpy.scheduler.plan`), and what the CPU's part
    was made from (its compiled program and graph arrays; None on the GPU alone)."""
    from .scheduler.cpu_state import GraphArrays, RunBuffers

    graph, program = run_.graph, run_.program
    cpu_plan = cpu_parts = None
    if run_.mode != "gpu":
        compiled = _compiled_program(program, parallel=run_.threads > 1)
        # the graph's runs in memory lend each other their per-vertex buffers
        buffers = RunBuffers(None if pages.reads_storage else graph.store.vertex_buffers,
                             run_.threads)
        arrays = GraphArrays.from_graph(graph, run_.sources,
                                        "weighted_in_degree" in _uses(program), pages,
                                        reads_weights="weight" in _uses(program),
                                        buffers=buffers)
        cpu_plan = plan_cpu(program, compiled, arrays, mode=run_.mode,
                            synchronous=run_.execution == "sync", threads=run_.threads,
                            tolerance=run_.tolerance, symmetric=not graph.directed,
                            policy_batches=policy is None or policy.batches,
                            turned_off=turned_off)
        cpu_parts = (compiled, arrays)
    plan = RunPlan(mode=run_.mode, execution=run_.execution, direction=run_.direction,
                   max_iterations=run_.max_iterations, tolerance=run_.tolerance,
                   threads=run_.threads,
                   pages=_pages_line(pages),
                   cpu=cpu_plan, turned_off=check_turned_off(turned_off),
                   gpu_set_up=run_.gpu_set_up)
    return plan, cpu_parts


def _pages_line(pages) -> str:
    """The run plan's ``pages``: in memory, or from storage with the disk speed
    the read-ahead was sized by (:func:`garaphpy.storage.host_budget.plan_run_pages`)."""
    if not pages.reads_storage:
        return "in memory"
    plan = pages.plan
    speed = plan.disk_bytes_per_s
    if speed is None:
        return "from storage"
    return (f"from storage (read-ahead {plan.readahead_pages} pages a reader, "
            f"disk {speed / 1e9:.2f} GB/s)")


def _build(plan: RunPlan, run_: _ValidatedRun, pages, cpu_parts,
           options: RunOptions) -> tuple:
    """The engines of ``plan`` behind one :class:`~garaphpy.scheduler.driver.Driver`:
    the CPU alone, the GPU alone, or both; and ``plan`` with the GPU's choices,
    made at its engine's set-up (:attr:`RunPlan.gpu`)."""
    from .scheduler.driver import Driver

    program = run_.program
    # the graph's runs share 0..|V|-1 (read only, like every frontier)
    initially_active = (run_.graph.store.vertex_range
                        if program.initially_active == "all" else run_.sources.copy())
    cpu_engine = gpu_engine = None
    if plan.cpu is not None:
        cpu_engine = build_cpu_engine(plan, program, *cpu_parts, initially_active)
    if plan.mode != "cpu":
        gpu_engine = _build_gpu_engine(plan, run_, pages, options, initially_active)
    if gpu_engine is not None:
        plan = plan.with_gpu(gpu_engine.gpu_plan)
    if plan.mode != "hybrid":
        return Driver(cpu_engine, gpu_engine), plan
    return Driver(cpu_engine, gpu_engine, options.policy,
                  cpu_alone=_cpu_alone(plan, run_, cpu_parts, initially_active)), plan


def _cpu_alone(plan: RunPlan, run_: _ValidatedRun, cpu_parts, initially_active: np.ndarray):
    """A hybrid run's CPU alone (:class:`~garaphpy.scheduler.run_choice.CpuAlone`):
    its plan's shortcuts, the graph's shape, the out-edge CSR it would read
    from the store's files where its notifications or union-find start use
    it, and its engine, planned for the CPU alone over the run's compiled
    program and graph arrays, made when the per-run choice first hands the
    run to it."""
    from .scheduler.run_choice import CpuAlone
    from .storage.read_ratio import disk_read_speed

    compiled, arrays = cpu_parts
    alone = plan_cpu(run_.program, compiled, arrays, mode="cpu", synchronous=plan.synchronous,
                     threads=run_.threads, tolerance=run_.tolerance,
                     symmetric=not run_.graph.directed, turned_off=plan.turned_off)
    alone_plan = dataclasses.replace(plan, mode="cpu", cpu=alone, gpu=None)
    first = initially_active.copy()
    reads_out_edges = alone.union_find_start or (alone.notify_pull and run_.tolerance is None)
    store = run_.graph.store
    return CpuAlone(num_vertices=arrays.num_vertices,
                    edge_arrays=(arrays.out_offsets, arrays.out_targets) if reads_out_edges
                    else (),
                    read_speed=lambda: disk_read_speed(store.storage_dirs[0]),
                    in_degree_skew=run_.graph.store.in_degree_skew,
                    union_find_start=alone.union_find_start,
                    gpu_union_find_start=bool(plan.gpu is not None
                                              and plan.gpu.union_find_start),
                    build=lambda: build_cpu_engine(alone_plan, run_.program, compiled, arrays,
                                                   first))


def build_cpu_engine(plan: RunPlan, program: VertexProgram, compiled, arrays,
                     initially_active: np.ndarray):
    """The CPU engine of ``plan`` over ``arrays``, its frontier ``initially_active``,
    its kernels compiled for the first iterations; a user's declarations that
    the plan relies on probed first."""
    from .scheduler.cpu_engine import CpuEngine
    from .scheduler.cpu_state import RunState

    state = RunState(arrays, compiled, plan.synchronous,
                     find_initial_value=plan.cpu.early_exit)
    state.frontier = initially_active
    if plan.cpu.shortcut_labels and not _built_in(program):
        _check_shortcut_labels(program, compiled, arrays.attrs, arrays.weights,
                               arrays.attrs[3], state.values)
    if plan.cpu.value_priority and plan.cpu.priority_push \
            and not _built_in(program):
        _check_apply_keeps_best(program, compiled)
    engine = CpuEngine(arrays, compiled, state, plan.cpu)
    # hybrid runs probe and time both directions, and hand the CPU's batches the
    # iterations it runs alone: compile those first
    if plan.mode == "hybrid":
        engine.warm_up(("pull", "notify-pull") + (("batch",) if engine.batches else ()))
    else:
        engine.warm_up(None if plan.direction == "auto" else (plan.direction,))
    return engine


def _build_gpu_engine(plan: RunPlan, run_: _ValidatedRun, pages, options: RunOptions,
                      initially_active: np.ndarray):
    """The GPU engine of ``plan`` (its choices made at set-up, into its
    ``gpu_plan``: :func:`~garaphpy.scheduler.gpu.plan.plan_gpu`, with the
    plan's choices turned off), its frontier ``initially_active``; a user's
    declarations probed first."""
    from .scheduler.gpu_engine import GpuEngine

    graph, program, mode = run_.graph, run_.program, plan.mode
    gpu_engine = GpuEngine(graph, program, run_.sources, plan.synchronous,
                           gpu_memory=options.gpu_memory, n_streams=options.n_streams,
                           page_source=pages,
                           turned_off=plan.turned_off & frozenset(GPU_CHOICES))
    if mode == "gpu" and not gpu_engine.plan.resident:
        # the GPU's kept pages never come from the host again: the host cache holds others
        pages.hold_elsewhere(np.flatnonzero(gpu_engine.kept_pages))
    if not gpu_engine.plan.resident:
        # the packed images the GPU streams from pinned host memory take the host's room
        pages.hold_here(gpu_engine.host_held_pages())
    gpu_engine.set_frontier(initially_active)
    shortcut = decisions.shortcut_labels(program.shortcut_labels, mode,
                                         config.GPU_SHORTCUT_LABELS, processor="gpu")
    if (shortcut or gpu_engine.gpu_plan.union_find_start) and not _built_in(program):
        # both rely on the declaration: built-in programs' functions are tested; a
        # user's are probed on the CPU
        degree = graph.store.out_degree.dtype
        attr_types = (degree, degree, np.float64, np.int64, np.bool_)
        _check_shortcut_labels(
            program, _compiled_program(program, parallel=False),
            tuple(np.zeros(1, t) for t in attr_types), np.zeros(1), graph.original_id_array,
            gpu_engine.values_to_host())
    if shortcut:
        gpu_engine.enable_shortcut_labels(graph.original_id_array)
    if mode == "gpu" and gpu_engine.push_entry["choice"] and not _built_in(program):
        _check_apply_keeps_best(program, _compiled_program(program, parallel=False))
    return gpu_engine


def _announce_compilation(clock: CompileClock, program: VertexProgram, mode: str) -> None:
    """Log the set-up's compilation as a step of its own (INFO), when it took time."""
    if clock.seconds >= config.COMPILE_SHOWN_AFTER_SECONDS:
        processor = {"cpu": "the CPU", "gpu": "the GPU"}.get(mode, "the CPU and the GPU")
        progress.logger("compile").info(clock.describe(f"{type(program).__name__} for "
                                                       f"{processor}"))


def _checkpointer(run_, graph, program):
    """The run's checkpoints (:func:`garaphpy.scheduler.checkpoint.for_run`), or
    None; the checkpoint machinery is imported only by a run with a checkpoint
    option set (with none, ``for_run`` has nothing to refuse and returns None)."""
    options = run_.resolved
    if (options.checkpoint_dir is None and options.checkpoint_every is None
            and options.checkpoint_pages is None and options.resume is False):
        return None
    from .scheduler import checkpoint

    return checkpoint.for_run(options, graph=graph, program=program, threads=run_.threads)


def _drive(engine, program: VertexProgram, plan: RunPlan, checkpoints, options: RunOptions,
           clock: CompileClock | None = None):
    """The iterations, until the run stops (:func:`_iterate`); Ctrl-C (and
    ``stop_signals``) end the iteration and write a checkpoint where they are on;
    Python's cyclic garbage collector waits meanwhile."""
    with (checkpoints.interrupts_at_iteration_end(options.stop_signals)
          if checkpoints is not None else _numba_setup.KeptInterrupts()), \
            _collections_paused():
        return _iterate(engine, program, plan.max_iterations, plan.tolerance,
                        plan.direction, options.on_iteration, checkpoints, clock)


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


def _built_in(program: VertexProgram) -> bool:
    """Whether ``program`` is one of garaphpy's own (its declarations are
    tested, not probed at each run; a user's subclass is the user's)."""
    return type(program).__module__.startswith("garaphpy.programs")


def _check_shortcut_labels(program, compiled, attrs, weights, ids: np.ndarray,
                           initial: np.ndarray) -> None:
    """A user's declaration of ``shortcut_labels`` checked before a run shortcuts
    labels: every initial value is the vertex's own user id (``ids``),
    ``gather`` passes a label on unchanged and ``apply`` keeps the smaller of
    two (on probe labels, through the CPU-compiled ``compiled``; None skips
    the probes).  The class's declarations were checked when it was defined.

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
                          stacklevel=caller_stacklevel())
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
                      "each other)", ThreadsCappedWarning,
                      stacklevel=caller_stacklevel())
        return available
    return threads


@contextlib.contextmanager
def _collections_paused():
    """Python's cyclic garbage collector off inside (a pass over every object
    in the middle of an iteration would be its time), as it was after."""
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _iterate(engine, program, max_iterations, tolerance, direction, on_iteration,
             checkpoints=None, clock: CompileClock | None = None):
    """The iterations; each record's ``seconds`` leave out the compilation
    ``clock`` measured during it (its ``compile_seconds``)."""
    # a resumed run continues the numbering after the checkpoint's iterations
    records = checkpoints.records() if checkpoints is not None else []
    if checkpoints is not None:
        checkpoints.track(records)
    loop = _Iterations(program, tolerance, direction, on_iteration, checkpoints, clock, records,
                       max_iterations)
    stopped = loop.run(engine, max_iterations)
    if stopped is not None:
        return records, True, stopped
    if engine.num_active() == 0:
        return records, True, "no active vertex"
    return records, bool(program.run_until_limit), "iteration limit"


@dataclasses.dataclass
class _Iterations:
    """The iteration loop of one run, over a driver's engine interface; a
    hybrid driver that hands a stretch of iterations to one processor alone
    (its ``stretch``: :meth:`RunAlone.stretch
    <garaphpy.scheduler.run_choice.RunAlone.stretch>`) has the stretch run by
    this same loop over that processor's own driver, as its mode would."""

    program: VertexProgram
    tolerance: float | None
    direction: str
    on_iteration: Any
    checkpoints: Any
    clock: CompileClock | None
    records: list
    max_iterations: int

    def run(self, engine, end: int, stretch=None) -> str | None:
        """Iterations on ``engine`` until ``end`` (or, in ``stretch``, until
        the frontier crosses its switch point); returns why the run stopped
        (None: it did not)."""
        records, clock, checkpoints = self.records, self.clock, self.checkpoints
        tolerance, on_iteration = self.tolerance, self.on_iteration
        rho = engine.rho
        pages = engine.page_source
        num_edges = engine.num_edges
        every = checkpoints.every if checkpoints is not None else 0
        hands_over = getattr(engine, "stretch", None) if stretch is None else None
        iteration = len(records)
        first = iteration
        while iteration < end:
            started = time.perf_counter()
            compiled_before = clock.seconds if clock is not None else 0.0
            active_vertices = engine.num_active()
            if active_vertices == 0:
                return "no active vertex"
            active_edges, prefix = engine.active_out_edges()
            direction = decisions.iteration_forced_direction(
                self.direction, iteration, self.program.initially_active)
            # a batch ends at the next checkpoint, so that checkpoints stay where they are due
            steps = end - iteration if direction == self.direction else 1
            if every:
                steps = min(steps, every - iteration % every)
            if stretch is not None and iteration > first and stretch.crossed(active_edges):
                return None
            handed = (hands_over(iteration, self.max_iterations - iteration, active_edges)
                      if hands_over is not None else None)
            if handed is not None:
                try:
                    stopped = self.run(handed.driver, min(end, handed.end), handed)
                finally:
                    handed.done(records[iteration:])
                if stopped is not None:
                    return stopped
                iteration = len(records)
                continue
            batch = engine.iterate_batch(iteration, steps, tolerance, active_edges, direction)
            if batch:
                compiling = (clock.seconds if clock is not None else 0.0) - compiled_before
                seconds = (time.perf_counter() - started - compiling) / len(batch)
                batch[0].compile_seconds = compiling
                if stretch is not None and iteration == first:
                    stretch.note(batch[0])
                for record in batch:
                    record.seconds = seconds
                    records.append(record)
                    if on_iteration is not None:
                        on_iteration(record)
                iteration += len(batch)
                # a step in buckets of values changes one bucket: not a convergence test
                if tolerance is not None and batch[-1].l1_change < tolerance \
                        and "value_priority" not in batch[-1].decisions:
                    return "tolerance"
                if checkpoints is not None and iteration < self.max_iterations \
                        and engine.num_active():
                    checkpoints.after_iteration(engine, records)
                continue
            f = decisions.active_fraction(active_edges, num_edges)
            record = IterationRecord(iteration=iteration, mode=engine.mode, direction="pull",
                                     forced=direction != "auto", active_fraction=f, rho=rho,
                                     active_vertices=active_vertices)
            engine.decide(record, direction)
            aggregates = engine.aggregates(iteration)
            read_before, dropped_before = pages.bytes_read, pages.bytes_dropped
            engine.iterate(record, prefix, aggregates)
            placed = pages.end_iteration()      # a revision stops the read-ahead it makes idle
            record.bytes_read = pages.bytes_read - read_before
            record.bytes_dropped = pages.bytes_dropped - dropped_before
            if placed is not None:
                record.decisions["host_pages"] = placed
            record.compile_seconds = ((clock.seconds if clock is not None else 0.0)
                                      - compiled_before)
            record.seconds = time.perf_counter() - started - record.compile_seconds
            if stretch is not None and iteration == first:
                stretch.note(record)
            records.append(record)
            if on_iteration is not None:
                on_iteration(record)
            if tolerance is not None and record.l1_change < tolerance:
                return "tolerance"
            iteration += 1
            if checkpoints is not None and iteration < self.max_iterations \
                    and engine.num_active():
                checkpoints.after_iteration(engine, records)
        return None
