"""Calls between partitions' workers: actor calls, and one-way messages over a comm of their own (Garaph section 2.2's exchange, spread).

A partition's worker calls a peer's actor (``peer.receive(...)``: Dask's
``actor_execute``, a request and its answer) where it must know the peer
took the call (the wiring, one iteration a call's pairs).  Where it waits
for the peers' messages anyway (:mod:`garaphpy.distributed.rounds`' votes,
the union-find start's holders and links), it *tells* them instead
(:meth:`PeerCalls.tell`): a one-way message on a comm this worker process
keeps open to each peer's worker, read there by a handler of the Dask
worker's own (:data:`HANDLER`) that hands it to the partition's actor on
the worker's event loop.  No answer comes back, and no actor call is made:
on a 2-core host, an iteration of empty work over two workers took 4.7 ms
with an actor call to each peer, 3.3 ms with Dask's rpc to such a handler
(answered), 2.6 ms with a one-way message (medians of 9 trials in turns;
``python -m bench dask --floor`` measures it).  A comm's messages arrive in the order sent.  A write that
fails (the peer's worker gone) fails the send's future, which the waits
look at (:func:`~garaphpy.distributed.exchange.failed_sends`), as does the
comm's closing (a peer's worker lost after the message was written: nothing
comes back on the comm but its end); the comm is opened again at the next
send.
"""

from __future__ import annotations

import asyncio
import pickle

import numpy as np

from .exchange import WorkerError

#: The Dask worker's handler of the partitions' one-way messages.
HANDLER = "garaphpy_partition_message"
#: A one-way message whose arrays hold this many bytes at most goes as one
#: pickle (:func:`packed`).
PICKLED_BYTES = 64 * 2**10
#: The methods a one-way message may call (each an async method of the
#: partition's actor, run on the worker's event loop).
ONE_WAY = frozenset({"receive_round", "receive_start"})

#: key -> the partition made under it in this process by its worker's host
#: (:mod:`garaphpy.distributed.hosts`): the one-way messages' way to it
HOSTED: dict = {}

#: (this worker's address, the peer worker's) -> its :class:`_Link`: one
#: comm a pair of workers, kept by the worker process for its runs
_LINKS: dict = {}


def hosted(key):
    """The partition made under ``key`` in this process, or None."""
    return HOSTED.get(key)


def dask_worker():
    """The Dask worker this code runs in, or None (a test calling a worker class directly)."""
    from distributed import get_worker

    try:
        return get_worker()
    except ValueError:
        return None


class PeerCalls:
    """The calls of :class:`~garaphpy.distributed.worker.PartitionWorker` to its peers.

    Wants ``peers`` (each partition's actor), ``peer_addresses``,
    ``address``, ``setup.exchange_timeout`` and, set by :meth:`link`,
    ``dask_worker``.
    """

    dask_worker = None

    def link(self) -> None:
        """Take the Dask worker this actor lives in and serve the peers' messages there."""
        self.dask_worker = worker = dask_worker()
        if worker is not None and HANDLER not in worker.handlers:
            worker.handlers[HANDLER] = _receiver(worker)

    def tell(self, partition: int, method: str, *arguments):
        """Call ``method`` of partition ``partition``'s actor one way (see the
        module); a future that fails where the message could not be written.
        A peer in this worker is called in place."""
        worker = self.dask_worker
        if worker is None or self.peer_addresses[partition] == self.address:
            return self._call(partition, method, *arguments)
        message = {"op": HANDLER, "reply": False, "actor": self.peers[partition].key,
                   "method": method, **packed(arguments)}
        address = self.peer_addresses[partition]
        link = _LINKS.setdefault((worker.address, address), _Link())
        return _Told(asyncio.run_coroutine_threadsafe(_write(worker, address, link, message),
                                                      worker.loop.asyncio_loop), link)

    def _call(self, partition: int, method: str, *arguments):
        """Call ``method`` of partition ``partition``'s actor: a future."""
        if self.peer_addresses[partition] == self.address:
            return getattr(self.peers[partition], method + "_here")(*arguments)
        return getattr(self.peers[partition], method)(*arguments)

    def _wait(self, futures: dict) -> None:
        """Wait for the calls to each partition's actor, at most the exchange
        timeout each; a peer that does not answer fails the step, naming it."""
        timeout = self.setup.exchange_timeout
        for partition, future in futures.items():
            try:
                future.result(timeout=timeout)
            except Exception as error:      # noqa: BLE001 - the peer is gone, however
                raise WorkerError(
                    f"worker {self.address}: partition {partition} in worker "
                    f"{self.peer_addresses[partition]} did not answer within {timeout:g} s "
                    f"({type(error).__name__})") from None


