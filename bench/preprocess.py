"""Preprocessing throughput and peak memory (Garaph section 6.5, Table 4).

Builds the store of an RMAT graph (Graph500 parameters, scale 22 by default:
4.2 M vertices, 67 M edges) twice, each in a fresh process:

* ``text``:   from a ``.el`` text file (written once beforehand, not timed);
* ``arrays``: from in-memory int32 numpy arrays (generated before timing).

Each case reports edges per second, the peak resident memory of the build
(sampled every 5 ms) and that peak over the size of the finished store.  A
small warm-up build runs first in each process so that numba's compilation
(cached on disk after the first run) stays out of the figure.

Usage::

    python -m bench preprocess [--scale 22] [--threads N] [--trials 1] [--json rows.jsonl]

A configuration of bench/harness.py: each input is a case whose trials are
fresh processes (so ``--warmup`` defaults to 0: the warm-up build runs inside
each process, outside its timed build); a build is verified to have read
the 16 x 2^scale edges RMAT generates.  With several trials the table shows
the median trial's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import harness

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, threading, time
import numpy as np, psutil
from garaphpy import generators
from garaphpy.storage.builder import BuildOptions, build_store
from garaphpy.storage.readers import from_arrays, open_source

case, scale, workdir = {case!r}, {scale}, {workdir!r}
process = psutil.Process()
# warm-up: compile every kernel on a small graph of the same kind
small = generators.rmat(10)
if case == "text":
    from garaphpy.storage.writers import write_edge_list
    write_edge_list(small, os.path.join(workdir, "warm.el"))
    build_store(open_source(os.path.join(workdir, "warm.el")), os.path.join(workdir, "warm"),
                BuildOptions(), progress=False, force=True)
    source = open_source(os.path.join(workdir, f"rmat{{scale}}.el"))
else:
    src, dst, _ = small.edges(id_dtype=np.int32)
    build_store(from_arrays(src, dst, num_vertices=small.num_vertices),
                os.path.join(workdir, "warm"), BuildOptions(), progress=False, force=True)
    generated = generators.rmat(scale)
    src, dst, _ = generated.edges(id_dtype=np.int32)
    source = from_arrays(src, dst, num_vertices=generated.num_vertices)
    del src, dst

peak = [process.memory_info().rss]
before = peak[0]
running = True
def sample():
    while running:
        peak[0] = max(peak[0], process.memory_info().rss)
        time.sleep(0.005)
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
started = time.perf_counter()
store = build_store(source, os.path.join(workdir, f"store-{{case}}"), BuildOptions(),
                    progress=False, force=True)
seconds = time.perf_counter() - started
running = False
sampler.join()
store_bytes = sum(p.stat().st_size for p in store.path.rglob("*") if p.is_file())
print(json.dumps({{
    "case": case, "edges_read": store.summary["edges_read"], "num_edges": store.num_edges,
    "seconds": seconds, "edges_per_second": store.summary["edges_read"] / seconds,
    "rss_before_bytes": before, "peak_rss_bytes": peak[0], "store_bytes": store_bytes,
    "peak_over_store": peak[0] / store_bytes,
    "phases": store.manifest["build_phases"],
}}))
"""


def run_case(case: str, scale: int, workdir: Path, threads: int | None
             ) -> harness.Measurement:
    """Build once in a fresh process; its time is the build's, its metrics the
    child's measurements, its result the number of edges read."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    if threads:
        env["NUMBA_NUM_THREADS"] = str(threads)
    code = CHILD.format(case=case, scale=scale, workdir=str(workdir))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise SystemExit(f"{case} build failed:\n{result.stderr}")
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    return harness.Measurement(result=measured["edges_read"], seconds=measured["seconds"],
                               metrics=measured)


def median_trial(row: dict) -> dict:
    """The metrics of the row's median trial (by build time)."""
    ordered = sorted(row["metrics"], key=lambda measured: measured["seconds"])
    return ordered[(len(ordered) - 1) // 2]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=22, help="RMAT scale (default 22)")
    parser.add_argument("--threads", type=int, default=None,
                        help="numba threads (default: every core)")
    parser.add_argument("--workdir", default=None, help="where the .el file and stores go")
    parser.add_argument("--cases", default="text,arrays", help="comma-separated: text,arrays")
    harness.add_common_options(parser, trials=1, warmup=0)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)

    import numba

    from garaphpy import generators
    from garaphpy.storage.writers import write_edge_list

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="garaphpy-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    el = workdir / f"rmat{args.scale}.el"
    if "text" in args.cases and not el.exists():
        started = time.perf_counter()
        write_edge_list(generators.rmat(args.scale), el)
        print(f"wrote {el} ({el.stat().st_size / 2**30:.2f} GiB) in "
              f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    generated_edges = 16 << args.scale
    cases = [harness.Case(
        case, lambda case=case: run_case(case, args.scale, workdir, args.threads),
        params={"input": case},
        verify=lambda edges: edges == generated_edges
        or f"read {edges:,} edges, RMAT generates {generated_edges:,}")
        for case in args.cases.split(",")]
    rows = harness.run_cases("preprocess", cases, args, extra={
        "graph": f"rmat:{args.scale}",
        "threads": args.threads or numba.config.NUMBA_NUM_THREADS})
    print(f"{'input':8} {'edges':>12} {'seconds':>8} {'M edges/s':>10} {'peak RSS':>10} "
          f"{'store':>10} {'peak/store':>10}")
    for row in map(median_trial, rows):
        print(f"{row['case']:8} {row['edges_read']:>12,} {row['seconds']:>8.2f} "
              f"{row['edges_per_second'] / 1e6:>10.1f} {row['peak_rss_bytes'] / 2**30:>8.2f}G "
              f"{row['store_bytes'] / 2**30:>8.2f}G {row['peak_over_store']:>10.2f}")
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
