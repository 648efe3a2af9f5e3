"""OpenMP wait policy of the CPU kernels beside garaphpy's own threads (Garaph sections 2.2, 4).

numba's OpenMP layer (libgomp) lets its workers spin after a parallel region
before they sleep.  The CPU engine launches many short regions per
iteration; between them spinning keeps the launch cheap, but it also keeps
every core busy while the page readers and checksum threads of a run from
storage (or the GPU feeder of a hybrid run) need one.  This compares, in
child processes (libgomp reads its settings once, when it loads):

``spin``
    libgomp's own default, what garaphpy leaves: ``GOMP_SPINCOUNT=300000``.
``spin10k``
    ``GOMP_SPINCOUNT=10000``: a short spin, then sleep.
``passive``
    ``OMP_WAIT_POLICY=PASSIVE``: sleep at once.

For each policy, in rounds that rotate the order of the policies:

* in memory, ``--threads`` (the first of the list) threads: BFS on
  grid:WxH from vertex 0 (thousands of tiny notify-pull iterations, the
  case a launch's cost dominates), PageRank on rmat:SCALE (10 iterations)
  and CC on rmat:SCALE; seconds of the iterations (``Result.seconds``);
* from storage, for each thread count of ``--threads``: PageRank on
  rmat:SCALE with a host budget that caches no page
  (``bench/disk.py``'s ``pagerank``), its median bytes/s over the iterations
  after the first, against the O_DIRECT sequential read speed of a file on
  the same directory measured just before and just after it in the same
  child (``bench/disk.py``'s ``sequential``).

Usage (from the repository root)::

    python bench/wait_policy.py [--dir DIR] [--scale 22] [--grid 1000x1000]
                                [--threads 16,14] [--rounds 2] [--file-bytes 1G]
                                [--json rows.jsonl]

A configuration of bench/harness.py: each (round, policy) is a case whose
trial is one child process (``--trials`` children in a row, default 1; the
child warms every in-memory run up itself, so ``--warmup`` defaults to 0),
its row holding the child's figures; a child is verified to have streamed
every page at every thread count.  ``--rounds`` keeps rotating the order of
the policies between rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import disk  # noqa: E402
import harness  # noqa: E402
from _host import host_info, log  # noqa: E402

POLICIES = {
    "spin": {"GOMP_SPINCOUNT": "300000"},
    "spin10k": {"GOMP_SPINCOUNT": "10000"},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
}


def child(spec: dict) -> dict:
    """One policy's measurements (run in a process of its own)."""
    import warnings

    import numba

    import garaphpy

    warnings.simplefilter("ignore", garaphpy.api.NotConvergedWarning)   # tolerance 0: by design
    out = {"policy": spec["policy"], "threading_layer": None, "in_memory": {}, "streamed": {}}
    if spec["in_memory"]:
        threads = spec["threads"][0]
        grid = garaphpy.Graph.load(spec["grid"], store=spec["grid_store"], progress=False)
        rmat = garaphpy.Graph.load(f"rmat:{spec['scale']}", store=spec["rmat_store"],
                                   progress=False)
        cases = [("bfs", grid, {"sources": [0]}),
                 ("pagerank", rmat, {"max_iterations": 10, "tolerance": 0.0}),
                 ("cc", rmat, {})]
        for name, graph, options in cases:
            garaphpy.run(graph, name, mode="cpu", threads=threads, **options)   # compile
            result = garaphpy.run(graph, name, mode="cpu", threads=threads, **options)
            out["in_memory"][name] = {"seconds": result.seconds,
                                      "iterations": result.num_iterations}
        out["threading_layer"] = numba.threading_layer()
    store = garaphpy.Graph.open(spec["disk_store"]).store
    file = Path(spec["file"])
    for threads in spec["threads"]:
        before = disk.sequential([file])["bytes_per_s"]
        args = types.SimpleNamespace(iterations=spec["iterations"], gpu_memory=None)
        entry = disk.pagerank(store, "cpu", args, threads)
        after = disk.sequential([file])["bytes_per_s"]
        out["streamed"][str(threads)] = {
            "bytes_per_s": entry.get("bytes_per_s"), "error": entry.get("error"),
            "sequential_before": before, "sequential_after": after,
            "ratio": entry["bytes_per_s"] / statistics.mean([before, after])
            if "bytes_per_s" in entry else None}
    out["threading_layer"] = out["threading_layer"] or numba.threading_layer()
    return out


def streamed_everywhere(out: dict) -> str | None:
    """The verification of a child: a ratio for every streamed thread count."""
    broken = [f"{threads} threads: {entry['error']}" for threads, entry in out["streamed"].items()
              if entry["ratio"] is None]
    return "; ".join(broken) or None


