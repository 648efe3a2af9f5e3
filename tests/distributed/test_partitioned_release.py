"""A partitioned run's partitions are gone from the workers once it ends, or fails.

Each actor call of ``distributed`` leaves a reference cycle on the client
that holds the actor's handle, and the handle a future of its key: left to
the client's garbage collector, the scheduler would keep the keys and the
workers the partitions' arrays for several runs.  The partitions are made
by each worker's host (:mod:`garaphpy.distributed.hosts`, kept between
runs) under keys of their own, which the run's end drops.  Checked here with
the client's collector off (so that nothing but the run itself lets them
go): after runs of BFS, PageRank, CC (its union-find start) and a run that
fails in its iterations, the workers hold no partition, in their actors
mapping or as a live object, and the scheduler no partition's key.
"""

from __future__ import annotations

import gc
import time

import pytest

import garaphpy

pytest.importorskip("distributed")

PREFIX = "garaphpy-partition-"


def _held_by_worker(dask_worker) -> dict:
    """The partition actors a worker holds: keys in its actors mapping, and the
    partition objects alive in its process (no collection run first)."""
    import gc

    from garaphpy.distributed.worker import PartitionWorker

    keys = sorted(str(k) for k in dask_worker.state.actors if str(k).startswith(PREFIX))
    alive = sum(isinstance(o, PartitionWorker) for o in gc.get_objects())
    return {"keys": keys, "alive": alive}


def _held_by_scheduler(dask_scheduler) -> list:
    return sorted(str(k) for k in dask_scheduler.tasks if str(k).startswith(PREFIX))


def _held(client) -> tuple[dict, list]:
    """What the workers and the scheduler hold, once they had 10 s to let go
    (a cancelled key reaches the workers after the run returns)."""
    deadline = time.monotonic() + 10
    while True:
        workers = client.run(_held_by_worker)
        scheduler = client.run_on_scheduler(_held_by_scheduler)
        if time.monotonic() > deadline or (not scheduler and not any(
                held["keys"] or held["alive"] for held in workers.values())):
            return workers, scheduler
        time.sleep(0.1)


class _Stop(Exception):
    pass


def _stop_at(iteration: int):
    def on_iteration(record):
        if record.iteration == iteration:
            raise _Stop(f"stopped after iteration {iteration}")
    return on_iteration


@pytest.mark.parametrize("dask_client", [2], indirect=True)
def test_finished_and_failed_runs_leave_no_actor_on_the_workers(dask_client, tmp_path):
    grid = garaphpy.Graph.load("grid:24x20", store=tmp_path / "grid", progress=False)
    rmat = garaphpy.Graph.load("rmat:9", store=tmp_path / "rmat", progress=False)
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        assert garaphpy.run(grid, "bfs", sources=[0], client=dask_client).converged
        garaphpy.run(rmat, "pagerank", client=dask_client)
        assert garaphpy.run(grid, "cc", client=dask_client).converged
        with pytest.raises(_Stop):
            garaphpy.run(grid, "sssp", sources=[0], client=dask_client,
                         on_iteration=_stop_at(1))
        workers, scheduler = _held(dask_client)
    finally:
        if was_enabled:
            gc.enable()
    assert len(workers) == 2
    assert scheduler == []
    assert all(held == {"keys": [], "alive": 0} for held in workers.values()), workers
