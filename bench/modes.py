"""CPU-only, GPU-only and hybrid modes on the same graphs (Garaph section 6.1, Table 2; Figure 11).

Garaph's Table 2 gives the runtime of six applications with the CPU kernel
only (Garaph-C), the GPU kernel only (Garaph-G) and both under the
dispatcher (Garaph-H); Figure 11 plots the time of every iteration of SSSP
and CC in the three modes, where the hybrid run uses the CPU alone while
few vertices are active and lets the GPU join once most are.  This script
measures the same with ``garaphpy.run(graph, program, mode=m)`` for m in
cpu, gpu and hybrid.

What runs
    Programs PageRank, SSSP, CC, BFS, NN, HS, CS (``--programs``).  As in
    Garaph section 6, PageRank, NN, HS and CS run ``--fixed-iterations``
    (10) iterations (tolerance 0, so every mode does the same work; 0 keeps
    the programs' own stopping rules); SSSP, CC and BFS run to convergence.
    SSSP, BFS, HS and CS start from one source: the vertex of largest
    out-degree (ties: the smallest internal id), named in the table in the
    user's ids.  SSSP, NN, HS and CS read edge weights, so they run on a
    weighted variant of each graph (``(w)`` in the table): rmat with the
    generator's integer weights 1..255, the grid's own integer weights, and
    for a SNAP file (unweighted) the same edges with weights 1..255 hashed
    from each edge's user ids.  PageRank, CC and BFS run on the unweighted
    graph (smaller pages); CC runs on its symmetrized store, which the
    library builds once.
Graphs
    rmat:SCALE (``--scale``, 22), kron:SCALE (the same generator's edges
    made symmetric, standing for GAPBS's ``-g SCALE`` kron graphs of issues
    19 and 20: 520.8 M directed edges at scale 24), grid:WxH (``--grid``,
    2000x2000) and the SNAP files of ``--data`` (or those given by
    ``--snap``); ``--graphs`` picks some (rmat, kron, grid, snap, or a SNAP
    file's name).  Each is built
    once per invocation into ``--store-dir`` (default: a temporary
    directory; with ``--store-dir`` later invocations reuse the stores).
GPU budgets
    ``above``: ``--gpu-memory`` bytes (default: the library's, 80% of the
    free GPU memory), normally room for every page (resident).  ``below``:
    the engine's vertex data plus ``--budget-below`` (0.5) of the store's
    page bytes (at least its largest page), so pages are streamed every
    iteration (GpuEngine.plan_pages); several fractions (``0.5,0.25``) give
    one row each, named ``below50%``, ``below25%``.  The vertex data's size is read off a
    GPU engine made for the purpose (an estimate when that fails), per mode
    in the execution the runs take (every mode the same: the program's
    own, SSSP, CC and SSWP async, or ``--execution``).  Only
    ``--below-programs`` (PageRank, NN, HS, CS) run below; the CPU does not
    use the budget, so its run is made once per program and graph and
    shown in both rows.  Whether the GPU-only run did stream is checked
    (bytes copied to the device in its iterations) and shown.
Timing
    Per (program, graph, budget, mode), a case of bench/harness.py: one
    warm-up run (``--warmup``), then ``--trials`` (the older ``--repeat``)
    (3) runs; ``Result.seconds`` (the iterations' wall time, loading and
    compilation excluded); the median is reported, with the per-iteration
    records (``IterationRecord.as_dict()``) of the median run in the JSON.
    The modes of a row run one after another; ``--interleave`` runs their
    warm-ups first, then trial 1 of every mode, trial 2 of every mode, and so
    on (``harness.measure_in_turns``), so that a drift of the machine over
    the row's minutes weighs on each mode alike: the issue's targets are
    ratios between the modes.  In turns, the table adds the hybrid's trial
    over the faster of the CPU's and the GPU's trials of the same turn:
    the median, the range and the turns at most 1.0.
Correctness
    Every timed run's values are compared with the CPU-only run's (or,
    without it, the first mode's): exactly for the min/max programs (BFS,
    CC, SSSP and SSWP on integer weights), with ``numpy.allclose(rtol=1e-4,
    atol=1e-9 x the largest value)`` for the sum programs; infinities equal
    infinities.  A mismatch is printed as MISMATCH in the table, listed in
    the JSON, and makes the exit status 1: a mode that computes wrong
    answers has no time worth reporting.
Modes that cannot run
    Without cupy or a CUDA device, gpu and hybrid are skipped with one line
    saying why (hybrid would only fall back to the CPU).  A mode whose run
    raises ConfigError (e.g. hybrid before the dispatcher exists),
    GpuUnavailableError or GpuMemoryError is skipped for that row, with the
    message.

Output: a table on stdout (per mode the median seconds and its ratio to the
row's best mode, hybrid / min(cpu, gpu), hybrid / gpu, and beside them the
bound of bench/modes_oracle.py over the better single mode: ``oracle``, each
iteration of the median runs on its faster processor, ``bound``, each shared
at both processors' full rates, where the CPU's and the GPU's runs took as
many iterations), for hybrid runs a
summary of the dispatcher's decisions (CPU-only and hybrid iterations,
switches, the GPU's share of the edges) and, where the records carry
``dispatch_seconds``, its per-iteration overhead (median and max of the
median run), and where the GPU alone's and the hybrid's time went (the
iterations the CPU ran alone; of those with the GPU, its busy time, the
dispatcher's and the rest on the host); ``--json``, JSON lines: a harness row per (program, graph,
budget, mode), appended as soon as it is measured (an interrupted run keeps
what it measured), then a ``summary`` row with host, date, command line,
every median and the median runs' per-iteration records (what
bench/modes_oracle.py reads); ``--png``: Figure 11, ms per iteration of SSSP and
CC on each graph, one line per mode, the hybrid line marked where the
dispatcher let the GPU join (^) or leave (v).

Usage (from the repository root)::

    python -m bench modes [--scale 22] [--grid 2000x2000] [--data DIR | --snap FILE ...]
        [--graphs rmat,kron,grid,snap] [--programs pagerank,sssp,cc,bfs,nn,hs,cs]
        [--modes cpu,gpu,hybrid] [--budgets above,below] [--budget-below 0.5[,0.25]]
        [--gpu-memory BYTES] [--trials 3] [--interleave] [--threads N] [--store-dir DIR]
        [--build-option NAME=INTEGER ...] [--json out.json] [--png out.png]

Exit status: 0, or 1 when some mode's values differ from the reference.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shlex
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numba
import numpy as np

import garaphpy  # sets numba's threading layer before any parallel launch
from garaphpy import config, generators
from garaphpy.api import NotConvergedWarning
from garaphpy.errors import ConfigError
from garaphpy.kernels.gpu import GpuUnavailableError
from garaphpy.program import default_execution
from garaphpy.programs import BUILTIN_PROGRAMS, get_program, program_class
from garaphpy.scheduler import decisions
from garaphpy.scheduler.gpu_engine import GpuMemoryError

from bench._host import (
    free_gpu_memory, gpu_problem, host_info, log, median, milliseconds_log_axis)
from bench import harness, modes_oracle

REPO = Path(__file__).resolve().parents[1]


MODES = ("cpu", "gpu", "hybrid")
BUDGETS = ("above", "below")
DEFAULT_PROGRAMS = ("pagerank", "sssp", "cc", "bfs", "nn", "hs", "cs")
#: Garaph runs these for 10 iterations (section 6) and with both budgets.
FIXED_ITERATION_PROGRAMS = ("pagerank", "nn", "hs", "cs")
#: Figure 11's programs.
FIGURE_PROGRAMS = ("sssp", "cc")
#: A skipped mode's exceptions: the mode cannot run here or with this budget.
SKIPPING_ERRORS = (ConfigError, GpuUnavailableError, GpuMemoryError)

#: Float comparison: relative tolerance, and absolute tolerance per unit of
#: the reference's largest finite magnitude.
RTOL = 1e-4
ATOL_SCALE = 1e-9
#: Vertices named per mismatch.
MISMATCH_EXAMPLES = 5

DEFAULT_DATA = REPO.parent / "shared" / "data"
SNAP_SUFFIXES = (".txt.gz", ".txt", ".txt.bz2", ".txt.xz")


# ------------------------------------------------------------------ helpers --
def mib(nbytes) -> str:
    """A budget for people: MiB (KiB below 10 MiB), or "default"."""
    if nbytes is None:
        return "default"
    return f"{nbytes / 2**20:.0f} MiB" if nbytes >= 10 << 20 else f"{nbytes / 2**10:.0f} KiB"


def machine() -> dict:
    """host_info plus the GPU's name and memory when one is usable."""
    info = host_info()
    if gpu_problem() is None:
        import cupy

        properties = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = properties["name"]
        info.update({"gpu": name.decode() if isinstance(name, bytes) else str(name),
                     "gpu_memory_bytes": int(properties["totalGlobalMem"]),
                     "multiprocessors": int(properties["multiProcessorCount"]),
                     "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
                     "cupy": cupy.__version__})
    return info


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


