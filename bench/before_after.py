"""The same runs from this tree and an older one, in turns: a change's cost (Garaph section 6).

A change that should cost nothing (a refactoring of the engine, kernels
taking their arguments in groups) is kept when PageRank, BFS, SSSP and CC
run no slower after it than before, on the same machine in one run.  This
runs them from two garaphpy source trees, this one (``new``) and
``--baseline DIR`` (``old``: ``git archive`` of an older commit), each in
fresh processes with its own store (``python -m`` and ``-c`` put the working
directory first, so every process runs in its own tree), the trees in turns
(old, new; then new, old; ...), so that a drift of the machine falls on both.

For every graph (``rmat:S``; ``kron:S``, rmat:S made symmetric; ``grid:WxH``),
GPU budget (``resident``, or a fraction of the page bytes beside the vertex
data, with ``--mode gpu`` or ``hybrid``) and program, a process runs the
program ``--warmup`` times untimed and ``--trials`` times timed, each a
``garaphpy.run``, and reports the engine's seconds (set-up and compilation
apart).  The table gives per case both trees' medians, their ratio, the
ratio of their fastest runs, both spreads and whether every value was the
same, and the ratio's 90% interval over processes (a bootstrap) with its
verdict against the 3% bar: within, slower, or unclear (more rounds
decide); the JSON rows (``--json``) one row per case and tree.
``--from-json FILE ...`` prints the table of rows written earlier, pooled
(several calls' rounds of the same two trees), without running anything.

Usage (from the repository root)::

    git archive OLD garaphpy | tar -x -C /tmp/old
    python -m bench before-after --baseline /tmp/old --mode gpu \\
        --graphs kron:21,grid:2000x2000 --budgets resident,0.25 --rounds 2 --trials 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench import harness

#: The child: one tree's runs of one graph, a JSON line per (budget, program).
CHILD = r"""
import json, sys
import numpy as np
import garaphpy
spec, symmetric, store, mode, threads, trials, warmup, programs, budgets, build = sys.argv[1:11]
threads, trials, warmup = int(threads), int(trials), int(warmup)
graph = garaphpy.Graph.load(spec, store=store, progress=False,
                            generator_options={"weighted": True}, **json.loads(build))
if symmetric == "1":
    graph = graph.as_undirected()
source = int(graph.original_ids([int(np.argmax(graph.store.out_degree))])[0])
page_bytes = sum(page.nbytes for page in graph.store.pages)
vertex_bytes = graph.num_vertices * 65 + int(graph.store.shards.size) * 52 + (1 << 16)
for budget in budgets.split(","):
    gpu_memory = None if budget == "resident" else vertex_bytes + int(float(budget) * page_bytes)
    for program in programs.split(","):
        options = dict(mode=mode, threads=threads, gpu_memory=gpu_memory)
        if program == "pagerank":
            options.update(max_iterations=20, tolerance=0.0)
        if program in ("bfs", "sssp"):
            options.update(sources=source)
        seconds = []
        for run in range(warmup + trials):
            result = garaphpy.run(graph, program, **options)
            if run >= warmup:
                seconds.append(result.seconds)
        values = np.nan_to_num(np.asarray(result.values, dtype=np.float64), posinf=-1.0)
        print(json.dumps({"budget": budget, "program": program, "seconds": seconds,
                          "page_codec": getattr(graph.store, "page_codec", "plain"),
                          "iterations": len(result.iterations),
                          "values_sum": float(values.sum()),
                          # einsum, not a BLAS dot: OpenBLAS's threads would spin into the next runs
                          "values_digest": float(np.einsum(
                              "i,i->", values, (np.arange(values.size) % 97).astype(np.float64)))}),
              flush=True)
