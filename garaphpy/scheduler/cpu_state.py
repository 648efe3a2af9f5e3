"""The CPU engine's graph arrays and vertex state (Garaph section 4).

:class:`GraphArrays` holds what the CPU kernels read (the CSC index, the page
source the edges come from, the CSR, the per-vertex attributes that
:func:`vertex_attributes` makes for both engines); :class:`RunState` the
vertex values, the next-iteration buffer of synchronous runs (section 2.2,
GlobalVertices and its temporary copy) and the frontier.  The run's
per-vertex buffers come through :class:`RunBuffers`: those a graph's
earlier runs in memory gave back (``Store.vertex_buffers``), their pages
already mapped, else new ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._numba_setup import parallel_section
from ..kernels import cpu as kernels
from ..kernels.cpu_program import CpuProgram


@dataclass
class GraphArrays:
    """The graph the CPU kernels read.

    Attributes
    ----------
    num_vertices, num_edges : int
    in_offsets : int64 array
        CSC index.
    sources : array
        An empty array of the CSC sources' type (what the kernels are
        compiled for; the edges come from ``page_source``).
    weights : array
        An empty array of the edge values' type where the program reads them,
        else a 1-element float64 dummy: what stands for every page's weights
        then, so that a program's kernels are compiled once whatever the
        store's weight type (:meth:`edge_weights`).
    out_offsets, out_targets : arrays
        CSR without values (notify).
    attrs : tuple
        ``(out_degree, in_degree, weighted_in_degree, vertex, is_source)``.
    pages : list
        The store's page table (edge and vertex ranges).
    page_source : garaphpy.storage.page_source.PageSource
        Where the pages' edges come from: views of one CSC in memory, or
        pages cached and streamed under the run's host budget (section 2.2).
    buffers : RunBuffers
        Where the run's per-vertex buffers come from (by default new arrays).
    """

    num_vertices: int
    num_edges: int
    in_offsets: np.ndarray
    sources: np.ndarray
    weights: np.ndarray
    out_offsets: np.ndarray
    out_targets: np.ndarray
    attrs: tuple
    pages: list
    page_source: object
    buffers: RunBuffers = field(default_factory=lambda: RunBuffers(None))

    @property
    def reads_weights(self) -> bool:
        """Whether the kernels get the pages' edge values (else the dummy)."""
        return self.weights.shape[0] == 0

    def edge_weights(self, page_weights: np.ndarray | None) -> np.ndarray:
        """What the kernels get for a page's (or the CSC's) edge values:
        ``page_weights`` where the program reads them, else the dummy."""
        return page_weights if page_weights is not None and self.reads_weights \
            else self.weights

    @classmethod
    def from_graph(cls, graph, source_vertices: np.ndarray, need_weighted_in_degree: bool,
                   page_source, reads_weights: bool = True, buffers: RunBuffers | None = None):
        """The graph's store for the CPU kernels, its pages read through
        ``page_source`` (a :class:`~garaphpy.storage.page_source.PageSource`);
        ``reads_weights``: whether the program's gather reads the edge value;
        ``buffers``: where the run's per-vertex buffers come from (default:
        new arrays)."""
        store = graph.store
        buffers = buffers if buffers is not None else RunBuffers(None)
        page_source.load("cpu")     # what the source holds in memory, now: not in an iteration
        sources = np.zeros(0, store.vertex_dtype)
        weights = np.zeros(0, store.weight_dtype) if store.weighted and reads_weights \
            else np.zeros(1, np.float64)
        weighted_in = weighted_in_degree(page_source) if need_weighted_in_degree else None
        attrs = vertex_attributes(graph, source_vertices, weighted_in, buffers)
        return cls(store.num_vertices, store.num_edges, store.in_offsets, sources, weights,
                   store.out_offsets, store.out_targets, attrs, store.pages, page_source,
                   buffers)


class RunBuffers:
    """The per-vertex buffers of one run: taken from its store's pool
    (:class:`~garaphpy.storage.vertex_buffers.VertexBuffers`, buffers earlier
    runs gave back, their pages mapped already), else new; given back
    together by :meth:`give_back` once nothing of the run reads them.

    Parameters
    ----------
    pool : VertexBuffers or None
        None: every buffer is new and none is given back.
    threads : int
        The run's threads, which zero a buffer taken from the pool.
    """

    def __init__(self, pool, threads: int = 1):
        self.pool = pool
        self.threads = threads
        #: the buffers this run holds, to give back
        self.taken: list[np.ndarray] = []

    def _take(self, length: int, dtype) -> np.ndarray | None:
        return self.pool.take(length, dtype) if self.pool is not None else None

    def _hold(self, buffer: np.ndarray) -> np.ndarray:
        if self.pool is not None:
            self.taken.append(buffer)
        return buffer

    def empty(self, length: int, dtype) -> np.ndarray:
        """A buffer of ``length`` entries of ``dtype``, its contents undefined
        (an earlier run's): the caller writes every entry before reading one."""
        buffer = self._take(length, dtype)
        return self._hold(np.empty(length, dtype) if buffer is None else buffer)

    def zeros(self, length: int, dtype, mapped: bool = False) -> np.ndarray:
        """A zeroed buffer: one taken from the pool zeroed by the run's threads;
        a new one ``np.zeros``'s (its pages mapped where first written), or,
        ``mapped``, zeroed by the run's threads now (its pages mapped by all
        of them, not by the first kernel that writes it)."""
        buffer = self._take(length, dtype)
        if buffer is None and not (mapped and self.threads > 1):
            return self._hold(np.zeros(length, dtype))
        if buffer is None:
            buffer = np.empty(length, dtype)
        if self.threads > 1:
            with parallel_section():    # as bytes: one kernel for every dtype
                kernels.touch(buffer.view(np.uint8))
        else:
            buffer.fill(0)
        return self._hold(buffer)

    def give_back(self) -> None:
        """Give every buffer taken back to the pool, for the store's later
        runs: call once the run's values are out (``values_to_host``) and no
        engine of the run iterates again."""
        if self.pool is not None and self.taken:
            self.pool.put(self.taken)
        self.taken = []


