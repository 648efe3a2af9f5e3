"""The CPU alone against GAPBS: PageRank, BFS, SSSP and CC.

It compares a run on the CPU alone (``garaphpy.run(..., mode="cpu")``)
with the GAP Benchmark Suite (sbeamer/gapbs), the CPU reference of the
field, on the same machine with the same threads.

What runs
    PageRank (``--pr-iterations`` 20 iterations, tolerance ``--pr-tolerance``
    0: all of them; GAPBS's default 1e-4 stops at an L1 change below it, where
    garaphpy's contributions are float32 as GAPBS's are), BFS and SSSP
    from the vertex of largest out-degree (on a grid, vertex WIDTH + 1), and
    CC (``--programs``), each with the execution the program chooses on the
    CPU alone.
Graphs
    ``kron``: ``rmat:SCALE`` (``--scale``, 22), symmetrized
    (``Graph.as_undirected``), the generator's weights 1..255 for SSSP: the
    Graph500/GAPBS Kronecker parameters, not GAPBS's own edges.  ``grid``:
    ``grid:WxH`` (``--grid``, 2000x2000), its own weights.  Any other name
    is a graph file (SNAP, DIMACS, ...: what ``Graph.load`` reads, e.g. a
    road network with ids from 1), named in the table by its file name
    without extensions, with integer weights 1..255 hashed from each edge's
    user ids (``weights="hash"``, as bench/modes.py and bench/device_loop.py
    weight files), BFS and SSSP from its vertex of largest out-degree (the
    smallest internal id on ties).  Stores are built once into ``--store-dir``.
GAPBS
    With ``--gapbs DIR`` (a directory holding GAPBS's built ``bfs``,
    ``sssp``, ``cc``, ``pr`` and ``converter``), each row also runs GAPBS,
    with ``OMP_NUM_THREADS`` = the run's threads: on kron its own ``-g
    SCALE`` graph (BFS and SSSP from its vertex of largest out-degree, as
    garaphpy's, read from the serialized graph's offsets; ``--kron-gapbs-source
    random``: GAPBS's own random sources), on the grid and a file the same
    graph, written once as an edge list (``.el``, ``.wel`` with its weights)
    and serialized by the converter, from the same source (``-r``); BFS, CC
    (Afforest) and SSSP (``-d`` ``--delta``: 2 on kron, ``--grid-delta`` 32
    on the grid and files)
    with ``-n`` ``--gapbs-trials`` (16), PageRank ``-i`` 20 ``-t`` the
    tolerance (``1e-30`` for 0) with 5; its "Average Time" is the figure.  GAPBS is not part of
    garaphpy: bring and build it yourself (``make`` in its checkout).
Timing and correctness
    Per (graph, program) a case of bench/harness.py: a warm-up run, then
    ``--trials`` (5) runs; ``Result.seconds`` (the iterations' time).  The
    first run's values must pass the program's own verifier (BFS: GAPBS's
    invariants; SSSP: the Bellman-Ford conditions; CC: labels constant on
    edges) and every later run's equal them; PageRank's equal as many
    SciPy power steps (rtol 1e-6), or, with a tolerance, pass its verifier
    (as many power steps, rtol 1e-5, when it stopped at the iteration
    limit); a failure makes the exit status 1.
    GAPBS's figures are printed as they come (stderr).

Usage (from the repository root)::

    python -m bench cpu-peers [--graphs kron,grid,FILE] [--scale 22] [--grid 2000x2000]
        [--programs pagerank,bfs,sssp,cc] [--pr-tolerance 0] [--threads N] [--store-dir DIR]
        [--gapbs DIR] [--delta 2] [--grid-delta 32] [--trials 5] [--json rows.jsonl]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numba
import numpy as np

import garaphpy
from garaphpy.storage.readers import ArraySource
from garaphpy.storage.writers import write_edge_list as write_text_edge_list

from bench import harness

REPO = Path(__file__).resolve().parents[1]


PROGRAMS = ("pagerank", "bfs", "sssp", "cc")
#: GAPBS's binary and arguments per program (the graph and -n added by the script)
GAPBS_KERNELS = {"bfs": ("bfs", []), "sssp": ("sssp", ["-d", "{delta}"]), "cc": ("cc", []),
                 "pagerank": ("pr", ["-i", "{iterations}", "-t", "{tolerance}"])}
AVERAGE = re.compile(r"^Average Time:\s+([0-9.eE+-]+)", re.M)


#: Compression suffixes a graph file's label drops (its format's suffix goes too).
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".xz")


def graph_label(kind: str) -> str:
    """The name of ``--graphs``' entry in the table: ``kron``, ``grid``, or a
    file's name without its compression and format suffixes."""
    if kind in ("kron", "grid"):
        return kind
    name = Path(kind).name
    for suffix in COMPRESSION_SUFFIXES:
        name = name.removesuffix(suffix)
    return Path(name).stem or name


