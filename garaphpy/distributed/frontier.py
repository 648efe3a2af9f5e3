"""What a partition's iteration pulls: its notified destinations (Garaph section 4.2, per partition).

The one-process CPU engine pulls, in a sparse iteration, only the vertices
an active in-neighbour notifies (notify-pull), and, for a program whose
values are final once set, skips the settled vertices (early exit).  A
partition's worker does the same over its own in-edges: the vertices that
changed in the last iteration are its own changes and the pairs it received
in the exchange (the other partitions send it exactly the changed vertices
its in-edges read), so it needs no one else's edges.  It turns its in-edges
around once (:func:`partition_out_edges`) and notifies through them with the
CPU engine's kernels (:func:`garaphpy.kernels.cpu.notify`), choosing between
the pull of every owned vertex and the notify-pull by the CPU engine's rule
(:func:`garaphpy.scheduler.decisions.choose_direction` over the partition's
edges).

Pulling only the notified vertices gives a full pull's values for a program
that declares ``apply_keeps_best`` (its new value follows from the
in-neighbours that changed alone: :func:`frontier_pulls`); other programs
(PageRank: an aggregate changes every vertex) pull every owned vertex each
iteration.
"""

from __future__ import annotations

import numpy as np

from .. import config
from .._numba_setup import parallel_section
from ..kernels import cpu as kernels
from ..scheduler import decisions


def frontier_pulls(program) -> bool:
    """Whether a partition may pull only the destinations of the vertices that
    changed: a program declaring ``apply_keeps_best`` (a vertex's new value
    follows from its in-neighbours that changed in the last iteration alone,
    and the vertices not active at the start improve no neighbour) and no
    aggregate (which could change a vertex none of whose in-neighbours did)."""
    return bool(program.apply_keeps_best and not program.aggregates)


def partition_early_exit(program) -> bool:
    """Whether a partition skips its settled vertices and stops a vertex's
    gather at the activating in-edge: the one-process rule
    (:func:`garaphpy.scheduler.decisions.early_exit`, a synchronous CPU run),
    with the frontier pulls the skip needs (:func:`frontier_pulls`)."""
    return decisions.early_exit(program.final_once_set, True, "cpu") and frontier_pulls(program)