def weighted_in_degree(page_source, consumer: str = "cpu") -> np.ndarray:
    """Per vertex, the sum of its in-edges' values, read page by page from
    ``page_source`` by ``consumer``."""
    store = page_source.store
    cursor = page_source.cursor(range(len(store.pages)), consumer)
    try:
        return _weighted_in_degree(store, cursor.get)
    finally:
        cursor.close()


def store_weighted_in_degree(store) -> np.ndarray:
    """:func:`weighted_in_degree`, its pages read one at a time from ``store``
    itself (before a run has a page source: the check of its initial values)."""
    return _weighted_in_degree(store, store.read_page)


def _weighted_in_degree(store, read_page) -> np.ndarray:
    out = np.zeros(store.num_vertices, np.float64)
    for info in store.pages:
        page = read_page(info.index)
        kernels.add_weighted_in_degrees(store.in_offsets, page.weights, info.edge_begin,
                                        info.edge_begin, info.edge_begin + info.num_edges,
                                        info.first_vertex, info.end_vertex, out)
    return out


def vertex_attributes(graph, source_vertices: np.ndarray,
                      weighted_in: np.ndarray | None, buffers: RunBuffers | None = None) -> tuple:
    """The per-vertex attributes programs may read, shared by both engines.

    Parameters
    ----------
    weighted_in : numpy.ndarray or None
        Per vertex, the sum of its in-edges' values (:func:`weighted_in_degree`),
        when the program reads it.
    buffers : RunBuffers, optional
        Where ``is_source`` comes from (default: a new array).

    Returns
    -------
    tuple
        ``(out_degree, in_degree, weighted_in_degree, vertex, is_source)``;
        ``weighted_in_degree`` is a 1-element placeholder unless given;
        ``vertex`` the user ids the graph's runs share (read only).
    """
    store = graph.store
    n = store.num_vertices
    if weighted_in is None:
        weighted_in = np.zeros(1, np.float64)
    is_source = np.zeros(n, np.bool_) if buffers is None else buffers.zeros(n, np.bool_)
    is_source[source_vertices] = True
    return (store.out_degree, store.in_degree, weighted_in, graph.original_id_array,
            is_source)


def one_initial_value(values: np.ndarray, is_source: np.ndarray):
    """The one value of every vertex but the sources in ``values`` (a run's
    initial values), or None where they differ or every vertex is a source."""
    first_other = int(np.argmin(is_source)) if is_source.size else 0
    if not is_source.size or is_source[first_other]:
        return None
    value = values[first_other]
    with parallel_section():
        return value if kernels.count_unequal(values, value, is_source) == 0 else None


class RunState:
    """Vertex values, the synchronous next buffer, the frontier.

    Parameters
    ----------
    find_initial_value : bool
        Find :attr:`initial_value` (a run with early exit compares the
        values with it), from the initial values as they are made.
    """

    def __init__(self, arrays: GraphArrays, compiled: CpuProgram, synchronous: bool,
                 find_initial_value: bool = False):
        n = arrays.num_vertices
        buffers = arrays.buffers
        self.values = buffers.empty(n, compiled.value_dtype)
        with parallel_section(), compiled.compiling():
            compiled.kernels.init_values(arrays.attrs, n, self.values)
        #: the one initial value of every vertex but the sources
        #: (:func:`one_initial_value`), where found; else None
        self.initial_value = one_initial_value(self.values, arrays.attrs[4]) \
            if find_initial_value else None
        self.next = self.values
        if synchronous:
            self.next = buffers.empty(n, compiled.value_dtype)
            np.copyto(self.next, self.values)
        self.synchronous = synchronous
        self.active = buffers.zeros(n, np.bool_)
        self.claimed = buffers.zeros(n, np.uint8)
        self.frontier = np.zeros(0, np.int64)

    def swap(self) -> None:
        """Commit a synchronous pull: the next buffer becomes the values."""
        if self.synchronous:
            self.values, self.next = self.next, self.values
