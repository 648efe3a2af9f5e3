"""Partitioned runs over Dask LocalCluster workers against one process (beyond one machine).

On rmat:SCALE, each program (``--programs``: PageRank, BFS, CC by default)
runs in one process with ``--threads`` threads and over LocalClusters of each
of ``--workers`` worker processes (one partition per worker) with
``--worker-threads`` threads each, on the same host.  A trial's time is the
run's iteration time (``Result.seconds``: the workers' pulls, the exchange
and the client's calls, CC's union-find start in its first iteration as in
one process; not the set-up, where each worker opens the store and reads
its pages).  Per case, from the records of the trial whose time is the median:

* ``ms_per_iteration``: its iteration time / iterations;
* ``start_ms``: CC's union-find start over the partitions (part of the
  first iteration's time), its slowest partition;
* ``pull_ms``: per iteration, the slowest worker's pull (the median);
* ``exchange_ms``: per iteration, the slowest worker's sends (the median);
* ``exchanged_mb``: bytes of (index, value) pairs sent per iteration (mean);
* ``pulled_per_iteration``: destinations the workers pulled per iteration
  (mean; a worker notify-pulls a sparse iteration and skips settled
  vertices, as the one process does), ``notify_pull_iterations``: the
  iterations in which some worker notify-pulled;
* ``worker_edges_per_s``: edges a worker pulls per second of its pull time,
  the per-worker rate a scaling model starts from.

With ``--gpu-workers G`` each cluster also has G workers whose resources
name a GPU (``resources={"GPU": 1}``, worker processes under nannies), which
pull their partitions on it (:mod:`garaphpy.distributed.gpu_worker`); the
rows then give ``gpu_pull_ms``, the GPU workers' pull per iteration (the
median of their slowest), and ``processors``.  On a host of one GPU, G is 1.

Every partitioned run is verified against the one-process run of the same
program: exact for BFS and CC, 1e-9 relative for PageRank (the workers hold
their contributions as the one process does, in float32 where its rule says).

Usage (from the repository root)::

    python -m bench dask [--scale 16] [--symmetric] [--programs pagerank,bfs,cc] [--workers 2,4]
                         [--threads 2] [--worker-threads 1] [--gpu-workers 0] [--trials 3]
                         [--worker-env NAME=VALUE ...] [--warmup 1] [--json rows.jsonl]
                         [--floor 8,64]

The rows also give the exchange's phases per iteration (``send_ms``,
``wait_ms``, ``apply_ms``, ``lag_ms``: :mod:`bench._dask_floor` says what each
is); ``--floor L1,L2`` measures instead what a run and an iteration cost
with no work (:mod:`bench._dask_floor`).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

import numpy as np

import garaphpy
from garaphpy.api import NotConvergedWarning, execute

from bench import _dask_floor as dask_floor, harness
from bench._host import log

SOURCED = {"bfs", "sssp", "sswp"}


def _run(graph, program: str, source, **keywords):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotConvergedWarning)
        sources = [source] if program in SOURCED else None
        return garaphpy.run(graph, program, sources=sources, **keywords)


def measured(result) -> harness.Measurement:
    """The run's iteration time, with its per-iteration figures."""
    records = result.iterations
    rows = [r.decisions.get("partitions") for r in records]
    partitioned = all(rows) and bool(rows)
    metrics = {"iterations": len(records), "seconds": result.seconds,
               "setup_s": result.setup_seconds,
               "ms_per_iteration": 1e3 * result.seconds / max(1, len(records)),
               "edges_per_iteration": int(np.mean([r.edges_processed for r in records]))}
    if partitioned:
        metrics.update(
            pull_ms=1e3 * float(np.median([max(row["pull_seconds"]) for row in rows])),
            exchange_ms=1e3 * float(np.median([max(row["exchange_seconds"]) for row in rows])),
            exchanged_mb=float(np.mean([r.exchanged_bytes for r in records])) / 1e6,
            changed_per_iteration=float(np.mean([sum(row["changed"]) for row in rows])),
            pulled_per_iteration=float(np.mean([sum(row["pulled"]) for row in rows])),
            notify_pull_iterations=sum("notify-pull" in row["directions"] for row in rows),
            workers=len(records[0].workers), processors=rows[0].get("processors"),
            wait_policies=sorted({str(p.get("wait_policy"))
                                  for p in result.plan.distributed["partitions"]}))
        metrics.update(dask_floor.phases(result))
        start = records[0].decisions.get("partition_union_find_start")
        if start:       # CC's start, in the first iteration's time: the slowest partition
            metrics["start_ms"] = 1e3 * max(start["seconds"])
        gpu_pulls = [max(s for s, p in zip(row["pull_seconds"], row["processors"]) if p == "gpu")
                     for row in rows if "gpu" in row.get("processors", ())]
        if gpu_pulls:
            metrics["gpu_pull_ms"] = 1e3 * float(np.median(gpu_pulls))
        per_worker = metrics["edges_per_iteration"] / metrics["workers"]
        metrics["worker_edges_per_s"] = per_worker / (metrics["pull_ms"] / 1e3) \
            if metrics["pull_ms"] else None
    return harness.Measurement(result=result, seconds=result.seconds, metrics=metrics)


