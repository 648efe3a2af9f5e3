"""The errors of a partitioned run: one line, naming the worker or the address."""

from __future__ import annotations

import sys

import pytest

import garaphpy
from garaphpy.distributed import run as partitioned
from garaphpy.errors import ConfigError


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return garaphpy.Graph.load("rmat:8", store=tmp_path_factory.mktemp("small") / "s",
                               progress=False)


def test_without_dask_client_says_how_to_install_it(small, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ConfigError, match=r"pip install garaphpy\[dask\]$"):
        garaphpy.run(small, "bfs", sources=[0], client=object())


def test_options_a_partitioned_run_does_not_take_are_refused(small):
    for keywords, match in ((dict(execution="async"), r"execution='async': a run over"),
                            (dict(resume=True), r"resume: not taken by a run over a Dask")):
        with pytest.raises(ConfigError, match=match):
            garaphpy.run(small, "bfs", sources=[0], scheduler="tcp://127.0.0.1:9", **keywords)


def test_a_bad_scheduler_address_is_one_line_naming_it(small, monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr(partitioned, "CONNECT_TIMEOUT_SECONDS", 2)
    with pytest.raises(partitioned.DistributedRunError,
                       match=r"^scheduler='tcp://127.0.0.1:9': no Dask scheduler answered") \
            as caught:
        garaphpy.run(small, "bfs", sources=[0], scheduler="tcp://127.0.0.1:9")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("dask_client", [2], indirect=True)
def test_a_store_missing_on_the_workers_is_one_line_naming_the_worker(dask_client, tmp_path):
    from garaphpy.distributed.worker import WorkerError

    graph = garaphpy.Graph.load("rmat:7", store=tmp_path / "s", progress=False)
    graph.store.path.rename(tmp_path / "elsewhere")     # the client's store stays open
    with pytest.raises(WorkerError, match=r"^worker tcp://[\d.:]+: the store \S+/s is not "
                                          r"there") as caught:
        garaphpy.run(graph, "bfs", sources=[0], client=dask_client)
    assert "\n" not in str(caught.value)


def test_a_worker_too_small_for_its_partition_is_one_line_naming_it(small):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, processes=False, memory_limit="16KiB",
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with pytest.raises(partitioned.DistributedRunError,
                           match=r"^worker (tcp|inproc)://\S+: partition 0 needs about "
                                 r"[\d.]+ KiB of host memory, its memory limit is 16.0 KiB") \
                as caught:
            garaphpy.run(small, "pagerank", client=client)
    assert "\n" not in str(caught.value)
