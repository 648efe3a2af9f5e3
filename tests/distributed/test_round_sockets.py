"""A partition's own sockets for round messages: what one sends another's
reader hands over whole and in order, large or small; a peer's connection
that closes is seen by the waiting side; a send to a peer gone fails; the
sockets close with their owner."""

from __future__ import annotations

import gc
import queue
import socket
import time

import numpy as np
import pytest

from garaphpy.distributed.exchange import Inbox, WorkerError
from garaphpy.distributed.rounds import take_round
from garaphpy.distributed.sockets import READ_BYTES, RoundSockets, round_sockets, socket_host


def _pair():
    taken = queue.Queue()
    return RoundSockets("127.0.0.1", taken.put, 5.0), taken


def test_messages_arrive_whole_and_in_order():
    sender, _ = _pair()
    receiver, taken = _pair()
    try:
        big = np.arange(3 * READ_BYTES // 8 + 5, dtype=np.int64)     # several reads
        sent = [("small", i) for i in range(3)] + [("big", big), ("small", 3)]
        for message in sent:
            sender.send(1, receiver.address, 0, 0, message)
        got = [taken.get(timeout=5) for _ in sent]
        assert [m[0] for m in got] == ["small"] * 3 + ["big", "small"]
        assert [m[1] for m in got if m[0] == "small"] == [0, 1, 2, 3]
        np.testing.assert_array_equal(got[3][1], big)
    finally:
        sender.close()
        receiver.close()


def test_a_round_message_reaches_the_inbox_with_its_vote():
    """:func:`take_round` over the sockets: a peer's changed pairs (by its
    mirror list) and its vote, held for the iteration they belong to."""
    inbox = Inbox()
    reads = [np.array([3, 5, 9]), None]
    receiver = RoundSockets("127.0.0.1", lambda m: take_round(inbox, reads, m), 5.0)
    sender, _ = _pair()
    try:
        message = ("indices", np.array([5, 9], np.int32), np.array([1.5, 2.5]))
        sender.send(1, receiver.address, 0, 0, (0, 4, 0, message, np.array([0.5, 2.0])))
        votes = inbox.wait_votes(4, [0], 5.0, lambda: None)
        np.testing.assert_array_equal(votes[0], [0.5, 2.0])
        values = np.zeros(10)
        assert inbox.apply("values", values, 5) == 2
        np.testing.assert_array_equal(values[[5, 9]], [1.5, 2.5])
    finally:
        sender.close()
        receiver.close()


def test_a_peer_that_closes_its_connection_fails_the_wait():
    sender, _ = _pair()
    receiver, taken = _pair()
    try:
        sender.send(1, receiver.address, 3, 0, "first")
        assert taken.get(timeout=5) == "first"
        receiver.check_peers(3, [0], str)       # connected: nothing to say
        sender.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (3, 0) not in receiver.gone:
            time.sleep(0.01)
        with pytest.raises(WorkerError, match="0 closed its connection"):
            receiver.check_peers(3, [0], str)
        receiver.check_peers(4, [0], str)       # another epoch's peer 0 is not gone
    finally:
        receiver.close()


def test_a_new_epoch_connects_again():
    """After a recovery (a new epoch) a sender's messages come on a new
    connection: the old one's end says nothing of the peer in the new epoch."""
    sender, _ = _pair()
    receiver, taken = _pair()
    try:
        sender.send(1, receiver.address, 0, 0, "before")
        sender.send(1, receiver.address, 1, 0, "after")
        assert [taken.get(timeout=5), taken.get(timeout=5)] == ["before", "after"]
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (0, 0) not in receiver.gone:
            time.sleep(0.01)
        assert (0, 0) in receiver.gone
        receiver.check_peers(1, [0], str)
    finally:
        sender.close()
        receiver.close()


def test_a_send_to_a_peer_gone_fails():
    sender, _ = _pair()
    gone = socket.create_server(("127.0.0.1", 0))
    address = gone.getsockname()[:2]
    gone.close()
    try:
        with pytest.raises(OSError):
            sender.send(1, address, 0, 0, "lost")
    finally:
        sender.close()


def test_the_sockets_close_with_their_owner():
    class Owner:
        pass

    owner = Owner()
    sockets = round_sockets(owner, "127.0.0.1", lambda m: None, 5.0)
    reader = sockets.reader
    assert reader.is_alive()
    del owner
    gc.collect()
    reader.join(timeout=5)
    assert not reader.is_alive()


@pytest.mark.parametrize("address, host", [("tcp://127.0.0.1:4000", "127.0.0.1"),
                                           ("tcp://[::1]:4000", "::1"),
                                           ("inproc://10.0.0.1/1/2", None)])
def test_the_socket_host_comes_from_the_workers_address(address, host):
    assert socket_host(address) == host