def load_graphs(kind: str, args, store_dir: Path) -> tuple[garaphpy.Graph, garaphpy.Graph, int]:
    """(unweighted, weighted, source in user ids) of ``kron``, ``grid`` or a
    graph file (one hash-weighted graph for both)."""
    if kind == "kron":
        spec = f"rmat:{args.scale}"
        plain = garaphpy.Graph.load(spec, store=store_dir / f"rmat{args.scale}",
                                    progress=False).as_undirected()
        weighted = garaphpy.Graph.load(spec, store=store_dir / f"rmat{args.scale}w",
                                       progress=False,
                                       generator_options={"weighted": True}).as_undirected()
        top = int(np.argmax(plain.store.out_degree))
        return plain, weighted, int(plain.original_ids(np.array([top]))[0])
    if kind == "grid":
        graph = garaphpy.Graph.load(f"grid:{args.grid}", store=store_dir / "grid",
                                    progress=False)
        return graph, graph, int(args.grid.split("x")[0]) + 1
    if Path(kind).is_file():
        graph = garaphpy.Graph.load(kind, store=store_dir / graph_label(kind),
                                    weights="hash", progress=False)
        top = int(np.argmax(graph.store.out_degree))
        return graph, graph, int(graph.original_ids(np.array([top]))[0])
    raise ValueError(f"--graphs: unknown graph {kind!r} (expected kron, grid or a file)")


def run_program(graph, program: str, options: dict) -> harness.Measurement:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
        result = garaphpy.run(graph, program, **options)
    return harness.Measurement(result=result, seconds=result.seconds, metrics={
        "iterations": result.num_iterations, "execution": result.execution,
        "directions": "".join(r.direction[0] for r in result.iterations[:64]),
        "iteration_s": [r.seconds for r in result.iterations[:16]]})


def pagerank_steps(graph, iterations: int, damping: float = 0.85) -> np.ndarray:
    """``iterations`` power steps of PageRank's definition from 1/n (damping,
    dangling mass spread uniformly), with SciPy: the reference of a run with
    a fixed number of iterations, which the program's verifier (a fixed-point
    test) does not accept."""
    import scipy.sparse as sp

    in_offsets, sources, _ = graph.store.csc()
    n = graph.num_vertices
    destinations = np.repeat(np.arange(n), np.diff(in_offsets))
    out_degree = np.bincount(sources, minlength=n).astype(np.float64)
    transition = sp.csr_matrix((1.0 / out_degree[sources], (destinations, sources)),
                               shape=(n, n))
    dangling = out_degree == 0
    ranks = np.full(n, 1.0 / n)
    for _ in range(iterations):
        ranks = (1 - damping) / n + damping * (transition @ ranks + ranks[dangling].sum() / n)
    return ranks


def verified(graph, program: str, iterations: int, pr_tolerance: float = 0.0):
    """The verification of a case: the program's verifier on the first trial (a
    union-find over every edge for CC: minutes on kron22), then the same
    values on every later trial; for PageRank's fixed iterations the same
    number of SciPy power steps (rtol 1e-6); for PageRank to a tolerance,
    its verifier, or as many power steps (rtol 1e-5) where it stopped at
    the limit."""
    reference = {}

    def verify(result) -> str | None:
        if program == "pagerank" and pr_tolerance > 0:
            if result.converged:
                report = result.program.verify(graph, result)
                return None if report.ok else str(report)
            steps = pagerank_steps(graph, result.num_iterations)
            if not np.allclose(result.values, steps, rtol=1e-5, atol=0):
                worst = float(np.max(np.abs(result.values - steps)))
                return f"ranks differ from {result.num_iterations} power steps by {worst:.3g}"
            return None
        if program == "pagerank":
            if "ranks" not in reference:
                reference["ranks"] = pagerank_steps(graph, iterations)
            if not np.allclose(result.values, reference["ranks"], rtol=1e-6, atol=0):
                worst = float(np.max(np.abs(result.values - reference["ranks"])))
                return f"ranks differ from {iterations} power steps by up to {worst:.3g}"
            return None
        if "values" in reference:
            if not np.array_equal(result.values, reference["values"]):
                return "values differ from the first trial's, which the verifier passed"
            return None
        report = result.program.verify(graph, result)
        if report.ok:
            reference["values"] = result.values.copy()
            return None
        return str(report)
    return verify


