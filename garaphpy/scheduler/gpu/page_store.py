"""The GPU's pages: the plan, the images kept on the device, the stream buffers (Garaph section 5.2).

The plan (:class:`PagePlan`, made once by :func:`plan_pages` as the run's GPU
plan sizes it, :func:`~garaphpy.scheduler.gpu.plan.plan_gpu`) says whether
every page stays on the device (resident) or pages stream through ``n_streams``
device buffers, and which pages the budget keeps on the device beside the
buffers, as they are or packed (:mod:`garaphpy.kernels.packed`).
:class:`PageStore` holds what the plan asks for: the whole-graph edge arrays
of a resident run, the images of the pages kept on the device, the packed
images in pinned host memory, a buffer per stream, the copies into them (on
one copy stream, each once the buffer's last pull is done), the copies queued
ahead for the next iteration, and the kept pages released when the selective
transfers' arrays are made (:meth:`PageStore.release`).
"""

from __future__ import annotations

import collections
import weakref
from dataclasses import dataclass

import numpy as np

from ... import config
from ...errors import ConfigError, GaraphError, StoreCorruptError
from ...kernels import gpu as gpu_kernels
from ...kernels import gpu_codec
from ...storage import page_codec
from . import transfer
from .timing import PageTiming

#: Edges the resident arrays carry past the last one: the longest run of
#: consecutive edges one pull-kernel thread loads as vectors.
RESIDENT_PADDING_EDGES = max(gpu_kernels.EDGES_PER_THREAD_CHOICES)

#: Bytes a page's device buffer holds past its last array (the pull's vector loads of
#: a run may read a little past the IdxOff array when the values are not copied).
PAGE_SLACK_BYTES = 256


#: The store whose whole-graph edge arrays stay on the device between runs
#: (``Store.kept_device_edges``), by a weak reference: one store at a time.
_holder: weakref.ref | None = None


def kept_edge_bytes(store) -> int:
    """The device bytes of ``store``'s edge arrays kept from an earlier run
    (0: none kept), which its run's budget counts as its own.  Another
    store's kept arrays are released first, their blocks back to the
    device, so that the budget read next sees that memory free."""
    global _holder
    holder = None if _holder is None else _holder()
    if holder is not None and holder is not store:
        release_kept_edges(holder, to_device=True)
    kept = store.kept_device_edges
    return 0 if kept is None else sum(int(a.nbytes) for a in kept if a is not None)


def release_kept_edges(store, to_device: bool = False) -> None:
    """Release the edge arrays ``store`` keeps on the device: into cupy's
    pool, for the run's own buffers, or (``to_device``) back to the device."""
    global _holder
    if store.release_device_edges() and to_device:
        gpu_kernels.cupy_module().get_default_memory_pool().free_all_blocks()
    if _holder is not None and _holder() is store:
        _holder = None


def _keep_edges(store, arrays: tuple) -> None:
    """``arrays`` (sources, IdxOff, values or None) kept on the device for the
    next run over ``store``."""
    global _holder
    store.kept_device_edges = arrays
    _holder = weakref.ref(store)


class GpuMemoryError(GaraphError, MemoryError):
    """The GPU memory budget cannot hold the vertex data and one page."""


@dataclass(frozen=True)
class PagePlan:
    """How the pages meet the GPU in this run (made once, never changed).

    Attributes
    ----------
    resident : bool
        All pages stay on the device between iterations.
    n_streams : int
        Streams (and, when streaming, device page buffers).
    budget : int
        GPU memory the run may use, in bytes.
    vertex_bytes : int
        Device memory taken by vertex data, shard table and attributes (and
        the resident edge arrays' padding).
    page_bytes : int
        Device memory taken by page images (all pages, or the buffers and
        the pages kept resident) at set-up; pages released later are counted
        by :attr:`PageStore.released_bytes`.
    resident_pages : numpy.ndarray of bool
        Per page, whether it stays on the device (all of them when
        ``resident``; when streaming, those the budget holds beside the
        buffers: :func:`~garaphpy.scheduler.gpu.transfer.resident_pages`).
    selective_bytes : int
        Device memory of the selective transfers' arrays made at set-up (0:
        none, or made later in the room of released pages).
    packed_pages : numpy.ndarray of bool
        Per page, whether it stays on the device packed at set-up
        (:mod:`garaphpy.kernels.packed`; unpacked into a stream's buffer
        before its pull, or pulled where it lies).  None when pages are not
        packed.
    """

    resident: bool
    n_streams: int
    budget: int
    vertex_bytes: int
    page_bytes: int
    resident_pages: np.ndarray = None
    selective_bytes: int = 0
    packed_pages: np.ndarray = None

    @property
    def streamed_pages(self) -> int:
        """Pages that cross the bus every iteration (at most)."""
        kept = self.resident_pages if self.packed_pages is None else \
            self.resident_pages | self.packed_pages
        return int((~kept).sum())


