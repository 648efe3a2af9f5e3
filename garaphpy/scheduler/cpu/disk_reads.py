"""The pages each CPU direction needs when pages come from disk (Garaph sections 2.2, 4.2).

A run whose host budget does not hold every page reads the others from the
storage directories each iteration that needs them.  :class:`DiskReads`
says which pages a pull and a notify-pull (or a push) of the frontier as it
stands would read, and their disk bytes outside the host budget: the inputs
of :func:`~garaphpy.scheduler.disk_decisions.disk_direction`.  With early
exit, a pull needs only the pages holding a vertex not yet settled that
has in-edges, and skips the others (:meth:`DiskReads.pull_pages`).
"""

from __future__ import annotations

import numpy as np

from ... import config
from ...kernels.cpu import frontier_degree_prefix, mark_out_neighbours
from ...storage.tiers import DISK, pages_holding
from ..cpu_state import GraphArrays
from ..plan import CpuPlan


class DiskReads:
    """What each direction of an iteration reads from disk.

    Parameters
    ----------
    arrays : GraphArrays
        The run's graph; its page source says whether pages come from disk.
    plan : CpuPlan
        The run's CPU choices (threads, early exit, push).
    settled : callable
        The run's settled flags now (early exit), one bool a vertex.

    Attributes
    ----------
    from_disk : bool
        Whether some page is read from the storage directories (a page
        source with a placement); False in memory, where nothing here runs.
    """

    def __init__(self, arrays: GraphArrays, plan: CpuPlan, settled):
        self.arrays = arrays
        self.plan = plan
        self.settled = settled
        source = arrays.page_source
        self.from_disk = bool(source.reads_storage) and hasattr(source, "placement")
        pages = arrays.pages
        self.first_vertex = np.array([info.first_vertex for info in pages], np.int64)
        self.end_vertex = np.array([info.end_vertex for info in pages], np.int64)
        self._has_in_edges = None

    @property
    def disk_bytes_per_s(self) -> float:
        """The disk's read speed (the page source's ``disk_bytes_per_s``)."""
        return self.arrays.page_source.disk_bytes_per_s

    @property
    def edges_per_s(self) -> float:
        """The CPU's edges a second over its threads
        (``config.HYBRID_CPU_EDGES_PER_SECOND_PER_THREAD`` each)."""
        return max(1, self.plan.threads) * config.HYBRID_CPU_EDGES_PER_SECOND_PER_THREAD

    def _on_disk_bytes(self, needed: np.ndarray) -> int:
        """Disk bytes of the pages ``needed`` in neither budget (placed now)."""
        placement = self.arrays.page_source.placement
        return int(placement.disk_bytes[(placement.tiers == DISK) & needed].sum())

    def pull_pages(self) -> np.ndarray:
        """Per page, whether a pull needs it: every page, or with early exit a
        page holding a vertex not yet settled that has in-edges (the others'
        vertices keep their values and stay inactive; one without in-edges
        takes nothing, as the whole-CSC pull passes it over)."""
        if not self.plan.early_exit:
            return np.ones(self.first_vertex.size, bool)
        if self._has_in_edges is None:
            in_offsets = self.arrays.in_offsets
            self._has_in_edges = in_offsets[1:] != in_offsets[:-1]
        return pages_holding(~self.settled() & self._has_in_edges, self.first_vertex,
                             self.end_vertex)

    def sparse_reads(self, frontier: np.ndarray) -> tuple[np.ndarray, int]:
        """What the sparse direction reads: per page whether it needs it, and
        the in-edges it copies out of the pages.  A push from the frontier
        needs no page and copies nothing (it reads the CSR of out-edges); a
        notify-pull needs the pages with an in-edge from the frontier and
        copies the notified vertices' in-edges
        (:func:`~garaphpy.kernels.cpu.mark_out_neighbours`)."""
        if self.plan.early_exit and self.plan.settling_push:
            return np.zeros(self.first_vertex.size, bool), 0
        arrays, threads = self.arrays, self.plan.threads
        frontier = np.asarray(frontier, np.int64)
        notified = np.zeros(arrays.num_vertices + 1, bool)
        prefix = frontier_degree_prefix(frontier, arrays.out_offsets, threads)
        mark_out_neighbours(frontier, prefix, arrays.out_offsets, arrays.out_targets, notified,
                            threads * config.CPU_CHUNKS_PER_THREAD)
        in_offsets = arrays.in_offsets
        in_degrees = in_offsets[1:arrays.num_vertices + 1] - in_offsets[:arrays.num_vertices]
        copied = int(in_degrees[notified[:arrays.num_vertices]].sum())
        return pages_holding(notified, self.first_vertex, self.end_vertex), copied

    def sparse_pages(self, frontier: np.ndarray) -> np.ndarray:
        """Per page, whether the sparse direction needs it (:meth:`sparse_reads`)."""
        return self.sparse_reads(frontier)[0]

    def inputs(self, frontier: np.ndarray) -> dict:
        """The disk's inputs of :func:`~garaphpy.scheduler.disk_decisions.disk_direction`
        for the frontier ``frontier``."""
        pull = self._on_disk_bytes(self.pull_pages())
        if frontier.size == self.arrays.num_vertices and not self.plan.early_exit:
            # every page either way; a notify-pull copies every in-edge
            sparse, copied = pull, self.arrays.num_edges
        else:
            needed, copied = self.sparse_reads(frontier)
            sparse = self._on_disk_bytes(needed)
        return dict(pull_disk_bytes=pull, sparse_disk_bytes=sparse,
                    disk_bytes_per_s=self.disk_bytes_per_s, edges_per_s=self.edges_per_s,
                    copied_edges=copied)
