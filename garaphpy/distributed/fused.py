"""A partition's pull fused with its next contributions and aggregates (Garaph section 4.1; GAPBS's PageRank loop).

The one-process CPU engine pulls a program with precomputed source-side
gathers (PageRank's rank(u) / outdeg(u)) with
:func:`garaphpy.kernels.cpu.pull_fused`: one launch over the whole CSC, its
vertices in many parts taken by the first thread free, each vertex's new
value giving at once its contribution to the next pull and its share of the
next iteration's aggregates.  :class:`FusedPartitionPull` runs the same
kernel over a partition, in the partition's own numbering of the vertices
(:func:`~garaphpy.distributed.partition.compact_sources`): its owned
vertices ``first..end-1`` are ``0..end-first-1``, so the kernel reads the
owned slices of the value, flag and attribute arrays, and the ghosts (the
other partitions' vertices its in-edges read) follow in the contribution
arrays.  An iteration computes the ghosts' contributions from the values
the exchange brought (:func:`garaphpy.kernels.cpu.listed_source_contributions`),
then pulls; the owned vertices' contributions for the next pull come out of
the pull itself.  The sums are those of the page-by-page pull, in the same
order, without its vertices cut between pages and parts.

On one thread the fused kernel's work a vertex (its next contribution and
its fold of the aggregates, in the edge loop's registers' way) costs more
than the passes it saves: kron:20 over two partitions on the dev VM, 4.3 ns
an edge against 3.4 for the page-by-page pull over the same numbering.  Its
gain is its parts taken as threads free up: on two threads of a loaded
2-core VM 37 ms a pull against 67 for equal parts a page.  So a worker of
one thread pulls page by page, reading the contributions :meth:`prepare`
makes in this numbering (:func:`fused_partition_pull`).
"""

from __future__ import annotations

import numpy as np

from .. import config
from .._numba_setup import parallel_section
from ..kernels import cpu as kernels
from ..kernels.cpu.arguments import apply_context
from .partition import compact_sources


def fused_partition_pull(threads: int) -> bool:
    """Whether a partition's worker of ``threads`` kernel threads pulls fused
    (:meth:`FusedPartitionPull.pull`) rather than page by page over the same
    numbering: from ``config.PARTITION_FUSED_PULL_MIN_THREADS`` threads on
    (see the module)."""
    return threads >= int(config.PARTITION_FUSED_PULL_MIN_THREADS)