# ------------------------------------------------------------------- graphs --
#: 1 + splitmix64(src * 2^32 XOR dst) % max_weight from the endpoints' user ids
#: (``[input] weights = "hash"`` uses the same rule).
hashed_weights = generators.hashed_edge_weights


class GraphCase:
    """One graph of the benchmark, with its unweighted and weighted variants
    built on first use (each once per invocation)."""

    def __init__(self, label: str, spec: str, kind: str, store_dir: Path, options: dict):
        self.label, self.spec, self.kind = label, spec, kind
        self.store_dir = store_dir
        self.options = options  # layout options of every store (--build-option)
        self._variants: dict = {}

    def graph(self, weighted: bool) -> "garaphpy.Graph":
        if weighted not in self._variants:
            started = time.perf_counter()
            self._variants[weighted] = self._build(weighted)
            graph = self._variants[weighted]
            log(f"  {self.name(weighted)}: {graph.num_vertices:,} vertices, "
                f"{graph.num_edges:,} edges, {len(graph.store.pages)} pages "
                f"({time.perf_counter() - started:.1f} s)")
        return self._variants[weighted]

    def name(self, weighted: bool) -> str:
        return self.label + (" (w)" if weighted else "")

    def _build(self, weighted: bool):
        # stores of other layout options get other directories (not rebuilt in turn)
        stem = re.sub(r"[^A-Za-z0-9_.-]+", "", self.label) + \
            "".join(f"-{k}{v}" for k, v in sorted(self.options.items()))
        store = self.store_dir / (stem + ("-w" if weighted else ""))
        if self.kind in ("rmat", "grid", "kron"):
            graph = garaphpy.Graph.load(self.spec, store=store, progress=False,
                                        generator_options={"weighted": weighted}, **self.options)
            return graph.as_undirected() if self.kind == "kron" else graph
        if not weighted:
            return garaphpy.Graph.load(self.spec, store=store, progress=False, **self.options)
        # the same edges, in the user's ids, with hashed integer weights
        plain = self.graph(False)
        in_offsets, sources, _ = plain.store.csc()
        destinations = np.repeat(np.arange(plain.num_vertices, dtype=np.int64),
                                 np.diff(np.asarray(in_offsets, dtype=np.int64)))
        src = plain.original_ids(sources.astype(np.int64))
        dst = plain.original_ids(destinations)
        del sources, destinations
        weights = hashed_weights(src, dst, config.GENERATOR_MAX_WEIGHT)
        return garaphpy.Graph.from_arrays(src, dst, weights, store=store, progress=False,
                                          directed=plain.directed, **self.options)

    def drop(self) -> None:
        self._variants.clear()
        gc.collect()


def snap_files(args) -> list:
    """The SNAP files to use: --snap, else every SNAP file in --data (smallest first)."""
    if args.snap:
        files = [Path(f) for f in args.snap]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise SystemExit(f"--snap: no such file: {', '.join(missing)}")
        return files
    data = Path(args.data)
    if not data.is_dir():
        log(f"--data {data}: no such directory; no SNAP graphs")
        return []
    files = [f for f in data.iterdir() if f.name.endswith(SNAP_SUFFIXES)]
    return sorted(files, key=lambda f: f.stat().st_size)


def snap_label(path: Path) -> str:
    name = path.name
    for suffix in SNAP_SUFFIXES:
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return path.stem


def graph_cases(args, store_dir: Path) -> list:
    """The GraphCases --graphs names, in the order rmat, kron, grid, SNAP files."""
    wanted = [g.strip() for g in args.graphs.split(",") if g.strip()]
    snaps = {snap_label(f): f for f in snap_files(args)}
    known = {"rmat", "kron", "grid", "snap"} | set(snaps)
    unknown = [g for g in wanted if g not in known]
    if unknown:
        raise SystemExit(f"--graphs: unknown {', '.join(unknown)} (known: "
                         f"{', '.join(sorted(known))})")
    options = dict(args.build_option)
    cases = []
    if "rmat" in wanted:
        cases.append(GraphCase(f"rmat:{args.scale}", f"rmat:{args.scale}", "rmat", store_dir,
                               options))
    if "kron" in wanted:
        cases.append(GraphCase(f"kron:{args.scale}", f"rmat:{args.scale}", "kron", store_dir,
                               options))
    if "grid" in wanted:
        cases.append(GraphCase(f"grid:{args.grid}", f"grid:{args.grid}", "grid", store_dir,
                               options))
    for label, path in snaps.items():
        if "snap" in wanted or label in wanted:
            cases.append(GraphCase(label, str(path), "snap", store_dir, options))
    return cases


def top_source(graph) -> int:
    """The user id of the vertex of largest out-degree (smallest internal id on ties)."""
    return int(graph.original_ids([int(np.argmax(graph.store.out_degree))])[0])


# ------------------------------------------------------------------ budgets --
def page_sizes(graph) -> list:
    return [p.nbytes for p in graph.store.pages]


