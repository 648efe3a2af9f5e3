"""Command line: ``python -m garaphpy.run CONFIG.toml [--set KEY=VALUE ...]``.

The implementation behind ``python -m garaphpy.run`` (garaphpy/run.py is a
thin entry that keeps ``garaphpy.run`` the library function).

Reads and validates the configuration (garaphpy.configfile), preprocesses
the graph into a store or reuses an up-to-date one (Garaph sections 2.1-2.2,
6.5), prints the graph summary, and, when ``[run] program`` is set, runs it,
writes the values in the user's ids and the per-iteration records, and
prints a summary (``--verify`` checks the result by an independent method).

With checkpoints on (``[run] checkpoint_every`` or ``checkpoint_dir`` set,
Garaph section 2.2), ``--resume`` continues the run from its newest valid
checkpoint, and Ctrl-C, SIGTERM or SIGHUP stops at the end of the current
iteration, writes a checkpoint and prints the command that resumes.  The
checkpoints are removed only once the values and the records are written
and synced, so a kill at any moment leaves a run that resumes.

The output paths and the checkpoint directory are checked before the graph
is loaded, so that an unwritable one does not throw a finished run away.

Exit codes: 0 success; 1 bad input, store, program, checkpoint or an output
that cannot be written; 2 bad command line or configuration; 3 the run did
not converge (results are still written); 4 verification failed; 130
interrupted by Ctrl-C, 143 by SIGTERM, 129 by SIGHUP (with checkpoints on,
after writing one).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import re
import shlex
import signal
import sys
import threading
import time
from pathlib import Path

from .configfile import SCHEMA, load_config, user_path
from .errors import ConfigError, GaraphError, OutputError, RunInterrupted, SignalInterrupt
from .options import BuildOptions, RunOptions, config_values
from .paths import cache_directory
from .progress import log_to_stderr

#: Signals the command line handles as Ctrl-C (a checkpoint, then the exit 128 + signal).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: The exit codes of a run those signals stopped (128 + the signal's number).
INTERRUPT_EXIT_CODES = frozenset(128 + int(number) for number in STOP_SIGNALS)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m garaphpy.run",
        description="Preprocess a graph into a Garaph store and run on it.")
    parser.add_argument("config", help="configuration file (TOML)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="override a configuration key, e.g. --set store.n_streams=8 "
                             "or --set graph=rmat:16 (repeatable)")
    parser.add_argument("--rebuild", action="store_true",
                        help="preprocess again even if an up-to-date store exists")
    parser.add_argument("--store-verify", metavar="LEVEL",
                        choices=("auto", "full", "quick", "sizes", "none"),
                        help="how a reused store is checked (store.verify): auto, full, "
                             "quick, sizes, none")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--verify", action="store_true",
                        help="check the result with the program's independent verifier")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run partitioned over the workers of the Dask scheduler at "
                             "ADDRESS, e.g. tcp://host:8786 ([run] scheduler; needs "
                             "pip install garaphpy[dask])")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run from its newest valid checkpoint "
                             "([run] checkpoint_dir, by default beside the values)")
    return parser


def graph_from_config(settings: dict, progress: bool = True, rebuild: bool = False):
    """Load (or preprocess) the graph a validated configuration names."""
    from . import generators
    from .graph import Graph

    inputs = settings["input"]
    stored = settings["store"]
    generator_keys = ("seed", "weighted", "edge_factor", "max_weight")
    generator_options = {k: inputs[k] for k in generator_keys if inputs[k] is not None}
    spec = settings[""]["graph"]
    is_generator = generators.parse_generator_spec(spec, generator_options) is not None
    hash_max_weight = None
    if inputs["weights"] == "hash" and not is_generator:
        hash_max_weight = generator_options.pop("max_weight", None)
    if not is_generator:
        if generator_options:
            raise ConfigError(f"input.{next(iter(generator_options))} applies to generators "
                              f"only, and graph = {spec!r} is a file")
        # absolute, not resolved: messages name the user's path, not a link's target
        spec = user_path(spec, "graph", Path(settings.get("_base_dir", ".")))
    return Graph.load(
        spec, store=stored["path"], format=inputs["format"],
        generator_options=generator_options if is_generator else None,
        rebuild=rebuild or stored["rebuild"], progress=progress,
        weights=inputs["weights"], max_weight=hash_max_weight, store_verify=stored["verify"],
        **config_values(BuildOptions, settings))


def graph_variant_name(settings: dict) -> str:
    """The graph's part of default output names: the input's name plus every
    input option that changes the edges or their weights, so that variants
    of one graph (weighted or not, another seed, symmetrized, ...) never
    share a file: ``rmat-16``, ``rmat-16-weighted``, ``web-NotreDame-weights-hash``."""
    graph_name = Path(str(settings[""]["graph"])).name.split(".")[0] or "graph"
    parts = [graph_name.replace(":", "-")]
    inputs = settings["input"]
    for key in ("weights", "weighted", "seed", "edge_factor", "max_weight", "directed",
                "self_loops", "duplicates", "weight_dtype"):
        value = inputs[key]
        if value is None or value == SCHEMA["input"][key].default:
            continue
        if isinstance(value, bool):
            parts.append(key if value else f"un{key}")
        else:
            parts.append(f"{key.replace('_', '')}-{value}")
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(parts))


def _output_paths(settings: dict, program_name: str) -> tuple[Path, Path]:
    output = settings["output"]
    graph_name = graph_variant_name(settings)
    base = Path(settings.get("_base_dir", ".")) / "results"
    values = Path(output["values"]) if output["values"] else \
        base / f"{graph_name}.{program_name}.txt"
    iterations = Path(output["iterations"]) if output["iterations"] else \
        values.with_name(values.name.rsplit(".", 1)[0] + ".iterations.jsonl")
    return values, iterations


def checkpoint_directory(settings: dict, values_path: Path, resume: bool) -> Path | None:
    """Where the run's checkpoints go; None when checkpoints are off.

    On when ``[run] checkpoint_dir`` or ``checkpoint_every`` is set, or on
    ``--resume``; the default directory is beside the values file:
    ``results/rmat-20.pagerank.txt`` -> ``results/rmat-20.pagerank.checkpoints/``.
    """
    options = settings["run"]
    if options["checkpoint_dir"] is not None:
        return Path(options["checkpoint_dir"])
    if options["checkpoint_every"] is None and options["checkpoint_pages"] is None \
            and not resume:
        return None
    return values_path.with_name(values_path.name.rsplit(".", 1)[0] + ".checkpoints")


def check_outputs(settings: dict, resume: bool = False) -> None:
    """Refuse, before any work, output paths and a checkpoint directory that
    cannot be written (naming the key; nothing is created)."""
    from .output import check_writable

    values_path, iterations_path = _output_paths(settings, settings["run"]["program"])
    check_writable(values_path, "output.values")
    check_writable(iterations_path, "output.iterations")
    checkpoint_dir = checkpoint_directory(settings, values_path, resume)
    if checkpoint_dir is not None:
        check_writable(checkpoint_dir, "run.checkpoint_dir", directory=True)
    _refuse_shared_paths([("output.values", values_path), ("output.iterations", iterations_path),
                          ("run.checkpoint_dir", checkpoint_dir),
                          ("store.path", settings["store"]["path"])])


def _refuse_shared_paths(named: list) -> None:
    """ConfigError naming both keys where two outputs are one file: the same
    name in the same directory once the directories' links are resolved (a
    link at the name itself is replaced, so it is a path of its own)."""
    seen: dict[str, str] = {}
    for key, path in named:
        if path is None:
            continue
        path = Path(path)
        where = os.path.join(os.path.realpath(path.parent), path.name)
        if where in seen:
            raise ConfigError(f"{key}: {path} is also {seen[where]}; give them different "
                              "paths")
        seen[where] = key


def check_cache(settings: dict) -> None:
    """Refuse, before any work, a store cache (``$GARAPHPY_CACHE``, where stores
    go when ``store.path`` is not set) that is not a directory and cannot be
    made one; an existing cache directory is left to the store to judge."""
    from .output import check_writable

    graph = Path(settings.get("_base_dir", ".")) / str(settings[""]["graph"])
    if settings["store"]["path"] is not None or graph.is_dir():
        return
    cache = cache_directory()
    if not cache.is_dir():
        name = "GARAPHPY_CACHE" if os.environ.get("GARAPHPY_CACHE") else "store cache"
        check_writable(cache, name, directory=True)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"garaphpy: warning: {message}", file=sys.stderr)


def run_from_config(settings: dict, graph, verify: bool, progress: bool,
                    resume: bool = False, trials: int = 1, random_source: bool = False) -> int:
    """Run the configured program; write and print its results; the exit code.

    With ``trials`` > 1 the program runs that many times on the one graph,
    each trial's time printed and their summary after (GAPBS's ``-n``); the
    last trial's values are written.  ``random_source`` draws each trial's
    source among the vertices with an out-edge (GAPBS's default source,
    :class:`garaphpy.trials.SourcePicker`).
    """
    import warnings

    from .api import NotConvergedWarning, run
    from .output import write_iterations, write_values
    from .progress import iteration_bar
    from .programs import get_program
    from .trials import SourcePicker, TrialReport

    options = settings["run"]
    program = get_program(options["program"], **options["constants"])
    values_path, iterations_path = _output_paths(settings, options["program"])

    bar = iteration_bar(options.get("max_iterations") or program.max_iterations, progress)

    def show(record):
        if bar is not None:
            bar.update(record.iteration + 1, record.direction)
        elif progress and record.seconds > 1.0:
            print(f"iteration {record.iteration}: {record.mode}, {record.direction}, "
                  f"f={record.active_fraction:.3g}, {record.seconds:.2f} s", file=sys.stderr)

    checkpoint_dir = checkpoint_directory(settings, values_path, resume)
    if trials > 1 and checkpoint_dir is not None:
        raise ConfigError("-n/--trials repeats the run and takes no checkpoints: drop "
                          "--resume and run.checkpoint_every / checkpoint_dir, or -n")
    picker = SourcePicker(graph) if random_source else None
    report = TrialReport(trials) if trials > 1 or random_source else None
    verify = verify or options["verify"]
    failed_trials = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotConvergedWarning)
        warnings.showwarning = _show_warning
        run_options = RunOptions(**{
            **config_values(RunOptions, settings), "checkpoint_dir": checkpoint_dir,
            # a partitioned run's checkpoints are its workers' own, removed as it ends
            "on_iteration": show, "resume": resume,
            "keep_checkpoints": settings["run"].get("scheduler") is None,
            "stop_signals": STOP_SIGNALS})
        keywords = run_options.keywords()
        for trial in range(trials):
            if picker is not None:
                keywords["sources"] = [picker.pick()]
            try:
                result = run(graph, program, **keywords)
            finally:
                if bar is not None:
                    bar.close()
            _DroppedInterrupts.check()
            if report is not None:
                report.add(result, keywords["sources"] if picker is not None else None)
            if verify and trial < trials - 1:      # the last one is verified below
                trial_report = program.verify(result.graph, result)
                print(trial_report)
                failed_trials += not trial_report.ok
    if report is not None and trials > 1:
        print(report.summary())
    try:
        write_values(values_path, result.original_ids(), result.values, result.value_name,
                     threads=options.get("threads"))
        write_iterations(iterations_path, result.iterations)
    except OutputError as error:
        from .scheduler.checkpoint import list_checkpoints

        if checkpoint_dir is not None and list_checkpoints(checkpoint_dir):
            raise OutputError(f"{error}; the run's checkpoints are kept in {checkpoint_dir}: "
                              "resume with --resume once it can be written") from None
        raise
    if checkpoint_dir is not None:       # only now: a kill before this resumes the run
        from .scheduler.checkpoint import discard

        discard(checkpoint_dir)
    print(result.summary())
    print(f"values: {values_path}")
    print(f"iterations: {iterations_path}")
    code = 0
    if not result.converged:
        print(f"garaphpy: warning: {type(program).__name__} did not converge within "
              f"{result.num_iterations} iterations", file=sys.stderr)
        code = 3
    if verify:
        last_report = program.verify(result.graph, result)
        print(last_report)
        if not last_report.ok or failed_trials:
            code = 4
    return code


@contextlib.contextmanager
def _stop_signals_as_interrupts():
    """SIGTERM and SIGHUP raise :class:`SignalInterrupt` (a KeyboardInterrupt)
    while inside, as Ctrl-C does; in the main thread only, never for a signal
    that is ignored (``nohup``); the previous handlers are back on leaving.
    Inside a run with checkpoints, :func:`garaphpy.run` takes them over to
    stop at the end of the iteration."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise SignalInterrupt(signum)

    previous = {number: signal.signal(number, interrupt) for number in STOP_SIGNALS[1:]
                if signal.getsignal(number) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


class _DroppedInterrupts:
    """Ctrl-Cs (and stop signals) that Python drops, kept for the CLI's phases.

    One that lands in a destructor or a ctypes callback outside garaphpy's
    compile guards (:class:`garaphpy._numba_setup.KeptInterrupts`) is reported
    as "Exception ignored" and dropped (numba's compiler and llvmlite's
    objects run both, at any time): the run went on and exited 0.  While
    installed (the main thread only), such a report is taken silently and
    remembered, and :meth:`check`, called between the CLI's phases (the graph
    loaded; the program run, before its results are written), raises it
    again.  Every other report goes to the previous hook, back on leaving.
    """

    #: the one installed, if any
    installed = None

    def __init__(self):
        self.signal_number = None
        self.previous = None

    def hook(self, unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            if self.signal_number is None:
                self.signal_number = getattr(unraisable.exc_value, "signal_number",
                                             signal.SIGINT)
            return
        self.previous(unraisable)

    def __enter__(self) -> "_DroppedInterrupts":
        if threading.current_thread() is threading.main_thread():
            self.previous, sys.unraisablehook = sys.unraisablehook, self.hook
            _DroppedInterrupts.installed = self
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if self.previous is not None:
            _DroppedInterrupts.installed = None
            # a hook installed since wraps this one (the forgiving of half-built
            # llvmlite objects after an interrupt): it stays, for the exit's collections
            if sys.unraisablehook == self.hook:
                sys.unraisablehook = self.previous

    @staticmethod
    def check() -> None:
        """Raise the interrupt a destructor or callback dropped, if one did."""
        dropped = _DroppedInterrupts.installed
        if dropped is None or dropped.signal_number is None:
            return
        number, dropped.signal_number = dropped.signal_number, None
        raise KeyboardInterrupt if number == signal.SIGINT else SignalInterrupt(number)


def _os_error_message(error: OSError) -> str:
    """One line for an OSError no specific check caught, naming its path."""

    path = error.filename
    if path is None:
        return f"{error.strerror or error}"
    where = f"{path}"
    cache = cache_directory()
    if os.environ.get("GARAPHPY_CACHE") and (Path(path) == cache or cache in Path(path).parents):
        where = f"GARAPHPY_CACHE={os.environ['GARAPHPY_CACHE']}: {path}"
    return f"{where}: {error.strerror or error}"


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = _parser().parse_args(argv)
    if args.store_verify is not None:
        args.overrides = [*args.overrides, f"store.verify={args.store_verify!r}"]
    if args.scheduler is not None:
        args.overrides = [*args.overrides, f"run.scheduler={args.scheduler!r}"]
    with log_to_stderr(quiet=args.quiet):
        return execute(args, lambda: load_config(args.config, args.overrides),
                       lambda: resume_command(args))


def execute(args: argparse.Namespace, load_settings, resume_hint) -> int:
    """Preprocess and run what ``load_settings()`` configures; the exit code.

    Shared by ``python -m garaphpy.run`` and the ``garaphpy`` console command
    (:mod:`garaphpy.console`), so both print, write and exit alike.

    Parameters
    ----------
    args : argparse.Namespace
        ``quiet``, ``verify``, ``rebuild`` and ``resume`` flags.
    load_settings : callable
        Returns the validated settings (:func:`garaphpy.configfile.validate_config`);
        its ConfigError exits 2 like any other.
    resume_hint : callable
        Returns the command line that resumes an interrupted run.
    """
    with _stop_signals_as_interrupts(), _DroppedInterrupts():
        return _execute(args, load_settings, resume_hint)


def _execute(args: argparse.Namespace, load_settings, resume_hint) -> int:
    started = time.perf_counter()
    try:
        settings = load_settings()
        if settings["run"]["program"] is not None:
            from .programs import get_program

            get_program(settings["run"]["program"], **settings["run"]["constants"])
            check_outputs(settings, args.resume)
            if settings["run"]["mode"] == "gpu":     # refused before the build, not after
                from .kernels.gpu import cupy_module

                cupy_module()
        check_cache(settings)
        graph = graph_from_config(settings, progress=not args.quiet, rebuild=args.rebuild)
        _DroppedInterrupts.check()
        print(graph.describe())     # the build logs it too, for library users
        print(f"store: {graph.store.path}")
        code = 0
        if settings["run"]["program"] is not None:
            code = run_from_config(settings, graph, args.verify, progress=not args.quiet,
                                   resume=args.resume, trials=getattr(args, "trials", 1),
                                   random_source=getattr(args, "random_source", False))
        elif args.verify or args.resume:
            raise ConfigError(f"{'--verify' if args.verify else '--resume'} needs a program "
                              "to run ([run] program = ...)")
    except ConfigError as error:
        print(f"garaphpy: error: {error}", file=sys.stderr)
        return 2
    except GaraphError as error:
        print(f"garaphpy: error: {error}", file=sys.stderr)
        return 1
    except RunInterrupted as interrupt:
        _keep_after_interrupt(interrupt)
        print(f"garaphpy: interrupted{_by(interrupt.signal_number)} after "
              f"{interrupt.iteration} iterations; checkpoint written to "
              f"{interrupt.checkpoint}", file=sys.stderr)
        print(f"garaphpy: resume with: {resume_hint()}", file=sys.stderr)
        return 128 + interrupt.signal_number
    except KeyboardInterrupt as interrupt:
        _keep_after_interrupt(interrupt)
        number = getattr(interrupt, "signal_number", signal.SIGINT)
        print(f"garaphpy: interrupted{_by(number)}", file=sys.stderr)
        return 128 + number
    except OSError as error:        # the last resort: one line, naming the path
        print(f"garaphpy: error: {_os_error_message(error)}", file=sys.stderr)
        return 1
    print(f"done in {time.perf_counter() - started:.2f} s")
    return code


#: Interrupts the command line handled, kept with their tracebacks (see
#: :func:`_keep_after_interrupt`).
_KEPT_AFTER_INTERRUPT: list[BaseException] = []


def _keep_after_interrupt(interrupt: BaseException) -> None:
    """After an interrupt, destroy nothing that existed when it came.

    An interrupt that lands while numba compiles can leave llvmlite objects
    whose native state is half made; destroying one can crash the process
    (SIGSEGV in ``ffi.ObjectRef.close``, after the "interrupted" line) where
    garaphpy should exit with 128 + the signal.  The interrupt is kept (its
    traceback holds the compiler's frames) and every object alive now leaves
    the garbage collector's reach (``gc.freeze``); the command's process
    exits soon after, without finalizing them (:func:`exit_after_interrupt`).
    Their destructors' noise is silenced too."""
    _KEPT_AFTER_INTERRUPT.append(interrupt)
    gc.freeze()
    _forgive_half_built_llvm_objects()


def exit_after_interrupt(code: int) -> None:
    """Exit with ``code`` now, after the exit handlers and a flush of the
    standard streams, without finalizing the objects an interrupt left
    (:func:`_keep_after_interrupt`); and, under ``python -m``, before the
    interpreter's own exit turns the status into a death by SIGINT (see
    :mod:`garaphpy.run`)."""
    import atexit

    atexit._run_exitfuncs()     # logging's shutdown among them
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _forgive_half_built_llvm_objects() -> None:
    """Silence the destructor noise of llvmlite objects an interrupt left half
    built (see :mod:`garaphpy._numba_setup`), without importing numba here:
    where it was never loaded, no such object exists."""
    numba_setup = sys.modules.get(f"{__package__}._numba_setup")
    if numba_setup is not None:
        numba_setup.forgive_half_built_llvm_objects()


def _by(signal_number: int) -> str:
    """`` by SIGTERM`` for a stop signal other than Ctrl-C's, else nothing."""
    if signal_number == signal.SIGINT:
        return ""
    return f" by {signal.Signals(signal_number).name}"


def resume_command(args: argparse.Namespace) -> str:
    """The command line that resumes the run ``args`` describes, from any directory."""
    command = [sys.executable, "-m", "garaphpy.run", str(Path(args.config).resolve())]
    for override in args.overrides:
        command += ["--set", override]
    command += [flag for flag, given in (("--quiet", args.quiet), ("--verify", args.verify))
                if given]
    return shlex.join(command + ["--resume"])


if __name__ == "__main__":
    sys.exit(main())
