"""CC's start over partitions: each partition's union-find forest, the
holders and links it sends, and the labels it merges, against SciPy's
connected components (the workers' three steps, over partitions in one
process whose messages arrive at once)."""

from __future__ import annotations

import numpy as np
import pytest

from types import SimpleNamespace

from garaphpy.distributed.components import UnionFindStart, compact_holders, \
    expand_holders, holders_bytes, partition_edges_both_ways, partition_forest, \
    partition_roots, tree_holders
from garaphpy.distributed.frontier import partition_out_edges
from garaphpy.distributed.exchange import Inbox, Mirrors
from garaphpy.distributed.links import PeerCalls
from garaphpy.distributed.partition import Partition, read_by

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


def _rmat_edges(rng, scale: int, edge_factor: int = 8):
    """R-MAT edges (a=0.57, b=c=0.19): skewed degrees, many isolated vertices."""
    count = edge_factor << scale
    sources = np.zeros(count, np.int64)
    targets = np.zeros(count, np.int64)
    for bit in range(scale):
        draw = rng.random(count)
        sources |= (draw >= 0.76).astype(np.int64) << bit
        targets |= (((draw >= 0.57) & (draw < 0.76)) | (draw >= 0.95)).astype(np.int64) << bit
    return sources, targets


def _grid_edges(rows: int, columns: int):
    vertex = np.arange(rows * columns).reshape(rows, columns)
    return (np.concatenate([vertex[:, :-1].ravel(), vertex[:-1, :].ravel()]),
            np.concatenate([vertex[:, 1:].ravel(), vertex[1:, :].ravel()]))


