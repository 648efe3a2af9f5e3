"""The exchange of changed values between partitions (Garaph section 2.2's GlobalVertices, spread).

After each synchronous iteration a partition's worker holds new values for
the vertices it owns; the other partitions read some of them as sources.
Each partition sends the (index, value) pairs of its *changed* vertices,
compacted, only to the partitions whose pieces read them: the mirror lists,
made once from the pieces (:func:`garaphpy.distributed.partition.read_by`),
tell partition p, for each q, which of p's vertices q reads
(:class:`Mirrors`).  A receiver keeps the pairs in an :class:`Inbox` and
writes them into its full-length value array at the start of its next
iteration, so an iteration never reads a value of the same or a later one.

Messages carry the run's epoch (the number of recoveries so far): pairs of an
iteration abandoned when a worker was lost are dropped.

Where the workers run several iterations a call
(:mod:`garaphpy.distributed.rounds`), each message also carries its sender's
*vote* (its L1 change, its activations and its share of the next
aggregates): a worker waits for every peer's vote of an iteration
(:meth:`Inbox.wait_votes`) and reduces them (:func:`reduce_votes`) as the
client would, so that every worker takes the same decision to go on.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from .._numba_setup import parallel_section
from ..errors import GaraphError
from ..kernels import cpu as kernels
from ..kernels.cpu import exact_sum
from ..monoids import MONOIDS

#: Seconds between a waiting worker's looks at its failed sends.
VOTE_POLL_SECONDS = 0.05


class WorkerError(GaraphError):
    """A partition's worker cannot do its part (its message names the worker)."""


