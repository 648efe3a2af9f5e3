"""The ``garaphpy`` console command: one-line runs, GAPBS-style, and the TOML form.

::

    garaphpy pagerank FILE                      # every built-in program is a subcommand
    garaphpy sssp FILE -r 7 --mode gpu          # -r/--source: GAPBS's -r
    garaphpy bfs FILE -r random -n 8            # 8 trials, each from a random source
    garaphpy cc rmat:16 --undirected --output cc.txt
    garaphpy run CONFIG.toml [--set KEY=VALUE ...] # exactly python -m garaphpy.run

A one-line run is the TOML form written as flags: the flags are turned into
the same configuration dict a TOML file gives (``graph``, ``[input]``,
``[store]``, ``[run]``, ``[output]``), each flag's value is checked by the
configuration schema's own key (:data:`garaphpy.configfile.SCHEMA`, messages
naming the flag), ``--set KEY=VALUE`` reaches any other key, and the whole is
validated by :func:`garaphpy.configfile.validate_config`.  It then runs
through :func:`garaphpy.cli.execute`, so preprocessing, results, files,
messages and exit codes are those of ``python -m garaphpy.run``: 0 success,
1 bad input, 2 bad arguments (one line on standard error), 3 not converged,
4 verification failed, 130 interrupted.  Relative paths are taken from the
current directory; default outputs go to ``results/<graph>.<program>.txt``.

The short flags follow GAPBS's where both have the option: ``-r`` the source
(``-r random``: a source drawn per trial among the vertices with an
out-edge, GAPBS's default), ``-n`` the trials (the program runs that many
times after one build, each trial's time printed, then their average), ``-s``
symmetrize (``--undirected``), ``-v`` verify.  ``-s`` was once the source;
it now means GAPBS's symmetrize, so an old ``-s 7`` stops with a usage error
(7 is no flag's value) instead of running.  A bad flag prints the error, then
the sub-command's usage, and exits 2.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from . import __version__
from .cli import INTERRUPT_EXIT_CODES, execute, exit_after_interrupt
from .cli import main as run_main
from .configfile import SCHEMA, apply_overrides, validate_config
from .errors import ConfigError
from .progress import log_to_stderr

#: The subcommands, one per built-in program (names as in ``[run] program``).
PROGRAM_COMMANDS = ("pagerank", "delta-pagerank", "sssp", "bfs", "cc", "sswp", "nn", "hs", "cs")

#: Flag destination -> (section, key) of the configuration it sets.
FLAG_KEYS = {
    "mode": ("run", "mode"),
    "execution": ("run", "execution"),
    "direction": ("run", "direction"),
    "sources": ("run", "sources"),
    "threads": ("run", "threads"),
    "max_iterations": ("run", "max_iterations"),
    "tolerance": ("run", "tolerance"),
    "constants": ("run", "constants"),
    "output": ("output", "values"),
    "iterations": ("output", "iterations"),
    "format": ("input", "format"),
    "weights": ("input", "weights"),
    "max_weight": ("input", "max_weight"),
    "directed": ("input", "directed"),
    "store": ("store", "path"),
    "store_verify": ("store", "verify"),
}


#: The value of ``-r``/``--source`` that draws a source per trial.
RANDOM_SOURCE = "random"


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, then its usage, and exit 2."""

    def error(self, message: str):
        self.exit(2, f"garaphpy: error: {message} (see {self.prog} --help)\n"
                     + self.format_usage())


def _source(text: str) -> int | str:
    if text == RANDOM_SOURCE:
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a vertex id or "
                                         f"{RANDOM_SOURCE!r}") from None