def _spanning_edges(rng, num_vertices: int, paths: int):
    """Paths that each visit vertices all over the range (every one crosses
    every partition, back and forth), and isolated vertices beside them."""
    walk = rng.permutation(num_vertices)[: num_vertices * 3 // 4]
    pieces = np.array_split(walk, paths)
    return (np.concatenate([piece[:-1] for piece in pieces]),
            np.concatenate([piece[1:] for piece in pieces]))


def _local_edges(rng, num_vertices: int, partitions: int, crossing: int):
    """Small clusters inside each partition's range (most vertices never read
    by another partition) and ``crossing`` edges between the ranges."""
    cluster = np.arange(num_vertices) // 16
    sources = np.arange(num_vertices)
    targets = cluster * 16 + rng.integers(0, 16, num_vertices)
    targets = np.minimum(targets, num_vertices - 1)
    width = num_vertices // partitions
    far = rng.integers(0, num_vertices, crossing)
    return (np.concatenate([sources, far]),
            np.concatenate([targets, (far + width) % num_vertices]))


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


class _Done:
    """A send's future, done at once."""

    def done(self):
        return True

    def result(self, timeout=None):
        return True


class _Partition(PeerCalls, UnionFindStart):
    """The state :class:`UnionFindStart` reads of a partition's worker, its
    messages delivered at once into the peers' inboxes (outside a Dask
    worker, :meth:`PeerCalls.tell` calls them in place)."""

    def __init__(self, index, ranges, in_offsets, sources, ids):
        r = ranges[index]
        self.index, self.first, self.end = index, r.first_vertex, r.end_vertex
        self.num_vertices, self.threads = in_offsets.size - 1, 1
        self.in_offsets, self.frontier = in_offsets, None
        self.sources = sources[in_offsets[self.first]:in_offsets[self.end]]
        self.attrs = (None, None, None, ids, None)
        self.store = SimpleNamespace(vertex_dtype=np.dtype(np.int32))
        self.setup = SimpleNamespace(exchange_timeout=1.0)
        self.reads = read_by([self.sources], ranges)
        self.mirrors, self.inbox = Mirrors(self.first, self.end), Inbox()
        self.values = ids.copy()
        self.next = self.values.copy()
        self.epoch, self.address = 0, "here"

    def _call(self, q, method, *arguments):
        getattr(self.peers[q], method + "_here")(*arguments)
        return _Done()

    def _wait(self, futures):
        pass


def _start(sources, targets, num_vertices, partitions, ids, keep=None):
    """The workers' union-find start over the partitions of a symmetric
    graph's in-edges (the three steps, one after the other on every
    partition): ``(labels, rows, forest_bytes, ranges, reads)``, each
    partition's values after it and its row, the bytes its whole forest
    would have sent its peers, the partitions and what each reads;
    ``keep``, a list, takes each partition's ``start_floor``."""
    sources, targets = np.concatenate([sources, targets]), np.concatenate([targets, sources])
    order = np.lexsort((sources, targets))
    sources, targets = sources[order].astype(np.int32), targets[order]
    in_offsets = np.zeros(num_vertices + 1, np.int64)
    np.cumsum(np.bincount(targets, minlength=num_vertices), out=in_offsets[1:])
    cuts = np.linspace(0, num_vertices, partitions + 1).astype(np.int64)
    ranges = [Partition(p, int(cuts[p]), int(cuts[p + 1]),
                        int(in_offsets[cuts[p + 1]] - in_offsets[cuts[p]]))
              for p in range(partitions)]
    workers = [_Partition(p, ranges, in_offsets, sources, ids) for p in range(partitions)]
    for worker in workers:
        worker.peers = workers
        for q, other in enumerate(workers):
            if q != worker.index:
                other.mirrors.set_reader(worker.index, worker.reads[q])
    for worker in workers:
        worker.share_holders()
    forest_bytes = [np.count_nonzero(w.forest != np.arange(w.forest.size)) * 8
                    * (partitions - 1) for w in workers]
    for worker in workers:
        worker.share_links()
    rows = [worker.start_from_union_find() for worker in workers]
    if keep is not None:
        keep.extend(worker.start_floor for worker in workers)
    return [w.values for w in workers], rows, forest_bytes, ranges, [w.reads for w in workers]


def _least_ids(sources, targets, num_vertices, ids):
    components = _components(sources, targets, num_vertices)
    least = np.full(components.max() + 1, np.iinfo(np.int64).max)
    np.minimum.at(least, components, ids)
    return least[components]


def test_a_partitions_forest_holds_every_edge_of_a_csr_without_reverses():
    rng = np.random.default_rng(3)
    num_vertices = 3000
    sources, targets = _random_edges(rng, num_vertices, 2500, giant=1500)
    offsets, out_targets = _csr(sources, targets, num_vertices)
    roots = partition_forest(offsets, out_targets)
    assert _same_partition(roots, _components(sources, targets, num_vertices))
    # each root is the least vertex of its tree
    assert (roots <= np.arange(num_vertices)).all() and (roots[roots] == roots).all()


@pytest.mark.parametrize("first, end", [(0, 3000), (0, 1200), (900, 2100), (2500, 3000)])
def test_a_partitions_edges_both_ways_give_its_forest_by_afforests_skip(first, end):
    rng = np.random.default_rng(5)
    num_vertices = 3000
    sources, targets = _random_edges(rng, num_vertices, 4000, giant=1800)
    # a partition's in-edges: those whose destination it owns, in CSC order
    owned = (targets >= first) & (targets < end)
    in_sources, in_targets = sources[owned], targets[owned]
    order = np.lexsort((in_sources, in_targets))
    in_sources, in_targets = in_sources[order].astype(np.int32), in_targets[order]
    in_offsets = np.zeros(num_vertices + 1, np.int64)
    np.cumsum(np.bincount(in_targets, minlength=num_vertices), out=in_offsets[1:])
    out_offsets, out_targets = partition_out_edges(in_sources, in_offsets, first, end,
                                                   num_vertices)
    offsets, both = partition_edges_both_ways(out_offsets, out_targets, in_sources,
                                              in_offsets, first, end)
    held = {(int(u), int(v)) for u, v in zip(np.repeat(np.arange(num_vertices),
                                                       np.diff(offsets)), both)}
    expected = {(int(u), int(v)) for u, v in zip(in_sources, in_targets)}
    assert held == expected | {(v, u) for u, v in expected}
    assert offsets[-1] == 2 * in_sources.size
    roots = partition_roots(offsets, both)
    np.testing.assert_array_equal(roots, partition_forest(out_offsets, out_targets))
    assert _same_partition(roots, _components(in_sources, in_targets, num_vertices))


def test_a_trees_holder_is_its_vertex_of_least_user_id():
    roots = np.array([0, 0, 2, 0, 2, 5])
    ids = np.array([50, 10, 70, 30, 60, 1])
    np.testing.assert_array_equal(tree_holders(roots, ids), [1, 1, 4, 1, 4, 5])


def test_holders_go_as_the_most_frequent_one_and_the_others_by_position():
    holders = np.array([7, 7, 3, 7, 9, 7])
    message = compact_holders(holders, np.int32)
    assert message[0] == 7 and message[1].tolist() == [2, 4]
    assert holders_bytes(message, np.int32) == 4 * 5
    np.testing.assert_array_equal(expand_holders(message, holders.size), holders)
    empty = compact_holders(np.zeros(0, np.int64), np.int32)
    assert expand_holders(empty, 0).size == 0


GRAPHS = {
    "rmat": lambda rng: (*_rmat_edges(rng, 11), 1 << 11),
    "grid": lambda rng: (*_grid_edges(40, 30), 1200),
    "spanning": lambda rng: (*_spanning_edges(rng, 3000, 7), 3000),
    "two-sided": lambda rng: (*_random_edges(rng, 2000, 1800, giant=900), 2000),
}


@pytest.mark.parametrize("increasing", [False, True])
@pytest.mark.parametrize("partitions", [2, 4])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_every_partition_labels_what_it_holds_with_its_components_least_id(name,
                                                                          partitions,
                                                                          increasing):
    """Each partition's labels of its owned vertices and of those it reads
    equal SciPy's components' least user ids, the one-process labels; the
    user ids a shuffle, or increasing with the internal ids (each tree's root
    its holder)."""
    rng = np.random.default_rng(partitions)
    sources, targets, num_vertices = GRAPHS[name](rng)
    ids = np.arange(num_vertices, dtype=np.int64) * 3 + 7 if increasing \
        else rng.permutation(num_vertices).astype(np.int64) * 3 + 7
    labels, rows, _, ranges, reads = _start(sources, targets, num_vertices, partitions, ids)
    expected = _least_ids(sources, targets, num_vertices, ids)
    for p, r in enumerate(ranges):
        held = np.union1d(np.arange(r.first_vertex, r.end_vertex), np.concatenate(reads[p]))
        np.testing.assert_array_equal(labels[p][held], expected[held])
        # a label elsewhere is still some vertex's of the same component
        assert (labels[p] >= expected).all()
        assert rows[p]["lowered"] == np.count_nonzero(
            expected[r.first_vertex:r.end_vertex] < ids[r.first_vertex:r.end_vertex])


@pytest.mark.parametrize("partitions", [2, 4])
def test_few_crossing_vertices_send_far_below_the_whole_forest(partitions):
    """Clusters inside the partitions and a few edges between them: a
    partition sends a few hundred bytes, not its forest's pairs (O(|V|) a
    peer, what each sent before)."""
    rng = np.random.default_rng(11)
    num_vertices = 8000
    sources, targets = _local_edges(rng, num_vertices, partitions, crossing=20)
    ids = np.arange(num_vertices, dtype=np.int64)
    labels, rows, forest_bytes, ranges, reads = _start(sources, targets, num_vertices,
                                                       partitions, ids)
    expected = _least_ids(sources, targets, num_vertices, ids)
    for p, r in enumerate(ranges):
        held = np.union1d(np.arange(r.first_vertex, r.end_vertex), np.concatenate(reads[p]))
        np.testing.assert_array_equal(labels[p][held], expected[held])
        assert forest_bytes[p] > 8 * (partitions - 1) * num_vertices // partitions // 2
        assert rows[p]["sent_bytes"] < forest_bytes[p] / 20
        assert rows[p]["sent_bytes"] == rows[p]["holder_bytes"] + rows[p]["link_bytes"]
        # with two partitions each partition's own links join every tree
        assert (rows[p]["link_bytes"] == 0) == (partitions == 2)


@pytest.mark.parametrize("partitions", [2, 4])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_merge_by_trees_gives_the_general_merges_values(name, partitions, monkeypatch):
    """Where user ids increase with the internal ones, the labels lowered
    tree by tree (:func:`lower_to_merged_labels`) are those of the merge
    over every held vertex (:func:`merged_labels`), every value and count."""
    from garaphpy.distributed import components

    rng = np.random.default_rng(partitions)
    sources, targets, num_vertices = GRAPHS[name](rng)
    ids = np.arange(num_vertices, dtype=np.int64) * 3 + 7
    fast, fast_rows, *_ = _start(sources, targets, num_vertices, partitions, ids)
    monkeypatch.setattr(components, "increasing_ids", lambda ids: False)
    general, general_rows, *_ = _start(sources, targets, num_vertices, partitions, ids)
    for p in range(partitions):
        np.testing.assert_array_equal(fast[p], general[p])
        assert fast_rows[p]["lowered"] == general_rows[p]["lowered"]


@pytest.mark.parametrize("partitions", [2, 4])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_start_floor_is_the_least_label_its_partition_holds(name, partitions):
    """Where user ids increase with the internal ones the start knows the
    least label of a vertex its partition holds an edge of, without a pass
    over the labels: the next pull's floor, at most every value it gathers
    (every in-neighbour's of an owned vertex)."""
    rng = np.random.default_rng(partitions + 1)
    sources, targets, num_vertices = GRAPHS[name](rng)
    ids = np.arange(num_vertices, dtype=np.int64) * 3 + 7
    floors = []
    labels, _, _, ranges, _ = _start(sources, targets, num_vertices, partitions, ids,
                                     keep=floors)
    both_sources = np.concatenate([sources, targets])
    both_targets = np.concatenate([targets, sources])
    for p, r in enumerate(ranges):
        owned = (both_targets >= r.first_vertex) & (both_targets < r.end_vertex)
        held = np.union1d(both_sources[owned], both_targets[owned])
        if not held.size:
            assert floors[p] is None
            continue
        assert floors[p] == labels[p][held].min()
        assert floors[p] <= labels[p][both_sources[owned]].min()
