"""Page streaming from secondary storage against the disk's own speed (Garaph section 2.2).

Garaph keeps the graph in host memory when it fits and otherwise uses
secondary storage "as memory extension", reading pages from several SSDs at
once, each page's data blocks spread over them by a hash (section 2.2).
This measures, for each ``--dir`` (one per device) and, with several, for
all of them together:

(a) ``sequential``: the O_DIRECT sequential read bandwidth of one large file
    (``--file-bytes``, default 2 GiB, best set to about the size of the
    store's page data), read by one thread in requests of
    ``config.BLOCK_BYTES`` (the requests the page reader makes), one at a
    time; with several directories also all files at once, one thread each
    (``all``);
(b) ``pages``: garaphpy's :class:`~garaphpy.storage.page_io.PageReader`
    streaming every page of the store of rmat:SCALE (built beforehand, not
    timed) whose data blocks lie in that directory, and with several
    directories of a store spread over all of them;
(c) ``pagerank``: :func:`garaphpy.run` of PageRank on that same store
    (``Graph(store)``, ``tolerance=0``, ``--iterations`` iterations,
    ``--threads`` threads, ``read_ratio=10``) for each of ``--modes``, with
    a host budget (``host_memory``) that holds the store's arrays, the
    vertex data and the read-ahead buffers of the mode's page readers and
    no page at all (the formula of :func:`garaphpy.api.page_source` plus
    4 KiB), so every page is read from the storage directories every
    iteration.  The figure is the median over the iterations after the
    first (which also warms up) of the bytes the run read from storage in
    an iteration over the iteration's time; every such iteration is checked
    to have read every page byte of the store (a hybrid run, whose two
    readers read from the two ends of the page queue, at most one read-ahead
    window more per reader), else the run is reported as failed.  ``gpu``
    and ``hybrid`` need a usable GPU (else they are skipped with a note) and
    run with a GPU budget (``--gpu-memory``) too small for the pages to
    stay on the GPU, so that they are streamed from storage as well;

as bytes per second (MB/s, 10^6), the ratios (b)/(a) and (c)/(a) and, with
several directories, the scaling of each over the first directory alone.
The device each directory lies on (``st_dev`` and the disk behind it, from
``/sys/dev/block``) is printed, so a report can say whether two directories
were on different devices.  (a) reports the median over ``--repeat`` runs
before (b) and ``--repeat`` runs after (c) (the disk's speed drifts), (b)
the median over ``--repeat`` runs; the page runs of (b) use one reader, as the iterations of a CPU run do,
after an untimed pass.  Reads are O_DIRECT; where a file system refuses it
(``direct`` says so) the files are written back and evicted from the page
cache (``posix_fadvise(DONTNEED)``) before every run and, for (c), after
every iteration, so the page cache inflates no figure.  ``k`` is the
directory's sequential over random (4 KiB) read speed, rho of section 4.2
(:func:`garaphpy.storage.read_ratio.measure_read_ratio`, measured afresh).

Pages are at most ``--page-bytes``; by default the builder's limit
(``config.MAX_PAGE_BYTES``), lowered (and the first store rebuilt) where
that cuts the store into fewer than ``4 * config.PAGE_READAHEAD_PAGES * 2``
pages: a budget that caches no page exists only when the page data exceed
the read-ahead buffers of the run's readers (two in hybrid mode), and the
streaming should not be mostly the reader's first window.

Everything is written under a temporary directory inside each ``--dir``,
removed at the end, also when the bench fails or is interrupted (Ctrl-C,
SIGTERM, SIGHUP; ``--keep`` keeps it).

Usage (from the repository root)::

    python -m bench disk [--dir DIR ...] [--scale 22] [--file-bytes 2G]
                         [--repeat 3] [--readahead-bytes 256M] [--check]
                         [--modes cpu[,gpu,hybrid]] [--iterations 10]
                         [--threads N] [--page-bytes auto] [--gpu-memory auto]
                         [--keep] [--json rows.jsonl]

A configuration of bench/harness.py: for each directory (and all of them
together) the sequential reads before and after, the page stream and each
mode's PageRank run are cases.  ``--trials`` (the older ``--repeat``) is the
runs of each read; a page stream's untimed pass is its harness warm-up; a
PageRank run is one trial whose first iteration warms up, verified by the
every-page check above.  ``--json`` gets one row per case and a ``summary``
row holding the table.

A quick run (a small store, two directories on whatever devices they are)::

    python -m bench disk --dir /tmp --dir /var/tmp --scale 16 --file-bytes 64M \\
                         --repeat 1 --iterations 3
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

import garaphpy
from garaphpy import config, generators
from garaphpy.api import MODES, NotConvergedWarning
from garaphpy.storage.builder import BuildOptions, build_store
from garaphpy.storage.host_budget import plan_run_pages, run_fixed_bytes
from garaphpy.storage.layout import align
from garaphpy.storage.page_io import (
    PageReader, aligned_empty, drop_from_page_cache, open_for_streaming, page_buffer_bytes)
from garaphpy.storage.read_ratio import measure_read_speeds
from garaphpy.storage.store import Store

from bench._host import file_system, free_gpu_memory, gpu_problem, host_info, log
from bench import harness

REPO = Path(__file__).resolve().parents[1]


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_bytes(text: str) -> int:
    """``"2G" -> 2147483648``; plain numbers are bytes."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1:] if text[-1:] in _UNITS else ""
    try:
        value = float(text[:len(text) - len(unit)])
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected bytes such as 2G or 512M") \
            from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive size")
    return int(value * _UNITS[unit])


