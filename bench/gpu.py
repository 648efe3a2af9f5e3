"""GPU benchmarks: cuSPARSE baseline, resident and streamed pages, replication (Garaph 3, 5.2).

Five measurements of garaphpy's GPU engine ("Performance"), all in
one process on one GPU, so that every ratio compares figures of the same run.
Graphs are generated and preprocessed before any timing (stores are kept in
``--store-dir`` and reused by later runs); the first iteration of every run is
not counted (it pays for module loading); medians are reported.

``bandwidth``
    Pinned host-to-device bandwidth: ``--bandwidth-mib`` MiB of pinned host
    memory (``cupy.cuda.alloc_pinned_memory``) copied to the device with
    ``cudaMemcpyAsync`` on a non-blocking stream, as the engine copies pages;
    CUDA events around each copy; the median of ``--bandwidth-repeat`` copies
    after a warm-up copy.
``cusparse``
    The baseline, PageRank as a CuPy user would write it: the transposed
    transition matrix M[v, u] = 1 / outdeg(u) for every edge u -> v as a
    ``cupyx.scipy.sparse.csr_matrix`` (float64; it is the store's CSC), and
    per iteration ``D = dangling . rank`` (cuBLAS dot) and
    ``rank = (1-d)/N + d * (M @ rank + D/N)`` (cuSPARSE SpMV and three
    element-wise kernels), d = 0.85, from rank = 1/N, ``--iterations``
    iterations without a host synchronisation between them.  Time: CUDA
    events around the whole loop divided by the iterations (per-iteration
    events are kept too); the median over ``--repeat`` loops after a warm-up
    loop.  Its scores are compared with garaphpy's (L1 difference).
``resident``
    garaphpy's GPU engine, PageRank on rmat:SCALE (the store as a user gets
    it: default layout, Equation 2), every page resident on the device (one
    pull launch over every shard per iteration, the engine's default),
    ``--n-streams`` streams, ``--iterations`` iterations with tolerance 0.
    Per-iteration time = ``IterationRecord.seconds`` (wall time of one
    iteration of the driver, host synchronisation included).  From the event
    timeline: the GPU span (from the start of ``iterate`` on the GPU to the
    end of the last page kernel; wall minus span is host overhead) and the
    kernel busy time (some page kernel running); the record's
    ``kernel_seconds`` sums the page kernels, which overlap across streams.
    Target: time per iteration <= 1.3 x the baseline's.
``streamed``
    The same run with the GPU budget (``gpu_memory``) set to the resident
    run's vertex data plus ``--n-streams`` page buffers (less than the
    vertex data plus every page), so every page is copied every iteration.
    Target: time per iteration <= 1.25 x page bytes / the bandwidth above.
    The overlap of copies and kernels, from the event timeline
    (:func:`timeline_summary`): the copy engine's busy time, the kernels'
    busy time, the time both ran at once (and its share of the kernel time:
    "hidden"), and each stream's busy time (its pages' transfers and
    kernels).  The engine's own sums (``copy_seconds``, ``stream_busy``) are
    kept in the JSON, but count each copy's wait behind other streams'
    copies as copy time.
``replication``
    Garaph Figures 8 and 9: PageRank on rmat:SCALE (and web-NotreDame when
    ``--notredame`` names an existing file) on stores cut with Equation 2's
    per-shard R_i and on stores with one fixed R for every shard (R in
    ``--replication``, each cut so that |V_i| * R fits the same shared
    memory).  These stores are cut into about ``--replication-pages`` (8)
    pages, and the engine runs them resident on ``--replication-streams`` (1)
    stream, one launch per page (``fuse_resident=False``), so that each
    page's kernel time is its own (no other page runs beside it) and their
    sum is the iteration's kernel time.  Garaph cut
    sk-2005 into 33 pages for a 15-SM GPU; an H100 has 132 SMs and rmat:22
    at R = 1 or 2 has only about 1,000 shards (one block each), so more
    pages would leave most SMs idle during each page and measure that
    instead.  Reported: kernel time per iteration, the spread of the
    per-page kernel times (each page's median over the iterations; min, p10,
    median, p90, max), the scores' L1 difference from Equation 2's run.
    Target: Equation 2 no slower than the best fixed R.  Every store runs
    ``--replication-rounds`` times (3), the stores in a rotated order each
    round, each run after 50 ms of GPU work; the figures are the medians
    over the rounds.  Each iteration of these runs is queued behind a kernel
    that holds the stream for ``--hold-queue-ms`` (:func:`hold_queue`), so
    that a page's event window is the GPU's time alone: on an idle stream the
    window opens before the host has finished launching the kernel, and on
    NotreDame (kernels of ~10 us) those launch gaps made whole runs of one
    store fast or slow by up to 2x.  The same store also runs without the
    hold (wall time, and the ``unheld kernel`` time as the launch gaps leave
    it), with its pages on ``--n-streams`` streams at once (the time some
    page kernel was running: on a small graph the one-stream figure mostly
    measures how many shards, one block each, a page offers the SMs), and as
    one launch over every shard, held (how the engine runs resident pages).

Every engine run is ``garaphpy.run(graph, "pagerank", mode="gpu", ...)``.
It returns the records but not the engine, whose plan (resident or
streamed, vertex bytes) and per-page and per-stream timings these
measurements read; :func:`engine_run` keeps the engine by substituting, for
the length of the call, a subclass of ``GpuEngine`` that remembers its
instance and keeps each iteration's page events (no hook in the library).

A configuration of bench/harness.py: the bandwidth copies and the cuSPARSE
loops are cases with a warm-up and trials (``--bandwidth-repeat`` copies,
``--trials`` loops, the older ``--repeat``), timed by CUDA events; the
resident, streamed and replication sections are one-trial cases whose
measurements (the engine's records, the held queue's CUDA events, the
replication rounds) stay inside them, verified by their result checks.

Output: tables on stdout, JSON rows (one per case and a ``summary`` row with
every section, appended to ``--json``, default
``bench/results/gpu-<gpu>-<date>.jsonl``) and, with matplotlib, a PNG of the
replication study (default beside the JSON).  Exit status 1 when a result
check fails (scores differ), 2 without a usable GPU.  ``--build-only``
builds or reuses the stores and prints their layout, without a GPU.

Usage (from the repository root)::

    python -m bench gpu [--scale 22] [--iterations 20]
        [--store-dir DIR] [--notredame PATH] [--only SECTIONS] [--build-only]
        [--build-option NAME=INTEGER ...] [--merge-lanes N] [--hold-queue-ms MS]

On an H100 (2026-11-24) the whole run, builds included, took about 105 s.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import garaphpy
from garaphpy import config
from garaphpy.kernels import gpu as gpu_kernels
from garaphpy.storage import layout
from garaphpy.scheduler.gpu_engine import busy_time

from bench._host import (
    free_gpu_memory, gpu_problem, host_info, log, median)
from bench import harness

REPO = Path(__file__).resolve().parents[1]


SECTIONS = ("bandwidth", "cusparse", "resident", "streamed", "replication")

#: Targets of the issue ("GPU engine ... Performance").
TARGET_RESIDENT_OVER_CUSPARSE = 1.3
TARGET_STREAMED_OVER_COPY = 1.25

#: PageRank damping of the baseline; must equal the engine program's.
DAMPING = 0.85

#: Largest L1 difference between two PageRank score vectors (they sum to 1)
#: that counts as the same result: float64 sums in another order.
L1_SAME = 1e-9

DEFAULT_NOTREDAME = REPO.parent / "shared" / "data" / "web-NotreDame.txt.gz"
DEFAULT_STORE_DIR = Path(os.environ.get("GARAPHPY_CACHE")
                         or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                         / "garaphpy") / "bench-gpu"


# ------------------------------------------------------------------ helpers --
def spread(values) -> dict:
    """min, p10, median, p90, max of a non-empty sequence."""
    values = np.asarray(list(values), np.float64)
    if values.size == 0:
        return {k: float("nan") for k in ("min", "p10", "median", "p90", "max")}
    p10, p50, p90 = np.percentile(values, [10, 50, 90])
    return {"min": float(values.min()), "p10": float(p10), "median": float(p50),
            "p90": float(p90), "max": float(values.max())}


def l1(a, b) -> float:
    """sum |a - b| of two score vectors."""
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).sum())


def slug(text: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3' (for file names)."""
    text = re.sub(r"\bnvidia\b", "", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "gpu"


def machine() -> dict:
    """What ran the benchmark (GPU fields only when a GPU is usable)."""
    info = host_info()
    if gpu_problem() is None:
        import cupy

        device = cupy.cuda.Device()
        properties = cupy.cuda.runtime.getDeviceProperties(device.id)
        name = properties["name"]
        info.update({
            "gpu": name.decode() if isinstance(name, bytes) else str(name),
            "compute_capability": f"{properties['major']}.{properties['minor']}",
            "multiprocessors": int(properties["multiProcessorCount"]),
            "gpu_memory_bytes": int(properties["totalGlobalMem"]),
            "shared_memory_per_block_optin": int(properties.get(
                "sharedMemPerBlockOptin", properties["sharedMemPerBlock"])),
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
            "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
            "cupy": cupy.__version__})
    return info


# ------------------------------------------------------------------- stores --
def load(graph: str, store: Path, **options) -> "garaphpy.Graph":
    """Generate/read and preprocess a graph into ``store`` (or reuse it), untimed."""
    started = time.perf_counter()
    loaded = garaphpy.Graph.load(graph, store=store, progress=False, **options)
    how = "reused" if loaded.store.reused else "built"
    log(f"  {graph} -> {store.name}: {how}, {loaded.num_vertices:,} vertices, "
        f"{loaded.num_edges:,} edges, {len(loaded.store.pages)} pages, "
        f"{loaded.store.shards.size:,} shards ({time.perf_counter() - started:.1f} s)")
    return loaded


def layout_summary(graph) -> dict:
    """Pages, shards and replication factors of a store."""
    shards = graph.store.shards
    replication = shards["replication"].astype(np.float64)
    edges = (shards["edge_end"] - shards["edge_begin"]).astype(np.float64)
    pages = graph.store.pages
    return {"num_pages": len(pages), "num_shards": int(shards.size),
            "page_bytes": int(sum(p.nbytes for p in pages)),
            "largest_page_bytes": int(max(p.nbytes for p in pages)),
            "split_shards": int((shards["split"] == 1).sum()),
            "mean_replication": float(replication.mean()),
            "edge_weighted_replication": float((replication * edges).sum() / max(edges.sum(), 1)),
            "replication_counts": {str(int(r)): int(c) for r, c in
                                   zip(*np.unique(shards["replication"], return_counts=True))},
            "fixed_replication": graph.store.manifest["layout"].get("fixed_replication")}


def replication_page_bytes(graph, pages: int) -> int:
    """A page size that cuts ``graph``'s store into about ``pages`` pages (at
    least one largest shard per page)."""
    store = graph.store
    sizing = layout.PageSizing(store.vertex_dtype.itemsize,
                               store.weight_dtype.itemsize if store.weighted else 0, 0)
    max_edges = store.manifest["layout"]["max_shard_edges"]
    smallest = layout.page_array_offsets(max_edges, sizing)["nbytes"] \
        + 3 * layout.PAGE_ARRAY_ALIGNMENT
    total = sum(p.nbytes for p in store.pages)
    return layout.align(max(math.ceil(total / pages), smallest), 4096)


def graphs_to_study(args) -> list:
    """(label, graph spec or path, store stem) of the replication study."""
    graphs = [(f"rmat:{args.scale}", f"rmat:{args.scale}", f"rmat{args.scale}")]
    if args.notredame and args.notredame.lower() != "none":
        path = Path(args.notredame)
        if path.exists():
            graphs.append(("web-NotreDame", str(path.resolve()), "web-NotreDame"))
        else:
            log(f"replication: {path} does not exist; web-NotreDame left out")
    return graphs


def build_stores(args, only) -> dict:
    """Every store the sections need: {"default": Graph, "replication": {label: {R: Graph}}}."""
    store_dir = Path(args.store_dir)
    store_dir.mkdir(parents=True, exist_ok=True)
    stores = {"default": None, "replication": {}}
    extra = dict(args.build_option)
    # stores of other layout options get other directories (not rebuilt in turn)
    tag = "".join(f"-{k}{v}" for k, v in sorted(extra.items()))
    log(f"stores in {store_dir}" + (f", layout options {extra}" if extra else ""))
    if {"cusparse", "resident", "streamed"} & set(only) or "replication" in only:
        stores["default"] = load(f"rmat:{args.scale}",
                                 store_dir / f"rmat{args.scale}{tag}-default", **extra)
    if "replication" in only:
        for label, graph, stem in graphs_to_study(args):
            stem += tag
            default = stores["default"] if label.startswith("rmat:") else \
                load(graph, store_dir / f"{stem}-default", **extra)
            options = dict(extra)
            if args.replication_pages:
                options["max_page_bytes"] = replication_page_bytes(default, args.replication_pages)
            suffix = f"{args.replication_pages}p" if args.replication_pages else "default-pages"
            by_r = {}
            for fixed in [None] + args.replication:
                name = f"{stem}-{suffix}-" + ("eq2" if fixed is None else f"R{fixed}")
                if fixed is None and options == extra:
                    by_r[fixed] = default
                    continue
                by_r[fixed] = load(graph, store_dir / name, fixed_replication=fixed, **options)
            stores["replication"][label] = by_r
    return stores


# ---------------------------------------------------------------- 1. bandwidth --
def bandwidth_case(args, section: dict) -> harness.Case:
    """Pinned host-to-device copies of one buffer, CUDA-event timed: a warm-up
    copy, then ``--bandwidth-repeat`` trials; ``section`` gets the figures."""
    import cupy

    nbytes = args.bandwidth_mib << 20
    buffers = {}

    def setup():
        memory = cupy.cuda.alloc_pinned_memory(nbytes)
        host = np.frombuffer(memory, np.uint8, nbytes)
        host[:] = 1  # touch it
        buffers.update(memory=memory, host=host, device=cupy.empty(nbytes, np.uint8),
                       stream=cupy.cuda.Stream(non_blocking=True))
        return buffers

    def copy(buffers) -> harness.Measurement:
        stream = buffers["stream"]
        start = stream.record()
        cupy.cuda.runtime.memcpyAsync(buffers["device"].data.ptr, buffers["host"].ctypes.data,
                                      nbytes, cupy.cuda.runtime.memcpyHostToDevice, stream.ptr)
        end = stream.record()
        end.synchronize()
        return harness.Measurement(seconds=cupy.cuda.get_elapsed_time(start, end) / 1e3)

    def teardown(buffers):
        buffers.clear()
        free_gpu_memory()

    def summarize(row) -> dict:
        rates = [nbytes / s for s in row["trials_s"]]
        section.update(bytes=nbytes, seconds=row["trials_s"], bytes_per_second=median(rates),
                       max_bytes_per_second=max(rates))
        return dict(section)

    return harness.Case("bandwidth", copy, params={"bytes": nbytes}, setup=setup,
                        teardown=teardown, summarize=summarize, trials=args.bandwidth_repeat,
                        warmup=1)


def print_bandwidth(section: dict) -> None:
    print(f"\n== 1. pinned host-to-device bandwidth: {section['bytes'] >> 20} MiB, "
          f"{len(section['seconds'])} copies")
    print(f"median {section['bytes_per_second'] / 1e9:.2f} GB/s, best "
          f"{section['max_bytes_per_second'] / 1e9:.2f} GB/s")


# ------------------------------------------------------------ 2. cuSPARSE baseline --
def bench_cusparse(args, graph) -> dict:
    """PageRank by cuSPARSE SpMV over the transposed transition matrix."""
    import cupy
    import cupyx.scipy.sparse as sparse

    from garaphpy.programs import PageRank

    assert PageRank().constants["damping"] == DAMPING
    store = graph.store
    n, m = graph.num_vertices, graph.num_edges
    if m >= 2**31:
        raise SystemExit("cusparse: more than 2^31 edges do not fit int32 CSR indices")
    in_offsets, sources, _ = store.csc()
    out_degree = np.asarray(store.out_degree)
    # M[v, u] = 1 / outdeg(u) for every edge u -> v: rows = destinations, so
    # the CSR of M is the store's CSC
    data = 1.0 / out_degree[sources].astype(np.float64)
    matrix = sparse.csr_matrix(
        (cupy.asarray(data), cupy.asarray(sources.astype(np.int32)),
         cupy.asarray(in_offsets.astype(np.int32))), shape=(n, n))
    matrix.sum_duplicates()  # no duplicates (the store dropped them); sets the flag once
    # the device arrays, dropped at the end (the closures below keep them otherwise)
    device = {"matrix": matrix, "dangling": cupy.asarray((out_degree == 0).astype(np.float64))}
    del matrix
    teleport = (1.0 - DAMPING) / n
    del data, sources

    def pagerank(events):
        rank = cupy.full(n, 1.0 / n, dtype=cupy.float64)
        for start, end in events:
            start.record()
            # D = sum of rank over the vertices without out-edges
            dangling_mass = device["dangling"] @ rank
            # rank' = (1-d)/N + d * (M rank + D/N)
            rank = teleport + DAMPING * (device["matrix"] @ rank + dangling_mass / n)
            end.record()
        events[-1][1].synchronize()
        return rank

    final = {}

    def loop() -> harness.Measurement:
        """One loop of ``--iterations``; its time is the CUDA-event total per iteration."""
        events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(args.iterations)]
        started = time.perf_counter()
        final["rank"] = pagerank(events)
        wall = time.perf_counter() - started
        total = cupy.cuda.get_elapsed_time(events[0][0], events[-1][1]) / 1e3
        return harness.Measurement(seconds=total / args.iterations, metrics={
            "total_seconds": total, "wall_seconds": wall,
            "per_iteration": [cupy.cuda.get_elapsed_time(a, b) / 1e3 for a, b in events]})

    # the warm-up loop pays for the cuSPARSE handle, buffers, kernel loading
    (row,) = harness.run_cases("gpu", [harness.Case(
        "cusparse", loop, params={"graph": f"rmat:{args.scale}", "iterations": args.iterations},
        warmup=max(1, args.warmup))], args)
    loops = row["metrics"]
    values = cupy.asnumpy(final["rank"])
    device.clear()
    final.clear()
    free_gpu_memory()
    per_iteration = median(loop["total_seconds"] for loop in loops) / args.iterations
    return {"graph": f"rmat:{args.scale}", "num_vertices": n, "num_edges": m,
            "iterations": args.iterations, "loops": loops,
            "seconds_per_iteration": per_iteration,
            "total_seconds": median(loop["total_seconds"] for loop in loops),
            "wall_seconds": median(loop["wall_seconds"] for loop in loops),
            "median_event_iteration_seconds": median(
                s for loop in loops for s in loop["per_iteration"]),
            "_values": values}


