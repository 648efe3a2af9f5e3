"""Where every partition pulls fused with float32 contributions (workers of
two threads), each sends its readers the contributions its pull made for the
next one (:mod:`garaphpy.distributed.rounds`), not the values: the values
equal the one process's bit for bit, at the same iteration count, and each
iteration sends 4 bytes a vertex another partition reads."""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy.api import execute

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def two_thread_client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def read_elsewhere(store, partitions: list) -> int:
    """The vertices each partition's in-edges read in another's range, summed."""
    in_offsets, sources, _ = store.csc()
    total = 0
    for p in partitions:
        read = np.unique(sources[in_offsets[p["first_vertex"]]:in_offsets[p["end_vertex"]]])
        total += int(np.count_nonzero((read < p["first_vertex"]) | (read >= p["end_vertex"])))
    return total


def test_pagerank_partitions_send_their_next_contributions(two_thread_client, tmp_path):
    graph = garaphpy.Graph.load("rmat:11", store=tmp_path / "rmat", progress=False)
    alone = execute(graph, "pagerank", mode="cpu")
    spread = execute(graph, "pagerank", client=two_thread_client)
    partitions = spread.plan.distributed["partitions"]
    assert all(p["float32_contributions"] and p["threads"] == 2 for p in partitions)
    assert spread.num_iterations == alone.num_iterations
    np.testing.assert_array_equal(spread.values, alone.values)
    expected = 4 * read_elsewhere(graph.store, partitions)
    assert [r.exchanged_bytes for r in spread.iterations] == [expected] * spread.num_iterations
