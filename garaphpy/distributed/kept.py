"""What a worker process keeps between partitioned runs: the opened store and a partition's in-edges (Garaph section 2.2's pages, read once).

A partition's worker opens the store and reads its partition's in-edges
from the pages (:meth:`~garaphpy.distributed.worker.PartitionWorker._open`):
on a large graph the biggest part of a run's set-up, and the same for every
run of that graph over the same partitions.  So a partition let go at a
run's end (:meth:`~garaphpy.distributed.hosts.PartitionHost.drop`) gives
them back here (:func:`give_back`), and the next run's partition of the same
range of the same store takes them (:func:`take`) instead of reading them
again.

A store is known by its path and its manifest file's identity (device,
inode, size, modification time): a store preprocessed again at the same path
writes a new manifest, and what was kept of the old one is not taken (it is
let go).  Each kept partition is taken by one run's partition at a time,
which reads it only (in-edges renumbered in place by a fused pull are not
given back).  A process keeps the partitions of one store (the last given back), at most
:data:`KEPT_PARTITIONS` of them: about one run's in-edges, which the worker
held during the run anyway.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

#: Partitions a worker process keeps at most (a worker holding more in a run
#: keeps its first ones).
KEPT_PARTITIONS = 4

#: the kept partitions, each under its key (:func:`partition_key`)
_KEPT: dict = {}
_LOCK = threading.Lock()


@dataclass
class KeptPartition:
    """A partition's opened store and in-edges, as its worker read them.

    Attributes
    ----------
    store : garaphpy.storage.store.Store
    edge_base : int
        The partition's first in-edge (in CSC order).
    sources, weights : arrays
        Its in-edges' sources and values (``weights`` the worker's dummy
        where it keeps none).
    pieces : list
        ``(piece, sources, weights)`` views, page by page.
    keeps_weights : bool
        ``weights`` holds the edge values (else it is the placeholder the
        pieces name).
    """

    store: object
    edge_base: int
    sources: object
    weights: object
    pieces: list
    keeps_weights: bool

    def lend_to(self, worker) -> None:
        """Give ``worker`` (a partition's, being made) these in-edges, as its
        ``_read_pieces`` would have read them."""
        worker.edge_base, worker.sources, worker.weights, worker.pieces = \
            self.edge_base, self.sources, self.weights, self.pieces
        if not self.keeps_weights:      # the pieces' placeholder, as read
            worker.dummy_weights = self.weights


def store_identity(path) -> tuple | None:
    """The identity of the store at ``path``: its resolved path and its
    manifest's device, inode, size and modification time (None where it has
    no manifest)."""
    from ..storage.store import MANIFEST

    path = Path(path)
    try:
        status = os.stat(path / MANIFEST)
    except OSError:
        return None
    return (str(path.resolve()), status.st_dev, status.st_ino, status.st_size,
            status.st_mtime_ns)


def partition_key(path, first: int, end: int, reads_weights: bool) -> tuple | None:
    """The key of partition ``first..end-1`` of the store at ``path`` (with its
    edge values where ``reads_weights``); None where the store has no identity."""
    identity = store_identity(path)
    return None if identity is None else (identity, int(first), int(end), bool(reads_weights))


def take_for(path, first: int, end: int, reads_weights: bool) -> tuple:
    """``(key, kept partition or None)`` for partition ``first..end-1`` of the
    store at ``path`` (:func:`partition_key`, :func:`take`)."""
    key = partition_key(path, first, end, reads_weights)
    return key, take(key)


def keep(worker) -> bool:
    """A partition's ``worker`` let go at its run's end gives its store and
    in-edges back (unless a fused pull renumbered them); whether they were kept."""
    if worker.fused is not None:
        return False
    return give_back(worker.kept_key, KeptPartition(
        worker.store, worker.edge_base, worker.sources, worker.weights, worker.pieces,
        worker.weights is not worker.dummy_weights))


def take(key) -> KeptPartition | None:
    """The partition kept under ``key``, taken out, or None; what is kept of
    another store is let go (the store at that path changed, or another is read)."""
    if key is None:
        return None
    with _LOCK:
        for held in [k for k in _KEPT if k[0] != key[0]]:
            del _KEPT[held]
        return _KEPT.pop(key, None)


def give_back(key, kept: KeptPartition) -> bool:
    """Keep ``kept`` under ``key`` for a later run (another store's partitions
    let go); whether it was kept (not where the store changed since, or
    :data:`KEPT_PARTITIONS` are kept)."""
    if key is None or store_identity(key[0][0]) != key[0]:
        return False
    with _LOCK:
        for held in [k for k in _KEPT if k[0] != key[0]]:
            del _KEPT[held]
        if len(_KEPT) >= KEPT_PARTITIONS:
            return False
        _KEPT[key] = kept
        return True


def kept_keys() -> list:
    """The keys of the partitions kept in this process (tests look)."""
    with _LOCK:
        return list(_KEPT)


def let_go_all() -> int:
    """Let every kept partition go; how many there were."""
    with _LOCK:
        count = len(_KEPT)
        _KEPT.clear()
        return count
