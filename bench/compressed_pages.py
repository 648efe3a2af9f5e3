"""Compressed pages against plain ones: bytes an edge, decode speed, reads.

For each graph a plain store and a store built with ``compress``
(:mod:`garaphpy.storage.page_codec`) are built (or reused) untimed, and

* ``bytes``: the bytes an edge of the pages as stored, plain and
  compressed, and the ratio (a size: its time is nothing);
* ``decode``: every page's stored bytes, held in memory, decoded into plain
  page images by ``--threads`` numba threads (each page's blocks in
  parallel); the figure is decoded bytes (the plain images) a second;
* ``read/plain`` and ``read/compressed``: every page read with
  :meth:`~garaphpy.storage.store.Store.read_page` (checksums checked, a
  compressed page decoded) after an untimed pass, so the block files sit in
  the page cache and no disk is timed;
* ``stream/plain`` and ``stream/compressed``: every page streamed by a
  :class:`~garaphpy.storage.page_io.PageReader` (``O_DIRECT`` where the
  file system allows it, else buffered reads evicted from the page cache),
  what a run whose pages do not fit in host memory reads each iteration,
  and ``stream/stored``: the compressed store's pages handed over as stored
  (``decode="stored"``), what the GPU's reader does (the GPU decodes);
  each with the process's CPU seconds beside the time;
* with ``--gpu-fraction F`` (a GPU), ``gpu/PROGRAM/resident`` (the plain
  store, every page on the device), ``gpu/PROGRAM/F/plain`` and
  ``gpu/PROGRAM/F/compressed``: ``--gpu-iterations`` iterations of each of
  ``--gpu-programs`` with ``gpu_memory`` = the resident run's vertex data + F
  of the plain pages' bytes, every page in host memory; the plain store's
  pages stream packed, the compressed store's cross the bus compressed and
  the GPU decodes them (where the plan's ``compressed_pages`` rule says so).
  Figures: the iteration time and the bytes to the device an iteration;
  ``--gpu-only`` leaves out the host's cases (decode, read, stream).

Every decoded page is checked against the plain store's page (sources,
IdxOff, values).

Usage (from the repository root)::

    python -m bench compressed-pages ../shared/data/web-NotreDame.txt.gz rmat:20
    python -m bench compressed-pages rmat:22 --undirected --threads 16
    python -m bench compressed-pages rmat:24 --undirected --gpu-fraction 0.25 \
        --gpu-only --store-dir /data/stores --trials 3

A configuration of bench/harness.py: one case per graph and measurement.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import warnings
from pathlib import Path

import numba
import numpy as np

import garaphpy
from garaphpy._numba_setup import parallel_section
from garaphpy.storage.page_io import PageReader

from bench import harness


def load(spec: str, undirected: bool, compress: bool, store_dir: str | None):
    """The store of ``spec`` (symmetric with ``undirected``), plain or compressed."""
    options = {"directed": False} if undirected else {}
    if not Path(spec).exists():
        options["generator_options"] = {"weighted": False}
    store = None
    if store_dir is not None:
        name = Path(spec).name.replace(":", "-")
        store = Path(store_dir) / f"{name}{'-sym' if undirected else ''}" \
            f"{'-compressed' if compress else ''}"
    return garaphpy.Graph.load(spec, store=store, progress=False, compress=compress,
                               **options)


def same_pages(plain, pages) -> str | None:
    """None when every page of ``pages`` equals the plain store's, else what differs."""
    for index, page in pages:
        expected = plain.read_page(index)
        for name in ("sources", "idxoff", "weights"):
            got, want = getattr(page, name), getattr(expected, name)
            if (got is None) != (want is None) or (want is not None
                                                   and not np.array_equal(got, want)):
                return f"page {index}: {name} differ"
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graphs", nargs="+", help="graph files or generator specs")
    parser.add_argument("--undirected", action="store_true", help="made symmetric (kron)")
    parser.add_argument("--threads", type=int, default=numba.config.NUMBA_NUM_THREADS,
                        help="numba threads decoding (default: all)")
    parser.add_argument("--store-dir", default=None,
                        help="where the stores go (default: garaphpy's cache)")
    parser.add_argument("--gpu-fraction", type=float, default=None,
                        help="also run on the GPU at this fraction of the page bytes")
    parser.add_argument("--gpu-only", action="store_true",
                        help="with --gpu-fraction: only the sizes and the GPU runs")
    parser.add_argument("--gpu-programs", default="pagerank",
                        help="programs of the GPU runs, comma-separated")
    parser.add_argument("--gpu-iterations", type=int, default=20,
                        help="iterations of each GPU run (PageRank runs them all)")
    harness.add_common_options(parser, trials=3, warmup=1)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    if args.gpu_only and args.gpu_fraction is None:
        parser.error("--gpu-only needs --gpu-fraction")
    numba.set_num_threads(args.threads)

    stores = {}

    def stores_of(spec):
        if spec not in stores:
            stores[spec] = tuple(load(spec, args.undirected, compress, args.store_dir)
                                 for compress in (False, True))
        return tuple(graph.store for graph in stores[spec])

    def sizes(pair):
        plain, packed = pair
        edges = max(plain.num_edges, 1)
        figures = {"plain B/edge": sum(p.disk_bytes for p in plain.pages) / edges,
                   "compressed B/edge": sum(p.disk_bytes for p in packed.pages) / edges}
        figures["smaller by"] = figures["plain B/edge"] / figures["compressed B/edge"]
        return harness.Measurement(result=figures, metrics=figures)

    def decode_setup(spec):
        plain, packed = stores_of(spec)
        stored = []
        for info in packed.pages:
            data = np.empty(info.stored_nbytes, np.uint8)
            packed._read_stored(info, data, check=True)
            stored.append(data)
        images = [np.empty(info.nbytes, np.uint8) for info in packed.pages]
        return plain, packed, stored, images

    def decode(state):
        _, packed, stored, images = state
        with parallel_section():
            for info, data, image in zip(packed.pages, stored, images):
                packed.decode_page(info, data, image, parallel=True)
        decoded = sum(info.nbytes for info in packed.pages)
        return harness.Measurement(result=state, metrics={"decoded bytes": decoded})

    def decode_verify(state):
        plain, packed, _, images = state
        return same_pages(plain, [(info.index, packed.page_views(info, image))
                                          for info, image in zip(packed.pages, images)])

    def read_all(store):
        return [(info.index, store.read_page(info.index)) for info in store.pages]

    def stream_all(store, decode="threads"):
        with PageReader(store, decode=decode) as reader:
            started = time.process_time()
            count = sum(1 for _ in reader.stream())
            return harness.Measurement(result=count, metrics={
                "bytes read": reader.bytes_read, "direct": all(reader.direct_io),
                "cpu s": time.process_time() - started})

    cases = []
    for spec in args.graphs:
        params = {"graph": spec, "undirected": args.undirected, "threads": args.threads}
        cases.append(harness.Case(f"{spec}/bytes", sizes, params=params, trials=1, warmup=0,
                                  setup=lambda spec=spec: stores_of(spec)))
        if not args.gpu_only:
            cases.append(harness.Case(f"{spec}/decode", decode, params=params,
                                      setup=lambda spec=spec: decode_setup(spec),
                                      verify=decode_verify))
        for which, index in () if args.gpu_only else (("plain", 0), ("compressed", 1)):
            cases.append(harness.Case(
                f"{spec}/read/{which}", read_all, params=params,
                setup=lambda spec=spec, index=index: stores_of(spec)[index],
                verify=lambda pages, spec=spec: same_pages(stores_of(spec)[0], pages)))
            cases.append(harness.Case(
                f"{spec}/stream/{which}", stream_all, params=params,
                setup=lambda spec=spec, index=index: stores_of(spec)[index]))
        if not args.gpu_only:
            cases.append(harness.Case(
                f"{spec}/stream/stored", lambda store: stream_all(store, "stored"),
                params=params, setup=lambda spec=spec: stores_of(spec)[1]))
        if args.gpu_fraction is not None:
            cases += gpu_cases(spec, lambda spec=spec: (stores_of(spec), stores[spec])[1],
                               args, params)
    rows = harness.run_cases("compressed_pages", cases, args)
    by_name = {row["case"]: row for row in rows}
    for spec in args.graphs:
        size = by_name[f"{spec}/bytes"]["metrics"][0]
        if args.gpu_only:
            print(f"{spec}{' (symmetric)' if args.undirected else ''}: "
                  f"{size['plain B/edge']:.2f} -> {size['compressed B/edge']:.2f} bytes an "
                  f"edge ({size['smaller by']:.2f}x smaller)")
            print_gpu_rows(spec, args, by_name)
            continue
        decode_row = by_name[f"{spec}/decode"]
        decoded = decode_row["metrics"][0]["decoded bytes"]
        best = decode_row["min_s"]
        read = {w: by_name[f"{spec}/read/{w}"]["min_s"] for w in ("plain", "compressed")}
        ways = ("plain", "compressed", "stored")
        stream = {w: by_name[f"{spec}/stream/{w}"]["min_s"] for w in ways}
        stream_cpu = {w: statistics.median(m["cpu s"] for m in by_name[f"{spec}/stream/{w}"]
                                           ["metrics"]) for w in ways}
        print(f"{spec}{' (symmetric)' if args.undirected else ''}: "
              f"{size['plain B/edge']:.2f} -> {size['compressed B/edge']:.2f} bytes an edge "
              f"({size['smaller by']:.2f}x smaller); decode {decoded / best / 1e9:.2f} GB/s "
              f"decoded on {args.threads} threads; all pages from the page cache "
              f"{read['plain'] * 1e3:.1f} ms plain, {read['compressed'] * 1e3:.1f} ms "
              f"compressed; streamed (CPU ms in brackets) "
              + ", ".join(f"{stream[w] * 1e3:.1f} [{stream_cpu[w] * 1e3:.1f}] ms {w}"
                          for w in ways))
        if args.gpu_fraction is not None:
            print_gpu_rows(spec, args, by_name)
    return harness.exit_status(rows)


