"""Partition hosts kept between runs, partitions made and wired in one call,
and the values brought by a run's last call (:mod:`garaphpy.distributed.hosts`,
:mod:`garaphpy.distributed.rounds`).

Runs after runs on one client reuse one host a worker and give the
one-process values; each run's partitions are gone from the workers once it
ends; two partitions a worker (wired to each other in place, one waiting for
the other to be made) give the same values; a run ended by its votes or by
its iteration limit takes its values from its last call where they are
few, and a run whose last call does not end it (one iteration a call) or
whose workers hold many values gathers them by a call of their own.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

import garaphpy
from garaphpy.api import NotConvergedWarning
from garaphpy.distributed import run as partitioned
from garaphpy.distributed.hosts import HOST_PREFIX

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return garaphpy.Graph.load("grid:24x20", store=tmp_path_factory.mktemp("hosts") / "grid",
                               progress=False)


def _host_keys(dask_scheduler) -> list:
    return sorted(str(k) for k in dask_scheduler.tasks if str(k).startswith(HOST_PREFIX))


def _hosted(dask_worker) -> int:
    from garaphpy.distributed.links import HOSTED

    return len(HOSTED)


def _hosted_left(client) -> dict:
    """The partitions each worker still holds once it had 10 s to let them go."""
    deadline = time.monotonic() + 10
    held = client.run(_hosted)
    while any(held.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
        held = client.run(_hosted)
    return held


@pytest.mark.parametrize("dask_client", [2], indirect=True)
def test_runs_reuse_one_host_a_worker_and_let_their_partitions_go(dask_client, grid):
    alone = {program: garaphpy.run(grid, program, mode="cpu", sources=sources)
             for program, sources in (("bfs", [0]), ("cc", None))}
    keys = []
    for program in ("bfs", "cc", "bfs"):
        sources = [0] if program == "bfs" else None
        spread = garaphpy.run(grid, program, sources=sources, client=dask_client)
        np.testing.assert_array_equal(spread.values, alone[program].values)
        keys.append(dask_client.run_on_scheduler(_host_keys))
    assert len(keys[0]) == 2 and keys[0] == keys[1] == keys[2]
    assert not any(_hosted_left(dask_client).values())


@pytest.mark.parametrize("dask_client", [2], indirect=True)
def test_two_partitions_a_worker_made_and_wired_together(dask_client, grid):
    alone = garaphpy.run(grid, "sssp", mode="cpu", sources=[5])
    spread = garaphpy.run(grid, "sssp", sources=[5], client=dask_client, partitions=4)
    np.testing.assert_array_equal(spread.values, alone.values)
    assert len(spread.plan.distributed["partitions"]) == 4


def _runs_values_call(monkeypatch) -> list:
    """A list that gets True each time a run gathers its values by a call of its own."""
    calls = []
    gather = partitioned.PartitionedRun.values

    def values(run):
        calls.append(run.final_values is None)
        return gather(run)
    monkeypatch.setattr(partitioned.PartitionedRun, "values", values)
    return calls


@pytest.mark.parametrize("dask_client", [2], indirect=True)
def test_the_last_call_brings_the_values(dask_client, grid, monkeypatch, tmp_path):
    calls = _runs_values_call(monkeypatch)
    alone = garaphpy.run(grid, "bfs", mode="cpu", sources=[0])
    spread = garaphpy.run(grid, "bfs", sources=[0], client=dask_client)
    np.testing.assert_array_equal(spread.values, alone.values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotConvergedWarning)
        alone = garaphpy.run(grid, "bfs", mode="cpu", sources=[0], max_iterations=5)
        spread = garaphpy.run(grid, "bfs", sources=[0], client=dask_client, max_iterations=5)
    np.testing.assert_array_equal(spread.values, alone.values)
    assert spread.num_iterations == 5
    # one iteration a call (two partitions a worker): the values by a call of their own
    alone = garaphpy.run(grid, "bfs", mode="cpu", sources=[0])
    spread = garaphpy.run(grid, "bfs", sources=[0], client=dask_client, partitions=4)
    np.testing.assert_array_equal(spread.values, alone.values)
    # many values a worker (more than rounds.FOLDED_VALUES_BYTES): by a call of their own
    large = garaphpy.Graph.load("grid:300x300", store=tmp_path / "large", progress=False)
    alone = garaphpy.run(large, "cc", mode="cpu")
    spread = garaphpy.run(large, "cc", client=dask_client)
    np.testing.assert_array_equal(spread.values, alone.values)
    assert calls == [False, False, True, True]


def _kept(dask_worker) -> list:
    from garaphpy.distributed import kept

    return [key[1:] for key in kept.kept_keys()]


@pytest.mark.parametrize("dask_client", [2], indirect=True)
def test_a_later_run_takes_the_kept_in_edges_and_a_store_made_again_is_read_again(
        dask_client, tmp_path):
    store = tmp_path / "store"
    first = garaphpy.Graph.load("grid:24x20", store=store, progress=False)
    alone = garaphpy.run(first, "sssp", mode="cpu", sources=[3])
    spread = garaphpy.run(first, "sssp", sources=[3], client=dask_client)
    np.testing.assert_array_equal(spread.values, alone.values)
    ranges = sorted((p["first_vertex"], p["end_vertex"])
                    for p in spread.plan.distributed["partitions"])
    deadline = time.monotonic() + 10
    while sorted(k[:2] for held in dask_client.run(_kept).values() for k in held) != ranges \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(k[:2] for held in dask_client.run(_kept).values() for k in held) == ranges
    # the same graph again: the kept in-edges, the same values
    again = garaphpy.run(first, "sssp", sources=[3], client=dask_client)
    np.testing.assert_array_equal(again.values, alone.values)
    # another graph preprocessed at the same path: read afresh, its own values
    time.sleep(0.01)    # a modification time of its own, on a coarse clock too
    other = garaphpy.Graph.load("grid:20x24", store=store, rebuild=True, progress=False)
    assert other.num_vertices == first.num_vertices
    alone = garaphpy.run(other, "sssp", mode="cpu", sources=[3])
    spread = garaphpy.run(other, "sssp", sources=[3], client=dask_client)
    np.testing.assert_array_equal(spread.values, alone.values)
    assert not np.array_equal(spread.values, again.values)


@pytest.mark.parametrize("dask_client", [2], indirect=True)
def test_release_workers_lets_the_hosts_and_kept_in_edges_go(dask_client, grid):
    from garaphpy.distributed import release_workers

    alone = garaphpy.run(grid, "bfs", mode="cpu", sources=[0])
    garaphpy.run(grid, "bfs", sources=[0], client=dask_client)
    deadline = time.monotonic() + 10
    while not any(dask_client.run(_kept).values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    kept_before = sum(len(held) for held in dask_client.run(_kept).values())
    assert kept_before > 0
    assert dask_client.run_on_scheduler(_host_keys)
    released = release_workers(dask_client)
    assert sorted(released) == sorted(dask_client.scheduler_info()["workers"])
    assert sum(released.values()) == kept_before
    assert not any(dask_client.run(_kept).values())
    deadline = time.monotonic() + 10
    while dask_client.run_on_scheduler(_host_keys) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert dask_client.run_on_scheduler(_host_keys) == []
    again = garaphpy.run(grid, "bfs", sources=[0], client=dask_client)   # hosts made again
    np.testing.assert_array_equal(again.values, alone.values)


def test_kept_partitions_follow_the_store_identity(tmp_path):
    from garaphpy.distributed import kept

    kept.let_go_all()
    store = tmp_path / "store"
    store.mkdir()
    (store / "manifest.json").write_text("{}")
    key = kept.partition_key(store, 0, 10, False)
    held = kept.KeptPartition("store", 0, np.zeros(3), np.zeros(1), [], False)
    assert kept.take(key) is None
    assert kept.give_back(key, held)
    assert kept.take(kept.partition_key(store, 0, 11, False)) is None    # another range
    assert kept.take(key) is held and kept.take(key) is None            # taken once
    assert kept.give_back(key, held)
    time.sleep(0.01)
    (store / "manifest.json").write_text('{"again": 1}')                 # made again
    assert kept.take(kept.partition_key(store, 0, 10, False)) is None
    assert kept.kept_keys() == []                                        # the old let go
    assert not kept.give_back(key, held)                                 # a stale key
    assert kept.partition_key(tmp_path / "none", 0, 10, False) is None
    kept.let_go_all()