"""

PROGRAMS = ("pagerank", "bfs", "sssp", "cc")

#: Relative difference of two runs' value sums still called the same values.
VALUE_TOLERANCE = 1e-12

#: A change costs nothing when new / old is at most 1 + this (the 3% bar).
COST_TOLERANCE = 0.03

#: Resamples of :func:`ratio_interval`'s bootstrap, and its seed (the same
#: table from the same rows).
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261203


def child_command(spec: str, store: Path, args, build: dict | None = None) -> list[str]:
    """The child's command line for graph ``spec`` (``kron:S`` is rmat:S made
    symmetric), its store built with the options ``build``."""
    symmetric = spec.startswith("kron:")
    generator = "rmat:" + spec.split(":", 1)[1] if symmetric else spec
    budgets = args.budgets if args.mode != "cpu" else "resident"
    return [sys.executable, "-c", CHILD, generator, "1" if symmetric else "0", str(store),
            args.mode, str(args.threads), str(args.trials), str(args.warmup), args.programs,
            budgets, json.dumps(build or {})]


def run_tree(label: str, tree: Path, spec: str, args, store_dir: Path) -> list[dict]:
    """One tree's runs of one graph, in a fresh process in that tree."""
    store = store_dir / label / spec.replace(":", "_")
    environment = {**os.environ, "PYTHONPATH": str(tree),
                   "NUMBA_NUM_THREADS": str(args.threads)}
    build = {"compress": False} if label == "new" and args.new_plain_pages else {}
    done = subprocess.run(child_command(spec, store, args, build), env=environment, cwd=tree,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"before-after: the {label} tree ({tree}) failed on {spec}:\n"
                         f"{done.stderr[-3000:]}")
    return [{**json.loads(line), "graph": spec, "tree": label}
            for line in done.stdout.splitlines() if line.startswith("{")]


def compare(rows: list[dict]) -> list[dict]:
    """Per (graph, budget, program): both trees' medians, minima, spreads, the
    ratios new / old and whether every run of both gave the same values."""
    table = []
    cases = dict.fromkeys((row["graph"], row["budget"], row["program"]) for row in rows)
    for graph, budget, program in cases:
        mine = [row for row in rows if (row["graph"], row["budget"], row["program"])
                == (graph, budget, program)]
        seconds = {tree: [s for row in mine if row["tree"] == tree for s in row["seconds"]]
                   for tree in ("old", "new")}
        if not seconds["old"] or not seconds["new"]:
            continue
        old, new = seconds["old"], seconds["new"]
        table.append({
            "graph": graph, "budget": budget, "program": program,
            "old_ms": statistics.median(old) * 1e3, "new_ms": statistics.median(new) * 1e3,
            "median_ratio": statistics.median(new) / statistics.median(old),
            "fastest_ratio": min(new) / min(old),
            "old_spread_ms": (min(old) * 1e3, max(old) * 1e3),
            "new_spread_ms": (min(new) * 1e3, max(new) * 1e3),
            "iterations": sorted({row["iterations"] for row in mine}),
            "ratio_interval": ratio_interval([row["seconds"] for row in mine
                                              if row["tree"] == "old"],
                                             [row["seconds"] for row in mine
                                              if row["tree"] == "new"]),
            "same_values": same_values(mine)})
    return table


