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
  what a run whose pages do not fit in host memory reads each iteration.

Every decoded page is checked against the plain store's page (sources,
IdxOff, values).

Usage (from the repository root)::

    python -m bench compressed-pages ../shared/data/web-NotreDame.txt.gz rmat:20
    python -m bench compressed-pages rmat:22 --undirected --threads 16

A configuration of bench/harness.py: one case per graph and measurement.
"""

from __future__ import annotations

import argparse
import sys
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
                               **options).store


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
    harness.add_common_options(parser, trials=3, warmup=1)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    numba.set_num_threads(args.threads)

    stores = {}

    def stores_of(spec):
        if spec not in stores:
            stores[spec] = tuple(load(spec, args.undirected, compress, args.store_dir)
                                 for compress in (False, True))
        return stores[spec]

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

    def stream_all(store):
        with PageReader(store) as reader:
            count = sum(1 for _ in reader.stream())
            return harness.Measurement(result=count, metrics={
                "bytes read": reader.bytes_read, "direct": all(reader.direct_io)})

    cases = []
    for spec in args.graphs:
        params = {"graph": spec, "undirected": args.undirected, "threads": args.threads}
        cases.append(harness.Case(f"{spec}/bytes", sizes, params=params, trials=1, warmup=0,
                                  setup=lambda spec=spec: stores_of(spec)))
        cases.append(harness.Case(f"{spec}/decode", decode, params=params,
                                  setup=lambda spec=spec: decode_setup(spec),
                                  verify=decode_verify))
        for which, index in (("plain", 0), ("compressed", 1)):
            cases.append(harness.Case(
                f"{spec}/read/{which}", read_all, params=params,
                setup=lambda spec=spec, index=index: stores_of(spec)[index],
                verify=lambda pages, spec=spec: same_pages(stores_of(spec)[0], pages)))
            cases.append(harness.Case(
                f"{spec}/stream/{which}", stream_all, params=params,
                setup=lambda spec=spec, index=index: stores_of(spec)[index]))
    rows = harness.run_cases("compressed_pages", cases, args)
    by_name = {row["case"]: row for row in rows}
    for spec in args.graphs:
        size = by_name[f"{spec}/bytes"]["metrics"][0]
        decode_row = by_name[f"{spec}/decode"]
        decoded = decode_row["metrics"][0]["decoded bytes"]
        best = decode_row["min_s"]
        read = {w: by_name[f"{spec}/read/{w}"]["min_s"] for w in ("plain", "compressed")}
        stream = {w: by_name[f"{spec}/stream/{w}"]["min_s"] for w in ("plain", "compressed")}
        print(f"{spec}{' (symmetric)' if args.undirected else ''}: "
              f"{size['plain B/edge']:.2f} -> {size['compressed B/edge']:.2f} bytes an edge "
              f"({size['smaller by']:.2f}x smaller); decode {decoded / best / 1e9:.2f} GB/s "
              f"decoded on {args.threads} threads; all pages from the page cache "
              f"{read['plain'] * 1e3:.1f} ms plain, {read['compressed'] * 1e3:.1f} ms "
              f"compressed; streamed {stream['plain'] * 1e3:.1f} ms plain, "
              f"{stream['compressed'] * 1e3:.1f} ms compressed")
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
