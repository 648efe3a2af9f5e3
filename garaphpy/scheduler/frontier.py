"""The frontier: a set of active vertices held in one form, the others made once (Garaph sections 4.1, 4.2).

Ligra's vertexSubset: a frontier is a sorted list of vertex ids (what the
notify-pull walks and the CPU engine keeps), a flag per vertex (the host's
activity, what a download brings back), or the GPU's activity bytes (one
``uint8`` per vertex, what an upload sends).  A :class:`Frontier` is made
from the form at hand (:meth:`Frontier.of_ids`, :meth:`Frontier.of_flags`)
and converts to another only when asked, once: the form made is kept for the
next reader.  The conversions are the parallel kernels of
:mod:`garaphpy.kernels.cpu.frontier`; they are handed the arrays they take.
"""

from __future__ import annotations

import numpy as np

from .._numba_setup import parallel_section
from ..kernels import cpu as kernels


class Frontier:
    """The active vertices of a graph of ``num_vertices`` vertices.

    Parameters
    ----------
    num_vertices : int
    ids : numpy.ndarray, optional
        The vertices, sorted, distinct (int64).
    flags : numpy.ndarray, optional
        A flag per vertex, nonzero where active (bool or uint8).
    threads : int
        Threads of the compaction of flags into ids.

    Use :meth:`of_ids` or :meth:`of_flags`; one of ``ids`` and ``flags``
    is given.
    """

    __slots__ = ("num_vertices", "threads", "_ids", "_flags", "_out_edges")

    def __init__(self, num_vertices: int, *, ids: np.ndarray | None = None,
                 flags: np.ndarray | None = None, threads: int = 1):
        if (ids is None) == (flags is None):
            raise ValueError("Frontier: expected ids or flags, exactly one")
        self.num_vertices = int(num_vertices)
        self.threads = threads
        self._ids = ids
        self._flags = flags
        self._out_edges = None

    @classmethod
    def of_ids(cls, ids, num_vertices: int) -> "Frontier":
        """The frontier of the sorted, distinct vertex ids ``ids``."""
        return cls(num_vertices, ids=np.asarray(ids, dtype=np.int64))

    @classmethod
    def of_flags(cls, flags: np.ndarray, threads: int = 1) -> "Frontier":
        """The frontier of the vertices whose flag in ``flags`` is set."""
        return cls(flags.shape[0], flags=flags, threads=threads)

    @classmethod
    def of(cls, frontier, num_vertices: int) -> "Frontier":
        """``frontier`` itself if it is one, else the frontier of its ids."""
        return frontier if isinstance(frontier, Frontier) else cls.of_ids(frontier, num_vertices)

    @property
    def ids(self) -> np.ndarray:
        """The active vertices in increasing order (int64; compacted from the
        flags at the first read)."""
        if self._ids is None:
            self._ids = kernels.active_vertex_ids(self._flags, self.threads)
        return self._ids

    @property
    def flags(self) -> np.ndarray:
        """A flag per vertex (bool; made from the ids at the first read)."""
        if self._flags is None:
            flags = np.zeros(self.num_vertices, np.bool_)
            flags[self._ids] = True
            self._flags = flags
        return self._flags

    @property
    def size(self) -> int:
        """The number of active vertices."""
        if self._ids is None:
            return int(self.ids.size)
        return int(self._ids.size)

    def __len__(self) -> int:
        return self.size

    def device_flags(self, out: np.ndarray) -> np.ndarray:
        """The GPU's activity (1 for an active vertex, 0 for another) written into
        ``out`` (uint8, ``num_vertices`` long at least; a pinned staging
        buffer), from the ids in one parallel pass; returns ``out``."""
        with parallel_section():
            kernels.flags_of(self.ids, out)
        return out

    def out_edges(self, out_degree: np.ndarray) -> int:
        """The sum of the active vertices' out-degrees ``out_degree`` (the
        graph's: counted at the first call, kept after)."""
        if self._out_edges is None:
            with parallel_section():
                self._out_edges = int(kernels.sum_over(self.ids, out_degree))
        return self._out_edges
