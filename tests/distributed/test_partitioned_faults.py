"""A worker killed in the middle of a partitioned run: the run makes its
partition again on a live worker from the last checkpoint, every partition
rolls back to it, and the run ends with the values of an uninterrupted one
(and lets every actor go, the lost one's too)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import garaphpy
from garaphpy.api import execute
from garaphpy.distributed import run as partitioned

pytest.importorskip("distributed")


@pytest.fixture(autouse=True)
def _quick_loss(monkeypatch):
    """A peer that does not take its pairs for 5 s counts as lost (60 s by default);
    calls of 4 iterations at most, so that a kill from ``on_iteration`` (called
    as each call ends) comes before the run's last call."""
    monkeypatch.setattr(partitioned, "EXCHANGE_TIMEOUT_SECONDS", 5.0)
    monkeypatch.setattr(partitioned, "ITERATIONS_PER_CALL", 4)


def _killer(client, after_iteration: int):
    """An ``on_iteration`` that kills the last partition's worker process once,
    after ``after_iteration``; the addresses it killed."""
    killed = []

    def kill(record):
        if record.iteration == after_iteration and not killed:
            killed.append(record.workers[-1])
            client.run(os._exit, 1, workers=[killed[0]], on_error="ignore")
    return kill, killed


def _cluster_back(client, workers: int) -> None:
    """The module's cluster whole again for the next test: the killed worker's
    nanny starts a new one, or, where Dask's nanny closed instead (seen on a
    loaded 2-core machine after the module's third kill), the cluster is
    scaled back up."""
    try:
        client.wait_for_workers(workers, timeout=30)
    except Exception:       # noqa: BLE001 - distributed's WorkerStartTimeoutError
        client.cluster.scale(workers)
        client.wait_for_workers(workers, timeout=60)


def _partition_keys(dask_scheduler) -> list:
    return [str(key) for key in dask_scheduler.tasks if str(key).startswith("garaphpy-partition-")]


def _keys_left(client) -> list:
    """The partitions' keys the scheduler still holds once it had 10 s to let
    them go (a run cancels its actors' keys, the lost ones' too, as it ends)."""
    deadline = time.monotonic() + 10
    while (keys := client.run_on_scheduler(_partition_keys)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return keys


def test_bfs_with_a_worker_killed_ends_with_the_uninterrupted_values(dask_client, tmp_path):
    workers = len(dask_client.scheduler_info()["workers"])
    graph = garaphpy.Graph.load("grid:30x20", store=tmp_path / "grid", progress=False)
    alone = garaphpy.run(graph, "bfs", mode="cpu", sources=[0])
    kill, killed = _killer(dask_client, after_iteration=7)
    checkpoints = tmp_path / "checkpoints"
    spread = garaphpy.run(graph, "bfs", sources=[0], client=dask_client, checkpoint_every=3,
                          checkpoint_dir=checkpoints, on_iteration=kill)
    assert killed
    np.testing.assert_array_equal(spread.values, alone.values)
    recoveries = spread.plan.distributed["recoveries"]
    assert len(recoveries) == 1
    # killed as the call of iterations 6..8 ended: the checkpoint of 9 is not complete
    assert recoveries[0]["back_to"] == 6 and recoveries[0]["after_iteration"] == 9
    assert [r.iteration for r in spread.iterations] == list(range(spread.num_iterations))
    assert killed[0] not in spread.iterations[-1].workers
    assert not checkpoints.exists() or not any(checkpoints.iterdir())
    assert _keys_left(dask_client) == []
    _cluster_back(dask_client, workers)


def test_pagerank_with_a_worker_killed_matches_at_the_same_iteration_count(dask_client,
                                                                          tmp_path):
    workers = len(dask_client.scheduler_info()["workers"])
    _cluster_back(dask_client, workers)
    graph = garaphpy.Graph.load("rmat:10", store=tmp_path / "rmat", progress=False)
    # the partitions hold their contributions as the one process does (float32)
    alone = execute(graph, "pagerank", mode="cpu")
    kill, killed = _killer(dask_client, after_iteration=4)
    spread = garaphpy.run(graph, "pagerank", client=dask_client, checkpoint_every=2,
                          on_iteration=kill)
    assert killed
    assert spread.num_iterations == alone.num_iterations
    np.testing.assert_allclose(spread.values, alone.values, rtol=1e-9, atol=0)
    assert spread.plan.distributed["recoveries"][0]["back_to"] == 4
    _cluster_back(dask_client, workers)


def test_without_checkpoints_a_lost_worker_restarts_the_run(dask_client, tmp_path):
    workers = len(dask_client.scheduler_info()["workers"])
    _cluster_back(dask_client, workers)
    graph = garaphpy.Graph.load("grid:16x12", store=tmp_path / "grid", progress=False)
    alone = garaphpy.run(graph, "sssp", mode="cpu", sources=[3])
    kill, killed = _killer(dask_client, after_iteration=2)
    spread = garaphpy.run(graph, "sssp", sources=[3], client=dask_client, checkpoint_every=0,
                          on_iteration=kill)
    assert killed
    np.testing.assert_array_equal(spread.values, alone.values)
    assert spread.plan.distributed["recoveries"][0]["back_to"] == 0
    _cluster_back(dask_client, workers)


def test_cc_with_a_worker_killed_in_its_union_find_start_ends_with_the_labels(
        dask_client, tmp_path, monkeypatch):
    """A worker lost while the partitions join their union-find forests (in the
    first iterations' call, which opens with the start where each worker
    holds one partition): the run makes its partition again and iterates
    from the initial labels to the one-process ones, without the start."""
    workers = len(dask_client.scheduler_info()["workers"])
    graph = garaphpy.Graph.load("grid:30x20", store=tmp_path / "grid", progress=False)
    alone = garaphpy.run(graph, "cc", mode="cpu")
    rounds, killed = partitioned.PartitionedRun._rounds, []

    def killed_first(run, iteration, end, aggregates, tolerance, union_find_start=False):
        if union_find_start and not killed:
            killed.append(run.addresses[-1])
            dask_client.run(os._exit, 1, workers=[killed[0]], on_error="ignore")
        return rounds(run, iteration, end, aggregates, tolerance, union_find_start)

    monkeypatch.setattr(partitioned.PartitionedRun, "_rounds", killed_first)
    spread = garaphpy.run(graph, "cc", client=dask_client, checkpoint_dir=tmp_path / "c")
    assert killed
    np.testing.assert_array_equal(spread.values, alone.values)
    recoveries = spread.plan.distributed["recoveries"]
    assert len(recoveries) == 1 and recoveries[0]["back_to"] == 0
    assert "partition_union_find_start" not in spread.iterations[0].decisions
    assert spread.num_iterations > 1
    assert killed[0] not in spread.iterations[-1].workers
    _cluster_back(dask_client, workers)
