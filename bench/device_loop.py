"""The GPU's device loop of sparse iterations on and off (issue 18).

A run on the GPU alone with resident pages runs each iteration whose
frontier is small as a sparse notify-pull, many iterations to one host round
trip, in a loop kept on the device (:mod:`garaphpy.scheduler.device_loop`);
off (``config.GPU_DEVICE_LOOP = False``) every iteration is the pull over
every shard, launched and read back by the host; and CC's pulls end with
pointer jumping over the labels on (``config.GPU_SHORTCUT_LABELS``), not off.
Off is the path before issue 18.
This script times whole runs both ways, everything else equal.

What runs
    BFS, SSSP, CC and PageRank (``--programs``) on the GPU alone,
    ``--execution`` (default: the program's own); BFS and SSSP from vertex
    ``WIDTH + 1`` on a grid, else the vertex of largest out-degree.
Graphs
    ``--graphs``: generator specs (``grid:WxH``, ``rmat:SCALE``, weighted)
    or SNAP files (weighted by the hash rule), comma-separated; stores built
    once into ``--store-dir`` (default: a temporary directory).
Timing
    Per (graph, program, on/off) a case of bench/harness.py: ``--warmup``
    untimed runs, then ``--trials`` runs; ``Result.seconds`` (the
    iterations' time, host synchronisation included); the table gives the
    medians, off / on, the iterations the loop ran, and the time per
    iteration (its inverse: iterations per second).
Correctness
    Every trial's values must equal the first trial of the loop-off run (for
    PageRank, within 1e-9 relative), and in synchronous runs its iteration
    records' counters (active and activated vertices) too, but for CC, whose
    label shortcut takes other (and fewer) iterations; a mismatch fails the row and makes the exit status 1.

Usage (from the repository root)::

    python bench/device_loop.py [--graphs grid:2000x2000,rmat:22] [--programs bfs,sssp,cc,pagerank]
        [--execution sync|async] [--store-dir DIR] [--trials 3] [--json rows.jsonl]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import harness  # noqa: E402
from sparse_batch import load, source_of  # noqa: E402  (the same graphs and sources)

import garaphpy  # noqa: E402
from garaphpy import config  # noqa: E402

#: Record counters a batched iteration shares with the same iteration run alone.
COUNTERS = ("active_vertices", "activated")


def run(graph, program: str, options: dict, looped: bool) -> harness.Measurement:
    config.GPU_DEVICE_LOOP = config.GPU_SHORTCUT_LABELS = looped
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
        result = garaphpy.run(graph, program, **options)
    launch = [r.decisions["device_loop"]["launch"] for r in result.iterations
              if "device_loop" in r.decisions]
    return harness.Measurement(result=result, seconds=result.seconds, metrics={
        "iterations": result.num_iterations, "looped": len(launch),
        "launch": launch[-1] if launch else None})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="grid:2000x2000,rmat:22",
                        help="comma-separated generator specs or SNAP files")
    parser.add_argument("--programs", default="bfs,sssp,cc,pagerank")
    parser.add_argument("--execution", choices=("sync", "async"), default=None)
    parser.add_argument("--store-dir", default=None)
    harness.add_common_options(parser)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    store_dir = Path(args.store_dir or tempfile.mkdtemp(prefix="garaphpy-loop-"))
    cases = []
    for spec in args.graphs.split(","):
        graph = load(spec, store_dir)
        for program in args.programs.split(","):
            options = {"mode": "gpu", "execution": args.execution}
            if program in ("bfs", "sssp", "sswp"):
                options["sources"] = [source_of(spec, graph)]
            if program == "pagerank":
                options.update(max_iterations=20, tolerance=0.0)
            reference = {}
            # loop off first: its first trial is the reference of both
            synchronous = args.execution != "async" and program != "cc"
            for looped in (False, True):
                cases.append(harness.Case(
                    f"{spec}/{program}/{'on' if looped else 'off'}",
                    lambda graph=graph, program=program, options=options, looped=looped:
                        run(graph, program, options, looped),
                    params={"graph": spec, "program": program, "looped": looped,
                            "execution": args.execution},
                    verify=harness.same_as_first(
                        reference, "the loop-off run", rtol=1e-9,
                        counters=COUNTERS if synchronous else ())))
    rows = harness.run_cases("device_loop", cases, args)
    print(f"\n== the GPU's device loop, median of {args.trials} runs "
          f"(execution {args.execution or 'of each program'})")
    print(f"{'graph':20s} {'program':8s} {'iters':>6s} {'looped':>7s} {'on ms':>9s} "
          f"{'off ms':>9s} {'off/on':>7s} {'on us/it':>9s} {'off us/it':>9s}  check")
    figures = []
    for on, off in zip(rows[1::2], rows[0::2]):
        params, last = on["params"], on["metrics"][-1]
        ratio = off["median_s"] / on["median_s"]
        iterations = max(last["iterations"], 1)
        ok = all(r["verification"]["status"] == harness.PASSED for r in (on, off))
        print(f"{params['graph'][-20:]:20s} {params['program']:8s} {last['iterations']:6d} "
              f"{last['looped']:7d} {on['median_s'] * 1e3:9.1f} {off['median_s'] * 1e3:9.1f} "
              f"{ratio:7.2f} {on['median_s'] / iterations * 1e6:9.1f} "
              f"{off['median_s'] / off['metrics'][-1]['iterations'] * 1e6:9.1f}  "
              f"{'ok' if ok else 'FAILED'}")
        figures.append({**params, "on_s": on["median_s"], "off_s": off["median_s"],
                        "speed_up": ratio, "iterations": last["iterations"],
                        "looped": last["looped"], "launch": last["launch"]})
    harness.write_record(args.json, "device_loop", "summary", {"rows": figures})
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