class Mirrors:
    """Which of a partition's owned vertices each other partition reads.

    Parameters
    ----------
    first_vertex, end_vertex : int
        The owned range.
    """

    def __init__(self, first_vertex: int, end_vertex: int):
        self.first_vertex = first_vertex
        self.end_vertex = end_vertex
        #: partition -> over the owned range, each vertex's position in its
        #: mirror list (-1: not read), so that a message's bitmap is made
        #: from the changed vertices alone (:meth:`messages`)
        self.positions: dict[int, np.ndarray] = {}
        #: partition -> how many owned vertices it reads, and which
        self.counts: dict[int, int] = {}
        self.lists: dict[int, np.ndarray] = {}

    def set_reader(self, partition: int, vertices: np.ndarray) -> None:
        """Partition ``partition`` reads ``vertices`` (owned ones, sorted)."""
        vertices = np.asarray(vertices, np.int64)
        positions = np.full(self.end_vertex - self.first_vertex, -1,
                            np.int32 if vertices.size < 2 ** 31 else np.int64)
        positions[vertices - self.first_vertex] = np.arange(vertices.size,
                                                            dtype=positions.dtype)
        self.positions[partition] = positions
        self.counts[partition] = int(vertices.size)
        self.lists[partition] = vertices

    def messages(self, changed: np.ndarray, values: np.ndarray, index_dtype) -> dict:
        """For each reader of some of ``changed`` (owned, sorted), its message
        of their new ``values`` (a full-length array): what
        :func:`encode_changes` makes of :meth:`pairs_for`'s pairs, in time
        that grows with ``changed`` alone (a BFS iteration's few changes
        against a long mirror list), one pass over them a reader
        (:func:`~garaphpy.kernels.cpu.mirrors.mirror_bitmap`: its bitmap
        and its vertices at once).  The readers reading none are left out."""
        index_dtype = np.dtype(index_dtype)
        changed = np.asarray(changed, np.int64)
        every = changed.size == self.end_vertex - self.first_vertex
        one = _one_value_of(values, changed)
        listed = None if every else np.empty(changed.size, np.int64)
        messages = {}
        for partition in sorted(self.lists):
            count = self.counts[partition]
            if not count:
                continue
            bits = None
            if every:
                vertices = self.lists[partition]
            else:
                bits = np.zeros((count + 7) // 8, np.uint8)
                read = kernels.mirror_bitmap(changed, self.first_vertex,
                                             self.positions[partition], bits, listed)
                if not read:
                    continue
                vertices = listed[:read]
            messages[partition] = _message(count, vertices, bits,
                                           one if one is not None else values[vertices],
                                           index_dtype)
        return messages

    def pairs_for(self, changed: np.ndarray) -> dict[int, np.ndarray]:
        """For each reader, the vertices of ``changed`` (owned, sorted) it reads
        (readers reading none of them left out)."""
        every = changed.size == self.end_vertex - self.first_vertex
        offsets = changed - self.first_vertex
        selected = {}
        for partition in sorted(self.lists):
            if not self.counts[partition]:
                continue
            chosen = self.lists[partition] if every else \
                changed[self.positions[partition][offsets] >= 0]
            if chosen.size:
                selected[partition] = chosen
        return selected


def encode_changes(vertices: np.ndarray, values: np.ndarray, mirror_list: np.ndarray,
                   index_dtype) -> tuple:
    """A message of changed values for one reader, in the fewest bytes of three forms.

    ``vertices`` are the changed owned vertices the reader reads (sorted),
    ``values`` their new values and ``mirror_list`` every owned vertex it
    reads, in the order both sides know.  The message is ``(form, where,
    values)``: ``("all", None, ...)`` where every vertex of the mirror list
    changed (PageRank's iterations: the values alone, in its order);
    ``("bitmap", bits, ...)``, one bit a vertex of the mirror list, where
    that is fewer bytes than the indices (a frontier of more than 1/32 of
    it); else ``("indices", vertices, ...)``.  Values that are all the same
    bits (a BFS level) go as one value.  :func:`decode_changes` reads it.
    """
    one = _one_value(values)
    listed = np.zeros(mirror_list.size, np.bool_)
    listed[np.searchsorted(mirror_list, vertices)] = True
    return _message(mirror_list.size, vertices, np.packbits(listed),
                    values if one is None else one, np.dtype(index_dtype))


def _message(count: int, vertices: np.ndarray, bits: np.ndarray | None,
             values: np.ndarray, index_dtype: np.dtype) -> tuple:
    """The message of the changed ``vertices`` a reader of ``count`` mirrored
    vertices reads, ``bits`` their bitmap over its mirror list (None where it
    reads every one), their ``values`` (one where all are the same): the
    smallest form of :func:`encode_changes`."""
    if vertices.size == count:
        return "all", None, values
    if (count + 7) // 8 < vertices.size * index_dtype.itemsize:
        return "bitmap", bits, values
    return "indices", vertices.astype(index_dtype), values


def _one_value(values: np.ndarray) -> np.ndarray | None:
    """``values[:1]`` where more than one value and all are the same bits, else None."""
    if values.size < 2 or values.dtype.kind not in "biuf":
        return None
    bits = values.view(f"u{values.dtype.itemsize}")
    # most arrays of different values differ in their first few
    if not (bits[:64] == bits[0]).all() or not (bits == bits[0]).all():
        return None
    return values[:1]


def _one_value_of(values: np.ndarray, vertices: np.ndarray) -> np.ndarray | None:
    """``_one_value(values[vertices])`` without the gather of every value: the
    first few tell most runs (PageRank's) no, a pass over the rest a BFS
    level's yes."""
    if vertices.size < 2 or values.dtype.kind not in "biuf" \
            or _one_value(values[vertices[:64]]) is None:
        return None
    bits = values.view(f"u{values.dtype.itemsize}")
    return values[vertices[:1]] if kernels.same_bits(bits, vertices) else None


def warm_up_exchange(value_dtype, index_dtype, settles: bool) -> None:
    """Compile (or load from numba's cache) the exchange's kernels
    (:mod:`garaphpy.kernels.cpu.mirrors`) on empty work, for the arrays a
    message brings (a message of indices holds them as ``index_dtype``), so
    that the set-up pays for them, not the first iterations; ``settles``:
    the partition settles the vertices it receives."""
    values = np.zeros(1, value_dtype)
    nothing = np.zeros(0, np.int64)
    for positions in (np.zeros(1, np.int32), np.zeros(1, np.int64)):
        kernels.mirror_bitmap(nothing, 0, positions, np.zeros(1, np.uint8), nothing)
    kernels.same_bits(values.view(f"u{values.dtype.itemsize}"), nothing)
    kernels.bitmap_members(np.zeros(1, np.uint8), np.zeros(1, np.int64))
    with parallel_section():
        for indices in (nothing, np.zeros(0, index_dtype)):
            kernels.write_received(values, indices, values)
        if settles:
            kernels.settle_received(nothing, np.zeros(1, np.bool_), np.zeros(1, np.uint8), 0)


def decode_changes(message: tuple, read_list: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, values)`` of an :func:`encode_changes` message, given the
    receiver's list of the sender's vertices it reads (the sender's mirror
    list); ``values`` may be one value for every index."""
    form, where, values = message
    if form == "all":
        return read_list, values
    if form == "bitmap":
        return kernels.bitmap_members(where, read_list), values
    return where, values


def message_bytes(message: tuple) -> int:
    """The bytes of an :func:`encode_changes` message's arrays."""
    _, where, values = message
    return int(values.nbytes + (where.nbytes if where is not None else 0))


def failed_sends(worker, sends: list):
    """The check an inbox's wait calls while it waits (:meth:`Inbox.wait_votes`,
    :meth:`Inbox.take_messages`): raises a :class:`WorkerError` naming the peer
    (by ``worker``'s ``address`` and ``peer_addresses``) where one of ``sends``,
    (partition, future, what was sent) triples, failed."""
    def failed():
        for q, future, what in sends:
            if future.done():
                try:
                    future.result()
                except Exception as error:      # noqa: BLE001 - the peer is gone
                    raise WorkerError(f"worker {worker.address}: partition {q} in worker "
                                      f"{worker.peer_addresses[q]} did not take {what} "
                                      f"({type(error).__name__})") from None
    return failed


class Inbox:
    """Pairs received from other partitions, each tagged with the iteration
    that made them, written into the values at the start of the next
    iteration (:meth:`apply`): a faster peer's pairs of iteration t may come
    while this partition has not begun iteration t, and wait.  Pairs of
    another epoch are dropped.  Filled from the worker's event loop while its
    iteration thread may be pulling."""

    def __init__(self):
        self.epoch = 0
        self.lock = threading.Condition()
        self.pending: dict[str, list] = {}
        #: (iteration, partition) -> that partition's vote
        self.votes: dict[tuple[int, int], np.ndarray] = {}
        #: (kind, partition) -> that partition's one message of ``kind``
        self.messages: dict[tuple[str, int], object] = {}

    def reset(self, epoch: int) -> None:
        """Drop everything held; accept ``epoch``'s pairs from now on."""
        with self.lock:
            self.epoch = epoch
            self.pending = {}
            self.votes = {}
            self.messages = {}

    def put_round(self, epoch: int, iteration: int, sender: int, indices: np.ndarray,
                  values: np.ndarray, vote: np.ndarray, kind: str = "values") -> bool:
        """Hold a peer's message of ``iteration``: its pairs of array ``kind``
        (none where ``indices`` is empty; for ``"contributions"``, the
        ghosts' contributions a fused pull reads, ``indices`` holds the
        sender alone) and its vote; False where dropped."""
        with self.lock:
            if epoch != self.epoch:
                return False
            if indices.size:
                self.pending.setdefault(kind, []).append((iteration, indices, values))
            self.votes[(iteration, sender)] = vote
            self.lock.notify_all()
            return True

    def wait_votes(self, iteration: int, senders, timeout: float, failed) -> dict:
        """The votes of ``iteration`` from every partition of ``senders``,
        taken out of the inbox, once all came.

        Parameters
        ----------
        timeout : float
            Seconds to wait at most.
        failed : callable
            Called each time ``VOTE_POLL_SECONDS`` pass with votes missing;
            raises where a send to a peer failed.

        Raises
        ------
        TimeoutError
            Naming the partitions whose votes did not come.
        """
        return self._take_when_held(self.votes, iteration, senders, timeout, failed,
                                    f"vote of iteration {iteration}")

    def put_message(self, epoch: int, kind: str, sender: int, message) -> bool:
        """Hold partition ``sender``'s one message of ``kind``; False where dropped."""
        with self.lock:
            if epoch != self.epoch:
                return False
            self.messages[(kind, sender)] = message
            self.lock.notify_all()
            return True

    def take_messages(self, kind: str, senders, timeout: float, failed=None) -> dict:
        """The message of ``kind`` of every partition of ``senders``, taken out of
        the inbox once all came (``timeout`` seconds at most; ``failed``, where
        given, as for :meth:`wait_votes`).

        Raises
        ------
        TimeoutError
            Naming the partitions whose messages did not come.
        """
        return self._take_when_held(self.messages, kind, senders, timeout, failed,
                                    f"{kind} message")

    def _take_when_held(self, table: dict, tag, senders, timeout: float, failed,
                        what: str) -> dict:
        """``{sender: table[(tag, sender)]}`` for ``senders``, taken out of
        ``table`` once every one is there; ``failed`` (where given) called each
        ``VOTE_POLL_SECONDS`` some are missing; a TimeoutError names the
        partitions whose ``what`` did not come."""
        keys = [(tag, q) for q in senders]
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                missing = [key for key in keys if key not in table]
                if not missing:
                    return {key[1]: table.pop(key) for key in keys}
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {what} from partitions "
                                       f"{[key[1] for key in missing]}")
                if self.lock.wait(min(left, VOTE_POLL_SECONDS)):
                    continue
            # outside the lock: a future's result is read on the event loop, which
            # may be waiting for the lock to hold a message
            if failed is not None:
                failed()

    def put(self, epoch: int, iteration: int, kind: str, indices: np.ndarray,
            values: np.ndarray) -> bool:
        """Hold pairs of array ``kind`` made by ``iteration``; False where they
        were dropped."""
        with self.lock:
            if epoch != self.epoch:
                return False
            self.pending.setdefault(kind, []).append((iteration, indices, values))
            return True

    def take_due(self, kind: str, before: int) -> list:
        """The ``(iteration, indices, values)`` of ``kind`` made before
        iteration ``before``, in the order they came, taken out."""
        with self.lock:
            held = self.pending.get(kind, [])
            self.pending[kind] = [item for item in held if item[0] >= before]
        return [item for item in held if item[0] < before]

    def apply(self, kind: str, target: np.ndarray, before: int,
              received: list | None = None) -> int:
        """Write the pairs of ``kind`` made before iteration ``before`` into
        ``target`` (in the order they came); the pairs written.  ``received``,
        where given, gets each message's indices (the vertices that changed)."""
        count = 0
        for _, indices, values in self.take_due(kind, before):
            if indices.size:
                with parallel_section():
                    kernels.write_received(target, indices, np.asarray(values, target.dtype))
            count += indices.size
            if received is not None:
                received.append(indices)
        return count


