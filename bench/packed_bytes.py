"""Bytes per edge of pages as stored and packed (garaphpy/kernels/packed.py).

A size, not a time: every page of each graph is packed on the host
(:func:`garaphpy.kernels.packed.pack_page`) with its values and without
them, and the bytes are summed over the pages.

Usage::

    python -m bench packed-bytes rmat:20 --undirected
    python -m bench packed-bytes ../shared/data/web-NotreDame.txt.gz

A configuration of bench/harness.py: each graph is a case of one trial and
no warm-up (its time is the packing's), verified to pack smaller without
the values than with them; the sizes are the row's figures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import garaphpy
from garaphpy.kernels import packed

from bench import harness


def bytes_per_edge(store) -> dict:
    """Stored and packed bytes per edge, with and without the edge values."""
    totals = {"stored": 0, "packed": 0, "stored, no values": 0, "packed, no values": 0}
    for info in store.pages:
        page = store.read_page(info.index)
        shards = store.page_shards(info.index)
        with_values = packed.pack_page(page.sources, page.idxoff, page.weights, shards,
                                       store.num_vertices)[0]
        without = packed.pack_page(page.sources, page.idxoff, None, shards,
                                   store.num_vertices)[0]
        totals["stored"] += info.nbytes
        totals["stored, no values"] += info.weights_offset
        totals["packed"] += with_values.nbytes
        totals["packed, no values"] += without.nbytes
    return {name: total / max(store.num_edges, 1) for name, total in totals.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graphs", nargs="+", help="graph files or generator specs")
    parser.add_argument("--undirected", action="store_true", help="made symmetric first")
    parser.add_argument("--unweighted", action="store_true",
                        help="generated graphs without weights (default: weights 1..255)")
    harness.add_common_options(parser, trials=1, warmup=0)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)

    def load(spec: str):
        options = {} if Path(spec).exists() else {
            "generator_options": {"weighted": not args.unweighted}}
        graph = garaphpy.Graph.load(spec, progress=False, **options)
        return (graph.as_undirected() if args.undirected else graph).store

    def measured(store) -> harness.Measurement:
        sizes = bytes_per_edge(store)
        return harness.Measurement(result=sizes, metrics=sizes)

    cases = [harness.Case(
        spec, measured, params={"graph": spec, "undirected": args.undirected},
        setup=lambda spec=spec: load(spec),
        verify=lambda sizes: sizes["packed, no values"] <= sizes["packed"]
        or "packed without the values is larger than with them")
        for spec in args.graphs]
    rows = harness.run_cases("packed_bytes", cases, args)
    for spec, row in zip(args.graphs, rows):
        print(f"{spec}: bytes per edge: " + ", ".join(
            f"{name} {value:.2f}" for name, value in row["metrics"][0].items()))
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