def print_cusparse(section: dict) -> None:
    print(f"\n== 2. cuSPARSE baseline: PageRank on {section['graph']} "
          f"({section['num_vertices']:,} vertices, {section['num_edges']:,} edges), "
          f"{section['iterations']} iterations, median of {len(section['loops'])} loops")
    print(f"{section['iterations']} iterations in {section['total_seconds'] * 1e3:.2f} ms "
          f"(CUDA events; {section['wall_seconds'] * 1e3:.2f} ms wall): "
          f"{section['seconds_per_iteration'] * 1e3:.3f} ms/iteration")


# --------------------------------------------------------------- engine runs --
HOLD_QUEUE_SOURCE = r"""
extern "C" __global__ void hold_queue(unsigned long long nanoseconds) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < nanoseconds);
}
"""


@functools.cache
def _hold_kernel():
    import cupy

    return cupy.RawKernel(HOLD_QUEUE_SOURCE, "hold_queue")


def hold_queue(stream, seconds: float) -> None:
    """Keep ``stream`` busy on the GPU for ``seconds`` (one thread sleeping on
    the global timer), so that what the host queues behind it meanwhile runs
    back to back.  Event windows then time the GPU's work, not the gaps of a
    host launching kernels shorter than its launch overhead (the "blocking
    kernel" of GPU benchmark harnesses)."""
    with stream:
        _hold_kernel()((1,), (1,), (np.uint64(round(seconds * 1e9)),))