def reduce_votes(votes: list, monoids: list) -> tuple[float, int, np.ndarray]:
    """``(l1_change, activated, aggregates)`` of an iteration from its votes in
    partition order (each ``[l1_change, activated, *aggregate shares]``): the
    sums, and each aggregate reduced by its monoid
    (:func:`reduce_aggregates`)."""
    l1_change = float(sum(float(vote[0]) for vote in votes))
    activated = int(sum(int(vote[1]) for vote in votes))
    return l1_change, activated, reduce_aggregates([vote[2:] for vote in votes], monoids)


def aggregate_monoids(program) -> list[str]:
    """The monoid of each aggregate ``program`` declares, in declaration order."""
    declared = type(program).aggregates
    return [declared[name][0] for name in declared]


def aggregate_shares(partial: np.ndarray, sums: np.ndarray, monoids: list) -> np.ndarray:
    """A partition's share of an iteration's aggregates from its parts (the
    kernels' ``(partial, sums)``), as one float64 row: per aggregate in
    declaration order, an add aggregate's exact accumulator
    (:data:`~garaphpy.kernels.cpu.exact_sum.WIDTH` entries, each an integer
    a float64 holds exactly) and a min or max aggregate's value.  Summed by
    :func:`reduce_aggregates` into the same bits as one process's, whatever
    the partitions."""
    share = [np.asarray(column, np.float64).reshape(-1)
             for column in exact_sum.merged_columns(partial, sums, monoids)]
    return np.concatenate(share) if share else np.zeros(0, np.float64)


