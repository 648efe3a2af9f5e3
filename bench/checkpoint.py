"""Checkpoint cost: one checkpoint's write time as a fraction of an iteration (Garaph section 2.2).

PageRank on rmat:SCALE (every vertex active, so the frontier is stored as
"all" and a checkpoint is the |V| float64 values plus the records) runs
``--iterations`` iterations with a checkpoint after every one of them
(``checkpoint_every=1``), in ``--dir``.  Per run, the median over the
iterations after the first of

* ``iteration``: ``IterationRecord.seconds``, the iteration's own time;
* ``checkpoint``: the time the driver spent in the checkpoint after it
  (``Checkpointer.written``: reading the state, CRC-32, write, fsync,
  rename, directory fsync, removing the checkpoint it replaces);

and the medians over ``--repeat`` runs.  ``fraction`` = checkpoint /
iteration, the cost of checkpointing after every iteration; with the default
``checkpoint_every`` (``config.CHECKPOINT_EVERY``) a run pays that divided by
it.  ``crc`` is zlib's CRC-32 over the values alone, timed on its own, to
show how much of a checkpoint is checksum and how much is the disk.  The
file system of ``--dir`` is printed: fsync on tmpfs costs nothing.

Usage (from the repository root)::

    python -m bench checkpoint [--scale 22] [--threads N] [--iterations 10]
                               [--trials 3] [--warmup 1] [--dir DIR] [--json rows.jsonl]

A configuration of bench/harness.py: the checkpointed run and the CRC-32 are
its cases (``--repeat`` is the older spelling of ``--trials``); every run is
verified to have written a checkpoint after each of its iterations but the
last.
"""

from __future__ import annotations

import argparse
import itertools
import platform
import shutil
import sys
import tempfile
import time
import warnings
import zlib
from pathlib import Path

import numba
import numpy as np

import garaphpy
from garaphpy import config
from garaphpy.api import NotConvergedWarning
from garaphpy.scheduler import checkpoint

from bench._host import file_system, log
from bench import harness

REPO = Path(__file__).resolve().parents[1]


def capture_checkpointers(found: list) -> None:
    """Keep every Checkpointer that garaphpy.run makes (for its ``written`` timings)."""
    make = checkpoint.for_run

    def for_run(*args, **kwargs):
        made = make(*args, **kwargs)
        found.append(made)
        return made

    checkpoint.for_run = for_run


def one_run(graph, threads: int, iterations: int, directory: Path,
            found: list) -> harness.Measurement:
    """One checkpointed PageRank run; its time is the median checkpoint's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotConvergedWarning)
        result = garaphpy.run(graph, "pagerank", tolerance=0.0, max_iterations=iterations,
                              threads=threads, checkpoint_dir=directory, checkpoint_every=1)
    written = found[-1].written
    iteration_seconds = [r.seconds for r in result.iterations[1:]]
    checkpoint_seconds = [seconds for done, _, seconds in written if done >= 2]
    run = {"iteration_s": float(np.median(iteration_seconds)),
           "checkpoint_s": float(np.median(checkpoint_seconds)),
           "checkpoints": len(written)}
    return harness.Measurement(
        result={"iterations": len(result.iterations),
                "done": sorted(done for done, _, _ in written)},
        seconds=run["checkpoint_s"], metrics=run)


def checkpointed_every_iteration(result: dict) -> str | None:
    """The verification: one checkpoint after each iteration but the last (whose
    values the run returns), none missing."""
    expected = list(range(1, result["iterations"]))
    if result["done"] != expected:
        return f"checkpoints after iterations {result['done']}, expected {expected}"
    return None


def run_figures(row: dict) -> dict:
    """Medians over the trials of each run's median iteration and checkpoint."""
    iteration = harness.median_of(m["iteration_s"] for m in row["metrics"])
    cost = harness.median_of(m["checkpoint_s"] for m in row["metrics"])
    return {"iteration_s": iteration, "checkpoint_s": cost, "fraction": cost / iteration}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=22, help="RMAT scale (default 22)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: every core)")
    parser.add_argument("--iterations", type=int, default=10,
                        help="PageRank iterations per run, a checkpoint after each (default 10)")
    parser.add_argument("--dir", default=None,
                        help="where the checkpoints go (default: a temporary directory in "
                             "the current directory)")
    harness.add_common_options(parser, trials=3, warmup=1)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    if args.iterations < 3:
        parser.error("--iterations: expected >= 3 (the first iteration is not counted)")
    available = numba.config.NUMBA_NUM_THREADS
    threads = args.threads or min(config.default_threads(), available)
    if not 1 <= threads <= available:
        parser.error(f"--threads={threads}: numba started with {available} threads "
                     f"(set NUMBA_NUM_THREADS={threads} before starting Python for more)")
    parent = Path(args.dir) if args.dir else Path.cwd()
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".checkpoint-bench-", dir=parent))

    spec = f"rmat:{args.scale}"
    started = time.perf_counter()
    graph = garaphpy.Graph.load(spec, progress=False)
    log(f"{spec}: {graph.num_vertices:,} vertices, {graph.num_edges:,} edges "
        f"({time.perf_counter() - started:.1f} s)")
    found: list = []
    capture_checkpointers(found)
    runs = itertools.count()
    values = np.random.default_rng(0).random(graph.num_vertices)
    common = {"graph": spec, "threads": threads, "num_vertices": graph.num_vertices,
              "num_edges": graph.num_edges, "file_system": file_system(parent)}
    cases = [
        harness.Case("pagerank-checkpointed",
                     lambda: one_run(graph, threads, args.iterations,
                                     work / f"run-{next(runs)}", found),
                     params={"iterations": args.iterations, "checkpoint_every": 1},
                     verify=checkpointed_every_iteration, summarize=run_figures),
        harness.Case("crc32", lambda: zlib.crc32(values), params={"bytes": values.nbytes},
                     trials=5, warmup=0),
    ]
    try:
        rows = harness.run_cases("checkpoint", cases, args, extra=common)
        directory = work / "size"
        directory.mkdir()
        size = checkpoint.write_checkpoint(
            directory, 1, {}, values, np.arange(graph.num_vertices), []).stat().st_size
    finally:
        shutil.rmtree(work, ignore_errors=True)

    run_row, crc_row = rows
    iteration, cost = run_row["figures"]["iteration_s"], run_row["figures"]["checkpoint_s"]
    crc = crc_row["median_s"]
    figures = {**run_row["figures"], "checkpoint_bytes": size,
               "every_default": config.CHECKPOINT_EVERY,
               "fraction_at_default_every": cost / iteration / config.CHECKPOINT_EVERY,
               "crc_s": crc, "write_mb_per_s": size / cost / 1e6}
    harness.write_record(args.json, "checkpoint", "summary", {**common, **figures}, args)
    date = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"garaphpy checkpoint cost: PageRank on {spec} ({graph.num_vertices:,} vertices, "
          f"{graph.num_edges:,} edges), {threads} threads, {date}, "
          f"{platform.node()}; checkpoints on {common['file_system']}")
    print(f"| iteration ms | checkpoint ms | MiB | fraction (every 1) | "
          f"fraction (every {config.CHECKPOINT_EVERY}) | CRC-32 ms | write MB/s |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {iteration * 1e3:.1f} | {cost * 1e3:.1f} | {size / 2**20:.1f} | "
          f"{cost / iteration:.3f} | {cost / iteration / config.CHECKPOINT_EVERY:.4f} | "
          f"{crc * 1e3:.1f} | {size / cost / 1e6:.0f} |")
    if args.json:
        log(f"appended rows to {args.json}")
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
