"""Graphs larger than the GPU budget: partial residency and per-page transfers.

One process, one GPU.  The graph is ``rmat:SCALE`` (Graph500 RMAT, edge
factor 16, integer weights 1..255) made symmetric, the Kronecker graph of
the issue built with garaphpy's generator; runs start from the vertex of
highest out-degree.  For each program:

``resident``
    No budget: every page on the device (the device loop and the fused pull,
    the engine's default).
``FRACTION/CHOICE``
    ``gpu_memory`` = the resident run's vertex data + FRACTION of the pages'
    bytes: the stream buffers, the selective transfers' arrays and the pages
    kept resident all come out of that FRACTION.  ``CHOICE`` is
    ``config.GPU_TRANSFER``: ``auto`` (the cost model per page and
    iteration), ``copy`` (every page not resident, every iteration:
    Garaph's stream), ``skip``, ``compact`` (Subway's SubCSR), ``zero-copy``
    (EMOGI).  PageRank copies every streamed page whatever the choice.
    Pages are packed (the engine's ``packed_pages``, :mod:`garaphpy.kernels.packed`);
    with ``--packed off`` or ``both``, runs of the pages as stored are named
    ``FRACTION/CHOICE/stored``.  The GPU pulls a packed page where it lies
    (``pull_packed``); with ``--pull-packed off`` or ``both``, runs
    that unpack each page before its pull are named ``FRACTION/CHOICE/unpack``.
    An automatic run makes the selective transfers' arrays at a sparse
    iteration (``defer_selective_arrays``); with ``--defer-selective
    off`` or ``both``, runs that make them at set-up are named
    ``FRACTION/auto/at-setup``.  It makes them once that pays
    (``selective_when_pays``); with ``--selective-when-pays off`` or
    ``both``, runs that make them at the first sparse iteration are named
    ``FRACTION/auto/first-sparse`` (the iteration they were made at is in each
    trial's metrics, ``selective_arrays_at``).  It measures the transfer rates at set-up
    (``calibrate_transfer_rates``); with ``--calibrate off`` or
    ``both``, runs that start from config's rates are named
    ``FRACTION/auto/uncalibrated``.  With ``--execution async``, every run is asynchronous.  Each of these options
    defaults to config's value; a case is named by the values that differ
    from it.

``subway/PROGRAM``
    With ``--subway DIR`` (a directory holding Subway's built ``bfs-sync``,
    ``sssp-sync``, ``cc-sync``; AutomataLab/Subway, built with CUDA for the
    card), Subway on the same graph: the store's out-edge CSR written in
    Subway's binary format (``.bcsr``, ``.bwcsr`` with the integer weights;
    :func:`write_subway_graph`), run from the same source (internal ids are
    Subway's ids) ``--subway-trials`` times; its "Processing finished in"
    time (graph reading excluded; printed in ms or s by its versions), the
    median.  Subway keeps no page on the
    GPU and moves each iteration's active subgraph (SubCSR), whatever the
    budget.  Its values are checked against the resident run's (BFS and
    SSSP: the same vertices reached, the same values; CC: the same
    components).

Time: ``Result.seconds`` (the iterations' wall time; set-up excluded), the
median of ``--trials`` runs after ``--warmup``.  Every run's values are
checked against the resident run's (bitwise for BFS, SSSP, CC; 1e-6 for
PageRank).  Also measured: pinned host-to-device bandwidth (a
``--bandwidth-mib`` copy, CUDA events, median of 5), the bound of streamed
PageRank (the bytes it copies per iteration over that bandwidth).

Usage::

    python -m bench streamed --scale 24 --json bench/results/streamed.json

Subway (never committed here) is built outside the repository's tracked
files, for the card, e.g. for an H100 under CUDA 13::

    mkdir .subway && git --git-dir=PATH/TO/Subway/.git archive HEAD | tar -x -C .subway
    make -C .subway make1 make2 bfs-sync cc-sync sssp-sync \
        CFLAGS="-std=c++17 -O3" NFLAGS="-arch=sm_90"
    python -m bench streamed --scale 24 --subway .subway
"""

from __future__ import annotations

import argparse
import gc
import inspect
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

import garaphpy
from garaphpy import config
from garaphpy.scheduler import gpu_engine
from garaphpy.scheduler.gpu.engine import GpuEngine

from bench import harness


CHOICES = ("auto", "copy", "skip", "compact", "zero-copy")


