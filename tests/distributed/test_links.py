"""One-way messages between partitions' workers: the Dask worker's handler
hands a message to the partition's actor named, drops one for an actor gone
and refuses a method that is not a one-way one; a message's future fails
once its comm closed (the peer's worker gone), even after it was written;
outside a Dask worker a message is a call in place."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from garaphpy.distributed.exchange import WorkerError
from garaphpy.distributed.links import HANDLER, ONE_WAY, PeerCalls, _Link, _receiver, _Told


class _Taker:
    def __init__(self):
        self.taken = []

    async def receive_round(self, *arguments):
        self.taken.append(arguments)
        return True


def _worker(actors):
    return SimpleNamespace(address="tcp://here:1", state=SimpleNamespace(actors=actors),
                           handlers={})


def test_the_handler_hands_a_message_to_the_actor_named():
    taker = _Taker()
    handler = _receiver(_worker({"key-1": taker}))
    asyncio.run(handler(actor="key-1", method="receive_round", arguments=(0, 3, 1, "m", "v")))
    assert taker.taken == [(0, 3, 1, "m", "v")]
    assert handler.__name__ == HANDLER        # Dask's server logs its handlers by name


def test_a_message_for_an_actor_gone_is_dropped():
    asyncio.run(_receiver(_worker({}))(actor="gone", method="receive_round", arguments=(1,)))


def test_a_method_that_is_not_one_way_is_refused():
    assert "checkpoint" not in ONE_WAY
    with pytest.raises(WorkerError, match="no one-way call 'checkpoint'"):
        asyncio.run(_receiver(_worker({"key-1": _Taker()}))(
            actor="key-1", method="checkpoint", arguments=(0, "/tmp")))


def test_outside_a_dask_worker_a_message_is_a_call_in_place():
    class Partition(PeerCalls):
        address = "local"

        def __init__(self):
            self.peer_addresses = ("local", "local")
            self.peers = (None, SimpleNamespace(receive_round_here=lambda *a: ("here", a)))
            self.link()

    partition = Partition()
    assert partition.dask_worker is None
    assert partition.tell(1, "receive_round", 0, 1) == ("here", (0, 1))


def test_a_message_fails_once_its_comm_closed_even_written():
    written = Future()
    link = _Link()
    told = _Told(written, link)
    assert not told.done()
    written.set_result(None)
    assert told.done() and told.result() is None
    link.closed = True          # the peer's worker gone: its end of the comm read
    assert told.done()
    with pytest.raises(ConnectionError):
        told.result()


def test_a_small_message_goes_as_one_pickle_and_a_large_one_as_dask_frames():
    import numpy as np

    from garaphpy.distributed.links import PICKLED_BYTES, packed

    small = (0, 3, 1, ("indices", np.arange(5, dtype=np.int32), np.ones(1)), np.zeros(3))
    fields = packed(small)
    assert set(fields) == {"pickled"}
    taker = _Taker()
    asyncio.run(_receiver(_worker({"key-1": taker}))(actor="key-1", method="receive_round",
                                                      **fields))
    (taken,) = taker.taken
    np.testing.assert_array_equal(taken[3][1], small[3][1])
    np.testing.assert_array_equal(taken[4], small[4])
    large = (0, 3, 1, ("all", None, np.ones(PICKLED_BYTES // 8 + 1)), np.zeros(3))
    assert set(packed(large)) == {"arguments"}


def test_a_partition_made_by_a_host_takes_its_messages_by_key():
    from garaphpy.distributed.links import HOSTED

    taker = _Taker()
    HOSTED["hosted-1"] = taker
    try:
        asyncio.run(_receiver(_worker({}))(actor="hosted-1", method="receive_round",
                                           arguments=(2,)))
    finally:
        HOSTED.pop("hosted-1")
    assert taker.taken == [(2,)]
