"""The host side of a GPU run's compressed pages from disk, without a GPU.

:meth:`PageStore.queue_copy` takes a compressed page the plan ships from the
page source (``from_source``) as stored, from storage or from the host
cache, and copies its stored bytes into a stream's buffer for packed pages.
Here the copies go to a recorder instead of the device, the page source is
a real :class:`~garaphpy.storage.host_pages.HostPages` over a compressed
store on disk, and each copy must carry the page's stored image, the bytes
its compressed layout puts on the wire, and the edge-stream words the
device's decoder needs; a page that comes in the other form is refused.
"""

from __future__ import annotations

import collections
from types import SimpleNamespace

import numpy as np
import pytest

from garaphpy.errors import GaraphError
from garaphpy.kernels import gpu_codec
from garaphpy.scheduler.gpu.page_store import PageStore
from garaphpy.storage import page_codec
from helpers import build_compressed_store, make_pages


class Event:
    done = True

    def synchronize(self):
        pass


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build_compressed_store(tmp_path_factory.mktemp("stored-host"), seed=3)


def recorded_page_store(store, page_source, from_source, reads_weights=True):
    """A PageStore whose copies are recorded as (target, host address, bytes)."""
    copies = []
    runtime = SimpleNamespace(
        memcpyHostToDevice=1,
        memcpyAsync=lambda target, source, nbytes, kind, stream: copies.append(
            (target, source, nbytes)))
    pages = PageStore.__new__(PageStore)
    pages.cupy = SimpleNamespace(cuda=SimpleNamespace(runtime=runtime))
    pages.store, pages.pages, pages.page_source = store, store.pages, page_source
    pages.plan = SimpleNamespace(resident=False)
    weight_size = store.weight_dtype.itemsize
    pages.packed_layouts = {info.index: gpu_codec.compressed_layout(info, weight_size,
                                                                    reads_weights)
                            for info in store.pages}
    pages.compressed_pages = frozenset(pages.packed_layouts)
    pages.from_source = set(from_source)
    pages.packed_host, pages.resident_images, pages.stream_words = {}, {}, {}
    pages.device_packed = [SimpleNamespace(data=SimpleNamespace(ptr=("packed", s)))
                           for s in range(2)]
    pages.device_pages = [SimpleNamespace(data=SimpleNamespace(ptr=("raw", s)))
                          for s in range(2)]
    pages.page_wire_bytes = [info.nbytes for info in store.pages]
    pages.buffer_events = {"packed_free": [Event(), Event()], "raw_free": [Event(), Event()]}
    pages.copy_stream = SimpleNamespace(ptr="copy", wait_event=lambda event: None,
                                        record=lambda event: event)
    pages.copying = collections.deque()
    return pages, copies


def test_pages_from_the_source_are_copied_as_stored(store):
    paged = make_pages(store, cached=2)
    try:
        paged.take_stored("gpu")
        order = list(range(len(store.pages)))
        pages, copies = recorded_page_store(store, paged, order)
        pages.open_iteration(order)
        held = []
        for turn in range(2):           # the second walk takes the cache's pages from memory
            for k in order:
                slot = k % 2
                timing = SimpleNamespace()
                read = pages.queue_copy(k, slot, timing, Event(), Event())
                target, source, nbytes = copies[-1]
                stored = store.read_stored(k)
                layout = pages.packed_layouts[k]
                assert target == ("packed", slot) and nbytes == layout.nbytes
                assert timing.bytes_to_device == nbytes < store.pages[k].nbytes
                np.testing.assert_array_equal(timing.host_image, stored)
                assert source == timing.host_image.ctypes.data
                assert pages.stream_words[k] == page_codec.stream_words(
                    stored, store.pages[k].num_edges)
                assert (read is None) == paged.is_cached(k)
                if read is not None:
                    pages.copying.append((read, Event()))
                    held.append(k)
            pages.end_page_reads()
            pages.open_iteration(order)
        assert held and all(not paged.is_cached(k) for k in held)
    finally:
        paged.close()


def test_a_page_in_the_other_form_is_refused(store):
    paged = make_pages(store, cached=2)
    try:
        # the plan copies every page plain, but the source gives them as stored
        paged.take_stored("gpu")
        pages, _ = recorded_page_store(store, paged, from_source=())
        pages.cursor = paged.cursor([5], "gpu", release="manual")
        with pytest.raises(GaraphError, match="page 5 came from the page source as stored"):
            pages.host_image(5)
    finally:
        paged.close()
    plain = make_pages(store, cached=2)
    try:
        pages, _ = recorded_page_store(store, plain, from_source=[0])
        with pytest.raises(GaraphError, match="page 0 came from the page source decoded"):
            pages.host_image(0)
    finally:
        plain.close()


def test_a_kept_page_released_streams_from_the_source_as_stored(store):
    """A compressed page kept on the device and released when the selective
    arrays are made streams from then on: from the page source, as stored,
    when the host held no copy of its own."""
    paged = make_pages(store, cached=2)
    try:
        paged.take_stored("gpu")
        count = len(store.pages)
        released_page, host_copy = count - 1, count - 2
        pages, copies = recorded_page_store(store, paged, from_source=range(count - 2))
        pages.packed_images = {k: SimpleNamespace(nbytes=1000) for k in (released_page,
                                                                         host_copy)}
        stored = store.read_stored(host_copy)
        pages.release_host = {host_copy: stored}
        pages.release_pages = np.zeros(count, bool)
        pages.release_pages[[released_page, host_copy]] = True
        pages.kept_pages, pages.packed_kept = pages.release_pages.copy(), pages.release_pages.copy()
        pages.released_bytes = 0
        assert pages.release() == ([host_copy, released_page], 2000)
        assert released_page in pages.from_source and host_copy not in pages.from_source
        assert pages.packed_host == {host_copy: stored} and pages.streams_packed(host_copy)
        pages.open_iteration([released_page])
        read = pages.queue_copy(released_page, 0, SimpleNamespace(), Event(), Event())
        assert read is not None and read.stored
        np.testing.assert_array_equal(read.image, store.read_stored(released_page))
        assert copies[-1][2] == pages.packed_layouts[released_page].nbytes
        pages.cursor.release(read)
        pages.end_page_reads()
    finally:
        paged.close()