# ------------------------------------------------------------ (a) one big file --
def write_file(path: Path, nbytes: int) -> None:
    """``nbytes`` of incompressible data, fsynced and out of the page cache."""
    chunk = np.random.default_rng(1).integers(0, 256, config.BLOCK_BYTES, np.uint8)
    with open(path, "wb", buffering=0) as handle:
        written = 0
        while written < nbytes:
            written += handle.write(chunk[:nbytes - written])
        os.fsync(handle.fileno())
    drop_from_page_cache(path)


def read_file(path: Path, results: dict) -> None:
    """Read ``path`` sequentially, O_DIRECT where possible; record bytes, seconds, direct."""
    fd, direct = open_for_streaming(path)
    if not direct:
        drop_from_page_cache(path)
    buffer = aligned_empty(config.BLOCK_BYTES)
    total = 0
    started = time.perf_counter()
    try:
        while True:
            count = os.preadv(fd, [buffer], total)
            if count <= 0:
                break
            total += count
    finally:
        os.close(fd)
    results[str(path)] = {"bytes": total, "seconds": time.perf_counter() - started,
                          "direct": direct}


def sequential(paths: list[Path]) -> dict:
    """Read the files at once, one thread each: aggregate bytes/s."""
    results: dict = {}
    threads = [threading.Thread(target=read_file, args=(p, results)) for p in paths]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    if len(results) != len(paths):
        raise SystemExit("a sequential read failed (see above)")
    total = sum(r["bytes"] for r in results.values())
    return {"bytes": total, "seconds": seconds, "bytes_per_s": total / seconds,
            "direct": all(r["direct"] for r in results.values())}


# ------------------------------------------------------------------ (b) pages --
def build(scale: int, directory: Path, extra: list[Path], page_bytes: int | None) -> Store:
    started = time.perf_counter()
    options = BuildOptions(storage_dirs=[str(d) for d in extra])
    if page_bytes is not None:
        options.max_page_bytes = page_bytes
    store = build_store(generators.rmat(scale), directory, options, progress=False)
    log(f"  built {directory} ({len(store.pages)} pages of at most "
        f"{max(p.nbytes for p in store.pages) / 2**20:.2f} MiB, "
        f"{page_data_bytes(store) / 2**20:.0f} MiB of page data over "
        f"{len(store.storage_dirs)} directories) in {time.perf_counter() - started:.1f} s")
    return store


def page_data_bytes(store: Store) -> int:
    """Bytes of all the store's page images (what one iteration reads when no page is cached)."""
    return sum(p.nbytes for p in store.pages)


