"""Single-source widest path (maximum bottleneck path).

Definition: width(v) = max over paths s ~> v from any source s of the
smallest edge weight on the path; width(s) = +inf (the empty path has no
bottleneck); 0 for vertices no source reaches.  Weights must be finite and
>= 0, so that every reachable vertex has width >= 0; a vertex reached only
through zero-weight edges has width 0 too, like an unreachable one.

Vertex program: float64 values; init +inf at the sources, 0 elsewhere;
gather ``min(src, weight)``; sum = max; apply keeps the larger width; a
vertex whose width grew is active.  Like SSSP, label-correcting: sync and
async reach the same widths.

The verifier checks, in numpy:

1. every source has width +inf, no width is negative or NaN;
2. for every edge (u, v, w): width(v) >= min(width(u), w);
3. every non-source with width > 0 is reached from a source along *tight*
   edges, width(v) == min(width(u), w).

1 and 2 give width >= the true width (induction along a widest path); 3
makes every positive width the bottleneck of a real path from a source, so
width <= the truth.  Reachability along tight edges matters here: a
tight-edge cycle of equal widths could otherwise claim a width no source
gives it.  Widths are edge weights, so equality is exact up to a relative
four ulps (no absolute floor: a wrong width of any size is caught).
"""

from __future__ import annotations

import math

import numpy as np

from ..program import VertexProgram
from . import _common

#: Relative tolerance of the verifier's float comparisons (four ulps).
RTOL = _common.PATH_RTOL


class SSWP(VertexProgram):
    """Single-source widest path: the best bottleneck (max-min) from the sources.

    width(v) = max over paths from a source of the minimum edge weight on
    the path; +inf at the sources; 0 for vertices no source reaches (and for
    those reached only through zero-weight edges).

    Parameters of the run
    ---------------------
    sources : one or more vertices (needs_sources).

    Values
    ------
    float64 widths; unreachable = 0.0.

    Execution
    ---------
    sync by default; async on the CPU alone, which reaches the same widths in
    fewer iterations; sum = max; sources active first; converges when no width
    grows.  Needs edge weights, finite and >= 0.

    Verifier
    --------
    Sources at +inf; width(v) >= min(width(u), w) on every edge; every
    positive width reached from a source along tight edges
    width(v) == min(width(u), w).
    """

    value_dtype = np.float64
    value_name = "width"
    sum = "max"
    fixed_point = True          # stops only when no vertex is active (no tolerance)
    execution = "async"         # same values, fewer iterations (see VertexProgram)
    value_priority = True       # ... in buckets of values on the CPU (see VertexProgram)
    apply_keeps_best = True     # the GPU pushes its sparse iterations (see VertexProgram)
    max_iterations = 1_000_000_000
    initially_active = "sources"
    needs_weights = True
    weight_domain = "nonnegative"
    needs_sources = True

    def init(is_source):
        return math.inf if is_source else 0.0

    def gather(src, weight):
        return min(src, weight)

    def apply(value, accum):
        return max(value, accum)

    def activate(new, old):
        return new > old

    def predecessors(self, graph, result):
        """Each vertex's predecessor on a widest path (internal ids; -1 for the
        sources and unreached vertices), from the widths: a tight in-edge
        min(width(u), w) == width(v) > 0, ties as :func:`_common.path_tree`."""
        width = np.asarray(result.values, dtype=np.float64)

        def tight(src, dst, weight):
            through = np.minimum(width[src], weight)
            return (through > 0) & _common.close(width[dst], through, RTOL)

        return _common.path_tree(graph, result.sources, tight)

    def verify(self, graph, result):
        checked = "SSWP: sources at +inf, no edge widens, positive widths on tight paths"
        width, sources, is_source, failure = _common.checked_inputs(
            graph, result, checked, weights="nonnegative", requirement="SSWP needs finite weights >= 0")
        if failure:
            return failure
        n = graph.num_vertices
        widens = np.zeros(n, dtype=bool)
        tight_src, tight_dst = [], []
        for src, dst, weight in _common.edge_chunks(graph):
            through = np.minimum(width[src], weight)      # min(width(u), w)
            # 2. width(v) >= min(width(u), w), up to the tolerance (NaN is a violation)
            violation = ~_common.at_most(through, width[dst], RTOL)
            widens[dst[violation]] = True
            tight = (through > 0) & _common.close(width[dst], through, RTOL)
            tight_src.append(src[tight])
            tight_dst.append(dst[tight])
        tight_src = np.concatenate(tight_src) if tight_src else np.zeros(0, np.int64)
        tight_dst = np.concatenate(tight_dst) if tight_dst else np.zeros(0, np.int64)
        # 3. every positive width lies on a tight path from a source
        on_tight_path = _common.reachable(n, tight_src, tight_dst, sources)
        with np.errstate(invalid="ignore"):
            positive = width > 0
        problems = [
            ("source not at width +inf", is_source & (width != math.inf)),
            ("negative or NaN width", np.isnan(width) | (width < 0)),
            ("an in-edge gives a wider path", widens),
            ("positive width on no tight path from a source",
             positive & ~is_source & ~on_tight_path),
        ]
        return _common.report(graph, width, checked, problems,
                              f"{int(positive.sum()):,} of {n:,} vertices reached")