def estimated_vertex_bytes(graph, program) -> int:
    """An upper bound of the GPU engine's vertex data: per vertex the values
    (twice), the active flags, the contributions and five attribute arrays;
    per shard its seven table entries and a split slot."""
    value = np.dtype(program.value_dtype).itemsize
    per_vertex = 2 * value + 1 + 8 + 5 * 8
    return graph.num_vertices * per_vertex + int(graph.store.shards.size) * 52 + (1 << 16)


def vertex_bytes(graph, program, sources, execution: str, n_streams) -> tuple:
    """(bytes, how) of the GPU engine's vertex data for this run: read off a
    GpuEngine made for it (``plan.vertex_bytes``), else estimated."""
    try:
        from garaphpy.scheduler.gpu_engine import GpuEngine

        internal = (np.unique(graph.internal_ids(np.atleast_1d(sources))).astype(np.int64)
                    if sources is not None else np.zeros(0, np.int64))
        engine = GpuEngine(graph, program, internal, execution == "sync", n_streams=n_streams)
        measured = int(engine.plan.vertex_bytes)
        del engine
        free_gpu_memory()
        return measured, "measured"
    except Exception as error:  # any failure: the estimate, said so
        free_gpu_memory()
        log(f"    vertex data estimated (probe engine failed: {type(error).__name__}: {error})")
        return estimated_vertex_bytes(graph, program), "estimated"


def below_budget(sizes: list, vertex: int, fraction: float) -> tuple:
    """(budget or None, why not): vertex data + max(fraction of the pages, the
    largest page), which must be short of every page."""
    total, largest = sum(sizes), max(sizes, default=0)
    if len(sizes) < 2:
        return None, f"{len(sizes)} page: nothing to stream"
    budget = vertex + max(int(fraction * total), largest)
    if budget >= vertex + total:
        return None, "the pages are too few to stream at this fraction"
    return budget, None


def run_execution(args, program) -> str:
    """The execution every mode's run of ``program`` takes: ``--execution``,
    else the library's default (:func:`decisions.run_execution`, the
    program's own on every processor)."""
    return decisions.run_execution(args.execution, default_execution(program))


def below_budgets(graph, program, sources, sizes: list, fraction: float, args) -> tuple:
    """(budget, why not or None, sizing fields of the row): the vertex data of
    the runs' execution (:func:`vertex_bytes`, :func:`run_execution`) plus
    ``fraction`` of the pages, the same for every GPU mode."""
    vertex, how = vertex_bytes(graph, program, sources, run_execution(args, program),
                               args.n_streams)
    budget, why = below_budget(sizes, vertex, fraction)
    return budget, why, {"vertex_bytes": vertex, "vertex_bytes_how": how}


# --------------------------------------------------------------------- runs --
def compare(reference: np.ndarray, values: np.ndarray, exact: bool, graph) -> dict:
    """Whether ``values`` agree with ``reference``, and where not."""
    reference, values = np.asarray(reference), np.asarray(values)
    if reference.shape != values.shape:
        return {"ok": False, "exact": exact,
                "detail": f"shapes differ: {reference.shape} vs {values.shape}"}
    floating = np.issubdtype(reference.dtype, np.floating) or \
        np.issubdtype(values.dtype, np.floating)
    if exact:
        same = reference == values
        if floating:
            same |= np.isnan(reference) & np.isnan(values)
        atol = 0.0
    else:
        finite = np.abs(reference[np.isfinite(reference)]) if floating else np.abs(reference)
        atol = ATOL_SCALE * float(finite.max()) if finite.size else 0.0
        same = np.isclose(values, reference, rtol=RTOL, atol=atol, equal_nan=True)
    bad = np.flatnonzero(~same)
    check = {"ok": bad.size == 0, "exact": exact, "rtol": 0.0 if exact else RTOL,
             "atol": atol, "mismatches": int(bad.size)}
    if bad.size:
        with np.errstate(invalid="ignore"):
            difference = np.abs(values.astype(np.float64) - reference.astype(np.float64))
        check["max_abs_difference"] = float(np.nanmax(difference[bad]))
        first = bad[:MISMATCH_EXAMPLES]
        check["examples"] = [{"vertex": int(u), "reference": r.item(), "value": v.item()}
                             for u, r, v in zip(graph.original_ids(first), reference[first],
                                                values[first])]
    return check


def one_run(graph, program: str, mode: str, options: dict):
    with warnings.catch_warnings():
        # fixed-iteration runs stop at their limit on purpose; others are checked
        warnings.simplefilter("ignore", NotConvergedWarning)
        return garaphpy.run(graph, get_program(program), mode=mode, **options)