def page_bytes_for(store: Store, pages: int) -> int:
    """A page limit that cuts ``store`` into about ``pages`` pages: its page
    bytes over ``pages``, in whole blocks, never below the page of its largest
    shard (the builder refuses a limit below that)."""
    from garaphpy.storage import layout

    sizing = layout.PageSizing(source_bytes=store.vertex_dtype.itemsize,
                               weight_bytes=store.weight_dtype.itemsize if store.weighted
                               else 0, page_bytes=0)
    _, smallest = layout.smallest_page_bytes(store.shards, sizing)
    block = config.BLOCK_ALIGNMENT
    return max(block, page_data_bytes(store) // pages // block * block,
               -(-smallest // block) * block)


def stream_pass(reader: PageReader, store: Store) -> harness.Measurement:
    """Stream every page once through ``reader`` (as an iteration of a run does),
    the page cache emptied first, outside the time; bytes/s of the pass."""
    for path in store.block_files:
        drop_from_page_cache(path)
    before = reader.bytes_read
    started = time.perf_counter()
    for _index, _page in reader.stream():
        pass
    seconds = time.perf_counter() - started
    total = reader.bytes_read - before
    return harness.Measurement(result=total, seconds=seconds, metrics={
        "bytes": total, "seconds": seconds, "bytes_per_s": total / seconds,
        "direct": all(reader.direct_io), "buffers": reader.max_buffers,
        "buffer_bytes": reader.buffer_bytes})


def sequential_read(paths: list[Path]) -> harness.Measurement:
    """:func:`sequential` as a harness trial."""
    measured = sequential(paths)
    return harness.Measurement(result=measured["bytes"], seconds=measured["seconds"],
                               metrics=measured)


def directory_cases(args, label: str, store: Store, paths: list[Path], modes: list,
                    threads, found: dict) -> list:
    """The cases of one row of the table: sequential reads before, the page
    stream, each mode's PageRank, sequential reads after (the disk drifts)."""
    expected_file_bytes = args.file_bytes * len(paths)
    page_bytes = page_data_bytes(store)

    def open_reader():
        return PageReader(store, readahead_bytes=args.readahead_bytes, check=args.check)

    def pagerank_run(mode):
        entry = pagerank(store, mode, args, threads)
        found[mode] = entry
        return harness.Measurement(result=entry, seconds=entry.get("seconds"), metrics=entry)

    def read_every_byte(total):
        return total >= expected_file_bytes or \
            f"read {total:,} bytes of {expected_file_bytes:,}"

    cases = [harness.Case(f"{label}/sequential-before",
                          functools.partial(sequential_read, paths), warmup=0,
                          params={"read": "sequential", "files": len(paths)},
                          verify=read_every_byte),
             harness.Case(f"{label}/pages", lambda reader: stream_pass(reader, store),
                          setup=open_reader, teardown=lambda reader: reader.close(),
                          params={"read": "pages", "check": args.check},
                          verify=lambda total: total == page_bytes
                          or f"streamed {total:,} bytes of {page_bytes:,}")]
    cases += [harness.Case(f"{label}/pagerank-{mode}", functools.partial(pagerank_run, mode),
                           trials=1, warmup=0, params={"read": "pagerank", "mode": mode},
                           verify=lambda entry: entry.get("error") or entry.get("skipped"))
              for mode in modes]
    cases.append(harness.Case(f"{label}/sequential-after",
                              functools.partial(sequential_read, paths), warmup=0,
                              params={"read": "sequential", "files": len(paths)},
                              verify=read_every_byte))
    return cases


def measure_row(args, label: str, store: Store, paths: list[Path], modes: list,
                threads) -> tuple:
    """Run one row's cases; the sequential runs, the page runs, the PageRank
    entries by mode, and the harness rows."""
    found: dict = {}
    rows = harness.run_cases("disk", directory_cases(args, label, store, paths, modes,
                                                     threads, found), args,
                             extra={"directories": label, "graph": f"rmat:{args.scale}"})
    by_read = {}
    for row in rows:
        by_read.setdefault(row["params"]["read"], []).extend(row["metrics"])
    return by_read["sequential"], by_read["pages"], found, rows


def median_run(runs: list[dict]) -> dict:
    middle = statistics.median(r["bytes_per_s"] for r in runs)
    best = min(runs, key=lambda r: abs(r["bytes_per_s"] - middle))
    return {**best, "bytes_per_s": middle, "runs_bytes_per_s": [r["bytes_per_s"] for r in runs]}


# --------------------------------------------------------------- (c) pagerank --
#: Page readers of a run by mode (:func:`garaphpy.api.page_source`: the CPU's,
#: the GPU's, both in hybrid mode).
READERS = {"cpu": 1, "gpu": 1, "hybrid": 2}

#: The budget of (c) beyond the fixed part and the read-ahead: less than any page.
BUDGET_MARGIN = 4 << 10

#: Pages the default ``--page-bytes`` cuts the store into at least: four
#: read-ahead windows of each reader of a hybrid run.
MIN_PAGES = 4 * config.PAGE_READAHEAD_PAGES * max(READERS.values())


def readahead_bytes(store: Store) -> int:
    """The read-ahead each page reader of (c) gets (passed to the run as
    ``readahead_bytes``): ``config.PAGE_READAHEAD_PAGES`` of the largest pages,
    at most ``config.PAGE_READAHEAD_BYTES``, at least one page."""
    buffer = page_buffer_bytes(store)
    return max(buffer, min(config.PAGE_READAHEAD_BYTES, config.PAGE_READAHEAD_PAGES * buffer))


def streaming_budget(store: Store, mode: str) -> dict:
    """A host budget that caches no page of ``store`` in a run of ``mode`` with
    :func:`readahead_bytes` per reader: what the run pays first
    (:func:`garaphpy.storage.host_budget.run_fixed_bytes`, the read-ahead of
    the mode's readers) plus :data:`BUDGET_MARGIN`, checked with the run's own
    :func:`~garaphpy.storage.host_budget.plan_run_pages`; ``problem`` says why
    there is none."""
    fixed = run_fixed_bytes(store)
    per_reader = readahead_bytes(store)
    readahead = READERS[mode] * per_reader
    budget = fixed + readahead + BUDGET_MARGIN
    plan, _ = plan_run_pages(store, READERS[mode], budget, per_reader)
    problem = None
    if plan.cached:
        problem = (f"no host budget streams every page: the {len(store.pages)} pages "
                   f"({page_data_bytes(store):,} bytes) fit in the read-ahead of "
                   f"{READERS[mode]} reader(s) ({readahead:,} bytes); lower --page-bytes")
    return {"host_memory": budget, "fixed_bytes": fixed, "readahead_bytes": readahead,
            "readahead_per_reader": per_reader, "readers": READERS[mode], "problem": problem}


def gpu_streaming_memory(store: Store) -> int:
    """A GPU budget under which a ``gpu`` or ``hybrid`` run streams its pages
    (:func:`garaphpy.scheduler.gpu_engine.plan_pages` keeps them on the GPU when
    the vertex data and every page fit): ``config.HOST_BYTES_PER_VERTEX`` per
    vertex and 64 bytes per shard (a bound on the engine's vertex arrays and
    shard tables) plus one buffer of the largest page per stream."""
    largest = max((info.nbytes for info in store.pages), default=0)
    return (config.HOST_BYTES_PER_VERTEX * store.num_vertices + 64 * len(store.shards)
            + config.N_STREAMS * align(largest, config.BLOCK_ALIGNMENT))


def check_streamed(mode: str, iterations: list[dict], page_bytes: int, window: int) -> None:
    """Every iteration after the first read every page byte from storage (and, in a
    hybrid run, at most one read-ahead window per reader more; in the others
    nothing more); AssertionError otherwise, so no figure rests on cached pages."""
    for entry in iterations[1:]:
        read = entry["bytes_read"]
        most = page_bytes + (window if mode == "hybrid" else 0)
        if not page_bytes <= read <= most:
            raise AssertionError(
                f"{mode} iteration {entry['iteration']} read {read:,} bytes from storage, "
                f"expected {page_bytes:,}" + (f" to {most:,}" if most != page_bytes else "")
                + " (every page, none cached)")


def pagerank(store: Store, mode: str, args, threads: int) -> dict:
    """Run PageRank on ``store`` with a budget that caches no page; per iteration
    the bytes read from storage and the time, and the median rate."""
    budget = streaming_budget(store, mode)
    total = page_data_bytes(store)
    entry = {"mode": mode, "threads": threads, "iterations_run": args.iterations,
             "page_bytes": total, "pages": len(store.pages),
             **{k: v for k, v in budget.items() if k != "problem"}}
    if budget["problem"]:
        log(f"  pagerank {mode}: skipped, {budget['problem']}")
        return {**entry, "skipped": budget["problem"]}
    gpu_memory = None
    if mode != "cpu":
        gpu_memory = args.gpu_memory or gpu_streaming_memory(store)
        if gpu_memory >= total:
            log(f"  note: --gpu-memory {gpu_memory:,} is not below the page data ({total:,} "
                "bytes): the pages may stay on the GPU (the check below says)")
        entry["gpu_memory"] = gpu_memory

    def evict(_record) -> None:        # after the iteration's time is taken
        for path in store.block_files:
            drop_from_page_cache(path)

    evict(None)
    log(f"  pagerank {mode}: host budget {budget['host_memory'] / 2**20:.1f} MiB (fixed "
        f"{budget['fixed_bytes'] / 2**20:.1f} MiB, read-ahead "
        f"{budget['readahead_bytes'] / 2**20:.1f} MiB), {total / 2**20:.1f} MiB of pages, "
        f"{args.iterations} iterations, {threads or 'default'} threads ...")
    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotConvergedWarning)   # tolerance 0: by design
            result = garaphpy.run(garaphpy.Graph(store), "pagerank", mode=mode, tolerance=0.0,
                                  max_iterations=args.iterations, threads=threads,
                                  host_memory=budget["host_memory"], read_ratio=10.0,
                                  readahead_bytes=budget["readahead_per_reader"],
                                  gpu_memory=gpu_memory, on_iteration=evict)
    finally:
        if mode != "cpu":
            free_gpu_memory()
    iterations = [{"iteration": r.iteration, "bytes_read": r.bytes_read, "seconds": r.seconds,
                   "bytes_per_s": r.bytes_read / r.seconds if r.seconds > 0 else float("nan"),
                   "mode": r.mode, "direction": r.direction, "pages": r.pages}
                  for r in result.iterations]
    entry.update(iterations=iterations, setup_seconds=result.setup_seconds,
                 seconds=time.perf_counter() - started)
    try:
        check_streamed(mode, iterations, total, budget["readahead_bytes"])
    except AssertionError as error:
        log(f"  pagerank {mode}: FAILED: {error}")
        return {**entry, "error": str(error)}
    entry["bytes_per_s"] = statistics.median(i["bytes_per_s"] for i in iterations[1:])
    log(f"  pagerank {mode}: {entry['bytes_per_s'] / 1e6:.0f} MB/s (median of "
        f"{len(iterations) - 1} iterations; setup {result.setup_seconds:.1f} s)")
    return entry


# --------------------------------------------------------------------- devices --
def _disks(block: Path) -> list[str]:
    """The disks behind a block device of /sys/dev/block (a partition's disk, the
    disks under a device-mapper or md device)."""
    block = block.resolve()
    slaves = block / "slaves"
    if slaves.is_dir() and any(slaves.iterdir()):
        return sorted({d for s in slaves.iterdir() for d in _disks(s)})
    return [block.parent.name if (block / "partition").exists() else block.name]


def device_of(path: Path) -> dict:
    """``st_dev`` (major:minor) of ``path`` and the disks behind it (None when the
    file system has no block device, such as tmpfs or overlay, or /sys tells nothing)."""
    st_dev = os.stat(path).st_dev
    number = f"{os.major(st_dev)}:{os.minor(st_dev)}"
    try:
        disks = _disks(Path("/sys/dev/block") / number)
    except OSError:
        disks = None
    return {"st_dev": number, "disks": disks}


def describe_devices(directories: list[Path], devices: list[dict]) -> dict:
    """Whether the directories lie on different devices (``distinct``: True, False,
    or None when it cannot be told) and a line that says so."""
    parts = [f"{d}: st_dev {v['st_dev']}, disk {'+'.join(v['disks']) if v['disks'] else '?'}"
             for d, v in zip(directories, devices)]
    if len(directories) < 2:
        return {"distinct": None, "line": f"device: {parts[0]}"}
    if any(v["disks"] is None for v in devices):
        keys = [v["st_dev"] for v in devices]
        distinct = None if len(set(keys)) == len(keys) else False
        verdict = ("different file systems, disks unknown" if distinct is None
                   else "one file system, so one device")
    else:
        sets = [set(v["disks"]) for v in devices]
        overlap = any(sets[i] & sets[j] for i in range(len(sets))
                      for j in range(i + 1, len(sets)))
        distinct = not overlap
        verdict = ("different devices" if distinct else
                   "one device" if len(set.union(*sets)) == 1 else "devices shared")
    return {"distinct": distinct, "line": f"devices: {'; '.join(parts)} -> {verdict}"}


# ------------------------------------------------------------------------ main --
def parse_modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated list of "
                                         f"{', '.join(MODES)}")
    return list(dict.fromkeys(modes))