def shares_of_values(aggregates, monoids: list) -> np.ndarray:
    """The share row of aggregates another processor reduced as floats (a
    GPU partition's): each add aggregate's value as an exact accumulator."""
    aggregates = np.asarray(aggregates, np.float64)
    sums = np.zeros((1, len(monoids), exact_sum.WIDTH), np.int64)
    for i, monoid in enumerate(monoids):
        if monoid == "add":
            sums[0, i] = exact_sum.accumulator_of(aggregates[i:i + 1])
    return aggregate_shares(aggregates[None, :len(monoids)], sums, monoids)


def reduce_aggregates(rows: list, monoids: list) -> np.ndarray:
    """The iteration's aggregates from the partitions' shares (rows of
    :func:`aggregate_shares`, in partition order), each reduced by its
    monoid (one zero where the program has none): the one reduction of the
    client and the workers."""
    if not monoids:
        return np.zeros(1, np.float64)
    stacked = np.vstack(rows)
    result, column = np.zeros(len(monoids), np.float64), 0
    for i, monoid in enumerate(monoids):
        if monoid == "add":
            accumulators = stacked[:, column:column + exact_sum.WIDTH].astype(np.int64)
            result[i] = exact_sum.value(exact_sum.merge_rows(accumulators))
            column += exact_sum.WIDTH
        else:
            result[i] = getattr(stacked[:, column], MONOIDS[monoid].numpy_reduce)()
            column += 1
    return result


def pair_bytes(indices: np.ndarray, values: np.ndarray) -> int:
    """The bytes of a message's pairs."""
    return int(indices.nbytes + values.nbytes)
