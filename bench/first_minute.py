"""The first minute of a command-line user against GAPBS: a store built from a
text edge list, and PageRank end to end on it (Garaph section 6.5, preprocessing).

Two comparisons on GAPBS's own Kronecker graph (``converter -g SCALE -k
DEGREE``, written once as a ``.el`` text edge list, not timed: the bytes
``converter -e`` writes, made here from its serialized graph because its own
writer flushes every line, minutes for kron22), both sides
fresh processes with the same threads (``OMP_NUM_THREADS`` for GAPBS,
``NUMBA_NUM_THREADS`` and ``--threads`` for garaphpy), wall-clock times:

``build``
    GAPBS: ``converter -f G.el -b G.sg`` (read the text, build the CSR and
    its inverse, write the serialized graph).  garaphpy: ``python -m
    garaphpy.run BUILD.toml --rebuild`` (read the text, build the store, write
    it).  Target: garaphpy's time no more than GAPBS's.
``pagerank``
    GAPBS: ``pr -f G.sg -i 20 -t 1e-30 -n 1`` (load its serialized graph, 20
    iterations, no output file).  garaphpy: ``python -m garaphpy pagerank G.el
    --store STORE --max-iterations 20 --tolerance 0 -o VALUES`` on the store
    the build wrote (open and check it, compile or load the kernels from
    numba's cache, 20 iterations, the values file of every vertex written).
    Target: at most twice GAPBS's time.  GAPBS writes no values; with
    ``--variants`` garaphpy's sides are measured in its default mode
    (``default``: hybrid where a GPU is), CPU-only (``cpu``) and writing
    the values as ``.npy`` instead of text (``npy``, ``cpu-npy``), all on
    one store.  The warm-up run (``--warmup``, 1)
    fills numba's cache, so the trials are a second run's; with ``--cold``
    every garaphpy run starts from an empty numba cache of its own
    (``NUMBA_CACHE_DIR``), as a fresh clone's first run does.

Each pair of sides runs in turns (bench/harness.py :func:`measure_in_turns`),
so a neighbour's load falls on both alike; every trial records the load
average before it.  A ``breakdown`` case then runs the command line's steps
in one process with a clock around each (imports, opening the store, the
run's set-up and compilation, the iterations, writing the values).

With ``--baseline DIR`` (another garaphpy source tree, say ``git archive``
of an older commit) a third side runs that tree's code, with its own store,
in the same turns: a before-and-after on one machine under one load.

GAPBS is not part of garaphpy: ``--gapbs DIR`` names its checkout or build
directory; where its ``converter`` and ``pr`` are missing they are compiled
from ``DIR/src`` with its Makefile's flags (``$CXX -std=c++11 -O3 -fopenmp``),
so a copy of its ``src/`` is all a fresh machine needs.

Usage (from the repository root)::

    python -m bench first-minute --gapbs DIR [--baseline DIR] [--scale 22] [--degree 16]
        [--threads N] [--workdir DIR] [--cases build,pagerank,breakdown]
        [--variants default,cpu,npy,cpu-npy] [--trials 3] [--warmup 1] [--json rows.jsonl]

On the device host, with GAPBS's sources copied to ``.peers/gapbs/src``
(an ignored path, carried), the results under ``$OUT``::

    python -m bench first-minute --gapbs .peers/gapbs --scale 22 \
        --workdir /tmp/first-minute --variants default,cpu,cpu-npy --trials 3 \
        --json $OUT/first-minute.jsonl 2>&1 | tee $OUT/first-minute.txt
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import harness

REPO = Path(__file__).resolve().parents[1]

BREAKDOWN_CHILD = r"""
import inspect, json, sys, time
started = time.perf_counter()
steps = {}
def mark(name):
    global started
    now = time.perf_counter()
    steps[name] = round(now - started, 4)
    started = now