def gapbs_average(output: str) -> float:
    """The "Average Time" GAPBS prints, in seconds (ValueError when absent)."""
    found = AVERAGE.search(output)
    if found is None:
        raise ValueError("no 'Average Time' line in GAPBS's output")
    return float(found.group(1))


def gapbs_hub(serialized: Path) -> int:
    """The vertex of largest out-degree of a GAPBS serialized graph (``.sg`` or
    ``.wsg``: a bool, the edge and vertex counts as int64, then the int64
    offsets of the out-edges)."""
    with open(serialized, "rb") as file:
        header = file.read(17)
        num_vertices = int(np.frombuffer(header, np.int64, count=1, offset=9)[0])
        offsets = np.fromfile(file, np.int64, count=num_vertices + 1)
    if offsets.size != num_vertices + 1:
        raise ValueError(f"{serialized}: cut short in its offsets")
    return int(np.argmax(np.diff(offsets)))


def write_edge_list(graph, path: Path, weighted: bool) -> None:
    """The graph's edges as GAPBS reads them: ``u v`` (``u v w`` when
    ``weighted``, the weights as integers) per line, 0-based internal ids,
    written once, by garaphpy's own writer (seconds for the grid's 16M edges,
    where ``numpy.savetxt`` took a minute; atomic: no partial file is left)."""
    if path.exists():
        return
    in_offsets, sources, weights = graph.store.csc()
    targets = np.repeat(np.arange(graph.num_vertices, dtype=np.int64), np.diff(in_offsets))
    edges = ArraySource(sources.astype(np.int64), targets,
                        np.asarray(weights).astype(np.int64) if weighted else None,
                        graph.num_vertices, name=path.name, format="arrays")
    write_text_edge_list(edges, path, weighted=weighted)