def partition_out_edges(sources: np.ndarray, in_offsets: np.ndarray, first: int, end: int,
                        num_vertices: int, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The partition's in-edges turned around: ``(out_offsets, out_targets)``,
    out_targets[out_offsets[u]:out_offsets[u + 1]] the owned vertices ``u``
    has an edge to, in increasing order (a counting sort on ``threads``
    threads, :func:`garaphpy.kernels.cpu.turn_in_edges`, where a sort of
    (source, destination) keys made most of a worker's set-up: a half of
    kron:18, 393 -> 39 ms, of kron:20, 3170 -> 413 ms, one thread, dev VM).

    Parameters
    ----------
    sources : array
        The sources of the in-edges of vertices ``first..end-1``, in CSC order
        (edges ``in_offsets[first]..in_offsets[end]``).
    """
    out_offsets = np.zeros(num_vertices + 1, np.int64)
    out_targets = np.empty(sources.size, sources.dtype)
    with parallel_section():
        kernels.turn_in_edges(in_offsets, sources, first, end, out_offsets, out_targets,
                              max(1, int(threads)))
    return out_offsets, out_targets


class PartitionFrontier:
    """The vertices changed in the last iteration that a partition reads, and
    the owned vertices they notify.

    Parameters
    ----------
    sources, in_offsets, first, end, num_vertices
        As for :func:`partition_out_edges`.
    initially_active : int64 array
        The vertices active before the first iteration (every vertex or the
        sources).
    early_exit : bool
        Settled vertices are never notified (:func:`partition_early_exit`).
    threads : int
    """

    def __init__(self, sources, in_offsets, first: int, end: int, num_vertices: int,
                 initially_active: np.ndarray, early_exit: bool, threads: int):
        self.first, self.end = first, end
        self.threads = threads
        self.num_edges = int(sources.size)
        self.out_offsets, self.out_targets = partition_out_edges(
            sources, in_offsets, first, end, num_vertices, threads)
        self.initially_active = np.asarray(initially_active, np.int64)
        self.early_exit = early_exit
        #: a notify's claims; a settled vertex holds SETTLED_CLAIM for good
        self.claimed = np.zeros(num_vertices, np.uint8)
        self.settled = np.zeros(num_vertices if early_exit else 1, np.bool_)
        #: ``settled`` packed at each pull's start (:meth:`pack_settled`): the
        #: pull's probes of the in-neighbours read a bit, not a byte
        self.settled_bits = np.zeros((num_vertices + 63) // 64 if early_exit else 0,
                                     np.uint64)
        #: in-edges of the settled owned vertices, counted as they settle (the
        #: pull and push kernels add theirs, :meth:`restart` those it settles),
        #: as the one process keeps its count: no pass over the owned vertices
        self.settled_in_edges = np.zeros(1, np.int64)
        #: the in-edges' offsets (Beamer's rule weighs the unsettled owned vertices')
        self.in_offsets = in_offsets
        self.owned_in_edges = int(in_offsets[end] - in_offsets[first])
        self.num_vertices = num_vertices
        #: the last direction was a pull, and the frontier it had (Beamer's rule)
        self.pulled_last, self.previous_active = False, 0
        #: a bit an owned vertex, zeroed between uses (:meth:`in_order`)
        self.marks = np.zeros((end - first + 63) // 64, np.uint64)
        self.restart()

    def restart(self, changed: np.ndarray | None = None) -> None:
        """Take ``changed`` (owned vertices) as the last iteration's changes
        (default: the initially active vertices, before the first iteration)."""
        self.changed = [self.initially_active if changed is None else changed]
        if not self.early_exit:
            return
        if changed is None:     # every partition's: the owned ones' in-edges counted
            active = self.initially_active
            self._mark_settled(active[(active >= self.first) & (active < self.end)])
            self.settle(active)
        else:
            self._mark_settled(changed)

    def _mark_settled(self, owned: np.ndarray) -> None:
        self.settled_in_edges[0] += kernels.mark_settled(owned, self.settled, self.claimed,
                                                         self.in_offsets)

    def pack_settled(self) -> None:
        """``settled`` into ``settled_bits``, before a pull (no vertex settles
        during one: the worker settles its changes after it)."""
        kernels.pack_flags(self.settled, self.settled_bits)

    def forget(self) -> None:
        """The last changes are not known (a restore): the next iteration pulls
        every owned vertex."""
        self.changed = None

    def settle(self, vertices: np.ndarray) -> None:
        """Mark ``vertices`` settled (a program final once set: changed once,
        final), so that no notify lists them again."""
        with parallel_section():
            kernels.settle_received(np.asarray(vertices, np.int64), self.settled, self.claimed,
                                    kernels.SETTLED_CLAIM)

    def settle_from_values(self, values: np.ndarray, initial: np.ndarray,
                           is_source: np.ndarray) -> None:
        """Settled again after a restore: the sources and every vertex whose
        value left its initial one (a program final once set changes a
        vertex once)."""
        done = is_source | (values != initial)
        self.settled[:] = done
        self.claimed[:] = np.where(done, kernels.SETTLED_CLAIM, 0)
        self.settled_in_edges[0] = self.owned_in_edges - self.recount_unsettled_in_edges()

    def unsettled_in_edges(self) -> int:
        """The in-edges of the owned vertices not settled (kept as they settle)."""
        return self.owned_in_edges - int(self.settled_in_edges[0])

    def recount_unsettled_in_edges(self) -> int:
        """:meth:`unsettled_in_edges` counted again over the owned vertices."""
        return int(kernels.unsettled_in_edges(self.in_offsets, self.settled, self.first,
                                              self.end))

    def add_changes(self, vertices: np.ndarray) -> None:
        """Vertices changed in the last iteration, received (other partitions')."""
        if self.changed is not None and vertices.size:
            self.changed.append(np.asarray(vertices, np.int64))
            if self.early_exit:
                self.settle(vertices)

    def direction(self) -> tuple[str, np.ndarray | None, np.ndarray | None]:
        """``(direction, frontier, prefix)``: ``"pull"`` (every owned vertex)
        or ``"notify-pull"`` by the CPU engine's switch over the partition's
        edges (Beamer's, :func:`~garaphpy.scheduler.decisions.settling_direction`,
        with early exit, where a pull reads the unsettled vertices' in-edges
        alone), with the changed vertices (None for a pull the rule chose
        from the frontier's size alone: nothing reads them) and, for a
        notify-pull, their out-degree prefix here (None for a pull)."""
        if self.changed is None:
            self.pulled_last, self.previous_active = True, self.num_vertices
            return "pull", None, None
        size = sum(int(changed.size) for changed in self.changed)
        frontier = None
        if self.early_exit and self.pulled_last:
            # from a pull the rule reads the frontier's sizes alone (the changes
            # not joined: after a dense level, 500,000 vertices' copy)
            direction = decisions.settling_direction(
                0, size, 0, self.num_vertices, True, self.previous_active)
        else:
            frontier = self._joined()
            if self.early_exit:
                direction = decisions.settling_direction(
                    self.out_edges(frontier), size, self.unsettled_in_edges(),
                    self.num_vertices, False, self.previous_active)
            else:
                direction = decisions.choose_direction(
                    decisions.active_fraction(self.out_edges(frontier), self.num_edges))
        self.pulled_last, self.previous_active = direction == "pull", size
        if direction == "pull":
            return direction, frontier, None
        frontier = self._joined() if frontier is None else frontier
        return direction, frontier, kernels.frontier_degree_prefix(frontier, self.out_offsets,
                                                                   self.threads)

    def _joined(self) -> np.ndarray:
        """The last iteration's changes, owned and received, in one array."""
        return np.concatenate(self.changed) if len(self.changed) > 1 else self.changed[0]

    def out_edges(self, frontier: np.ndarray) -> int:
        """The out-edges to owned vertices of ``frontier`` (distinct vertices:
        every vertex's, without a pass, where it holds them all).  The compiled
        sum on one thread too (the worker loads it at its set-up): numpy's
        gathers and temporaries took 0.23 ms for 64,000 vertices of kron:20
        against 0.10, 1.1 against 0.16 under a Dask nanny's malloc setting
        (dev VM)."""
        if frontier.size == self.num_vertices:
            return self.num_edges
        return int(kernels.frontier_degree_sum(frontier, self.out_offsets))

    def notified(self, frontier: np.ndarray, prefix: np.ndarray) -> np.ndarray:
        """The owned vertices with an in-neighbour in ``frontier`` (settled ones
        left out), each once, in increasing order."""
        chunks = max(1, self.threads * config.CPU_CHUNKS_PER_THREAD)
        notified = kernels.notify(frontier, prefix, self.out_offsets, self.out_targets,
                                  self.claimed, chunks)
        kernels.reset_flags(notified, self.claimed)
        return self.in_order(notified)

    def in_order(self, owned: np.ndarray) -> np.ndarray:
        """The distinct ``owned`` vertices in increasing order (a notify's or a
        push's, in the order its threads found them), by a bitmap over the
        owned range (:func:`~garaphpy.kernels.cpu.in_range_order`), not a
        sort."""
        return kernels.in_range_order(owned, self.first, self.marks)
