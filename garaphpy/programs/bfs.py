"""Breadth-first search depths (Garaph section 6; GAPBS ``src/bfs.cc`` verifier).

Definition: depth(v) = the fewest edges on a path from any source to v;
depth(s) = 0 for the sources; -1 for vertices no source reaches.  Edge
values are ignored.

Vertex program: int64 values; init 0 at the sources and the sentinel
``UNREACHED`` = 2**62 elsewhere; gather ``src + 1`` (the sentinel is far
below the int64 maximum, so ``UNREACHED + 1`` cannot overflow); sum = min;
apply keeps the smaller depth; a vertex whose depth dropped is active.
:meth:`BFS.finalize` maps the sentinel to -1, which is what users see.

The verifier checks GAPBS's invariants, on depths instead of parents:

1. every source has depth 0, every depth is >= -1;
2. for every edge (u, v) with u reached: v is reached and
   depth(v) <= depth(u) + 1;
3. every reached non-source v has an in-neighbour u that is reached with
   depth(u) == depth(v) - 1;
4. (from 2) an unreached vertex has no reached in-neighbour.

By induction on the depth, 1-3 make each depth exact: 2 bounds it above
by the true one, 3 gives a real path of that length from a source.
"""

from __future__ import annotations

import numpy as np

from ..program import VertexProgram
from . import _common

#: The engine value of an unreached vertex (what ``init`` writes); finalize maps it to -1.
UNREACHED = 2**62


class BFS(VertexProgram):
    """Breadth-first search depth from one or more sources.

    depth(v) = fewest edges on a path from a source; 0 at the sources; -1
    when no source reaches v (after :meth:`finalize`; the engine holds
    ``UNREACHED`` = 2**62 for such vertices).

    Parameters of the run
    ---------------------
    sources : one or more vertices (needs_sources).

    Values
    ------
    int64 depths; unreachable = -1.

    Execution
    ---------
    sync by default (async reaches the same depths); sum = min; sources
    active first; converges when no depth drops, after at most the
    eccentricity + 1 iterations.

    Verifier
    --------
    GAPBS's invariants: sources at 0; depth(v) <= depth(u) + 1 on every
    edge leaving a reached u; every reached non-source has a reached
    in-neighbour one level up; unreached vertices have no reached
    in-neighbour.
    """

    value_dtype = np.int64
    value_name = "depth"
    sum = "min"
    fixed_point = True          # stops only when no vertex is active (no tolerance)
    execution = "sync"
    # a vertex reached in level i gets depth i + 1 from any parent in level i: its
    # first reached in-neighbour ends its scan (Beamer's bottom-up step)
    final_once_set = True
    apply_keeps_best = True     # the GPU pushes its sparse iterations (see VertexProgram)
    max_iterations = 1_000_000_000
    initially_active = "sources"
    needs_sources = True

    def init(is_source):
        # 4611686018427387904 == 2**62 == UNREACHED (a literal: the subset has no globals)
        return 0 if is_source else 4611686018427387904

    def gather(src):
        return src + 1

    def apply(value, accum):
        return min(value, accum)

    def activate(new, old):
        return new < old

    def finalize(self, values):
        """Unreached vertices (engine value >= UNREACHED) become -1, in place
        (the run's own copy of the values)."""
        values = np.asarray(values, dtype=np.int64)
        np.putmask(values, values >= UNREACHED, np.int64(-1))
        return values

    def predecessors(self, graph, result):
        """BFS parents (internal ids; -1 for the sources and unreached vertices),
        from the depths: an in-neighbour one level up, the least id on ties
        (GAPBS's parent array, SciPy's ``breadth_first_order`` predecessors)."""
        depth = np.asarray(result.values, dtype=np.int64)

        def tight(src, dst, weight):
            return (depth[src] >= 0) & (depth[dst] == depth[src] + 1)

        return _common.path_tree(graph, result.sources, tight)

    def verify(self, graph, result):
        checked = "BFS: sources at depth 0, depth(v) <= depth(u)+1, parents one level up"
        depth, problem = _common.result_values(graph, result, np.int64)
        if problem:
            return _common.failed(checked, problem)
        sources, problem = _common.result_sources(graph, result)
        if problem:
            return _common.failed(checked, problem)
        n = graph.num_vertices
        is_source = np.zeros(n, dtype=bool)
        is_source[sources] = True
        reached = depth >= 0
        too_deep = np.zeros(n, dtype=bool)
        has_parent = np.zeros(n, dtype=bool)
        for src, dst, _ in _common.edge_chunks(graph):
            from_reached = reached[src]
            # 2. u reached => v reached and depth(v) <= depth(u) + 1
            wrong = from_reached & (~reached[dst] | (depth[dst] > depth[src] + 1))
            too_deep[dst[wrong]] = True
            # 3. a reached in-neighbour one level up
            parent = from_reached & reached[dst] & (depth[src] == depth[dst] - 1)
            has_parent[dst[parent]] = True
        problems = [
            ("source not at depth 0", is_source & (depth != 0)),
            ("depth below -1", depth < -1),
            ("an in-edge from a reached vertex gives a smaller depth", too_deep),
            ("reached, but no in-neighbour one level up", reached & ~is_source & ~has_parent),
        ]
        return _common.report(graph, depth, checked, problems,
                              f"{int(reached.sum()):,} of {n:,} vertices reached")
