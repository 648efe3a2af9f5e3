"""CPU engine performance: pull throughput, dual mode, per-iteration overhead (Garaph section 4).

Three measurements of garaphpy's CPU engine (``garaphpy.run(..., mode="cpu")``).
Every graph is generated and preprocessed before any timing; every engine
kernel is compiled by a short untimed run first; times are
``IterationRecord.seconds`` (``time.perf_counter`` around one iteration).

``pull``
    Edges/s of one full pull iteration of PageRank on rmat:SCALE: the median
    over the iterations after the first of a run, then the median over
    ``--repeat`` runs.  Two engine rows: ``engine`` as it runs by default,
    computing rank[u] / out_degree[u] once per vertex before the edge loop
    (the source-side precompute, the run plan's ``source_precompute``), and
    ``engine-direct`` with the precompute switched off, gathering along
    every edge.  Against two bare ``numba.prange`` pulls over the same CSC
    (``graph.store.csc()``), written in this file and timed the same way
    (median of the sweeps after a warm-up sweep):

    * ``bare``: sum of rank[u] / out_degree[u] along every edge (two random
      reads per edge), then PageRank's apply with the dangling mass and the
      L1 change: ``engine-direct``'s per-edge work;
    * ``bare-contrib``: rank[u] / out_degree[u] computed once per vertex
      first, so one random read per edge, as hand-tuned codes do (GAPBS
      ``pr.cc``'s ``outgoing_contrib``): ``engine``'s per-edge work.

    Both must reach the engine's scores after as many sweeps (checked).
    Targets: engine >= 0.7 x the bare loop doing the same work; >= 2.0 G
    edges/s with 16 threads on rmat:22.
``dual``
    Garaph Figure 10: per-iteration times of SSSP (weighted rmat:SCALE and
    the grid) and BFS (rmat:SCALE and the grid) with the direction forced to
    pull, forced to notify-pull, and chosen by the engine (auto), from the
    vertex of largest out-degree.  The three runs must give identical values
    (asserted).  Target: auto total <= 1.05 x min(pull total, notify-pull
    total).  ``best/iter`` is the sum over iterations of the faster forced
    direction, what a perfect per-iteration switch would take.  ``--png``
    plots one panel per (program, graph).
``overhead``
    The fixed cost of an iteration whose frontier is one vertex: SSSP and BFS
    from vertex 0 along a chain 0 -> 1 -> ... -> n-1 (at each ``--chain``
    length, so that any per-iteration O(|V|) work shows as a difference),
    capped at ``--overhead-iterations``; and the notify-pull iterations of
    the grid whose frontier has at most ``--tiny`` vertices.  Target: median
    <= 1 ms.

Usage (from the repository root)::

    python -m bench cpu [--scale 22] [--grid 2000x2000] [--threads N] [--trials 3]
                        [--json rows.jsonl] [--png out.png] [--only pull,dual,overhead]

A configuration of bench/harness.py: every row of the three tables is a case
(``--repeat`` is the older spelling of ``--trials``; ``--warmup`` untimed runs
precede each case's trials, 2-iteration runs where a run is long); each case
is verified as described above, and the JSON-lines file of ``--json`` gets
one row per case and a ``summary`` row holding the tables.

More threads than numba started with need ``NUMBA_NUM_THREADS`` set before
Python starts.  Medians are reported because a shared machine makes single
iterations jump (an OpenMP barrier waiting on a descheduled thread).
"""

from __future__ import annotations

import argparse
import functools
import platform
import sys
import time
import warnings
from pathlib import Path

import numba
import numpy as np

import garaphpy  # sets numba's threading layer before any parallel launch
from garaphpy import config
from garaphpy.api import NotConvergedWarning

from bench._host import host_info, log, median, milliseconds_log_axis
from bench import harness

REPO = Path(__file__).resolve().parents[1]


