"""Single-source shortest paths, Bellman-Ford style (Garaph section 6, "SSSP").

Definition: dist(v) = min over paths s ~> v from any source s of the sum of
the edge weights on the path; dist(s) = 0; +inf when no source reaches v.
Weights must be finite and >= 0 (an unweighted graph counts every edge as
1).  Several sources give the distance to the nearest one.

Vertex program (Garaph Figure 3): init 0 at the sources, +inf elsewhere;
gather ``src + weight`` along every in-edge; sum = min; apply keeps the
smaller of the old and the gathered distance; a vertex whose distance
dropped is active.  The sources start active; the run converges when no
vertex is active (label-correcting, so sync and async both reach the same
distances).

The verifier checks edge-relaxation invariants in numpy (Gunrock/GAPBS
habit), not a second shortest-path run:

1. every source has distance 0, no distance is negative or NaN;
2. for every edge (u, v, w): dist(v) <= dist(u) + w (no edge can improve);
3. every vertex with a finite distance is reached from a source along
   *tight* edges, dist(v) == dist(u) + w.  Together with 2 this proves the
   distances exact: 2 makes them lower bounds... of nothing more than the
   truth, 3 makes each one the length of a real path.  Reachability along
   tight edges (instead of "has a tight in-edge") also rejects a cycle of
   zero-weight edges claiming a distance no source gives it.

Equality is tested with a relative tolerance of four ulps and no absolute
floor (the engine adds float64 values to edge values widened to float64,
the verifier does the same sums, so honest results match exactly, and a
wrong distance of any size, 1e-12 included, is caught).
"""

from __future__ import annotations

import math

import numpy as np

from ..program import VertexProgram
from . import _common

#: Relative tolerance of the verifier's float comparisons (four ulps).
RTOL = _common.PATH_RTOL


class SSSP(VertexProgram):
    """Single-source shortest paths over non-negative edge weights.

    dist(v) = min over paths from a source of the summed weights; 0 at the
    sources; +inf for vertices no source reaches.

    Parameters of the run
    ---------------------
    sources : one or more vertices (needs_sources); the distance is to the
        nearest source.

    Values
    ------
    float64 distances; unreachable = +inf (``math.inf``).

    Execution
    ---------
    sync by default; async on the CPU alone, which reaches the same distances in
    fewer iterations; sum = min; sources active first; converges when no
    distance drops, within |V| - 1 iterations (Bellman-Ford), so
    ``max_iterations`` is no practical limit.  Needs edge weights, finite
    and >= 0.

    Verifier
    --------
    Relaxation invariants in numpy: sources at 0; dist(v) <= dist(u) + w on
    every edge; every finite distance reached from a source along tight
    edges dist(v) == dist(u) + w (relative tolerance four ulps).
    """

    value_dtype = np.float64
    value_name = "distance"
    sum = "min"
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
        return 0.0 if is_source else math.inf

    def gather(src, weight):
        return src + weight

    def apply(value, accum):
        return min(value, accum)

    def activate(new, old):
        return new < old

    def predecessors(self, graph, result):
        """Each vertex's predecessor on a shortest path (internal ids; -1 for the
        sources and unreached vertices), from the distances: a tight in-edge
        dist(u) + w == dist(v), one BFS level of tight edges closer to a
        source, the least id on ties (:func:`_common.path_tree`)."""
        dist = np.asarray(result.values, dtype=np.float64)

        def tight(src, dst, weight):
            through = dist[src] + weight
            return np.isfinite(through) & _common.close(dist[dst], through, RTOL)

        return _common.path_tree(graph, result.sources, tight)

    def verify(self, graph, result):
        checked = "SSSP: sources at 0, no edge relaxes, finite distances on tight paths"
        dist, sources, is_source, failure = _common.checked_inputs(
            graph, result, checked, weights="nonnegative", requirement="SSSP needs finite weights >= 0")
        if failure:
            return failure
        n = graph.num_vertices
        relaxes = np.zeros(n, dtype=bool)
        tight_src, tight_dst = [], []
        for src, dst, weight in _common.edge_chunks(graph):
            through = dist[src] + weight            # dist(u) + w
            # 2. dist(v) <= dist(u) + w, up to the tolerance (NaN counts as a violation)
            violation = ~_common.at_most(dist[dst], through, RTOL)
            relaxes[dst[violation]] = True
            tight = np.isfinite(through) & _common.close(dist[dst], through, RTOL)
            tight_src.append(src[tight])
            tight_dst.append(dst[tight])
        tight_src = np.concatenate(tight_src) if tight_src else np.zeros(0, np.int64)
        tight_dst = np.concatenate(tight_dst) if tight_dst else np.zeros(0, np.int64)
        # 3. every finite distance lies on a tight path from a source
        on_tight_path = _common.reachable(n, tight_src, tight_dst, sources)
        finite = np.isfinite(dist)
        problems = [
            ("source not at distance 0", is_source & (dist != 0)),
            ("negative or NaN distance", np.isnan(dist) | (dist < 0)),
            ("an in-edge gives a shorter distance", relaxes),
            ("finite distance on no tight path from a source", finite & ~on_tight_path),
        ]
        reached = int(finite.sum())
        return _common.report(graph, dist, checked, problems,
                              f"{reached:,} of {n:,} vertices reached")