def pinned_bandwidth(mib: int) -> float:
    """Bytes per second of one pinned host-to-device copy (median of 5)."""
    import cupy

    nbytes = mib << 20
    host = np.frombuffer(cupy.cuda.alloc_pinned_memory(nbytes), np.uint8, nbytes)
    host[:] = 1
    device = cupy.empty(nbytes, np.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)
    times = []
    for _ in range(6):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        cupy.cuda.runtime.memcpyAsync(device.data.ptr, host.ctypes.data, nbytes,
                                      cupy.cuda.runtime.memcpyHostToDevice, stream.ptr)
        end.record(stream)
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    return nbytes / float(np.median(times[1:]))


def vertex_bytes(graph, program: str, sources) -> int:
    """The device bytes of a resident run's vertex data (the plan's)."""
    from garaphpy.programs import BUILTIN_PROGRAMS
    from garaphpy.scheduler.gpu_engine import GpuEngine

    instance = BUILTIN_PROGRAMS[program]()
    internal = graph.store.internal_ids(np.asarray(sources)) if sources else np.zeros(0, np.int64)
    engine = GpuEngine(graph, instance, np.asarray(internal, np.int64),
                       synchronous=instance.execution == "sync")
    return engine.plan.vertex_bytes


#: The A/B options: option -> (the GPU engine's keyword, the case name's suffix when
#: it is on, when it is off, whether only automatic runs vary it).  A case is named
#: by the suffix of each value that is not the engine's default.
VARIANTS = {
    "defer_selective": ("defer_selective_arrays", "/deferred", "/at-setup", True),
    "selective_when_pays": ("selective_when_pays", "/when-pays", "/first-sparse", True),
    "calibrate": ("calibrate_transfer_rates", "/calibrated", "/uncalibrated", True),
}
DEFAULTS = {key: inspect.signature(GpuEngine).parameters[key].default
            for key, *_ in VARIANTS.values()}


def variant_suffix(settings: dict) -> str:
    """The case name's part for ``settings`` (engine keywords and values): the
    suffix of each :data:`VARIANTS` value that is not the engine's default."""
    return "".join(on if settings[key] else off for key, on, off, _ in VARIANTS.values()
                   if settings[key] != DEFAULTS[key])


def run(graph, program: str, options: dict, choice: str, packed: bool = True,
        pull_packed: bool = True, settings: dict | None = None) -> harness.Measurement:
    """One run with the transfer choice ``choice`` and ``settings`` (GPU engine
    keywords and values) set."""
    # the last run's engine and its pinned buffers go now, not inside this run's iterations
    gc.collect()
    config.GPU_TRANSFER = choice
    switches = dict(settings or {}, packed_pages=packed, pull_packed=pull_packed)

    class SwitchedEngine(GpuEngine):
        def __init__(self, *arguments, **given):
            super().__init__(*arguments, **switches, **given)

    # the run's set-up imports the class when it runs: it builds this one
    gpu_engine.GpuEngine = SwitchedEngine
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
            result = garaphpy.run(graph, program, **options)
    finally:
        gpu_engine.GpuEngine = GpuEngine
    records = result.iterations
    transfers = {}
    for record in records:
        entry = record.decisions.get("page_transfer")
        if entry:
            for name in ("resident", "skip", "copy", "compact", "zero-copy"):
                transfers[name] = transfers.get(name, 0) + entry[name]
    per_iteration = [{
        "ms": round(r.seconds * 1e3, 3), "MB": round(r.bytes_to_device / 1e6, 2),
        "active": r.active_vertices, "direction": r.direction,
        "pages": (r.decisions.get("page_transfer") or {}).get("choice", ""),
        "count_ms": round((r.decisions.get("page_transfer") or {}).get("count_seconds", 0)
                          * 1e3, 3)} for r in records]
    made = [r.iteration for r in records if "selective_arrays" in r.decisions]
    return harness.Measurement(result=result, seconds=result.seconds, metrics={
        "iterations": result.num_iterations, "per_iteration": per_iteration,
        "selective_arrays_at": made[0] if made else None,
        "bytes_to_device": sum(r.bytes_to_device for r in records),
        "bytes_read": sum(r.bytes_read for r in records),
        "transfers": transfers,
        "setup_seconds": result.setup_seconds})


