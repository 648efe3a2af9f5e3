"""The floor of a partitioned run: what a Dask run and an iteration cost with no work (beyond one machine).

``python -m bench dask --floor 8,64`` runs BFS along a path of L vertices
(L iterations, each pulling one vertex: the pulls do next to nothing) for
each length L given, in one process (``--threads``) and over LocalClusters
of each of ``--workers`` worker processes with ``--worker-threads`` threads
(one partition a worker), the trials of every case in turns.  A trial's time
is the whole ``garaphpy.run`` call: the client's set-up, the workers' (each
opens the store, reads its pages, warms its kernels up), the iterations and
the gather of the values.  From two lengths L1 < L2 and each trial's pair of
runs, the floor:

* ``per_iteration_ms``: (T(L2) - T(L1)) / (L2 - L1);
* ``per_run_ms``: T(L1) - L1 * per_iteration_ms, the cost of a run with no
  iteration.

Per case, the medians over the run's iterations (but the first, which also
takes the client's call) of the exchange's phases
(:mod:`garaphpy.distributed.rounds`): ``send_ms``, the messages handed over;
``wait_ms``, until every peer's vote came; ``apply_ms``, the pairs received
written; ``lag_ms``, from the last worker's pull end to the last worker's
last vote (the exchange's latency on the iteration's critical path);
``round_ms``, the slowest worker's iteration.  Every run is verified against
the one-process values (exact).

Beside them, Dask's own floor on the same cluster: ``actor_call_ms``, a bare
actor call's round trip from the client (a partition host's
:meth:`~garaphpy.distributed.hosts.PartitionHost.ping`, on the worker's actor
thread; the median and range of 200).
"""

from __future__ import annotations

import os
import platform
import statistics
import time
import warnings

import numpy as np

import garaphpy
from garaphpy.api import NotConvergedWarning

from bench import harness


def path_graph(length: int):
    """The path 0 - 1 - ... - length-1, symmetric: BFS from 0 takes ``length`` iterations."""
    src = np.arange(length - 1, dtype=np.int64)
    return garaphpy.Graph.from_arrays(np.concatenate([src, src + 1]),
                                      np.concatenate([src + 1, src]), num_vertices=length)


def _bfs(graph, **keywords):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotConvergedWarning)
        return garaphpy.run(graph, "bfs", sources=[0], max_iterations=graph.num_vertices + 1,
                            **keywords)


def phases(result) -> dict:
    """The per-iteration medians (ms) of the exchange's phases of a partitioned
    run's records (the first iteration left out where there are more)."""
    rows = [r.decisions.get("partitions") or {} for r in result.iterations]
    rows = rows[1:] if len(rows) > 1 else rows
    figures = {"round_ms": 1e3 * statistics.median(r.seconds for r in result.iterations[1:]
                                                   or result.iterations)}
    for key in ("send", "wait", "apply", "pull"):
        found = [max(row[f"{key}_seconds"]) for row in rows if f"{key}_seconds" in row]
        if found:
            figures[f"{key}_ms"] = 1e3 * statistics.median(found)
    lags = [max(row["votes_times"]) - max(row["pull_end_times"]) for row in rows
            if "votes_times" in row]
    if lags:
        figures["lag_ms"] = 1e3 * statistics.median(lags)
    return figures


def _case(name: str, graph, reference, params: dict, **keywords) -> harness.Case:
    def run():
        began = time.perf_counter()
        result = _bfs(graph, **keywords)
        wall = time.perf_counter() - began
        metrics = {"iterations": result.num_iterations, "iteration_s": result.seconds,
                   "setup_s": result.setup_seconds}
        if "client" in keywords:
            metrics.update(phases(result))
        return harness.Measurement(result=result, seconds=wall, metrics=metrics)

    def verify(result):
        return None if np.array_equal(result.values, reference.values) \
            else "values differ from the one-process run's"
    return harness.Case(name, run, params=params, verify=verify)


def floor_of(rows: dict, lengths: list) -> dict:
    """``per_iteration_ms`` and ``per_run_ms`` (median, min, max over the
    trials, each trial's runs of the shortest and the longest path paired),
    from ``rows``, each length's row of one setting."""
    short, long = lengths[0], lengths[-1]
    pairs = list(zip(rows[short]["trials_s"], rows[long]["trials_s"]))
    per_iteration = [(b - a) / (long - short) for a, b in pairs]
    per_run = [a - short * slope for (a, _), slope in zip(pairs, per_iteration)]

    def spread(values):
        values = [1e3 * v for v in values]
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}
    return {"per_iteration_ms": spread(per_iteration), "per_run_ms": spread(per_run)}