SECTIONS = ("pull", "dual", "overhead")
DIRECTIONS = ("pull", "notify-pull", "auto")

#: Targets of the issue ("CPU engine ... Performance").
TARGET_ENGINE_OVER_BARE = 0.7
TARGET_G_EDGES_PER_S = 2.0  # with 16 threads on rmat:22
TARGET_AUTO_OVER_BEST = 1.05
TARGET_OVERHEAD_S = 1e-3

#: PageRank damping of the bare pulls; must equal the engine program's.
DAMPING = 0.85


# ---------------------------------------------------------------- bare pulls --
@numba.njit(parallel=True, nogil=True, cache=True)
def bare_pull(in_offsets, sources, out_degree, rank, new_rank, damping):
    """One PageRank pull sweep with the engine's per-edge work; returns the L1 change."""
    n = rank.shape[0]
    # D = sum of rank over the vertices without out-edges
    dangling = 0.0
    for v in numba.prange(n):
        if out_degree[v] == 0:
            dangling += rank[v]
    change = 0.0
    for v in numba.prange(n):
        # accum = sum_{u -> v} rank[u] / out_degree[u]    (two random reads per edge)
        accum = 0.0
        for e in range(in_offsets[v], in_offsets[v + 1]):
            u = sources[e]
            accum += rank[u] / out_degree[u]
        # rank'[v] = (1-d)/N + d * (accum + D/N)
        new = (1.0 - damping) / n + damping * (accum + dangling / n)
        new_rank[v] = new
        change += abs(new - rank[v])
    return change


@numba.njit(parallel=True, nogil=True, cache=True)
def bare_pull_contrib(in_offsets, sources, out_degree, rank, new_rank, contrib, damping):
    """One PageRank pull sweep over precomputed rank/out_degree; returns the L1 change."""
    n = rank.shape[0]
    # contrib[u] = rank[u] / out_degree[u]; D = sum of rank over dangling vertices
    dangling = 0.0
    for u in numba.prange(n):
        degree = out_degree[u]
        if degree == 0:
            dangling += rank[u]
            contrib[u] = 0.0
        else:
            contrib[u] = rank[u] / degree
    change = 0.0
    for v in numba.prange(n):
        # accum = sum_{u -> v} contrib[u]    (one random read per edge)
        accum = 0.0
        for e in range(in_offsets[v], in_offsets[v + 1]):
            accum += contrib[sources[e]]
        new = (1.0 - damping) / n + damping * (accum + dangling / n)
        new_rank[v] = new
        change += abs(new - rank[v])
    return change


@numba.njit(parallel=True, nogil=True)
def _launch_threads(out):
    for i in numba.prange(out.shape[0]):
        out[i] = i


# ------------------------------------------------------------------ helpers --
def load(spec: str, **generator_options) -> "garaphpy.Graph":
    """Generate and preprocess a graph (or reuse its cached store), untimed."""
    started = time.perf_counter()
    graph = garaphpy.Graph.load(spec, progress=False,
                                generator_options=generator_options or None)
    log(f"  {spec}{' ' + str(generator_options) if generator_options else ''}: "
        f"{graph.num_vertices:,} vertices, {graph.num_edges:,} edges "
        f"({time.perf_counter() - started:.1f} s)")
    return graph


def top_source(graph) -> int:
    """The user id of the vertex of largest out-degree."""
    return int(graph.original_ids([int(np.argmax(graph.store.out_degree))])[0])


def engine_run(graph, program, threads: int, turned_off=(), **options):
    """garaphpy.run with the non-convergence warning silenced (capped runs are intended),
    the run plan's choices ``turned_off`` off (``garaphpy.api.execute``)."""
    from garaphpy import api

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotConvergedWarning)
        return api.execute(graph, program, mode="cpu", threads=threads,
                           turned_off=turned_off, **options)


def machine() -> dict:
    """What ran the benchmark."""
    return host_info()


