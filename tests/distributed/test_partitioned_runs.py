"""Partitioned runs over a Dask LocalCluster against the one-process run.

BFS, SSSP, CC and SSWP give exactly the values of the one-process run;
PageRank the same number of iterations and values within 1e-9 relative (the
one-process reference keeps its contributions in float64, as the workers
do).  On a generated RMAT graph cut into many small pages (vertices split
between pages, partitions cutting pages), a grid and a SNAP file.
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
import references as ref
from garaphpy.api import execute

from helpers import SHARED_DATA

pytest.importorskip("distributed")

EXACT = [("bfs", True), ("sssp", True), ("cc", False), ("sswp", True)]


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    """rmat in many pages of a few shards (vertices split between pages), a
    weighted grid, and ca-HepPh with hashed weights where it is here."""
    root = tmp_path_factory.mktemp("partitioned")
    found = {
        "rmat": garaphpy.Graph.load("rmat:10", weights="hash", store=root / "rmat",
                                    max_page_bytes=2048, max_shard_edges=128,
                                    progress=False),
        "grid": garaphpy.Graph.load("grid:24x20", store=root / "grid", progress=False),
    }
    hepph = SHARED_DATA / "ca-HepPh.txt.gz"
    if hepph.exists():
        found["ca-HepPh"] = garaphpy.Graph.load(hepph, weights="hash", store=root / "hepph",
                                                progress=False)
    return found


def _source(graph) -> int:
    """A vertex (user id) with many out-edges, which reaches much of the graph."""
    return int(graph.original_ids(np.array([np.argmax(graph.store.out_degree)]))[0])


@pytest.mark.parametrize("name", ["rmat", "grid", "ca-HepPh"])
@pytest.mark.parametrize("program, sourced", EXACT)
def test_exact_programs_equal_the_one_process_run(dask_client, graphs, name, program,
                                                  sourced):
    if name not in graphs:
        pytest.skip(f"{name} is not in {SHARED_DATA}")
    graph = graphs[name]
    sources = [_source(graph)] if sourced else None
    alone = garaphpy.run(graph, program, mode="cpu", sources=sources)
    spread = garaphpy.run(graph, program, sources=sources, client=dask_client)
    assert spread.converged and alone.converged
    np.testing.assert_array_equal(spread.values, alone.values)
    workers = len(dask_client.scheduler_info()["workers"])
    assert len(spread.plan.distributed["partitions"]) == workers
    for record in spread.iterations:
        assert len(record.workers) == workers
    assert sum(r.exchanged_bytes for r in spread.iterations) > 0


@pytest.mark.parametrize("name", ["rmat", "grid", "ca-HepPh"])
@pytest.mark.parametrize("turned_off", [(), ("float32_contributions",)])
def test_pagerank_within_1e_9_at_the_same_iteration_count(dask_client, graphs, name,
                                                          turned_off):
    """The partitions hold their contributions as the one process does: in
    float32 by its rule (the same bits), in float64 where the run turns that
    off (a vertex whose in-edges a page cut sums them in another order)."""
    if name not in graphs:
        pytest.skip(f"{name} is not in {SHARED_DATA}")
    graph = graphs[name]
    alone = execute(graph, "pagerank", mode="cpu", turned_off=turned_off)
    spread = execute(graph, "pagerank", client=dask_client, turned_off=turned_off)
    float32 = alone.plan.cpu.float32_contributions
    assert float32 == (not turned_off)
    for partition in spread.plan.distributed["partitions"]:
        assert partition["float32_contributions"] == float32
        assert partition["wait_policy"] and partition["threads"] == 1
    assert all(("float32_contributions" in r.decisions) == float32 for r in spread.iterations)
    assert spread.num_iterations == alone.num_iterations
    np.testing.assert_allclose(spread.values, alone.values, rtol=1e-9, atol=0)
    if float32:     # exact dangling sums: no last bit for a float32 rounding to amplify
        np.testing.assert_array_equal(spread.values, alone.values)
    for mine, theirs in zip(spread.iterations, alone.iterations):
        assert mine.l1_change == pytest.approx(theirs.l1_change, rel=1e-9)
    if not turned_off:      # the float32 rounding is seen: not the float64 run's values
        exact = execute(graph, "pagerank", mode="cpu", turned_off={"float32_contributions"})
        assert not np.allclose(spread.values, exact.values, rtol=1e-12, atol=0)


def test_exchange_sends_each_changed_vertex_only_to_its_readers(dask_client, graphs):
    """An iteration's bytes are those of the changed vertices' pairs, each sent
    to the partitions whose pieces read it: at most (P - 1) copies of every
    changed vertex, and no pair at all for a vertex no other partition reads.
    A partition all of whose vertices read by a peer changed sends that peer
    their values alone, in the order of its mirror list (with a worker a
    partition, several iterations a call, or not: three partitions here)."""
    graph = graphs["rmat"]
    spread = garaphpy.run(graph, "pagerank", client=dask_client, partitions=3)
    in_offsets, sources, _ = graph.store.csc()
    cuts = [p["first_vertex"] for p in spread.plan.distributed["partitions"]] + \
        [graph.num_vertices]
    owner = np.searchsorted(cuts, np.arange(graph.num_vertices), side="right") - 1
    destinations = np.repeat(np.arange(graph.num_vertices), np.diff(in_offsets))
    # every vertex changes in each PageRank iteration: the bytes are the readers' pairs
    readers = {(int(u), int(owner[v])) for u, v in zip(sources, destinations)
               if owner[u] != owner[v]}
    for record in spread.iterations:
        changed = sum(record.decisions["partitions"]["changed"])
        assert changed == graph.num_vertices
        assert record.exchanged_bytes == len(readers) * 8


def test_partitions_default_to_the_workers_and_may_be_more(dask_client, graphs):
    graph = graphs["grid"]
    alone = garaphpy.run(graph, "sssp", mode="cpu", sources=[0])
    workers = len(dask_client.scheduler_info()["workers"])
    spread = garaphpy.run(graph, "sssp", sources=[0], client=dask_client,
                          partitions=workers + 1)
    np.testing.assert_array_equal(spread.values, alone.values)
    placed = [p["worker"] for p in spread.plan.distributed["partitions"]]
    assert len(placed) == workers + 1 and len(set(placed)) == workers


def test_command_line_runs_over_the_scheduler_it_names(dask_client, tmp_path, capsys,
                                                       monkeypatch):
    import json

    from garaphpy.cli import main
    from garaphpy.distributed import run as partitioned

    monkeypatch.setattr(partitioned, "CONNECT_TIMEOUT_SECONDS", 2)
    config = tmp_path / "run.toml"
    config.write_text('graph = "grid:9x7"\n[store]\npath = "s"\n[run]\nprogram = "sssp"\n'
                      'sources = [4]\n[output]\nvalues = "alone.txt"\n')
    assert main([str(config), "-q"]) == 0
    address = dask_client.scheduler.address
    assert main([str(config), "-q", "--scheduler", address, "--set", "output.values='spread.txt'",
                 "--set", "output.iterations='spread.jsonl'"]) == 0
    assert (tmp_path / "spread.txt").read_text() == (tmp_path / "alone.txt").read_text()
    records = [json.loads(line) for line in (tmp_path / "spread.jsonl").read_text().splitlines()]
    workers = len(dask_client.scheduler_info()["workers"])
    assert records and all(len(r["workers"]) == workers for r in records)
    assert sum(r["exchanged_bytes"] for r in records) > 0
    capsys.readouterr()
    bad = main([str(config), "-q", "--set", "run.scheduler='tcp://127.0.0.1:9'",
                "--set", "run.partitions=2"])
    assert bad == 1
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "scheduler='tcp://127.0.0.1:9'" in error


def _synchronous_changes(graph, program: str, source: int) -> list:
    """The vertices each synchronous iteration of BFS or SSSP changes, in plain
    NumPy over the CSC (internal ids): entry t is what iteration t reads as
    changed (entry 0: the source, active at the start)."""
    in_offsets, sources, weights = graph.store.csc()
    n = graph.num_vertices
    destinations = np.repeat(np.arange(n), np.diff(in_offsets))
    step = np.ones(sources.size) if program == "bfs" else weights.astype(np.float64)
    distance = np.full(n, np.inf)
    distance[source] = 0.0
    changes = [np.array([source])]
    while True:
        reached = np.full(n, np.inf)
        np.minimum.at(reached, destinations, distance[sources] + step)
        new = np.minimum(distance, reached)
        changed = np.flatnonzero(new != distance)
        if not changed.size:
            return changes
        changes.append(changed)
        distance = new


@pytest.mark.parametrize("name", ["rmat", "grid", "ca-HepPh"])
@pytest.mark.parametrize("program", ["sssp", "bfs"])
def test_partitions_pull_only_what_the_changed_vertices_notify(dask_client, graphs, name,
                                                               program):
    """A partition's sparse iteration pulls exactly its vertices with an
    in-neighbour changed in the last iteration (for BFS, final once set, those
    not settled yet), counted against a plain NumPy run of the synchronous
    iterations; a dense one pulls all its vertices; the values stay exact."""
    if name not in graphs:
        pytest.skip(f"{name} is not in {SHARED_DATA}")
    graph = graphs[name]
    source = int(np.argmax(graph.store.out_degree))
    sources = graph.original_ids(np.array([source]))
    alone = garaphpy.run(graph, program, mode="cpu", sources=sources)
    spread = garaphpy.run(graph, program, sources=sources, client=dask_client)
    np.testing.assert_array_equal(spread.values, alone.values)
    changes = _synchronous_changes(graph, program, source)
    assert spread.num_iterations == len(changes)
    in_offsets, in_sources, _ = graph.store.csc()
    destinations = np.repeat(np.arange(graph.num_vertices), np.diff(in_offsets))
    cuts = [p["first_vertex"] for p in spread.plan.distributed["partitions"]] + \
        [graph.num_vertices]
    settled = np.zeros(graph.num_vertices, np.bool_)
    sparse = 0
    for t, record in enumerate(spread.iterations):
        if program == "bfs":
            settled[changes[t]] = True
        changed = np.zeros(graph.num_vertices, np.bool_)
        changed[changes[t]] = True
        notified = np.zeros(graph.num_vertices, np.bool_)
        notified[destinations[changed[in_sources]]] = True
        notified &= ~settled
        row = record.decisions["partitions"]
        for p, (direction, pulled) in enumerate(zip(row["directions"], row["pulled"])):
            first, end = cuts[p], cuts[p + 1]
            # BFS's sparse steps push from the frontier, as the one process's
            assert row["pushed"][p] == (direction == "notify-pull" and program == "bfs")
            if direction == "notify-pull":
                sparse += 1
                assert pulled == int(notified[first:end].sum()), (t, p)
            else:
                assert pulled == end - first - int(settled[first:end].sum()), (t, p)
        assert record.updated_vertices == sum(row["pulled"])
    assert sparse > 0


def _label_propagation_iterations(graph) -> int:
    """Iterations of synchronous min-label propagation over user ids from each
    vertex's own id, in plain NumPy over the CSC, the last (changing nothing)
    counted."""
    in_offsets, sources, _ = graph.store.csc()
    n = graph.num_vertices
    destinations = np.repeat(np.arange(n), np.diff(in_offsets))
    labels = np.asarray(graph.original_ids(np.arange(n)), np.int64)
    iterations = 0
    while True:
        iterations += 1
        new = labels.copy()
        np.minimum.at(new, destinations, labels[sources])
        if np.array_equal(new, labels):
            return iterations
        labels = new


@pytest.fixture(scope="module")
def symmetric(graphs, tmp_path_factory):
    """The rmat graph's undirected copy, the grid, and paths each of which
    visits vertices all over the range (every component spans every
    partition, back and forth) beside isolated vertices."""
    rng = np.random.default_rng(9)
    n = 3000
    paths = np.array_split(rng.permutation(n)[: n * 3 // 4], 40)
    crossing = garaphpy.Graph.from_arrays(
        np.concatenate([p[:-1] for p in paths]), np.concatenate([p[1:] for p in paths]),
        num_vertices=n, store=tmp_path_factory.mktemp("crossing") / "store",
        max_page_bytes=4096, max_shard_edges=256, progress=False)
    return {"rmat": graphs["rmat"].as_undirected(), "grid": graphs["grid"],
            "crossing": crossing.as_undirected()}


@pytest.mark.parametrize("more", [0, 1], ids=["one-a-worker", "one-more"])
@pytest.mark.parametrize("name", ["rmat", "grid", "crossing"])
def test_cc_start_gives_scipys_components_least_ids(dask_client, symmetric, name, more):
    """The partitions' forests joined at their boundaries label every vertex
    with its component's least user id (SciPy's components), confirmed by one
    iteration: within the first iterations' call of the client where each
    worker holds one partition, in three calls of its own where one holds two."""
    graph = symmetric[name]
    workers = len(dask_client.scheduler_info()["workers"])
    spread = garaphpy.run(graph, "cc", client=dask_client, partitions=workers + more)
    np.testing.assert_array_equal(spread.values, ref.components_scipy(graph))
    assert spread.num_iterations == 1
    start = spread.iterations[0].decisions["partition_union_find_start"]
    assert start["calls"] == (3 if more else 0)
    assert len(start["sent_bytes"]) == workers + more
    assert start["sent_bytes"] == [h + k for h, k in zip(start["holder_bytes"],
                                                         start["link_bytes"])]
    assert spread.iterations[0].exchanged_bytes >= sum(start["sent_bytes"])


@pytest.mark.parametrize("name", ["grid", "ca-HepPh"])
def test_cc_starts_each_partition_from_its_union_find(dask_client, graphs, name):
    """On a symmetric graph each partition makes a union-find forest of its own
    edges and merges every partition's before the first iteration: the values
    stay exact, and, the merged forests holding every edge, one iteration
    confirms them, as in one process after its union-find."""
    if name not in graphs:
        pytest.skip(f"{name} is not in {SHARED_DATA}")
    graph = graphs[name]
    alone = garaphpy.run(graph, "cc", mode="cpu")
    spread = garaphpy.run(graph, "cc", client=dask_client)
    np.testing.assert_array_equal(spread.values, alone.values)
    start = spread.iterations[0].decisions["partition_union_find_start"]
    assert sum(start["lowered"]) > 0
    assert spread.num_iterations < _label_propagation_iterations(graph)
    assert spread.num_iterations == alone.num_iterations == 1