def _positive(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= 1")
    return number


def _constant(text: str) -> tuple[str, float | int]:
    name, separator, raw = text.partition("=")
    if not separator or not name.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=NUMBER, e.g. damping=0.9")
    for number in (int, float):
        try:
            return name.strip(), number(raw)
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(f"{text!r}: {raw!r} is not a number")


def _choices(section: str, key: str) -> tuple:
    return SCHEMA[section][key].choices


def _add_program_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("graph", metavar="FILE",
                        help="graph file (any supported format, optionally compressed) or a "
                             "generator such as rmat:16, grid:100x100")
    run = parser.add_argument_group("run")
    run.add_argument("-r", "--source", dest="sources", type=_source, action="append",
                     metavar="ID", help="source vertex in the file's own ids (repeatable), "
                                        "or 'random': one drawn per trial among the "
                                        "vertices with an out-edge (GAPBS's -r)")
    run.add_argument("-n", "--trials", type=_positive, default=1, metavar="N",
                     help="run the program N times after one build, printing each trial's "
                          "time and their average (default 1; GAPBS's -n)")
    run.add_argument("--mode", choices=_choices("run", "mode"),
                     help="processors (default hybrid: the CPU alone where no GPU is usable)")
    run.add_argument("--execution", choices=_choices("run", "execution"),
                     help="default: the program's")
    run.add_argument("--direction", choices=_choices("run", "direction"),
                     help="the direction (default auto: Garaph's switch on the CPU, the "
                          "sparse-pass rule on the GPU)")
    run.add_argument("--threads", type=int, metavar="N", help="CPU threads (default: every core)")
    run.add_argument("--max-iterations", type=int, metavar="N",
                     help="iteration limit (default: the program's)")
    run.add_argument("--tolerance", type=float, metavar="X",
                     help="stop once an iteration's L1 change is below X")
    run.add_argument("--constant", dest="constants", type=_constant, action="append",
                     metavar="NAME=VALUE", help="a program constant, e.g. damping=0.9 "
                                                "(repeatable)")
    run.add_argument("-v", "--verify", action="store_true",
                     help="check the result with the program's independent verifier")
    run.add_argument("--resume", action="store_true",
                     help="continue from the newest valid checkpoint")
    inputs = parser.add_argument_group("input and store")
    inputs.add_argument("--format", choices=_choices("input", "format"),
                        help="input format (default auto: detected from the content)")
    direction = inputs.add_mutually_exclusive_group()
    direction.add_argument("--directed", dest="directed", action="store_const", const=True,
                           help="read the edges as directed")
    direction.add_argument("-s", "--undirected", dest="directed", action="store_const",
                           const=False, help="read the edges as undirected (each in both "
                                             "directions; GAPBS's -s, symmetrize)")
    inputs.add_argument("--weights", choices=_choices("input", "weights"),
                        help="edge weights: the file's own (default), unit (1 per edge), or "
                             "hash (1..--max-weight hashed from the edge's ids, for weighted "
                             "programs on unweighted files)")
    inputs.add_argument("--max-weight", type=int, metavar="N",
                        help="the largest hashed weight (--weights hash; default 255)")
    inputs.add_argument("--store", metavar="DIR",
                        help="store directory (default: a cache directory keyed on the input)")
    inputs.add_argument("--rebuild", action="store_true",
                        help="preprocess again even if an up-to-date store exists")
    inputs.add_argument("--store-verify", metavar="LEVEL",
                        choices=("auto", "full", "quick", "sizes", "none"),
                        help="how a reused store is checked: auto (default: every checksum "
                             "the first time, the files' sizes while unchanged since), full, "
                             "quick, sizes or none")
    outputs = parser.add_argument_group("output")
    outputs.add_argument("-o", "--output", metavar="PATH",
                         help="values file, .txt or .npy (default "
                              "results/<graph>.<program>.txt)")
    outputs.add_argument("--iterations", metavar="PATH",
                         help="per-iteration records, JSON lines (default beside the values)")
    outputs.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="any other configuration key, as in python -m garaphpy.run, "
                             "e.g. --set input.self_loops=drop (repeatable)")


