"""The pages of a run larger than its host-memory budget (Garaph sections 2.2, 4.2).

When the vertex data and every page image fit the run's host budget, the
engines hold the whole graph in memory (the CPU engine one CSC, the GPU
engine pinned page images or resident pages).  Otherwise a
:class:`HostPages` stands between them and the store: the pages
:func:`~garaphpy.storage.host_budget.plan_host_cache` keeps (a prefix of the
page order) are read once, when first needed, into host buffers and stay;
the others are read from the storage directories every time they are
needed, through a :class:`~garaphpy.storage.page_io.PageReader` per
consumer (reader and checksum threads per directory, read-ahead bounded by
the reader's buffers, ``O_DIRECT`` where possible).  rho is then k, the storage's
sequential over random read ratio (section 4.2).

A consumer walks an iteration's pages through a :class:`PageCursor`: it
names the order in which it will ask for pages, so that the reader can read
the streamed ones ahead of it.  The CPU's and the GPU's cursors of a hybrid
iteration walk from the two ends of the page queue (the GPU from the front,
the CPU from the back); a page a cursor read ahead but its processor did not
take is simply passed over, so at most one read-ahead window per processor
is read for nothing.  A walk that took every streamed page starts the reads
of the same walk for the next iteration (:meth:`PageCursor.close`); a
revision of the host's pages stops them (the next walk streams other
pages).  Every byte read from disk counts in :attr:`HostPages.bytes_read`,
read-ahead dropped unused included (:attr:`HostPages.bytes_dropped`).

The pages are placed in three tiers (:mod:`~garaphpy.storage.tiers`): the
GPU's kept pages (:meth:`HostPages.hold_elsewhere`), the host's cached
pages, and the disk.  The source notes which pages each iteration asks for;
between iterations (:meth:`HostPages.end_iteration`) the host's pages are
chosen again by that reuse where it pays, so that a frontier's pages stay
in memory as it moves (HyTGraph's per-partition choice).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Iterable

import numpy as np

from .. import config
from .._numba_setup import parallel_section
from ..errors import StoreError
from .host_budget import HostCachePlan, cache_beside, plan_host_cache
from .layout import align
from .page_io import PageReader, aligned_empty, buffer_bytes
from .store import Page, Store
from .tiers import DISK, GPU, HOST, PagePlacement, PageReuse, revised_placement

__all__ = ["HostPages", "PageCursor", "decoder_of"]


def decoder_of(consumer: str) -> str:
    """Who decodes the compressed pages of ``consumer``'s reader
    (:class:`~garaphpy.storage.page_io.PageReader`'s ``decode``):
    ``config.PAGE_DECODE``, decoder threads for a consumer it does not name."""
    return config.PAGE_DECODE.get(consumer, "threads")


class HostPages:
    """Cached and streamed page images of one run's store.

    Parameters
    ----------
    store : Store
    plan : HostCachePlan
        Which pages stay in host memory (``plan.cached``) and which are read
        from storage every time (``plan.streamed``).
    read_ratio : float
        k of the storage directories (see
        :func:`garaphpy.storage.read_ratio.storage_read_ratio`).
    readahead_bytes : int, optional
        Read-ahead of each consumer's reader (default
        ``config.PAGE_READAHEAD_BYTES``, at least one page).
    direct : bool or None
        As for :class:`PageReader`.
    check : bool
        Verify each block's CRC-32 as it is read.

    Attributes
    ----------
    plan : HostCachePlan
    rho : float
        k: some pages come from secondary storage (section 4.2).
    reads_storage : bool
        True: iterations read pages from the storage directories.
    disk_bytes_per_s : float
        The storage directories' read speed.

    This is the out-of-core :class:`~garaphpy.storage.page_source.PageSource`.
    """

    reads_storage = True

    def __init__(self, store: Store, plan: HostCachePlan, read_ratio: float, *,
                 readahead_bytes: int | None = None, direct: bool | None = None,
                 check: bool = True):
        self.store = store
        self.plan = plan
        self.rho = plan.rho(read_ratio)
        self.readahead_bytes = readahead_bytes
        self.direct = direct
        self.check = check
        self._cached: dict[int, Page] = {}
        #: host bytes of each page in the cache: its plain image, or its stored
        #: one where a consumer takes it so (:meth:`take_stored`)
        self._page_sizes = [info.nbytes for info in store.pages]
        self._to_cache = frozenset(plan.cached)
        self._cached_flags = self._flags_of(plan.cached)
        #: per page a walk reads ahead into a cache buffer, that buffer
        #: (:meth:`_fill_buffer`; taken by :meth:`_filled`)
        self._filling: dict[int, np.ndarray] = {}
        self._cache_allocator: Callable[[int], np.ndarray] = aligned_empty
        self._readers: dict[str, PageReader] = {}
        self._allocators: dict[str, Callable[[int], np.ndarray]] = {}
        self._lock = threading.Lock()
        count = len(store.pages)
        #: each page's tier (GPU, host or disk), kept in step with ``plan``
        self.placement = self._placement_of(plan)
        #: per page, the chance the next iteration asks for it
        self.reuse = PageReuse(count)
        #: whether the host's pages are revised between iterations by reuse
        self.by_reuse = config.HOST_PAGES_BY_REUSE
        #: the pages asked for since the last :meth:`end_iteration` (reader
        #: threads of both processors mark them: under ``_asked_lock``)
        self._asked = np.zeros(count, bool)
        self._asked_lock = threading.Lock()
        self._held_here = np.zeros(count, bool)
        self._disk_speed: float | None = None
        #: the consumer that takes compressed pages as stored (:meth:`take_stored`)
        self._stored_consumer: str | None = None
        #: (bytes read, bytes dropped) of the readers closed before the run's end
        self._closed_reads = (0, 0)

    @property
    def disk_bytes_per_s(self) -> float:
        """The storage directories' read speed, bytes a second: the one the
        read-ahead was sized by (``plan.disk_bytes_per_s``), else
        :func:`~garaphpy.storage.read_ratio.disk_read_speed` (found once)."""
        if self._disk_speed is None:
            speed = self.plan.disk_bytes_per_s
            if not speed:
                from .read_ratio import disk_read_speed
                speed = disk_read_speed(self.store.storage_dirs)
            self._disk_speed = float(speed)
        return self._disk_speed

    def _flags_of(self, pages) -> np.ndarray:
        flags = np.zeros(len(self.store.pages), bool)
        flags[np.asarray(list(pages), np.int64)] = True
        return flags

    def _note_asked(self, index: int) -> None:
        """Page ``index`` was asked for in this iteration."""
        with self._asked_lock:
            self._asked[index] = True

    def _placement_of(self, plan: HostCachePlan) -> PagePlacement:
        """The tiers of ``plan``: its cached pages in the host, the pages held
        elsewhere on the GPU, the rest on disk."""
        pages = self.store.pages
        tiers = np.full(len(pages), DISK, np.int8)
        tiers[list(plan.cached)] = HOST
        tiers[list(plan.held_elsewhere)] = GPU
        room = max(0, plan.budget_bytes - plan.fixed_bytes - plan.readahead_bytes)
        return PagePlacement(tiers, np.array(self._page_sizes, np.int64),
                             np.array([p.disk_bytes for p in pages], np.int64), room)

    # -- set-up ------------------------------------------------------------------------
    def use_allocator(self, consumer: str, allocator: Callable[[int], np.ndarray],
                      cache: bool = False) -> None:
        """Buffers of ``consumer``'s reader (pinned memory for the GPU) come from
        ``allocator``; with ``cache``, so do the cached pages (which both
        processors read).  Call before the first page is read."""
        self._allocators[consumer] = allocator
        if cache:
            self._cache_allocator = allocator

    def take_stored(self, consumer: str) -> None:
        """From now on ``consumer`` receives compressed pages as stored
        (:attr:`~garaphpy.storage.store.Page.stored`), from storage and from
        the host cache alike, and decodes them itself (the GPU: a compressed
        page crosses the bus in its stored bytes).  The cache holds a
        compressed page in that form alone, its room counted in stored bytes
        from then on (it holds more pages); another consumer gets a cached
        one decoded from it (:meth:`cached_page`).  Call before that
        consumer's walks; its reader so far, and the plain compressed pages
        cached so far, are dropped."""
        with self._lock:
            if self._stored_consumer == consumer:
                return
            self._stored_consumer = consumer
            reader = self._readers.pop(consumer, None)
            for index in [k for k, page in self._cached.items() if page.info.compressed]:
                del self._cached[index]
            self._page_sizes = [info.disk_bytes if info.compressed else info.nbytes
                                for info in self.store.pages]
            plan = self.plan
        replanned = plan_host_cache(self._page_sizes, plan.fixed_bytes, plan.readahead_bytes,
                                    plan.budget_bytes)
        replanned = dataclasses.replace(replanned, disk_bytes_per_s=plan.disk_bytes_per_s,
                                        readahead_pages=plan.readahead_pages)
        if plan.held_elsewhere:
            replanned = cache_beside(replanned, self._page_sizes, plan.held_elsewhere)
        self._use_plan(replanned)
        if reader is not None:
            reader.close()
            read, dropped = self._closed_reads
            self._closed_reads = (read + reader.bytes_delivered + reader.bytes_dropped,
                                  dropped + reader.bytes_dropped)

    def _takes_stored(self, consumer: str, index: int) -> bool:
        return consumer == self._stored_consumer and self.store.pages[index].compressed

    def reader(self, consumer: str) -> PageReader:
        """The page reader of ``consumer`` (made on first use)."""
        with self._lock:
            if consumer not in self._readers:
                decode = ("stored" if consumer == self._stored_consumer
                          else decoder_of(consumer))
                self._readers[consumer] = PageReader(
                    self.store, readahead_bytes=self.readahead_bytes,
                    allocator=self._allocators.get(consumer), direct=self.direct,
                    check=self.check, decode=decode)
            return self._readers[consumer]

    def load(self, consumer: str) -> None:
        """Nothing now: a cached page is read when first used, so that its read
        counts in that iteration's bytes read."""

    def hold_elsewhere(self, pages) -> None:
        """Pages another tier keeps for the whole run (the GPU's kept pages)
        leave the host cache, their room going to the next pages in order
        (:func:`~garaphpy.storage.host_budget.cache_beside`); a page already
        read that leaves the cache is dropped."""
        plan = cache_beside(self.plan, self._page_sizes, pages)
        if plan is not self.plan:
            self._use_plan(plan)

    def hold_here(self, pages) -> None:
        """Pages a consumer holds in host memory itself, in the host's room
        (the GPU's packed images of pages it streams): they stay in the host
        tier whatever the iterations ask for."""
        self._held_here[np.asarray(list(pages), np.int64)] = True

    def _use_plan(self, plan: HostCachePlan) -> None:
        """Cache the pages of ``plan`` from now on; a page read that leaves the
        cache is dropped (one that enters is read when first asked for)."""
        with self._lock:
            self.plan = plan
            self._to_cache = frozenset(plan.cached)
            self._cached_flags = self._flags_of(plan.cached)
            self.placement = self._placement_of(plan)
            for index in [k for k in self._cached if k not in self._to_cache]:
                del self._cached[index]
            readers = list(self._readers.values())
        # a walk's read-ahead for the next one reads the streamed pages of the old plan
        for reader in readers:
            reader.cancel_prefetch()

    def end_iteration(self) -> dict | None:
        """Between two iterations: note the pages this one asked for in their
        reuse scores and revise the host's pages by them where
        :func:`~garaphpy.storage.decisions.revise_host_pages` says it pays.

        Returns
        -------
        dict or None
            The decision's entry for the iteration's record (``choice``, its
            inputs, the pages asked for, their disk bytes in the host's and
            the disk's tier, the tiers' page counts and bytes after it); None
            where the run does not revise by reuse.
        """
        with self._asked_lock:
            asked = self._asked | self._held_here
            self._asked = np.zeros_like(self._asked)
        if not self.by_reuse:
            return None
        self.reuse.note(asked)
        before = self.placement
        placement, entry = revised_placement(before, self.reuse)
        entry["asked_pages"] = int(asked.sum())
        # disk bytes of the pages asked for in the host's and the disk's tier: what
        # the iteration read (each once), a first one filling the host's cache
        for tier, name in ((HOST, "asked_host_bytes"), (DISK, "asked_disk_bytes")):
            entry[name] = int(before.disk_bytes[asked & (before.tiers == tier)].sum())
        if placement is not self.placement:
            host = placement.pages(HOST)
            sizes = placement.page_bytes
            cached_bytes = int(sizes[host].sum())
            self._use_plan(dataclasses.replace(
                self.plan, cached=tuple(host.tolist()),
                streamed=tuple(np.flatnonzero(placement.tiers != HOST).tolist()),
                cached_bytes=cached_bytes, streamed_bytes=int(sizes.sum()) - cached_bytes))
        entry.update(self.placement.record())
        return entry

    # -- reading -----------------------------------------------------------------------
    def is_cached(self, index: int) -> bool:
        """Whether page ``index`` stays in host memory (once read)."""
        return index in self._to_cache

    def cached_mask(self) -> np.ndarray:
        """Per page, :meth:`is_cached` (a bool array; do not modify it)."""
        return self._cached_flags

    def cached_page(self, index: int, consumer: str = "cpu") -> Page:
        """Page ``index`` (a cached one), read into its host buffer the first
        time.  A compressed page is cached as stored once a consumer takes it
        so (:meth:`take_stored`); another consumer gets it plain, decoded from
        the cached image into a buffer of its own (its blocks in parallel: the
        CPU's reader decodes its pages from storage the same way)."""
        self._note_asked(index)
        info = self.store.pages[index]
        stored = self._takes_stored(consumer, index)
        if stored != (info.compressed and self._stored_consumer is not None):
            held = self.cached_page(index, self._stored_consumer)
            image = aligned_empty(buffer_bytes(info.nbytes))
            with parallel_section():
                self.store.decode_page(info, held.image, image, parallel=True)
            return self.store.page_views(info, image[:info.nbytes])
        page = self._cached.get(index)
        if page is not None:
            return page
        reader = self.reader(consumer)
        with self._lock:
            page = self._cached.get(index)
            if page is None:
                buffer = self._cache_allocator(
                    buffer_bytes(info.disk_bytes if stored else info.nbytes))
                page = reader.read_page(index, out=buffer)
                self._cached[index] = page
        return page

    def _fills(self, index: int, consumer: str) -> bool:
        """Whether a walk of ``consumer`` reads page ``index`` ahead into the
        cache: a page the host caches, not read yet, that ``consumer`` takes
        in the form the cache holds it in (:meth:`cached_page`)."""
        if index not in self._to_cache or index in self._cached:
            return False
        info = self.store.pages[index]
        return self._takes_stored(consumer, index) == (info.compressed
                                                       and self._stored_consumer is not None)

    def _fill_buffer(self, index: int, consumer: str) -> np.ndarray:
        """A cache buffer for page ``index``, which ``consumer``'s reader reads
        ahead into it (the reader's ``keep``; called under the reader's lock)."""
        info = self.store.pages[index]
        stored = self._takes_stored(consumer, index)
        buffer = self._cache_allocator(buffer_bytes(info.disk_bytes if stored else info.nbytes))
        self._filling[index] = buffer
        return buffer

    def _filled(self, index: int, page: Page) -> Page:
        """Page ``index``, read ahead by a walk, into the cache (once: a page
        another walk cached first is that one).  Read into a pool buffer
        (a read-ahead begun before the walk knew it) it is copied into one of
        the cache's."""
        buffer = self._filling.pop(index, None)
        with self._lock:
            held = self._cached.get(index)
            if held is not None or index not in self._to_cache:
                return held if held is not None else page
            if buffer is None or not np.shares_memory(buffer, page.image):
                buffer = self._cache_allocator(buffer_bytes(page.image.nbytes))
                buffer[:page.image.nbytes] = page.image
                page = (Page(page.info, buffer[:page.image.nbytes], None, None, None,
                             stored=True) if page.stored
                        else self.store.page_views(page.info, buffer[:page.info.nbytes]))
            self._cached[index] = page
        return page

    def read_page(self, index: int, consumer: str = "cpu") -> Page:
        """Page ``index`` now, outside any cursor (a cached page from the cache, a
        streamed one into a new buffer)."""
        if self.is_cached(index):
            return self.cached_page(index, consumer)
        self._note_asked(index)
        return self.reader(consumer).read_page(index)

    def cursor(self, order: Iterable[int], consumer: str = "cpu",
               release: str = "auto") -> "PageCursor":
        """A walk over the pages ``order`` by ``consumer`` (see :class:`PageCursor`)."""
        return PageCursor(self, list(order), consumer, release)

    def prefetch(self, order: Iterable[int], consumer: str = "cpu") -> bool:
        """Start the reads of a walk over ``order`` by ``consumer`` (release
        ``auto``) to come: its first pages, read ahead while the consumer
        does other work (a union-find start before its pull); the walk's
        cursor takes them.  Returns False (nothing started) where nothing
        is read from storage or a walk runs."""
        streamed, fill = _walk_pages(self, list(order), consumer, fill=True)
        if not streamed:
            return False
        keep = functools.partial(_keep_buffer, self, fill, consumer)
        return self.reader(consumer).prefetch(streamed, keep)

    def cancel_prefetch(self, consumer: str = "cpu") -> None:
        """Stop the reads of a :meth:`prefetch` no walk took (the walk did not
        come); what they read counts in :attr:`bytes_dropped`."""
        reader = self._readers.get(consumer)
        if reader is not None:
            reader.cancel_prefetch()
        self._filling.clear()

    def arrange_vertices(self, vertices: np.ndarray) -> np.ndarray:
        """``vertices`` sorted: pages hold vertex ranges, read in page order."""
        return np.sort(vertices)

    def vertex_in_edges(self, vertices: np.ndarray, in_prefix: np.ndarray,
                        in_offsets: np.ndarray, gather: Callable, no_weights: np.ndarray,
                        read_weights: bool = True):
        """The in-edges of the (sorted) ``vertices``, copied out of the pages that
        hold them (section 4.2: notify-pull over pages on secondary storage;
        the whole page is read, so rho = k prices it).

        Parameters
        ----------
        vertices : numpy.ndarray of int64
            Sorted (:meth:`arrange_vertices`).
        in_prefix : numpy.ndarray of int64
            Exclusive prefix sum of their in-degrees (``len(vertices) + 1``).
        in_offsets : numpy.ndarray
            The CSC index.
        gather : callable
            The copy kernel, ``garaphpy.kernels.cpu.gather_vertex_edges``.
        no_weights : numpy.ndarray
            What stands for the weights of an unweighted graph.
        read_weights : bool, default True
            Whether to copy the edge values too (else ``no_weights`` stands
            for them).

        Returns
        -------
        (sources, weights, edge_starts, pages_read)
        """
        store = self.store
        total = int(in_prefix[-1])
        sources = np.empty(total, store.vertex_dtype)
        weighted = store.weighted and read_weights
        weights = np.empty(total, store.weight_dtype) if weighted else no_weights
        starts = in_offsets[vertices]
        ends = in_offsets[vertices + 1]
        touched = []
        for page in store.pages:
            end = page.edge_begin + page.num_edges
            first = int(np.searchsorted(ends, page.edge_begin, side="right"))
            last = int(np.searchsorted(starts, end, side="left"))
            if first < last and page.num_edges:
                touched.append((page, first, last))
        cursor = self.cursor([page.index for page, _, _ in touched])
        try:
            for page, first, last in touched:
                data = cursor.get(page.index)
                gather(vertices[first:last], in_prefix[first:last], in_offsets,
                       page.edge_begin, page.edge_begin + page.num_edges, data.sources,
                       data.weights if weighted else no_weights, weighted, sources, weights)
        finally:
            cursor.close()
        return sources, weights, in_prefix[:-1], len(touched)

    @property
    def bytes_read(self) -> int:
        """Page bytes read from the storage directories so far: those handed to
        a consumer and those read ahead and dropped (:attr:`bytes_dropped`);
        pages being read ahead now count once handed over or dropped."""
        return self._closed_reads[0] + sum(reader.bytes_delivered + reader.bytes_dropped
                                           for reader in list(self._readers.values()))

    @property
    def bytes_dropped(self) -> int:
        """Page bytes read ahead and dropped unused so far (a walk that ended
        before them, a read-ahead for a walk that did not come)."""
        return self._closed_reads[1] + sum(reader.bytes_dropped
                                           for reader in list(self._readers.values()))

    @property
    def cached_bytes(self) -> int:
        """Bytes of the page images held in host memory now."""
        return sum(page.image.nbytes for page in list(self._cached.values()))

    def close(self) -> None:
        """Stop the reader threads and close the files (the cache is dropped)."""
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
        self._cached.clear()

    def describe(self) -> str:
        """One line for logs."""
        return f"{self.plan.describe()}; rho = k = {self.rho:.3g}"