def _terminate(signum, _frame) -> None:
    raise SystemExit(128 + signum)       # unwinds through the clean-up below


def remove(paths: list[Path]) -> None:
    for path in paths:
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            pass
        except OSError as error:
            log(f"could not remove {path}: {error}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", action="append", default=None,
                        help="a directory to measure, one per device; repeat for several "
                             "(default: the current directory)")
    parser.add_argument("--scale", type=int, default=22, help="RMAT scale of the store "
                        "(default 22)")
    parser.add_argument("--file-bytes", type=parse_bytes, default=2 << 30,
                        help="size of the sequential-read file per directory (default 2G)")
    parser.add_argument("--readahead-bytes", type=parse_bytes, default=None,
                        help="PageReader read-ahead budget of (b) (default "
                             "config.PAGE_READAHEAD_BYTES)")
    parser.add_argument("--check", action="store_true",
                        help="verify block checksums while streaming in (b) (off: I/O alone; "
                             "the runs of (c) verify them, as runs do)")
    parser.add_argument("--modes", type=parse_modes, default=["cpu"],
                        help="modes of the PageRank runs of (c), comma-separated from "
                             f"{','.join(MODES)} (default cpu); gpu and hybrid need a GPU")
    parser.add_argument("--iterations", type=int, default=10,
                        help="PageRank iterations per run of (c), the first not counted "
                             "(default 10)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads of the runs of (c) (default: the run's own default, "
                             "which leaves cores to the page readers)")
    parser.add_argument("--page-bytes", type=parse_bytes, default=None,
                        help="largest page of the stores (default: config.MAX_PAGE_BYTES, "
                             f"lowered to cut the store into at least {MIN_PAGES} pages)")
    parser.add_argument("--gpu-memory", type=parse_bytes, default=None,
                        help="GPU budget of gpu and hybrid runs (default: too small for the "
                             "pages to stay on the GPU)")
    parser.add_argument("--keep", action="store_true", help="keep the files and stores")
    harness.add_common_options(parser, trials=3, warmup=1)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    if args.iterations < 2:
        parser.error("--iterations: expected >= 2 (the first is not counted)")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads: expected >= 1")
    directories = [Path(d) for d in (args.dir or ["."])]
    for directory in directories:
        if not directory.is_dir():
            parser.error(f"--dir {directory}: no such directory")
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _terminate)
    work: list[Path] = []
    try:
        for directory in directories:
            work.append(Path(tempfile.mkdtemp(prefix=".garaphpy-disk-bench-", dir=directory)))
        results = measure(args, directories, work)
    finally:
        if args.keep:
            log(f"kept {', '.join(map(str, work))}")
        else:
            remove(work)
    report(results)
    harness.write_record(args.json, "disk", "summary",
                         {key: value for key, value in results.items() if key != "harness_rows"})
    failed = [f"{', '.join(r['directories'])} {mode}" for r in results["rows"]
              for mode, entry in r["pagerank"].items() if "bytes_per_s" not in entry]
    if failed:
        log(f"pagerank runs failed or skipped: {'; '.join(failed)}")
    return 1 if failed or harness.failed(results["harness_rows"]) else 0


