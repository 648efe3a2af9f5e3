"""The order of a streamed iteration's copies and pulls, without a GPU.

:meth:`Launches.launch_page` and :meth:`PageStore.prefetch_next_copies`
queue copies, unpacks and pulls on CUDA streams and order them with events.
Here they queue on model streams instead: each a FIFO of operations, an
event wait holding its stream until the record it was queued after has run
(CUDA's rule), a copy or kernel taking two steps (its start and its end) so
that other streams' operations can run in between.  A seeded scheduler runs
the heads of the streams in random order.  Each pull must find its own page
in every buffer it reads from its start to its end, and no copy or unpack
may write a buffer a kernel is reading.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from garaphpy.scheduler.gpu.launches import Launches
from garaphpy.scheduler.gpu.page_store import PageStore, interleave, stream_slots


class Event:
    def __init__(self):
        self.queued = 0         # records queued so far
        self.done = 0           # records run so far


class Stream:
    def __init__(self, name, model):
        self.name, self.model, self.ops = name, model, []
        self.ptr = name

    def wait_event(self, event):
        if event.queued:
            self.ops.append(("wait", event, event.queued))

    def record(self, event):
        event.queued += 1
        self.ops.append(("record", event, event.queued))
        return event


class Model:
    """Buffers (name -> the page they hold, ``"?"`` while written) and the
    kernels reading them."""

    def __init__(self, rng):
        self.rng = rng
        self.buffers = {}
        self.readers = {}       # buffer -> number of kernels reading it now
        self.checked_reads = 0

    def ready(self, stream):
        op = stream.ops[0]
        return op[0] != "wait" or op[1].done >= op[2]

    def step(self, stream):
        op = stream.ops.pop(0)
        kind = op[0]
        if kind == "record":
            op[1].done = max(op[1].done, op[2])
        elif kind == "start":
            _, reads, writes = op
            for buffer, page in reads:
                assert self.buffers.get(buffer) == page, (
                    f"{stream.name}: reads {buffer} for page {page}, "
                    f"it holds {self.buffers.get(buffer)}")
                self.readers[buffer] = self.readers.get(buffer, 0) + 1
            for buffer, _ in writes:
                assert not self.readers.get(buffer), f"{stream.name}: writes {buffer} while read"
                self.buffers[buffer] = "?"
        elif kind == "end":
            _, reads, writes = op
            for buffer, page in reads:
                assert self.buffers.get(buffer) == page, (
                    f"{stream.name}: {buffer} changed under the read of page {page}")
                self.readers[buffer] -= 1
                self.checked_reads += 1
            for buffer, page in writes:
                self.buffers[buffer] = page

    def run(self, streams, until_empty):
        """Run ready heads in random order until every stream of
        ``until_empty`` is empty (the others run only while that is pending)."""
        while any(s.ops for s in until_empty):
            ready = [s for s in streams if s.ops and self.ready(s)]
            assert ready, "deadlock: every pending stream waits"
            self.step(ready[self.rng.integers(len(ready))])


def operation(stream, reads=(), writes=()):
    stream.ops.append(("start", tuple(reads), tuple(writes)))
    stream.ops.append(("end", tuple(reads), tuple(writes)))


def modelled_engine(model, num_pages, kept, packed_host, pull_packed, streams, kept_streams,
                    from_source=()):
    """The launches over a page store whose streams, events, copies and kernels
    are the model's; the pages ``from_source`` compressed, from the page
    source as stored."""
    cupy = SimpleNamespace(cuda=SimpleNamespace(
        Event=Event, runtime=SimpleNamespace(memcpyHostToDevice=1, memcpyAsync=None)))
    all_streams = {}

    def make(name):
        all_streams[name] = Stream(name, model)
        return all_streams[name]

    def memcpy(target, source, nbytes, kind, stream_name):
        operation(all_streams[stream_name], writes=[(target, source)])

    cupy.cuda.runtime.memcpyAsync = memcpy
    pages = PageStore.__new__(PageStore)
    pages.cupy = cupy
    pages.streams = [make(f"stream{s}") for s in range(streams)]
    pages.kept_streams = [make(f"kept{s}") for s in range(kept_streams)]
    pages.page_streams = pages.streams + pages.kept_streams
    pages.copy_stream = make("copy")
    pages.plan = SimpleNamespace(resident=False)
    pages.raw_buffers = True
    pages.page_wire_bytes = [100] * num_pages
    pages.compressed_pages = frozenset(from_source)
    pages.from_source = set(from_source)
    pages.packed_layouts = {k: SimpleNamespace(nbytes=100) for k in from_source}
    pages.stream_words = {k: 1 for k in from_source}
    # kept pages: every other one packed on the device, the others raw
    pages.packed_images = {k: SimpleNamespace(data=SimpleNamespace(ptr=("own", k)))
                           for k in kept[::2]}
    pages.resident_images = {k: None for k in kept[1::2]}
    pages.packed_host = {k: SimpleNamespace(ctypes=SimpleNamespace(data=k), nbytes=100)
                         for k in packed_host}
    pages.device_packed = [SimpleNamespace(data=SimpleNamespace(ptr=("packed", s)))
                           for s in range(streams)]
    pages.device_pages = [SimpleNamespace(data=SimpleNamespace(ptr=("raw", s)))
                          for s in range(streams)]
    pages.page_source = SimpleNamespace(is_cached=lambda k: True)
    pages.host_image = lambda k: (SimpleNamespace(ctypes=SimpleNamespace(data=k)), None)
    pages.pages = [SimpleNamespace(num_edges=1) for _ in range(num_pages)]
    pages.copying = []
    pages.prefetched = {}
    pages.buffer_events = {"packed_free": [Event() for _ in range(streams)],
                           "raw_free": [Event() for _ in range(streams)]}

    def views(k, slot):
        return ("own", k) if k in pages.resident_images else ("raw", slot)

    pages.views = views
    engine = Launches.__new__(Launches)
    engine.cupy = cupy
    engine.page_store = pages
    engine.all_streams = all_streams
    engine.state = SimpleNamespace(next=None, main_stream=make("main"))
    engine.pull_packed = pull_packed
    engine.pages = [SimpleNamespace(num_shards=1, first_shard=k, first_vertex=k,
                                    end_vertex=k + 1) for k in range(num_pages)]
    engine.page_shared_bytes = [0] * num_pages
    engine._kept_turn = 0
    engine._events = {"pages": [[Event() for _ in range(5)] for _ in range(num_pages)]}

    def pull(stream, first_shard, num_shards, edges, *rest):
        operation(stream, reads=[(edges, first_shard)])

    def packed_pull(k, image, stream, *rest):
        operation(stream, reads=[(image.data.ptr, k)])

    def unpack(k, image, slot, stream):
        operation(stream, reads=[(image.data.ptr, k)], writes=[(("raw", slot), k)])

    def pull_compressed(k, image, slot, stream, aggregates, iteration, free):
        operation(stream, reads=[(image.data.ptr, k)])
        if free is not None:
            stream.record(free)

    engine.launch_pull = pull
    engine.pull_compressed = pull_compressed
    engine.launch_packed_pull = packed_pull
    engine.unpack = unpack
    for k in pages.packed_images:     # the kept images hold their pages from set-up
        model.buffers[("own", k)] = k
    for k in pages.resident_images:
        model.buffers[("own", k)] = k
    return engine


def run_iterations(model, engine, iterations, prefetch, hybrid_every=0):
    """Iterations as :meth:`GpuEngine.iterate` launches them (every
    ``hybrid_every``-th as a hybrid iteration launches a subset, each page in
    buffer ``k % streams``); each ends once the page streams are done."""
    n = len(engine.pages)
    pages, main = engine.page_store, engine.state.main_stream
    kept = np.zeros(n, bool)
    kept[list(pages.resident_images) + list(pages.packed_images)] = True
    order = interleave(np.flatnonzero(~kept).tolist(), np.flatnonzero(kept).tolist())
    slots = stream_slots(order, kept, len(pages.streams))
    every = list(engine.all_streams.values())
    for iteration in range(iterations):
        engine.ready = main.record(Event())
        if hybrid_every and iteration % hybrid_every == hybrid_every - 1:
            subset = [k for k in order if model.rng.random() < 0.6]
            for k in subset:
                engine.launch_page(k, None, iteration)
        else:
            for k, slot in zip(order, slots):
                engine.launch_page(k, None, iteration, slot=slot)
            if prefetch:
                pages.prefetch_next_copies(order, slots)
        model.run(every, until_empty=pages.page_streams + [main])
    model.run(every, until_empty=every)


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("pull_packed", [True, False])
@pytest.mark.parametrize("prefetch", [True, False])
def test_every_pull_reads_its_own_page_whatever_the_streams_order(seed, pull_packed, prefetch):
    rng = np.random.default_rng(seed)
    num_pages = int(rng.integers(4, 14))
    kept = sorted(rng.choice(num_pages, int(rng.integers(0, num_pages // 2)), replace=False)
                  .tolist())
    copied = [k for k in range(num_pages) if k not in kept]
    packed_host = [k for k in copied if rng.random() < 0.5]
    from_source = [k for k in copied if k not in packed_host and rng.random() < 0.5]
    model = Model(rng)
    engine = modelled_engine(model, num_pages, kept, packed_host, pull_packed,
                             streams=int(rng.integers(1, 5)),
                             kept_streams=int(rng.integers(0, 3)), from_source=from_source)
    hybrid_every = 3 if seed % 2 else 0
    run_iterations(model, engine, iterations=6, prefetch=prefetch, hybrid_every=hybrid_every)
    whole_iterations = 4 if hybrid_every else 6
    assert model.checked_reads >= whole_iterations * len(copied)


def test_the_model_finds_a_copy_that_does_not_wait_for_its_buffer():
    """A copy queued without waiting for the last pull of its buffer is caught."""
    rng = np.random.default_rng(0)
    model = Model(rng)
    engine = modelled_engine(model, 6, [], packed_host=list(range(6)), pull_packed=True,
                             streams=2, kept_streams=0)
    stream = Stream("unordered", model)
    engine.all_streams["unordered"] = stream
    caught = 0
    for _ in range(20):
        model.buffers.clear()
        model.readers.clear()
        for s in engine.all_streams.values():
            s.ops.clear()
        engine.ready = engine.state.main_stream.record(Event())
        engine.launch_page(0, None, 0, slot=0)
        operation(stream, writes=[(("packed", 0), 5)])     # a copy into page 0's buffer
        try:
            model.run(list(engine.all_streams.values()),
                      until_empty=list(engine.all_streams.values()))
        except AssertionError:
            caught += 1
    assert caught > 0


@pytest.mark.parametrize("seed", range(20))
def test_a_page_unpacked_where_a_dropped_queued_copy_lands_waits_for_it(seed):
    """A kept packed page unpacked into the buffer that a queued copy of
    another page is still filling (the copy dropped) waits for that copy: a
    hybrid iteration's subset, or rounds over the kept pages, may launch it
    there first."""
    model = Model(np.random.default_rng(seed))
    engine = modelled_engine(model, 2, kept=[1], packed_host=[], pull_packed=False,
                             streams=1, kept_streams=0)
    engine.ready = engine.state.main_stream.record(Event())
    pages = engine.page_store
    pages.prefetch_next_copies([0], [0])      # page 0's copy into stream 0's raw buffer
    assert pages.prefetched[0].page == 0
    engine.launch_page(1, None, 1, slot=0)
    every = list(engine.all_streams.values())
    model.run(every, until_empty=every)
    assert model.checked_reads == 2      # the unpack's read of the packed image, and the pull
    assert not pages.prefetched


@pytest.mark.parametrize("readers", [1, 3])
def test_pages_reach_the_device_whole_in_order_from_reader_threads(tmp_path, monkeypatch,
                                                                   readers):
    """Set-up copies of resident pages: each read on a reader thread into a
    pinned buffer of its own, handed over in page order, its buffer read into
    again only after the copies queued from it are done; a damaged block is
    still found."""
    import garaphpy
    from garaphpy import config
    from garaphpy.errors import StoreCorruptError

    graph = garaphpy.Graph.load("rmat:10", store=tmp_path / "store", progress=False,
                                max_shard_edges=256, max_page_bytes=4096, compress=False)
    store = graph.store
    assert len(store.pages) > 2 * readers
    monkeypatch.setattr(config, "DEVICE_UPLOAD_READERS", readers)
    synchronized = []
    fake_cupy = SimpleNamespace(cuda=SimpleNamespace(get_current_stream=lambda: SimpleNamespace(
        synchronize=lambda: synchronized.append(len(placed)))))
    pages = SimpleNamespace(store=store, pages=store.pages, cupy=fake_cupy,
                            pinned_array=lambda count, dtype: np.full(count, 255, dtype))
    placed, buffers = [], set()

    def place(k, image):
        assert len(synchronized) == len(placed)     # the last buffer's copies are done
        buffers.add(image.base.ctypes.data if image.base is not None else image.ctypes.data)
        placed.append((k, image.copy()))

    wanted = list(range(1, len(store.pages), 2))
    PageStore._copy_pages_to_device(pages, wanted, place)
    assert [k for k, _ in placed] == wanted
    for k, image in placed:
        np.testing.assert_array_equal(image, store.read_page(k).image)
    assert len(buffers) <= readers

    block = store.blocks[store.pages[wanted[-1]].first_block]
    with open(store.path / "blocks.dat", "r+b") as data:
        data.seek(int(block["offset"]))
        byte = data.read(1)
        data.seek(int(block["offset"]))
        data.write(bytes([byte[0] ^ 0xFF]))
    placed.clear(), synchronized.clear()
    with pytest.raises(StoreCorruptError, match="checksum"):
        PageStore._copy_pages_to_device(pages, wanted, place)