def verifier(reference: dict, program: str):
    def verify(result) -> str | None:
        expected = reference[program]
        if program == "pagerank":
            if result.num_iterations != expected.num_iterations:
                return f"{result.num_iterations} iterations, the one process {expected.num_iterations}"
            same = np.allclose(result.values, expected.values, rtol=1e-9, atol=0)
        else:
            same = np.array_equal(result.values, expected.values)
        return None if same else "values differ from the one-process run's"
    return verify


def cluster(distributed, workers: int, threads: int, gpu_workers: int,
            env: dict | None = None):
    """A LocalCluster of ``workers`` worker processes, or, with ``gpu_workers``,
    a cluster of as many CPU workers and ``gpu_workers`` workers whose
    resources name a GPU; ``env``: variables set in every worker process
    before it starts (``OMP_WAIT_POLICY``, read by OpenMP at its load)."""
    env = dict(env or {})
    if not gpu_workers:
        return distributed.LocalCluster(n_workers=workers, threads_per_worker=threads,
                                        processes=True, dashboard_address=None, env=env)
    specs = {f"cpu-{i}": {"cls": distributed.Nanny,
                          "options": {"nthreads": threads, "dashboard": False, "env": env}}
             for i in range(workers)}
    specs.update({f"gpu-{i}": {"cls": distributed.Nanny,
                               "options": {"nthreads": threads, "dashboard": False,
                                           "resources": {"GPU": 1}, "env": env}}
                  for i in range(gpu_workers)})
    return distributed.SpecCluster(workers=specs, scheduler={
        "cls": distributed.Scheduler, "options": {"dashboard": False}})


