"""The GPU's launches: pulls of pages, one fused pull, the end of an iteration (Garaph sections 3.2, 5.2).

:class:`Launches` holds the shard table on the device and queues the
kernels of an iteration: the contributions (:meth:`Launches.begin_iteration`),
each page's copy, unpack and pull on its stream
(:meth:`Launches.launch_page`), or one pull over every shard of the resident
arrays (:meth:`Launches.launch_all_resident`); then the split vertices'
apply and the labels' shortcut on the main stream, the counters read back
and the copy and kernel times measured from CUDA events
(:meth:`Launches.end_iteration`).
"""

from __future__ import annotations

import numpy as np

from ... import config
from ...kernels import gpu as gpu_kernels
from ...kernels import gpu_codec
from ...kernels.packed import KEY_SHIFT
from ...storage.page_codec import BLOCK_EDGES
from .timing import IterationTiming, PageTiming, busy_time

#: The packed pull's stride of kept IdxOff keys (:data:`garaphpy.kernels.packed.KEY_SHIFT`),
#: as the kernel takes it.
PACKED_KEY_SHIFT = np.int32(KEY_SHIFT)


class Launches:
    """The kernels of one GPU run's iterations, and their timings.

    Parameters
    ----------
    cupy : module
    kernels : garaphpy.kernels.gpu.Kernels
    device : garaphpy.kernels.gpu.DeviceInfo
    store : garaphpy.storage.Store
    state : DeviceVertexState
        The vertex data the kernels read and write.
    precompute : bool
        Contributions computed once per vertex before the pulls.

    The page store is attached once the plan is made (:meth:`attach`).
    """

    def __init__(self, cupy, kernels, device, store, state, *, precompute: bool):
        self.cupy, self.kernels, self.device, self.store = cupy, kernels, device, store
        self.state = state
        self.pages = store.pages
        self.num_vertices = store.num_vertices
        self.synchronous = state.synchronous
        self.precompute = precompute
        self.pull_kernel = kernels.pull[precompute]
        #: packed pages pulled where they lie (else unpacked first; the plan's, at attach)
        self.pull_packed = True
        self._shard_table(state.split_slot_of_shard)
        #: (user ids on the device, consecutive) when the labels are shortcut
        self.shortcut = None
        self.timings: list[IterationTiming] = []
        self.page_store = None

    def _shard_table(self, slot_of_shard: np.ndarray) -> None:
        """The shard table on the device, the shared memory per block from the
        device's properties, and the scratch of shards whose accumulators do
        not fit it."""
        cupy, store = self.cupy, self.store
        shards = store.shards
        accum_dtype = self.state.split_accum.dtype
        accumulator_bytes = gpu_kernels.accumulator_bytes(shards, accum_dtype)
        shared_limit = self.device.shared_memory_per_block_optin
        oversize = accumulator_bytes > shared_limit
        scratch_offsets = np.full(shards.shape[0], -1, np.int64)
        slots = accumulator_bytes // np.dtype(accum_dtype).itemsize  # whole 4-byte words
        scratch_offsets[oversize] = np.cumsum(slots[oversize]) - slots[oversize]
        self.oversize_shards = int(oversize.sum())
        fitting = np.where(oversize, 0, accumulator_bytes)
        self.shared_bytes = int(fitting.max(initial=0))
        if self.shared_bytes > self.device.shared_memory_per_block:
            # kernels are shared by every engine of the process: only ever raise the limit
            for kernel in (*self.kernels.pull.values(), *self.kernels.pull_packed.values()):
                kernel.max_dynamic_shared_size_bytes = max(
                    kernel.max_dynamic_shared_size_bytes, self.shared_bytes)
        self.page_shared_bytes = [
            max(int(fitting[p.first_shard:p.first_shard + p.num_shards].max(initial=0)),
                gpu_kernels.TOTALS_SHARED_BYTES) for p in self.pages]
        device_array = cupy.asarray
        page_of_shard = shards["page"].astype(np.int64)
        page_edge_begin = np.array([p.edge_begin for p in self.pages], np.int64)
        self.shard_first_vertex = device_array(shards["first_vertex"].astype(np.int64))
        self.shard_num_vertices = device_array(shards["num_vertices"].astype(np.int32))
        self.shard_replication = device_array(shards["replication"].astype(np.int32))
        # edge ranges within the page image (streamed) or the whole-graph arrays (resident):
        # both are counted in the vertex data, the unused one is dropped after the plan
        offsets = page_edge_begin[page_of_shard] if shards.size else np.zeros(0, np.int64)
        self._edge_ranges = {
            "page": (device_array(shards["edge_begin"].astype(np.int64) - offsets),
                     device_array(shards["edge_end"].astype(np.int64) - offsets)),
            "global": (device_array(shards["edge_begin"].astype(np.int64)),
                       device_array(shards["edge_end"].astype(np.int64)))}
        self.shard_split_slot = device_array(slot_of_shard)
        self.shard_scratch = device_array(scratch_offsets)
        self.scratch = cupy.empty(int(slots[oversize].sum()) + 4, dtype=accum_dtype)

    def device_arrays(self) -> tuple:
        """Every device array of the shard table (what it takes of the budget)."""
        return (self.shard_first_vertex, self.shard_num_vertices, self.shard_replication,
                *self._edge_ranges["page"], *self._edge_ranges["global"],
                self.shard_split_slot, self.shard_scratch, self.scratch)

    def attach(self, page_store, pull_packed: bool) -> None:
        """The page store of the plan: the shards' edge ranges it indexes, and
        the events of its streams and pages; ``pull_packed``: the plan's, pull
        packed pages where they lie (False: unpack each into a stream's buffer
        first)."""
        cupy = self.cupy
        self.page_store = page_store
        self.pull_packed = bool(pull_packed)
        self.shard_edge_begin, self.shard_edge_end = \
            self._edge_ranges["global" if page_store.plan.resident else "page"]
        self._edge_ranges = None
        self._kept_turn = 0
        # CUDA events, made once and recorded again every iteration
        event = cupy.cuda.Event
        self._events = {"origin": event(), "ready": event(),
                        "streams": [event() for _ in page_store.page_streams],
                        "pages": [[event() for _ in range(5)] for _ in self.pages]}

    # -- an iteration's launches -------------------------------------------------------------
    def begin_iteration(self, iteration: int, order=None) -> None:
        """Reset the statistics and compute the contributions; pages launch after it
        (``order``: the pages that will, in their order, when not all of them)."""
        state = self.state
        main = state.main_stream
        events = self._events
        if order is None:
            order = range(len(self.pages))
        # the pages whose images come from the page source this iteration
        self.page_store.open_iteration(order)
        self._origin = main.record(events["origin"])
        with main:
            state.statistics.fill(0)
        if self.precompute:
            state.launch_vertices(self.kernels.contributions,
                                  (state.values, state.contributions) + state.attrs
                                  + (np.int64(self.num_vertices),))
        self.ready = main.record(events["ready"])

    def launch_all_resident(self, aggregates, iteration: int) -> PageTiming:
        """Queue one pull kernel over every shard of the resident arrays on the
        first stream; its timing stands for all pages (``page`` is -1)."""
        stream = self.page_store.streams[0]
        stream.wait_event(self.ready)
        events = self._events["pages"][0]
        timing = PageTiming(-1, 0)
        timing.kernel_start = stream.record(events[2])
        self.launch_pull(stream, 0, self.store.shards.shape[0], self.page_store.resident_edges,
                         max(self.page_shared_bytes, default=0), aggregates, iteration)
        timing.kernel_end = timing.done = stream.record(events[3])
        return timing

    def launch_pull(self, stream, first_shard: int, num_shards: int, edges, shared_bytes: int,
                    aggregates, iteration: int) -> None:
        """The pull kernel over ``num_shards`` shards from ``first_shard``,
        reading the edge arrays ``edges`` (sources, IdxOff, values)."""
        state = self.state
        sources, idxoff, weights = edges
        with stream:
            self.pull_kernel((num_shards,), (config.GPU_THREADS_PER_BLOCK,), (
                sources, idxoff, weights, self.shard_first_vertex,
                self.shard_num_vertices, self.shard_replication, self.shard_edge_begin,
                self.shard_edge_end, self.shard_split_slot, self.shard_scratch,
                self.scratch, np.int32(first_shard),
                state.values, state.next, state.contributions, state.active,
                state.split_accum) + state.attrs + (
                aggregates, np.int64(self.num_vertices), np.int64(iteration),
                state.l1_total, state.counters),
                shared_mem=shared_bytes)

    def launch_packed_pull(self, k: int, packed_image, stream, aggregates,
                           iteration: int) -> None:
        """The pull of page ``k`` read from its packed image (on the device)."""
        state = self.state
        info, layout = self.pages[k], self.page_store.packed_layouts[k]
        if not info.num_shards:
            return
        with stream:
            self.kernels.pull_packed[self.precompute](
                (info.num_shards,), (config.GPU_THREADS_PER_BLOCK,), (
                    packed_image, np.int32(layout.source_bytes),
                    np.int64(layout.columns_offset), np.int64(layout.weights_offset),
                    np.int32(layout.weight_code), np.int64(layout.keys_offset),
                    PACKED_KEY_SHIFT, self.shard_first_vertex, self.shard_num_vertices,
                    self.shard_replication, self.shard_edge_begin, self.shard_edge_end,
                    self.shard_split_slot, self.shard_scratch, self.scratch,
                    self.page_store.shard_column_begin, np.int32(info.first_shard),
                    state.values, state.next, state.contributions, state.active,
                    state.split_accum) + state.attrs + (
                    aggregates, np.int64(self.num_vertices), np.int64(iteration),
                    state.l1_total, state.counters),
                shared_mem=self.page_shared_bytes[k])

    def unpack(self, k: int, packed_image, slot: int, stream) -> None:
        """Page ``k``'s packed image (on the device) unpacked into the buffer of
        stream ``slot``, where its pull reads it."""
        info, layout = self.pages[k], self.page_store.packed_layouts[k]
        if not info.num_shards:
            return
        sources, idxoff, weights = self.page_store.views(k, slot)
        with stream:
            self.kernels.unpack_page((info.num_shards,), (256,), (
                packed_image, np.int32(layout.source_bytes), np.int64(layout.columns_offset),
                np.int64(layout.weights_offset), np.int32(layout.weight_code),
                self.shard_edge_begin, self.shard_edge_end, self.shard_num_vertices,
                self.page_store.shard_column_begin, np.int32(info.first_shard), sources,
                idxoff, weights))

    def decode(self, k: int, compressed_image, slot: int, stream, blocks: tuple) -> None:
        """The ``blocks`` (first, end) of page ``k``'s compressed image (on the
        device) decoded into stream ``slot``'s buffer of decoded edges, their
        edge values copied beside them."""
        pages = self.page_store
        layout, offsets = pages.packed_layouts[k], pages.decode_offsets
        buffer = pages.decode_buffers[slot].data.ptr
        gpu_codec.launch_decode(pages.decode_kernel, compressed_image, pages.stream_words[k],
                                pages.device_in_offsets, self.pages[k],
                                self.shard_first_vertex, self.shard_edge_begin,
                                buffer + offsets["sources"], buffer + offsets["idxoff"],
                                pages.decode_errors, stream, blocks=blocks)
        if layout.weight_bytes:
            size = self.store.weight_dtype.itemsize
            first = blocks[0] * BLOCK_EDGES
            count = min(blocks[1] * BLOCK_EDGES, self.pages[k].num_edges) - first
            if count > 0:
                self.cupy.cuda.runtime.memcpyAsync(
                    buffer + offsets["weights"],
                    compressed_image.data.ptr + layout.weights_offset + first * size,
                    count * size, self.cupy.cuda.runtime.memcpyDeviceToDevice, stream.ptr)

    def pull_compressed(self, k: int, compressed_image, slot: int, stream, aggregates,
                        iteration: int, packed_free=None) -> None:
        """The pull of compressed page ``k``, a group of its shards at a time:
        their blocks decoded into stream ``slot``'s buffer, then the pull of the
        group reading them there; ``packed_free`` recorded once the image is
        read (the last group decoded)."""
        chunks = self.page_store.decode_chunks[k]
        for turn, (first_shard, num_shards, first_block, end_block) in enumerate(chunks):
            self.decode(k, compressed_image, slot, stream, (first_block, end_block))
            if packed_free is not None and turn == len(chunks) - 1:
                stream.record(packed_free)
            self.launch_pull(stream, first_shard, num_shards,
                             self.page_store.decoded_views(slot, first_block),
                             self.page_shared_bytes[k], aggregates, iteration)
        if packed_free is not None and not chunks:
            stream.record(packed_free)

    def pulls_in_place(self, k: int) -> bool:
        """Whether page ``k``, packed, is pulled where it lies (a compressed
        page is decoded first)."""
        return self.pull_packed and k not in self.page_store.compressed_pages

    def launch_page(self, k: int, aggregates, iteration: int, host_values=None,
                    host_active=None, slot: int | None = None) -> PageTiming:
        """Queue page ``k``: its copy (when streamed), its pull kernel, and the copy
        of its updated vertex range to ``host_values``/``host_active`` when given.

        Returns the page's events; ``timing.done`` is recorded after its last
        operation.  Runs after :meth:`begin_iteration` of the same iteration.
        ``slot``: the stream (and its page buffer), default ``k % streams``.
        """
        cupy, pages, state = self.cupy, self.page_store, self.state
        info = self.pages[k]
        slot = k % len(pages.streams) if slot is None else slot
        packed_image = pages.packed_images.get(k)
        reads_buffers = not (k in pages.resident_images
                             or (packed_image is not None and self.pulls_in_place(k)))
        if reads_buffers or not pages.kept_streams:
            stream = pages.streams[slot]
        else:
            stream = pages.kept_streams[self._kept_turn % len(pages.kept_streams)]
            self._kept_turn += 1
        stream.wait_event(self.ready)
        timing = PageTiming(k, slot)
        page_events = self._events["pages"][k]
        packed_free = pages.buffer_events["packed_free"][slot]
        raw_free = pages.buffer_events["raw_free"][slot]
        if pages.streams_packed(k):
            packed_image = pages.device_packed[slot]
        prefetched = pages.prefetched.pop(slot, None) if reads_buffers else None
        if prefetched is not None and prefetched.page == k:
            timing.copy_start, timing.copy_end = prefetched.copy_start, prefetched.copy_end
            timing.bytes_to_device = prefetched.bytes_to_device
            timing.prefetched = True
            prefetched = None
        if prefetched is not None:
            # dropped: its copy may still be filling a buffer this page unpacks into
            stream.wait_event(prefetched.copy_end)
        if not timing.prefetched and pages.copied(k):
            read = pages.queue_copy(k, slot, timing, page_events[0], page_events[1])
            if read is not None:
                pages.copying.append((read, timing.copy_end))
        if timing.copy_end is not None:
            stream.wait_event(timing.copy_end)
        timing.kernel_start = stream.record(page_events[2])
        out = state.next
        if packed_image is not None and self.pulls_in_place(k):
            self.launch_packed_pull(k, packed_image, stream, aggregates, iteration)
            if k in pages.packed_host:
                stream.record(packed_free)
        elif packed_image is not None and k in pages.compressed_pages:
            self.pull_compressed(k, packed_image, slot, stream, aggregates, iteration,
                                 packed_free if pages.streams_packed(k) else None)
        else:
            if packed_image is not None:
                self.unpack(k, packed_image, slot, stream)
                if k in pages.packed_host:
                    stream.record(packed_free)
            if info.num_shards:
                self.launch_pull(stream, info.first_shard, info.num_shards,
                                 pages.views(k, slot), self.page_shared_bytes[k], aggregates,
                                 iteration)
        timing.kernel_end = stream.record(page_events[3])
        if reads_buffers and pages.raw_buffers:
            stream.record(raw_free)
        timing.done = timing.kernel_end
        if host_values is not None and info.end_vertex > info.first_vertex:
            first, end = info.first_vertex, info.end_vertex
            value_size = state.values.dtype.itemsize
            cupy.cuda.runtime.memcpyAsync(
                host_values[first:end].ctypes.data, out[first:end].data.ptr,
                (end - first) * value_size, cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
            cupy.cuda.runtime.memcpyAsync(
                host_active[first:end].ctypes.data, state.active[first:end].data.ptr,
                end - first, cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
            timing.bytes_to_host = (end - first) * (value_size + 1)
            timing.back_end = stream.record(page_events[4])
            timing.done = timing.back_end
        return timing

    # -- the end of an iteration -------------------------------------------------------------
    def shortcuts(self, iteration: int) -> bool:
        """Whether the pull over every shard of ``iteration`` ends with pointer
        jumping over the labels (from ``config.GPU_SHORTCUT_LABELS_AFTER`` on,
        once the engine set :attr:`shortcut`)."""
        return self.shortcut is not None and iteration >= config.GPU_SHORTCUT_LABELS_AFTER

    def join_page_streams(self) -> None:
        """The main stream waits for every page stream's work queued so far."""
        main = self.state.main_stream
        for stream, done in zip(self.page_store.page_streams, self._events["streams"]):
            main.wait_event(stream.record(done))

    def wait_for_launches(self, iteration: int, aggregates, apply_split: bool = True,
                          shortcut: bool = True) -> np.ndarray:
        """Wait for the launched pages, then apply the split vertices (unless not
        ``apply_split``) and shortcut the labels (where the run does, unless
        not ``shortcut``); returns the iteration's statistics, read back."""
        state = self.state
        main = state.main_stream
        n = np.int64(self.num_vertices)
        out = state.next
        self.join_page_streams()
        if apply_split and state.num_split:
            state.launch_vertices(self.kernels.apply_split, (
                state.split_vertices, np.int32(state.num_split), state.values, out,
                state.active, state.split_accum) + state.attrs + (
                    aggregates, n, np.int64(iteration), state.l1_total, state.counters),
                shared_mem=gpu_kernels.TOTALS_SHARED_BYTES)
        if shortcut and self.shortcuts(iteration):
            state.launch_vertices(self.kernels.shortcut_labels, (
                out, self.shortcut[0], np.int32(self.shortcut[1]), state.active,
                state.attrs[0], state.counters, state.statistics[3:4], n),
                shared_mem=gpu_kernels.TOTALS_SHARED_BYTES)
        statistics = state.statistics.get(stream=main)
        main.synchronize()
        self.page_store.end_page_reads()
        return statistics

    def end_iteration(self, record, timings: list, aggregates, apply_split: bool = True,
                      shortcut: bool = True) -> np.ndarray:
        """Wait for the launched pages, apply the split vertices, commit, record
        (see :meth:`garaphpy.scheduler.gpu.engine.GpuEngine.end_iteration`).

        Returns
        -------
        numpy.ndarray of uint64
            ``[activated, activated out-edges]`` counted on the GPU.
        """
        from .. import decisions

        state = self.state
        statistics = self.wait_for_launches(record.iteration, aggregates, apply_split, shortcut)
        if shortcut and self.shortcuts(record.iteration):
            decisions.note(record, "shortcut_labels", "all", dropped=int(statistics[3]))
        counters = statistics[:2]
        l1 = statistics[2:3].view(np.float64)
        state.commit(counters)
        timing = self.measure(timings)
        self.timings.append(timing)
        record.direction = "pull"
        record.l1_change += float(l1[0])
        record.activated = state.active_vertices
        record.updated_vertices = self.num_vertices
        pages = [page for t in timings for page in
                 (self.pages if t.page < 0 else [self.pages[t.page]])]
        edges = sum(page.num_edges for page in pages)
        record.edges_processed += edges
        record.pages += len(pages)
        record.gather_precomputed = self.precompute
        record.gpu_pages = len(pages)
        record.gpu_edges = edges
        record.bytes_to_device += sum(t.bytes_to_device for t in timings)
        record.bytes_to_host += sum(t.bytes_to_host for t in timings)
        record.copy_seconds = timing.copy_seconds
        record.kernel_seconds = timing.kernel_seconds
        record.gpu_busy_seconds = timing.busy_seconds
        return counters

    def measure(self, timings: list[PageTiming]) -> IterationTiming:
        """Copy and kernel busy time: the union of the pages' windows, measured
        from the iteration's origin event (copies of different streams queue on
        one copy engine, so summing their windows would count waiting as work)."""
        elapsed = self.cupy.cuda.get_elapsed_time

        def since_origin(event):
            return elapsed(self._origin, event) / 1e3

        result = IterationTiming(stream_busy=[0.0] * len(self.page_store.streams))
        copies, kernels, backs = [], [], []
        for timing in timings:
            window = (since_origin(timing.kernel_start), since_origin(timing.kernel_end))
            kernels.append(window)
            result.per_page_kernel.append(window[1] - window[0])
            busy = window[1] - window[0]
            if timing.copy_start is not None:
                copies.append((since_origin(timing.copy_start), since_origin(timing.copy_end)))
                busy += copies[-1][1] - copies[-1][0]
            if timing.back_end is not None:
                backs.append((window[1], since_origin(timing.back_end)))
                busy += backs[-1][1] - backs[-1][0]
            result.stream_busy[timing.stream] += busy
        result.copy_seconds = busy_time(copies)
        result.kernel_seconds = busy_time(kernels)
        result.copy_back_seconds = busy_time(backs)
        result.busy_seconds = busy_time(copies + kernels + backs)
        return result

    def probe_pages(self, pages, aggregates, repeats: int = 2) -> float:
        """Seconds the GPU takes for the given pages, as an iteration runs them
        (copies included when streamed, overlapping the kernels), written into
        scratch buffers: the run's state is left as it was.

        The fastest of ``repeats`` runs (the first may load the module).
        """
        cupy, state = self.cupy, self.state
        main = state.main_stream
        saved = state.next, state.active
        with main:      # before begin_iteration's launches on it
            state.next = cupy.empty_like(state.values)
            state.active = cupy.zeros_like(saved[1])
        best = np.inf
        try:
            for _ in range(repeats):
                self.begin_iteration(0)
                timings = [self.launch_page(k, aggregates, 0) for k in pages]
                for timing in timings:
                    timing.done.synchronize()
                self.page_store.end_page_reads()
                span = max(cupy.cuda.get_elapsed_time(self._origin, timing.kernel_end)
                           for timing in timings) / 1e3 if timings else 0.0
                best = min(best, span)
        finally:
            for stream in self.page_store.page_streams:
                stream.synchronize()
            self.page_store.end_page_reads()
            state.next, state.active = saved
            with main:
                state.split_accum.fill(state.split_identity)
                state.statistics.fill(0)
            main.synchronize()
        return float(best)