def variant_settings(variants: dict, choice: str) -> list[dict]:
    """The config settings of each run of a case of transfer choice ``choice``:
    every combination of the :data:`VARIANTS` asked for (``variants``: option ->
    the values to run), those only automatic runs vary at their default for
    a forced choice."""
    combinations = [{}]
    for option, (key, _, _, auto_only) in VARIANTS.items():
        values = variants[option]
        if auto_only and choice != "auto":
            values = [DEFAULTS[key]]
        combinations = [{**settings, key: value} for settings in combinations
                        for value in values]
    return combinations


def write_subway_graph(store, path: Path, weighted: bool, chunk_edges: int = 1 << 26) -> None:
    """The store's out-edge CSR in Subway's binary format (its shared/graph.cu):
    uint32 vertex and edge counts, uint32 offsets of the vertices' out-edges,
    then per edge its uint32 target (``.bcsr``) or target and weight
    (``.bwcsr``, the integer weights).  Vertex ids are the store's internal ids."""
    from garaphpy.kernels.gpu_subgraph import store_out_edge_values

    n, m = store.num_vertices, store.num_edges
    if m >= 2 ** 32:
        raise SystemExit(f"{m:,} edges: more than Subway's 32-bit edge count holds")
    values = None
    if weighted:
        values = store_out_edge_values(store)
        if np.any(values != np.round(values)) or np.any(values < 0):
            raise SystemExit("Subway's weights are unsigned integers; this store's are not")
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as handle:
        np.array([n, m], np.uint32).tofile(handle)
        np.asarray(store.out_offsets[:-1]).astype(np.uint32).tofile(handle)
        for begin in range(0, m, chunk_edges):
            end = min(begin + chunk_edges, m)
            targets = np.asarray(store.out_targets[begin:end]).astype(np.uint32)
            if values is None:
                targets.tofile(handle)
            else:
                pairs = np.empty((end - begin, 2), np.uint32)
                pairs[:, 0] = targets
                pairs[:, 1] = values[begin:end]
                pairs.tofile(handle)
    partial.replace(path)


SUBWAY_TIME = re.compile(r"Processing finished in\s+([0-9.eE+-]+)\s*\((ms|s)\)")


def run_subway(subway: Path, program: str, graph_path: Path, source: int | None,
               output: Path, execution: str = "sync") -> float:
    """Milliseconds Subway's ``PROGRAM-EXECUTION`` (``sync`` or ``async``) reports
    for one run; its values in ``output``."""
    command = [str(subway / f"{program}-{execution}"), "--input", str(graph_path),
               "--output", str(output)]
    if source is not None:
        command += ["--source", str(source)]
    completed = subprocess.run(command, check=True, capture_output=True, text=True)
    found = SUBWAY_TIME.search(completed.stdout)
    if found is None:
        raise SystemExit(f"{' '.join(command)}: no processing time in its output:\n"
                         f"{completed.stdout[-2000:]}")
    return float(found.group(1)) * (1.0 if found.group(2) == "ms" else 1e3)


