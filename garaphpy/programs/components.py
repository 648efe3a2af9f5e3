"""Connected components by min-label propagation (Garaph section 6, "CC").

Definition: two vertices are in one component when an undirected path joins
them (edge directions are ignored: weakly connected components of a
directed graph).  The label of a vertex is the smallest *original* id (the
user's id, as in the input) in its component, so labels do not depend on
the internal numbering.

Vertex program: ``needs_undirected`` (the engine runs on the symmetrized
graph); int64 values; init the vertex's own user id (parameter ``vertex``);
gather the neighbour's label; sum = min; apply keeps the smaller label; a
vertex whose label dropped is active.  It declares ``shortcut_labels``: a
run on the CPU alone ends each iteration with pointer jumping (a vertex
takes the label of the vertex its label names, Shiloach-Vishkin's
shortcut), which reaches the same labels in far fewer iterations on
high-diameter graphs (a 2000x2000 grid: 4 instead of 915).  Such a run on a
symmetric graph (CC's always is) starts its first iteration from the labels
of a sampled union-find (Afforest, :mod:`garaphpy.kernels.union_find`),
which are the fixed point: that iteration's pull confirms them, and the run
ends after it.

The verifier computes the components again by a different method: a
vectorized union-find (Shiloach-Vishkin style hooking of roots onto smaller
roots, then full path compression) over the edges in numpy, and compares
every label with the smallest original id of the vertex's union-find set.
This implies the weaker checks (every edge joins equal labels; each label
is the minimum id of its class; as many labels as components).
"""

from __future__ import annotations

import numpy as np

from ..program import VertexProgram
from . import _common


class ConnectedComponents(VertexProgram):
    """Connected components; label = the smallest original vertex id of the component.

    Edge directions are ignored (``needs_undirected``: the engine
    symmetrizes a directed graph), so on directed input these are the weakly
    connected components.

    Values
    ------
    int64 labels, in the user's ids; every vertex has one (an isolated
    vertex is its own component).

    Execution
    ---------
    sync by default; async on the CPU alone, which reaches the same labels in
    fewer iterations, with labels shortcut after each iteration
    (``shortcut_labels``); sum = min; all vertices active first; converges
    when no label drops (at most the largest component diameter + 1
    iterations).

    Verifier
    --------
    Independent union-find over the edges (numpy); each label must equal the
    smallest original id of its union-find set.
    """

    value_dtype = np.int64
    value_name = "component"
    sum = "min"
    fixed_point = True          # stops only when no vertex is active (no tolerance)
    values_are_vertices = True  # a label is a vertex's id: outputs show the user's id
    execution = "async"         # same values, fewer iterations (see VertexProgram)
    apply_keeps_best = True     # the GPU pushes its sparse iterations (see VertexProgram)
    max_iterations = 1_000_000_000
    initially_active = "all"
    needs_undirected = True
    shortcut_labels = True      # min-label propagation over user ids (see VertexProgram)
    # a gather passes its source's label on: a vertex holding the least label of any
    # vertex with out-edges is done, and CPU pulls skip its in-edges (see VertexProgram)
    gather_no_better_than_source = True

    def init(vertex):
        return vertex

    def gather(src):
        return src

    def apply(value, accum):
        return min(value, accum)

    def activate(new, old):
        return new < old

    def verify(self, graph, result):
        checked = "CC: label == smallest original id of its union-find component"
        labels, problem = _common.result_values(graph, result, np.int64)
        if problem:
            return _common.failed(checked, problem)
        n = graph.num_vertices
        root = union_find_roots(graph)
        original = np.asarray(graph.original_ids(), dtype=np.int64)
        smallest = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(smallest, root, original)
        expected = smallest[root]
        components = int(np.count_nonzero(root == np.arange(n)))
        labels_found = int(np.unique(labels).size)
        return _common.report(
            graph, labels, checked,
            [("label is not the smallest id of its component", labels != expected)],
            f"{components:,} components, {labels_found:,} distinct labels")


def union_find_roots(graph):
    """Root of every vertex's set after uniting the endpoints of every edge.

    The root is the smallest internal id of the set.  Each pass over the
    edges hooks the larger root of every edge whose endpoints lie in
    different sets onto the smaller one (``np.minimum.at`` resolves
    conflicting hooks), then compresses every path; passes repeat until an
    edge pass finds nothing to unite.  ``parent[x] <= x`` always, so the
    forest stays acyclic.
    """
    n = graph.num_vertices
    parent = np.arange(n, dtype=np.int64)
    changed = True
    while changed:
        changed = False
        for src, dst, _ in _common.edge_chunks(graph):
            ru, rv = parent[src], parent[dst]          # roots: parent is fully compressed
            differ = ru != rv
            if not differ.any():
                continue
            changed = True
            np.minimum.at(parent, np.maximum(ru[differ], rv[differ]),
                          np.minimum(ru[differ], rv[differ]))
            _compress(parent)
    return parent


def _compress(parent):
    """Point every vertex at its root, in place (pointer jumping)."""
    while True:
        grand = parent[parent]
        if np.array_equal(grand, parent):
            return
        parent[:] = grand