# ---------------------------------------------------------- 1. pull sweep --
def time_bare(kernel, graph_csc, out_degree, sweeps: int, threads: int,
              contrib: bool) -> harness.Measurement:
    """One run of ``sweeps`` sweeps from 1/N: its time is the median sweep after
    a warm-up sweep, its result the rank after ``sweeps``."""
    in_offsets, sources = graph_csc
    n = out_degree.shape[0]
    rank = np.full(n, 1.0 / n)
    new_rank = np.empty(n)
    extra = (np.empty(n),) if contrib else ()
    numba.set_num_threads(threads)
    seconds = []
    for sweep in range(sweeps):
        started = time.perf_counter()
        kernel(in_offsets, sources, out_degree, rank, new_rank, *extra, DAMPING)
        elapsed = time.perf_counter() - started
        if sweep > 0:
            seconds.append(elapsed)
        rank, new_rank = new_rank, rank
    return harness.Measurement(result=rank, seconds=median(seconds))


#: Engine rows of the pull section: name -> (label, source-side precompute on).
ENGINE_ROWS = {"engine": ("garaphpy.run(PageRank), rank/outdeg precomputed", True),
               "engine-direct": ("garaphpy.run(PageRank), precompute off", False)}
#: Each engine row's same-work bare loop.
SAME_WORK = {"engine": "bare-contrib", "engine-direct": "bare"}
#: The bare rows: name -> (kernel, contributions precomputed, label).
BARE_ROWS = {"bare": (bare_pull, False, "prange over CSC, sum rank[u]/out_degree[u]"),
             "bare-contrib": (bare_pull_contrib, True,
                              "prange over CSC, rank/out_degree precomputed")}


def engine_pull(graph, threads: int, sweeps: int, precompute: bool) -> harness.Measurement:
    """One engine run of ``sweeps`` pull iterations with the precompute on or off:
    its time is the median iteration after the first, its result the run."""
    from garaphpy.programs import PageRank

    result = engine_run(graph, PageRank, threads, direction="pull", max_iterations=sweeps,
                        tolerance=0.0,
                        turned_off=() if precompute else {"source_precompute"})
    return harness.Measurement(result=result,
                               seconds=median(r.seconds for r in result.iterations[1:]))


def pull_cases(args, threads: int, section: dict) -> list:
    """Section 1's cases: engine pull (with and without the precompute) and the
    bare prange pulls, each verified against the first engine row's scores."""
    from garaphpy.programs import PageRank

    log(f"pull: building rmat:{args.scale}")
    graph = load(f"rmat:{args.scale}")
    assert PageRank().constants["damping"] == DAMPING
    sweeps = args.pr_iterations
    in_offsets, sources, _ = graph.store.csc()
    out_degree = np.ascontiguousarray(graph.store.out_degree)
    section.update(graph=f"rmat:{args.scale}", num_vertices=graph.num_vertices,
                   num_edges=graph.num_edges, sweeps=sweeps)
    scores = {}

    def engine_verifier(precompute: bool):
        def verify(result) -> str | None:
            if not all(r.direction == "pull" and r.edges_processed == graph.num_edges
                       and r.gather_precomputed == precompute for r in result.iterations):
                return "an iteration was not a full pull with the precompute as set"
            scores.setdefault("engine", result.values)
            if not np.allclose(result.values, scores["engine"], rtol=1e-12, atol=0):
                return "the precompute changed the engine's PageRank scores"
            return None
        return verify

    def bare_verifier(name: str):
        # the same work: after as many sweeps from 1/N, the engine's scores
        def verify(rank) -> str | None:
            if not np.allclose(rank, scores["engine"], rtol=1e-9, atol=1e-15):
                return f"{name} does not reproduce the engine's PageRank scores"
            return None
        return verify

    cases = []
    for name, (label, precompute) in ENGINE_ROWS.items():
        cases.append(harness.Case(
            f"pull/{name}",
            functools.partial(engine_pull, graph, threads, sweeps, precompute),
            params={"label": label, "precompute": precompute},
            warm_up=functools.partial(engine_pull, graph, threads, 2, precompute),
            verify=engine_verifier(precompute)))
    for name, (kernel, contrib, label) in BARE_ROWS.items():
        cases.append(harness.Case(
            f"pull/{name}",
            functools.partial(time_bare, kernel, (in_offsets, sources), out_degree, sweeps,
                              threads, contrib),
            params={"label": label}, warmup=0, verify=bare_verifier(name)))
    return cases


