"""Bytes per edge of pages as stored and packed (issue 17, garaphpy/kernels/packed.py).

A size, not a time: every page of each graph is packed on the host
(:func:`garaphpy.kernels.packed.pack_page`) with its values and without
them, and the bytes are summed over the pages.

Usage::

    python bench/packed_bytes.py rmat:20 --undirected
    python bench/packed_bytes.py ../shared/data/web-NotreDame.txt.gz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import garaphpy  # noqa: E402
from garaphpy.kernels import packed  # noqa: E402


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
    args = parser.parse_args(argv)
    for spec in args.graphs:
        options = {} if Path(spec).exists() else {
            "generator_options": {"weighted": not args.unweighted}}
        graph = garaphpy.Graph.load(spec, progress=False, **options)
        if args.undirected:
            graph = graph.as_undirected()
        store = graph.store
        sizes = bytes_per_edge(store)
        print(f"{spec}: {store.num_vertices:,} vertices, {store.num_edges:,} edges, "
              f"{len(store.pages)} pages; bytes per edge: "
              + ", ".join(f"{name} {value:.2f}" for name, value in sizes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