class FusedPartitionPull:
    """The fused pull of one partition's owned vertices.

    Parameters
    ----------
    pieces_sources : list of arrays
        The sources of the partition's pieces, views of ``sources`` (the
        partition's in-edges in CSC order), renumbered here.
    sources : array
    in_offsets : int64 array of |V| + 1
        The store's CSC index.
    first, end : int
        The owned vertices.
    attrs : tuple of arrays
        The worker's vertex attributes (over every vertex, or of one entry).
    contribution_dtype : numpy dtype
    threads : int
        The worker's kernel threads.
    """

    def __init__(self, pieces_sources, sources, in_offsets, first: int, end: int, attrs: tuple,
                 contribution_dtype, threads: int):
        num_vertices = in_offsets.shape[0] - 1
        self.first, self.end, self.owned = first, end, end - first
        self.sources = sources
        self.ghosts = compact_sources(pieces_sources, first, end, num_vertices)
        self.offsets = np.asarray(in_offsets[first:end + 1], np.int64) - int(in_offsets[first])
        slots = self.owned + self.ghosts.size
        self.contributions = kernels.mapped_zeros(slots, contribution_dtype, threads)
        self.next_contributions = kernels.mapped_zeros(slots, contribution_dtype, threads)
        # many parts, taken by the first thread free (the one process's rule)
        parts = max(1, threads * int(config.CPU_FUSED_PULL_PARTS_PER_THREAD))
        self.part_starts = kernels.balanced_vertex_starts(self.offsets, parts)
        self.local_attrs = tuple(a[first:end] if a.shape[0] == num_vertices else a
                                 for a in attrs)
        #: the iteration whose owned contributions ``contributions`` holds
        #: (made by the last fused pull); -1: none, computed at the next pull
        self.owned_ready = -1
        #: the pull is fused (:func:`fused_partition_pull`); else page by page
        self.whole = fused_partition_pull(threads)
        #: the ghost slots whose contributions came for the next pull
        #: (:meth:`take_contributions`), ``(lo, hi)`` pairs
        self.received: list = []

    def forget(self) -> None:
        """The values changed outside a pull (a restore): the next pull
        computes the owned contributions again."""
        self.owned_ready = -1

    def pull(self, compiled, values: np.ndarray, next_values: np.ndarray, active: np.ndarray,
             attrs: tuple, context: tuple, stats: np.ndarray, team: int,
             aggregate_identities: np.ndarray) -> tuple:
        """One synchronous pull of the owned vertices into ``next_values``.

        Parameters
        ----------
        compiled : the program's compiled kernels
        values, next_values, active : arrays over every vertex
            The committed values (the exchange's pairs written), where the new
            ones go, the activity flags.
        attrs : tuple
            The worker's vertex attributes, for the ghosts' contributions.
        context : (aggregates, num_vertices, iteration)
        stats : float64 array of 2
            L1 change and activated vertices, added to.
        team : int
            Threads that take the parts.

        Returns
        -------
        partial, sums
            The parts' shares of the next iteration's aggregates, as
            :func:`garaphpy.kernels.cpu.compute_aggregates` gives them.
        """
        aggregates, num_vertices, iteration = context
        first, end = self.first, self.end
        fused = compiled.fused_pull_kernel()
        self.prepare(compiled, values, attrs, iteration)
        with parallel_section():
            folded = fused(
                compiled.identity, (self.offsets, self.sources),
                (values[first:end], next_values[first:end], self.contributions,
                 self.next_contributions),
                apply_context(self.local_attrs, aggregates, num_vertices, iteration),
                (active[first:end], stats), (self.part_starts, team), aggregate_identities)
        self.contributions, self.next_contributions = self.next_contributions, \
            self.contributions
        self.owned_ready = iteration + 1
        return folded

    def take_contributions(self, received: list, partitions) -> None:
        """Write the ghosts' contributions the peers sent for the next pull,
        ``(iteration, [sender], contributions)`` each, the sender's vertices
        this partition reads in increasing order (its fused pull's next
        contributions, :meth:`~garaphpy.distributed.rounds.Rounds._send_round`):
        the contributions of a peer's whole range of ghosts, one slice.  The
        ghosts' values of those peers are then not kept (nothing else reads
        them)."""
        self.received = []
        for _, sender, contributions in received:
            partition = partitions[int(sender[0])]
            lo, hi = (int(i) for i in np.searchsorted(
                self.ghosts, [partition.first_vertex, partition.end_vertex]))
            if hi - lo != contributions.size:
                raise ValueError(f"{contributions.size} contributions from partition "
                                 f"{partition.index}, which has {hi - lo} ghosts here")
            self.contributions[self.owned + lo:self.owned + hi] = contributions
            self.received.append((lo, hi))

    def prepare(self, compiled, values: np.ndarray, attrs: tuple, iteration: int) -> None:
        """The contributions a pull of ``iteration`` reads, in the partition's
        numbering: the ghosts' from ``values`` (the pairs received written)
        but those whose contributions came (:meth:`take_contributions`), the
        owned vertices' unless the last fused pull made them."""
        owned = self.owned
        start = 0
        with parallel_section():
            if self.owned_ready != iteration:
                compiled.kernels.source_contributions(values[self.first:self.end],
                                                      self.local_attrs,
                                                      self.contributions[:owned])
            for lo, hi in sorted(self.received) + [(self.ghosts.size, self.ghosts.size)]:
                if lo > start:
                    compiled.kernels.listed_source_contributions(
                        values, attrs, self.ghosts[start:lo],
                        self.contributions[owned + start:owned + lo])
                start = max(start, hi)
        self.received = []

    def warm_up(self, compiled, values: np.ndarray, active: np.ndarray, attrs: tuple,
                aggregate_identities: np.ndarray) -> None:
        """Compile (or load) the kernels of :meth:`pull` on empty work."""
        kernels_of_program, fused = compiled.kernels, compiled.fused_pull_kernel()
        nothing = self.contributions[:0]
        with parallel_section():
            kernels_of_program.source_contributions(values[:0], self.local_attrs, nothing)
            kernels_of_program.listed_source_contributions(values, attrs, self.ghosts[:0],
                                                           nothing)
            if not self.whole:
                return
            fused(compiled.identity, (self.offsets[:1], self.sources[:0]),
                  (values[:0], values[:0], nothing, nothing),
                  apply_context(self.local_attrs, np.zeros(max(1, aggregate_identities.size)),
                                1, 0),
                  (active[:0], np.zeros(2)), (self.part_starts[:1], 1), aggregate_identities)