def engine_run(graph, iterations: int, *, gpu_memory: int | None = None,
               n_streams: int | None = None, fuse_resident: bool | None = None,
               hold_seconds: float = 0.0) -> dict:
    """PageRank through ``garaphpy.run(mode="gpu")``, keeping the engine it builds.

    ``garaphpy.run`` returns the records but not the engine, whose plan and
    per-page and per-stream timings these measurements need.  For the length
    of the call, ``gpu_engine.GpuEngine`` is replaced by a subclass that
    remembers its instance (``api.run`` imports the class when it runs), so
    what is measured is exactly the public path.  The subclass also keeps
    each iteration's page events as a timeline (:func:`timeline_of`): one
    event recorded on the engine's main stream as ``iterate`` starts, before
    anything of the iteration is queued, is the origin.  The engine is
    dropped (its device memory freed) before returning.

    With ``hold_seconds`` > 0, every iteration first queues
    :func:`hold_queue` on the main stream (before the origin), so that the
    iteration's kernels are all queued before the first one may start and
    their event windows are GPU time only; the wall times of such a run
    include the hold and mean nothing.  ``"queue_seconds"`` is how long the
    host took to queue each iteration (from the hold's launch to the
    iteration's wait); more than ``hold_seconds`` means the hold was too
    short for that iteration.
    """
    from garaphpy.api import NotConvergedWarning
    from garaphpy.scheduler import gpu_engine

    kept = []

    class KeptEngine(gpu_engine.GpuEngine):
        def __init__(self, *arguments, **options):
            if fuse_resident is not None:
                options["fuse_resident"] = fuse_resident
            super().__init__(*arguments, **options)
            self.bench_timelines = []
            self.bench_origin = None
            self.bench_queue_start = 0.0
            self.bench_queue_seconds = []
            kept.append(self)
            measure = self.launches.measure

            def timed(timings):
                if self.bench_origin is not None:
                    self.bench_timelines.append(timeline_of(self.cupy, self.bench_origin,
                                                            timings))
                return measure(timings)

            self.launches.measure = timed

        def iterate(self, record, prefix, aggregates):
            self.bench_queue_start = time.perf_counter()
            if hold_seconds > 0:
                hold_queue(self.main_stream, hold_seconds)
            self.bench_origin = self.main_stream.record()
            super().iterate(record, prefix, aggregates)

        def end_iteration(self, record, timings, aggregates, apply_split=True):
            self.bench_queue_seconds.append(time.perf_counter() - self.bench_queue_start)
            return super().end_iteration(record, timings, aggregates, apply_split)

    original = gpu_engine.GpuEngine
    gpu_engine.GpuEngine = KeptEngine
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotConvergedWarning)  # tolerance 0: all iterations
            result = garaphpy.run(graph, "pagerank", mode="gpu", max_iterations=iterations,
                                  tolerance=0.0, gpu_memory=gpu_memory, n_streams=n_streams)
    finally:
        gpu_engine.GpuEngine = original
    engine = kept.pop()
    plan = engine.plan
    run = {"records": result.iterations, "timings": list(engine.timings),
           "timelines": engine.bench_timelines, "values": result.values,
           "hold_seconds": hold_seconds, "queue_seconds": engine.bench_queue_seconds,
           "setup_seconds": result.setup_seconds,
           "describe": engine.describe(),
           "plan": {"resident": plan.resident, "n_streams": plan.n_streams,
                    "budget": plan.budget, "vertex_bytes": plan.vertex_bytes,
                    "page_bytes": plan.page_bytes},
           "shared_bytes": engine.shared_bytes, "oversize_shards": engine.oversize_shards,
           "gather_precomputed": engine.precompute}
    if len(result.iterations) != iterations:
        raise SystemExit(f"PageRank ran {len(result.iterations)} iterations, not {iterations} "
                         f"({result.stop_reason})")
    del engine, result
    free_gpu_memory()
    return run