def packed(arguments: tuple) -> dict:
    """A one-way message's arguments as its fields: a small message's (arrays
    of :data:`PICKLED_BYTES` at most) as one pickle, ``pickled``; a larger
    one's ``arguments``, for Dask to serialize (its arrays as frames of their
    own, not copied).  Dask's serialization of a tuple handles each of its
    arrays apart: a round of empty work over two workers took 1.06-1.09 ms
    with a BFS iteration's message so sent, 0.79-0.94 ms with it pickled
    (medians of 5 x 200 rounds, dev VM, 2026-12-05)."""
    if _array_bytes(arguments) <= PICKLED_BYTES:
        return {"pickled": pickle.dumps(arguments, protocol=pickle.HIGHEST_PROTOCOL)}
    from distributed.protocol import to_serialize

    return {"arguments": to_serialize(arguments)}


def _array_bytes(value) -> int:
    """The bytes of the arrays in ``value`` (nested tuples and lists)."""
    if isinstance(value, (tuple, list)):
        return sum(_array_bytes(item) for item in value)
    return int(value.nbytes) if isinstance(value, np.ndarray) else 0


class _Link:
    """This worker's comm to a peer's worker: opened at the first message, one
    message at a time on it (in order), ``closed`` once a read of it failed
    (nothing is sent back on it: the peer's worker is gone)."""

    def __init__(self):
        self.comm = None
        self.lock = asyncio.Lock()
        self.closed = False
        self.watch = None


class _Told:
    """A one-way message's future: done once written, or once the comm to the
    peer's worker closed (which fails it, as a failed write does)."""

    def __init__(self, written, link: _Link):
        self.written = written
        self.link = link

    def done(self) -> bool:
        return self.link.closed or self.written.done()

    def result(self, timeout=None):
        if self.link.closed:
            raise ConnectionError("the comm to the peer's worker closed")
        return self.written.result(timeout)


async def _write(worker, address: str, link: _Link, message: dict) -> None:
    """Write ``message`` on ``link``, this worker's comm to the worker at
    ``address`` (opened where there is none or it closed; dropped where a
    write fails)."""
    from distributed.comm import connect

    async with link.lock:
        if link.comm is None or link.comm.closed():
            link.comm = await connect(address, **worker.connection_args)
            link.closed = False
            link.watch = asyncio.ensure_future(_watch(link, link.comm))
        try:
            await link.comm.write(message)
        except Exception:
            link.comm.abort()
            link.comm = None
            raise


async def _watch(link: _Link, comm) -> None:
    """Read ``comm`` until it fails (the peer sends nothing back): then its
    worker is gone, and the messages told on it fail."""
    try:
        while True:
            await comm.read()
    except Exception:       # noqa: BLE001 - closed, however
        if link.comm is comm or link.comm is None:
            link.closed = True


def _receiver(worker):
    """The Dask worker's handler of :data:`HANDLER` messages: the partition's
    actor named takes the message (one gone since, at the end of its run or in
    a recovery, drops it)."""
    async def garaphpy_partition_message(actor=None, method=None, arguments=(), pickled=None):
        if pickled is not None:
            arguments = pickle.loads(pickled)
        if method not in ONE_WAY:
            raise WorkerError(f"worker {worker.address}: no one-way call {method!r}")
        partition = HOSTED.get(actor)
        if partition is None:       # an actor of its own (a test's)
            partition = worker.state.actors.get(actor)
        if partition is not None:
            await getattr(partition, method)(*arguments)
    return garaphpy_partition_message
