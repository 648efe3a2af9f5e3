"""The GPU's device loop of sparse iterations on and off.

A run on the GPU alone with resident pages runs each iteration whose
frontier is small as a sparse notify-pull, many iterations to one host round
trip, in a loop kept on the device (:mod:`garaphpy.scheduler.device_loop`);
off (the engine's ``device_loop=False``) every iteration is the pull over
every shard, launched and read back by the host; and CC's pulls end with
pointer jumping over the labels on (``config.GPU_SHORTCUT_LABELS``), not off,
and CC starts from the union-find on the device on (the GPU plan's
``gpu_union_find_start``), not off.
Off is the path before the device loop existed.
This script times whole runs both ways, everything else equal; and, for an
asynchronous run of a program declaring ``value_priority`` (SSSP, SSWP), a
third way, ``flat``: the loop on without its buckets of values
(the engine's ``value_priority=False``), every vertex activated pushed in the
next iteration; and, for a program the loop pushes (``apply_keeps_best``:
BFS, SSSP, CC, SSWP), ``graphs``: the loop on without its persistent kernel
(``turned_off={"persistent_loop"}``), every iteration a few launches in CUDA
graphs, where ``on`` runs up to 128 iterations a launch
(:func:`garaphpy.scheduler.decisions.gpu_persistent_loop`); and, for an
asynchronous run of such a program, ``two-pass``: the persistent kernel
without its fused push (``turned_off={"fused_push"}``), each level a push,
an apply and the last block's finish, where ``on`` fuses them into one pass
and one grid barrier (:func:`garaphpy.scheduler.decisions.gpu_fused_push`).

What runs
    BFS, SSSP, CC and PageRank (``--programs``) on the GPU alone,
    ``--execution`` (default: the program's own; PageRank always
    synchronous, as its asynchronous values depend on the order of
    updates); BFS and SSSP from vertex
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
    label shortcut takes other (and fewer) iterations; a mismatch fails the
    row and makes the exit status 1.
Subway
    With ``--subway DIR`` (Subway's built ``bfs-async``, ``sssp-async``,
    ``cc-async``; never committed here, built for the card as
    bench/streamed.py says), its asynchronous BFS, SSSP and CC on the same
    graphs (the store's out-edge CSR in its binary format, the integer
    weights for SSSP) from the same source, ``--subway-trials`` times: its
    "Processing finished in" time, the median, beside the ``on`` run, its
    values checked against garaphpy's (a mismatch makes the exit status 1).

Usage (from the repository root)::

    python -m bench device-loop [--graphs grid:2000x2000,rmat:22] [--programs bfs,sssp,cc,pagerank]
        [--execution sync|async] [--store-dir DIR] [--trials 3] [--json rows.jsonl]
        [--subway DIR] [--persistent-blocks-per-sm N|all]

``--persistent-blocks-per-sm``: blocks a multiprocessor of the persistent kernel
(default 2, the graphs' grid; ``all``: every co-resident block).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

import garaphpy
from garaphpy import config
from garaphpy.scheduler import device_loop, gpu_engine
from garaphpy.scheduler.gpu.engine import GpuEngine
from garaphpy.programs import BUILTIN_PROGRAMS

from bench import harness
from bench.sparse_batch import load, source_of, store_name
from bench.streamed import run_subway, subway_matches, write_subway_graph

REPO = Path(__file__).resolve().parents[1]


#: Record counters a batched iteration shares with the same iteration run alone.
COUNTERS = ("active_vertices", "activated")


def run(graph, program: str, options: dict, looped: bool,
        priority: bool = True, persistent: bool = True,
        fused: bool = True) -> harness.Measurement:
    config.GPU_SHORTCUT_LABELS = looped
    original = gpu_engine.GpuEngine
    turned_off = frozenset() if persistent else frozenset({"persistent_loop"})
    if not fused:
        turned_off |= {"fused_push"}

    class SwitchedEngine(GpuEngine):
        def __init__(self, *arguments, **given):
            if not looped:      # label propagation alone, as before the loop
                given["turned_off"] = frozenset(given.get("turned_off", ())) \
                    | {"gpu_union_find_start"}
            given["turned_off"] = frozenset(given.get("turned_off", ())) | turned_off
            super().__init__(*arguments, device_loop=looped, value_priority=priority, **given)

    # the run's set-up imports the class when it runs: it builds this one
    gpu_engine.GpuEngine = SwitchedEngine
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
            result = garaphpy.run(graph, program, **options)
    finally:
        gpu_engine.GpuEngine = original
    entries = [r.decisions["device_loop"] for r in result.iterations
               if "device_loop" in r.decisions]
    return harness.Measurement(result=result, seconds=result.seconds, metrics={
        "iterations": result.num_iterations, "looped": len(entries),
        "launch": entries[-1]["launch"] if entries else None,
        "buckets": entries[-1].get("buckets") if entries else None,
        "edges": sum(r.edges_processed for r in result.iterations)})


def settings(program: str, execution: str | None) -> tuple:
    """The cases of one (graph, program): ``off`` first (the reference), ``on``,
    for a program the loop pushes ``graphs`` (the loop on, no persistent
    kernel) and, asynchronously, ``two-pass`` (no fused push), and for an
    asynchronous run of a program declaring ``value_priority`` ``flat`` (the
    loop on, the whole frontier each iteration)."""
    names = ("off", "on")
    if BUILTIN_PROGRAMS[program].apply_keeps_best:
        names += ("graphs",)
        if execution == "async":
            names += ("two-pass",)
    if execution == "async" and BUILTIN_PROGRAMS[program].value_priority:
        names += ("flat",)
    return names


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="grid:2000x2000,rmat:22",
                        help="comma-separated generator specs or SNAP files")
    parser.add_argument("--programs", default="bfs,sssp,cc,pagerank")
    parser.add_argument("--execution", choices=("sync", "async"), default=None)
    parser.add_argument("--store-dir", default=None)
    parser.add_argument("--subway", default=None, metavar="DIR",
                        help="a directory holding Subway's built bfs-async, sssp-async, "
                             "cc-async: run them on the same graphs")
    parser.add_argument("--subway-trials", type=int, default=3)
    parser.add_argument("--persistent-blocks-per-sm", default=None, metavar="N|all",
                        help="blocks a multiprocessor of the loop's persistent kernel "
                             "(default: the loop's own rule)")
    parser.add_argument("--bucket-factor", type=float, default=None, metavar="F",
                        help="the GPU's bucket width over the CPU's rule "
                             "(default: config.GPU_BUCKET_FACTOR)")
    harness.add_common_options(parser)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    if args.bucket_factor is not None:
        if not (args.bucket_factor > 0 and math.isfinite(args.bucket_factor)):
            parser.error(f"--bucket-factor={args.bucket_factor}: expected a positive number")
        config.GPU_BUCKET_FACTOR = args.bucket_factor
    if args.persistent_blocks_per_sm is not None:
        device_loop.PERSISTENT_BLOCKS_PER_MULTIPROCESSOR = None \
            if args.persistent_blocks_per_sm == "all" else int(args.persistent_blocks_per_sm)
    subway = Path(args.subway) if args.subway else None
    if subway is not None and not (subway / "bfs-async").exists():
        parser.error(f"--subway {subway}: no built 'bfs-async' there (run make in the checkout)")
    store_dir = Path(args.store_dir or tempfile.mkdtemp(prefix="garaphpy-loop-"))
    cases, graphs, references = [], {}, {}
    for spec in args.graphs.split(","):
        graph = graphs[spec] = load(spec, store_dir)
        for program in args.programs.split(","):
            options = {"mode": "gpu", "execution": args.execution}
            if program in ("bfs", "sssp", "sswp"):
                options["sources"] = [source_of(spec, graph)]
            if program == "pagerank":
                # synchronous always: asynchronous values depend on the order of updates,
                # so its trials could not be checked against each other
                options.update(max_iterations=20, tolerance=0.0, execution="sync")
            reference = references[spec, program] = {}
            # loop off first: its first trial is the reference of every case
            synchronous = options["execution"] != "async" and program != "cc"
            for setting in settings(program, args.execution):
                cases.append(harness.Case(
                    f"{spec}/{program}/{setting}",
                    lambda graph=graph, program=program, options=options, setting=setting:
                        run(graph, program, options, setting != "off", setting != "flat",
                            setting != "graphs", setting != "two-pass"),
                    params={"graph": spec, "program": program, "setting": setting,
                            "execution": args.execution},
                    verify=harness.same_as_first(
                        reference, "the loop-off run", rtol=1e-9,
                        counters=COUNTERS if synchronous else ())))
    rows = harness.run_cases("device_loop", cases, args)
    by_case = {row["case"]: row for row in rows}
    print(f"\n== the GPU's device loop, median of {args.trials} runs "
          f"(execution {args.execution or 'of each program'}); flat: the loop without "
          "buckets of values; graphs: the loop without its persistent kernel; 2pass: "
          "the persistent kernel without its fused push; bucket factor "
          f"{config.GPU_BUCKET_FACTOR:g}, persistent blocks an SM "
          f"{device_loop.PERSISTENT_BLOCKS_PER_MULTIPROCESSOR or 'all'}")
    print(f"{'graph':20s} {'program':8s} {'iters':>6s} {'looped':>7s} {'on ms':>9s} "
          f"{'off ms':>9s} {'off/on':>7s} {'flat ms':>8s} {'flat/on':>7s} {'graphs ms':>9s} "
          f"{'graphs/on':>9s} {'2pass ms':>8s} {'2pass/on':>8s} {'on us/it':>9s} "
          f"{'buckets':>7s}  check")
    figures = []
    for spec in args.graphs.split(","):
        for program in args.programs.split(","):
            named = {setting: by_case[f"{spec}/{program}/{setting}"]
                     for setting in settings(program, args.execution)}
            on, off, flat = named["on"], named["off"], named.get("flat")
            launched = named.get("graphs")
            last = on["metrics"][-1]
            iterations = max(last["iterations"], 1)
            ok = all(r["verification"]["status"] == harness.PASSED for r in named.values())
            flat_ms = f"{flat['median_s'] * 1e3:8.1f}" if flat else f"{'-':>8s}"
            flat_ratio = f"{flat['median_s'] / on['median_s']:7.2f}" if flat else f"{'-':>7s}"
            graphs_ms = f"{launched['median_s'] * 1e3:9.1f}" if launched else f"{'-':>9s}"
            graphs_ratio = f"{launched['median_s'] / on['median_s']:9.2f}" if launched \
                else f"{'-':>9s}"
            two = named.get("two-pass")
            two_ms = f"{two['median_s'] * 1e3:8.1f}" if two else f"{'-':>8s}"
            two_ratio = f"{two['median_s'] / on['median_s']:8.2f}" if two else f"{'-':>8s}"
            print(f"{spec[-20:]:20s} {program:8s} {last['iterations']:6d} {last['looped']:7d} "
                  f"{on['median_s'] * 1e3:9.1f} {off['median_s'] * 1e3:9.1f} "
                  f"{off['median_s'] / on['median_s']:7.2f} {flat_ms} {flat_ratio} "
                  f"{graphs_ms} {graphs_ratio} {two_ms} {two_ratio} "
                  f"{on['median_s'] / iterations * 1e6:9.1f} {str(last['buckets'] or '-'):>7s}  "
                  f"{'ok' if ok else 'FAILED'}")
            figures.append({"graph": spec, "program": program, "execution": args.execution,
                            **{f"{name}_s": row["median_s"] for name, row in named.items()},
                            "speed_up": off["median_s"] / on["median_s"],
                            "iterations": last["iterations"], "looped": last["looped"],
                            "buckets": last["buckets"], "edges": last["edges"],
                            "flat_edges": flat["metrics"][-1]["edges"] if flat else None,
                            "launch": last["launch"]})
    peers = run_subway_peers(subway, args, graphs, store_dir, by_case, references) \
        if subway is not None else {}
    harness.write_record(args.json, "device_loop", "summary", {"rows": figures,
                                                                "subway": peers})
    return harness.exit_status(rows) or int(any(
        peer["check"] != "ok" for peer in peers.values()))


def run_subway_peers(subway: Path, args, graphs: dict, store_dir: Path, by_case: dict,
                     references: dict) -> dict:
    """Subway's asynchronous BFS, SSSP and CC on each graph, from the same source,
    checked against garaphpy's values; printed beside garaphpy's looped runs."""
    peers = {}
    for spec, graph in graphs.items():
        for program in args.programs.split(","):
            if program not in ("bfs", "sssp", "cc"):
                continue
            weighted = program == "sssp"
            graph_path = store_dir / f"{store_name(spec)}.{'bwcsr' if weighted else 'bcsr'}"
            if not graph_path.exists():
                write_subway_graph(graph.store, graph_path, weighted)
            source = None
            if program != "cc":
                source = int(graph.internal_ids(np.array([source_of(spec, graph)]))[0])
            output = store_dir / f"subway-{program}.txt"
            times = [run_subway(subway, program, graph_path, source, output, "async")
                     for _ in range(args.subway_trials)]
            problem = subway_matches(program, output, references[spec, program]["result"].values)
            milliseconds = float(np.median(times))
            ours = by_case[f"{spec}/{program}/on"]["median_s"] * 1e3
            peers[f"{spec}/{program}"] = {"subway_ms": milliseconds, "trials_ms": times,
                                          "garaphpy_ms": ours, "check": problem or "ok"}
            print(f"subway-async {spec[-20:]:20s} {program:6s} {milliseconds:9.1f} ms  "
                  f"garaphpy {ours:9.1f} ms  subway/garaphpy {milliseconds / ours:6.2f}  "
                  f"{problem or 'ok'}")
    return peers


if __name__ == "__main__":
    sys.exit(main())