def build_stores(args, work: list[Path]) -> tuple[list[Store], Store | None, int | None]:
    """The store of each directory and, with several, the one spread over all;
    the page limit they were built with (None: the builder's)."""
    page_bytes = args.page_bytes
    first = build(args.scale, work[0] / "store", [], page_bytes)
    if page_bytes is None and len(first.pages) < MIN_PAGES:
        page_bytes = page_bytes_for(first, MIN_PAGES)
        log(f"  {len(first.pages)} pages are fewer than {MIN_PAGES}: rebuilding with pages "
            f"of at most {page_bytes / 2**20:.2f} MiB")
        del first
        shutil.rmtree(work[0] / "store")
        first = build(args.scale, work[0] / "store", [], page_bytes)
    single = [first] + [build(args.scale, w / "store", [], page_bytes) for w in work[1:]]
    spread = (build(args.scale, work[0] / "store-all", work[1:], page_bytes)
              if len(work) > 1 else None)
    return single, spread, page_bytes


def measure(args, directories: list[Path], work: list[Path]) -> dict:
    skipped = {}
    modes = list(args.modes)
    if any(m != "cpu" for m in modes):
        problem = gpu_problem()
        if problem is not None:
            for mode in [m for m in modes if m != "cpu"]:
                skipped[mode] = f"no usable GPU: {problem}"
                log(f"note: pagerank {mode} skipped, {skipped[mode]}")
            modes = [m for m in modes if m == "cpu"]
    # None: garaphpy.run's default, every core numba may use less the readers' cores
    threads = args.threads
    devices = [device_of(d) for d in directories]
    device_line = describe_devices(directories, devices)
    log(device_line["line"])

    files = [w / "sequential.dat" for w in work]
    log(f"writing {len(files)} file(s) of {args.file_bytes / 2**30:.2f} GiB ...")
    for path in files:
        write_file(path, args.file_bytes)
    log(f"building the store(s) of rmat:{args.scale} ...")
    single, spread, page_bytes = build_stores(args, work)

    rows, harness_rows = [], []
    for directory, device, path, store in zip(directories, devices, files, single):
        log(f"{directory}: measuring ...")
        speeds = measure_read_speeds(directory, refresh=True)
        file_runs, page_runs, runs, measured = measure_row(args, str(directory), store, [path],
                                                           modes, threads)
        harness_rows += measured
        rows.append(row([directory], [device], file_runs, page_runs, runs, speeds.ratio, store))
    if spread is not None:
        log("all directories at once: measuring ...")
        file_runs, page_runs, runs, measured = measure_row(args, "all", spread, files, modes,
                                                           threads)
        harness_rows += measured
        rows.append(row(directories, devices, file_runs, page_runs, runs, None, spread))
    results = {"benchmark": "disk", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
               **host_info(), "graph": f"rmat:{args.scale}",
               "block_bytes": config.BLOCK_BYTES, "file_bytes": args.file_bytes,
               "max_page_bytes": page_bytes or config.MAX_PAGE_BYTES,
               "pages": len(single[0].pages), "check": args.check, "threads": threads,
               "modes": modes, "skipped_modes": skipped,
               "devices_distinct": device_line["distinct"], "devices": device_line["line"],
               "rows": rows, "args": {k: v for k, v in vars(args).items()},
               "harness_rows": harness_rows}
    if spread is not None:
        first, last = rows[0], rows[-1]
        results["scaling"] = {
            "sequential": last["sequential"]["bytes_per_s"] / first["sequential"]["bytes_per_s"],
            "pages": last["pages"]["bytes_per_s"] / first["pages"]["bytes_per_s"],
            **{f"pagerank_{mode}": last["pagerank"][mode]["bytes_per_s"]
               / first["pagerank"][mode]["bytes_per_s"] for mode in modes
               if "bytes_per_s" in last["pagerank"][mode]
               and "bytes_per_s" in first["pagerank"][mode]},
        }
    return results


