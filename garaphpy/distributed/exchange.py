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
"""

from __future__ import annotations

import threading

import numpy as np


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
        #: partition -> bool mask over the owned range
        self.readers: dict[int, np.ndarray] = {}

    def set_reader(self, partition: int, vertices: np.ndarray) -> None:
        """Partition ``partition`` reads ``vertices`` (owned ones, sorted)."""
        mask = np.zeros(self.end_vertex - self.first_vertex, np.bool_)
        mask[np.asarray(vertices, np.int64) - self.first_vertex] = True
        self.readers[partition] = mask

    def pairs_for(self, changed: np.ndarray) -> dict[int, np.ndarray]:
        """For each reader, the vertices of ``changed`` (owned, sorted) it reads
        (readers reading none of them left out)."""
        offsets = changed - self.first_vertex
        selected = {}
        for partition, mask in sorted(self.readers.items()):
            chosen = changed[mask[offsets]]
            if chosen.size:
                selected[partition] = chosen
        return selected


class Inbox:
    """Pairs received from other partitions, each tagged with the iteration
    that made them, written into the values at the start of the next
    iteration (:meth:`apply`): a faster peer's pairs of iteration t may come
    while this partition has not begun iteration t, and wait.  Pairs of
    another epoch are dropped.  Filled from the worker's event loop while its
    iteration thread may be pulling."""

    def __init__(self):
        self.epoch = 0
        self.lock = threading.Lock()
        self.pending: dict[str, list] = {}

    def reset(self, epoch: int) -> None:
        """Drop everything held; accept ``epoch``'s pairs from now on."""
        with self.lock:
            self.epoch = epoch
            self.pending = {}

    def put(self, epoch: int, iteration: int, kind: str, indices: np.ndarray,
            values: np.ndarray) -> bool:
        """Hold pairs of array ``kind`` made by ``iteration``; False where they
        were dropped."""
        with self.lock:
            if epoch != self.epoch:
                return False
            self.pending.setdefault(kind, []).append((iteration, indices, values))
            return True

    def apply(self, kind: str, target: np.ndarray, before: int,
              received: list | None = None) -> int:
        """Write the pairs of ``kind`` made before iteration ``before`` into
        ``target`` (in the order they came); the pairs written.  ``received``,
        where given, gets each message's indices (the vertices that changed)."""
        with self.lock:
            held = self.pending.get(kind, [])
            due = [item for item in held if item[0] < before]
            self.pending[kind] = [item for item in held if item[0] >= before]
        count = 0
        for _, indices, values in due:
            target[indices] = values
            count += indices.size
            if received is not None:
                received.append(indices)
        return count


def pair_bytes(indices: np.ndarray, values: np.ndarray) -> int:
    """The bytes of a message's pairs."""
    return int(indices.nbytes + values.nbytes)