def ratio_interval(old: list[list[float]], new: list[list[float]],
                   resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """The 90% interval of the ratio of medians new / old, by a two-level
    bootstrap: each resample draws a tree's processes with replacement, then
    each drawn process's trials (a process's own placement in memory and the
    machine's state that hour are most of the noise, so processes are the
    units, as in Kalibera and Jones, "Rigorous benchmarking in reasonable
    time", ISMM 2013)."""
    generator = np.random.default_rng(BOOTSTRAP_SEED)

    def medians(processes: list[list[float]]) -> np.ndarray:
        runs = [np.asarray(trials, dtype=np.float64) for trials in processes]
        found = np.empty(resamples)
        for k in range(resamples):
            drawn = generator.integers(0, len(runs), len(runs))
            found[k] = np.median(np.concatenate([generator.choice(runs[i], runs[i].size)
                                                 for i in drawn]))
        return found

    ratios = medians(new) / medians(old)
    low, high = np.quantile(ratios, [0.05, 0.95])
    return float(low), float(high)


def verdict(interval: tuple[float, float], tolerance: float = COST_TOLERANCE) -> str:
    """``within`` where the interval's top is at most 1 + tolerance, ``slower``
    where its bottom is above it, else ``unclear`` (more rounds decide)."""
    low, high = interval
    if high <= 1.0 + tolerance:
        return "within"
    return "slower" if low > 1.0 + tolerance else "unclear"


def same_values(rows: list[dict]) -> bool:
    """Whether every run gave the first's values: exactly in their sums of
    integers, within :data:`VALUE_TOLERANCE` relative where the sums add floats
    in an order the threads' race picks (PageRank's atomics)."""
    first = rows[0]
    return all(math.isclose(row[key], first[key], rel_tol=VALUE_TOLERANCE, abs_tol=0.0)
               for row in rows for key in ("values_sum", "values_digest"))


def print_table(table: list[dict]) -> None:
    print(f"{'graph':18} {'budget':8} {'program':9} {'old ms':>9} {'new ms':>9} "
          f"{'new/old':>8} {'90% of it':>12} {'3%':>8} {'fastest':>8}  "
          f"spreads old / new (ms)      same values")
    for row in table:
        spreads = "{:.2f}-{:.2f} / {:.2f}-{:.2f}".format(*row["old_spread_ms"],
                                                        *row["new_spread_ms"])
        interval = "{:.3f}-{:.3f}".format(*row["ratio_interval"])
        print(f"{row['graph']:18} {row['budget']:8} {row['program']:9} {row['old_ms']:9.2f} "
              f"{row['new_ms']:9.2f} {row['median_ratio']:8.3f} {interval:>12} "
              f"{verdict(row['ratio_interval']):>8} {row['fastest_ratio']:8.3f}  "
              f"{spreads:28} {'yes' if row['same_values'] else 'NO'}")


def saved_rows(paths: list[str]) -> list[dict]:
    """The before-after rows of earlier ``--json`` files (each row one
    process's trials of one case, so rows of several runs pool as they are).

    Raises
    ------
    ValueError
        A file that cannot be read, or a line that is not JSON (named by file
        and line).
    """
    rows = []
    for path in paths:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as error:
            raise ValueError(f"{path}: {error.strerror or error}") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not JSON ({error.msg})") from None
            if row.get("benchmark") == "before-after":
                rows.append(row)
    return rows


def print_saved(parser: argparse.ArgumentParser, paths: list[str]) -> int:
    """``--from-json``: the table of saved rows; 1 where values differ."""
    try:
        rows = saved_rows(paths)
    except ValueError as error:
        parser.error(f"--from-json {error}")
    if not rows:
        parser.error(f"--from-json: no before-after rows in {', '.join(paths)}")
    table = compare(rows)
    print_table(table)
    return 0 if all(row["same_values"] for row in table) else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench before-after",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="DIR",
                        help="the older garaphpy source tree (its garaphpy/ package)")
    parser.add_argument("--from-json", nargs="+", metavar="FILE", default=None,
                        help="print the table of rows that earlier runs wrote with --json "
                             "(pooled); run nothing")
    parser.add_argument("--mode", choices=("cpu", "gpu", "hybrid"), default="gpu")
    parser.add_argument("--graphs", default="kron:21,grid:2000x2000",
                        help="comma-separated rmat:S, kron:S (rmat:S made symmetric), grid:WxH")
    parser.add_argument("--budgets", default="resident,0.25",
                        help="GPU budgets: resident, or fractions of the page bytes beside "
                             "the vertex data (ignored with --mode cpu)")
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=2,
                        help="processes per tree and graph, the trees in turns (default 2)")
    parser.add_argument("--store-dir", default=None,
                        help="keep each tree's stores here (default: a temporary directory)")
    parser.add_argument("--new-plain-pages", action="store_true",
                        help="build the new tree's stores with plain pages (store.compress "
                             "false), the only format of a tree older than compressed pages")
    harness.add_common_options(parser)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    if args.from_json:
        return print_saved(parser, args.from_json)
    if args.baseline is None:
        parser.error("--baseline DIR is required (or --from-json FILE ...)")
    baseline = Path(args.baseline).resolve()
    if not (baseline / "garaphpy" / "__init__.py").is_file():
        parser.error(f"--baseline {args.baseline}: no garaphpy/ package there")
    unknown = set(args.programs.split(",")) - set(PROGRAMS)
    if unknown:
        parser.error(f"--programs: no program {sorted(unknown)[0]!r} (known: "
                     f"{', '.join(PROGRAMS)})")
    if args.rounds < 1:
        parser.error(f"--rounds={args.rounds}: expected >= 1")
    trees = {"old": baseline, "new": harness.REPOSITORY}
    machine = harness.machine_info()
    rows = []
    with tempfile.TemporaryDirectory(prefix="garaphpy-before-after-") as temporary:
        store_dir = Path(args.store_dir or temporary)
        for round_ in range(args.rounds):
            order = ("old", "new") if round_ % 2 == 0 else ("new", "old")
            for label in order:
                for spec in args.graphs.split(","):
                    if not args.quiet:
                        print(f"before-after: round {round_ + 1}, {label}, {spec} ...",
                              file=sys.stderr, flush=True)
                    found = run_tree(label, trees[label], spec, args, store_dir)
                    for row in found:
                        row.update(round=round_, mode=args.mode, threads=args.threads)
                    rows += found
                    harness.write_rows(args.json, [{**row, "benchmark": "before-after",
                                                    "machine": machine} for row in found])
    table = compare(rows)
    print_table(table)
    return 0 if all(row["same_values"] for row in table) else 1
