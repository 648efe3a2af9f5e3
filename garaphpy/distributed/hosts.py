"""Partition hosts: one Dask actor a worker, kept between runs, that makes each run's partitions there (Garaph section 2.2's workers, spread).

Making a Dask actor is a round of the scheduler's: the client submits a
task, the scheduler hands it to the worker, the worker runs it and reports,
and the client fetches the actor's handle.  Two actors so made took 9.9-23
ms (median 20 ms, dev VM of 2 cores, 2026-12-05) against 2.2-7.0 ms (median
3.1) for one actor call to each: most of a short run's fixed cost.  So the
client keeps one :class:`PartitionHost` actor on each worker it ran on
(:func:`hosts_on`, made at the first run there), and a run asks each host to
make its partition in that worker (:meth:`PartitionHost.make`: one actor
call); the client and the peers call the partition through its host
(:class:`PartitionHandle`), the one-way messages of
:mod:`garaphpy.distributed.links` find it by its key
(:func:`~garaphpy.distributed.links.hosted`), and the run's end drops it
(:meth:`PartitionHost.drop`: the worker lets its arrays go, but for the
store and the in-edges a later run's partition of the same range takes:
:mod:`garaphpy.distributed.kept`).  A host lives as long as its client holds
it: until the client closes, or the worker is lost (:func:`forget_hosts`; a
host whose key Dask let go, a restarted cluster's, is made again).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
import time
import uuid
import weakref
from concurrent.futures import Future

from . import kept
from .exchange import WorkerError
from .links import HOSTED, hosted

#: The prefix of a host's Dask key.
HOST_PREFIX = "garaphpy-host-"

#: Seconds a call waits for a partition being made (its peer's wiring may
#: come first), as long as a peer may take to accept pairs.
MAKE_WAIT_SECONDS = 60.0

#: Keys of partitions dropped before they were made that a host remembers
#: at most (a failed run's: its partitions still being made are let go).
DROPPED_EARLY_KEPT = 256

#: Seconds between looks for a partition of the same worker being made.
MAKE_POLL_SECONDS = 0.001

#: client -> {worker address: (the host's future, its actor handle)}
_HOSTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_HOSTS_LOCK = threading.Lock()


class PartitionHost:
    """The maker of a worker's partitions (a Dask actor; see the module)."""

    def __init__(self):
        self.partitions: dict = {}
        #: key -> a future done once the partition under it is made (a peer's
        #: call may come first: :meth:`call_async`)
        self.coming: dict = {}
        #: the keys dropped before their partitions were made (:meth:`drop`)
        self.dropped_early: set = set()

    async def make(self, key: str, setup, wiring: tuple | None = None):
        """Make partition ``setup.index`` of a run under ``key``, off the worker's
        event loop and its actor thread (a task thread's work, as an actor's
        set-up: two partitions of one worker are made side by side); the
        worker's address.  With ``wiring``, ``(peers, addresses, epoch)``, the
        partition is wired to its peers too
        (:meth:`~garaphpy.distributed.worker.PartitionWorker.wire`, whose
        description it returns: no call of the client's of its own; a peer
        not made yet takes its call once it is)."""
        loop = asyncio.get_running_loop()
        # the Dask worker's context, for get_worker()
        partition = await loop.run_in_executor(None, contextvars.copy_context().run,
                                               new_partition_worker, setup)
        if key in self.dropped_early:       # its run failed, and let it go, meanwhile
            self.dropped_early.discard(key)
            raise WorkerError(f"worker {partition.address}: partition {setup.index} was "
                              "let go while it was made (its run failed)")
        self.partitions[key] = partition
        HOSTED[key] = partition
        waiting = self.coming.pop(key, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(None)
        if wiring is None:
            return partition.address
        return await loop.run_in_executor(None, contextvars.copy_context().run,
                                          partition.wire, *wiring)

    def ping(self) -> int:
        """An actor call that does nothing, on the worker's actor thread (a
        bare round trip: ``python -m bench dask --floor`` times it)."""
        return len(self.partitions)

    def call(self, key: str, method: str, *arguments):
        """``method`` of the partition under ``key``, on the worker's actor thread."""
        return getattr(self._partition(key, method), method)(*arguments)

    async def call_async(self, key: str, method: str, *arguments):
        """``method`` (a coroutine) of the partition under ``key``, on the
        worker's event loop (never held up by the actor thread's pull); a
        partition being made is waited for, :data:`MAKE_WAIT_SECONDS` at most."""
        if key not in self.partitions:
            waiting = self.coming.setdefault(key, asyncio.get_running_loop().create_future())
            try:
                await asyncio.wait_for(asyncio.shield(waiting), MAKE_WAIT_SECONDS)
            except asyncio.TimeoutError:
                pass        # named below
        return await getattr(self._partition(key, method), method)(*arguments)

    async def drop(self, keys) -> int:
        """Let the partitions under ``keys`` go; how many were here."""
        dropped = []
        for key in keys:
            dropped.append(self.partitions.pop(key, None))
            if dropped[-1] is None:         # being made (or failed): let go once made
                if len(self.dropped_early) >= DROPPED_EARLY_KEPT:
                    self.dropped_early.clear()
                self.dropped_early.add(key)
            HOSTED.pop(key, None)
            waiting = self.coming.pop(key, None)
            if waiting is not None and not waiting.done():
                waiting.set_result(None)    # its callers fail now, naming it
        dropped = [partition for partition in dropped if partition is not None]
        for partition in dropped:
            try:
                kept.keep(partition)     # its store and in-edges, for a later run
            except Exception:       # noqa: BLE001 - kept or not, the partition goes
                pass
        return len(dropped)

    def _partition(self, key: str, method: str):
        try:
            return self.partitions[key]
        except KeyError:
            raise WorkerError(f"no partition {key} in this worker (dropped) for "
                              f"{method}") from None


def new_partition_worker(setup):
    """Partition ``setup.index``'s worker object: on the GPU or the CPU, as ``setup.processor`` says."""
    if setup.processor == "gpu":
        from .gpu_worker import GpuPartitionWorker

        return GpuPartitionWorker(setup)
    from .worker import PartitionWorker

    return PartitionWorker(setup)


class PartitionHandle:
    """A partition's handle, as a Dask actor's: ``handle.method(...)`` calls the
    partition through its host (a future); ``key`` names it to the one-way
    messages; a ``*_here`` method (a peer in the same worker) is the
    partition's own, called in place (a future done).

    Parameters
    ----------
    host : distributed.Actor
        The host of the partition's worker.
    key : str
    cls : type
        The partition's class (its coroutine methods run on the worker's event loop).
    """

    def __init__(self, host, key: str, cls):
        self.host = host
        self.key = key
        self.cls = cls

    def __getattr__(self, method: str):
        if method.startswith("_"):
            raise AttributeError(method)
        if method.endswith("_here"):
            return lambda *arguments: _done(self.key, method, arguments)
        call = self.host.call_async if inspect.iscoroutinefunction(
            getattr(self.cls, method)) else self.host.call
        return lambda *arguments: call(self.key, method, *arguments)

    def __repr__(self):
        return f"<PartitionHandle {self.key}>"


def _done(key: str, method: str, arguments) -> Future:
    """``method(*arguments)`` of the partition under ``key`` called in place, as a
    future done (as a Dask actor's call of an actor in the same worker); a
    partition being made (its peer's wiring may come first) is waited for,
    :data:`MAKE_WAIT_SECONDS` at most."""
    future: Future = Future()
    deadline = time.monotonic() + MAKE_WAIT_SECONDS
    while (partition := hosted(key)) is None and time.monotonic() < deadline:
        time.sleep(MAKE_POLL_SECONDS)
    try:
        if partition is None:
            raise WorkerError(f"no partition {key} in this process for {method}")
        future.set_result(getattr(partition, method)(*arguments))
    except Exception as error:      # noqa: BLE001 - the future holds it
        future.set_exception(error)
    return future


def hosts_on(client, addresses, live=None) -> dict:
    """``{address: host actor}``: the host of each worker of ``addresses``,
    made there where the client holds none yet (all at once).  ``live``, where
    given, the workers' addresses now: hosts held for others are let go.

    Raises
    ------
    HostError
        Naming the worker whose host could not be made.
    """
    with _HOSTS_LOCK:
        held = _HOSTS.setdefault(client, {})
        if live is not None:
            _forget(client, held, [a for a in held if a not in live])
        _forget(client, held, [a for a in held if held[a][0].status != "finished"])
        futures = {address: client.submit(
            PartitionHost, actor=True, workers=[address], allow_other_workers=False,
            pure=False, key=f"{HOST_PREFIX}{uuid.uuid4().hex[:12]}")
            for address in sorted(set(addresses)) if address not in held}
        for address, future in futures.items():
            try:
                held[address] = (future, future.result())
            except Exception as error:      # noqa: BLE001 - the worker's, by its address
                client.cancel([f for f in futures.values()])
                for made in futures:
                    held.pop(made, None)
                raise HostError(address, error) from None
        return {address: held[address][1] for address in addresses}


def forget_hosts(client, addresses) -> None:
    """Let the hosts on ``addresses`` go (their workers lost)."""
    with _HOSTS_LOCK:
        _forget(client, _HOSTS.get(client, {}), list(addresses))


def release_workers(client) -> dict:
    """Let the workers of ``client`` go of what partitioned runs keep there
    between runs: the stores and in-edges kept for the next run
    (:mod:`.kept`) and the partition hosts (the next run makes them again).

    Returns
    -------
    dict
        ``{worker address: partitions' in-edges let go}``.
    """
    from . import kept

    with _HOSTS_LOCK:
        held = _HOSTS.get(client, {})
        _forget(client, held, list(held))
    return client.run(kept.let_go_all)


def _forget(client, held: dict, addresses) -> None:
    gone = [held.pop(address)[0] for address in addresses if address in held]
    if gone:
        try:
            client.cancel(gone)
        except Exception:       # noqa: BLE001 - the client or its cluster already gone
            pass


class HostError(Exception):
    """A worker's host could not be made (:attr:`address`, :attr:`error`)."""

    def __init__(self, address: str, error: BaseException):
        super().__init__(f"worker {address}: {error}")
        self.address = address
        self.error = error
