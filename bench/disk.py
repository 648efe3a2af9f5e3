"""Page streaming from secondary storage against the disk's own speed (Garaph section 2.2).

Garaph reads pages from several SSDs at once, each page's data blocks spread
over them by a hash.  This measures, for each ``--dir`` (one per device):

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

as bytes per second (MB/s, 10^6), the ratio (b)/(a) and, with several
directories, the scaling of both over the first directory alone.  The
median over ``--repeat`` runs is reported; the page runs use one reader, as
the iterations of a run do, after an untimed pass.  Reads are O_DIRECT; where a
file system refuses it (``direct`` says so) the files are written back and
evicted from the page cache (``posix_fadvise(DONTNEED)``) before every run,
so the page cache inflates no figure.  ``k`` is the directory's sequential
over random (4 KiB) read speed, rho of section 4.2
(:func:`garaphpy.storage.read_ratio.measure_read_ratio`, measured afresh).

Everything is written under a temporary directory inside each ``--dir``,
removed at the end (``--keep`` keeps it).

Usage (from the repository root)::

    python bench/disk.py [--dir DIR ...] [--scale 22] [--file-bytes 2G]
                         [--repeat 3] [--readahead-bytes 256M] [--check]
                         [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402

from _host import host_info, log, file_system  # noqa: E402
from garaphpy import config, generators  # noqa: E402
from garaphpy.storage.builder import BuildOptions, build_store  # noqa: E402
from garaphpy.storage.page_io import (  # noqa: E402
    PageReader, aligned_empty, drop_from_page_cache, open_for_streaming)
from garaphpy.storage.read_ratio import measure_read_speeds  # noqa: E402
from garaphpy.storage.store import Store  # noqa: E402

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
def build(scale: int, directory: Path, extra: list[Path]) -> Store:
    started = time.perf_counter()
    store = build_store(generators.rmat(scale), directory,
                        BuildOptions(storage_dirs=[str(d) for d in extra]), progress=False)
    log(f"  built {directory} ({len(store.pages)} pages, "
        f"{sum(p.nbytes for p in store.pages) / 2**20:.0f} MiB of page data over "
        f"{len(store.storage_dirs)} directories) in {time.perf_counter() - started:.1f} s")
    return store


def stream(store: Store, readahead: int | None, check: bool, repeat: int) -> list[dict]:
    """Stream every page ``repeat`` times through one PageReader (as the
    iterations of a run do), after an untimed pass that faults its buffers in;
    bytes/s of each pass."""
    runs = []
    with PageReader(store, readahead_bytes=readahead, check=check) as reader:
        for run in range(repeat + 1):
            for path in store.block_files:
                drop_from_page_cache(path)
            before = reader.bytes_read
            started = time.perf_counter()
            for _index, _page in reader.stream():
                pass
            seconds = time.perf_counter() - started
            total = reader.bytes_read - before
            if run:
                runs.append({"bytes": total, "seconds": seconds, "bytes_per_s": total / seconds,
                             "direct": all(reader.direct_io), "buffers": reader.max_buffers,
                             "buffer_bytes": reader.buffer_bytes})
    return runs


def median_run(runs: list[dict]) -> dict:
    middle = statistics.median(r["bytes_per_s"] for r in runs)
    best = min(runs, key=lambda r: abs(r["bytes_per_s"] - middle))
    return {**best, "bytes_per_s": middle, "runs_bytes_per_s": [r["bytes_per_s"] for r in runs]}


# ------------------------------------------------------------------------ main --
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", action="append", default=None,
                        help="a directory to measure, one per device; repeat for several "
                             "(default: the current directory)")
    parser.add_argument("--scale", type=int, default=22, help="RMAT scale of the store "
                        "(default 22)")
    parser.add_argument("--file-bytes", type=parse_bytes, default=2 << 30,
                        help="size of the sequential-read file per directory (default 2G)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each read (default 3)")
    parser.add_argument("--readahead-bytes", type=parse_bytes, default=None,
                        help="PageReader read-ahead budget (default "
                             "config.PAGE_READAHEAD_BYTES)")
    parser.add_argument("--check", action="store_true",
                        help="verify block checksums while streaming (off: I/O alone)")
    parser.add_argument("--keep", action="store_true", help="keep the files and stores")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat: expected >= 1")
    directories = [Path(d) for d in (args.dir or ["."])]
    for directory in directories:
        if not directory.is_dir():
            parser.error(f"--dir {directory}: no such directory")
    work = [Path(tempfile.mkdtemp(prefix=".garaphpy-disk-bench-", dir=d)) for d in directories]
    try:
        results = measure(args, directories, work)
    finally:
        if args.keep:
            log(f"kept {', '.join(map(str, work))}")
        else:
            for path in work:
                shutil.rmtree(path, ignore_errors=True)
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
        log(f"wrote {args.json}")
    return 0


def measure(args, directories: list[Path], work: list[Path]) -> dict:
    files = [w / "sequential.dat" for w in work]
    log(f"writing {len(files)} file(s) of {args.file_bytes / 2**30:.2f} GiB ...")
    for path in files:
        write_file(path, args.file_bytes)
    log(f"building the store(s) of rmat:{args.scale} ...")
    single = [build(args.scale, w / "store", []) for w in work]
    spread = build(args.scale, work[0] / "store-all", work[1:]) if len(work) > 1 else None

    rows = []
    for directory, path, store in zip(directories, files, single):
        log(f"{directory}: measuring ...")
        speeds = measure_read_speeds(directory, refresh=True)
        file_runs = [sequential([path]) for _ in range(args.repeat)]
        page_runs = stream(store, args.readahead_bytes, args.check, args.repeat)
        rows.append(row([directory], file_runs, page_runs, speeds.ratio,
                        sum(p.nbytes for p in store.pages)))
    if spread is not None:
        log("all directories at once: measuring ...")
        file_runs = [sequential(files) for _ in range(args.repeat)]
        page_runs = stream(spread, args.readahead_bytes, args.check, args.repeat)
        rows.append(row(directories, file_runs, page_runs, None,
                        sum(p.nbytes for p in spread.pages)))
    results = {"benchmark": "disk", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
               **host_info(), "graph": f"rmat:{args.scale}",
               "block_bytes": config.BLOCK_BYTES, "file_bytes": args.file_bytes,
               "check": args.check, "rows": rows,
               "args": {k: v for k, v in vars(args).items()}}
    if spread is not None:
        results["scaling"] = {
            "sequential": rows[-1]["sequential"]["bytes_per_s"]
            / rows[0]["sequential"]["bytes_per_s"],
            "pages": rows[-1]["pages"]["bytes_per_s"] / rows[0]["pages"]["bytes_per_s"],
        }
    return results


def row(directories, file_runs, page_runs, k, store_bytes) -> dict:
    sequential_result = median_run(file_runs)
    pages = median_run(page_runs)
    return {"directories": [str(d) for d in directories],
            "file_systems": [file_system(d) for d in directories],
            "sequential": sequential_result, "pages": pages,
            "ratio": pages["bytes_per_s"] / sequential_result["bytes_per_s"],
            "k": k, "store_page_bytes": store_bytes}


def report(results: dict) -> None:
    print(f"garaphpy disk: {results['graph']} pages through PageReader vs O_DIRECT sequential "
          f"reads of {results['file_bytes'] / 2**30:.2f} GiB, {results['date']}, "
          f"{results['machine']}, checksums {'on' if results['check'] else 'off'}")
    print("| directories | file system | (a) sequential MB/s | (b) pages MB/s | (b)/(a) | "
          "direct | k |")
    print("|---|---|---|---|---|---|---|")
    for entry in results["rows"]:
        k = f"{entry['k']:.1f}" if entry["k"] is not None else "-"
        direct = "yes" if entry["sequential"]["direct"] and entry["pages"]["direct"] else "no"
        print(f"| {', '.join(entry['directories'])} | {', '.join(entry['file_systems'])} | "
              f"{entry['sequential']['bytes_per_s'] / 1e6:.0f} | "
              f"{entry['pages']['bytes_per_s'] / 1e6:.0f} | {entry['ratio']:.2f} | "
              f"{direct} | {k} |")
    if "scaling" in results:
        print(f"scaling over the first directory alone: sequential "
              f"{results['scaling']['sequential']:.2f}x, pages {results['scaling']['pages']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