def pull_section(section: dict, rows: list) -> dict:
    """The pull section's figures (the table's) from its rows."""
    table = {}
    for row in rows:
        name = row["case"].removeprefix("pull/")
        table[name] = {"label": row["params"]["label"], "seconds": row["median_s"],
                       "per_repeat": row["trials_s"],
                       "g_edges_per_s": section["num_edges"] / row["median_s"] / 1e9}
    for name in ENGINE_ROWS:
        baseline = SAME_WORK[name]
        table[name]["same_work_baseline"] = baseline
        table[name]["over_same_work"] = (table[name]["g_edges_per_s"]
                                         / table[baseline]["g_edges_per_s"])
    return {**section, "rows": table}


def print_pull(section: dict, threads: int) -> None:
    rows = section["rows"]
    print(f"\n== 1. pull sweep: PageRank on {section['graph']} ({section['num_vertices']:,} "
          f"vertices, {section['num_edges']:,} edges), {threads} threads, median of "
          f"{section['sweeps'] - 1} sweeps after the first, median over repeats")
    print(f"{'kernel':14} {'what':48} {'ms/sweep':>9} {'G edges/s':>10} {'/ same work':>12}")
    for name, row in rows.items():
        ratio = (f"{row['over_same_work']:.2f} {row['same_work_baseline']}"
                 if "over_same_work" in row else "")
        print(f"{name:14} {row['label']:48} {row['seconds'] * 1e3:>9.2f} "
              f"{row['g_edges_per_s']:>10.3f} {ratio:>12}")
    for name in ENGINE_ROWS:
        ratio = rows[name]["over_same_work"]
        print(f"target {name} >= {TARGET_ENGINE_OVER_BARE} x {SAME_WORK[name]}: {ratio:.2f} "
              f"({'met' if ratio >= TARGET_ENGINE_OVER_BARE else 'NOT met'})")
    rate = rows["engine"]["g_edges_per_s"]
    where = "" if (threads == 16 and section["graph"] == "rmat:22") else \
        f"; the target is for 16 threads on rmat:22, this ran {threads} on {section['graph']}"
    print(f"target >= {TARGET_G_EDGES_PER_S} G edges/s: engine {rate:.3f} "
          f"({'met' if rate >= TARGET_G_EDGES_PER_S else 'NOT met'}{where})")


# ---------------------------------------------------------- 2. dual mode --
def dual_graphs(args):
    """(program class, graph label, graph) for Figure 10."""
    from garaphpy.programs import BFS, SSSP

    log(f"dual: building rmat:{args.scale} (weighted and not) and grid:{args.grid}")
    rmat_weighted = load(f"rmat:{args.scale}", weighted=True)
    rmat = load(f"rmat:{args.scale}")
    grid = load(f"grid:{args.grid}")
    return [(SSSP, f"rmat:{args.scale} (w)", rmat_weighted),
            (SSSP, f"grid:{args.grid}", grid),
            (BFS, f"rmat:{args.scale}", rmat),
            (BFS, f"grid:{args.grid}", grid)]


def run_metrics(result) -> dict:
    """A run's per-iteration record, kept in the row's metrics."""
    return {"seconds": [r.seconds for r in result.iterations],
            "direction": [r.direction for r in result.iterations],
            "active_vertices": [r.active_vertices for r in result.iterations],
            "active_fraction": [r.active_fraction for r in result.iterations],
            "edges_processed": [r.edges_processed for r in result.iterations],
            "stop_reason": result.stop_reason}


