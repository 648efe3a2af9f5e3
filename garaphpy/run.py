"""Command line: ``python -m garaphpy.run CONFIG.toml [--set KEY=VALUE ...]``.

Reads and validates the configuration (garaphpy.configfile), preprocesses
the graph into a store or reuses an up-to-date one (Garaph sections 2.1-2.2,
6.5), and prints the graph summary.  Errors are one line on standard error
and a non-zero exit code: 2 for a bad command line or configuration, 1 for a
bad input or store, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import sys
import time

from .configfile import load_config
from .errors import ConfigError, GaraphError


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
    return parser


def graph_from_config(settings: dict, progress: bool = True, rebuild: bool = False):
    """Load (or preprocess) the graph a validated configuration names."""
    from pathlib import Path

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


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    try:
        settings = load_config(args.config, args.overrides)
        graph = graph_from_config(settings, progress=not args.quiet, rebuild=args.rebuild)
    except ConfigError as error:
        print(f"garaphpy: error: {error}", file=sys.stderr)
        return 2
    except GaraphError as error:
        print(f"garaphpy: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("garaphpy: interrupted", file=sys.stderr)
        return 130
    if graph.store.reused or args.quiet:
        print(graph.describe())
    print(f"store: {graph.store.path}")
    print(f"done in {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
