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
look at (:func:`~garaphpy.distributed.exchange.failed_sends`); the comm is
opened again at the next send.
"""

from __future__ import annotations

import asyncio

from .exchange import WorkerError

#: The Dask worker's handler of the partitions' one-way messages.
HANDLER = "garaphpy_partition_message"
#: The methods a one-way message may call (each an async method of the
#: partition's actor, run on the worker's event loop).
ONE_WAY = frozenset({"receive_round", "receive_start"})

#: (this worker's address, the peer worker's) -> [comm or None, its lock]:
#: one comm a pair of workers, kept by the worker process for its runs
_COMMS: dict = {}


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
        from distributed.protocol import to_serialize

        message = {"op": HANDLER, "reply": False, "actor": self.peers[partition].key,
                   "method": method, "arguments": to_serialize(arguments)}
        return asyncio.run_coroutine_threadsafe(
            _write(worker, self.peer_addresses[partition], message), worker.loop.asyncio_loop)

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


async def _write(worker, address: str, message: dict) -> None:
    """Write ``message`` on this worker's comm to the worker at ``address``
    (opened where there is none or it closed; dropped where a write fails)."""
    from distributed.comm import connect

    held = _COMMS.setdefault((worker.address, address), [None, asyncio.Lock()])
    async with held[1]:         # one message at a time on a comm, in order
        if held[0] is None or held[0].closed():
            held[0] = await connect(address, **worker.connection_args)
        try:
            await held[0].write(message)
        except Exception:
            held[0].abort()
            held[0] = None
            raise


def _receiver(worker):
    """The Dask worker's handler of :data:`HANDLER` messages: the partition's
    actor named takes the message (one gone since, at the end of its run or in
    a recovery, drops it)."""
    async def garaphpy_partition_message(actor=None, method=None, arguments=()):
        if method not in ONE_WAY:
            raise WorkerError(f"worker {worker.address}: no one-way call {method!r}")
        partition = worker.state.actors.get(actor)
        if partition is not None:
            await getattr(partition, method)(*arguments)
    return garaphpy_partition_message