def subway_matches(program: str, output: Path, values: np.ndarray) -> str | None:
    """None when Subway's values (``vertex value`` lines) agree with ours."""
    theirs = np.fromfile(output, sep=" ", dtype=np.uint64)[1::2]
    if theirs.size != values.size:
        return f"{theirs.size} values, expected {values.size}"
    if program == "cc":
        pairs = np.unique(np.stack([values.astype(np.int64), theirs.astype(np.int64)]), axis=1)
        same = pairs.shape[1] == np.unique(values).size == np.unique(theirs).size
        return None if same else "components differ"
    reached = theirs < np.uint64(2 ** 32 - 1)
    ours = values.astype(np.float64)
    ours_reached = np.isfinite(ours) & (ours < 2 ** 31)
    if not np.array_equal(reached, ours_reached):
        return f"{int((reached != ours_reached).sum())} vertices reached by one side only"
    if not np.array_equal(theirs[reached].astype(np.float64), ours[reached]):
        return "values differ"
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=24)
    parser.add_argument("--programs", default="bfs,sssp,cc,pagerank")
    parser.add_argument("--fractions", default="0.5,0.25")
    parser.add_argument("--choices", default=",".join(CHOICES))
    parser.add_argument("--pagerank-iterations", type=int, default=20)
    parser.add_argument("--bandwidth-mib", type=int, default=1024)
    parser.add_argument("--store-dir", default=None)
    parser.add_argument("--packed", default="on", choices=("on", "off", "both"),
                        help="pages packed (packed_pages), as stored (cases "
                             "named .../stored), or both")
    parser.add_argument("--pull-packed", default="on", choices=("on", "off", "both"),
                        help="packed pages pulled where they lie (pull_packed), "
                             "unpacked first (cases named .../unpack), or both")
    def config_default(key: str) -> str:
        return "on" if DEFAULTS[key] else "off"

    parser.add_argument("--defer-selective", choices=("on", "off", "both"),
                        default=config_default("defer_selective_arrays"),
                        help="automatic runs make the selective arrays at the first sparse "
                             "iteration (defer_selective_arrays), at set-up "
                             "(cases .../auto/at-setup), or both")
    parser.add_argument("--selective-when-pays", choices=("on", "off", "both"),
                        default=config_default("selective_when_pays"),
                        help="automatic runs that defer the selective arrays make them once "
                             "that pays (selective_when_pays), at the first "
                             "sparse iteration (cases .../auto/first-sparse), or both")
    parser.add_argument("--calibrate", choices=("on", "off", "both"),
                        default=config_default("calibrate_transfer_rates"),
                        help="automatic runs measure the transfer rates at set-up "
                             "(calibrate_transfer_rates), start from config's "
                             "(cases .../auto/uncalibrated), or both")
    parser.add_argument("--execution", default=None, choices=("sync", "async"),
                        help="every run synchronous or asynchronous (default: each "
                             "program's own)")
    parser.add_argument("--subway", default=None, metavar="DIR",
                        help="a directory holding Subway's built bfs-sync, sssp-sync, cc-sync")
    parser.add_argument("--subway-trials", type=int, default=3)
    harness.add_common_options(parser, trials=3, warmup=1)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    subway = Path(args.subway) if args.subway else None
    switches = {"on": [True], "off": [False], "both": [True, False]}
    packings, pulls = switches[args.packed], switches[args.pull_packed]
    layouts = [(packed, pull) for packed in packings for pull in (pulls if packed else [True])]
    variants = {option: switches[getattr(args, option)] for option in VARIANTS}
    if subway is not None and not (subway / "bfs-sync").exists():
        parser.error(f"--subway {subway}: no built 'bfs-sync' there (run make in the checkout)")
    store_dir = Path(args.store_dir or tempfile.mkdtemp(prefix="garaphpy-streamed-"))
    spec = f"rmat:{args.scale}"
    directed = garaphpy.Graph.load(spec, store=store_dir / spec.replace(":", "_"),
                                   generator_options={"weighted": True}, progress=False)
    graph = directed.as_undirected()
    store = graph.store
    page_bytes = sum(page.nbytes for page in store.pages)
    top = int(np.argmax(np.diff(store.out_offsets)))
    source = int(graph.original_ids(np.array([top]))[0])
    bandwidth = pinned_bandwidth(args.bandwidth_mib)
    print(f"{spec} symmetric: {store.num_vertices:,} vertices, {store.num_edges:,} edges, "
          f"{len(store.pages)} pages, {page_bytes / 2**30:.2f} GiB of pages; pinned H2D "
          f"{bandwidth / 1e9:.1f} GB/s", flush=True)
    cases, groups, references = [], [], {}
    for program in args.programs.split(","):
        sources = [] if program in ("cc", "pagerank") else [source]
        options = {"mode": "gpu"}
        if args.execution is not None:
            options["execution"] = args.execution
        if sources:
            options["sources"] = sources
        if program == "pagerank":
            options.update(max_iterations=args.pagerank_iterations, tolerance=0.0)
        base = vertex_bytes(graph, program, sources)
        reference = references[program] = {}
        tolerance = None if program != "pagerank" else 1e-6     # PageRank's float sums
        verify = harness.same_as_first(reference, "the resident run", rtol=tolerance,
                                       atol=1e-12)
        names = [f"{program}/resident"]
        cases.append(harness.Case(
            names[0], lambda program=program, options=options: run(graph, program, options,
                                                                   "auto"),
            params={"graph": spec, "program": program, "budget": None, "choice": "auto"},
            verify=verify))
        for fraction in map(float, args.fractions.split(",")):
            budget = base + int(fraction * page_bytes)
            choices = ["copy"] if program == "pagerank" else args.choices.split(",")
            for packed, pull in layouts:
                for choice in choices:
                    for settings in variant_settings(variants, choice):
                        name = (f"{program}/{fraction:g}/{choice}"
                                + ("" if packed else "/stored") + ("" if pull else "/unpack")
                                + variant_suffix(settings))
                        names.append(name)
                        cases.append(harness.Case(
                            name, lambda program=program, options=options, budget=budget,
                            choice=choice, packed=packed, pull=pull, settings=settings:
                                run(graph, program, {**options, "gpu_memory": budget},
                                    choice, packed, pull, settings),
                            params={"graph": spec, "program": program, "fraction": fraction,
                                    "budget": budget, "choice": choice, "packed": packed,
                                    "pull_packed": pull, "settings": settings},
                            verify=verify))
        groups.append(names)
    rows = harness.run_cases("streamed", cases, args)
    by_name = {row["case"]: row for row in rows}
    print(f"\n== {spec} symmetric, GPU budget = vertex data + fraction x pages "
          f"({page_bytes / 2**30:.2f} GiB); median of {args.trials}")
    print(f"{'case':26s} {'ms':>9s} {'x resident':>10s} {'GB to GPU':>10s} {'iters':>6s}  "
          "transfers (page-iterations)  check")
    summary = []
    for names in groups:
        resident = by_name[names[0]]["median_s"]
        for name in names:
            row = by_name[name]
            last = row["metrics"][-1]
            ok = row["verification"]["status"] == harness.PASSED
            ratio = row["median_s"] / resident
            transfers = " ".join(f"{k}:{v}" for k, v in last["transfers"].items() if v)
            print(f"{name:26s} {row['median_s'] * 1e3:9.1f} {ratio:10.2f} "
                  f"{last['bytes_to_device'] / 1e9:10.2f} {last['iterations']:6d}  "
                  f"{transfers or '-'}  {'ok' if ok else 'FAILED'}")
            entry = {**row["params"], "median_s": row["median_s"], "x_resident": ratio,
                     "bytes_to_device": last["bytes_to_device"],
                     "iterations": last["iterations"], "transfers": last["transfers"]}
            if (row["params"]["program"] == "pagerank" and row["params"]["budget"]
                    and last["bytes_to_device"]):
                per_iteration = last["bytes_to_device"] / max(last["iterations"], 1)
                bound = per_iteration / bandwidth
                entry["bound_s_per_iteration"] = bound
                entry["x_bound"] = row["median_s"] / last["iterations"] / bound
                print(f"{'':26s} bound {bound * 1e3:.1f} ms/iteration, "
                      f"{entry['x_bound']:.2f} x bound")
            summary.append(entry)
    peers = run_subway_peers(subway, args, store, store_dir, spec, top, groups, by_name,
                             references) if subway is not None else {}
    harness.write_record(args.json, "streamed", "summary", {
        "graph": spec, "symmetric": True, "pinned_bandwidth": bandwidth,
        "page_bytes": page_bytes, "rows": summary, "subway": peers})
    failed = [program for program, peer in peers.items() if peer["check"] != "ok"]
    return harness.exit_status(rows) or (1 if failed else 0)


