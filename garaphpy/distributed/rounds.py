"""Several iterations a call: the workers agree among themselves (Pregel's supersteps, without a master).

A call of the client to each worker (:meth:`Rounds.iterate`) runs the
iterations ``first..stop-1``.  After its pull of an iteration, a worker sends
every peer one message (:meth:`Rounds.receive_round`, one way over a comm
of its worker's: :mod:`garaphpy.distributed.links`): the pairs of its
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
send, its answer and the client's round trip (no answer either: a message
read by the Dask worker's handler, not an actor call).  A worker blocks its actor's
thread while it waits, so the run takes this path only where each worker
holds one partition (two actors of one worker share a thread).  A send that
fails (a peer's worker gone) fails the call at once; a peer whose vote does
not come within the exchange timeout fails it then, and the client recovers
as after a failed step.
"""

from __future__ import annotations

import time

import numpy as np

from .exchange import (WorkerError, aggregate_monoids, decode_changes, failed_sends,
                       message_bytes, reduce_votes)

#: A worker's owned values of this many bytes at most come with the call that
#: ends the run (:meth:`Rounds.iterate`); more, by a call of their own.
FOLDED_VALUES_BYTES = 256 * 2**10


class Rounds:
    """The several-iterations call of :class:`~garaphpy.distributed.worker.PartitionWorker`."""

    def iterate(self, first: int, stop: int, aggregates: np.ndarray,
                tolerance: float | None, union_find_start: bool = False,
                last: bool = False) -> list[dict]:
        """Run iterations ``first..stop-1`` (fewer where the votes say stop),
        with ``union_find_start`` after CC's union-find start
        (:meth:`~garaphpy.distributed.components.UnionFindStart.union_find_start`,
        its row the first iteration's ``union_find_start``: no call of the
        client of its own, and each worker goes on to its pull as soon as its
        labels are lowered); each iteration's row as :meth:`step` gives it, with ``round_seconds``
        (the iteration's time here, votes included), the exchange's phases
        (``send_seconds``: the messages handed over; ``wait_seconds``: until
        every peer's vote came) and, as wall-clock times (comparable between
        the workers of one host), when the pull ended (``pull_end_time``) and
        when the last vote came (``votes_time``).  Where the run ends with the
        call (the votes say stop, or ``stop`` is the run's iteration limit:
        ``last``), the last row also brings the owned values where they are
        few (``owned_values``, :data:`FOLDED_VALUES_BYTES` at most: no call
        of the client's to gather them; more would count their transfer in
        the iteration's time, and a call of their own costs little beside it)."""
        rows = []
        peers = [q for q in range(len(self.peers)) if q != self.index]
        monoids = aggregate_monoids(self.setup.program)
        start_row = self.union_find_start() if union_find_start else None
        for iteration in range(first, stop):
            started = time.perf_counter()
            row, changed = self._pull_step(iteration, aggregates)
            if start_row is not None:
                row["union_find_start"], start_row = start_row, None
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
                last = True
                break
        if last and (self.end - self.first) * self.values.itemsize <= FOLDED_VALUES_BYTES:
            rows[-1]["owned_values"] = self.owned_values()
        return rows

    async def receive_round(self, epoch: int, iteration: int, sender: int, message: tuple,
                            vote: np.ndarray) -> bool:
        """A peer's message of ``iteration``: its changes for this partition
        (:func:`~garaphpy.distributed.exchange.encode_changes`, or the
        contributions of its vertices this one reads) and its vote."""
        if message[0] == "contributions":
            return self.inbox.put_round(epoch, iteration, sender, np.array([sender]),
                                        message[2], vote, "contributions")
        indices, values = decode_changes(message, self.reads[sender])
        return self.inbox.put_round(epoch, iteration, sender, indices, values, vote)

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
        for q in peers:
            message = messages.get(q, nothing)
            sent += message_bytes(message)
            sends[q] = self.tell(q, "receive_round", self.epoch, iteration, self.index, message,
                                 vote)
        return sent, sends

    def _votes(self, iteration: int, peers: list, sends: dict) -> dict:
        """The peers' votes of ``iteration``; a failed send or a vote that does
        not come within the exchange timeout fails the call, naming the peer."""
        failed = failed_sends(self, [(q, future, f"iteration {iteration}'s pairs")
                                     for q, future in sends.items()])
        try:
            return self.inbox.wait_votes(iteration, peers, self.setup.exchange_timeout, failed)
        except TimeoutError as error:
            raise WorkerError(f"worker {self.address}: {error} within "
                              f"{self.setup.exchange_timeout:g} s") from None
