"""Variants of the GPU pull kernel against cuSPARSE, in one process (Garaph section 3.2).

PageRank on rmat:SCALE (the default store), resident, through
``garaphpy.run(mode="gpu")`` as :mod:`gpu` (bench/gpu.py) measures it, once
for every edges-per-thread choice given (``config.GPU_EDGES_PER_THREAD``)
with one launch per page and with one launch over every resident page
(the engine's ``fuse_resident``), ``--rounds`` times; the cuSPARSE
baseline of bench/gpu.py runs before the first round and after every round,
and every ratio is to the median of those baseline runs.  Printed per run:
ms per iteration (wall, driver included), the GPU span and the kernel busy
time (medians over the iterations after the first), the ratio to cuSPARSE,
the scores' L1 difference from cuSPARSE's; then the registers each compiled
pull kernel uses.

Usage (from the repository root, on a machine with a GPU)::

    python bench/pull_variants.py [--edges-per-thread 1,2,4,8,16] [--rounds 2]
                                  [--json rows.jsonl]

A configuration of bench/harness.py: every variant of a round is a case
(``--trials`` runs, default 1, whose first iteration warms up), verified to
give cuSPARSE's scores; the cuSPARSE baseline is bench/gpu.py's case.
"""

from __future__ import annotations

import argparse
import functools
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import gpu as bench  # noqa: E402
from _host import gpu_problem, median  # noqa: E402
import harness  # noqa: E402
from garaphpy import config  # noqa: E402
from garaphpy.kernels import gpu as gpu_kernels  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=22, help="RMAT scale (default 22)")
    parser.add_argument("--edges-per-thread", default="1,2,4,8,16",
                        help="comma-separated choices among "
                             f"{gpu_kernels.EDGES_PER_THREAD_CHOICES} (default all)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of every variant (2)")
    parser.add_argument("--iterations", type=int, default=20, help="PageRank iterations (20)")
    parser.add_argument("--store-dir", default=str(bench.DEFAULT_STORE_DIR),
                        help="where the rmat store is built and reused")
    harness.add_common_options(parser, trials=1, warmup=0, trials_aliases=())
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    try:
        args.edges_per_thread = [int(x) for x in args.edges_per_thread.split(",")]
    except ValueError:
        parser.error(f"--edges-per-thread {args.edges_per_thread!r}: expected integers")
    if set(args.edges_per_thread) - set(gpu_kernels.EDGES_PER_THREAD_CHOICES):
        parser.error(f"--edges-per-thread: expected a subset of "
                     f"{gpu_kernels.EDGES_PER_THREAD_CHOICES}")
    if args.rounds < 1 or args.iterations < 2:
        parser.error("--rounds >= 1 and --iterations >= 2 expected")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    problem = gpu_problem()
    if problem is not None:
        print(f"bench/pull_variants.py: no usable GPU: {problem}", file=sys.stderr)
        return 2
    graph = bench.load(f"rmat:{args.scale}",
                       Path(args.store_dir) / f"rmat{args.scale}-default")
    baseline_args = types.SimpleNamespace(trials=3, warmup=1, iterations=args.iterations,
                                          scale=args.scale, json=args.json, quiet=args.quiet)
    baselines = [bench.bench_cusparse(baseline_args, graph)]
    rows = [("cuSPARSE", baselines[0]["seconds_per_iteration"], None, None, 0.0)]
    harness_rows = []

    def variant(edges: int, fuse: bool) -> harness.Measurement:
        config.GPU_EDGES_PER_THREAD = edges
        run = bench.engine_run(graph, args.iterations, fuse_resident=fuse)
        summary = bench.run_summary(run)
        difference = bench.l1(run["values"], baselines[0]["_values"])
        return harness.Measurement(
            result=difference, seconds=summary["seconds_per_iteration"],
            metrics={"gpu_span": summary["timeline"].get("gpu_span"),
                     "l1_vs_cusparse": difference,
                     "kernel_seconds_per_iteration": summary["kernel_seconds_per_iteration"]})

    for round_ in range(args.rounds):
        cases = [harness.Case(
            f"edges/thread {edges:2d}, " + ("one launch" if fuse else "per page"),
            functools.partial(variant, edges, fuse),
            params={"edges_per_thread": edges, "fuse_resident": fuse, "round": round_ + 1},
            verify=lambda difference: difference <= bench.L1_SAME
            or f"scores differ from cuSPARSE's by {difference:.3g} (L1)")
            for edges in args.edges_per_thread for fuse in (False, True)]
        for row in harness.run_cases("pull_variants", cases, args,
                                     extra={"graph": f"rmat:{args.scale}"}):
            harness_rows.append(row)
            last = row["metrics"][-1]
            rows.append((row["case"], row["median_s"], last["gpu_span"],
                         last["kernel_seconds_per_iteration"], last["l1_vs_cusparse"]))
        baselines.append(bench.bench_cusparse(baseline_args, graph))
        rows.append(("cuSPARSE", baselines[-1]["seconds_per_iteration"], None, None, 0.0))
    reference = median(b["seconds_per_iteration"] for b in baselines)
    print(f"\nPageRank on rmat:{args.scale}, {args.iterations} iterations, resident; ratios "
          f"to the median cuSPARSE run ({reference * 1e3:.3f} ms/iteration)")
    print(f"{'run':34} {'ms/iter':>8} {'GPU span':>9} {'kernel':>8} {'/cuSPARSE':>10} "
          f"{'L1 vs cuSPARSE':>15}")
    for name, seconds, span, kernel, difference in rows:
        span_text = f"{span * 1e3:9.3f}" if span is not None else " " * 9
        kernel_text = f"{kernel * 1e3:8.3f}" if kernel is not None else " " * 8
        print(f"{name:34} {seconds * 1e3:8.3f} {span_text} {kernel_text} "
              f"{seconds / reference:10.2f} {difference:15.2g}")
    print("\nregisters of the compiled pull kernels (precomputed gather):")
    for (_, edges), kernels in sorted(gpu_kernels._MODULES.items(), key=lambda kv: kv[0][1]):
        for variant, function in kernels.pull.items():
            print(f"  edges/thread {edges:2d} {variant}: "
                  f"{function.attributes.get('num_regs')} registers")
    return harness.exit_status(harness_rows)


if __name__ == "__main__":
    sys.exit(main())