def row(directories, devices, file_runs, page_runs, runs, k, store) -> dict:
    sequential_result = median_run(file_runs)
    pages = median_run(page_runs)
    for entry in runs.values():
        if "bytes_per_s" in entry:
            entry["ratio_sequential"] = entry["bytes_per_s"] / sequential_result["bytes_per_s"]
            entry["ratio_pages"] = entry["bytes_per_s"] / pages["bytes_per_s"]
    return {"directories": [str(d) for d in directories],
            "file_systems": [file_system(d) for d in directories],
            "devices": devices,
            "sequential": sequential_result, "pages": pages, "pagerank": runs,
            "ratio": pages["bytes_per_s"] / sequential_result["bytes_per_s"],
            "k": k, "store_page_bytes": page_data_bytes(store), "store_pages": len(store.pages)}


def report(results: dict) -> None:
    modes = results["modes"]
    print(f"garaphpy disk: {results['graph']} ({results['pages']} pages of at most "
          f"{results['max_page_bytes'] / 2**20:.2f} MiB) through PageReader and PageRank "
          f"({', '.join(modes) or 'no mode'}, {results['threads'] or 'default'} threads, no page "
          "cached) vs "
          f"O_DIRECT sequential reads of {results['file_bytes'] / 2**30:.2f} GiB, "
          f"{results['date']}, {results['machine']}, checksums of (b) "
          f"{'on' if results['check'] else 'off'}")
    print(results["devices"])
    for mode, reason in results["skipped_modes"].items():
        print(f"note: pagerank {mode} skipped, {reason}")
    header = ["directories", "file system", "st_dev", "(a) sequential MB/s", "(b) pages MB/s",
              "(b)/(a)"]
    for mode in modes:
        header += [f"(c) pagerank {mode} MB/s", "(c)/(a)"]
    header += ["direct", "k"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for entry in results["rows"]:
        k = f"{entry['k']:.1f}" if entry["k"] is not None else "-"
        direct = "yes" if entry["sequential"]["direct"] and entry["pages"]["direct"] else "no"
        cells = [", ".join(entry["directories"]), ", ".join(entry["file_systems"]),
                 ", ".join(d["st_dev"] for d in entry["devices"]),
                 f"{entry['sequential']['bytes_per_s'] / 1e6:.0f}",
                 f"{entry['pages']['bytes_per_s'] / 1e6:.0f}", f"{entry['ratio']:.2f}"]
        for mode in modes:
            run = entry["pagerank"][mode]
            cells += ([f"{run['bytes_per_s'] / 1e6:.0f}", f"{run['ratio_sequential']:.2f}"]
                      if "bytes_per_s" in run else
                      ["skipped" if "skipped" in run else "FAILED", "-"])
        cells += [direct, k]
        print("| " + " | ".join(cells) + " |")
    for entry in results["rows"]:
        for mode in modes:
            run = entry["pagerank"][mode]
            for key, label in (("error", "FAILED"), ("skipped", "skipped")):
                if key in run:
                    print(f"{label}: pagerank {mode} on {', '.join(entry['directories'])}: "
                          f"{run[key]}")
    if "scaling" in results:
        scaling = results["scaling"]
        parts = [f"sequential {scaling['sequential']:.2f}x", f"pages {scaling['pages']:.2f}x"]
        parts += [f"pagerank {mode} {scaling[f'pagerank_{mode}']:.2f}x" for mode in modes
                  if f"pagerank_{mode}" in scaling]
        print(f"scaling over the first directory alone: {', '.join(parts)}")


if __name__ == "__main__":
    sys.exit(main())