def timeline_of(cupy, origin, timings) -> list:
    """Each page's (stream, copy start, copy end, kernel start, kernel end) in
    seconds since ``origin`` (None where the page was not copied)."""
    def since(event):
        return None if event is None else cupy.cuda.get_elapsed_time(origin, event) / 1e3
    return [(t.stream, since(t.copy_start), since(t.copy_end), since(t.kernel_start),
             since(t.kernel_end)) for t in timings]


def timeline_summary(timeline: list) -> dict:
    """What one iteration's timeline says about the overlap, in seconds.

    A copy's window (copy start to copy end on its stream) includes the wait
    for the copies of other streams ahead of it on the one host-to-device
    copy engine, so summing windows overstates copy time.  The union of the
    copy windows is the time some copy was queued or moving (the copy
    engine's busy time, since copies are queued back to back); the union of
    the kernel windows is the time some page kernel ran; their overlap is
    what the pipeline hid.  Each copy's own transfer is taken as its end
    minus the later of its start and the previous copy's end (copies leave
    the copy engine in order).
    """
    copies = [(c0, c1) for _, c0, c1, _, _ in timeline if c0 is not None]
    kernels = [(k0, k1) for _, _, _, k0, k1 in timeline]
    copy_busy = busy_time(copies)
    kernel_busy = busy_time(kernels)
    both = copy_busy + kernel_busy - busy_time(copies + kernels)
    transfer = {}
    previous_end = -math.inf
    for index, (c0, c1) in sorted(enumerate(copies), key=lambda item: item[1][1]):
        transfer[index] = c1 - max(c0, previous_end)
        previous_end = c1
    streams = {}
    copied = 0
    for stream, c0, _, k0, k1 in timeline:
        busy = k1 - k0
        if c0 is not None:
            busy += transfer[copied]
            copied += 1
        streams[stream] = streams.get(stream, 0.0) + busy
    return {"gpu_span": max((k1 for *_, k1 in timeline), default=0.0),
            "first_page_start": min((c0 if c0 is not None else k0)
                                    for _, c0, _, k0, _ in timeline) if timeline else 0.0,
            "copy_busy": copy_busy, "kernel_busy": kernel_busy, "copy_kernel_overlap": both,
            "stream_busy": [streams[s] for s in sorted(streams)]}


def run_summary(run: dict) -> dict:
    """Medians over the iterations after the first (JSON-able)."""
    records = run["records"][1:]
    timings = run["timings"][1:]
    streams = len(timings[0].stream_busy) if timings else 0
    lines = [timeline_summary(t) for t in run["timelines"][1:]]
    timeline = {key: median(line[key] for line in lines)
                for key in ("gpu_span", "first_page_start", "copy_busy", "kernel_busy",
                            "copy_kernel_overlap")} if lines else {}
    if lines:
        timeline["stream_busy"] = [median(line["stream_busy"][s] for line in lines)
                                   for s in range(len(lines[0]["stream_busy"]))]
        timeline["last_iteration"] = run["timelines"][-1]
    return {
        "timeline": timeline,
        "iterations": len(run["records"]),
        "seconds_per_iteration": median(r.seconds for r in records),
        "kernel_seconds_per_iteration": median(r.kernel_seconds for r in records),
        "copy_seconds_per_iteration": median(r.copy_seconds for r in records),
        "bytes_to_device_per_iteration": median(r.bytes_to_device for r in records),
        "stream_busy_seconds": [median(t.stream_busy[s] for t in timings)
                                for s in range(streams)],
        "per_page_kernel_seconds": [median(t.per_page_kernel[p] for t in timings)
                                    for p in range(len(timings[0].per_page_kernel))]
        if timings else [],
        "seconds": [r.seconds for r in run["records"]],
        "kernel_seconds": [r.kernel_seconds for r in run["records"]],
        "copy_seconds": [r.copy_seconds for r in run["records"]],
        "setup_seconds": run["setup_seconds"], "plan": run["plan"],
        "hold_seconds": run["hold_seconds"],
        "max_queue_seconds": max(run["queue_seconds"][1:], default=0.0),
        "describe": run["describe"], "shared_bytes": run["shared_bytes"],
        "oversize_shards": run["oversize_shards"],
        "gather_precomputed": run["gather_precomputed"],
    }


# ----------------------------------------------------------------- 3. resident --
def bench_resident(args, graph, baseline: dict | None, failures: list) -> dict:
    """Every page on the device; against cuSPARSE."""
    log(f"resident: PageRank on rmat:{args.scale}, {args.iterations} iterations")
    run = engine_run(graph, args.iterations, n_streams=args.n_streams)
    section = {"graph": f"rmat:{args.scale}", "layout": layout_summary(graph),
               **run_summary(run)}
    if not run["plan"]["resident"]:
        failures.append("resident: the engine streamed the pages (GPU budget too small?)")
    if baseline is not None:
        section["over_cusparse"] = (section["seconds_per_iteration"]
                                    / baseline["seconds_per_iteration"])
        section["kernel_over_cusparse"] = (section["kernel_seconds_per_iteration"]
                                           / baseline["seconds_per_iteration"])
        section["l1_vs_cusparse"] = l1(run["values"], baseline["_values"])
        if section["l1_vs_cusparse"] > L1_SAME:
            failures.append(f"resident: scores differ from cuSPARSE's by "
                            f"{section['l1_vs_cusparse']:.3g} (L1)")
    section["_values"] = run["values"]
    return section


