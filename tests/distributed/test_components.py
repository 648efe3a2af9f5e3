"""CC's start over partitions: each partition's union-find forest and their
merge, against SciPy's connected components."""

from __future__ import annotations

import numpy as np
import pytest

from garaphpy.distributed.components import forest_pairs, merged_labels, partition_forest

csgraph = pytest.importorskip("scipy.sparse.csgraph")
sparse = pytest.importorskip("scipy.sparse")


def _random_edges(rng, num_vertices: int, num_edges: int, giant: int):
    """Random edges among the first ``giant`` vertices (one large component,
    as Afforest's sample finds) and a few among the others."""
    sources = np.concatenate([rng.integers(0, giant, num_edges),
                              rng.integers(giant, num_vertices, num_vertices // 20)])
    targets = np.concatenate([rng.integers(0, giant, num_edges),
                              rng.integers(giant, num_vertices, num_vertices // 20)])
    return sources, targets


def _csr(sources, targets, num_vertices):
    order = np.lexsort((targets, sources))
    offsets = np.zeros(num_vertices + 1, np.int64)
    np.cumsum(np.bincount(sources, minlength=num_vertices), out=offsets[1:])
    return offsets, targets[order].astype(np.int32)


def _components(sources, targets, num_vertices):
    matrix = sparse.coo_matrix((np.ones(sources.size), (sources, targets)),
                               shape=(num_vertices, num_vertices))
    _, labels = csgraph.connected_components(matrix, directed=True, connection="weak")
    return labels


def _same_partition(a, b):
    """Whether two labelings group the vertices alike."""
    pairs = np.unique(np.stack([a, b]), axis=1)
    return np.unique(pairs[0]).size == pairs.shape[1] == np.unique(pairs[1]).size


def test_a_partitions_forest_holds_every_edge_of_a_csr_without_reverses():
    rng = np.random.default_rng(3)
    num_vertices = 3000
    sources, targets = _random_edges(rng, num_vertices, 2500, giant=1500)
    offsets, out_targets = _csr(sources, targets, num_vertices)
    roots = partition_forest(offsets, out_targets)
    assert _same_partition(roots, _components(sources, targets, num_vertices))
    # each root is the least vertex of its tree
    assert (roots <= np.arange(num_vertices)).all() and (roots[roots] == roots).all()


@pytest.mark.parametrize("partitions", [2, 3])
def test_merged_forests_give_every_vertexs_least_id_over_its_component(partitions):
    rng = np.random.default_rng(partitions)
    num_vertices = 2000
    sources, targets = _random_edges(rng, num_vertices, 1800, giant=900)
    sources, targets = np.concatenate([sources, targets]), np.concatenate([targets, sources])
    ids = np.arange(num_vertices, dtype=np.int64) * 3 + 7      # increasing user ids
    cuts = np.linspace(0, num_vertices, partitions + 1).astype(np.int64)
    forests = []
    for p in range(partitions):
        mine = (targets >= cuts[p]) & (targets < cuts[p + 1])
        forests.append(partition_forest(*_csr(sources[mine], targets[mine], num_vertices)))
    components = _components(sources, targets, num_vertices)
    least = np.full(components.max() + 1, np.iinfo(np.int64).max)
    np.minimum.at(least, components, ids)
    for p in range(partitions):
        others = [forest_pairs(forests[q], np.int32) for q in range(partitions) if q != p]
        np.testing.assert_array_equal(merged_labels(forests[p], others, ids),
                                      least[components])