def dual_run(graph, program, threads: int, direction: str, options: dict
             ) -> harness.Measurement:
    """One run in a forced or automatic direction; its time is the run's
    iteration total (``Result.seconds``)."""
    result = engine_run(graph, program, threads, direction=direction, **options)
    return harness.Measurement(result=result, seconds=result.seconds,
                               metrics=run_metrics(result))


def dual_cases(args, threads: int, graphs: dict) -> list:
    """Section 2's cases: every (program, graph) in forced pull, forced
    notify-pull and auto; notify-pull and auto verified to give pull's values
    in as many iterations."""
    cases = []
    for program, label, graph in dual_graphs(args):
        name = program.__name__
        source = top_source(graph)
        options = {"sources": source}
        if args.dual_max_iterations:
            options["max_iterations"] = args.dual_max_iterations
        graphs[(name, label)] = {"source": source, "num_vertices": graph.num_vertices,
                                 "num_edges": graph.num_edges}
        reference = {}

        def verifier(direction, reference=reference, name=name, label=label):
            def verify(result) -> str | None:
                if direction == "pull":
                    reference.setdefault("result", result)
                pull = reference["result"]
                if not np.array_equal(result.values, pull.values):
                    return f"{name} on {label}: {direction} values differ from pull's"
                if len(result.iterations) != len(pull.iterations):
                    return (f"{name} on {label}: {direction} took {len(result.iterations)} "
                            f"iterations, pull {len(pull.iterations)}")
                return None
            return verify

        for direction in DIRECTIONS:
            cases.append(harness.Case(
                f"dual/{name}/{label}/{direction}",
                functools.partial(dual_run, graph, program, threads, direction, options),
                params={"program": name, "graph": label, "source": source,
                        "direction": direction},
                # compiles every kernel for these types, untimed
                warm_up=functools.partial(engine_run, graph, program, threads,
                                          direction=direction, max_iterations=2,
                                          sources=source),
                verify=verifier(direction)))
    return cases


def dual_section(rows: list, graphs: dict) -> list:
    """The dual-mode cases' figures (the table's and the plot's) from the rows."""
    cases = {}
    for row in rows:
        params = row["params"]
        key = (params["program"], params["graph"])
        case = cases.setdefault(key, {"program": key[0], "graph": key[1], **graphs[key],
                                      "modes": {}})
        runs = row["metrics"]
        # per-iteration median over the trials (runs are deterministic in length)
        per_iteration = np.median([run["seconds"] for run in runs], axis=0)
        last = runs[-1]
        case["iterations"] = len(last["seconds"])
        case["stop_reason"] = last["stop_reason"]
        case["modes"][params["direction"]] = {
            "total_seconds": row["median_s"], "totals": row["trials_s"],
            "seconds": per_iteration.tolist(),
            **{key: last[key] for key in ("direction", "active_vertices", "active_fraction",
                                          "edges_processed")}}
    for case in cases.values():
        modes = case["modes"]
        best_forced = min(modes["pull"]["total_seconds"], modes["notify-pull"]["total_seconds"])
        per_iteration_best = float(np.minimum(modes["pull"]["seconds"],
                                              modes["notify-pull"]["seconds"]).sum())
        case["auto_over_min"] = modes["auto"]["total_seconds"] / best_forced
        case["auto_over_best_per_iteration"] = modes["auto"]["total_seconds"] / per_iteration_best
        case["auto_switches"] = switches(modes["auto"]["direction"])
    return list(cases.values())


def switches(directions: list) -> list:
    """Iterations at which the direction differs from the previous iteration's."""
    return [i for i in range(1, len(directions)) if directions[i] != directions[i - 1]]