def gpu_run(graph, program: str, iterations: int, budget: int | None) -> harness.Measurement:
    """``iterations`` of ``program`` on the GPU alone within ``budget`` (None: no
    budget); the iterations' time and bytes to the device."""
    from garaphpy.programs import BUILTIN_PROGRAMS

    gc.collect()        # the last run's engine and pinned buffers go before this one
    options = {"mode": "gpu", "max_iterations": iterations}
    if program == "pagerank":
        options["tolerance"] = 0.0
    if BUILTIN_PROGRAMS[program].needs_sources:
        options["sources"] = [0]
    if budget is not None:
        options["gpu_memory"] = budget
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
        result = garaphpy.run(graph, program, **options)
    records = result.iterations
    decision = next((r.decisions["compressed_pages"] for r in records
                     if "compressed_pages" in r.decisions), None)
    count = max(len(records), 1)
    return harness.Measurement(result=result, seconds=result.seconds, metrics={
        "iterations": result.num_iterations,
        "ms an iteration": result.seconds * 1e3 / count,
        "bytes to device an iteration": sum(r.bytes_to_device for r in records) / count,
        "compressed_pages": decision})


def gpu_cases(spec: str, graphs, args, params: dict) -> list:
    """The GPU runs of ``spec`` (``graphs()``: its plain and compressed graphs)."""
    from garaphpy.programs import BUILTIN_PROGRAMS
    from garaphpy.scheduler.gpu_engine import GpuEngine

    cases = []
    for program in args.gpu_programs.split(","):
        reference: dict = {}
        verify = harness.same_as_first(reference, "the resident run",
                                       rtol=1e-6 if program == "pagerank" else None,
                                       atol=1e-12)

        budgets: dict = {}

        def budget(program=program, budgets=budgets):
            if "bytes" in budgets:
                return budgets["bytes"]
            plain = graphs()[0]
            instance = BUILTIN_PROGRAMS[program]()
            sizing = GpuEngine(plain, instance, np.zeros(1, np.int64),
                               synchronous=instance.execution == "sync")
            vertex = sizing.plan.vertex_bytes
            del sizing
            gc.collect()
            budgets["bytes"] = vertex + int(args.gpu_fraction
                                            * sum(p.nbytes for p in plain.store.pages))
            return budgets["bytes"]

        gpu_params = {**params, "program": program, "fraction": args.gpu_fraction,
                      "iterations": args.gpu_iterations}
        cases.append(harness.Case(
            f"{spec}/gpu/{program}/resident",
            lambda program=program: gpu_run(graphs()[0], program, args.gpu_iterations, None),
            params=gpu_params, verify=verify))
        for which, index in (("plain", 0), ("compressed", 1)):
            cases.append(harness.Case(
                f"{spec}/gpu/{program}/{args.gpu_fraction:g}/{which}",
                lambda program=program, index=index, budget=budget: gpu_run(
                    graphs()[index], program, args.gpu_iterations, budget()),
                params=gpu_params, verify=verify))
    return cases


def print_gpu_rows(spec: str, args, by_name: dict) -> None:
    """The GPU runs of ``spec``: time an iteration and bytes to the device."""
    for program in args.gpu_programs.split(","):
        prefix = f"{spec}/gpu/{program}/"
        resident = by_name[prefix + "resident"]
        base = resident["min_s"]
        print(f"{spec} {program} on the GPU, {args.gpu_iterations} iterations: resident "
              f"{resident['metrics'][0]['ms an iteration']:.2f} ms an iteration")
        for which in ("plain", "compressed"):
            row = by_name[f"{prefix}{args.gpu_fraction:g}/{which}"]
            metrics = row["metrics"][0]
            decision = metrics["compressed_pages"]
            print(f"  {args.gpu_fraction:g} budget, {which:10s}: "
                  f"{metrics['ms an iteration']:.2f} ms an iteration "
                  f"({row['min_s'] / base:.2f}x resident), "
                  f"{metrics['bytes to device an iteration'] / 1e6:.1f} MB to the device "
                  f"an iteration"
                  + ("" if decision is None else
                     f"; compressed_pages {'chosen' if decision['choice'] else 'not chosen'}"))


if __name__ == "__main__":
    sys.exit(main())
