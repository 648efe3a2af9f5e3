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
checkpoint, and Ctrl-C stops at the end of the current iteration, writes a
checkpoint and prints the command that resumes.

Exit codes: 0 success; 1 bad input, store, program or checkpoint; 2 bad
command line or configuration; 3 the run did not converge (results are still
written); 4 verification failed; 130 interrupted (with checkpoints on, after
writing one).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from .configfile import load_config
from .errors import ConfigError, GaraphError, RunInterrupted
from .progress import log_to_stderr


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
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--verify", action="store_true",
                        help="check the result with the program's independent verifier")
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
    if not is_generator:
        if generator_options:
            raise ConfigError(f"input.{next(iter(generator_options))} applies to generators "
                              f"only, and graph = {spec!r} is a file")
        base = Path(settings.get("_base_dir", "."))
        spec = str((base / Path(spec).expanduser()).resolve())
    return Graph.load(
        spec, store=stored["path"], format=inputs["format"],
        generator_options=generator_options if is_generator else None,
        rebuild=rebuild or stored["rebuild"], progress=progress,
        directed=inputs["directed"], self_loops=inputs["self_loops"],
        duplicates=inputs["duplicates"], weight_dtype=inputs["weight_dtype"],
        storage_dirs=stored["storage_dirs"], memory_budget=stored["memory_budget"],
        gpu_memory=stored["gpu_memory"], n_streams=stored["n_streams"],
        shared_memory_bytes=stored["shared_memory_bytes"],
        max_shard_edges=stored["max_shard_edges"], max_page_bytes=stored["max_page_bytes"],
        block_bytes=stored["block_bytes"])


def _output_paths(settings: dict, program_name: str) -> tuple[Path, Path]:
    output = settings["output"]
    graph_name = Path(str(settings[""]["graph"])).name.split(".")[0] or "graph"
    graph_name = graph_name.replace(":", "-")
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


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"garaphpy: warning: {message}", file=sys.stderr)


def run_from_config(settings: dict, graph, verify: bool, progress: bool,
                    resume: bool = False) -> int:
    """Run the configured program; write and print its results; the exit code."""
    import warnings

    from .api import NotConvergedWarning, run
    from .output import write_iterations, write_values
    from .programs import get_program

    options = settings["run"]
    program = get_program(options["program"], **options["constants"])
    values_path, iterations_path = _output_paths(settings, options["program"])

    def show(record):
        if progress and record.seconds > 1.0:
            print(f"iteration {record.iteration}: {record.mode}, {record.direction}, "
                  f"f={record.active_fraction:.3g}, {record.seconds:.2f} s", file=sys.stderr)

    checkpoint_dir = checkpoint_directory(settings, values_path, resume)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotConvergedWarning)
        warnings.showwarning = _show_warning
        result = run(graph, program, mode=options["mode"], execution=options["execution"],
                     max_iterations=options["max_iterations"], tolerance=options["tolerance"],
                     sources=options["sources"], threads=options["threads"],
                     direction=options["direction"], on_iteration=show,
                     gpu_memory=settings["store"]["gpu_memory"],
                     n_streams=settings["store"]["n_streams"],
                     checkpoint_dir=checkpoint_dir, checkpoint_every=options["checkpoint_every"],
                     checkpoint_pages=options["checkpoint_pages"],
                     resume=resume, host_memory=options["host_memory"],
                     read_ratio=options["read_ratio"],
                     readahead_bytes=options["readahead_bytes"])
    write_values(values_path, result.original_ids(), result.values)
    write_iterations(iterations_path, result.iterations)
    print(result.summary())
    print(f"values: {values_path}")
    print(f"iterations: {iterations_path}")
    code = 0
    if not result.converged:
        print(f"garaphpy: warning: {type(program).__name__} did not converge within "
              f"{result.num_iterations} iterations", file=sys.stderr)
        code = 3
    if verify or options["verify"]:
        report = program.verify(result.graph, result)
        print(report)
        if not report.ok:
            code = 4
    return code


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = _parser().parse_args(argv)
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
    started = time.perf_counter()
    try:
        settings = load_settings()
        if settings["run"]["program"] is not None:
            from .programs import get_program

            get_program(settings["run"]["program"], **settings["run"]["constants"])
        graph = graph_from_config(settings, progress=not args.quiet, rebuild=args.rebuild)
        print(graph.describe())     # the build logs it too, for library users
        print(f"store: {graph.store.path}")
        code = 0
        if settings["run"]["program"] is not None:
            code = run_from_config(settings, graph, args.verify, progress=not args.quiet,
                                   resume=args.resume)
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
        print(f"garaphpy: interrupted after {interrupt.iteration} iterations; checkpoint "
              f"written to {interrupt.checkpoint}", file=sys.stderr)
        print(f"garaphpy: resume with: {resume_hint()}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("garaphpy: interrupted", file=sys.stderr)
        return 130
    print(f"done in {time.perf_counter() - started:.2f} s")
    return code


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