def runs_of(directions: list) -> str:
    """'3 np, 5 pull, 2 np': auto's directions as runs."""
    short = {"pull": "pull", "notify-pull": "np"}
    parts, start = [], 0
    for i in range(1, len(directions) + 1):
        if i == len(directions) or directions[i] != directions[start]:
            parts.append(f"{i - start} {short[directions[start]]}")
            start = i
    if len(parts) > 6:
        parts = parts[:5] + [f"... ({len(parts)} runs)"]
    return ", ".join(parts)


def print_dual(cases: list, threads: int, repeat: int) -> None:
    print(f"\n== 2. dual mode (Garaph Fig. 10): total iteration seconds, median of {repeat} "
          f"runs, {threads} threads; identical values asserted")
    print(f"{'program':7} {'graph':16} {'iters':>6} {'pull s':>9} {'notify s':>9} "
          f"{'auto s':>9} {'auto/min':>9} {'auto/best':>10}  auto's directions")
    worst = 0.0
    for case in cases:
        modes = case["modes"]
        worst = max(worst, case["auto_over_min"])
        print(f"{case['program']:7} {case['graph']:16} {case['iterations']:>6} "
              f"{modes['pull']['total_seconds']:>9.4f} "
              f"{modes['notify-pull']['total_seconds']:>9.4f} "
              f"{modes['auto']['total_seconds']:>9.4f} {case['auto_over_min']:>9.3f} "
              f"{case['auto_over_best_per_iteration']:>10.3f}  "
              f"{runs_of(modes['auto']['direction'])}")
    print("auto/min = auto / min(pull, notify-pull); auto/best = auto / sum over iterations of "
          "the faster forced direction")
    print(f"target auto/min <= {TARGET_AUTO_OVER_BEST}: worst {worst:.3f} "
          f"({'met' if worst <= TARGET_AUTO_OVER_BEST else 'NOT met'})")


