"""Where an engine pull iteration of PageRank spends its time, by kernel (Garaph section 4.1).

Times each CPU kernel of one pull iteration on its own, called directly on
the graph's arrays (median of 9 calls after a warm-up call): the dangling
aggregate, the source-side precompute, the edge loop page by page (each
page's own time too), the edge loop as one launch over all pages, the
direct-gather edge loop, and the frontier scan; then a whole engine
iteration (``garaphpy.run``, median of 9) with and without the precompute,
and the two bare loops of ``bench/cpu.py``.  The difference between the
engine iteration and the sum of its kernels is the driver's Python.

Usage (from the repository root)::

    python bench/pull_phases.py [GRAPH] [THREADS]      # default rmat:22, every core
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numba  # noqa: E402
import numpy as np  # noqa: E402

import cpu as bench  # noqa: E402
import garaphpy  # noqa: E402
from garaphpy import config  # noqa: E402
from garaphpy.api import _compiled_program  # noqa: E402
from garaphpy.kernels import cpu as kernels  # noqa: E402
from garaphpy.programs import PageRank  # noqa: E402


def median_ms(call, repeat: int = 9) -> float:
    """Median milliseconds of ``call()`` over ``repeat`` calls after a warm-up call."""
    call()
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return float(np.median(seconds)) * 1e3


def main(argv: list[str]) -> int:
    spec = argv[0] if argv else "rmat:22"
    threads = int(argv[1]) if len(argv) > 1 else min(config.default_threads(),
                                                     numba.config.NUMBA_NUM_THREADS)
    warnings.simplefilter("ignore")
    numba.set_num_threads(threads)
    graph = garaphpy.Graph.load(spec, progress=False)
    in_offsets, sources, _ = graph.store.csc()
    out_degree = np.ascontiguousarray(graph.store.out_degree)
    n, m, pages = graph.num_vertices, graph.num_edges, graph.store.pages
    print(f"{spec}: {n:,} vertices, {m:,} edges, {len(pages)} pages, {threads} threads")
    rank, new_rank, contributions = np.full(n, 1.0 / n), np.empty(n), np.empty(n)
    ms = median_ms(lambda: bench.bare_pull_contrib(in_offsets, sources, out_degree, rank,
                                                   new_rank, contributions, bench.DAMPING))
    print(f"bare-contrib sweep {ms:.2f} ms")
    ms = median_ms(lambda: bench.bare_pull(in_offsets, sources, out_degree, rank, new_rank,
                                           bench.DAMPING))
    print(f"bare sweep {ms:.2f} ms")

    compiled = _compiled_program(PageRank())
    attrs = (out_degree, graph.store.in_degree, np.zeros(1), np.arange(n), np.zeros(n, bool))
    active = np.zeros(n, bool)
    boundary_vertex, boundary_accum, stats = np.empty(2, np.int64), np.empty(2), np.zeros(2)
    aggregates, no_weights = np.zeros(1), np.zeros(1)

    def pull(gather_call, gather_values, edge_begin, edge_end, first_vertex, end_vertex, parts):
        kernels.pull_range(gather_call, compiled.apply_call, compiled.activate_call,
                           compiled.combine, compiled.identity, in_offsets, sources, no_weights,
                           0, edge_begin, edge_end, first_vertex, end_vertex, rank, new_rank,
                           gather_values, attrs, aggregates, n, 1, active, parts,
                           boundary_vertex, boundary_accum, stats)

    def pull_pages(gather_call, gather_values):
        for page in pages:
            pull(gather_call, gather_values, page.edge_begin, page.edge_begin + page.num_edges,
                 page.first_vertex, page.end_vertex, threads)

    ms = median_ms(lambda: kernels.compute_aggregates(compiled.aggregate_call, rank, attrs, n,
                                                      0, np.zeros(1), threads))
    print(f"aggregates {ms:.2f} ms")
    ms = median_ms(lambda: kernels.source_contributions(compiled.source_gather_call, rank,
                                                        attrs, contributions))
    print(f"source_contributions {ms:.2f} ms")
    read = kernels.read_source_contribution
    ms = median_ms(lambda: pull_pages(read, contributions))
    print(f"pull_range per page (precomputed) {ms:.2f} ms")
    for page in pages:
        ms = median_ms(lambda: pull(read, contributions, page.edge_begin,
                                    page.edge_begin + page.num_edges, page.first_vertex,
                                    page.end_vertex, threads), repeat=5)
        print(f"   page of {page.num_edges:,} edges {ms:.2f} ms")
    for parts in (threads, 4 * threads):
        print(f"pull_range one range, {parts} parts (precomputed) "
              f"{median_ms(lambda: pull(read, contributions, 0, m, 0, n, parts)):.2f} ms")
    ms = median_ms(lambda: pull_pages(compiled.gather_call, rank))
    print(f"pull_range per page (direct) {ms:.2f} ms")
    active[:] = True
    print(f"frontier_of {median_ms(lambda: kernels.frontier_of(active, threads)):.2f} ms")
    for precompute in (True, False):
        config.CPU_SOURCE_PRECOMPUTE = precompute
        result = garaphpy.run(graph, PageRank, direction="pull", max_iterations=10,
                              tolerance=0.0, threads=threads)
        ms = np.median([r.seconds for r in result.iterations[1:]]) * 1e3
        print(f"engine iteration (precompute={precompute}) {ms:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
