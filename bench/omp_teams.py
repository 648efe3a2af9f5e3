"""A second OpenMP thread team beside the main thread's: what it costs the main thread's parallel regions (issue 20).

A hybrid run (Garaph section 5) has two Python threads that launch numba's
parallel loops: the main thread (the GPU's host-side work and the CPU-only
iterations) and the CPU worker (the CPU's pages of a joined iteration).
With numba's OpenMP layer each gets a thread team of its own from libgomp.
libgomp lets a team's threads spin (300,000 rounds, by default) between
parallel regions, but only while it manages no more threads than there are
CPUs; past that, it spins 100 rounds and sleeps (``env.c``,
``gomp_throttled_spin_count_var``), and each region pays the wake-ups.

This times one short parallel region (a sum over ``--items`` doubles), the
average over ``--regions`` launches from the main thread, in turn:

1. the main thread's team alone;
2. after a thread that made a team of ``--worker-threads`` has ended;
3. while a live worker thread (a ``ThreadPoolExecutor``'s, as in a hybrid
   run) holds such a team, idle;
4. after the worker released its team (``omp_pause_resource_all``, OpenMP
   5.0), its thread still alive; then what making the team again costs;
5. after that worker thread has ended.

Run it on an idle machine (garaphpy is not imported: its wait policy
does not apply).

Usage (from the repository root)::

    python bench/omp_teams.py [--threads N] [--worker-threads N] [--regions N] [--items N]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np


def openmp_runtime_release():
    """``omp_pause_resource_all(omp_pause_soft)`` of the OpenMP runtime numba
    loaded, in the calling thread; None where there is none."""
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if any(name in path for name in ("libgomp", "libiomp", "libomp")):
            runtime = ctypes.CDLL(path)
            release = getattr(runtime, "omp_pause_resource_all", None)
            return None if release is None else release(1)
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cores = len(os.sched_getaffinity(0))
    parser.add_argument("--threads", type=int, default=cores,
                        help=f"the main thread's team (default: every core, {cores})")
    parser.add_argument("--worker-threads", type=int, default=None,
                        help="the worker's team (default: --threads, more threads than cores)")
    parser.add_argument("--regions", type=int, default=20000,
                        help="timed launches of the region per case (default 20000)")
    parser.add_argument("--items", type=int, default=20000,
                        help="doubles summed by one region (default 20000)")
    args = parser.parse_args(argv)
    worker_threads = args.worker_threads or args.threads
    available = numba.config.NUMBA_NUM_THREADS
    for name, value in (("--threads", args.threads), ("--worker-threads", worker_threads)):
        if not 1 <= value <= available:
            parser.error(f"{name}={value}: expected 1..{available} (NUMBA_NUM_THREADS)")
    if args.regions < 1 or args.items < 1:
        parser.error("--regions and --items: expected positive integers")

    numba.config.THREADING_LAYER = "omp"

    @numba.njit(parallel=True, nogil=True)
    def region(items):
        total = 0.0
        for i in numba.prange(items.size):
            total += items[i]
        return total

    items = np.ones(args.items)
    numba.set_num_threads(args.threads)
    region(items)
    print(f"threading layer {numba.threading_layer()}, {cores} cores, main team "
          f"{args.threads} threads, worker team {worker_threads}, {args.regions} regions of "
          f"{args.items} items")

    def timed(label: str) -> None:
        for _ in range(min(args.regions, 200)):
            region(items)
        started = time.perf_counter()
        for _ in range(args.regions):
            region(items)
        print(f"  {label}: {(time.perf_counter() - started) / args.regions * 1e6:.1f} us "
              "per region", flush=True)

    def make_team() -> None:
        numba.set_num_threads(worker_threads)
        region(items)

    timed("the main team alone")
    ended = threading.Thread(target=make_team)
    ended.start()
    ended.join()
    timed("after a thread with a team ended")
    worker = ThreadPoolExecutor(max_workers=1)
    worker.submit(make_team).result()
    timed("a live worker thread holds a team")
    if worker.submit(openmp_runtime_release).result() is None:
        print("  (this OpenMP runtime has no omp_pause_resource_all)")
    else:
        timed("the live worker released its team")
        remade = []
        for _ in range(5):
            started = time.perf_counter()
            worker.submit(make_team).result()
            remade.append(time.perf_counter() - started)
            worker.submit(openmp_runtime_release).result()
        started = time.perf_counter()
        for _ in range(5):
            worker.submit(make_team).result()
        region_seconds = (time.perf_counter() - started) / 5
        print(f"  a region in the worker: {min(remade) * 1e3:.2f} ms making its team, "
              f"{region_seconds * 1e3:.2f} ms on a live team (fastest of 5, mean of 5)")
    worker.shutdown(wait=True)
    timed("after the worker thread ended")
    return 0


if __name__ == "__main__":
    sys.exit(main())