def plot_dual(cases: list, path: str, threads: int) -> None:
    """One panel per (program, graph): seconds per iteration, log scale."""
    try:
        import matplotlib
    except ImportError:
        log(f"matplotlib is not installed: no {path} (pip install matplotlib)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 2
    rows = (len(cases) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(12, 4.2 * rows), squeeze=False)
    styles = {"pull": dict(color="tab:red", lw=1.2),
              "notify-pull": dict(color="tab:blue", lw=1.2),
              "auto": dict(color="black", lw=1.0, ls="--")}
    for axis, case in zip(axes.flat, cases):
        for direction, style in styles.items():
            mode = case["modes"][direction]
            seconds = np.asarray(mode["seconds"]) * 1e3
            axis.plot(np.arange(seconds.size), seconds, label=f"{direction} "
                      f"({mode['total_seconds']:.3g} s)", **style)
        auto = case["modes"]["auto"]
        marks = case["auto_switches"]
        if marks:
            seconds = np.asarray(auto["seconds"]) * 1e3
            to_pull = [i for i in marks if auto["direction"][i] == "pull"]
            to_notify = [i for i in marks if auto["direction"][i] == "notify-pull"]
            axis.scatter(to_pull, seconds[to_pull], marker="^", s=60, color="tab:red",
                         edgecolor="black", zorder=5, label="auto switches to pull")
            axis.scatter(to_notify, seconds[to_notify], marker="v", s=60, color="tab:blue",
                         edgecolor="black", zorder=5, label="auto switches to notify-pull")
        milliseconds_log_axis(axis)
        axis.set_title(f"{case['program']} on {case['graph']} from {case['source']} "
                       f"(auto/min {case['auto_over_min']:.2f})", fontsize=10)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    for axis in list(axes.flat)[len(cases):]:
        axis.set_visible(False)
    figure.suptitle(f"garaphpy CPU engine, dual mode (Garaph Fig. 10), {threads} threads, "
                    f"{platform.node()}", fontsize=11)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    log(f"wrote {path}")


# ----------------------------------------------------------- 3. overhead --
def chain_graph(n: int) -> "garaphpy.Graph":
    """0 -> 1 -> ... -> n-1, weight 1 on every edge."""
    started = time.perf_counter()
    graph = garaphpy.Graph.from_arrays(np.arange(n - 1, dtype=np.int64),
                                       np.arange(1, n, dtype=np.int64),
                                       np.ones(n - 1, dtype=np.float64), num_vertices=n)
    log(f"  chain of {n:,} vertices ({time.perf_counter() - started:.1f} s)")
    return graph


def overhead_run(graph, program, threads: int, source: int, max_iterations: int,
                 select) -> harness.Measurement:
    """One run; its time is the median of the iterations ``select(record)``
    keeps (the first never)."""
    result = engine_run(graph, program, threads, max_iterations=max_iterations, sources=source)
    chosen = [r for r in result.iterations[1:] if select(r)]
    return harness.Measurement(result=result, seconds=median(r.seconds for r in chosen),
                               metrics={
        "mean_seconds": float(np.mean([r.seconds for r in chosen])) if chosen else np.nan,
        "iterations": len(chosen),
        "active_vertices_max": max((r.active_vertices for r in chosen), default=0),
        "directions": sorted({r.direction for r in result.iterations})})


def overhead_cases(args, threads: int) -> list:
    """Section 3's cases: iterations with one (chain) or few (grid) active
    vertices; a run is verified to have kept some iterations."""
    from garaphpy.programs import BFS, SSSP

    def graphs():
        for n in args.chain:
            yield chain_graph(n), f"chain:{n}", 0, args.overhead_iterations, lambda r: True
        grid = load(f"grid:{args.grid}")
        yield (grid, f"grid:{args.grid}", top_source(grid), args.tiny_iterations,
               lambda r: r.direction == "notify-pull" and r.active_vertices <= args.tiny)

    log("overhead: building chains and the grid")
    for graph, label, source, iterations, select in graphs():
        for program in (SSSP, BFS):
            yield harness.Case(
                f"overhead/{program.__name__}/{label}",
                functools.partial(overhead_run, graph, program, threads, source, iterations,
                                  select),
                params={"program": program.__name__, "graph": label, "source": source,
                        "max_iterations": iterations},
                warm_up=functools.partial(engine_run, graph, program, threads,
                                          max_iterations=2, sources=source),
                verify=lambda result: len(result.iterations) >= 2
                or "the run stopped before a second iteration")


def overhead_section(rows: list) -> list:
    """The overhead table's rows from the harness rows."""
    table = []
    for row in rows:
        last = row["metrics"][-1]
        table.append({"program": row["params"]["program"], "graph": row["params"]["graph"],
                      "iterations": last["iterations"],
                      "active_vertices_max": last["active_vertices_max"],
                      "directions": last["directions"], "median_seconds": row["median_s"],
                      "mean_seconds": median(m["mean_seconds"] for m in row["metrics"])})
    return table


def print_overhead(rows: list, threads: int, tiny: int) -> None:
    print(f"\n== 3. per-iteration overhead, one active vertex (chain) or <= {tiny} (grid, "
          f"notify-pull), auto direction, {threads} threads")
    print(f"{'program':7} {'graph':18} {'iters':>6} {'max active':>10} {'median ms':>10} "
          f"{'mean ms':>9}  directions")
    worst = 0.0
    for row in rows:
        worst = max(worst, row["median_seconds"])
        print(f"{row['program']:7} {row['graph']:18} {row['iterations']:>6} "
              f"{row['active_vertices_max']:>10} {row['median_seconds'] * 1e3:>10.3f} "
              f"{row['mean_seconds'] * 1e3:>9.3f}  {','.join(row['directions'])}")
    print(f"target median <= {TARGET_OVERHEAD_S * 1e3:.0f} ms: worst {worst * 1e3:.3f} ms "
          f"({'met' if worst <= TARGET_OVERHEAD_S else 'NOT met'})")


# --------------------------------------------------------------------- main --
def positive_list(text: str) -> list:
    values = [int(x) for x in text.split(",") if x]
    if not values or min(values) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: expected lengths >= 2, comma-separated")
    return values


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=22, help="RMAT scale (default 22)")
    parser.add_argument("--grid", default="2000x2000", help="grid WIDTHxHEIGHT (default 2000x2000)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: every core)")
    parser.add_argument("--png", default=None, help="write the dual-mode plot here")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help="comma-separated sections: pull,dual,overhead (default all)")
    parser.add_argument("--pr-iterations", type=int, default=10,
                        help="PageRank iterations / bare sweeps per run (default 10)")
    parser.add_argument("--dual-max-iterations", type=int, default=None,
                        help="cap the dual-mode runs (default: run to convergence)")
    parser.add_argument("--chain", type=positive_list, default=[100_000, 1_000_000],
                        help="chain lengths for the overhead (default 100000,1000000)")
    parser.add_argument("--overhead-iterations", type=int, default=2000,
                        help="iterations of each chain run (default 2000)")
    parser.add_argument("--tiny", type=int, default=64,
                        help="largest grid frontier counted as tiny (default 64)")
    parser.add_argument("--tiny-iterations", type=int, default=200,
                        help="iterations of each grid run of the overhead (default 200)")
    harness.add_common_options(parser, trials=3, warmup=1)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)

    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown or not only:
        parser.error(f"--only {args.only!r}: expected a comma-separated subset of "
                     f"{','.join(SECTIONS)}")
    for name in ("pr_iterations", "overhead_iterations", "tiny", "tiny_iterations"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name)}: expected >= 1")
    if args.pr_iterations < 2:
        parser.error("--pr-iterations: expected >= 2 (the first iteration is not counted)")
    available = numba.config.NUMBA_NUM_THREADS
    threads = args.threads or min(config.default_threads(), available)
    if not 1 <= threads <= available:
        parser.error(f"--threads={threads}: numba started with {available} threads "
                     f"(set NUMBA_NUM_THREADS={threads} before starting Python for more)")

    numba.set_num_threads(threads)
    _launch_threads(np.empty(threads, np.int64))
    layer = numba.threading_layer()
    results = {"benchmark": "cpu", "date": time.strftime("%Y-%m-%d %H:%M:%S"), **machine(),
               "threads": threads, "numba_num_threads": available, "threading_layer": layer,
               "args": {k: v for k, v in vars(args).items()}}
    print(f"garaphpy CPU engine benchmark: {results['machine']} ({results['cpu_model']}, "
          f"{results['cpu_count']} CPUs), {threads} threads, numba {numba.__version__} "
          f"threading layer {layer!r}, {results['date']}")

    extra = {"threads": threads, "threading_layer": layer}
    rows = []
    if "pull" in only:
        section = {}
        rows += (pull_rows := harness.run_cases("cpu", pull_cases(args, threads, section),
                                                 args, extra=extra))
        results["pull"] = pull_section(section, pull_rows)
        print_pull(results["pull"], threads)
    if "dual" in only:
        graphs = {}
        rows += (dual_rows := harness.run_cases("cpu", dual_cases(args, threads, graphs), args,
                                                 extra=extra))
        results["dual"] = dual_section(dual_rows, graphs)
        print_dual(results["dual"], threads, args.trials)
        if args.png:
            plot_dual(results["dual"], args.png, threads)
    if "overhead" in only:
        rows += (overhead_rows := harness.run_cases("cpu", overhead_cases(args, threads), args,
                                                     extra=extra))
        results["overhead"] = overhead_section(overhead_rows)
        print_overhead(results["overhead"], threads, args.tiny)
    results["threading_layer"] = numba.threading_layer()
    harness.write_record(args.json, "cpu", "summary", results)
    if args.json:
        log(f"appended rows to {args.json}")
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
