"""One page source for every run: pages in memory, cached, or streamed from storage (Garaph 2.2).

The engines read a run's pages through one API, :class:`PageSource`,
whether the run's host budget holds the whole graph or only some pages:

* :class:`InMemoryPages` when every page fits beside the vertex data: the
  CPU's pages are views of one CSC held for the run (read once, when the CPU
  first asks), a consumer that reads page images (the GPU, which copies a
  page in one transfer) gets them in its own buffers, read once as well;
* :class:`~garaphpy.storage.host_pages.HostPages` otherwise: a prefix of the
  pages is cached, the rest is streamed from the storage directories with
  read-ahead every time they are needed (rho = k, section 4.2).

Both give a page by index (:meth:`PageSource.read_page`), a walk over an
iteration's pages (:meth:`PageSource.cursor`), and the in-edges of a set of
vertices for a notify-pull (:meth:`PageSource.vertex_in_edges`), so that no
engine asks which one it has.  :func:`open_page_source` is the one place
that chooses.  ``Store.read_page`` and ``PageReader.read_page`` are the I/O
beneath them; the engines do not call them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Protocol

import numpy as np

from .. import config
from .host_budget import HostCachePlan
from .host_pages import HostPages
from .store import Page, Store

__all__ = ["PageSource", "InMemoryPages", "InMemoryCursor", "open_page_source"]


class PageSource(Protocol):
    """What the engines read pages through (see the module docstring).

    Attributes
    ----------
    store : Store
    plan : HostCachePlan or None
        Which pages stay in host memory (``None``: all, no plan was made).
    rho : float
        Garaph's rho (section 4.2): 1 in memory, k when pages come from storage.
    reads_storage : bool
        Whether iterations read pages from the storage directories (the run
        leaves cores to the reader threads).
    disk_bytes_per_s : float or None
        The storage directories' read speed, bytes a second, where iterations
        read pages from them; None in memory.
    """

    store: Store
    plan: HostCachePlan | None
    rho: float
    reads_storage: bool
    disk_bytes_per_s: float | None

    def use_allocator(self, consumer: str, allocator: Callable[[int], np.ndarray],
                      cache: bool = False) -> None:
        """Page buffers of ``consumer`` come from ``allocator`` (pinned memory)."""

    def load(self, consumer: str) -> None:
        """Read now what this source keeps in host memory for the whole run."""

    def hold_elsewhere(self, pages) -> None:
        """``pages`` are kept by another tier (the GPU) for the whole run: the
        host cache need not hold them."""

    def hold_here(self, pages) -> None:
        """``pages`` are held in host memory by a consumer itself (the GPU's
        packed images): they stay in the host tier."""

    def take_stored(self, consumer: str) -> None:
        """``consumer`` receives the compressed pages this source reads from
        storage as stored, to decode itself."""

    def end_iteration(self) -> dict | None:
        """Between iterations: the host's pages revised by the pages asked
        for; the decision's entry for the record, or None."""

    def is_cached(self, index: int) -> bool:
        """Whether page ``index`` stays in host memory once read."""

    def cached_mask(self) -> np.ndarray:
        """Per page, :meth:`is_cached` (a bool array, not to be modified)."""

    def cached_page(self, index: int, consumer: str = "cpu") -> Page:
        """A page that stays in host memory (read the first time)."""

    def read_page(self, index: int, consumer: str = "cpu") -> Page:
        """Page ``index`` now, outside any walk."""

    def cursor(self, order: Iterable[int], consumer: str = "cpu", release: str = "auto"):
        """A walk over the pages ``order``: ``get``, ``release``, ``close``,
        ``held``, ``max_held`` (see :class:`~garaphpy.storage.host_pages.PageCursor`)."""

    def prefetch(self, order: Iterable[int], consumer: str = "cpu") -> bool:
        """Start the reads of a walk over ``order`` to come; whether any began."""

    def cancel_prefetch(self, consumer: str = "cpu") -> None:
        """Stop the reads :meth:`prefetch` began, the walk not coming."""

    def arrange_vertices(self, vertices: np.ndarray) -> np.ndarray:
        """``vertices`` in the order :meth:`vertex_in_edges` reads them."""

    def vertex_in_edges(self, vertices: np.ndarray, in_prefix: np.ndarray,
                        in_offsets: np.ndarray, gather: Callable, no_weights: np.ndarray,
                        read_weights: bool = True):
        """The in-edges of ``vertices``: ``(sources, weights, edge_starts, pages_read)``;
        ``weights`` is ``no_weights`` where the graph has none or
        ``read_weights`` is false."""

    @property
    def bytes_read(self) -> int:
        """Page bytes read from the storage directories so far."""

    @property
    def bytes_dropped(self) -> int:
        """Of :attr:`bytes_read`, the bytes read ahead and dropped unused."""

    def close(self) -> None:
        """Release readers and buffers."""

    def describe(self) -> str:
        """One line for logs."""


