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

    python bench/pull_phases.py [GRAPH] [THREADS] [--trials 9] [--json rows.jsonl]
                                # default rmat:22, every core

A configuration of bench/harness.py: every line printed is a case (a kernel
call, or an engine run whose time is its median iteration after the first),
each with one untimed call before its ``--trials`` (default 9; 5 for a single
page's kernel).
"""

from __future__ import annotations

import argparse
import functools
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numba  # noqa: E402
import numpy as np  # noqa: E402

import cpu as bench  # noqa: E402
import harness  # noqa: E402
import garaphpy  # noqa: E402
from garaphpy import api, config  # noqa: E402
from garaphpy.api import _compiled_program  # noqa: E402
from garaphpy.kernels import cpu as kernels  # noqa: E402
from garaphpy.programs import PageRank  # noqa: E402


def engine_iteration(graph, threads: int, precompute: bool) -> harness.Measurement:
    """A 10-iteration PageRank pull; its time is the median iteration after the first."""
    result = api.execute(graph, PageRank, direction="pull", max_iterations=10,
                         tolerance=0.0, threads=threads,
                         turned_off=() if precompute else {"source_precompute"})
    return harness.Measurement(result=result,
                               seconds=float(np.median([r.seconds
                                                        for r in result.iterations[1:]])))


def phase_cases(graph, threads: int) -> list:
    """The kernels of one pull iteration, each called alone, and engine runs."""
    in_offsets, sources, _ = graph.store.csc()
    out_degree = np.ascontiguousarray(graph.store.out_degree)
    n, m, pages = graph.num_vertices, graph.num_edges, graph.store.pages
    rank, new_rank, contributions = np.full(n, 1.0 / n), np.empty(n), np.empty(n)
    compiled = _compiled_program(PageRank())
    attrs = (out_degree, graph.store.in_degree, np.zeros(1), np.arange(n), np.zeros(n, bool))
    active = np.zeros(n, bool)
    boundary_vertex, boundary_accum, stats = np.empty(2, np.int64), np.empty(2), np.zeros(2)
    aggregates, no_weights = np.zeros(1), np.zeros(1)
    no_floor = np.zeros(1)      # floor mode 0: PageRank has no floor (CC's pulls do)

    def pull(gather_call, gather_values, edge_begin, edge_end, first_vertex, end_vertex, parts):
        kernels.pull_range(gather_call, compiled.apply_call, compiled.activate_call,
                           compiled.combine, compiled.kernels.aggregate_tuple,
                           compiled.identity, in_offsets, sources, no_weights,
                           0, edge_begin, edge_end, first_vertex, end_vertex, rank, new_rank,
                           gather_values, attrs, aggregates, n, 1, active, parts,
                           boundary_vertex, boundary_accum, stats, 0, no_floor)

    def pull_pages(gather_call, gather_values):
        for page in pages:
            pull(gather_call, gather_values, page.edge_begin, page.edge_begin + page.num_edges,
                 page.first_vertex, page.end_vertex, threads)

    def all_active():
        active[:] = True

    read = kernels.read_source_contribution
    cases = [
        harness.Case("bare-contrib sweep", lambda: bench.bare_pull_contrib(
            in_offsets, sources, out_degree, rank, new_rank, contributions, bench.DAMPING)),
        harness.Case("bare sweep", lambda: bench.bare_pull(
            in_offsets, sources, out_degree, rank, new_rank, bench.DAMPING)),
        harness.Case("aggregates", lambda: kernels.compute_aggregates(
            compiled.aggregate_call, rank, attrs, n, 0, np.zeros(1),
            kernels.balanced_vertex_starts(in_offsets, threads))),
        harness.Case("source_contributions", lambda: kernels.source_contributions(
            compiled.source_gather_call, rank, attrs, contributions)),
        harness.Case("pull_range per page (precomputed)",
                     lambda: pull_pages(read, contributions))]
    for index, page in enumerate(pages):
        cases.append(harness.Case(
            f"page of {page.num_edges:,} edges",
            functools.partial(pull, read, contributions, page.edge_begin,
                              page.edge_begin + page.num_edges, page.first_vertex,
                              page.end_vertex, threads),
            params={"page": index, "edges": page.num_edges}, trials=5))
    for parts in (threads, 4 * threads):
        cases.append(harness.Case(f"pull_range one range, {parts} parts (precomputed)",
                                  functools.partial(pull, read, contributions, 0, m, 0, n,
                                                    parts), params={"parts": parts}))
    cases += [
        harness.Case("pull_range per page (direct)",
                     lambda: pull_pages(compiled.gather_call, rank)),
        harness.Case("frontier_of", lambda _: kernels.frontier_of(active, threads),
                     setup=all_active)]
    for precompute in (True, False):
        cases.append(harness.Case(
            f"engine iteration (precompute={precompute})",
            functools.partial(engine_iteration, graph, threads, precompute),
            params={"precompute": precompute},
            verify=lambda result: all(r.direction == "pull" and r.edges_processed == m
                                      for r in result.iterations)
            or "an iteration was not a full pull"))
    return cases


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("graph", nargs="?", default="rmat:22",
                        help="graph spec (default rmat:22)")
    parser.add_argument("threads", nargs="?", type=int, default=None,
                        help="CPU threads (default: every core)")
    harness.add_common_options(parser, trials=9, warmup=1)
    args = parser.parse_args(argv)
    harness.check_common_options(parser, args)
    spec = args.graph
    threads = args.threads or min(config.default_threads(), numba.config.NUMBA_NUM_THREADS)
    warnings.simplefilter("ignore")
    numba.set_num_threads(threads)
    graph = garaphpy.Graph.load(spec, progress=False)
    print(f"{spec}: {graph.num_vertices:,} vertices, {graph.num_edges:,} edges, "
          f"{len(graph.store.pages)} pages, {threads} threads")
    rows = []
    for case in phase_cases(graph, threads):
        (row,) = harness.run_cases("pull_phases", [case], args,
                                   extra={"graph": spec, "threads": threads})
        indent = "   " if "page" in row["params"] else ""
        print(f"{indent}{row['case']} {row['median_s'] * 1e3:.2f} ms", flush=True)
        rows.append(row)
    return harness.exit_status(rows)


if __name__ == "__main__":
    sys.exit(main())