def run_child(spec: dict) -> harness.Measurement:
    """One policy's child process; its figures are the trial's metrics."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    env.update(POLICIES[spec["policy"]])
    env["NUMBA_NUM_THREADS"] = str(max(spec["threads"]))
    completed = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)],
                               env=env, capture_output=True, text=True)
    sys.stderr.write(completed.stderr)
    if completed.returncode != 0:
        raise SystemExit(f"child {spec['policy']} failed (exit {completed.returncode})")
    out = json.loads(completed.stdout.strip().splitlines()[-1])
    return harness.Measurement(result=out, metrics=out)


def build(args, work: Path) -> dict:
    """The stores and the sequential file every child uses."""
    import garaphpy

    started = time.perf_counter()
    garaphpy.Graph.load(args.grid, store=work / "grid", progress=False)
    garaphpy.Graph.load(f"rmat:{args.scale}", store=work / "rmat", progress=False)
    first = disk.build(args.scale, work / "disk-store", [], None)
    if len(first.pages) < disk.MIN_PAGES:
        page_bytes = disk.page_bytes_for(first, disk.MIN_PAGES)
        del first
        shutil.rmtree(work / "disk-store")
        disk.build(args.scale, work / "disk-store", [], page_bytes)
    disk.write_file(work / "sequential.dat", args.file_bytes)
    log(f"built the stores and the file in {time.perf_counter() - started:.1f} s")
    return {"grid": args.grid, "scale": args.scale, "grid_store": str(work / "grid"),
            "rmat_store": str(work / "rmat"), "disk_store": str(work / "disk-store"),
            "file": str(work / "sequential.dat"), "threads": args.threads,
            "iterations": args.iterations}


def report(results: dict) -> None:
    policies = list(POLICIES)
    print(f"garaphpy wait policy: {results['machine']} ({results['cpu_model']}, "
          f"{results['cpu_count']} CPUs), {results['date']}, "
          f"rounds {results['rounds']}, layer {results['threading_layer']}")
    print("in memory (seconds, median over rounds; ratio to spin):")
    for name in ("bfs", "pagerank", "cc"):
        base = statistics.median(r["in_memory"][name]["seconds"]
                                 for r in results["runs"] if r["policy"] == "spin")
        cells = []
        for policy in policies:
            value = statistics.median(r["in_memory"][name]["seconds"]
                                      for r in results["runs"] if r["policy"] == policy)
            cells.append(f"{policy} {value:.3f} s ({value / base:.2f}x)")
        print(f"  {name:9s} " + " | ".join(cells))
    print("streamed PageRank / sequential O_DIRECT read (each round's ratio; median):")
    for threads in results["threads"]:
        for policy in policies:
            ratios = [r["streamed"][str(threads)]["ratio"] for r in results["runs"]
                      if r["policy"] == policy]
            shown = ", ".join("failed" if x is None else f"{x:.2f}" for x in ratios)
            valid = [x for x in ratios if x is not None]
            middle = f"{statistics.median(valid):.2f}" if valid else "-"
            print(f"  {threads:3d} threads {policy:8s} {shown}  median {middle}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--dir", default=".", help="where the stores and the file go")
    parser.add_argument("--scale", type=int, default=22)
    parser.add_argument("--grid", default="grid:1000x1000")
    parser.add_argument("--threads", default=None,
                        help="comma-separated thread counts (default: cores, cores - 2)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=8,
                        help="iterations of each streamed PageRank, the first not counted")
    parser.add_argument("--file-bytes", type=disk.parse_bytes, default=1 << 30)
    harness.add_common_options(parser, trials=1, warmup=0, trials_aliases=())
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    harness.check_common_options(parser, args)
    cores = os.cpu_count() or 1
    args.threads = ([int(t) for t in args.threads.split(",")] if args.threads
                    else sorted({cores, max(1, cores - 2)}, reverse=True))
    if args.dir is not None and not Path(args.dir).is_dir():
        parser.error(f"--dir {args.dir}: no such directory")
    work = Path(tempfile.mkdtemp(prefix=".garaphpy-wait-bench-", dir=args.dir))
    try:
        spec = build(args, work)
        cases = []
        names = list(POLICIES)
        for round_ in range(args.rounds):
            order = names[round_ % len(names):] + names[:round_ % len(names)]
            for policy in order:
                cases.append(harness.Case(
                    f"{policy}/round-{round_ + 1}",
                    lambda policy=policy: run_child({**spec, "policy": policy,
                                                     "in_memory": True}),
                    params={"policy": policy, "round": round_ + 1,
                            "environment": POLICIES[policy]},
                    verify=streamed_everywhere))
        rows = harness.run_cases("wait_policy", cases, args)
        runs = [run for row in rows for run in row["metrics"]]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = {"benchmark": "wait_policy", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
               **host_info(), "rounds": args.rounds, "threads": args.threads,
               "threading_layer": runs[0]["threading_layer"], "runs": runs,
               "args": vars(args)}
    report(results)
    harness.write_record(args.json, "wait_policy", "summary", results)
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