def print_resident(section: dict, baseline: dict | None) -> None:
    lay = section["layout"]
    print(f"\n== 3. resident pages: PageRank on {section['graph']}, {section['iterations']} "
          f"iterations, median of the iterations after the first")
    print(f"   {section['describe']}")
    print(f"   {lay['num_pages']} pages ({lay['page_bytes'] / 2**20:.0f} MiB), "
          f"{lay['num_shards']:,} shards, mean R_i {lay['mean_replication']:.2f}")
    print(f"{'run':22} {'ms/iter':>9} {'GPU span':>9} {'kernel busy':>12} {'kernels summed':>15} "
          f"{'/cuSPARSE':>10} {'L1 vs cuSPARSE':>15}")
    if baseline is not None:
        print(f"{'cuSPARSE':22} {baseline['seconds_per_iteration'] * 1e3:>9.3f} "
              f"{baseline['seconds_per_iteration'] * 1e3:>9.3f} {'':>12} {'':>15} "
              f"{1.0:>10.2f} {'':>15}")
    ratio = section.get("over_cusparse")
    line = section.get("timeline", {})
    print(f"{'garaphpy.run, gpu':22} {section['seconds_per_iteration'] * 1e3:>9.3f} "
          f"{line.get('gpu_span', float('nan')) * 1e3:>9.3f} "
          f"{line.get('kernel_busy', float('nan')) * 1e3:>12.3f} "
          f"{section['kernel_seconds_per_iteration'] * 1e3:>15.3f} "
          f"{ratio if ratio is not None else float('nan'):>10.2f} "
          f"{section.get('l1_vs_cusparse', float('nan')):>15.3g}")
    print("   (ms; GPU span: from the start of iterate on the GPU to the last page kernel's "
          "end; kernel busy: time some page kernel ran; kernels summed: the record's "
          "kernel_seconds, pages on different streams counted separately)")
    if ratio is not None:
        print(f"target <= {TARGET_RESIDENT_OVER_CUSPARSE} x cuSPARSE: {ratio:.2f} "
              f"({'met' if ratio <= TARGET_RESIDENT_OVER_CUSPARSE else 'NOT met'})")


# ----------------------------------------------------------------- 4. streamed --
def bench_streamed(args, graph, bandwidth: dict | None, resident: dict | None,
                   failures: list) -> dict:
    """A GPU budget below the vertex data plus every page: pages copied each iteration."""
    pages = graph.store.pages
    total = sum(p.nbytes for p in pages)
    largest = max(p.nbytes for p in pages)
    if len(pages) < 2:
        log(f"streamed: rmat:{args.scale} has one page; nothing to stream")
        return {"graph": f"rmat:{args.scale}", "skipped": "one page, nothing to stream"}
    if args.streamed_budget_mib:
        budget = args.streamed_budget_mib << 20
    else:
        if resident is not None:
            vertex_bytes = resident["plan"]["vertex_bytes"]
        else:
            log("streamed: a resident engine first, for the vertex data's size")
            vertex_bytes = engine_run(graph, 1, n_streams=args.n_streams)["plan"]["vertex_bytes"]
        # room for n_streams page buffers, short of every page
        budget = vertex_bytes + args.n_streams * largest + (8 << 20)
        if budget >= vertex_bytes + total:
            log(f"streamed: {len(pages)} pages are too few to stream on {args.n_streams} "
                "streams; fewer streams will be used")
            budget = vertex_bytes + total - 1
    log(f"streamed: PageRank on rmat:{args.scale}, budget {budget / 2**20:.0f} MiB, "
        f"{args.n_streams} streams")
    run = engine_run(graph, args.iterations, gpu_memory=budget, n_streams=args.n_streams)
    section = {"graph": f"rmat:{args.scale}", "budget": budget, "page_bytes": total,
               "num_pages": len(pages), "largest_page_bytes": largest, **run_summary(run)}
    if run["plan"]["resident"]:
        failures.append("streamed: the engine kept the pages resident (budget too large)")
    if resident is not None:
        section["l1_vs_resident"] = l1(run["values"], resident["_values"])
        if section["l1_vs_resident"] > L1_SAME:
            failures.append(f"streamed: scores differ from the resident run's by "
                            f"{section['l1_vs_resident']:.3g} (L1)")
    if bandwidth is not None:
        copy_bound = section["bytes_to_device_per_iteration"] / bandwidth["bytes_per_second"]
        section["copy_bound_seconds"] = copy_bound
        section["over_copy_bound"] = section["seconds_per_iteration"] / copy_bound
    return section


def print_streamed(section: dict) -> None:
    if "skipped" in section:
        print(f"\n== 4. streamed pages: skipped ({section['skipped']})")
        return
    print(f"\n== 4. streamed pages: PageRank on {section['graph']}, budget "
          f"{section['budget'] / 2**20:.0f} MiB, {section['num_pages']} pages "
          f"({section['page_bytes'] / 2**20:.0f} MiB, largest "
          f"{section['largest_page_bytes'] / 2**20:.1f} MiB), median of the iterations "
          f"after the first")
    print(f"   {section['describe']}")
    line = section.get("timeline", {})
    nan = float("nan")
    bound = section.get("copy_bound_seconds", nan)
    ratio = section.get("over_copy_bound", nan)
    print(f"{'ms/iter':>9} {'copy bound':>11} {'/bound':>7} {'GPU span':>9} {'copy busy':>10} "
          f"{'kernel busy':>12} {'overlap':>8} {'hidden':>7}  stream busy ms")
    busy = " ".join(f"{s * 1e3:.2f}" for s in line.get("stream_busy", []))
    hidden = line.get("copy_kernel_overlap", nan) / line.get("kernel_busy", nan) \
        if line.get("kernel_busy") else nan
    print(f"{section['seconds_per_iteration'] * 1e3:>9.3f} {bound * 1e3:>11.3f} {ratio:>7.2f} "
          f"{line.get('gpu_span', nan) * 1e3:>9.3f} {line.get('copy_busy', nan) * 1e3:>10.3f} "
          f"{line.get('kernel_busy', nan) * 1e3:>12.3f} "
          f"{line.get('copy_kernel_overlap', nan) * 1e3:>8.3f} {hidden:>7.0%}  {busy}")
    print("   (ms; copy busy: time some copy was queued or moving on the copy engine; kernel "
          "busy: time some page kernel ran; overlap: both at once; hidden: overlap / kernel "
          "busy; stream busy: its pages' transfers and kernels.  Summed event windows, "
          f"which count queueing behind other streams' copies: copies "
          f"{section['copy_seconds_per_iteration'] * 1e3:.3f}, kernels "
          f"{section['kernel_seconds_per_iteration'] * 1e3:.3f})")
    if "l1_vs_resident" in section:
        print(f"L1 difference from the resident run: {section['l1_vs_resident']:.3g}")
    if "over_copy_bound" in section:
        print(f"target <= {TARGET_STREAMED_OVER_COPY} x page bytes / H2D bandwidth: "
              f"{ratio:.2f} ({'met' if ratio <= TARGET_STREAMED_OVER_COPY else 'NOT met'})")


# -------------------------------------------------------------- 5. replication --
def warm_up_gpu(seconds: float = 0.05) -> None:
    """Keep the GPU busy for about ``seconds`` before a run of tiny kernels, so
    that no run starts at idle clocks (a small graph's iteration is ~0.1 ms of
    kernels)."""
    import cupy

    a = cupy.ones((2048, 2048), cupy.float32)
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        a = a @ a * 1e-3
        cupy.cuda.get_current_stream().synchronize()


