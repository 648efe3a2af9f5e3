"""A partition host without Dask: a partition made, called and dropped; a
call that comes before its partition is made waits for it; a partition
dropped while it is being made (its run failed) is let go once made; a drop
lets every key go even where keeping one's in-edges fails."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from garaphpy.distributed import hosts
from garaphpy.distributed.exchange import WorkerError
from garaphpy.distributed.links import HOSTED


class _Partition:
    def __init__(self, setup):
        self.address = "tcp://here:1"
        self.index = setup.index
        self.taken = []
        setup.made.set()
        setup.go.wait(5)

    async def set_reader(self, partition, vertices):
        self.taken.append((partition, vertices))
        return len(self.taken)

    def ping(self):
        return self.address


def _setup(index, go=True):
    setup = SimpleNamespace(index=index, made=threading.Event(), go=threading.Event())
    if go:
        setup.go.set()
    return setup


@pytest.fixture(autouse=True)
def _fake_partitions(monkeypatch):
    monkeypatch.setattr(hosts, "new_partition_worker", _Partition)
    monkeypatch.setattr(hosts.kept, "keep", lambda partition: False)
    yield
    HOSTED.clear()


def test_a_partition_made_called_and_dropped():
    host = hosts.PartitionHost()

    async def scenario():
        assert await host.make("k-0", _setup(0)) == "tcp://here:1"
        assert host.call("k-0", "ping") == "tcp://here:1"
        assert await host.call_async("k-0", "set_reader", 1, [4]) == 1
        assert await host.drop(["k-0"]) == 1
        with pytest.raises(WorkerError, match="no partition k-0"):
            host.call("k-0", "ping")
    asyncio.run(scenario())
    assert "k-0" not in HOSTED


def test_a_call_before_its_partition_is_made_waits_for_it():
    host = hosts.PartitionHost()

    async def scenario():
        call = asyncio.ensure_future(host.call_async("k-1", "set_reader", 0, [7]))
        await asyncio.sleep(0.01)
        assert not call.done()
        await host.make("k-1", _setup(1))
        assert await call == 1
    asyncio.run(scenario())


def test_a_partition_dropped_while_being_made_is_let_go():
    host = hosts.PartitionHost()

    async def scenario():
        setup = _setup(2, go=False)
        making = asyncio.ensure_future(host.make("k-2", setup))
        await asyncio.get_running_loop().run_in_executor(None, setup.made.wait, 5)
        assert await host.drop(["k-2"]) == 0
        setup.go.set()
        with pytest.raises(WorkerError, match="let go while it was made"):
            await making
    asyncio.run(scenario())
    assert "k-2" not in HOSTED and not host.partitions


def test_a_drop_lets_every_key_go_where_keeping_fails(monkeypatch):
    def fails(partition):
        raise OSError("no room")
    monkeypatch.setattr(hosts.kept, "keep", fails)
    host = hosts.PartitionHost()

    async def scenario():
        await host.make("k-3", _setup(3))
        await host.make("k-4", _setup(4))
        assert await host.drop(["k-3", "k-4"]) == 2
    asyncio.run(scenario())
    assert not host.partitions and "k-3" not in HOSTED and "k-4" not in HOSTED