def plan_pages(page_sizes: list[int], vertex_bytes: int, budget: int,
               n_streams: int, *, page_edges: list[int] | None = None,
               selective_bytes: int = 0, order: str = "edges",
               packed_sizes: list[int] | None = None, raw_buffers: bool = True,
               decode_bytes: int = 0) -> PagePlan:
    """Resident pages when they all fit beside the vertex data, else streaming,
    with as many pages kept resident as the budget holds beside the stream
    buffers (and the selective transfers' arrays, ``selective_bytes``, when
    they fit too: else the plan has none).

    Streaming needs one device buffer per stream; with less memory, fewer
    streams are used (down to one, which loses the copy/kernel overlap).
    With ``packed_sizes`` (each page's packed bytes), each stream also has a
    buffer for a packed page, and pages are kept packed before any is kept as
    it is (:func:`~garaphpy.scheduler.gpu.transfer.resident_tiers`).  Without
    ``raw_buffers`` (every page that may stream is packed and pulled where it
    lies), a stream has only the packed page's buffer.  With ``decode_bytes``,
    each stream also has a buffer of that many bytes that compressed pages are
    decoded into.

    Raises
    ------
    GpuMemoryError
        When the budget holds not even the vertex data and one page.
    """
    if n_streams < 1:
        raise ConfigError(f"n_streams={n_streams}: expected at least 1")
    total = int(sum(page_sizes))
    largest = int(max(page_sizes, default=0))
    count = len(page_sizes)
    if vertex_bytes + total <= budget:
        return PagePlan(True, n_streams, budget, vertex_bytes, total, np.ones(count, bool))
    # packed pages: a packed page's buffer per stream beside the page's
    if packed_sizes is None:
        per_stream = largest
    else:
        per_stream = (largest if raw_buffers else 0) + int(max(packed_sizes, default=0))
    per_stream += int(decode_bytes)
    streams = n_streams
    while streams > 1 and vertex_bytes + streams * per_stream > budget:
        streams -= 1
    if vertex_bytes + streams * per_stream > budget:
        raise GpuMemoryError(
            f"the GPU memory budget of {budget:,} bytes cannot hold the vertex data "
            f"({vertex_bytes:,} bytes) and one page ({per_stream:,} bytes); raise the budget "
            "(gpu_memory) or rebuild the store with a smaller max_page_bytes")
    buffers = streams * per_stream
    if vertex_bytes + buffers + selective_bytes > budget:
        selective_bytes = 0
    room = budget - vertex_bytes - buffers - selective_bytes
    edges = page_edges if page_edges is not None else page_sizes
    # unpacked, every page's packed size is its size: the tiers keep none packed
    sizes_packed = packed_sizes if packed_sizes is not None else page_sizes
    kept, packed = transfer.resident_tiers(page_sizes, sizes_packed, edges, room, order)
    kept_bytes = int(np.asarray(page_sizes, np.int64)[kept].sum()
                     + np.asarray(sizes_packed, np.int64)[packed].sum())
    return PagePlan(False, streams, budget, vertex_bytes, buffers + kept_bytes, kept,
                    selective_bytes, packed if packed_sizes is not None else None)


def pinned_array(count: int, dtype) -> np.ndarray:
    """An array of ``count`` elements of ``dtype`` in pinned host memory (the
    copies to and from the device are asynchronous)."""
    dtype = np.dtype(dtype)
    return gpu_kernels.pinned_empty(count * dtype.itemsize).view(dtype)