def bench_replication(args, stores: dict, failures: list) -> list:
    """Equation 2 against fixed R on each studied graph (Garaph Figures 8 and 9).

    Every store runs ``--replication-rounds`` times, the stores in a rotated
    order each round, each run after a GPU warm-up; a store's figures are the
    medians over its rounds.  The kernel times come from runs whose
    iterations are queued behind :func:`hold_queue` (``--hold-queue-ms``);
    the wall times, and the kernel times as the host's launches leave them,
    from a run of the same store without the hold."""
    hold = args.hold_queue_ms / 1e3
    # every store runs these ways each round, in this order
    variants = {"per_page": {"n_streams": args.replication_streams, "fuse_resident": False,
                             "hold_seconds": hold}}
    if hold > 0:  # wall times, and kernel times as the host's launch gaps leave them
        variants["unheld"] = {"n_streams": args.replication_streams, "fuse_resident": False}
    if args.n_streams != args.replication_streams:
        # the pages on n_streams streams at once: the kernel time when small pages do
        # not leave SMs idle
        variants["concurrent"] = {"n_streams": args.n_streams, "fuse_resident": False,
                                  "hold_seconds": hold}
    # as the engine runs resident pages by default: one launch over every shard
    variants["one_launch"] = {"n_streams": args.replication_streams, "fuse_resident": True,
                              "hold_seconds": hold}
    cases = []
    for label, by_r in stores.items():
        order = list(by_r.items())
        runs = {variant: {fixed: [] for fixed in by_r}
                for variant in ("per_page", "unheld", "concurrent", "one_launch")}
        values = {}
        for round_ in range(args.replication_rounds):
            shift = round_ % len(order)
            for fixed, graph in order[shift:] + order[:shift]:
                name = "Eq.2" if fixed is None else f"R={fixed}"
                log(f"replication: {label}, {name}, round {round_ + 1}, "
                    f"{args.iterations} iterations")
                for variant, options in variants.items():
                    warm_up_gpu()
                    run = engine_run(graph, args.iterations, **options)
                    summary = run_summary(run)
                    runs[variant][fixed].append(summary)
                    values.setdefault(fixed, run["values"])
                    if options.get("hold_seconds") and summary["max_queue_seconds"] > hold:
                        failures.append(
                            f"replication: {label} {name} ({variant}): the host took "
                            f"{summary['max_queue_seconds'] * 1e3:.2f} ms to queue an "
                            f"iteration, more than --hold-queue-ms {args.hold_queue_ms}: kernel "
                            f"times include launch gaps")
        rounds, unheld_rounds, concurrent_rounds, one_launch_rounds = runs.values()
        rows = []
        reference = values[None]
        for fixed, graph in order:
            name = "Eq.2" if fixed is None else f"R={fixed}"
            kernel_times = [r["kernel_seconds_per_iteration"] for r in rounds[fixed]]
            summary = sorted(rounds[fixed], key=lambda r: r["kernel_seconds_per_iteration"])[
                len(kernel_times) // 2]  # the median round's per-page times
            row = {"replication": name, "fixed_replication": fixed,
                   "streams": args.replication_streams,
                   "layout": layout_summary(graph),
                   "rounds_kernel_seconds_per_iteration": kernel_times,
                   "kernel_seconds_per_iteration": median(kernel_times),
                   "hold_queue_seconds": hold,
                   "max_queue_seconds": max(r["max_queue_seconds"] for r in rounds[fixed]),
                   "seconds_per_iteration": median(
                       r["seconds_per_iteration"]
                       for r in (unheld_rounds[fixed] or rounds[fixed])),
                   "per_page_kernel_seconds": summary["per_page_kernel_seconds"],
                   "page_spread_seconds": spread(summary["per_page_kernel_seconds"]),
                   "resident": summary["plan"]["resident"],
                   "shared_bytes": summary["shared_bytes"],
                   "oversize_shards": summary["oversize_shards"]}
            spread_ = row["page_spread_seconds"]
            row["page_max_over_min"] = spread_["max"] / spread_["min"] if spread_["min"] else \
                float("nan")
            if unheld_rounds[fixed]:
                unheld = [r["kernel_seconds_per_iteration"] for r in unheld_rounds[fixed]]
                row["unheld_rounds_kernel_seconds_per_iteration"] = unheld
                row["unheld_kernel_seconds_per_iteration"] = median(unheld)
            one_launch = [r["kernel_seconds_per_iteration"] for r in one_launch_rounds[fixed]]
            row["one_launch_rounds_kernel_seconds_per_iteration"] = one_launch
            row["one_launch_kernel_seconds_per_iteration"] = median(one_launch)
            if concurrent_rounds[fixed]:
                row["concurrent_streams"] = args.n_streams
                row["concurrent_kernel_busy_seconds"] = median(
                    r["timeline"].get("kernel_busy", float("nan"))
                    for r in concurrent_rounds[fixed])
                row["concurrent_seconds_per_iteration"] = median(
                    r["seconds_per_iteration"] for r in concurrent_rounds[fixed])
            if fixed is not None:
                row["l1_vs_eq2"] = l1(values[fixed], reference)
                if row["l1_vs_eq2"] > L1_SAME:
                    failures.append(f"replication: {label} {name} scores differ from "
                                    f"Equation 2's by {row['l1_vs_eq2']:.3g} (L1)")
            if not row["resident"]:
                failures.append(f"replication: {label} {name} was streamed, not resident")
            rows.append(row)
        fixed_rows = [r for r in rows if r["fixed_replication"] is not None]
        eq2 = rows[0]
        case = {"graph": label, "rows": rows}
        for suffix, key in (("", "kernel_seconds_per_iteration"),
                            ("_concurrent", "concurrent_kernel_busy_seconds"),
                            ("_one_launch", "one_launch_kernel_seconds_per_iteration")):
            if fixed_rows and key in eq2:
                best = min(fixed_rows, key=lambda r: r[key])
                case[f"best_fixed{suffix}"] = best["replication"]
                case[f"eq2_over_best_fixed{suffix}"] = eq2[key] / best[key]
        cases.append(case)
    return cases


def print_replication(cases: list, args) -> None:
    pages = f"~{args.replication_pages} pages" if args.replication_pages else "default pages"
    print(f"\n== 5. replication (Garaph Fig. 8/9): PageRank, {args.iterations} iterations, "
          f"resident, {args.replication_streams} stream(s), {pages}; kernel times are CUDA "
          f"events, medians over the iterations after the first"
          + (f", each iteration queued behind a {args.hold_queue_ms} ms hold (wall times and "
             f"'unheld kernel': runs without it)" if args.hold_queue_ms > 0 else ""))
    for case in cases:
        print(f"-- {case['graph']}")
        concurrent = "concurrent_kernel_busy_seconds" in case["rows"][0]
        unheld = "unheld_kernel_seconds_per_iteration" in case["rows"][0]
        streams = case["rows"][0].get("concurrent_streams", "")
        print(f"{'R':6} {'mean R':>7} {'pages':>5} {'shards':>7} {'kernel ms/iter':>15} "
              + (f"{'unheld kernel':>14} " if unheld else "")
              + f"{'wall ms/iter':>13} {'page ms: min':>13} {'p10':>7} {'median':>7} {'p90':>7} "
              f"{'max':>7} {'max/min':>8} {'L1 vs Eq.2':>11}"
              + (f" {f'{streams} streams: kernel':>20} {'wall':>7}" if concurrent else "")
              + f" {'one launch: kernel':>19}")
        for row in case["rows"]:
            s = {k: v * 1e3 for k, v in row["page_spread_seconds"].items()}
            lay = row["layout"]
            print(f"{row['replication']:6} {lay['mean_replication']:>7.2f} "
                  f"{lay['num_pages']:>5} {lay['num_shards']:>7,} "
                  f"{row['kernel_seconds_per_iteration'] * 1e3:>15.3f} "
                  + (f"{row['unheld_kernel_seconds_per_iteration'] * 1e3:>14.3f} "
                     if unheld else "")
                  + f"{row['seconds_per_iteration'] * 1e3:>13.3f} {s['min']:>13.3f} "
                  f"{s['p10']:>7.3f} {s['median']:>7.3f} {s['p90']:>7.3f} {s['max']:>7.3f} "
                  f"{row['page_max_over_min']:>8.1f} "
                  f"{format(row['l1_vs_eq2'], '.3g') if 'l1_vs_eq2' in row else '-':>11}"
                  + (f" {row['concurrent_kernel_busy_seconds'] * 1e3:>20.3f} "
                     f"{row['concurrent_seconds_per_iteration'] * 1e3:>7.3f}"
                     if concurrent else "")
                  + f" {row['one_launch_kernel_seconds_per_iteration'] * 1e3:>19.3f}")
        if "eq2_over_best_fixed" in case:
            ratio = case["eq2_over_best_fixed"]
            print(f"target Eq.2 kernel time <= best fixed ({case['best_fixed']}): {ratio:.3f} "
                  f"({'met' if ratio <= 1.0 else 'NOT met'})")
        if "eq2_over_best_fixed_concurrent" in case:
            ratio = case["eq2_over_best_fixed_concurrent"]
            print(f"  the same with the pages on {streams} streams (kernel busy time): Eq.2 / "
                  f"best fixed ({case['best_fixed_concurrent']}) = {ratio:.3f}")
        if "eq2_over_best_fixed_one_launch" in case:
            ratio = case["eq2_over_best_fixed_one_launch"]
            print(f"  the same as one launch over every shard (the engine's default): Eq.2 / "
                  f"best fixed ({case['best_fixed_one_launch']}) = {ratio:.3f}")


def args_streams(rows: list) -> int:
    """Streams of the per-page (first) replication runs."""
    return rows[0].get("streams", 1)


def plot_replication(cases: list, path: Path, title: str) -> None:
    """Per graph: per-page kernel time for each R (Fig. 8), kernel time per R (Fig. 9)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no plot")
        return
    figure, axes = plt.subplots(len(cases), 2, figsize=(13, 4.3 * len(cases)), squeeze=False,
                                gridspec_kw={"width_ratios": [2.2, 1]})
    colours = plt.get_cmap("viridis")
    for (left, right), case in zip(axes, cases):
        rows = case["rows"]
        fixed = [r for r in rows if r["fixed_replication"] is not None]
        for i, row in enumerate(fixed):
            ms = np.asarray(row["per_page_kernel_seconds"]) * 1e3
            left.plot(np.arange(ms.size), ms, marker=".", lw=0.9,
                      color=colours(i / max(len(fixed) - 1, 1)), label=row["replication"])
        eq2 = rows[0]
        ms = np.asarray(eq2["per_page_kernel_seconds"]) * 1e3
        left.plot(np.arange(ms.size), ms, marker="o", lw=2.0, color="tab:red",
                  label=f"Eq.2 (mean R {eq2['layout']['mean_replication']:.1f})")
        left.set_yscale("log")
        left.set_xlabel("page")
        left.set_ylabel("kernel ms (median over iterations)")
        left.set_title(f"{case['graph']}: per-page kernel time", fontsize=10)
        left.grid(True, which="both", alpha=0.3)
        left.legend(fontsize=8, ncol=2)
        labels = [r["replication"] for r in fixed] + ["Eq.2"]
        values = [r["kernel_seconds_per_iteration"] * 1e3 for r in fixed] + \
            [eq2["kernel_seconds_per_iteration"] * 1e3]
        right.bar(labels, values, color=["tab:gray"] * len(fixed) + ["tab:red"],
                  label=f"{args_streams(rows)} stream: kernels summed")
        if "concurrent_kernel_busy_seconds" in eq2:
            right.plot(labels, [r["concurrent_kernel_busy_seconds"] * 1e3 for r in fixed + [eq2]],
                       "D", color="black",
                       label=f"{eq2['concurrent_streams']} streams: kernel busy")
        right.legend(fontsize=8)
        right.set_ylabel("kernel ms per iteration")
        right.set_title(f"{case['graph']}: kernel time per iteration", fontsize=10)
        right.grid(True, axis="y", alpha=0.3)
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    log(f"wrote {path}")


# --------------------------------------------------------------------- main --
def power_of_two_list(text: str) -> list:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 or v & (v - 1) or v > config.MAX_REPLICATION for v in values):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected powers of two in 1..{config.MAX_REPLICATION}, comma-separated")
    return values


def build_option(text: str) -> tuple:
    """NAME=VALUE, a layout option of BuildOptions (for study)."""
    from garaphpy.storage import layout
    from garaphpy.storage.builder import BuildOptions

    name, _, value = text.partition("=")
    integers = ("slot_bytes", "shared_memory_bytes", "max_shard_edges", "max_shard_vertices",
                "max_replication", "max_page_bytes", "replication_edges_per_thread")
    if name == "replication_rule" and value in layout.REPLICATION_RULES:
        return name, value
    if name not in integers or not value.strip().isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected NAME=INTEGER with NAME one of {', '.join(integers)}, or "
            f"replication_rule={'|'.join(layout.REPLICATION_RULES)}")
    assert name in BuildOptions.__dataclass_fields__
    return name, int(value)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=22, help="RMAT scale (default 22)")
    parser.add_argument("--iterations", type=int, default=20,
                        help="PageRank iterations of every run (default 20)")
    parser.add_argument("--n-streams", type=int, default=config.N_STREAMS,
                        help=f"streams of the resident and streamed runs (default "
                             f"{config.N_STREAMS})")
    parser.add_argument("--store-dir", default=str(DEFAULT_STORE_DIR),
                        help=f"where the stores are built and reused (default {DEFAULT_STORE_DIR})")
    parser.add_argument("--notredame", default=str(DEFAULT_NOTREDAME),
                        help="web-NotreDame edge list for the replication study; used only if "
                             "the file exists; 'none' to leave it out (default %(default)s)")
    parser.add_argument("--replication", type=power_of_two_list, default=[1, 2, 4, 8, 16, 32],
                        help="fixed replication factors to compare (default 1,2,4,8,16,32)")
    parser.add_argument("--replication-pages", type=int, default=8,
                        help="cut the replication stores into about this many pages "
                             "(default 8; 0: the default page size)")
    parser.add_argument("--replication-rounds", type=int, default=3,
                        help="runs of every replication store, in rotated order; medians "
                             "are reported (default 3)")
    parser.add_argument("--replication-streams", type=int, default=1,
                        help="streams of the replication runs (default 1: per-page kernel "
                             "times undisturbed)")
    parser.add_argument("--hold-queue-ms", type=float, default=5.0,
                        help="queue each replication iteration behind a kernel holding the "
                             "stream this long, so that kernel times exclude the host's "
                             "launch gaps; 0: no hold (default 5.0)")
    parser.add_argument("--bandwidth-mib", type=int, default=256,
                        help="pinned buffer copied for the bandwidth (default 256 MiB)")
    parser.add_argument("--bandwidth-repeat", type=int, default=5,
                        help="timed copies of the bandwidth measurement (default 5)")
    parser.add_argument("--streamed-budget-mib", type=int, default=None,
                        help="GPU budget of the streamed run (default: the resident run's "
                             "vertex data + n-streams largest pages + 8 MiB)")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections: {','.join(SECTIONS)} (default all)")
    parser.add_argument("--png", default=None,
                        help="replication plot (default beside the JSON; 'none' for no plot)")
    parser.add_argument("--build-option", type=build_option, action="append", default=[],
                        metavar="NAME=VALUE",
                        help="a layout option of every store, for study (repeatable), e.g. "
                             "slot_bytes=8 or max_shard_edges=16384; default: the defaults")
    parser.add_argument("--edges-per-thread", type=int,
                        choices=gpu_kernels.EDGES_PER_THREAD_CHOICES,
                        default=None,
                        help="consecutive edges one pull-kernel thread takes at a time "
                             "(config.GPU_EDGES_PER_THREAD); default: the library's default")
    parser.add_argument("--merge-lanes", type=int, choices=gpu_kernels.MERGE_LANES_CHOICES,
                        default=None,
                        help="lanes that merge one vertex's replicas after the gather "
                             "(config.GPU_MERGE_LANES); default: the library's default")
    parser.add_argument("--build-only", action="store_true",
                        help="build or reuse the stores, print their layout and stop (no GPU "
                             "needed)")
    # --trials (the older --repeat): timed loops of the cuSPARSE baseline; the
    # engine sections run once each, their first iteration warming up
    harness.add_common_options(parser, trials=3, warmup=1, json_help=(
        "append the JSON rows here (default bench/results/gpu-<gpu>-<date>.jsonl)"))
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    if not only or set(only) - set(SECTIONS):
        parser.error(f"--only {args.only!r}: expected a comma-separated subset of "
                     f"{','.join(SECTIONS)}")
    args.only = only
    for name in ("iterations", "n_streams", "replication_streams",
                 "replication_rounds", "bandwidth_mib",
                 "bandwidth_repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name)}: expected >= 1")
    if args.iterations < 2:
        parser.error("--iterations: expected >= 2 (the first iteration is not counted)")
    if not 0 <= args.hold_queue_ms <= 1000:
        parser.error(f"--hold-queue-ms={args.hold_queue_ms}: expected 0..1000")
    if args.replication_pages < 0:
        parser.error(f"--replication-pages={args.replication_pages}: expected >= 0")
    if not 1 <= args.scale <= 30:
        parser.error(f"--scale={args.scale}: expected 1..30")
    return args


def print_layouts(stores: dict) -> None:
    """The stores' layout (what --build-only shows)."""
    print(f"{'store':44} {'pages':>5} {'MiB':>6} {'shards':>8} {'split':>6} {'mean R':>7} "
          f"{'edge-w. R':>9}  R histogram")
    graphs = [stores["default"]] if stores["default"] is not None else []
    for by_r in stores["replication"].values():
        graphs += [g for g in by_r.values() if g is not stores["default"]]
    for graph in graphs:
        lay = layout_summary(graph)
        histogram = " ".join(f"{r}:{c}" for r, c in lay["replication_counts"].items())
        print(f"{graph.store.path.name:44} {lay['num_pages']:>5} "
              f"{lay['page_bytes'] / 2**20:>6.0f} {lay['num_shards']:>8,} "
              f"{lay['split_shards']:>6,} {lay['mean_replication']:>7.2f} "
              f"{lay['edge_weighted_replication']:>9.2f}  {histogram}")


def strip_private(value):
    """Drop the ``_values`` arrays (kept only for the checks) from the JSON."""
    if isinstance(value, dict):
        return {k: strip_private(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [strip_private(v) for v in value]
    return value


def main(argv=None) -> int:
    args = parse_args(argv)
    problem = None if args.build_only else gpu_problem()
    if problem is not None:
        print(f"bench/gpu.py: no usable GPU: {problem}.\nRun it where cupy sees a CUDA "
              "device, or pass --build-only to prepare the stores here.", file=sys.stderr)
        return 2
    if args.edges_per_thread is not None:
        config.GPU_EDGES_PER_THREAD = args.edges_per_thread
    if args.merge_lanes is not None:
        config.GPU_MERGE_LANES = args.merge_lanes
    date = time.strftime("%Y-%m-%d")
    json_path = Path(args.json) if args.json else \
        REPO / "bench" / "results" / f"gpu-{slug(machine().get('gpu', 'no GPU'))}-{date}.jsonl"
    args.json = str(json_path)
    results = {"benchmark": "gpu",
               "edges_per_thread": config.GPU_EDGES_PER_THREAD,
               "merge_lanes": config.GPU_MERGE_LANES,
               "date": time.strftime("%Y-%m-%d %H:%M:%S"), **machine(),
               "args": {k: v for k, v in vars(args).items()}}
    gpu = results.get("gpu", "no GPU")
    print(f"garaphpy GPU engine benchmark: {results['machine']} ({gpu}, {results['cpu_model']}, "
          f"{results['cpu_count']} CPUs), {results['date']}")

    started = time.perf_counter()
    stores = build_stores(args, args.only)
    results["store_seconds"] = time.perf_counter() - started
    if args.build_only:
        print_layouts(stores)
        return 0

    failures: list = []
    default = stores["default"]
    rows: list = []

    def section_case(name: str, compute, seconds_key: str, **params) -> dict:
        """A section that measures one engine run (or a study of several, whose
        special timing, the held queue's CUDA events, stays inside): one trial,
        its first iterations its warm-up, verified by the checks it adds to
        ``failures``."""
        holder: dict = {}

        def run() -> harness.Measurement:
            holder["before"] = len(failures)
            holder["section"] = section = compute()
            summary = section if isinstance(section, dict) else {"cases": section}
            seconds = summary.get(seconds_key)
            return harness.Measurement(result=section, seconds=seconds,
                                       metrics=strip_private(summary))

        rows.extend(harness.run_cases("gpu", [harness.Case(
            name, run, params=params, trials=1, warmup=0,
            verify=lambda _: "; ".join(failures[holder["before"]:]) or None)], args))
        return holder["section"]

    if "bandwidth" in args.only:
        log("bandwidth")
        section: dict = {}
        rows.extend(harness.run_cases("gpu", [bandwidth_case(args, section)], args))
        results["bandwidth"] = section
        print_bandwidth(results["bandwidth"])
    if "cusparse" in args.only:
        log(f"cusparse: PageRank on rmat:{args.scale}")
        results["cusparse"] = bench_cusparse(args, default)
        print_cusparse(results["cusparse"])
    if "resident" in args.only:
        results["resident"] = section_case(
            "resident", lambda: bench_resident(args, default, results.get("cusparse"), failures),
            "seconds_per_iteration", graph=f"rmat:{args.scale}")
        print_resident(results["resident"], results.get("cusparse"))
    if "streamed" in args.only:
        results["streamed"] = section_case(
            "streamed", lambda: bench_streamed(args, default, results.get("bandwidth"),
                                               results.get("resident"), failures),
            "seconds_per_iteration", graph=f"rmat:{args.scale}")
        print_streamed(results["streamed"])
    if "replication" in args.only:
        results["replication"] = section_case(
            "replication", lambda: bench_replication(args, stores["replication"], failures),
            "kernel_seconds_per_iteration", graphs=list(stores["replication"]))
        print_replication(results["replication"], args)
    results["failures"] = failures
    results["total_seconds"] = time.perf_counter() - started

    harness.write_record(args.json, "gpu", "summary", strip_private(results))
    json_path = Path(args.json)
    log(f"appended rows to {json_path}")
    if "replication" in args.only and (args.png or "").lower() != "none":
        png = Path(args.png) if args.png else json_path.with_name(
            json_path.name.replace("gpu-", "gpu-replication-", 1)
            .replace(".jsonl", ".png").replace(".json", ".png"))
        plot_replication(results["replication"], png,
                         f"garaphpy GPU engine, replication (Garaph Fig. 8/9), {gpu}, {date}")
    print(f"\ntotal {results['total_seconds']:.0f} s")
    if failures or harness.failed(rows):
        print("\nFAILED checks:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
