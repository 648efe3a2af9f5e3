"""Throughput of the text readers (garaphpy.storage.readers) on a generated file.

Writes (once, cached) a random edge list of ``--edges`` lines with ids below
2**24 (about 16 bytes per line) and, optionally, a weighted copy, then times
``open_source(path).chunks(READ_CHUNK_EDGES)`` end to end: reading the page-
cached file, parsing, and assembling int64 chunks.  Wall time and process CPU
time (all threads) are reported, for 1 parser thread and for one per core
(compressed files: the readers' own choice, one fewer than the cores).

Measured on 2 cores (``taskset -c 0,1`` on an idle 16-core host, 20 M
lines): ``.el`` 26.6 M edges/s with 1 thread, 44.5 M edges/s with 2;
``.wel`` (weights k/8) 16.7 and 23.5 M edges/s; ``.el.gz`` 11.4 M edges/s
(bound by zlib).  Run with ``PYTHONPATH=.`` from the repository root
unless garaphpy is installed.

Usage::

    python bench/parse_speed.py [--edges 20000000] [--dir /tmp/garaphpy-bench]
                                [--weighted] [--gzip] [--trials 3] [--json rows.jsonl]

A configuration of bench/harness.py: each (file, parser threads) is a case,
verified to read every line of the file; the figure printed is the fastest
trial, as before (``--repeat`` is the older spelling of ``--trials``; the
default ``--warmup 0`` keeps the earlier measure, the numba cache being
loaded before the first case).
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

from garaphpy import config
from garaphpy.storage import readers, textparse
import harness  # noqa: E402  (bench/ is the script's directory)


def generate(path: Path, edges: int, weighted: bool, seed: int = 1) -> None:
    """Write ``edges`` random lines "u v" (or "u v w" with w = k/8) to ``path``."""
    rng = np.random.default_rng(seed)
    batch = 1_000_000
    tmp = path.with_suffix(path.suffix + ".part")
    with open(tmp, "w") as out:
        for start in range(0, edges, batch):
            n = min(batch, edges - start)
            u = rng.integers(0, 1 << 24, n).tolist()
            v = rng.integers(0, 1 << 24, n).tolist()
            if weighted:
                w = (rng.integers(1, 2000, n) / 8).tolist()
                out.write("".join(f"{a}\t{b}\t{c}\n" for a, b, c in zip(u, v, w)))
            else:
                out.write("".join(f"{a} {b}\n" for a, b in zip(u, v)))
    tmp.rename(path)


def time_read(path: Path, workers: int) -> harness.Measurement:
    """Read every chunk once; the result is the edge count, the metrics wall and
    CPU seconds.

    ``workers`` sets config.PARSE_WORKERS (0: one per usable core; the
    readers use one fewer for compressed files).
    """
    saved = config.PARSE_WORKERS
    config.PARSE_WORKERS = workers
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        source = readers.open_source(path)
        edges = sum(len(chunk) for chunk in source.chunks(config.READ_CHUNK_EDGES))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        config.PARSE_WORKERS = saved
    return harness.Measurement(result=edges, metrics={"file": path.name, "workers": workers, "edges": edges,
            "bytes": path.stat().st_size, "wall_s": wall, "cpu_s": cpu,
            "edges_per_s": edges / wall, "edges_per_cpu_s": edges / cpu,
            "mb_per_s": path.stat().st_size / wall / 1e6})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=20_000_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/garaphpy-bench"))
    parser.add_argument("--weighted", action="store_true", help="also time a .wel file")
    parser.add_argument("--gzip", action="store_true", help="also time a .el.gz file")
    harness.add_common_options(parser, trials=3, warmup=0)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)

    args.dir.mkdir(parents=True, exist_ok=True)
    files = [args.dir / f"random-{args.edges}.el"]
    if args.weighted:
        files.append(args.dir / f"random-{args.edges}.wel")
    for path in files:
        if not path.exists():
            print(f"generating {path} ...", flush=True)
            generate(path, args.edges, path.suffix == ".wel")
    if args.gzip:
        packed = files[0].with_name(files[0].name + ".gz")
        if not packed.exists():
            print(f"compressing {packed} ...", flush=True)
            with open(files[0], "rb") as plain, gzip.open(packed, "wb", 1) as out:
                shutil.copyfileobj(plain, out, 16 << 20)
        files.append(packed)

    readers.open_source(files[0])  # compile / load the numba cache outside timing
    cases = []
    for path in files:
        compressed = path.suffix == ".gz"
        for workers in [0] if compressed else sorted({1, textparse.default_workers()}):
            cases.append(harness.Case(
                f"{path.name}/workers={'auto' if workers == 0 else workers}",
                lambda path=path, workers=workers: time_read(path, workers),
                params={"file": path.name, "workers": workers, "edges": args.edges},
                verify=lambda edges: edges == args.edges or f"read {edges:,} edges, "
                                                           f"the file has {args.edges:,}"))
    rows = harness.run_cases("parse_speed", cases, args)
    for row in rows:
        best = max(row["metrics"], key=lambda r: r["edges_per_s"])
        label = "auto" if best["workers"] == 0 else str(best["workers"])
        print(f"{best['file']:>28}  workers={label:>4}  {best['edges']:>10,} edges  "
              f"wall {best['wall_s']:6.2f} s = {best['edges_per_s'] / 1e6:6.1f} M edges/s "
              f"({best['mb_per_s']:5.0f} MB/s)   cpu {best['cpu_s']:6.2f} s = "
              f"{best['edges_per_cpu_s'] / 1e6:5.1f} M edges/cpu-s", flush=True)
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