class PageStore:
    """The pages of one GPU run: the plan and every page image the plan keeps
    or streams.

    Parameters
    ----------
    cupy : module
    store : garaphpy.storage.Store
    page_source : garaphpy.storage.page_source.PageSource
        Where the streamed pages not packed come from.
    plan : garaphpy.scheduler.gpu.plan.GpuPlan
        The run's GPU choices: the pages' plan, the packed layouts, the
        stream buffers, the pages kept until the selective arrays are made.
    reads_weights : bool
        The program reads edge values: a page crosses the bus without them if not.
    empty_weights : cupy.ndarray
        The one-element edge values a kernel reads when the page has none.
    """

    pinned_array = staticmethod(pinned_array)

    def __init__(self, cupy, store, page_source, plan, *, reads_weights: bool, empty_weights):
        self.cupy, self.store, self.page_source = cupy, store, page_source
        self.pages = pages = store.pages
        self.num_vertices, self.num_edges = store.num_vertices, store.num_edges
        self.reads_weights = reads_weights
        self.empty_weights = empty_weights
        # a page on the wire: its sources and IdxOff, and its values where they are read
        self.page_wire_bytes = [p.nbytes if reads_weights else p.weights_offset for p in pages]
        #: per page, its packed layout when it is packed (:mod:`garaphpy.kernels.packed`),
        #: or its :class:`~garaphpy.kernels.gpu_codec.CompressedLayout` when it crosses
        #: the bus as stored compressed and the GPU decodes it
        self.packed_layouts = dict(plan.packed_layouts)
        self.packed_entry = plan.entry("packed_pages")
        self.compressed_entry = plan.entry("compressed_pages")
        #: the pages decoded by the GPU (:mod:`garaphpy.kernels.gpu_codec`), never
        #: pulled where they lie
        self.compressed_pages = frozenset(
            k for k, layout in self.packed_layouts.items()
            if isinstance(layout, gpu_codec.CompressedLayout))
        #: the compressed pages the page source gives as stored, each iteration,
        #: from storage or its cache (a source that reads storage:
        #: :meth:`~garaphpy.storage.host_pages.HostPages.take_stored`; one holding every
        #: page in memory gives plain pages, so those are read as stored at set-up),
        #: into a stream's buffer for packed pages; a kept one joins them when released
        self.from_source = set() if plan.pages.resident or not page_source.reads_storage \
            else set(self.compressed_pages)
        if self.from_source:
            page_source.take_stored("gpu")
        #: the decoder's: the CSC index on the device, the kernel, its error count and
        #: each compressed page's edge-stream words (made with the images)
        self.device_in_offsets = self.decode_kernel = self.decode_errors = None
        self.stream_words = {}
        #: edges of a stream's buffer of decoded edges; per stream that buffer; per
        #: compressed page its groups of shards decoded and pulled together
        self.decode_edges = plan.decode_edges
        self.decode_buffers, self.decode_chunks = [], {}
        self.raw_buffers = plan.raw_buffers
        #: whether pages stream and the selective transfers' arrays have room
        self.selective_room = plan.selective_room
        #: the kept pages released when the selective arrays are made (deferred), else None
        self.release_pages = None if plan.release_pages is None else plan.release_pages.copy()
        self.deferral_entry = plan.entry("defer_selective_arrays")
        self.plan = plan.pages
        #: device bytes of the kept pages released since set-up
        self.released_bytes = 0
        self._setup_images()

    # -- set-up ---------------------------------------------------------------------------
    def _setup_images(self) -> None:
        """The per-page tables, the streams, and the images the plan keeps."""
        cupy, plan, pages = self.cupy, self.plan, self.pages
        #: per page, whether it stays on the device (as it is or packed)
        self.kept_pages = plan.resident_pages.copy()
        if plan.packed_pages is not None:
            self.kept_pages |= plan.packed_pages
        #: per page, whether it stays on the device packed
        self.packed_kept = (plan.packed_pages.copy() if plan.packed_pages is not None
                            else np.zeros(len(pages), bool))
        self.page_edge_counts = np.array([p.num_edges for p in pages], np.float64)
        #: per page, the bytes one copy of it moves to the device
        self.page_bus_bytes = np.array(
            [self.packed_layouts[k].nbytes if k in self.packed_layouts else wire
             for k, wire in enumerate(self.page_wire_bytes)], np.int64)
        self.streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(plan.n_streams)]
        # the pulls of pages kept on the device that read no stream buffer (raw, or packed
        # and pulled where they lie) in turn on streams of their own, when
        # config.GPU_KEPT_PAGES_STREAMS asks for some (0: on the copied pages' streams)
        kept_streams = config.GPU_KEPT_PAGES_STREAMS \
            if not plan.resident and self.kept_pages.any() else 0
        self.kept_streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(kept_streams)]
        #: every stream a page's kernels run on (joined at the end of an iteration)
        self.page_streams = self.streams + self.kept_streams
        #: the copies of streamed pages, one after another into the streams' buffers
        #: (their kernels wait on them in the streams): the bus never waits on a kernel
        self.copy_stream = cupy.cuda.Stream(non_blocking=True)
        # per stream: its packed buffer unpacked, its page buffer pulled
        self.buffer_events = {"packed_free": [cupy.cuda.Event() for _ in self.streams],
                              "raw_free": [cupy.cuda.Event() for _ in self.streams]}
        self.device_pages, self.device_packed = [], []
        self.resident_images = {}       # page -> its image on the device (partial residency)
        self.packed_images, self.packed_host, self.release_host = {}, {}, {}
        self.resident_edges = None
        #: the whole-graph edge arrays came from an earlier run over the store
        self.edges_kept_from_earlier = False
        if plan.resident:
            self.resident_edges = self._resident_edge_arrays()
        else:
            release_kept_edges(self.store)      # this run's budget has their room
            self.resident_images = self._resident_page_images()
            self._pack_pages()
            if any(k not in self.resident_images and k not in self.packed_layouts
                   for k in range(len(pages))):
                # the pages it holds in memory, now, into pinned buffers
                self.page_source.load("gpu")
            # a stream's buffer: a page copied, or a page kept packed unpacked
            if self.raw_buffers:
                unpacked = max((self.page_wire_bytes[k] for k in range(len(pages))
                                if k not in self.resident_images), default=0)
                self.device_pages = [cupy.empty(unpacked + PAGE_SLACK_BYTES, np.uint8)
                                     for _ in self.streams]
            self._decode_buffers()
        # the GPU's walk over the pages of an iteration (opened by open_iteration), and the
        # pages read from storage for it, each until its copy to the device is done
        self.cursor = self.page_source.cursor((), "gpu", release="manual")
        self.copying = collections.deque()
        self.page_views = {}            # (page, stream slot) -> the kernel's typed views
        #: stream slot -> the copy an iteration queued for the next one's page in that
        #: slot's buffer (its PageTiming); launching any page that reads the buffer
        #: takes the entry out
        self.prefetched = {}

    def _resident_edge_arrays(self) -> tuple:
        """Every page's sources, IdxOff and weights copied into whole-graph device
        arrays at the pages' global edge offsets, padded by
        ``RESIDENT_PADDING_EDGES`` (a run of the pull kernel's vector loads may
        read past the last edge).

        They take no more than the page images (whose arrays are padded to 64
        bytes each) plus that padding, which the plan counts.  An earlier
        run's arrays kept for this store (``config.KEEP_CSC_BETWEEN_RUNS``)
        are taken as they are: no kernel writes them.
        """
        cupy, store = self.cupy, self.store
        if store.kept_device_edges is not None:
            self.edges_kept_from_earlier = True
            sources, idxoff, weights = store.kept_device_edges
            return sources, idxoff, self.empty_weights if weights is None else weights
        vertex_dtype = store.vertex_dtype
        weight_dtype = store.weight_dtype if store.weighted else None
        padded = self.num_edges + RESIDENT_PADDING_EDGES
        sources = cupy.zeros(padded, vertex_dtype)
        idxoff = cupy.zeros(padded, np.uint16)
        weights = cupy.zeros(padded, weight_dtype) if weight_dtype is not None else \
            self.empty_weights

        def place(k: int, image: np.ndarray) -> None:
            info = self.pages[k]
            begin, n = info.edge_begin, info.num_edges
            sources[begin:begin + n].set(image[:n * vertex_dtype.itemsize].view(vertex_dtype))
            idxoff[begin:begin + n].set(
                image[info.idxoff_offset:info.idxoff_offset + 2 * n].view(np.uint16))
            if weight_dtype is not None:
                size = weight_dtype.itemsize
                weights[begin:begin + n].set(image[info.weights_offset:
                                                   info.weights_offset + size * n]
                                             .view(weight_dtype))

        self._copy_pages_to_device(range(len(self.pages)), place)
        if config.KEEP_CSC_BETWEEN_RUNS:
            _keep_edges(store, (sources, idxoff, weights if weight_dtype is not None else None))
        return sources, idxoff, weights

    def _copy_pages_to_device(self, pages, place) -> None:
        """Read ``pages`` from the store (their blocks' checksums checked) on
        up to ``config.DEVICE_UPLOAD_READERS`` threads, each into a pinned
        buffer of its own, and hand each image to ``place(page, image)`` on
        this thread, in order; a buffer is read into again once the copies
        ``place`` queued from it are done.  The reads and the CRC-32 run
        without the interpreter's lock, so the threads share the cores; one
        thread read kron22's 0.77 GB of resident pages in 0.43 s."""
        import concurrent.futures

        pages = list(pages)
        if not pages:
            return
        store, cupy = self.store, self.cupy
        readers = max(1, min(config.DEVICE_UPLOAD_READERS, len(pages), config.usable_cores()))
        largest = max(self.pages[k].nbytes for k in pages)
        buffers = [self.pinned_array(largest, np.uint8) for _ in range(readers)]

        def read(k: int, buffer: np.ndarray) -> tuple:
            return buffer, store.read_page(self.pages[k].index, out=buffer).image

        waiting = iter(pages)
        with concurrent.futures.ThreadPoolExecutor(readers, "garaphpy-upload") as pool:
            reads = collections.deque((k, pool.submit(read, k, buffer))    # buffers first:
                                      for buffer, k in zip(buffers, waiting))  # no page skipped
            while reads:
                k, future = reads.popleft()
                buffer, image = future.result()
                place(k, image)
                cupy.cuda.get_current_stream().synchronize()    # before the buffer is reused
                following = next(waiting, None)
                if following is not None:
                    reads.append((following, pool.submit(read, following, buffer)))

    def _resident_page_images(self) -> dict:
        """The plan's resident pages copied to the device, each as its image
        (a streaming run keeps them between iterations: partial residency)."""
        cupy = self.cupy
        kept = np.flatnonzero(self.plan.resident_pages).tolist()
        if not kept:
            return {}
        images = {}

        def place(k: int, image: np.ndarray) -> None:
            wire = self.page_wire_bytes[k]
            images[k] = cupy.empty(wire + PAGE_SLACK_BYTES, np.uint8)
            images[k][:wire].set(image[:wire])

        self._copy_pages_to_device(kept, place)
        return images

    def _pack_pages(self) -> None:
        """The packed pages: those the plan keeps packed, on the device; those
        that stream, in pinned host memory (one block); and a packed page's
        buffer per stream."""
        from ...kernels import packed

        cupy, store = self.cupy, self.store
        self.packed_images = {}         # page -> its packed image on the device
        self.packed_host = {}           # page -> its packed image in pinned host memory
        self.release_host = {}          # the same, of a kept page until it is released
        self.device_packed = []
        if not self.packed_layouts:
            return
        vertices = store.shards["num_vertices"].astype(np.int64)
        self.shard_column_begin = cupy.asarray(np.cumsum(vertices) - vertices)
        kept = self.plan.packed_pages
        released = (self.release_pages if self.release_pages is not None
                    else np.zeros(len(self.pages), bool))
        from_source = self.from_source
        streamed = [k for k in self.packed_layouts if k not in from_source
                    and ((not kept[k] and k not in self.resident_images) or released[k])]
        offsets, at = {}, 0
        for k in streamed:
            offsets[k] = at
            at += -(-self.packed_layouts[k].nbytes // 4096) * 4096
        host_block = gpu_kernels.pinned_empty(at) if streamed else None
        largest_kept = max((self.packed_layouts[k].nbytes for k in self.packed_layouts
                            if kept[k]), default=0)
        staging = self.pinned_array(largest_kept, np.uint8) if largest_kept else None
        read_buffer = np.empty(max(self.pages[k].nbytes for k in self.packed_layouts), np.uint8)
        if self.compressed_pages:
            self.device_in_offsets = gpu_codec.device_offsets(cupy, store.in_offsets)
            self.decode_kernel = gpu_codec.decode_kernel(store.vertex_dtype,
                                                         self.device_in_offsets.dtype)
            self.decode_errors = cupy.zeros(1, np.uint32)
        for k, layout in self.packed_layouts.items():
            if (k in self.resident_images and not released[k]) or (k in from_source
                                                                   and not kept[k]):
                continue
            out = host_block[offsets[k]:] if k in offsets else staging
            if k in self.compressed_pages:
                # the image as stored (its blocks checked), not decoded on the host
                stored = store.read_stored(k, out=read_buffer)
                self.stream_words[k] = page_codec.stream_words(stored, self.pages[k].num_edges)
                out[:layout.nbytes] = stored[:layout.nbytes]
            else:
                page = store.read_page(k, out=read_buffer)
                packed.pack_page(page.sources, page.idxoff,
                                 page.weights if self.reads_weights else None,
                                 store.page_shards(k), self.num_vertices,
                                 code=layout.weight_code, out=out)
            if k in offsets:
                host = host_block[offsets[k]:offsets[k] + layout.nbytes]
                (self.release_host if released[k] else self.packed_host)[k] = host
            if kept[k]:
                image = self.packed_images[k] = cupy.empty(layout.nbytes + PAGE_SLACK_BYTES,
                                                           np.uint8)
                image[:layout.nbytes].set(out[:layout.nbytes])
                cupy.cuda.get_current_stream().synchronize()    # before staging is reused
        if streamed or from_source:
            # a kept page from the source streams into it once released
            largest = max(self.packed_layouts[k].nbytes for k in (*streamed, *from_source))
            self.device_packed = [cupy.empty(largest + PAGE_SLACK_BYTES, np.uint8)
                                  for _ in self.streams]
        self.from_source = {k for k in from_source
                            if not kept[k] and k not in self.resident_images}

    def _decode_buffers(self) -> None:
        """A buffer of decoded edges per stream, and each compressed page's groups
        of shards whose blocks it holds (:meth:`decode_chunks`)."""
        if not self.compressed_pages:
            return
        weight_size = self.store.weight_dtype.itemsize if self.reads_weights else 0
        self.decode_offsets = gpu_codec.decode_buffer_offsets(
            self.decode_edges, self.store.vertex_dtype.itemsize, weight_size)
        self.decode_buffers = [
            self.cupy.empty(self.decode_offsets["nbytes"] + PAGE_SLACK_BYTES, np.uint8)
            for _ in self.streams]
        self.decode_chunks = {k: decode_chunks(self.pages[k], self.store.page_shards(k),
                                               self.decode_edges)
                              for k in self.compressed_pages}

    def decoded_views(self, slot: int, first_block: int) -> tuple:
        """The device addresses (sources, IdxOff) and the values (an address,
        or the empty values when the kernels read none) of stream ``slot``'s
        buffer of decoded edges, each shifted back by ``first_block`` blocks:
        indexed by the page's edges, as the pull indexes them, for a group of
        shards decoded from that block on."""
        buffer = self.decode_buffers[slot]
        shift = first_block * page_codec.BLOCK_EDGES
        base, offsets = buffer.data.ptr, self.decode_offsets
        sources = base + offsets["sources"] - shift * self.store.vertex_dtype.itemsize
        idxoff = base + offsets["idxoff"] - shift * 2
        weights = self.empty_weights
        if self.reads_weights:
            weights = np.uint64(base + offsets["weights"]
                                - shift * self.store.weight_dtype.itemsize)
        return np.uint64(sources), np.uint64(idxoff), weights

    # -- what the plan says now -------------------------------------------------------------
    @property
    def page_bytes(self) -> int:
        """Device bytes the page images take now (the plan's, less those released)."""
        return self.plan.page_bytes - self.released_bytes

    @property
    def free_bytes(self) -> int:
        """Device bytes of the budget that neither the vertex data nor the pages take."""
        return self.plan.budget - self.plan.vertex_bytes - self.page_bytes

    @property
    def streamed_bus_bytes(self) -> int:
        """The bytes the pages not kept on the device move over the bus in a
        pull over every page."""
        return int(self.page_bus_bytes[~self.kept_pages].sum())

    def host_held_pages(self) -> list:
        """The pages whose packed images this store holds in pinned host memory
        (streamed packed, or kept until released): they take the host's room,
        and the host's page cache does not hold them again."""
        return sorted(set(self.packed_host) | set(self.release_host))

    def release(self) -> tuple[list, int]:
        """The pages :meth:`_defer_selective_arrays` chose released from the
        device (each streams packed from then on, from the packed image made at
        set-up); returns them and the device bytes freed."""
        released = np.flatnonzero(self.release_pages).tolist()
        freed = 0
        for k in released:
            freed += self.packed_images.pop(k).nbytes
            if k in self.release_host:
                self.packed_host[k] = self.release_host.pop(k)
            else:
                self.from_source.add(k)
        self.kept_pages[released] = False
        self.packed_kept[released] = False
        self.released_bytes += freed
        self.release_pages = None
        return released, freed

    # -- pages reaching the device ----------------------------------------------------------
    def views(self, index: int, slot: int | None = None) -> tuple:
        """Typed device views (sources, idxoff, weights) the kernel of page ``index``
        reads: the whole-graph arrays when resident (shards index them globally),
        its own image when the page alone is resident, else the page's image in
        the buffer of stream ``slot`` (default ``index % streams``)."""
        if self.plan.resident:
            return self.resident_edges
        if slot is None:
            slot = index % len(self.streams)
        key = (index, slot if index not in self.resident_images else -1)
        views = self.page_views.get(key)
        if views is not None:
            return views
        info = self.pages[index]
        buffer = self.resident_images.get(index)
        if buffer is None:
            buffer = self.device_pages[slot]
        n = info.num_edges
        vertex_dtype = self.store.vertex_dtype
        sources = buffer[:n * vertex_dtype.itemsize].view(vertex_dtype)
        idxoff = buffer[info.idxoff_offset:info.idxoff_offset + 2 * n].view(np.uint16)
        if self.reads_weights:
            size = self.store.weight_dtype.itemsize
            weights = buffer[info.weights_offset:info.weights_offset + size * n].view(
                self.store.weight_dtype)
        else:
            weights = self.empty_weights
        self.page_views[key] = views = (sources, idxoff, weights)
        return views

    def open_iteration(self, order) -> None:
        """The page source's walk over the pages of an iteration's ``order``
        whose images it gives (those neither kept nor packed)."""
        order = [k for k in order if k not in self.resident_images
                 and (k not in self.packed_layouts or k in self.from_source)]
        self.cursor = self.page_source.cursor(order, "gpu", release="manual")

    def streams_packed(self, k: int) -> bool:
        """Whether page ``k`` is copied into a stream's buffer for packed pages
        (packed or compressed, from pinned host memory or the page source)."""
        return k in self.packed_host or k in self.from_source

    def copied(self, k: int) -> bool:
        """Whether page ``k`` reaches the device by a copy into a stream's buffer
        (packed in pinned host memory, or streamed as stored)."""
        return k in self.packed_host or not (self.plan.resident or k in self.resident_images
                                             or k in self.packed_images)

    def copied_mask(self) -> np.ndarray:
        """Per page, :meth:`copied`."""
        count = len(self.pages)
        if self.plan.resident:
            return self.packed_host_mask()
        held = np.zeros(count, bool)
        held[np.fromiter(self.resident_images, np.int64, len(self.resident_images))] = True
        held[np.fromiter(self.packed_images, np.int64, len(self.packed_images))] = True
        return self.packed_host_mask() | ~held

    def packed_host_mask(self) -> np.ndarray:
        """Per page, whether its packed image is in pinned host memory (it
        streams from there, not from the page source)."""
        packed = np.zeros(len(self.pages), bool)
        packed[np.fromiter(self.packed_host, np.int64, len(self.packed_host))] = True
        return packed

    def queue_copy(self, k: int, slot: int, timing, start, end):
        """Queue the copy of page ``k`` into stream ``slot``'s buffer on the copy
        stream, once the buffer's last pull (or unpack) is done; its events
        (``start``, ``end``) and bytes go into ``timing``.  Returns the page read
        from storage for it (released once the copy is done), or None."""
        cupy, copy = self.cupy, self.copy_stream
        read = None
        if k in self.packed_host:
            image = self.packed_host[k]
            target, free, nbytes = (self.device_packed[slot],
                                    self.buffer_events["packed_free"][slot], image.nbytes)
        elif k in self.from_source:
            image, read = self.host_image(k)
            if k not in self.stream_words:
                self.stream_words[k] = page_codec.stream_words(image, self.pages[k].num_edges)
            target, free, nbytes = (self.device_packed[slot],
                                    self.buffer_events["packed_free"][slot],
                                    self.packed_layouts[k].nbytes)
        else:
            image, read = self.host_image(k)
            target, free, nbytes = (self.device_pages[slot],
                                    self.buffer_events["raw_free"][slot],
                                    self.page_wire_bytes[k])
        copy.wait_event(free)
        timing.host_image = image
        timing.copy_start = copy.record(start)
        cupy.cuda.runtime.memcpyAsync(target.data.ptr, image.ctypes.data, nbytes,
                                      cupy.cuda.runtime.memcpyHostToDevice, copy.ptr)
        timing.bytes_to_device = nbytes
        timing.copy_end = copy.record(end)
        return read

    def prefetch_next_copies(self, order: list, slots: list) -> None:
        """Queue now the copies the next iteration would begin with: the first
        copied page of each stream buffer, in ``order`` (this iteration's, which
        the next repeats), each once this iteration's last pull from its buffer
        is done.  The copy engine then runs on while this iteration's last
        pulls finish and the host ends it and begins the next, where it would
        otherwise idle.  Only pages in pinned host memory (packed, or held by
        the page source): a page read from storage waits for its read.  The
        next iteration's launch of the same page in the same slot uses the
        copy; any other page launched into that slot replaces it."""
        event = self.cupy.cuda.Event
        self.prefetched = {}
        for k, slot in zip(order, slots):
            if len(self.prefetched) == len(self.streams):
                break
            if not self.copied(k) or slot in self.prefetched:
                continue
            if k not in self.packed_host and not self.page_source.is_cached(k):
                break
            timing = PageTiming(k, slot)
            self.queue_copy(k, slot, timing, event(), event())
            self.prefetched[slot] = timing

    def host_image(self, k: int):
        """Page ``k``'s image in pinned host memory, and the page read from
        storage for it (to be released once its copy is done) or None."""
        source = self.page_source
        if source.is_cached(k):
            page, read = source.cached_page(k, "gpu"), None
        else:
            cursor, copying = self.cursor, self.copying
            # buffers whose copy has finished go back to the reader; all held: wait for one
            while copying and (copying[0][1].done or cursor.held >= cursor.max_held):
                done, copied = copying.popleft()
                copied.synchronize()
                cursor.release(done)
            page = read = cursor.get(k)
        if page.stored != (k in self.from_source):
            raise GaraphError(f"{self.store.path}: page {k} came from the page source "
                              f"{'as stored' if page.stored else 'decoded'}, where the GPU's "
                              "plan copies it the other way")
        return page.image, read

    def end_page_reads(self) -> None:
        """After the iteration's copies: the reader's buffers back (a walk over
        every page goes on reading for the next iteration, see
        :meth:`~garaphpy.storage.host_pages.PageCursor.close`)."""
        self.cursor.close()
        self.copying.clear()

    def close(self) -> None:
        """Wait for the copies queued ahead for an iteration that did not come
        (:meth:`prefetch_next_copies`), before the buffers they fill can go
        back to the memory pool."""
        self.copy_stream.synchronize()
        self.prefetched = {}
        if self.decode_errors is not None and int(self.decode_errors[0]):
            raise StoreCorruptError(f"{self.store.path}: {int(self.decode_errors[0])} blocks "
                                    "of compressed pages did not decode on the GPU")

    def describe(self) -> str:
        """How the pages meet the device, in words."""
        plan = self.plan
        if plan.resident:
            return "resident"
        return (f"streamed over {plan.n_streams} streams, {len(self.resident_images)} kept "
                "resident"
                + (f", {len(self.packed_images)} kept packed, {len(self.packed_host)} streamed "
                   "packed" if self.packed_layouts else "")
                + (f" ({len(self.compressed_pages)} compressed, decoded on the device"
                   + (f"; {len(self.from_source)} of them read as stored each iteration"
                      if self.from_source else "") + ")"
                   if self.compressed_pages else ""))


def packed_layouts(store, page_source, reads_weights: bool) -> dict:
    """Per page a run may pack (one ``page_source`` holds in host memory:
    packing it once costs a read), its packed layout
    (:func:`garaphpy.kernels.packed.packed_layout`)."""
    from ...kernels import packed

    width = packed.source_width(store.num_vertices, store.vertex_dtype)
    codes = page_weight_codes(store) if reads_weights else None
    weight_size = store.weight_dtype.itemsize if reads_weights else 0
    vertices = store.shards["num_vertices"].astype(np.int64)
    layouts = {}
    for info in store.pages:
        if not page_source.is_cached(info.index):
            continue
        columns = int(vertices[info.first_shard:info.first_shard + info.num_shards].sum())
        layouts[info.index] = packed.packed_layout(
            info.num_edges, columns, width,
            packed.WEIGHT_NONE if codes is None else int(codes[info.index]), weight_size)
    return layouts


def decode_chunks(info, shards: np.ndarray, decode_edges: int) -> list:
    """Page ``info``'s groups of consecutive shards decoded and pulled
    together, each as (first shard, shards, first block, end block): the
    blocks of :data:`~garaphpy.storage.page_codec.BLOCK_EDGES` edges that hold
    the group's edges, at most ``decode_edges`` edges of them (a shard alone
    always fits: :func:`~garaphpy.scheduler.decisions.decode_buffer_edges`)."""
    block = page_codec.BLOCK_EDGES
    capacity = decode_edges // block
    begin = shards["edge_begin"].astype(np.int64) - info.edge_begin
    end = shards["edge_end"].astype(np.int64) - info.edge_begin
    chunks, first = [], 0
    while first < len(shards):
        first_block = int(begin[first]) // block
        last = first + 1
        while last < len(shards) and -(-int(end[last]) // block) - first_block <= capacity:
            last += 1
        end_block = max(-(-int(end[last - 1]) // block), first_block)
        if end_block - first_block > capacity:
            raise GaraphError(f"page {info.index}: shards {first}.. need {end_block - first_block}"
                              f" blocks, the decode buffer holds {capacity}")
        chunks.append((info.first_shard + first, last - first, first_block, end_block))
        first = last
    return chunks


def compressed_layouts(store, reads_weights: bool) -> dict:
    """Per page a run may ship compressed (every page stored compressed: one
    the page source holds in host memory, or one it reads from storage and
    gives as stored, :meth:`~garaphpy.storage.page_source.PageSource.take_stored`),
    its :class:`~garaphpy.kernels.gpu_codec.CompressedLayout`."""
    weight_size = store.weight_dtype.itemsize if store.weighted else 0
    return {info.index: gpu_codec.compressed_layout(info, weight_size, reads_weights)
            for info in store.pages if info.compressed}


#: store -> each page's values' code in a packed page, found once per store
_PAGE_WEIGHT_CODES = weakref.WeakKeyDictionary()


def page_weight_codes(store) -> np.ndarray:
    """Per page of a weighted store, the narrowest exact code of its values in
    a packed page (:func:`garaphpy.kernels.packed.weight_code`); each page is
    read once per store."""
    from ...kernels import packed

    codes = _PAGE_WEIGHT_CODES.get(store)
    if codes is None:
        codes = np.empty(len(store.pages), np.int8)
        buffer = np.empty(max((p.nbytes for p in store.pages), default=0), np.uint8)
        for info in store.pages:
            codes[info.index] = packed.weight_code(store.read_page(info.index,
                                                                   out=buffer).weights)
        _PAGE_WEIGHT_CODES[store] = codes
    return codes


def interleave(copied: list, kept: list) -> list:
    """The pages of an iteration in launch order: the pages kept on the device
    spread evenly among the copied ones (round the streams, each kept page's
    pull then runs while other streams' copies hold the bus), in their orders."""
    if not copied or not kept:
        return list(copied) + list(kept)
    order, taken = [], 0
    for position, page in enumerate(copied, 1):
        order.append(page)
        due = position * len(kept) // len(copied)
        order.extend(kept[taken:due])
        taken = due
    return order


def stream_slots(order: list, kept: np.ndarray, streams: int) -> list:
    """The stream (and buffer) of each page in ``order``: the copied pages take
    the streams in turn, and so do the kept ones (``kept[k]``), so that every
    buffer holds copies while a kept page's pull runs beside them."""
    turns = [0, 0]
    slots = []
    for k in order:
        kind = int(bool(kept[k]))
        slots.append(turns[kind] % streams)
        turns[kind] += 1
    return slots