def run_gapbs(gapbs: Path, kind: str, program: str, graph, source: int, args,
              store_dir: Path, threads: int) -> dict:
    """GAPBS on ``kind``'s graph (kron: its own of ``--scale``; grid or a file:
    this one, from ``source``): its average time and command."""
    weighted = program == "sssp"
    name = {"kron": f"gapbs-kron{args.scale}", "grid": f"gapbs-grid{args.grid}"}.get(
        kind, f"gapbs-{graph_label(kind)}")
    serialized = store_dir / f"{name}.{'wsg' if weighted else 'sg'}"
    environment = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    if not serialized.exists():
        if kind == "kron":
            read = ["-g", str(args.scale)]
        else:
            edges = store_dir / f"{name}.{'wel' if weighted else 'el'}"
            write_edge_list(graph, edges, weighted)
            read = ["-f", str(edges)]
        command = [str(gapbs / "converter")] + read + (["-w"] if weighted else []) + \
            ["-b", str(serialized)]
        subprocess.run(command, check=True, capture_output=True, env=environment)
    binary, extra = GAPBS_KERNELS[program]
    delta = args.delta if kind == "kron" else args.grid_delta
    extra = [a.format(delta=delta, iterations=args.pr_iterations,
                      tolerance=args.pr_tolerance or 1e-30) for a in extra]
    if kind != "kron" and program in ("bfs", "sssp"):
        extra += ["-r", str(int(graph.internal_ids([source])[0]))]
    if kind == "kron" and program in ("bfs", "sssp") and args.kron_gapbs_source == "hub":
        extra += ["-r", str(gapbs_hub(serialized))]
    trials = 5 if program == "pagerank" else args.gapbs_trials
    command = [str(gapbs / binary), "-f", str(serialized), "-n", str(trials)] + extra
    completed = subprocess.run(command, check=True, capture_output=True, text=True,
                               env=environment)
    return {"seconds": gapbs_average(completed.stdout), "command": " ".join(command)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="kron,grid",
                        help="comma-separated: kron, grid and graph files (default kron,grid)")
    parser.add_argument("--scale", type=int, default=22, help="kron: rmat scale (default 22)")
    parser.add_argument("--grid", default="2000x2000", help="grid WIDTHxHEIGHT")
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--pr-iterations", type=int, default=20)
    parser.add_argument("--pr-tolerance", type=float, default=0.0,
                        help="PageRank's L1 tolerance (default 0: every iteration)")
    parser.add_argument("--threads", type=int, default=None,
                        help="default: every core numba has")
    parser.add_argument("--store-dir", default=None)
    parser.add_argument("--gapbs", default=None, metavar="DIR",
                        help="GAPBS checkout with its binaries built")
    parser.add_argument("--delta", type=int, default=2,
                        help="GAPBS SSSP delta on kron (default 2)")
    parser.add_argument("--grid-delta", type=int, default=32,
                        help="GAPBS SSSP delta on the grid and files (default 32)")
    parser.add_argument("--gapbs-trials", type=int, default=16)
    parser.add_argument("--kron-gapbs-source", choices=("hub", "random"), default="hub",
                        help="GAPBS's BFS and SSSP source on kron: its vertex of largest "
                             "out-degree (default, as garaphpy's) or its random ones")
    harness.add_common_options(parser, trials=5)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    programs = args.programs.split(",")
    unknown = sorted(set(programs) - set(PROGRAMS))
    if unknown:
        parser.error(f"--programs: unknown {', '.join(unknown)} (expected {PROGRAMS})")
    if args.pr_tolerance < 0:
        parser.error(f"--pr-tolerance {args.pr_tolerance}: expected a non-negative number")
    graphs = args.graphs.split(",")
    missing = [g for g in graphs if g not in ("kron", "grid") and not Path(g).is_file()]
    if missing:
        parser.error(f"--graphs: {', '.join(missing)}: neither kron, grid nor a file")
    gapbs = Path(args.gapbs) if args.gapbs else None
    if gapbs is not None and not (gapbs / "bfs").exists():
        parser.error(f"--gapbs {gapbs}: no built 'bfs' there (run make in the checkout)")
    threads = args.threads or numba.config.NUMBA_NUM_THREADS
    store_dir = Path(args.store_dir or tempfile.mkdtemp(prefix="garaphpy-peers-"))
    store_dir.mkdir(parents=True, exist_ok=True)
    cases, peers = [], {}
    for kind in graphs:
        plain, weighted, source = load_graphs(kind, args, store_dir)
        label = graph_label(kind)
        for program in programs:
            graph = weighted if program == "sssp" else plain
            options = {"mode": "cpu", "threads": threads}
            if program in ("bfs", "sssp"):
                options["sources"] = [source]
            if program == "pagerank":
                options.update(max_iterations=args.pr_iterations,
                               tolerance=args.pr_tolerance)
            cases.append(harness.Case(
                f"{label}/{program}",
                lambda graph=graph, program=program, options=options:
                    run_program(graph, program, options),
                params={"graph": label, "program": program, "threads": threads,
                        "num_vertices": graph.num_vertices, "num_edges": graph.num_edges},
                verify=verified(graph, program, args.pr_iterations, args.pr_tolerance)))
            if gapbs is not None:
                peer = run_gapbs(gapbs, kind, program, graph, source, args, store_dir, threads)
                peers[f"{label}/{program}"] = peer
                # said at once: a run cut short keeps its peer's figures
                print(f"GAPBS {label}/{program}: {peer['seconds'] * 1e3:.1f} ms "
                      f"({peer['command']})", file=sys.stderr, flush=True)
    rows = harness.run_cases("cpu_peers", cases, args)
    print(f"\n== the CPU alone, {threads} threads, median of {args.trials} runs; GAPBS: its "
          "Average Time (kron: on its own kron graph; grid, files: on the same graph)")
    print(f"{'case':24s} {'iters':>6s} {'exec':>6s} {'garaphpy ms':>12s} {'GAPBS ms':>10s} "
          f"{'ratio':>7s}  check")
    summary = []
    for row in rows:
        last = row["metrics"][-1]
        peer = peers.get(row["case"])
        ratio = row["median_s"] / peer["seconds"] if peer else None
        ok = row["verification"]["status"] == harness.PASSED
        print(f"{row['case']:24s} {last['iterations']:6d} {last['execution']:>6s} "
              f"{row['median_s'] * 1e3:12.1f} "
              f"{peer['seconds'] * 1e3 if peer else float('nan'):10.1f} "
              f"{ratio if ratio else float('nan'):7.2f}  {'ok' if ok else 'FAILED'}")
        summary.append({"case": row["case"], "garaphpy_s": row["median_s"],
                        "gapbs": peer, "ratio": ratio})
    harness.write_record(args.json, "cpu_peers", "summary", {"rows": summary}, args)
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