def _program_help(command: str) -> str:
    from .programs import program_class

    cls = program_class(command)
    first = (cls.__doc__ or cls.__name__).strip().splitlines()[0]
    needs = [what for what, needed in (("source vertices (--source)", cls.needs_sources),
                                       ("edge weights", cls.needs_weights)) if needed]
    return first + (f" Needs {' and '.join(needs)}." if needs else "")


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``garaphpy`` command's argument parser.

    Parameters
    ----------
    command : str, optional
        One of :data:`PROGRAM_COMMANDS`: the parser has that sub-command alone,
        which parses its arguments as the whole parser does and imports only
        its own program (each sub-command's help is its program's docstring).
    """
    top = _Parser(prog="garaphpy",
                  description="Run a graph program on a file in one line, or a TOML "
                              "configuration (garaphpy run CONFIG.toml).")
    top.add_argument("--version", action="version", version=f"garaphpy {__version__}")
    commands = top.add_subparsers(dest="command", metavar="COMMAND")
    top.set_defaults(subcommand_parsers={})
    commands.add_parser("run", help="run a TOML configuration: garaphpy run CONFIG.toml "
                                    "[--set KEY=VALUE ...] [--rebuild] [--quiet] [--verify] "
                                    "[--resume] (as python -m garaphpy.run)", add_help=False)
    for name in PROGRAM_COMMANDS if command is None else (command,):
        description = _program_help(name)
        sub = commands.add_parser(name, help=description, description=description)
        _add_program_options(sub)
        top.get_default("subcommand_parsers")[name] = sub
    return top


def settings_from_arguments(args: argparse.Namespace, base_dir: Path | None = None) -> dict:
    """The validated settings a one-line run's arguments stand for.

    Builds the configuration a TOML file would hold, checks each flag with
    its schema key (the message names the flag), applies ``--set`` and
    validates the whole with :func:`garaphpy.configfile.validate_config`.

    Raises
    ------
    ConfigError
        Naming the flag or key.
    """
    raw: dict = {"graph": args.graph, "run": {"program": args.command}}
    args.random_source = RANDOM_SOURCE in (args.sources or ())
    if args.random_source:
        if len(args.sources) > 1:
            raise ConfigError(f"--source {RANDOM_SOURCE} draws the one source of each trial: "
                              "give it alone, or vertex ids")
        args.sources = None
    for name, (section, key) in FLAG_KEYS.items():
        value = getattr(args, name)
        if value is None:
            continue
        if name == "constants":
            value = dict(value)
        flag = "--" + {"sources": "source", "constants": "constant",
                       "directed": "directed/--undirected"}.get(name, name.replace("_", "-"))
        SCHEMA[section][key].validate(value, flag)
        raw.setdefault(section, {})[key] = value
    apply_overrides(raw, args.overrides)
    base_dir = Path.cwd() if base_dir is None else base_dir
    return validate_config(raw, base_dir=base_dir, origin=f"garaphpy {args.command}")


def _resume_hint(argv: list[str]) -> str:
    command = [sys.executable, "-m", "garaphpy", *argv]
    if "--resume" not in argv:
        command.append("--resume")
    return f"cd {shlex.quote(os.getcwd())} && {shlex.join(command)}"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``garaphpy`` command; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "run":
        return run_main(argv[1:])
    # a program's sub-command first (the usual line): its parser alone
    top = parser(argv[0] if argv and argv[0] in PROGRAM_COMMANDS else None)
    args, unrecognized = top.parse_known_args(argv)
    if unrecognized:     # the sub-command's own usage, not the top parser's
        top.get_default("subcommand_parsers").get(args.command, top).error(
            f"unrecognized arguments: {' '.join(unrecognized)}")
    if args.command is None:
        print("garaphpy: error: expected a program (" + ", ".join(PROGRAM_COMMANDS)
              + ") or run CONFIG.toml (see garaphpy --help)", file=sys.stderr)
        return 2
    with log_to_stderr(quiet=args.quiet):
        return execute(args, lambda: settings_from_arguments(args),
                       lambda: _resume_hint(argv))


def command() -> int:
    """The ``garaphpy`` console script and ``python -m garaphpy``: :func:`main`,
    whose process leaves at once after an interrupt
    (:func:`garaphpy.cli.exit_after_interrupt`, with its documented status)."""
    code = main()
    if code in INTERRUPT_EXIT_CODES:
        exit_after_interrupt(code)
    return code


__all__ = ["main", "command", "parser", "settings_from_arguments", "PROGRAM_COMMANDS"]