def figures(row: dict) -> dict:
    """The per-iteration figures of the trial whose time is the median."""
    times = row["trials_s"]
    median = sorted(range(len(times)), key=times.__getitem__)[(len(times) - 1) // 2]
    return dict(row["metrics"][median])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=16, help="RMAT scale (default 16)")
    parser.add_argument("--symmetric", action="store_true",
                        help="make the graph symmetric (kron:SCALE, GAPBS's -g)")
    parser.add_argument("--programs", default="pagerank,bfs,cc")
    parser.add_argument("--workers", default="2,4", help="worker counts (default 2,4)")
    parser.add_argument("--threads", type=int, default=2,
                        help="threads of the one-process run (default 2)")
    parser.add_argument("--worker-threads", type=int, default=1,
                        help="threads of each worker (default 1)")
    parser.add_argument("--gpu-workers", type=int, default=0,
                        help="workers with a GPU resource beside the CPU workers (default 0)")
    parser.add_argument("--worker-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable of every worker process, e.g. "
                             "OMP_WAIT_POLICY=PASSIVE (repeatable)")
    parser.add_argument("--floor", metavar="L1,L2", default=None,
                        help="measure instead the floor of a run and of an iteration: BFS "
                             "along paths of these lengths (bench/_dask_floor.py)")
    harness.add_common_options(parser, trials=3, warmup=1)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    try:
        import distributed
    except ImportError:
        parser.error("needs Dask's distributed scheduler: pip install garaphpy[dask]")
    if args.floor is not None:
        from bench import _dask_floor as dask_floor

        return dask_floor.main(args, distributed, cluster)
    programs = [p for p in args.programs.split(",") if p]
    worker_counts = [int(w) for w in args.workers.split(",") if w]
    if args.gpu_workers < 0:
        parser.error(f"--gpu-workers {args.gpu_workers}: expected 0 or more")
    worker_env = {}
    for setting in args.worker_env:
        name, equals, value = setting.partition("=")
        if not equals or not name:
            parser.error(f"--worker-env {setting}: expected NAME=VALUE")
        worker_env[name] = value

    graph = garaphpy.Graph.load(f"rmat:{args.scale}", progress=False)
    if args.symmetric:
        graph = graph.as_undirected()
    spec = f"kron:{args.scale}" if args.symmetric else f"rmat:{args.scale}"
    source = int(graph.original_ids(np.array([np.argmax(graph.store.out_degree)]))[0])
    log(f"{spec}: {graph.num_vertices:,} vertices, {graph.num_edges:,} edges")
    reference = {}
    for program in programs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotConvergedWarning)
            reference[program] = execute(
                graph, program, mode="cpu", threads=args.threads,
                sources=[source] if program in SOURCED else None)
    common = {"graph": spec, "num_vertices": graph.num_vertices,
              "num_edges": graph.num_edges, "load_before": os.getloadavg()}
    cases = [harness.Case(f"one-process/{program}",
                          lambda program=program: measured(_run(graph, program, source,
                                                                mode="cpu",
                                                                threads=args.threads)),
                          params={"program": program, "threads": args.threads},
                          verify=verifier(reference, program) if program != "pagerank"
                          else None, summarize=figures)
             for program in programs]
    rows = harness.run_cases("dask", cases, args, extra=common)
    for count in worker_counts:
        gpus = f"+{args.gpu_workers}gpu" if args.gpu_workers else ""
        with cluster(distributed, count, args.worker_threads, args.gpu_workers,
                     worker_env) as spread, \
                distributed.Client(spread) as client:
            cases = [harness.Case(
                f"dask-{count}x{args.worker_threads}{gpus}/{program}",
                lambda program=program: measured(_run(graph, program, source, client=client,
                                                      checkpoint_every=0)),
                params={"program": program, "workers": count,
                        "worker_threads": args.worker_threads,
                        "gpu_workers": args.gpu_workers, "worker_env": worker_env},
                verify=verifier(reference, program), summarize=figures)
                for program in programs]
            rows += harness.run_cases("dask", cases, args, extra=common)
    load_after = os.getloadavg()
    print(f"garaphpy over Dask workers: {spec} ({graph.num_vertices:,} vertices, "
          f"{graph.num_edges:,} edges), {time.strftime('%Y-%m-%d %H:%M:%S')}, "
          f"{platform.node()}, {os.cpu_count()} cores; load average before "
          f"{common['load_before'][0]:.1f}, after {load_after[0]:.1f}")
    print("| case | iterations | median s | ms/iteration | CC start ms | pull ms | GPU pull ms | "
          "exchange ms | lag ms | exchanged MB/iteration | changed/iteration | pulled/iteration | "
          "worker M edges/s | vs one process |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        program = row["params"]["program"]
        alone = harness.row_of(rows, f"one-process/{program}")["median_s"]
        m = row["figures"]

        def shown(name, scale=1.0, digits=1):
            value = m.get(name)
            return "" if value is None else f"{value * scale:.{digits}f}"
        print(f"| {row['case']} | {m['iterations']} | {row['median_s']:.3f} | "
              f"{m['ms_per_iteration']:.1f} | {shown('start_ms')} | {shown('pull_ms')} | "
              f"{shown('gpu_pull_ms')} | "
              f"{shown('exchange_ms')} | {shown('lag_ms')} | "
              f"{shown('exchanged_mb', digits=3)} | {shown('changed_per_iteration', digits=0)} | "
              f"{shown('pulled_per_iteration', digits=0)} | "
              f"{shown('worker_edges_per_s', 1e-6)} | "
              f"{alone / row['median_s']:.2f}x |")
    policies = sorted({policy for row in rows
                       for policy in row["figures"].get("wait_policies") or ()})
    print(f"worker OpenMP wait policies: {', '.join(policies) or 'none'} "
          "(PASSIVE: chosen where the host was busy at the worker's import)")
    harness.write_record(args.json, "dask", "summary",
                         {**common, "load_after": load_after,
                          "rows": {row["case"]: row["figures"] for row in rows}}, args)
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
