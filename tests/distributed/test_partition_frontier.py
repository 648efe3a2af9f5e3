"""A partition's frontier (:mod:`garaphpy.distributed.frontier`) over in-process workers.

Three partitions of an RMAT graph cut into small pages step one after the
other, each iteration's changed pairs put straight into the readers'
inboxes (the exchange without Dask).  The unsettled in-edges a partition's
frontier keeps as its vertices settle equal a count over its owned vertices
after every iteration, and the values equal SciPy's BFS depths and
components.
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
import references as ref
from garaphpy.distributed import worker
from garaphpy.distributed.partition import cut_partitions
from garaphpy.programs import BUILTIN_PROGRAMS

pytest.importorskip("distributed")
pytest.importorskip("scipy")

PARTITIONS = 3


@pytest.fixture(scope="module")
def rmat(tmp_path_factory):
    return garaphpy.Graph.load("rmat:10", max_page_bytes=2048, max_shard_edges=128,
                               progress=False,
                               store=tmp_path_factory.mktemp("partition-frontier") / "rmat")


def _workers(graph, program: str, sources: np.ndarray) -> list:
    store = graph.store
    partitions = tuple(cut_partitions(store.in_offsets, PARTITIONS))
    workers = [worker.PartitionWorker(worker.WorkerSetup(
        str(store.path), BUILTIN_PROGRAMS[program](), partitions, index, sources, 2, False,
        False)) for index in range(PARTITIONS)]
    for reader in workers:
        for owner in workers:
            if owner is not reader:
                owner.mirrors.set_reader(reader.index, reader.reads[owner.index])
    return workers


def _run(graph, workers: list, after_step) -> np.ndarray:
    """Step the workers until none activates a vertex (``after_step(workers,
    rows)`` after each iteration); the values, the program's finalized."""
    no_aggregates = np.zeros(0, np.float64)
    for iteration in range(graph.num_vertices + 1):
        rows = [w._pull_step(iteration, no_aggregates) for w in workers]
        for sender, (_, changed) in zip(workers, rows):
            for reader, vertices in sender.mirrors.pairs_for(changed).items():
                workers[reader].inbox.put(0, iteration, "values",
                                          vertices.astype(graph.store.vertex_dtype),
                                          sender.values[vertices])
        after_step(workers, [row for row, _ in rows])
        if sum(row["activated"] for row, _ in rows) == 0:
            break
    values = np.concatenate([w.owned_values() for w in workers])
    return workers[0].setup.program.finalize(values)


def test_bfs_unsettled_in_edges_kept_as_vertices_settle_equal_a_recount(rmat):
    source = int(np.argmax(rmat.store.out_degree))
    workers = _workers(rmat, "bfs", np.array([source], np.int64))
    directions = set()

    def recount(workers, rows):
        for w, row in zip(workers, rows):
            directions.add((row["direction"], row["pushed"]))
            assert w.frontier.unsettled_in_edges() == w.frontier.recount_unsettled_in_edges()

    depths = _run(rmat, workers, recount)
    np.testing.assert_array_equal(depths, ref.bfs_scipy(rmat, [source]))
    # both of Beamer's steps ran, and the count was read by the rule
    assert {("pull", False), ("notify-pull", True)} <= directions
    settled = sum(w.frontier.owned_in_edges - w.frontier.unsettled_in_edges()
                  for w in workers)
    assert settled == int(rmat.store.in_degree[depths >= 0].sum())


def test_a_restored_frontier_counts_its_unsettled_in_edges_again(rmat):
    source = int(np.argmax(rmat.store.out_degree))
    workers = _workers(rmat, "bfs", np.array([source], np.int64))
    steps = []

    def restore_after_second(workers, rows):
        steps.append(rows)
        if len(steps) == 2:
            for w in workers:
                front = w.frontier
                front.settled_in_edges[0] = -1      # lost: the restore counts again
                front.settle_from_values(w.values, w._initial_copy(), w.attrs[4])
                assert front.unsettled_in_edges() == front.recount_unsettled_in_edges()
                assert front.settled_in_edges[0] > 0

    _run(rmat, workers, restore_after_second)
    assert len(steps) > 2


def test_cc_partitions_pull_every_vertex_first_and_give_scipys_components(rmat):
    graph = rmat.as_undirected()
    workers = _workers(graph, "cc", np.zeros(0, np.int64))
    first = []

    def note(workers, rows):
        if not first:
            first.extend(row["direction"] for row in rows)

    labels = _run(graph, workers, note)
    assert first == ["pull"] * PARTITIONS
    np.testing.assert_array_equal(labels, ref.components_scipy(graph))


def test_a_frontier_of_every_vertex_pulls_without_a_degree_prefix(rmat):
    workers = _workers(rmat.as_undirected(), "cc", np.zeros(0, np.int64))
    front = workers[1].frontier
    direction, frontier, prefix = front.direction()
    assert (direction, prefix) == ("pull", None)
    assert frontier.size == front.num_vertices
    assert front.out_edges(frontier) == front.num_edges == int(front.out_offsets[-1])
    half = frontier[::2]
    assert front.out_edges(half) == int(np.diff(front.out_offsets)[half].sum())


@pytest.mark.parametrize("first, size, count", [(0, 0, 0), (5, 1, 1), (64, 64, 64), (3, 1000, 0),
                                                (100, 1000, 1), (7, 100_003, 31_000),
                                                (0, 4096, 4096)])
def test_owned_vertices_in_order_match_numpys_sort(first, size, count):
    from garaphpy.kernels import cpu as kernels

    rng = np.random.default_rng(size + count)
    vertices = first + rng.permutation(size)[:count].astype(np.int64)
    marks = np.zeros((size + 63) // 64, np.uint64)
    np.testing.assert_array_equal(kernels.in_range_order(vertices, first, marks),
                                  np.sort(vertices))
    assert not marks.any()      # left zeroed for the next use