def run_subway_peers(subway: Path, args, store, store_dir: Path, spec: str, source: int,
                     groups: list, by_name: dict, references: dict) -> dict:
    """Subway's BFS, SSSP and CC on the graph (from ``source``, an internal id),
    each checked against garaphpy's resident run; printed beside garaphpy's
    automatic runs."""
    peers = {}
    for names in groups:
        program = by_name[names[0]]["params"]["program"]
        if program not in ("bfs", "sssp", "cc"):
            continue
        weighted = program == "sssp"
        graph_path = store_dir / f"{spec.replace(':', '_')}-sym.{'bwcsr' if weighted else 'bcsr'}"
        if not graph_path.exists():
            write_subway_graph(store, graph_path, weighted)
        output = store_dir / f"subway-{program}.txt"
        times = [run_subway(subway, program, graph_path, None if program == "cc" else source,
                            output) for _ in range(args.subway_trials)]
        problem = subway_matches(program, output, references[program]["result"].values)
        milliseconds = float(np.median(times))
        automatic = {name: by_name[name]["median_s"] * 1e3 for name in names
                     if name.endswith("/auto")}
        peers[program] = {"subway_ms": milliseconds, "trials_ms": times,
                          "check": problem or "ok", "garaphpy_auto_ms": automatic}
        ours = ", ".join(f"{name}: {ms:.1f}" for name, ms in automatic.items())
        print(f"subway/{program:20s} {milliseconds:9.1f} ms  (garaphpy {ours} ms)  "
              f"{problem or 'ok'}")
    return peers


if __name__ == "__main__":
    sys.exit(main())