def mode_case(graph, program: str, mode: str, options: dict, reference: dict, exact: bool,
              params: dict) -> tuple:
    """The harness case of one mode, and ``collect()``, which makes its entry
    once the case is measured.

    Each run's values are checked against ``reference`` (``{"values": ...,
    "mode": ...}``, read at each check): the first run of any mode while
    ``reference["values"]`` is None sets it (the first mode's warm-up, when
    there is one), and that mode's own runs are not checked.

    The entry holds the median seconds, every run's seconds and iteration
    count, the median run's per-iteration records and the value checks; the
    harness row (appended to ``--json``) the trials without the records.
    """
    runs, checks = [], []

    def run() -> harness.Measurement:
        result = one_run(graph, program, mode, options)
        if reference["values"] is None:
            reference.update(values=result.values, mode=mode)
        last_values = result.values if reference["mode"] != mode else None
        measured = {"seconds": result.seconds, "iterations": result.num_iterations,
                    "execution": result.execution,
                    "setup_seconds": result.setup_seconds, "converged": result.converged,
                    "stop_reason": result.stop_reason,
                    "set_up_choice": set_up_choice(result.plan.gpu_set_up)}
        records = [r.as_dict() for r in result.iterations]
        del result
        free_gpu_memory()
        return harness.Measurement(result=(measured, records, last_values),
                                   seconds=measured["seconds"], metrics=measured)

    def verify(outcome) -> str | None:
        measured, records, values = outcome
        runs.append({**measured, "records": records})
        if values is None:
            return None
        checks.append(compare(reference["values"], values, exact, graph))
        check = checks[-1]
        return None if check["ok"] else f"{check['mismatches']} vertices differ"

    def collect() -> dict:
        order = sorted(range(len(runs)), key=lambda k: runs[k]["seconds"])
        middle = runs[order[(len(runs) - 1) // 2]]
        bad = [c for c in checks if not c["ok"]]
        check = bad[0] if bad else (checks[0] if checks else {"ok": True, "reference": True})
        check["reference_mode"] = reference["mode"]
        return {
            "status": "mismatch" if bad else "ok",
            "median_seconds": median(r["seconds"] for r in runs),
            "seconds": [r["seconds"] for r in runs],
            "iterations": [r["iterations"] for r in runs],
            "setup_seconds": median(r["setup_seconds"] for r in runs),
            "set_up_choice": middle["set_up_choice"],
            # the whole call as a user waits for it: set-up (compilation aside) and iterations
            "whole_seconds": [r["setup_seconds"] + r["seconds"] for r in runs],
            "converged": middle["converged"], "stop_reason": middle["stop_reason"],
            "execution": middle["execution"],
            # pages copied to the device during the iterations: streamed, not resident
            "streamed": any(r.get("bytes_to_device", 0) > 0 for r in middle["records"]),
            # iterations the GPU ran (a hybrid may leave all of them to the CPU)
            "gpu_iterations": sum(1 for r in middle["records"] if gpu_took_part(r)),
            "check": check,
            "runs_mismatched": len(bad),
            "records": middle["records"],
        }

    case = harness.Case(f"{program}/{params['graph_variant']}/{params['budget']}/{mode}", run,
                        params=params, verify=verify)
    return case, collect


def measure_modes(cases: list, args) -> list:
    """The entries of ``cases`` (``(mode, case, collect)`` of :func:`mode_case`),
    measured together: their trials in turns (:func:`harness.measure_in_turns`;
    one case alone as :func:`harness.measure` measures it).  A mode that
    cannot run here (:data:`SKIPPING_ERRORS`) gets a ``skipped`` entry; every
    row measured is appended to ``--json`` with the arguments."""
    outcomes = harness.measure_in_turns([case for _, case, _ in cases], trials=args.trials,
                                        warmup=args.warmup, benchmark="modes",
                                        quiet=args.quiet, leave_on=SKIPPING_ERRORS)
    entries = []
    for (mode, _, collect), outcome in zip(cases, outcomes):
        if isinstance(outcome, BaseException):
            free_gpu_memory()
            entries.append({"status": "skipped",
                            "reason": f"{type(outcome).__name__}: {outcome}"})
            continue
        outcome["args"] = dict(vars(args))
        harness.write_rows(args.json, [outcome])
        entries.append(collect())
    return entries


def program_options(args, program: str, graph, threads: int) -> tuple:
    """(run options without the budget, source or None)."""
    cls = program_class(program)
    options = {"threads": threads}
    if args.execution:
        options["execution"] = args.execution
    if args.n_streams:
        options["n_streams"] = args.n_streams
    if program in FIXED_ITERATION_PROGRAMS and args.fixed_iterations:
        options.update(max_iterations=args.fixed_iterations, tolerance=0.0)
    source = top_source(graph) if cls.needs_sources else None
    if source is not None:
        options["sources"] = source
    return options, source


def bench_program(args, case: GraphCase, program: str, modes: list, threads: int,
                  skipped: dict, rows: list) -> None:
    """Every budget and mode of one (program, graph); appends the rows."""
    cls = program_class(program)
    instance = get_program(program)
    weighted = bool(cls.needs_weights)
    graph = case.graph(weighted)
    options, source = program_options(args, program, graph, threads)
    run_graph = graph.as_undirected() if cls.needs_undirected else graph
    exact = cls.sum in ("min", "max")
    budgets = budget_rows(args.budgets, args.budget_below, program in args.below_programs)
    sizes = page_sizes(run_graph)
    # the values every run is checked against: the first mode's first run's
    reference = {"values": None, "mode": None}
    shared = {}  # mode -> entry measured once for every budget (cpu)
    for budget, fraction in budgets:
        row = {"program": program, "graph": case.label, "graph_variant": case.name(weighted),
               "weighted": weighted, "source": source, "budget": budget,
               "budget_fraction": fraction,
               "exact_check": exact, "num_vertices": run_graph.num_vertices,
               "num_edges": run_graph.num_edges, "num_pages": len(sizes),
               "page_bytes": int(sum(sizes)), "largest_page_bytes": int(max(sizes, default=0)),
               "options": {k: v for k, v in options.items() if k != "threads"}, "modes": {}}
        gpu_modes = [m for m in modes if m != "cpu" and m not in skipped]
        gpu_budget = args.gpu_memory
        if fraction is not None and not gpu_modes:
            row["skipped"] = "no GPU mode runs here"
            rows.append(row)
            continue
        if fraction is not None:
            gpu_budget, why, sizing = below_budgets(run_graph, instance, source, sizes,
                                                    fraction, args)
            row.update(sizing)
            if why:
                log(f"  {program} on {case.name(weighted)}: no '{budget}' budget ({why})")
                row["skipped"] = why
                rows.append(row)
                continue
        row["gpu_memory"] = gpu_budget
        params = {key: row[key] for key in ("program", "graph", "graph_variant", "budget",
                                            "source")} | {"gpu_memory": gpu_budget}
        cases = []
        for mode in modes:
            if mode in skipped:
                row["modes"][mode] = {"status": "skipped", "reason": skipped[mode]}
            elif mode == "cpu" and "cpu" in shared:
                row["modes"][mode] = dict(shared["cpu"], shared_across_budgets=True)
            else:
                run_options = dict(options)
                if mode != "cpu" and gpu_budget is not None:
                    run_options["gpu_memory"] = gpu_budget
                cases.append((mode, *mode_case(graph, program, mode, run_options, reference,
                                               exact, params)))
        where = {mode: f"{program} on {case.name(weighted)}, {mode}"
                 + (f", budget {budget} ({mib(gpu_budget)})" if mode != "cpu" else "")
                 for mode, _, _ in cases}
        groups = [cases] if args.interleave and len(cases) > 1 else [[one] for one in cases]
        for group in groups:
            log(f"  {'; '.join(where[mode] for mode, _, _ in group)}: warm-up + "
                f"{args.trials} runs" + (" each, in turns" if len(group) > 1 else ""))
            for (mode, _, _), entry in zip(group, measure_modes(group, args)):
                if entry["status"] == "skipped":
                    log(f"  {where[mode]}: SKIPPED ({entry['reason']})")
                else:
                    log(f"  {where[mode]}: median {entry['median_seconds']:.4f} s, "
                        f"{entry['iterations'][0]} iterations, {entry['execution']}"
                        + ("" if entry["status"] == "ok" else
                           f", VALUES DIFFER from {reference['mode']}: {entry['check']}"))
                row["modes"][mode] = entry
                if mode == "cpu":
                    shared["cpu"] = entry
        row.update(ratios(row["modes"], in_turns=bool(args.interleave)))
        if fraction is not None and row["modes"].get("gpu", {}).get("status") == "ok" \
                and not row["modes"]["gpu"]["streamed"]:
            log(f"  WARNING: {program} on {case.name(weighted)}: budget below the graph, "
                "yet the GPU-only run kept its pages resident")
        rows.append(row)
    del reference


def budget_rows(budgets: list, fractions: list, below: bool) -> list:
    """``(name, fraction of the page bytes or None)`` per budget row of a
    program: ``above``; ``below`` once per fraction where the program runs
    below (``below`` alone for one fraction, ``below50%`` ... for several)."""
    rows = []
    for budget in budgets:
        if budget == "above":
            rows.append(("above", None))
        elif below:
            rows.extend((budget if len(fractions) == 1 else f"below{fraction:.0%}", fraction)
                        for fraction in fractions)
    return rows


def below_fractions(text: str, parser) -> list:
    """``--budget-below``'s fractions, each in (0, 1), in the order given, no repeats."""
    fractions = []
    for item in text.split(","):
        try:
            fraction = float(item)
        except ValueError:
            parser.error(f"--budget-below={text}: {item!r} is not a number")
        if not 0 < fraction < 1:
            parser.error(f"--budget-below={text}: {item} is not a fraction in (0, 1)")
        if fraction in fractions:
            parser.error(f"--budget-below={text}: {item} is given twice")
        fractions.append(fraction)
    return fractions


def ratios(entries: dict, in_turns: bool = False) -> dict:
    """Each mode's time over the row's best (correct) mode, and the hybrid ratios.

    ``in_turns`` (the trials ran in turns, ``--interleave``): also the hybrid's
    trial over the faster of the CPU's and the GPU's trials of the same turn,
    one ratio per turn (``hybrid_over_min_per_turn``), paired so that a drift
    of the machine between turns does not enter them.
    """
    times = {m: e["median_seconds"] for m, e in entries.items() if e.get("status") == "ok"}
    out = {"best_mode": min(times, key=times.get) if times else None,
           "over_best": {m: t / min(times.values()) for m, t in times.items()}}
    hybrid = times.get("hybrid")
    others = [times[m] for m in ("cpu", "gpu") if m in times]
    out["hybrid_over_min_cpu_gpu"] = hybrid / min(others) if hybrid and others else None
    out["hybrid_over_gpu"] = hybrid / times["gpu"] if hybrid and "gpu" in times else None
    whole = whole_call_seconds(entries)
    single = [whole[m] for m in ("cpu", "gpu") if m in whole]
    out["hybrid_whole_over_min_cpu_gpu"] = (whole["hybrid"] / min(single)
                                            if "hybrid" in whole and single else None)
    out["mismatch"] = sorted(m for m, e in entries.items() if e.get("status") == "mismatch")
    out.update(oracle_bounds(entries))
    out["hybrid_over_min_per_turn"] = None
    if in_turns and hybrid and others:
        trials = [entries[m]["seconds"] for m in ("cpu", "gpu") if m in times]
        out["hybrid_over_min_per_turn"] = [
            own / min(turn) for own, *turn in zip(entries["hybrid"]["seconds"], *trials)]
    return out


def whole_call_seconds(entries: dict) -> dict:
    """Each correctly run mode's whole call (set-up and iterations, numba's
    compilation aside), median over its runs, in seconds."""
    return {mode: median(entry["whole_seconds"]) for mode, entry in entries.items()
            if entry.get("status") == "ok" and "whole_seconds" in entry}


def oracle_bounds(entries: dict) -> dict:
    """``oracle_over_best`` and ``bound_over_best`` of bench/modes_oracle.py
    (:func:`modes_oracle.oracle`) from the CPU's and the GPU's median runs'
    per-iteration seconds, where both ran correctly and took as many
    iterations; else None each."""
    seconds = {}
    for mode in ("cpu", "gpu"):
        entry = entries.get(mode, {})
        seconds[mode] = (modes_oracle.iteration_seconds(entry)
                         if entry.get("status") == "ok" else None)
    cpu, gpu = seconds["cpu"], seconds["gpu"]
    if not cpu or not gpu or len(cpu) != len(gpu) or min(sum(cpu), sum(gpu)) <= 0:
        return {"oracle_over_best": None, "bound_over_best": None}
    found = modes_oracle.oracle(cpu, gpu)
    return {"oracle_over_best": found["oracle_over_best"],
            "bound_over_best": found["bound_over_best"]}


# ------------------------------------------------------------------- output --
def print_table(rows: list, modes: list, repeat: int) -> None:
    print(f"\n== CPU-only vs GPU-only vs hybrid (Garaph Table 2): median of {repeat} runs "
          f"after a warm-up, seconds of the iterations (ratio to the row's best mode)")
    head = f"{'program':9} {'graph':22} {'budget':16} {'iters':>6}"
    head += "".join(f" {m + ' s (/best)':>19}" for m in modes)
    head += f" {'hyb/min(c,g)':>12} {'hyb/gpu':>8} {'oracle':>6} {'bound':>6}  check"
    print(head)
    for row in rows:
        budget = row["budget"] if row.get("gpu_memory") is None else \
            f"{row['budget']} {mib(row['gpu_memory'])}"
        line = f"{row['program']:9} {row['graph_variant']:22} {budget:16}"
        if "skipped" in row:
            print(f"{line} {'':>6}  skipped: {row['skipped']}")
            continue
        entries = row["modes"]
        iterations = sorted({e["iterations"][0] for e in entries.values() if "iterations" in e})
        line += f" {'/'.join(map(str, iterations)) or '-':>6}"
        for mode in modes:
            entry = entries.get(mode, {"status": "skipped"})
            if entry["status"] == "skipped":
                cell = "skipped"
            elif entry["status"] == "mismatch":
                cell = f"{entry['median_seconds']:.4f} MISMATCH"
            else:
                below = mode != "cpu" and row.get("budget_fraction") is not None
                mark = "" if not below or entry["streamed"] else \
                    "c" if entry.get("gpu_iterations") == 0 else "*"
                cell = f"{entry['median_seconds']:.4f} ({row['over_best'][mode]:.2f}){mark}"
            line += f" {cell:>19}"
        for key, width in (("hybrid_over_min_cpu_gpu", 12), ("hybrid_over_gpu", 8),
                           ("oracle_over_best", 6), ("bound_over_best", 6)):
            value = row.get(key)
            line += f" {('-' if value is None else f'{value:.2f}'):>{width}}"
        bad = row.get("mismatch")
        line += "  " + (f"MISMATCH: {','.join(bad)} differ from the reference" if bad else
                        "ok" if len([e for e in entries.values() if e["status"] == "ok"]) > 1
                        else "(one mode)")
        print(line)
    print("   iters: iterations (one figure when every mode ran as many); budget: the GPU "
          "memory given to gpu and hybrid (above: default or --gpu-memory; below: the "
          "run's vertex data + a fraction of the pages); * pages "
          "stayed resident despite the budget; c every iteration on the CPU; oracle, bound: "
          "bench/modes_oracle.py's over min(cpu, gpu), from the median runs' iterations "
          "(each on its faster processor; each shared at both full rates)")
    paired = [row for row in rows if row.get("hybrid_over_min_per_turn")]
    if paired:
        print("   hybrid / min(cpu, gpu) turn by turn (trials in turns): median, range, "
              "turns at most 1.0")
        for row in paired:
            turns = row["hybrid_over_min_per_turn"]
            print(f"   {row['program']:9} {row['graph_variant']:22} {row['budget']:16} "
                  f"{median(turns):.2f}  {min(turns):.2f}-{max(turns):.2f}  "
                  f"{sum(t <= 1.0 for t in turns)} of {len(turns)}")
    executions = {}  # mode -> program -> execution of its runs
    for row in rows:
        for mode, entry in row.get("modes", {}).items():
            if entry.get("execution"):
                executions.setdefault(mode, {})[row["program"]] = entry["execution"]
    if executions:
        print("   execution: " + "; ".join(
            f"{mode} " + ", ".join(f"{program} {execution}"
                                  for program, execution in by_program.items())
            for mode, by_program in executions.items()))
    reasons = {}  # (mode, reason) -> rows, for the modes skipped in some rows only
    for row in rows:
        for mode, entry in row.get("modes", {}).items():
            if entry["status"] == "skipped" and not entry["reason"].startswith("no usable GPU"):
                reasons.setdefault((mode, entry["reason"]), []).append(
                    f"{row['program']} on {row['graph_variant']} ({row['budget']})")
    for (mode, reason), where in reasons.items():
        print(f"   {mode} skipped in {len(where)} row(s) ({', '.join(where[:3])}"
              f"{', ...' if len(where) > 3 else ''}): {reason}")


def hybrid_switches(records: list) -> list:
    """(iteration, gpu_on) where the GPU joined (True) or left (False) the run:
    :func:`gpu_took_part` changes between one record and the next."""
    took_part = [gpu_took_part(record) for record in records]
    return [(k, took_part[k]) for k in range(1, len(took_part))
            if took_part[k] != took_part[k - 1]]


def gpu_took_part(record: dict) -> bool:
    """Whether the GPU ran this iteration's record, alone or beside the CPU: its
    mode is ``gpu`` or ``hybrid``, unless the CPU took every page
    (``cpu_pages`` > 0 and ``gpu_pages`` 0).  A GPU iteration that copies no
    page (one of the device loop's, or a pass over the frontier's edges or
    the kept pages alone) records ``gpu_pages`` 0 and still counts."""
    if record.get("mode") not in ("gpu", "hybrid"):
        return False
    return not ((record.get("cpu_pages") or 0) > 0 and not record.get("gpu_pages"))


def print_whole_calls(rows: list, modes: list) -> None:
    """Each mode's whole call, set-up and iterations (numba's compilation
    aside), median over its runs, and the hybrid's over the better single
    mode: what a user of ``garaphpy.run`` waits for, where the hybrid's
    choice to set the GPU up at all is weighed."""
    shown = [row for row in rows if "skipped" not in row
             and any("whole_seconds" in e for e in row["modes"].values())]
    if not shown:
        return
    print("\n== the whole call: set-up + iterations, median of the runs, seconds "
          "(set-up alone in brackets)")
    head = f"{'program':9} {'graph':22} {'budget':8}"
    head += "".join(f" {m + ' s (set-up)':>21}" for m in modes) + f" {'hyb/min(c,g)':>12}"
    print(head)
    for row in shown:
        line = f"{row['program']:9} {row['graph_variant']:22} {row['budget']:8}"
        whole = whole_call_seconds(row["modes"])
        for mode in modes:
            if mode not in whole:
                line += f" {'-':>21}"
                continue
            line += f" {whole[mode]:>10.4f} ({row['modes'][mode]['setup_seconds']:.4f})"
        ratio = row.get("hybrid_whole_over_min_cpu_gpu")
        print(line + f" {('-' if ratio is None else f'{ratio:.2f}'):>12}")


def print_dispatch(rows: list) -> None:
    hybrid = [(row, row["modes"]["hybrid"]) for row in rows
              if row.get("modes", {}).get("hybrid", {}).get("status") in ("ok", "mismatch")]
    if not hybrid:
        return
    print("\n== hybrid dispatcher, median run: iterations CPU-only / GPU-only (the per-run "
          "choice) / hybrid, switches, the GPU's share of the edges, dispatch overhead per "
          "iteration (deciding + synchronizing), the per-run choices, the choice before set-up")
    print(f"{'program':9} {'graph':22} {'budget':8} {'cpu-only':>8} {'gpu-only':>8} "
          f"{'hybrid':>7} {'switches':>8} {'gpu edges':>9} {'dispatch median':>16} {'max':>9} "
          f"{'share':>7}  first switches; run choices; set-up choice")
    for row, entry in hybrid:
        records = entry["records"]
        modes = [r.get("mode") for r in records]
        cpu_edges = sum(r.get("cpu_edges") or 0 for r in records)
        gpu_edges = sum(r.get("gpu_edges") or 0 for r in records)
        share = f"{gpu_edges / (cpu_edges + gpu_edges):.0%}" if cpu_edges + gpu_edges else "-"
        switches = hybrid_switches(records)
        first = ", ".join(f"{k}{'^' if on else 'v'}" for k, on in switches[:6]) + \
            (" ..." if len(switches) > 6 else "")
        dispatch = [r["dispatch_seconds"] for r in records
                    if r.get("dispatch_seconds") is not None]
        if dispatch:
            total = sum(r["seconds"] for r in records)
            entry["dispatch"] = {"median_seconds": median(dispatch), "max_seconds": max(dispatch),
                                 "share_of_iterations": sum(dispatch) / total if total else None}
            over = (f"{median(dispatch) * 1e3:>13.3f} ms {max(dispatch) * 1e3:>6.3f} ms "
                    f"{entry['dispatch']['share_of_iterations']:>7.1%}")
        else:
            over = f"{'(not recorded)':>16} {'':>9} {'':>7}"
        print(f"{row['program']:9} {row['graph_variant']:22} {row['budget']:8} "
              f"{modes.count('cpu'):>8} {modes.count('gpu'):>8} {modes.count('hybrid'):>7} "
              f"{len(switches):>8} {share:>9} {over}  {first}; {run_choices(records)}; "
              f"{set_up_choice_text(entry.get('set_up_choice'))}")
    print("   switches: k^ the GPU joins at iteration k, kv it leaves; share: dispatch "
          "time / iteration time")


def set_up_choice(entry: dict | None) -> dict | None:
    """A hybrid run's choices before set-up (``RunPlan.gpu_set_up``): the CPU's
    whole run and the GPU's set-up as estimated, and what was chosen
    (``"cpu"``, ``"gpu"`` alone, or ``"both"``); None where none was weighed."""
    if not entry:
        return None
    chosen = "cpu" if not entry["choice"] else "gpu" if entry.get("gpu_alone") else "both"
    return {"chosen": chosen, "cpu_seconds": entry["cpu_seconds"],
            "gpu_seconds": entry.get("gpu_seconds", entry["gpu_set_up_seconds"]),
            "gpu_set_up_seconds": entry["gpu_set_up_seconds"]}


def set_up_choice_text(choice: dict | None) -> str:
    """``chosen (cpu est. X ms, GPU set-up est. Y ms)``, or ``-``."""
    if not choice:
        return "-"
    return (f"{choice['chosen']} (cpu est. {choice['cpu_seconds'] * 1e3:.1f} ms, GPU est. "
            f"{choice.get('gpu_seconds', choice['gpu_set_up_seconds']) * 1e3:.1f} ms)")


def run_choices(records: list, most: int = 6) -> str:
    """The per-run choices of a hybrid run's records (``decisions["run_processors"]``)
    where they change, as ``choice@iteration`` (the first ``most``)."""
    changes, last = [], None
    for record in records:
        entry = (record.get("decisions") or {}).get("run_processors")
        if entry and entry.get("choice") != last:
            last = entry.get("choice")
            changes.append(f"{last}@{record.get('iteration')}")
    return (", ".join(changes[:most]) + (" ..." if len(changes) > most else "")) or "-"


def time_split(records: list) -> dict:
    """Where a run's iteration time went (seconds), from its records: the
    iterations the CPU ran alone, those the GPU took part in, and within the
    latter the GPU's busy time, the dispatcher's and the rest (the host's
    own work around the GPU's: launches, waits, copies not overlapped,
    Python).  Batched records share their batch's time and busy time."""
    alone, with_gpu = [], []
    for record in records:
        (with_gpu if gpu_took_part(record) else alone).append(record)
    seconds = sum(r.get("seconds") or 0.0 for r in with_gpu)
    gpu_busy = sum(r.get("gpu_busy_seconds") or 0.0 for r in with_gpu)
    dispatch = sum(r.get("dispatch_seconds") or 0.0 for r in with_gpu)
    return {"cpu_alone_iterations": len(alone),
            "cpu_alone_seconds": sum(r.get("seconds") or 0.0 for r in alone),
            "gpu_iterations": len(with_gpu), "gpu_seconds": seconds,
            "gpu_busy_seconds": gpu_busy, "dispatch_seconds": dispatch,
            "host_seconds": max(0.0, seconds - gpu_busy - dispatch)}


def add_time_splits(rows: list) -> None:
    """Per row, the GPU alone's and the hybrid's median runs split by
    :func:`time_split`, kept as their entries' ``time_split`` (in the
    summary's JSON)."""
    for row in rows:
        for mode in ("gpu", "hybrid"):
            entry = row.get("modes", {}).get(mode, {})
            if entry.get("status") in ("ok", "mismatch") and entry.get("records"):
                entry["time_split"] = time_split(entry["records"])


def print_time_split(rows: list) -> None:
    """The splits :func:`add_time_splits` kept, in ms: where the hybrid gains or
    loses against the GPU alone."""
    lines = []
    for row in rows:
        for mode in ("gpu", "hybrid"):
            split = row.get("modes", {}).get(mode, {}).get("time_split")
            if split is None:
                continue
            lines.append(
                f"{row['program']:9} {row['graph_variant']:22} {row['budget']:8} {mode:6} "
                f"{split['cpu_alone_iterations']:>6} {split['cpu_alone_seconds'] * 1e3:>9.2f} "
                f"{split['gpu_iterations']:>6} {split['gpu_seconds'] * 1e3:>9.2f} "
                f"{split['gpu_busy_seconds'] * 1e3:>9.2f} {split['dispatch_seconds'] * 1e3:>9.2f} "
                f"{split['host_seconds'] * 1e3:>9.2f}")
    if not lines:
        return
    print("\n== where the time goes, median run (ms): iterations the CPU ran alone, "
          "iterations with the GPU, and within those the GPU's busy time, the dispatcher's, "
          "the rest on the host")
    print(f"{'program':9} {'graph':22} {'budget':8} {'mode':6} {'cpu n':>6} {'cpu ms':>9} "
          f"{'gpu n':>6} {'gpu ms':>9} {'busy':>9} {'dispatch':>9} {'host':>9}")
    for line in lines:
        print(line)


def plot_figure11(rows: list, modes: list, path: str, title: str) -> None:
    """Garaph Figure 11: ms per iteration of SSSP and CC in every mode, per graph."""
    try:
        import matplotlib
    except ImportError:
        log(f"matplotlib is not installed: no {path} (pip install matplotlib)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = [row for row in rows if row["program"] in FIGURE_PROGRAMS
             and row["budget"] == "above" and "skipped" not in row
             and any(e.get("status") in ("ok", "mismatch") for e in row["modes"].values())]
    if not cases:
        log(f"no SSSP or CC runs: no {path}")
        return
    graphs = list(dict.fromkeys(row["graph"] for row in cases))
    programs = [p for p in FIGURE_PROGRAMS if any(row["program"] == p for row in cases)]
    figure, axes = plt.subplots(len(graphs), len(programs), squeeze=False,
                                figsize=(6.5 * len(programs), 3.8 * len(graphs)))
    styles = {"cpu": dict(color="tab:blue", lw=1.2), "gpu": dict(color="tab:green", lw=1.2),
              "hybrid": dict(color="tab:red", lw=1.4)}
    for axis in axes.flat:
        axis.set_visible(False)
    for row in cases:
        axis = axes[graphs.index(row["graph"]), programs.index(row["program"])]
        axis.set_visible(True)
        for mode in modes:
            entry = row["modes"].get(mode, {})
            if entry.get("status") not in ("ok", "mismatch"):
                continue
            ms = np.array([r["seconds"] for r in entry["records"]]) * 1e3
            label = f"{mode} ({entry['median_seconds']:.3g} s)" + \
                (" MISMATCH" if entry["status"] == "mismatch" else "")
            axis.plot(np.arange(ms.size), ms, label=label, **styles[mode])
            if mode == "hybrid":
                switches = hybrid_switches(entry["records"])
                for on, marker, what in ((True, "^", "GPU joins"), (False, "v", "GPU leaves")):
                    at = [k for k, joined in switches if joined == on]
                    if at:
                        axis.scatter(at, ms[at], marker=marker, s=55, color="tab:red",
                                     edgecolor="black", zorder=5, label=f"hybrid: {what}")
        milliseconds_log_axis(axis)
        source = f" from {row['source']}" if row["source"] is not None else ""
        axis.set_title(f"{row['program'].upper()} on {row['graph_variant']}{source}",
                       fontsize=10)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    log(f"wrote {path}")


# --------------------------------------------------------------------- main --
def names(text: str, valid, what: str, parser) -> list:
    chosen = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in chosen if x not in valid]
    if bad or not chosen:
        parser.error(f"--{what} {text!r}: expected a comma-separated subset of "
                     f"{','.join(valid)}")
    return chosen


def program_names(text: str, what: str, parser) -> list:
    chosen = []
    for name in (x.strip() for x in text.split(",") if x.strip()):
        try:
            cls = program_class(name)
        except ConfigError as error:
            parser.error(f"--{what}: {error}")
        chosen.append(next(k for k, v in BUILTIN_PROGRAMS.items()
                           if v is cls))
    return list(dict.fromkeys(chosen))


def build_option(text: str) -> tuple:
    """NAME=INTEGER, a layout option of every store (e.g. max_page_bytes, for more pages)."""
    from garaphpy.storage.builder import BuildOptions

    name, _, value = text.partition("=")
    allowed = ("max_page_bytes", "max_shard_edges", "max_shard_vertices", "shared_memory_bytes",
               "slot_bytes", "max_replication")
    if name not in allowed or not value.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=INTEGER with NAME one of "
                                         f"{', '.join(allowed)}")
    assert name in BuildOptions.__dataclass_fields__
    return name, int(value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=22,
                        help="RMAT scale of rmat and kron (default 22)")
    parser.add_argument("--grid", default="2000x2000", help="grid WIDTHxHEIGHT (default 2000x2000)")
    parser.add_argument("--data", default=str(DEFAULT_DATA),
                        help=f"directory of SNAP files (default {DEFAULT_DATA})")
    parser.add_argument("--snap", nargs="+", default=None, metavar="FILE",
                        help="SNAP files to use instead of those in --data")
    parser.add_argument("--graphs", default="rmat,grid,snap",
                        help="comma-separated: rmat, kron (rmat made symmetric), grid, snap "
                             "(every SNAP file) or a SNAP file's name such as web-NotreDame "
                             "(default rmat,grid,snap)")
    parser.add_argument("--programs", default=",".join(DEFAULT_PROGRAMS),
                        help=f"comma-separated built-in programs (default "
                             f"{','.join(DEFAULT_PROGRAMS)})")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="comma-separated subset of cpu,gpu,hybrid (default all)")
    parser.add_argument("--budgets", default=",".join(BUDGETS),
                        help="GPU budgets: above (pages fit), below (pages stream); "
                             "default above,below")
    parser.add_argument("--below-programs", default=",".join(FIXED_ITERATION_PROGRAMS),
                        help="programs that also run with the 'below' budget "
                             f"(default {','.join(FIXED_ITERATION_PROGRAMS)})")
    parser.add_argument("--budget-below", default="0.5", metavar="FRACTION[,FRACTION...]",
                        help="the 'below' budget: the vertex data plus this fraction of the "
                             "store's page bytes (at least the largest page; default 0.5); "
                             "several give a row each")
    parser.add_argument("--gpu-memory", type=int, default=None, metavar="BYTES",
                        help="the 'above' budget in bytes (default: the library's, 80%% of "
                             "the free GPU memory)")
    parser.add_argument("--n-streams", type=int, default=None,
                        help=f"CUDA streams (default the library's, {config.N_STREAMS})")
    parser.add_argument("--fixed-iterations", type=int, default=10,
                        help="iterations of PageRank, NN, HS and CS, tolerance 0 (Garaph's "
                             "10; 0: the programs' own stopping rules)")
    parser.add_argument("--execution", choices=("sync", "async"), default=None,
                        help="the execution of every mode (default: the program's "
                             "own: SSSP, CC and SSWP async, the others sync)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: every core)")
    parser.add_argument("--store-dir", default=None,
                        help="keep the stores here and reuse them (default: a temporary "
                             "directory removed at the end)")
    parser.add_argument("--build-option", type=build_option, action="append", default=[],
                        metavar="NAME=INTEGER",
                        help="a layout option of every store (repeatable), e.g. "
                             "max_page_bytes=1048576 to cut small graphs into pages that "
                             "can stream; default: the defaults")
    parser.add_argument("--png", default=None, help="write the Figure 11 plot here")
    parser.add_argument("--interleave", action="store_true",
                        help="run the modes of a row in turns: every warm-up, then trial 1 "
                             "of every mode, trial 2, ... (default: one mode's trials "
                             "after another's)")
    harness.add_common_options(parser, trials=3, warmup=1, json_help=(
        "append a JSON row per (program, graph, budget, mode) and a summary row here "
        "(gzip-compressed if it ends in .gz)"))
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)

    modes = names(args.modes, MODES, "modes", parser)
    args.budgets = names(args.budgets, BUDGETS, "budgets", parser)
    programs = program_names(args.programs, "programs", parser)
    args.below_programs = program_names(args.below_programs, "below-programs", parser)
    args.budget_below = below_fractions(args.budget_below, parser)
    if args.fixed_iterations < 0:
        parser.error(f"--fixed-iterations={args.fixed_iterations}: expected >= 0")
    available = numba.config.NUMBA_NUM_THREADS
    threads = args.threads or min(config.default_threads(), available)
    if not 1 <= threads <= available:
        parser.error(f"--threads={threads}: numba started with {available} threads "
                     f"(set NUMBA_NUM_THREADS={threads} before starting Python for more)")

    temporary = None
    if args.store_dir:
        store_dir = Path(args.store_dir)
        store_dir.mkdir(parents=True, exist_ok=True)
    else:
        temporary = tempfile.TemporaryDirectory(prefix="garaphpy-bench-modes-")
        store_dir = Path(temporary.name)
    # symmetrized stores (CC) go to the library's cache: keep them with ours
    if not os.environ.get("GARAPHPY_CACHE"):
        os.environ["GARAPHPY_CACHE"] = str(store_dir / "cache")

    skipped = {}
    problem = gpu_problem()
    for mode in ("gpu", "hybrid"):
        if mode in modes and problem is not None:
            skipped[mode] = f"no usable GPU: {problem}"
            print(f"{mode}: skipped, no usable GPU ({problem})"
                  + ("; hybrid would only fall back to the CPU" if mode == "hybrid" else ""))

    results = {"benchmark": "modes", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
               "command": " ".join(shlex.quote(a) for a in [sys.executable] + sys.argv),
               **machine(), "threads": threads, "numba_num_threads": available,
               "args": dict(vars(args), modes=modes, programs=programs),
               "store_dir": str(store_dir), "skipped_modes": skipped, "rows": [],
               "mismatches": []}
    print(f"garaphpy modes benchmark: {results['machine']} ({results['cpu_model']}, "
          f"{results['cpu_count']} CPUs{', ' + results['gpu'] if 'gpu' in results else ''}), "
          f"{threads} threads, modes {','.join(modes)}, {results['date']}")
    print(f"command: {results['command']}")

    rows = results["rows"]
    try:
        cases = graph_cases(args, store_dir)
        if not cases:
            raise SystemExit(f"--graphs {args.graphs}: no graph to run (no SNAP file in "
                             f"{args.data}? name files with --snap)")
        log(f"stores in {store_dir}; graphs {', '.join(c.label for c in cases) or 'none'}")
        for case in cases:
            log(f"{case.label}:")
            for program in programs:
                before = len(rows)
                bench_program(args, case, program, modes, threads, skipped, rows)
                for row in rows[before:]:
                    for mode in row.get("mismatch", []):
                        results["mismatches"].append({
                            "program": row["program"], "graph": row["graph_variant"],
                            "budget": row["budget"], "mode": mode,
                            "check": row["modes"][mode]["check"]})
            case.drop()
            free_gpu_memory()
    finally:
        if temporary is not None:
            temporary.cleanup()

    print_table(rows, modes, args.trials)
    print_whole_calls(rows, modes)
    print_dispatch(rows)
    add_time_splits(rows)
    print_time_split(rows)
    if results["mismatches"]:
        print(f"\nMISMATCH: {len(results['mismatches'])} (program, graph, budget, mode) "
              "results differ from the reference mode's values; their times are not results:")
        for bad in results["mismatches"]:
            check = bad["check"]
            print(f"  {bad['program']} on {bad['graph']} ({bad['budget']}), {bad['mode']} vs "
                  f"{check.get('reference_mode')}: {check.get('mismatches')} vertices, "
                  f"max |difference| {check.get('max_abs_difference')}, e.g. "
                  f"{check.get('examples', [])[:2]}")
    harness.write_record(args.json, "modes", "summary", json.loads(
        json.dumps(results, default=_jsonable)))
    if args.json:
        log(f"appended rows to {args.json}")
    if args.png:
        plot_figure11(rows, modes, args.png,
                      f"garaphpy CPU-only / GPU-only / hybrid per iteration (Garaph Fig. 11), "
                      f"{threads} threads, {results['machine']}"
                      + (f", {results['gpu']}" if "gpu" in results else ""))
    return 1 if results["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
