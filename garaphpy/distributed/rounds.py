"""Several iterations a call: the workers agree among themselves (Pregel's supersteps, without a master).

A call of the client to each worker (:meth:`Rounds.iterate`) runs the
iterations ``first..stop-1``.  After its pull of an iteration, a worker sends
every peer one message (:func:`take_round` takes it: on the partitions' own
sockets, :mod:`garaphpy.distributed.sockets`, or one way over a comm of its
worker's, :mod:`garaphpy.distributed.links`): the pairs of its
changed vertices the peer reads (none where it reads none; their values
alone, in the order of the peer's mirror list, where it reads every one
changed, as in each PageRank iteration: a third fewer bytes; where every
partition pulls fused with float32 contributions, those the pull made for
the next one, which the peer would otherwise compute from the values: half
the bytes again) and its *vote*,
``[l1_change, activated, *its share of the next aggregates]``.  It does not
wait for the peers to answer; it waits for the peers' messages of the same
iteration (:meth:`garaphpy.distributed.exchange.Inbox.wait_votes`), which
also brings every pair the next iteration reads.  Each worker then reduces
the votes in partition order (:func:`~garaphpy.distributed.exchange.reduce_votes`,
the client's own reduction), so all take the same decision: go on, or stop
where no vertex is active or the change fell below the tolerance.  The client
gets every iteration's rows at the end of the call and makes the records as
for one iteration a call.

An iteration costs one message each way between two workers instead of a
send, its answer and the client's round trip (no answer either, and on the
sockets neither event loop: the path-64 floor, 1.9 -> 0.74 ms an iteration
against the Dask comm, dev VM, 2026-12-04).  A worker blocks its actor's
thread while it waits, so the run takes this path only where each worker
holds one partition (two actors of one worker share a thread).  A send that
fails (a peer's worker gone) fails the call at once; a peer whose vote does
not come within the exchange timeout, or whose connection closes first,
fails it then, and the client recovers
as after a failed step.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from .exchange import (WorkerError, aggregate_monoids, decode_changes, failed_sends,
                       message_bytes, reduce_votes)
from .sockets import round_sockets, socket_host


class Rounds:
    """The several-iterations call of :class:`~garaphpy.distributed.worker.PartitionWorker`."""

    #: the partition's own sockets for round messages (:meth:`open_round_sockets`)
    round_sockets = None
    #: partition -> where its sockets take round messages (given with its mirror list)
    round_addresses: dict = {}

    def iterate(self, first: int, stop: int, aggregates: np.ndarray,
                tolerance: float | None) -> list[dict]:
        """Run iterations ``first..stop-1`` (fewer where the votes say stop);
        each iteration's row as :meth:`step` gives it, with ``round_seconds``
        (the iteration's time here, votes included), the exchange's phases
        (``send_seconds``: the messages handed over; ``wait_seconds``: until
        every peer's vote came) and, as wall-clock times (comparable between
        the workers of one host), when the pull ended (``pull_end_time``) and
        when the last vote came (``votes_time``)."""
        rows = []
        peers = [q for q in range(len(self.peers)) if q != self.index]
        monoids = aggregate_monoids(self.setup.program)
        for iteration in range(first, stop):
            started = time.perf_counter()
            row, changed = self._pull_step(iteration, aggregates)
            pull_ended = time.perf_counter()
            vote = np.concatenate([[row["l1_change"], row["activated"]],
                                   np.asarray(row["aggregates"], np.float64)])
            row["pull_end_time"] = time.time()
            row["sent_bytes"], sends = self._send_round(iteration, changed, vote, peers)
            sent = time.perf_counter()
            votes = self._votes(iteration, peers, sends)
            votes[self.index] = vote
            ended = time.perf_counter()
            row["votes_time"] = time.time()
            row["send_seconds"] = sent - pull_ended
            row["wait_seconds"] = ended - sent
            row["exchange_seconds"] = ended - pull_ended
            row["round_seconds"] = ended - started
            rows.append(row)
            l1_change, activated, aggregates = reduce_votes(
                [votes[q] for q in sorted(votes)], monoids)
            if activated == 0 or (tolerance is not None and l1_change < tolerance):
                break
        return rows

    async def receive_round(self, epoch: int, iteration: int, sender: int, message: tuple,
                            vote: np.ndarray) -> bool:
        """A peer's message of ``iteration``: its changes for this partition
        (:func:`~garaphpy.distributed.exchange.encode_changes`, or the
        contributions of its vertices this one reads) and its vote."""
        return take_round(self.inbox, self.reads, (epoch, iteration, sender, message, vote))

    def open_round_sockets(self):
        """This partition's own sockets for round messages, made once where it
        lives in a Dask worker reached over TCP (:mod:`.sockets`); the address
        its peers send to, or None (the Dask comm carries them)."""
        if self.round_sockets is None and self.dask_worker is not None:
            host = socket_host(self.address)
            if host is not None:
                self.round_sockets = round_sockets(
                    self, host, functools.partial(take_round, self.inbox, self.reads),
                    self.setup.exchange_timeout)
        return None if self.round_sockets is None else self.round_sockets.address

    def close_round_sockets(self) -> None:
        """Close this partition's own sockets (the run is over)."""
        if self.round_sockets is not None:
            self.round_sockets.close()
            self.round_sockets = None

    def _send_round(self, iteration: int, changed: np.ndarray, vote: np.ndarray,
                    peers: list) -> tuple[int, dict]:
        """Send every peer its changes of ``changed`` (in the fewest bytes:
        :func:`~garaphpy.distributed.exchange.encode_changes`) and ``vote``,
        not waiting; ``(bytes of changes sent, {peer: the call's future})``."""
        index_dtype = self.store.vertex_dtype
        fused = self.fused
        if self.setup.float32_contributions and fused is not None and fused.whole \
                and fused.owned_ready == iteration + 1:
            # every partition pulls on the CPU over its own numbering: the next
            # contributions the pull made, every vertex's (a reader keeps no
            # values of this partition's vertices from now on, only these)
            messages = {q: ("contributions", None,
                            fused.contributions[self.mirrors.lists[q] - self.first])
                        for q in self.mirrors.lists if self.mirrors.counts[q]}
        else:
            messages = self.mirrors.messages(changed, self.values, index_dtype)
        nothing = ("indices", np.zeros(0, index_dtype), self.values[:0])
        sent, sends = 0, {}
        sockets = self.round_sockets
        for q in peers:
            message = messages.get(q, nothing)
            sent += message_bytes(message)
            address = self.round_addresses.get(q)
            if sockets is not None and address is not None:
                try:
                    sockets.send(q, address, self.epoch, self.index,
                                 (self.epoch, iteration, self.index, message, vote))
                except OSError as error:
                    raise WorkerError(f"{self._peer(q)} did not take iteration {iteration}'s "
                                      f"pairs ({type(error).__name__})") from None
                continue
            sends[q] = self.tell(q, "receive_round", self.epoch, iteration, self.index, message,
                                 vote)
        return sent, sends

    def _peer(self, q: int) -> str:
        return f"worker {self.address}: partition {q} in worker {self.peer_addresses[q]}"

    def _votes(self, iteration: int, peers: list, sends: dict) -> dict:
        """The peers' votes of ``iteration``; a failed send or a vote that does
        not come within the exchange timeout fails the call, naming the peer."""
        told = failed_sends(self, [(q, future, f"iteration {iteration}'s pairs")
                                   for q, future in sends.items()])

        def failed():
            told()
            if self.round_sockets is not None:
                self.round_sockets.check_peers(self.epoch, peers, self._peer)
        try:
            return self.inbox.wait_votes(iteration, peers, self.setup.exchange_timeout, failed)
        except TimeoutError as error:
            raise WorkerError(f"worker {self.address}: {error} within "
                              f"{self.setup.exchange_timeout:g} s") from None


def take_round(inbox, reads: list, message: tuple) -> bool:
    """Hold a peer's round message ``(epoch, iteration, sender, changes,
    vote)`` in ``inbox`` (``reads[sender]``: the sender's vertices this
    partition reads); False where dropped (another epoch's)."""
    epoch, iteration, sender, changes, vote = message
    if changes[0] == "contributions":
        return inbox.put_round(epoch, iteration, sender, np.array([sender]), changes[2], vote,
                               "contributions")
    indices, values = decode_changes(changes, reads[sender])
    return inbox.put_round(epoch, iteration, sender, indices, values, vote)
