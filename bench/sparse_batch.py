"""Sparse CPU iterations, one switch on and off (Garaph section 4.1's notify-pull).

A run on the CPU alone executes its notify-pull iterations with the sparse
notify many to one kernel call (``kernels.cpu.sparse_iterations``); each is
the engine's own iteration, without the Python round and the launches of a
call per iteration.  A run of a program final once set (BFS) pushes from
the frontier in the sparse iterations it runs alone (Beamer's top-down
step, ``kernels.cpu.push_settling``) instead of notifying and pulling.
This script times whole runs with one of these on and off (``--switch``: the
run plan's ``sparse_batches``, the default, or ``settling_push``, turned off
through ``garaphpy.api.execute``),
everything else equal (batches are compared with notify-pulls run alone: no
push then).

What runs
    BFS, SSSP and CC (``--programs``) on CPU-only runs (``--threads``,
    default all cores), ``--execution`` sync by default (the records of
    both runs are then equal, which the verification checks); BFS and SSSP
    from the vertex of largest out-degree (on a grid, vertex ``WIDTH + 1``).
Graphs
    ``--graphs``: generator specs (``grid:WxH``, ``rmat:SCALE``, weighted)
    or SNAP files (weighted by the hash rule), comma-separated; stores built
    once into ``--store-dir`` (default: a temporary directory).
Timing
    Per (graph, program, on/off) a case of bench/harness.py: ``--warmup``
    untimed runs, then ``--trials`` runs; ``Result.seconds`` (the
    iterations' time); the table gives the medians and off / on.
Correctness
    Every trial's values must equal the first trial's with the switch off,
    and in synchronous runs its iteration records' counters too (a push
    reads other edges than a pull: not its ``edges_processed``); a
    mismatch fails the row and makes the exit status 1.

Usage (from the repository root)::

    python -m bench sparse-batch [--graphs grid:1000x1000,rmat:18,FILE] [--programs bfs,sssp,cc]
        [--switch sparse_batches|settling_push] [--undirected] [--threads N]
        [--execution sync|async] [--store-dir DIR] [--trials 3] [--json rows.jsonl]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

import garaphpy

from bench import harness

REPO = Path(__file__).resolve().parents[1]

from garaphpy import api

#: Record counters an iteration shares with the same iteration with the switch off.
COUNTERS = {"sparse_batches": ("direction", "active_vertices", "updated_vertices",
                               "edges_processed", "activated"),
            "settling_push": ("direction", "active_vertices", "updated_vertices",
                              "activated")}

#: The decision an iteration records when the switch changed it.
SWITCHED = {"sparse_batches": "sparse_batch", "settling_push": "settling_push"}


def store_name(spec: str) -> str:
    """The name of ``spec``'s store and of files written for it beside the store:
    a file's own name (wherever it is), or the generator spec without ':'."""
    name = Path(spec).name if Path(spec).exists() else spec
    return name.replace(":", "_").replace("/", "_")


def load(spec: str, store_dir: Path) -> garaphpy.Graph:
    """A generator spec (weighted) or a SNAP file (hash-weighted), built once."""
    store = store_dir / store_name(spec)
    if Path(spec).exists():
        return garaphpy.Graph.load(spec, store=store, weights="hash", progress=False)
    options = {"weighted": True} if spec.startswith("rmat") else None
    return garaphpy.Graph.load(spec, store=store, generator_options=options, progress=False)


def source_of(spec: str, graph: garaphpy.Graph) -> int:
    """The user id runs start from: WIDTH + 1 on a grid, else the top out-degree."""
    if spec.startswith("grid:"):
        return int(spec.split(":")[1].split("x")[0]) + 1
    top = int(np.argmax(np.diff(graph.store.out_offsets)))
    return int(graph.original_ids(np.array([top]))[0])


def run(graph, program: str, options: dict, switch: str, on: bool) -> harness.Measurement:
    # batches are compared with notify-pulls run alone, which a push would replace
    turned_off = {"settling_push"} if switch == "sparse_batches" else set()
    if not on:
        turned_off.add(switch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
        result = api.execute(graph, program, turned_off=turned_off, **options)
    decision = SWITCHED[switch]
    return harness.Measurement(result=result, seconds=result.seconds, metrics={
        "iterations": result.num_iterations,
        "switched": sum(bool((r.decisions.get(decision) or {}).get("choice"))
                        for r in result.iterations)})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="grid:1000x1000,rmat:18",
                        help="comma-separated generator specs or SNAP files")
    parser.add_argument("--programs", default="bfs,sssp,cc")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--execution", choices=("sync", "async"), default="sync")
    parser.add_argument("--switch", choices=tuple(COUNTERS), default="sparse_batches",
                        help="the run plan's choice turned on and off")
    parser.add_argument("--undirected", action="store_true",
                        help="make each graph symmetric (Graph.as_undirected)")
    parser.add_argument("--store-dir", default=None)
    harness.add_common_options(parser)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    store_dir = Path(args.store_dir or tempfile.mkdtemp(prefix="garaphpy-batch-"))
    cases = []
    for spec in args.graphs.split(","):
        graph = load(spec, store_dir)
        if args.undirected:
            graph = graph.as_undirected()
        for program in args.programs.split(","):
            options = {"mode": "cpu", "threads": args.threads, "execution": args.execution}
            if program != "cc":
                options["sources"] = [source_of(spec, graph)]
            reference = {}
            # the switch off first: its first trial is the reference of both
            for on in (False, True):
                cases.append(harness.Case(
                    f"{spec}/{program}/{'on' if on else 'off'}",
                    lambda graph=graph, program=program, options=options, on=on:
                        run(graph, program, options, args.switch, on),
                    params={"graph": spec, "program": program, "switch": args.switch,
                            "on": on, "execution": args.execution, "threads": args.threads},
                    verify=harness.same_as_first(
                        reference, f"the run with {args.switch} off",
                        counters=COUNTERS[args.switch] if args.execution == "sync" else ())))
    rows = harness.run_cases("sparse_batch", cases, args)
    print(f"\n== sparse CPU iterations, {args.switch} on and off, median of {args.trials} "
          f"runs ({args.execution}, threads {args.threads or 'all'})")
    print(f"{'graph':28s} {'program':8s} {'iters':>6s} {'switched':>8s} {'on ms':>10s} "
          f"{'off ms':>10s} {'off/on':>7s}  check")
    figures = []
    for on, off in zip(rows[1::2], rows[0::2]):
        params, last = on["params"], on["metrics"][-1]
        ratio = off["median_s"] / on["median_s"]
        ok = all(r["verification"]["status"] == harness.PASSED for r in (on, off))
        print(f"{params['graph'][-28:]:28s} {params['program']:8s} {last['iterations']:6d} "
              f"{last['switched']:8d} {on['median_s'] * 1e3:10.1f} {off['median_s'] * 1e3:10.1f} "
              f"{ratio:7.2f}  {'ok' if ok else 'FAILED'}")
        figures.append({**params, "on_s": on["median_s"], "off_s": off["median_s"],
                        "speed_up": ratio})
    harness.write_record(args.json, "sparse_batch", "summary", {"rows": figures})
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
