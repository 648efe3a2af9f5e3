"""CC's start over a cluster: the partitions' union-find forests merged (Afforest, GAPBS's ``cc``; Garaph section 6's CC).

The one-process CPU run of a min-label program on a symmetric graph starts
from a union-find over every edge (:mod:`garaphpy.kernels.union_find`): the
labels are then the fixed point, and the one pull that follows confirms
them.  A partition holds a share of the edges, the in-edges of its own
vertices, so its union-find alone gives parts of components.  Each partition
links *every* one of its edges (:func:`partition_forest`: Afforest, less its
skip of the largest tree's out-edges, since the partition's CSR holds an
edge once, from its source; only the edges inside that tree are skipped),
sends its forest, the (vertex, root) pairs of the vertices not their own
root, to every other partition, and merges the P forests
(:func:`merged_labels`): a vertex's trees in all of them hold every edge of
the graph, so the merge gives the components, and each vertex's label, the
least user id of its component, on every partition alike, for the owned
vertices and those it reads.  The run's iterations then confirm the labels.
"""

from __future__ import annotations

import numpy as np

from .._numba_setup import parallel_section
from ..kernels import union_find


def partition_forest(out_offsets: np.ndarray, out_targets: np.ndarray,
                     rounds: int = 2) -> np.ndarray:
    """The root of every vertex (int64, the least internal id of its tree) in a
    union-find over every edge of a partition's CSR (its in-edges turned
    around): Afforest's sampled start (``rounds`` out-edges a vertex, then
    the most frequent root), then every other edge but those inside that
    root's tree (:func:`~garaphpy.kernels.union_find.link_beside`)."""
    parent = np.arange(out_offsets.shape[0] - 1, dtype=np.int64)
    if parent.size == 0:
        return parent
    with parallel_section():
        union_find.link_rounds(out_offsets, out_targets, parent, 0, rounds)
        largest = union_find.most_frequent_root(parent, union_find.SAMPLE_SIZE)
        union_find.link_beside(out_offsets, out_targets, parent, largest, rounds)
    return parent


def forest_pairs(roots: np.ndarray, index_dtype) -> tuple[np.ndarray, np.ndarray]:
    """``(vertices, their roots)``: the vertices of ``roots`` not their own root."""
    linked = np.flatnonzero(roots != np.arange(roots.shape[0])).astype(index_dtype)
    return linked, roots[linked].astype(index_dtype)


def merged_labels(roots: np.ndarray, forests: list, ids: np.ndarray) -> np.ndarray:
    """Every vertex's least user id over its component in the union of the
    forests: ``roots`` (this partition's) and ``forests``, the other
    partitions' (vertex, root) pairs."""
    n = roots.shape[0]
    parent = roots.copy()
    hooks = np.arange(n, dtype=np.int64)
    one_each = np.arange(n + 1, dtype=np.int64)
    with parallel_section():
        for vertices, tree_roots in forests:
            hooks[:] = np.arange(n)
            hooks[np.asarray(vertices, np.int64)] = tree_roots
            # a CSR of one edge a vertex, v -> its root in the other forest
            union_find.link_outside(one_each, hooks, parent, -1, 0)
    least = np.asarray(ids, np.int64).copy()
    np.minimum.at(least, parent, ids)
    return least[parent]