def _walk_pages(pages: HostPages, order: list[int], consumer: str,
                fill: bool) -> tuple[list[int], frozenset]:
    """The pages a walk over ``order`` streams, in order: those the host does
    not cache and, with ``fill``, those it caches that ``consumer`` reads
    ahead into the cache (:meth:`HostPages._fills`); and the set of these."""
    filled = frozenset(k for k in order if fill and pages._fills(k, consumer))
    return [k for k in order if not pages.is_cached(k) or k in filled], filled


def _keep_buffer(pages: HostPages, filled: frozenset, consumer: str,
                 index: int) -> np.ndarray | None:
    """A reader's ``keep`` for a walk: a cache buffer for the pages it reads
    into the cache, None (a pool buffer) for the others."""
    return pages._fill_buffer(index, consumer) if index in filled else None


class PageCursor:
    """One consumer's walk over an iteration's pages.

    ``order`` is the order in which :meth:`get` will (mostly) be called; the
    streamed pages of it are read ahead in that order.  :meth:`get` of a page
    further along passes over the pages before it (their buffers go back to
    the pool); a page already passed over, or not in ``order``, is read on
    its own.  A walk with ``release="auto"`` (the CPU's) reads the pages the
    host caches and has not read yet ahead in the same stream, into the
    cache's buffers, so that a first iteration's reads of them overlap its
    work as the streamed pages' do; a page so read and passed over is
    cached all the same.  A ``manual`` walk (the GPU's, which takes cached
    pages from :meth:`HostPages.cached_page` outside its walk) leaves them
    to :meth:`HostPages.cached_page`.

    Parameters
    ----------
    pages : HostPages
    order : list of int
    consumer : str
        Whose reader (and buffers) to use.
    release : {"auto", "manual"}
        ``auto``: a streamed page's buffer is reused once the next page is
        asked for.  ``manual``: once :meth:`release` is called with it (the
        GPU releases a page when its copy to the device has completed).
    """

    def __init__(self, pages: HostPages, order: list[int], consumer: str, release: str):
        if release not in ("auto", "manual"):
            raise ValueError(f"release={release!r}: expected 'auto' or 'manual'")
        self.pages = pages
        self.consumer = consumer
        self.manual = release == "manual"
        self.streamed, self._filled = _walk_pages(pages, order, consumer,
                                                  fill=not self.manual)
        self._position_of = {k: i for i, k in reversed(list(enumerate(self.streamed)))}
        self._next = 0
        self._stream = None
        self._reader: PageReader | None = None
        self._held: dict[int, Page] = {}

    def get(self, index: int) -> Page:
        """Page ``index``'s arrays (valid until released, see the class)."""
        pages = self.pages
        position = self._position_of.get(index)
        ahead = position is not None and position >= self._next
        if pages.is_cached(index) and (not ahead or index not in self._filled
                                       or index in pages._cached):
            return pages.cached_page(index, self.consumer)
        pages._note_asked(index)
        if not ahead:
            return pages.reader(self.consumer).read_page(index)
        if self._stream is None:
            self._reader = pages.reader(self.consumer)
            keep = functools.partial(_keep_buffer, pages, self._filled, self.consumer) \
                if self._filled else None
            self._stream = self._reader.stream(self.streamed[self._next:],
                                               release="manual" if self.manual else "auto",
                                               keep=keep)
        while True:
            try:
                found, page = next(self._stream)
            except StopIteration:
                self._stream = None
                raise StoreError(f"page {index}: the page stream ended before it") from None
            except BaseException:
                self._stream = None     # a failed stream is dead: the next get starts anew
                raise
            self._next += 1
            kept = found in self._filled
            if kept:
                page = pages._filled(found, page)
            if found == index:
                if self.manual and not kept:
                    self._held[id(page)] = page
                return page
            if self.manual and not kept:
                self._reader.release(page)

    def release(self, page: Page) -> None:
        """Give a streamed page's buffer back (``release="manual"``; cached and
        separately read pages need no release and are ignored)."""
        if self._held.pop(id(page), None) is not None:
            self._reader.release(page)

    @property
    def held(self) -> int:
        """Streamed pages handed out and not yet released (``release="manual"``)."""
        return len(self._held)

    @property
    def max_held(self) -> int:
        """How many streamed pages may be held at once (the reader's buffers)."""
        return self.pages.reader(self.consumer).max_buffers

    def close(self) -> None:
        """End the walk: pages read ahead and not asked for are dropped, pages
        still held are released (the caller has finished with them).  A walk
        that took every streamed page in order starts reading the pages the
        host does not cache for the next walk (:meth:`PageReader.prefetch`):
        the next iteration of a pull reads them all again."""
        for page in list(self._held.values()):
            self._reader.release(page)
        self._held.clear()
        if self._stream is not None:
            self._stream.close()
            self._stream = None
            for k in self._filled:      # the buffers of reads dropped unused
                if k not in self.pages._cached:
                    self.pages._filling.pop(k, None)
            if self.streamed and self._next == len(self.streamed):
                again = [k for k in self.streamed if not self.pages.is_cached(k)]
                if again:
                    self._reader.prefetch(again)
