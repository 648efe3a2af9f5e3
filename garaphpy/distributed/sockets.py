"""Round messages on sockets of the partitions' own (Garaph section 2.2's exchange, spread; MPI's point-to-point sends).

Within a call of several iterations (:mod:`garaphpy.distributed.rounds`) a
partition's worker sends each peer one message an iteration and waits for
theirs.  Over a Dask comm (:mod:`garaphpy.distributed.links`) a message
crosses the sending worker's event loop, Dask's framing and the receiving
worker's event loop before the waiting thread has it: 1.3-1.4 ms from the
last pull's end to the last vote on a 2-core host, where two processes
exchange such a message and its answer over a plain TCP socket in 0.025 ms
(dev VM, 2026-12-04).  So each partition keeps its own sockets:

* a listening socket on its worker's host, whose address it gives each peer
  with its mirror list (:meth:`PartitionWorker.wire`);
* one connection to each peer it sends to, opened at the first message,
  on which its actor's thread writes each message itself (pickled, after
  its length), in order;
* a reader thread that accepts the peers' connections and hands each
  message to the partition's inbox as it comes
  (:func:`garaphpy.distributed.rounds.take_round`), whatever the actor's
  thread does meanwhile, so that two peers' large messages never wait for
  each other's reader.

A send that fails (the peer's worker gone) fails the call at once; a peer
whose connection closes while its vote is awaited fails the wait
(:meth:`RoundSockets.check_peers`), as does a vote that does not come
within the exchange timeout; the client then recovers as after any lost
worker.  The sockets close when the partition's actor is let go.
"""

from __future__ import annotations

import pickle
import selectors
import socket
import struct
import threading
import weakref

from .exchange import WorkerError

#: A message's length, before its pickled bytes.
HEADER = struct.Struct("<Q")
#: Messages below this many bytes go in one write with their header.
JOINED_WRITE_BYTES = 1 << 16
#: Bytes a read of a peer's connection takes at most.
READ_BYTES = 1 << 20


def socket_host(address: str) -> str | None:
    """The host of a Dask address (``tcp://host:port``) to listen on, or None
    where the worker is not reached over TCP (then the Dask comm carries the
    messages)."""
    if not address.startswith(("tcp://", "tls://")):
        return None
    host = address.split("://", 1)[1].rsplit(":", 1)[0]
    return host.strip("[]") or None


class RoundSockets:
    """A partition's sockets (see the module).

    Parameters
    ----------
    host : str
        Where to listen (its worker's host).
    deliver : callable
        ``deliver(message)`` with each message a peer sent, on the reader
        thread (it must not hold the partition's actor: the sockets close
        once the actor is let go).
    timeout : float
        Seconds a connect or a write may take before the peer counts as lost.
    """

    def __init__(self, host: str, deliver, timeout: float):
        self.listener = socket.create_server((host, 0))
        self.address = self.listener.getsockname()[:2]
        self.timeout = timeout
        #: partition -> ((the address it listens on, the epoch), this partition's
        #: connection to it)
        self.outgoing: dict[int, tuple] = {}
        #: (epoch, partition) of the peers whose connection closed or failed
        self.gone: set = set()
        self.lock = threading.Lock()
        self._wake, wake_here = socket.socketpair()
        self.reader = threading.Thread(
            target=_read, args=(self.listener, wake_here, deliver, self._mark_gone),
            name="garaphpy-round-reader", daemon=True)
        self.reader.start()

    def send(self, partition: int, address, epoch: int, sender: int, message) -> int:
        """Write ``message`` (any picklable object) to the reader of partition
        ``partition``, listening at ``address``, on this partition's connection
        to it (made at the first message, and again at a new epoch: a
        recovery, after which its reader knows it by the epoch); the bytes
        written.  Raises OSError where the peer cannot take it."""
        key = (tuple(address), epoch)
        held = self.outgoing.get(partition)
        if held is not None and held[0] != key:
            held[1].close()
            held = None
        if held is None:
            connection = socket.create_connection(key[0], timeout=self.timeout)
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            held = self.outgoing[partition] = (key, connection)
            _write(connection, pickle.dumps(("hello", epoch, sender), protocol=5))
        data = pickle.dumps(message, protocol=5)
        _write(held[1], data)
        return len(data)

    def check_peers(self, epoch: int, partitions, name) -> None:
        """Raise a WorkerError where one of ``partitions`` closed its connection
        of ``epoch`` (``name(q)``: the peer as the error names it)."""
        with self.lock:
            gone = [q for q in partitions if (epoch, q) in self.gone]
        if gone:
            raise WorkerError(f"{name(gone[0])} closed its connection")

    def _mark_gone(self, epoch: int, partition: int) -> None:
        with self.lock:
            self.gone.add((epoch, partition))

    def close(self) -> None:
        """Close every socket and end the reader thread."""
        for _, connection in self.outgoing.values():
            connection.close()
        self.outgoing = {}
        try:
            self._wake.send(b"x")
        except OSError:
            pass
        self._wake.close()


def round_sockets(owner, host: str, deliver, timeout: float) -> RoundSockets:
    """:class:`RoundSockets` closed once ``owner`` (the partition's actor) is collected."""
    sockets = RoundSockets(host, deliver, timeout)
    weakref.finalize(owner, sockets.close)
    return sockets


def _write(connection: socket.socket, data: bytes) -> None:
    header = HEADER.pack(len(data))
    if len(data) < JOINED_WRITE_BYTES:
        connection.sendall(header + data)
    else:
        connection.sendall(header)
        connection.sendall(data)


class _Incoming:
    """A peer's connection as the reader sees it: bytes not yet a whole
    message, and who sent them (from its first message)."""

    def __init__(self):
        self.buffer = bytearray()
        self.sender = None


def _read(listener: socket.socket, wake: socket.socket, deliver, gone) -> None:
    """The reader thread: accept the peers' connections, cut what comes into
    messages, hand each to ``deliver``; ``gone(epoch, sender)`` where a peer's
    connection ends (or a message of it cannot be taken); stops when woken."""
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, None)
    selector.register(wake, selectors.EVENT_READ, "wake")
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "wake":
                    return
                if key.data is None:
                    connection, _ = listener.accept()
                    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    selector.register(connection, selectors.EVENT_READ, _Incoming())
                    continue
                incoming = key.data
                try:
                    data = key.fileobj.recv(READ_BYTES)
                except OSError:
                    data = b""
                if not data or not _take(incoming, data, deliver):
                    if incoming.sender is not None:
                        gone(*incoming.sender)
                    selector.unregister(key.fileobj)
                    key.fileobj.close()
    finally:
        for key in list(selector.get_map().values()):
            key.fileobj.close()
        selector.close()


def _take(incoming: _Incoming, data: bytes, deliver) -> bool:
    """Add ``data`` to a connection's bytes and deliver its whole messages;
    False where one could not be taken (the connection is then dropped)."""
    buffer = incoming.buffer
    buffer += data
    start = 0
    while len(buffer) - start >= HEADER.size:
        (size,) = HEADER.unpack_from(buffer, start)
        if len(buffer) - start - HEADER.size < size:
            break
        begin = start + HEADER.size
        view = memoryview(buffer)
        try:
            message = pickle.loads(view[begin:begin + size])
        finally:
            view.release()      # the buffer may be cut below
        start = begin + size
        if isinstance(message, tuple) and message[:1] == ("hello",):
            incoming.sender = message[1:]
            continue
        try:
            deliver(message)
        except Exception:       # noqa: BLE001 - the waiting side names the peer
            return False
    del buffer[:start]
    return True