class InMemoryCursor:
    """A walk over pages that are all in memory: each page is at hand, nothing
    is read ahead, nothing held."""

    held = 0
    max_held = np.iinfo(np.int64).max

    def __init__(self, pages: "InMemoryPages", consumer: str):
        self.pages = pages
        self.consumer = consumer

    def get(self, index: int) -> Page:
        """Page ``index`` (a view or a held image: valid for the run)."""
        return self.pages.read_page(index, self.consumer)

    def release(self, page: Page) -> None:
        """Nothing to give back."""

    def close(self) -> None:
        """Nothing to end."""


class InMemoryPages:
    """Every page of the store in host memory for the run.

    The CPU's pages (any consumer without an allocator) are views of one CSC
    (``sources``, ``weights``; no ``image``, no ``idxoff``: the CPU kernels
    read neither), built on first use and kept by the store for the graph's
    later runs (:meth:`Store.keep_csc`, ``config.KEEP_CSC_BETWEEN_RUNS``;
    :meth:`garaphpy.Graph.release_memory` frees it).  A consumer that gave an allocator
    (:meth:`use_allocator`) reads page images in buffers of its own: held
    for the run after :meth:`load` or :meth:`cached_page`, read afresh by
    :meth:`read_page` otherwise (a one-off pass of the set-up keeps nothing).

    Parameters
    ----------
    store : Store
    plan : HostCachePlan, optional
        The run's host-budget plan (every page cached), for reports.
    """

    rho = config.RHO_IN_MEMORY
    reads_storage = False
    disk_bytes_per_s = None
    bytes_read = 0
    bytes_dropped = 0

    def __init__(self, store: Store, plan: HostCachePlan | None = None):
        self.store = store
        self.plan = plan
        self._views: list[Page] | None = None
        self._images: dict[str, dict[int, Page]] = {}
        self._allocators: dict[str, Callable[[int], np.ndarray]] = {}
        self._lock = threading.Lock()

    def use_allocator(self, consumer: str, allocator: Callable[[int], np.ndarray],
                      cache: bool = False) -> None:
        """``consumer`` reads page images, in buffers from ``allocator``
        (``cache`` is accepted for :class:`HostPages`' signature: every page
        of this source is cached)."""
        self._allocators[consumer] = allocator
        self._images.setdefault(consumer, {})

    def load(self, consumer: str) -> None:
        """Read every page for ``consumer`` now (its images, or the CSC)."""
        for info in self.store.pages:
            self.cached_page(info.index, consumer)

    def hold_elsewhere(self, pages) -> None:
        """Nothing: every page is in host memory, and a consumer's images are
        read only when it asks."""

    def hold_here(self, pages) -> None:
        """Nothing: every page is in host memory."""

    def take_stored(self, consumer: str) -> None:
        """Nothing: no page is read from storage during the run (a consumer
        that ships compressed pages reads their stored images at set-up)."""

    def end_iteration(self) -> None:
        """Nothing to revise: every page is in host memory."""

    def is_cached(self, index: int) -> bool:
        """Always: every page is in host memory."""
        return True

    def cached_mask(self) -> np.ndarray:
        """Every page: all in host memory."""
        return np.ones(len(self.store.pages), bool)

    def cached_page(self, index: int, consumer: str = "cpu") -> Page:
        """Page ``index`` for ``consumer``, kept for the run."""
        images = self._images.get(consumer)
        if images is None:
            return self._csc_views()[index]
        page = images.get(index)
        if page is None:
            with self._lock:
                page = images.get(index)
                if page is None:
                    info = self.store.pages[index]
                    buffer = self._allocators[consumer](info.nbytes)
                    page = self.store.read_page(index, out=buffer)
                    images[index] = page
        return page

    def read_page(self, index: int, consumer: str = "cpu") -> Page:
        """Page ``index`` for ``consumer``: a CSC view, a held image, or an image
        read afresh into ordinary memory."""
        images = self._images.get(consumer)
        if images is None:
            return self._csc_views()[index]
        page = images.get(index)
        return page if page is not None else self.store.read_page(index)

    def cursor(self, order: Iterable[int], consumer: str = "cpu",
               release: str = "auto") -> InMemoryCursor:
        """A walk over pages in memory (``order`` and ``release`` need nothing)."""
        return InMemoryCursor(self, consumer)

    def prefetch(self, order: Iterable[int], consumer: str = "cpu") -> bool:
        """Nothing to read ahead: False."""
        return False

    def cancel_prefetch(self, consumer: str = "cpu") -> None:
        """Nothing to stop."""

    def csc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The one CSC: ``(in_offsets, sources, weights or None)``."""
        views = self._csc_views()
        return self.store.in_offsets, self._sources, self._weights

    def out_edge_values(self, place: Callable[[np.ndarray, np.ndarray], np.ndarray]
                        ) -> np.ndarray:
        """The CSC's edge values in the order of the out-edge CSR:
        ``Store.kept_out_edge_values`` where an earlier run in memory placed
        them, else ``place(sources, weights)``'s
        (:func:`garaphpy.kernels.gpu_subgraph.out_edge_values`, 0.5 s on
        kron22), then kept by the store for the graph's later runs beside the
        kept CSC (``config.KEEP_CSC_BETWEEN_RUNS``) where the run's host
        budget has room for them beside its plan
        (:attr:`HostCachePlan.room_bytes`): a later run counts them among the
        store's arrays (:func:`~garaphpy.storage.host_budget.store_array_bytes`)
        and so still holds every page.  ``Store.release_csc`` drops them with
        the CSC (``Graph.release_memory``, a run whose pages stream).  Read
        only: the graph's runs share them."""
        store = self.store
        kept = store.kept_out_edge_values
        if kept is not None:
            return kept
        _, sources, weights = self.csc()
        values = place(sources, weights)
        if config.KEEP_CSC_BETWEEN_RUNS and (self.plan is None
                                             or values.nbytes <= self.plan.room_bytes):
            store.kept_out_edge_values = values
        return values

    def _csc_views(self) -> list[Page]:
        views = self._views
        if views is None:
            with self._lock:
                if self._views is None:
                    _, self._sources, self._weights = (
                        self.store.keep_csc() if config.KEEP_CSC_BETWEEN_RUNS
                        else self.store.csc())
                    sources, weights = self._sources, self._weights
                    self._views = [
                        Page(info, None, sources[info.edge_begin:info.edge_begin + info.num_edges],
                             None, None if weights is None else
                             weights[info.edge_begin:info.edge_begin + info.num_edges])
                        for info in self.store.pages]
                views = self._views
        return views

    def arrange_vertices(self, vertices: np.ndarray) -> np.ndarray:
        """As they are: the CSC is read in place."""
        return vertices

    def vertex_in_edges(self, vertices: np.ndarray, in_prefix: np.ndarray,
                        in_offsets: np.ndarray, gather: Callable, no_weights: np.ndarray,
                        read_weights: bool = True):
        """The CSC itself, read in place at each vertex's first in-edge.

        Returns
        -------
        (sources, weights, edge_starts, pages_read)
            ``weights`` is ``no_weights`` when the graph has none or
            ``read_weights`` is false; no page is read.
        """
        self._csc_views()
        weights = self._weights if self._weights is not None and read_weights else no_weights
        return self._sources, weights, in_offsets[vertices], 0

    def close(self) -> None:
        """Drop the CSC and the images."""
        self._views = None
        self._sources = self._weights = None
        for images in self._images.values():
            images.clear()

    def describe(self) -> str:
        """One line for logs."""
        return "every page in host memory; rho = 1"


def open_page_source(store: Store, plan: HostCachePlan, read_ratio: Callable[[], float], *,
                     readahead_bytes: int | None = None):
    """The page source of a run under ``plan``: :class:`InMemoryPages` when the
    plan caches every page, else :class:`HostPages` whose rho is
    ``read_ratio()`` (called only then: it may measure the storage).  The
    out-edge values an earlier run kept go where the plan does not count
    them (:attr:`HostCachePlan.kept_bytes`), the kept CSC where pages stream."""
    if plan.all_cached:
        if not plan.kept_bytes:     # the plan left out the out-edge values kept: dropped
            store.kept_out_edge_values = None
        return InMemoryPages(store, plan)
    store.release_csc()     # the budget streams pages: the memory of a kept CSC goes back
    store.vertex_buffers.clear()    # and that of the buffers earlier runs gave back
    return HostPages(store, plan, read_ratio(), readahead_bytes=readahead_bytes)