from garaphpy import console, cli
from garaphpy.api import run
from garaphpy.output import write_values
from garaphpy.programs import get_program
mark("imports")
args = console.parser().parse_args(sys.argv[1:])
settings = console.settings_from_arguments(args)
graph = cli.graph_from_config(settings, progress=False)
mark("open_store")
program = get_program("pagerank")
result = run(graph, program, mode=settings["run"]["mode"],
             threads=settings["run"]["threads"], max_iterations=20, tolerance=0.0)
mark("run")
steps["run_compile"] = round(result.compile_seconds, 4)
steps["run_iterations"] = round(result.seconds, 4)
steps["run_setup"] = round(result.setup_seconds, 4)
threads = {"threads": settings["run"]["threads"]} \
    if "threads" in inspect.signature(write_values).parameters else {}   # a --baseline's
write_values(settings["output"]["values"], result.original_ids(), result.values,
             result.value_name, **threads)
mark("write_values")
print(json.dumps(steps))
"""


#: The garaphpy sides ``--variants`` names.
VARIANTS = ("default", "cpu", "npy", "cpu-npy")


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def timed(command: list[str], env: dict | None = None,
          cwd: Path | None = None) -> tuple[float, str]:
    """Wall seconds of ``command`` (run in ``cwd``) and its standard output;
    SystemExit on failure."""
    started = time.perf_counter()
    completed = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if completed.returncode not in (0, 3):      # 3: PageRank stopped at its iteration limit
        raise SystemExit(f"{' '.join(command)} exited {completed.returncode}:\n"
                         f"{completed.stdout[-2000:]}{completed.stderr[-2000:]}")
    return seconds, completed.stdout


GAPBS_PROGRAMS = ("converter", "pr")


def gapbs_binaries(directory: Path) -> Path:
    """The directory holding GAPBS's ``converter`` and ``pr``, compiled from
    its ``src/`` where missing, with its Makefile's flags (``$CXX``, else g++),
    so that a copy of ``src/`` alone is enough."""
    missing = [name for name in GAPBS_PROGRAMS if not (directory / name).exists()]
    if not missing:
        return directory
    if not all((directory / "src" / f"{name}.cc").exists() for name in missing):
        raise SystemExit(f"--gapbs {directory}: no {' and '.join(missing)} there, and no "
                         f"src/{missing[0]}.cc to build it from")
    started = time.perf_counter()
    compilers = [subprocess.Popen([os.environ.get("CXX", "g++"), "-std=c++11", "-O3", "-Wall",
                                   "-fopenmp", f"src/{name}.cc", "-o", name], cwd=directory)
                 for name in missing]
    if any(compiler.wait() for compiler in compilers):
        raise SystemExit(f"--gapbs {directory}: compiling {', '.join(missing)} failed")
    print(f"compiled GAPBS's {', '.join(missing)} in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    return directory


def write_edge_list(serialized: Path, edge_list: Path, threads: int,
                    edges_per_piece: int = 1 << 20) -> None:
    """The text GAPBS's ``converter -e`` writes (``u v`` lines, every out-edge
    of u = 0, 1, ... in its CSR order) of the graph in GAPBS's serialized
    file ``serialized`` (a bool, the int64 edge and vertex counts, the int64
    out-offsets, the int32 out-neighbours), made on ``threads`` threads."""
    import numpy as np
    from concurrent.futures import ThreadPoolExecutor

    from garaphpy.value_lines import integer_lines

    num_edges, num_vertices = (int(x) for x in np.fromfile(serialized, np.int64, 2, offset=1))
    offsets = np.fromfile(serialized, np.int64, num_vertices + 1, offset=17)
    neighbours = np.memmap(serialized, np.int32, "r", 17 + 8 * (num_vertices + 1), (num_edges,))

    def piece(begin: int) -> np.ndarray:
        end = min(begin + edges_per_piece, num_edges)
        sources = np.searchsorted(offsets, np.arange(begin, end), side="right") - 1
        text = np.frombuffer(integer_lines(sources, neighbours[begin:end]), np.uint8)
        text[text == ord("\t")] = ord(" ")
        return text

    starts = range(0, num_edges, edges_per_piece)
    with open(edge_list, "wb") as out, ThreadPoolExecutor(threads) as pool:
        for window in range(0, len(starts), 2 * threads):
            for text in pool.map(piece, starts[window:window + 2 * threads]):
                out.write(text)


class Gapbs:
    """GAPBS's side: the edge list (written here where missing), its
    serialized graph, its environment."""

    def __init__(self, args, directory: Path, workdir: Path, threads: int):
        self.directory = directory
        name = f"kron{args.scale}"
        self.edge_list = workdir / f"{name}.el"
        self.serialized = workdir / f"{name}.sg"
        self.env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        if not self.edge_list.exists():
            # GAPBS's own text writer (-e) flushes every line: minutes for
            # kron22; its serialized graph, written as the same text here, is not
            started = time.perf_counter()
            subprocess.run([str(directory / "converter"), f"-g{args.scale}",
                            f"-k{args.degree}", "-b", str(self.serialized)], env=self.env,
                           check=True, capture_output=True)
            write_edge_list(self.serialized, self.edge_list, threads)
            print(f"wrote {self.edge_list} ({self.edge_list.stat().st_size / 2**30:.2f} GiB) "
                  f"in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    # each returns a Measurement: the wall time, the load before it, figures parsed
    def build(self) -> harness.Measurement:
        load = load_average()
        seconds, output = timed([str(self.directory / "converter"), "-f", str(self.edge_list),
                                 "-b", str(self.serialized)], self.env)
        os.sync()       # its written graph's write-back is not the next side's to pay
        return harness.Measurement(result=output, seconds=seconds,
                                   metrics={"load": load, **gapbs_times(output)})

    def pagerank(self) -> harness.Measurement:
        load = load_average()
        seconds, output = timed([str(self.directory / "pr"), "-f", str(self.serialized), "-i",
                                 "20", "-t", "1e-30", "-n", "1"], self.env)
        return harness.Measurement(result=output, seconds=seconds,
                                   metrics={"load": load, **gapbs_times(output)})


class Garaphpy:
    """garaphpy's side, from the source tree ``tree`` (this one, or a
    ``--baseline`` checkout), with a store and values of its own."""

    def __init__(self, tree: Path, edge_list: Path, workdir: Path, threads: int,
                 label: str = "", cold: bool = False, variant: str = ""):
        self.edge_list = edge_list
        self.tree = tree
        self.threads = threads
        self.cold = cold
        # a variant ("cpu", "npy", "cpu-npy") shares its tree's store
        self.mode = "cpu" if variant.startswith("cpu") else None
        name = edge_list.name.rsplit(".", 1)[0] + label
        self.store = workdir / f"{name}.store"
        suffix = "npy" if variant.endswith("npy") else "txt"
        self.values = workdir / f"{name}{'-' + variant if variant else ''}.pagerank.{suffix}"
        self.config = workdir / f"{name}.build.toml"
        self.config.write_text(f"graph = {json.dumps(str(edge_list))}\n\n"
                               f"[store]\npath = {json.dumps(str(self.store))}\n")
        self.env = {**os.environ, "NUMBA_NUM_THREADS": str(threads),
                    "PYTHONPATH": os.pathsep.join(
                        filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}

    def timed(self, command: list[str]) -> tuple[float, str]:
        """:func:`timed` in this side's environment and in its tree (``python
        -m`` and ``-c`` put the working directory before PYTHONPATH: run from
        another tree, they would import that tree's garaphpy); with ``cold``,
        with an empty numba cache of its own (a fresh clone's first run)."""
        if not self.cold:
            return timed(command, self.env, cwd=self.tree)
        with tempfile.TemporaryDirectory(prefix="garaphpy-cold-cache-") as cache:
            return timed(command, {**self.env, "NUMBA_CACHE_DIR": cache}, cwd=self.tree)

    def pagerank_arguments(self) -> list[str]:
        mode = ["--mode", self.mode] if self.mode else []
        return ["pagerank", str(self.edge_list), "--store", str(self.store), "--threads",
                str(self.threads), "--max-iterations", "20", "--tolerance", "0", "-o",
                str(self.values), "-q", *mode]

    def build(self) -> harness.Measurement:
        load = load_average()
        seconds, output = self.timed([sys.executable, "-m", "garaphpy.run", str(self.config),
                                      "--rebuild", "-q"])
        os.sync()
        manifest = json.loads((self.store / "manifest.json").read_text())
        return harness.Measurement(result=manifest["num_edges"], seconds=seconds, metrics={
            "load": load, "build_seconds": manifest["build_seconds"],
            "phases": manifest["build_phases"]})

    def pagerank(self) -> harness.Measurement:
        load = load_average()
        seconds, output = self.timed([sys.executable, "-m", "garaphpy",
                                      *self.pagerank_arguments()])
        return harness.Measurement(result=self.values, seconds=seconds, metrics={"load": load})

    def breakdown(self) -> harness.Measurement:
        load = load_average()
        seconds, output = timed([sys.executable, "-c", BREAKDOWN_CHILD,
                                 *self.pagerank_arguments()], self.env, cwd=self.tree)
        return harness.Measurement(result=None, seconds=seconds, metrics={
            "load": load, **json.loads(output.strip().splitlines()[-1])})


def gapbs_times(output: str) -> dict:
    """GAPBS's own ``Read Time``, ``Build Time``, ``Trial Time`` lines, in seconds."""
    return {name.lower().replace(" ", "_"): float(value) for name, value in
            re.findall(r"^(Read Time|Build Time|Trial Time):\s+([0-9.]+)", output, re.M)}


def serialized_edges(path: Path) -> int:
    """The edge count in the header of GAPBS's serialized graph (a bool, then
    the int64 edge and vertex counts)."""
    import numpy as np

    return int(np.fromfile(path, np.int64, count=1, offset=1)[0])


def cases(name: str, sides: dict, params: dict, verify=None) -> list:
    """One case per side (gapbs, garaphpy, baseline), their trials run in turns."""
    return [harness.Case(f"{name}/{side}", getattr(runner, name), params={
        **params, "side": side}, verify=None if side == "gapbs" else verify)
            for side, runner in sides.items()]


def ratio_lines(name: str, rows: list) -> list[str]:
    gapbs_s = rows[0]["median_s"]
    lines = []
    for row in rows[1:]:
        loads = [m["load"] for r in (rows[0], row) for m in r["metrics"]]
        lines.append(f"{row['case']:26} {row['median_s']:7.2f} s  gapbs {gapbs_s:7.2f} s  "
                     f"ratio {row['median_s'] / gapbs_s:5.2f}  (medians of "
                     f"{len(row['trials_s'])}, load average {min(loads):.1f}-{max(loads):.1f})")
        if name == "build":
            lines.append("  phases (last trial): " + ", ".join(
                f"{k} {v:.1f} s" for k, v in row["metrics"][-1]["phases"].items()))
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gapbs", required=True, metavar="DIR",
                        help="GAPBS build directory (its checkout: built with make if needed)")
    parser.add_argument("--baseline", default=None, metavar="DIR",
                        help="another garaphpy source tree (an older commit's) measured "
                             "beside this one, in turns")
    parser.add_argument("--scale", type=int, default=22, help="kron scale (default 22)")
    parser.add_argument("--degree", type=int, default=16, help="kron degree (default 16)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads of both sides (default: every core)")
    parser.add_argument("--workdir", default=None,
                        help="where the .el, .sg, store and values go (kept between runs)")
    parser.add_argument("--cold", action="store_true",
                        help="every garaphpy run with an empty numba cache (a fresh clone's "
                             "first run; numba's own caching directories are left alone)")
    parser.add_argument("--cases", default="build,pagerank,breakdown",
                        help="comma-separated: build,pagerank,breakdown")
    parser.add_argument("--variants", default="default",
                        help="comma-separated garaphpy sides of pagerank and breakdown, on "
                             "one store: default (the command line's own mode, hybrid "
                             "where a GPU is), cpu (--mode cpu), npy and cpu-npy (the "
                             "values as .npy, not text: GAPBS's pr writes no values)")
    parser.add_argument("--build-trials", type=int, default=None, metavar="N",
                        help="timed trials of the build case (default: --trials; its "
                             "warm-up is --warmup)")
    harness.add_common_options(parser, trials=3, warmup=1)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    if args.build_trials is not None and args.build_trials < 1:
        parser.error(f"--build-trials={args.build_trials}: expected >= 1")
    chosen = args.cases.split(",")
    unknown = set(chosen) - {"build", "pagerank", "breakdown"}
    if unknown:
        parser.error(f"--cases: no case {sorted(unknown)[0]!r}")
    variants = args.variants.split(",")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"--variants: no variant {sorted(unknown)[0]!r}")

    threads = args.threads or len(os.sched_getaffinity(0))
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="garaphpy-first-minute-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    gapbs = Gapbs(args, gapbs_binaries(Path(args.gapbs).resolve()), workdir, threads)
    garaphpy_sides = {"garaphpy" + ("" if v == "default" else "-" + v): Garaphpy(
        REPO, gapbs.edge_list, workdir, threads, cold=args.cold,
        variant="" if v == "default" else v) for v in variants}
    sides = {"gapbs": gapbs, **garaphpy_sides}
    if args.baseline:
        sides["baseline"] = Garaphpy(Path(args.baseline).resolve(), gapbs.edge_list, workdir,
                                     threads, label="-baseline", cold=args.cold)
    # one build per store: the first garaphpy side's, the baseline's
    build_sides = {name: side for name, side in sides.items()
                   if name in ("gapbs", "baseline") or side is next(iter(garaphpy_sides.values()))}
    params = {"graph": f"kron:{args.scale}:{args.degree}", "threads": threads}
    rows: list[dict] = []
    lines = []
    missing = not gapbs.serialized.exists() or any(
        not side.store.exists() for side in list(sides.values())[1:])
    if "build" in chosen or missing:
        timed_build = "build" in chosen
        build = harness.measure_in_turns(
            cases("build", build_sides, params, verify=lambda edges: edges == serialized_edges(
                gapbs.serialized) or f"the store holds {edges:,} edges, GAPBS's graph "
                f"{serialized_edges(gapbs.serialized):,}"),
            trials=(args.build_trials or args.trials) if timed_build else 1,
            warmup=args.warmup if timed_build else 0,
            benchmark="first-minute", quiet=args.quiet)
        if timed_build:
            rows += build
            lines += ratio_lines("build", build)
    if "pagerank" in chosen:
        pagerank = harness.measure_in_turns(
            cases("pagerank", sides, params), trials=args.trials, warmup=args.warmup,
            benchmark="first-minute", quiet=args.quiet)
        rows += pagerank
        lines += ratio_lines("pagerank", pagerank)
    if "breakdown" in chosen:
        for side, runner in list(sides.items())[1:]:
            row = harness.measure(harness.Case(f"breakdown/{side}", runner.breakdown,
                                               params={**params, "side": side}),
                                  trials=1, warmup=0, benchmark="first-minute",
                                  quiet=args.quiet)
            rows.append(row)
            steps = {k: v for k, v in row["metrics"][0].items() if k != "load"}
            lines.append(f"breakdown/{side} (load average {row['metrics'][0]['load']:.1f}): "
                         + ", ".join(f"{k} {v:.2f} s" for k, v in steps.items()))
    for row in rows:
        row["args"] = vars(args)
    harness.write_rows(args.json, rows)
    print("\n".join(lines))
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