def actor_call_ms(client, calls: int = 200) -> dict:
    """A bare actor call's round trip from ``client`` (ms: median, min, max of
    ``calls``), to the partition host of its first worker."""
    from garaphpy.distributed.hosts import hosts_on

    address = sorted(client.scheduler_info()["workers"])[0]
    host = hosts_on(client, [address])[address]
    for _ in range(20):
        host.ping().result()
    times = []
    for _ in range(calls):
        began = time.perf_counter()
        host.ping().result()
        times.append(1e3 * (time.perf_counter() - began))
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}


def main(args, distributed, cluster) -> int:
    """The floor (see the module) for ``args.floor``'s lengths; ``cluster``
    makes a LocalCluster as the Dask bench's."""
    lengths = sorted({int(x) for x in args.floor.split(",") if x})
    if len(lengths) < 2 or lengths[0] < 2:
        raise SystemExit(f"--floor {args.floor}: expected two lengths or more, each 2 or more")
    graphs = {length: path_graph(length) for length in lengths}
    references = {length: _bfs(graphs[length], mode="cpu", threads=args.threads)
                  for length in lengths}
    worker_counts = [int(w) for w in args.workers.split(",") if w]
    rows, floors, bare = [], {}, {}
    for count in worker_counts:
        setting = f"dask-{count}x{args.worker_threads}"
        with cluster(distributed, count, args.worker_threads, 0) as spread, \
                distributed.Client(spread) as client:
            cases = []
            for length in lengths:
                cases.append(_case(f"one-process/path-{length}", graphs[length],
                                   references[length], {"length": length},
                                   mode="cpu", threads=args.threads))
                cases.append(_case(f"{setting}/path-{length}", graphs[length],
                                   references[length],
                                   {"length": length, "workers": count,
                                    "worker_threads": args.worker_threads},
                                   client=client, checkpoint_every=0))
            done = harness.measure_in_turns(cases, trials=args.trials, warmup=args.warmup,
                                            benchmark="dask-floor", quiet=args.quiet)
            bare[setting] = actor_call_ms(client)
        for row in done:
            row["args"] = dict(vars(args))
        harness.write_rows(args.json, done)
        rows += [row for row in done if row["case"] not in {r["case"] for r in rows}]
        for name in ("one-process", setting):
            floors[name] = floor_of({row["params"]["length"]: row for row in rows
                                     if row["case"].startswith(name + "/")}, lengths)
    print(f"garaphpy's Dask floor: BFS along paths of {lengths} vertices, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}, {platform.node()}, {os.cpu_count()} cores, "
          f"{args.trials} trials in turns; load average {os.getloadavg()[0]:.1f}")
    print("| case | iterations | run ms (median) | range | iterations ms | set-up ms | "
          "round ms | send ms | wait ms | apply ms | lag ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        times = row["trials_s"]
        m = row["metrics"][sorted(range(len(times)), key=times.__getitem__)[(len(times) - 1) // 2]]

        def shown(name):
            return f"{m[name]:.2f}" if name in m else ""
        print(f"| {row['case']} | {m['iterations']} | {1e3 * row['median_s']:.1f} | "
              f"{1e3 * row['min_s']:.1f}-{1e3 * max(row['trials_s']):.1f} | "
              f"{1e3 * m['iteration_s']:.1f} | {1e3 * m['setup_s']:.1f} | {shown('round_ms')} | "
              f"{shown('send_ms')} | {shown('wait_ms')} | {shown('apply_ms')} | "
              f"{shown('lag_ms')} |")
    print("| setting | per run ms (median, range) | per iteration ms (median, range) | "
          "bare actor call ms (median, range) |")
    print("|---|---|---|---|")
    for name, floor in floors.items():
        run, iteration = floor["per_run_ms"], floor["per_iteration_ms"]
        call = bare.get(name)
        shown = f"{call['median']:.2f} ({call['min']:.2f}-{call['max']:.2f})" if call else ""
        print(f"| {name} | {run['median']:.1f} ({run['min']:.1f}-{run['max']:.1f}) | "
              f"{iteration['median']:.2f} ({iteration['min']:.2f}-{iteration['max']:.2f}) | "
              f"{shown} |")
    harness.write_record(args.json, "dask-floor", "summary",
                         {"floors": floors, "actor_call_ms": bare}, args)
    return harness.exit_status(rows)
