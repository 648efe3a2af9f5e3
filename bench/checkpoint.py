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

    python bench/checkpoint.py [--scale 22] [--threads N] [--iterations 10]
                               [--repeat 3] [--dir DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numba  # noqa: E402
import numpy as np  # noqa: E402

import garaphpy  # noqa: E402
from garaphpy import config  # noqa: E402
from garaphpy.api import NotConvergedWarning  # noqa: E402
from garaphpy.scheduler import checkpoint  # noqa: E402
from _host import file_system, log  # noqa: E402  (bench/ is the script's directory)


def capture_checkpointers(found: list) -> None:
    """Keep every Checkpointer that garaphpy.run makes (for its ``written`` timings)."""
    make = checkpoint.for_run

    def for_run(*args, **kwargs):
        made = make(*args, **kwargs)
        found.append(made)
        return made

    checkpoint.for_run = for_run


def one_run(graph, threads: int, iterations: int, directory: Path, found: list) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotConvergedWarning)
        result = garaphpy.run(graph, "pagerank", tolerance=0.0, max_iterations=iterations,
                              threads=threads, checkpoint_dir=directory, checkpoint_every=1)
    written = found[-1].written
    iteration_seconds = [r.seconds for r in result.iterations[1:]]
    checkpoint_seconds = [seconds for done, _, seconds in written if done >= 2]
    return {"iteration_s": float(np.median(iteration_seconds)),
            "checkpoint_s": float(np.median(checkpoint_seconds)),
            "checkpoints": len(written)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=22, help="RMAT scale (default 22)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: every core)")
    parser.add_argument("--iterations", type=int, default=10,
                        help="PageRank iterations per run, a checkpoint after each (default 10)")
    parser.add_argument("--repeat", type=int, default=3, help="runs (default 3)")
    parser.add_argument("--dir", default=None,
                        help="where the checkpoints go (default: a temporary directory in "
                             "the current directory)")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    if args.iterations < 3:
        parser.error("--iterations: expected >= 3 (the first iteration is not counted)")
    if args.repeat < 1:
        parser.error("--repeat: expected >= 1")
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
    try:
        log("compiling (a short untimed run) ...")
        one_run(graph, threads, 3, work / "warm-up", found)
        runs = []
        for repeat in range(args.repeat):
            runs.append(one_run(graph, threads, args.iterations, work / f"run-{repeat}",
                                found))
            log(f"  run {repeat + 1}: iteration {runs[-1]['iteration_s'] * 1e3:.1f} ms, "
                f"checkpoint {runs[-1]['checkpoint_s'] * 1e3:.1f} ms")
        values = np.random.default_rng(0).random(graph.num_vertices)
        crc_times = []
        for _ in range(5):
            crc_started = time.perf_counter()
            zlib.crc32(values)
            crc_times.append(time.perf_counter() - crc_started)
        directory = work / "size"
        directory.mkdir()
        size = checkpoint.write_checkpoint(
            directory, 1, {}, values, np.arange(graph.num_vertices), []).stat().st_size
    finally:
        shutil.rmtree(work, ignore_errors=True)

    iteration = float(np.median([r["iteration_s"] for r in runs]))
    cost = float(np.median([r["checkpoint_s"] for r in runs]))
    crc = float(np.median(crc_times))
    results = {
        "benchmark": "checkpoint", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": platform.node(), "cpu_count": os.cpu_count(),
        "python": platform.python_version(), "numpy": np.__version__,
        "numba": numba.__version__, "threads": threads, "graph": spec,
        "num_vertices": graph.num_vertices, "num_edges": graph.num_edges,
        "file_system": file_system(parent), "checkpoint_bytes": size,
        "iteration_s": iteration, "checkpoint_s": cost, "fraction": cost / iteration,
        "every_default": config.CHECKPOINT_EVERY,
        "fraction_at_default_every": cost / iteration / config.CHECKPOINT_EVERY,
        "crc_s": crc, "write_mb_per_s": size / cost / 1e6, "runs": runs, "args": vars(args),
    }
    print(f"garaphpy checkpoint cost: PageRank on {spec} ({graph.num_vertices:,} vertices, "
          f"{graph.num_edges:,} edges), {threads} threads, {results['date']}, "
          f"{platform.node()}; checkpoints on {results['file_system']}")
    print(f"| iteration ms | checkpoint ms | MiB | fraction (every 1) | "
          f"fraction (every {config.CHECKPOINT_EVERY}) | CRC-32 ms | write MB/s |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {iteration * 1e3:.1f} | {cost * 1e3:.1f} | {size / 2**20:.1f} | "
          f"{cost / iteration:.3f} | {cost / iteration / config.CHECKPOINT_EVERY:.4f} | "
          f"{crc * 1e3:.1f} | {size / cost / 1e6:.0f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
