"""CC's pull after the partitions' union-find start takes its floor from the
start (:attr:`~garaphpy.distributed.components.UnionFindStart.start_floor`),
not from a pass over every vertex's value: in-process workers (the start's
messages put straight into the peers' inboxes), on a symmetric RMAT graph (a
Kronecker graph) and a grid, against SciPy's components."""

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


class _Taken:
    """A one-way message's future, taken at once."""

    def done(self):
        return True

    def result(self, timeout=None):
        return True


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    root = tmp_path_factory.mktemp("start-floor")
    return {"kron": garaphpy.Graph.load("rmat:10", max_page_bytes=2048, max_shard_edges=128,
                                        store=root / "rmat", progress=False).as_undirected(),
            "grid": garaphpy.Graph.load("grid:30x20", store=root / "grid", progress=False)}


def _started(graph, partitions: int) -> list:
    """The partitions' workers after the union-find start's three steps."""
    store = graph.store
    cut = tuple(cut_partitions(store.in_offsets, partitions))
    workers = [worker.PartitionWorker(worker.WorkerSetup(
        str(store.path), BUILTIN_PROGRAMS["cc"](), cut, index, np.zeros(0, np.int64), 2,
        False, False, union_find_start=True)) for index in range(partitions)]
    for w in workers:
        w.peers, w.peer_addresses = workers, [w.address] * partitions
        w.tell = (lambda w: lambda q, method, *arguments: (
            w._call(q, method, *arguments), _Taken())[1])(w)
        for owner in workers:
            if owner is not w:
                owner.mirrors.set_reader(w.index, w.reads[owner.index])
    for step in ("share_holders", "share_links", "start_from_union_find"):
        for w in workers:
            getattr(w, step)()
    return workers


@pytest.mark.parametrize("partitions", [2, 3])
@pytest.mark.parametrize("name", ["kron", "grid"])
def test_the_pull_after_the_start_skips_by_its_floor_and_changes_nothing(
        graphs, name, partitions, monkeypatch):
    graph = graphs[name]
    workers = _started(graph, partitions)
    floors = [w.start_floor for w in workers]
    assert all(floor is not None for floor in floors)
    scans = []
    best_source_value = worker.kernels.best_source_value
    monkeypatch.setattr(worker.kernels, "best_source_value",
                        lambda *a: scans.append(1) or best_source_value(*a))
    rows = [w._pull_step(0, np.zeros(0))[0] for w in workers]
    assert not scans
    for w, floor in zip(workers, floors):
        assert w.floor[0] == floor and w.start_floor is None
        # at most the pass's floor would be: never a skip the pass would not make
        found = np.zeros(1, w.floor.dtype)
        assert best_source_value(w.values, w.attrs[0], worker.kernels.FLOOR_MIN, found)
        assert floor >= found[0]
    assert sum(row["activated"] for row in rows) == 0
    assert sum(row["changed"] for row in rows) == 0
    values = np.concatenate([w.owned_values() for w in workers])
    np.testing.assert_array_equal(values, ref.components_scipy(graph))
    alone = garaphpy.run(graph, "cc", mode="cpu")
    np.testing.assert_array_equal(values, alone.values)
    # the next full pull scans again
    scans.clear()
    for w in workers:
        w.frontier.forget()
        w._pull_step(1, np.zeros(0))
    assert len(scans) == partitions


@pytest.mark.parametrize("partitions", [2, 3])
@pytest.mark.parametrize("name", ["kron", "grid"])
def test_holders_of_a_run_of_the_forest_are_the_gathered_holders(graphs, name, partitions):
    """A peer's read vertices are a run of the partition's forest vertices
    (:func:`~garaphpy.distributed.components.read_runs`), and their holders'
    message read from that run is the one gathered through the numbering."""
    from garaphpy.distributed import components
    from garaphpy.kernels import union_find

    store = graphs[name].store
    cut = tuple(cut_partitions(store.in_offsets, partitions))
    for index in range(partitions):
        w = worker.PartitionWorker(worker.WorkerSetup(
            str(store.path), BUILTIN_PROGRAMS["cc"](), cut, index, np.zeros(0, np.int64), 2,
            False, False, union_find_start=True))
        vertices, numbering, offsets, targets, sampled, parent = w.union_find_edges
        roots = components.partition_roots(offsets, targets, sampled, parent)
        for q in (q for q in range(partitions) if q != index):
            run = w.read_runs[q]
            assert run is not None
            gathered = components.compact_holders(
                union_find.holders_of(w.reads[q], numbering, roots, vertices),
                store.vertex_dtype)
            from_run = components.compact_run_holders(roots[run[0]:run[1]], vertices,
                                                      store.vertex_dtype)
            assert gathered[0] == from_run[0]
            np.testing.assert_array_equal(gathered[1], from_run[1])
            np.testing.assert_array_equal(gathered[2], from_run[2])
