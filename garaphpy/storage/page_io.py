"""Streaming page images from the storage directories (Garaph section 2.2).

Garaph cuts every page into equal data blocks spread over several storage
devices by a hash, so that a page is read from all of them at once (section
2.2, "To exploit I/O parallelism").  :class:`PageReader` is that reader:
``config.READS_IN_FLIGHT_PER_DIRECTORY`` threads per storage directory work
through the blocks that directory holds, each with one read in flight (one
read at a time leaves a device idle between a read's end and the next
request), in the order the consumer asks for pages, and the consumer
receives whole page images in that order, read ahead of it.

Buffers.  Page images land in a pool of buffers, each large enough for the
largest page (rounded up to ``config.BLOCK_ALIGNMENT``).  At most
``readahead_bytes // buffer_bytes`` buffers exist, so never more than
``readahead_bytes`` of page images are outstanding (read ahead, or held by
the consumer).  Buffers come from an ``allocator`` callback (numpy arrays;
the GPU engine can hand out pinned memory) and are recycled: in the default
``release="auto"`` mode a page's buffer returns to the pool when the
consumer asks for the next page; with ``release="manual"`` when it calls
:meth:`PageReader.release` (for instance once an asynchronous copy from the
buffer has finished).

Page cache.  Pages on secondary storage are read once per iteration; going
through the page cache would only push out memory the run needs.  Block files
are opened with ``O_DIRECT`` (blocks start at ``config.BLOCK_ALIGNMENT``
offsets and are padded to it on disk, buffers are aligned).  Where the file
system refuses ``O_DIRECT`` (tmpfs says EINVAL) the reader falls back to
ordinary reads followed by ``posix_fadvise(POSIX_FADV_DONTNEED)``.

Compressed pages.  The blocks of a page stored compressed
(:mod:`garaphpy.storage.page_codec`) are read into a staging buffer, checked
there (the CRC-32 covers the bytes on disk), and decoded into the page
buffer.  Who decodes is the reader's ``decode``: ``"threads"`` (one of
``config.PAGE_DECODERS_PER_READER`` decoder threads, a page each, while the
reader and checker threads go on: a consumer that leaves the cores idle,
the GPU's) or ``"consumer"`` (the consumer's own thread when it reaches the
page, the page's blocks in parallel on numba's threads: a CPU kernel that
runs on every core, whose parallel sections background decoders would
preempt, each stalled section waiting for its slowest thread).  Either way
the consumer receives the plain image; the reads run ahead of it.  With
``"stored"`` nobody decodes: the blocks land in the page buffer and the
consumer receives the image as stored (``Page.stored``), checked, for a
decoder of its own (the GPU's, which then moves a third of the bytes over
the bus).

Checksums.  With ``check`` each block's CRC-32 is verified by a second
thread of its directory while the reader goes on to the next block, so that
checking does not leave the device idle between reads (zlib's CRC-32 runs
at a few GB/s per core, no faster than an NVMe drive reads).

Errors.  A missing storage directory or block file is a
:class:`~garaphpy.errors.StoreError` naming the path when the reader is
made; a short read or a checksum mismatch is a
:class:`~garaphpy.errors.StoreCorruptError` naming the file and the offset.
An exception in a reader thread is raised in the consumer when it reaches
the page concerned; the threads keep serving.
"""

from __future__ import annotations

import contextlib
import errno
import os
import queue
import threading
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from .. import config
from .._numba_setup import parallel_section
from ..errors import ConfigError, StoreCorruptError, StoreError
from .layout import align
from .store import Page, PageInfo, Store

__all__ = ["PageReader", "aligned_empty", "open_for_streaming", "drop_from_page_cache"]

#: Who decodes a compressed page (see the module docstring).
DECODERS = ("threads", "consumer", "stored")

#: Seconds between two checks that the reader threads are alive while the
#: consumer waits for a page.
_POLL_SECONDS = 0.1

_O_DIRECT = getattr(os, "O_DIRECT", 0)


def aligned_empty(nbytes: int, alignment: int | None = None) -> np.ndarray:
    """An uninitialised uint8 array of ``nbytes`` starting at a multiple of ``alignment``.

    The default allocator of :class:`PageReader` (``O_DIRECT`` needs aligned
    memory).
    """
    if alignment is None:
        alignment = config.BLOCK_ALIGNMENT
    raw = np.empty(nbytes + alignment, np.uint8)
    start = (-raw.ctypes.data) % alignment
    return raw[start:start + nbytes]


def buffer_bytes(nbytes: int) -> int:
    """A page buffer for ``nbytes`` of page image: rounded up to
    ``config.BLOCK_ALIGNMENT`` (``O_DIRECT`` reads whole aligned blocks), at
    least one alignment."""
    return max(align(nbytes, config.BLOCK_ALIGNMENT), config.BLOCK_ALIGNMENT)


def page_buffer_bytes(store: Store) -> int:
    """The buffer that holds any page of ``store`` (:func:`buffer_bytes` of the largest)."""
    return buffer_bytes(max((info.nbytes for info in store.pages), default=0))


def staging_buffer_bytes(store: Store) -> int:
    """The staging buffer a compressed page of ``store`` is read into before it
    is decoded (:func:`buffer_bytes` of the largest stored image); 0 for a
    store without compressed pages."""
    stored = [info.stored_nbytes for info in store.pages if info.compressed]
    return buffer_bytes(max(stored)) if stored else 0


def open_for_streaming(path, direct: bool | None = None) -> tuple[int, bool]:
    """Open ``path`` read-only, with ``O_DIRECT`` where possible.

    Parameters
    ----------
    path : str or os.PathLike
    direct : bool or None
        None: ``O_DIRECT`` if the file system accepts it.  True: it must.
        False: never.

    Returns
    -------
    (int, bool)
        The file descriptor and whether it bypasses the page cache.

    Raises
    ------
    OSError
        From ``os.open``; EINVAL when ``direct=True`` and the file system
        refuses ``O_DIRECT``.
    """
    if direct is not False and _O_DIRECT:
        try:
            return os.open(path, os.O_RDONLY | _O_DIRECT), True
        except OSError as error:
            if error.errno != errno.EINVAL or direct:
                raise
    elif direct:
        raise OSError(errno.EINVAL, "O_DIRECT is not available on this platform", str(path))
    return os.open(path, os.O_RDONLY), False


def drop_from_page_cache(path) -> None:
    """Write back and evict ``path``'s pages from the page cache (best effort).

    Used before timing reads that may not be ``O_DIRECT``.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _is_aligned(array: np.ndarray, alignment: int) -> bool:
    return array.ctypes.data % alignment == 0


class _BlockFile:
    """The block file of one storage directory, open for positional reads.

    Thread-safe: reads are ``preadv`` at explicit offsets; the switch from
    ``O_DIRECT`` to buffered reads (a file system that accepts ``O_DIRECT``
    at open but refuses the reads) happens once, under a lock.
    """

    def __init__(self, path: Path, direct: bool | None):
        self.path = path
        self.forced = direct is True
        self._lock = threading.Lock()
        self._old_fds: list[int] = []
        try:
            self.fd, self.direct = open_for_streaming(path, direct)
        except OSError as error:
            if error.errno == errno.EINVAL and direct:
                raise StoreError(f"{path}: the file system refuses O_DIRECT reads "
                                 "(direct=True)") from None
            raise StoreError(f"{path}: cannot open block file ({error.strerror})") from None

    def _fall_back(self, fd: int) -> None:
        with self._lock:
            if self.fd == fd and self.direct:
                self._old_fds.append(self.fd)
                self.fd = os.open(self.path, os.O_RDONLY)
                self.direct = False

    def read_into(self, buffer: np.ndarray, start: int, nbytes: int, offset: int,
                  bounce: Callable[[], np.ndarray]) -> int:
        """Read ``nbytes`` at file ``offset`` into ``buffer[start:start + nbytes]``.

        Returns the number of bytes read (less than ``nbytes`` at the end of
        the file).  ``bounce`` gives an aligned scratch buffer of at least one
        padded block, used with ``O_DIRECT`` when the destination is not
        aligned or too short for the padded length.
        """
        alignment = config.BLOCK_ALIGNMENT
        fd, direct = self.fd, self.direct
        try:
            if direct:
                padded = align(nbytes, alignment)
                target = buffer[start:start + padded]
                staged = target.size < padded or not _is_aligned(target, alignment)
                if staged:
                    target = bounce()[:padded]
                try:
                    got = os.preadv(fd, [target], offset)
                except OSError as error:
                    if error.errno != errno.EINVAL or self.forced:
                        raise
                    self._fall_back(fd)
                    return self.read_into(buffer, start, nbytes, offset, bounce)
                got = min(got, nbytes)
                if staged:
                    buffer[start:start + got] = target[:got]
                return got
            view = memoryview(buffer[start:start + nbytes])
            got = 0
            while got < nbytes:
                count = os.preadv(fd, [view[got:]], offset + got)
                if count == 0:
                    break
                got += count
            os.posix_fadvise(fd, offset, nbytes, os.POSIX_FADV_DONTNEED)
            return got
        except OSError as error:
            raise StoreError(f"{self.path}: read of {nbytes} bytes at offset {offset} failed "
                             f"({error.strerror or error})") from error

    def close(self) -> None:
        for fd in [self.fd] + self._old_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._old_fds = []


class _PageRead:
    """One page being read: its buffer and the count of blocks still to come."""

    __slots__ = ("info", "buffer", "target", "finish", "pending", "error", "done",
                 "cancelled", "released", "pooled", "counted", "lock", "bytes_done", "staged")

    def __init__(self, info: PageInfo, buffer: np.ndarray, pooled: bool,
                 target: np.ndarray | None = None,
                 finish: Callable[["_PageRead"], None] | None = None):
        self.info = info
        self.buffer = buffer
        #: where the blocks land: ``buffer``, or the staging buffer of a compressed page
        self.target = buffer if target is None else target
        #: the staging buffer ``target`` is still this read's (not decoded yet)
        self.staged = target is not None
        #: called (it must not raise) instead of marking the read done, by the
        #: thread that completes the last block; it marks it done itself
        self.finish = finish
        self.pending = info.num_blocks
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.cancelled = False
        self.released = False
        #: ``buffer`` is the pool's (else the caller's: a read on its own, or a
        #: page a stream reads into a buffer its caller keeps)
        self.pooled = pooled
        #: the read holds one of the read-ahead's places until handed over
        #: (every pooled read; a kept page of a stream too)
        self.counted = pooled
        self.lock = threading.Lock()
        #: bytes of its blocks read from disk so far (a cancelled read stops short)
        self.bytes_done = 0
        if self.pending == 0:
            self.done.set()

    def fail(self, error: BaseException) -> None:
        with self.lock:
            if self.error is None:
                self.error = error

    def block_done(self) -> None:
        with self.lock:
            self.pending -= 1
            last = self.pending == 0
        if last:
            if self.finish is not None:
                self.finish(self)
            else:
                self.done.set()


class _StreamState:
    """The pages of one :meth:`PageReader.stream`: those not yet handed to
    the reader threads, and those handed over but not yet given to the
    consumer (in order)."""

    def __init__(self, order: list[int],
                 keep: Callable[[int], np.ndarray | None] | None = None):
        self.order = order
        #: ``keep(index)``: a buffer of the caller's for page ``index`` (one it
        #: keeps), or None: a pool buffer (see :meth:`PageReader.stream`)
        self.keep = keep
        self.next = 0
        self.queued: deque[_PageRead] = deque()

    def cancel_queued(self) -> list[_PageRead]:
        """Stop the stream: its queued reads, marked cancelled (the caller
        gives their buffers back), and no page handed to the threads after."""
        cancelled = list(self.queued)
        self.queued.clear()
        self.next = len(self.order)
        for read in cancelled:
            read.cancelled = True
        return cancelled


class _Decoder:
    """The staging buffers of a reader's compressed pages and who decodes
    them (``decode``, see :class:`PageReader`): decoder threads as each
    page's blocks are read and checked, or the consumer when it takes it."""

    def __init__(self, store: Store, decode: str, staging_bytes: int):
        self.store = store
        self.decode = decode
        self.staging_bytes = staging_bytes
        self.staging: list[np.ndarray] = []
        self._lock = threading.Lock()
        self._threads: ThreadPoolExecutor | None = None

    def new_read(self, info: PageInfo, buffer: np.ndarray, pooled: bool) -> _PageRead:
        """A read of compressed page ``info``: its blocks into a staging
        buffer, decoded into ``buffer``."""
        with self._lock:
            staging = self.staging.pop() if self.staging else aligned_empty(self.staging_bytes)
        finish = self._hand_to_thread if self.decode == "threads" else None
        return _PageRead(info, buffer, pooled, target=staging, finish=finish)

    def _hand_to_thread(self, read: _PageRead) -> None:
        """A compressed page whose blocks are all read (and checked): decode it in
        a decoder thread, so that the reader and checker threads go on."""
        with self._lock:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(
                    config.PAGE_DECODERS_PER_READER, thread_name_prefix="garaphpy-page-decoder")
        try:
            self._threads.submit(self._decode_in_thread, read)
        except RuntimeError:    # the reader closes: nobody waits for the page
            read.cancelled = True
            self._decode_in_thread(read)

    def _decode_in_thread(self, read: _PageRead) -> None:
        """Decode a compressed page read into its staging buffer (in a decoder
        thread, serially) and mark the read done."""
        self._decode(read, parallel=False)
        read.done.set()

    def decode_here(self, read: _PageRead) -> None:
        """Decode a compressed page read and checked, not decoded yet
        (``decode="consumer"``), in the calling thread, its blocks in
        parallel; a failure is the read's.  Nothing for any other read."""
        if read.staged:
            self._decode(read, parallel=True)

    def _decode(self, read: _PageRead, parallel: bool) -> None:
        """Decode ``read``'s staging buffer into its page buffer unless the read
        failed or nobody waits for it (a failure becomes the read's), and give
        the staging buffer back."""
        try:
            if not read.cancelled and read.error is None:
                with parallel_section() if parallel else contextlib.nullcontext():
                    self.store.decode_page(read.info, read.target[:read.info.stored_nbytes],
                                           read.buffer, parallel=parallel)
        except BaseException as error:  # handed to the consumer
            read.fail(error)
        finally:
            self.unstage(read)

    def unstage(self, read: _PageRead) -> None:
        """Give back the staging buffer of ``read`` (once; nothing for a plain page)."""
        with self._lock:
            if read.staged:
                read.staged = False
                self.staging.append(read.target)

    def shutdown(self) -> None:
        """Stop the decoder threads (after the pages under way)."""
        if self._threads is not None:
            self._threads.shutdown()


class PageReader:
    """Stream page images of a store, reader threads per storage directory.

    Parameters
    ----------
    store : garaphpy.storage.store.Store
        An open store.
    readahead_bytes : int, optional
        Page buffers outstanding at most, in bytes (pages read ahead plus the
        pages the consumer holds).  At least one buffer (the largest page
        rounded up to ``config.BLOCK_ALIGNMENT``: :attr:`buffer_bytes`).
        Default ``config.PAGE_READAHEAD_BYTES``, raised to one buffer when
        the store's pages are larger.
    allocator : callable, optional
        ``allocator(nbytes) -> numpy.ndarray``: a new writable, contiguous,
        one-dimensional uint8 array of at least ``nbytes`` bytes (pinned
        memory for the GPU, for instance).  Called at most
        ``readahead_bytes // buffer_bytes`` times; buffers are reused.
        Aligned buffers are read into directly with ``O_DIRECT``, others
        through a per-thread staging buffer.  Default :func:`aligned_empty`.
    direct : bool or None
        None (default): ``O_DIRECT`` where the file system accepts it, else
        buffered reads that evict what they read from the page cache.  True:
        ``O_DIRECT`` or an error.  False: buffered reads.
    check : bool
        Verify each block's CRC-32 as it is read (in a checker thread per
        directory).
    decode : {"threads", "consumer", "stored"}
        Who decodes compressed pages: decoder threads of the reader, ahead
        of the consumer (default), the consumer's thread when it takes
        the page, its blocks in parallel on numba's threads (a CPU kernel
        on every core), or nobody: the consumer receives the image as
        stored (:attr:`~garaphpy.storage.store.Page.stored`).

    Attributes
    ----------
    buffer_bytes : int
        Size of one page buffer.
    max_buffers : int
        Buffers the pool holds at most.
    direct_io : list of bool
        Per storage directory, whether its reads bypass the page cache.
    bytes_read : int
        Page bytes read so far (all directories).
    peak_outstanding_bytes : int
        Most buffer bytes ever outstanding at once.

    Raises
    ------
    garaphpy.errors.StoreError
        A storage directory or block file is missing or cannot be opened.
    garaphpy.errors.StoreCorruptError
        A block file is shorter than its blocks need.
    garaphpy.errors.ConfigError
        ``readahead_bytes`` is smaller than one page buffer.

    Notes
    -----
    Use it as a context manager (or call :meth:`close`): that stops the
    threads and closes the files.  One stream runs at a time.

    Examples
    --------
    >>> with PageReader(store) as reader:                    # doctest: +SKIP
    ...     for index, page in reader.stream():
    ...         process(page.sources, page.idxoff, page.weights)
    """

    def __init__(self, store: Store, *, readahead_bytes: int | None = None,
                 allocator: Callable[[int], np.ndarray] | None = None,
                 direct: bool | None = None, check: bool = True, decode: str = "threads"):
        if direct not in (None, True, False):
            raise ConfigError(f"direct={direct!r}: expected None, True or False")
        if decode not in DECODERS:
            raise ConfigError(f"decode={decode!r}: expected one of {', '.join(DECODERS)}")
        self.decode = decode
        self.store = store
        self.check = bool(check)
        self.block_bytes = int(store.manifest["layout"]["block_bytes"])
        self.buffer_bytes = page_buffer_bytes(store)
        if decode == "stored":
            # a compressed page's stored image lands in the page buffer itself: the
            # same read-ahead bytes hold more pages
            plain = [info.nbytes for info in store.pages if not info.compressed]
            self.buffer_bytes = max(buffer_bytes(max(plain, default=0)),
                                    staging_buffer_bytes(store))
        if readahead_bytes is None:
            readahead_bytes = max(config.PAGE_READAHEAD_BYTES, self.buffer_bytes)
        elif isinstance(readahead_bytes, bool) or not isinstance(readahead_bytes,
                                                                  (int, np.integer)):
            raise ConfigError(f"readahead_bytes={readahead_bytes!r}: expected a number of bytes")
        elif readahead_bytes < self.buffer_bytes:
            raise ConfigError(
                f"readahead_bytes={readahead_bytes}: smaller than one page buffer "
                f"({self.buffer_bytes} bytes: the largest page of {store.path}, rounded up to "
                f"{config.BLOCK_ALIGNMENT})")
        self.readahead_bytes = int(readahead_bytes)
        self.max_buffers = self.readahead_bytes // self.buffer_bytes
        self._allocator = allocator if allocator is not None else aligned_empty

        self._files: list[_BlockFile] = []
        try:
            self._open_files(direct)
        except BaseException:
            for file in self._files:
                file.close()
            raise
        self._lock = threading.Lock()
        #: staging buffers of compressed pages (read into, then decoded from)
        self.staging_bytes = staging_buffer_bytes(store)
        self._decoder = _Decoder(store, decode, self.staging_bytes)
        self._free: list[np.ndarray] = []
        self._allocated = 0
        self._in_use = 0
        self.peak_outstanding_bytes = 0
        depth = config.READS_IN_FLIGHT_PER_DIRECTORY
        self._bytes_read = [0] * (len(self._files) * depth)     # one slot per reader thread
        self._held: dict[int, tuple[_PageRead, Page]] = {}
        self._state: _StreamState | None = None
        self._prefetched: _StreamState | None = None
        self._bytes_delivered = 0
        self._bytes_dropped = 0
        self._closed = False
        self._queues: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in self._files]
        # a block's CRC-32 is checked beside its directory's reads, not between them
        self._check_queues: list[queue.SimpleQueue] = [queue.SimpleQueue()
                                                       for _ in self._files]
        # several reads in flight per directory: a device's queue is rarely full with one
        self._threads = [threading.Thread(target=self._serve, args=(d, d * depth + slot),
                                          daemon=True, name=f"garaphpy-page-reader-{d}.{slot}")
                         for d in range(len(self._files)) for slot in range(depth)]
        if self.check:
            self._threads += [threading.Thread(target=self._verify, args=(d,), daemon=True,
                                               name=f"garaphpy-page-checker-{d}")
                              for d in range(len(self._files))]
        for thread in self._threads:
            thread.start()

    def _open_files(self, direct: bool | None) -> None:
        blocks = self.store.blocks
        for directory, path in enumerate(self.store.block_files):
            storage = self.store.storage_dirs[directory]
            if not storage.is_dir():
                raise StoreError(f"{storage}: storage directory {directory} of the store "
                                 f"{self.store.path} is missing")
            if not path.is_file():
                raise StoreError(f"{path}: block file of storage directory {storage} "
                                 "is missing")
            mine = blocks[blocks["directory"] == directory]
            needed = int((mine["offset"] + mine["nbytes"]).max()) if mine.size else 0
            size = path.stat().st_size
            if size < needed:
                raise StoreCorruptError(f"{path}: truncated ({size} bytes, its blocks need "
                                        f"{needed})")
            self._files.append(_BlockFile(path, direct))

    # -- properties -----------------------------------------------------------------
    @property
    def direct_io(self) -> list[bool]:
        return [file.direct for file in self._files]

    @property
    def bytes_read(self) -> int:
        """Bytes read from the storage directories so far (read ahead or not)."""
        return sum(self._bytes_read)

    @property
    def bytes_delivered(self) -> int:
        """Bytes of the pages handed to the consumer so far (streamed or read on
        their own): :attr:`bytes_read` less :attr:`bytes_dropped` and what is
        still being read ahead for a stream."""
        return self._bytes_delivered

    @property
    def bytes_dropped(self) -> int:
        """Bytes read ahead and dropped so far, unused: a stream's pages read
        ahead beyond where it closed, a :meth:`prefetch` that no stream took
        (the blocks read before the drop)."""
        return self._bytes_dropped

    @property
    def outstanding_bytes(self) -> int:
        """Bytes of pool buffers being read into or held by the consumer now."""
        return self._in_use * self.buffer_bytes

    @property
    def allocated_bytes(self) -> int:
        """Bytes of pool buffers allocated so far (never above ``readahead_bytes``)."""
        return self._allocated * self.buffer_bytes

    # -- life cycle -----------------------------------------------------------------
    def __enter__(self) -> "PageReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the reader threads, close the files and drop the buffers.

        Pages of a stream still in progress are not read any more; their
        buffers must not be used afterwards.
        """
        if self._closed:
            return
        with self._lock:
            self._closed = True
            if self._state is not None:
                for read in self._state.queued:
                    read.cancelled = True
                self._state.next = len(self._state.order)
        for q in self._queues:
            for _ in range(config.READS_IN_FLIGHT_PER_DIRECTORY):
                q.put(None)
        for q in self._check_queues:
            q.put(None)
        for thread in self._threads:
            thread.join()
        self._decoder.shutdown()
        for file in self._files:
            file.close()
        self._free.clear()
        self._held.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("PageReader is closed")

    # -- the reader threads -----------------------------------------------------------
    def _serve(self, directory: int, slot: int) -> None:
        file = self._files[directory]
        requests = self._queues[directory]
        scratch: list[np.ndarray] = []

        def bounce() -> np.ndarray:
            if not scratch:
                scratch.append(aligned_empty(align(self.block_bytes, config.BLOCK_ALIGNMENT)))
            return scratch[0]

        while True:
            request = requests.get()
            if request is None:
                return
            read, start, offset, nbytes, crc, block = request
            checked_later = False
            try:
                if not read.cancelled and read.error is None:
                    got = file.read_into(read.target, start, nbytes, offset, bounce)
                    if got < nbytes:
                        raise StoreCorruptError(
                            f"{file.path}: short read at offset {offset}: {got} of {nbytes} "
                            f"bytes (block {block} of page {read.info.index})")
                    self._bytes_read[slot] += nbytes
                    with read.lock:
                        read.bytes_done += nbytes
                    if self.check:
                        self._check_queues[directory].put(request)
                        checked_later = True
            except BaseException as error:  # handed to the consumer
                read.fail(error)
            finally:
                if not checked_later:
                    read.block_done()

    def _verify(self, directory: int) -> None:
        """The checker thread of a directory: the CRC-32 of each block its reader read."""
        path = self._files[directory].path
        checks = self._check_queues[directory]
        while True:
            request = checks.get()
            if request is None:
                return
            read, start, offset, nbytes, crc, block = request
            try:
                if not read.cancelled and zlib.crc32(read.target[start:start + nbytes]) != crc:
                    raise StoreCorruptError(
                        f"{path}: checksum mismatch in block {block} of page "
                        f"{read.info.index} (offset {offset})")
            except BaseException as error:  # handed to the consumer
                read.fail(error)
            finally:
                read.block_done()

    def _new_read(self, info: PageInfo, buffer: np.ndarray, pooled: bool) -> _PageRead:
        """A read of page ``info`` into ``buffer``; a compressed page's blocks go
        to a staging buffer first and are decoded into ``buffer``."""
        if not info.compressed or self.decode == "stored":
            return _PageRead(info, buffer, pooled)
        return self._decoder.new_read(info, buffer, pooled)

    def _page_of(self, read: _PageRead) -> Page:
        """The page ``read`` delivers: views of its plain image, or, for a
        compressed page of a ``decode="stored"`` reader, its image as stored."""
        info = read.info
        if info.compressed and self.decode == "stored":
            return Page(info, read.buffer[:info.stored_nbytes], None, None, None, stored=True)
        return self.store.page_views(info, read.buffer[:info.nbytes])

    def _submit(self, read: _PageRead) -> None:
        """Hand every block of a page to the thread of its storage directory."""
        info = read.info
        for block in self.store.blocks[info.first_block:info.first_block + info.num_blocks]:
            start = int(block["index"]) * self.block_bytes
            self._queues[int(block["directory"])].put(
                (read, start, int(block["offset"]), int(block["nbytes"]),
                 int(block["crc32"]), int(block["index"])))

    def _wait(self, read: _PageRead) -> None:
        while not read.done.is_set():
            dead = [thread.name for thread in self._threads if not thread.is_alive()]
            if dead:
                raise RuntimeError(f"page reader thread(s) {', '.join(dead)} stopped "
                                   f"before page {read.info.index} was read")
            read.done.wait(_POLL_SECONDS)

    # -- the buffer pool ------------------------------------------------------------
    def _take_buffer(self) -> np.ndarray | None:
        """A free pool buffer, a new one while the budget allows, else None (lock held)."""
        if self._free:
            buffer = self._free.pop()
        elif self._allocated < self.max_buffers:
            buffer = self._new_buffer()
            self._allocated += 1
        else:
            return None
        self._in_use += 1
        self.peak_outstanding_bytes = max(self.peak_outstanding_bytes, self.outstanding_bytes)
        return buffer

    def _new_buffer(self) -> np.ndarray:
        buffer = self._allocator(self.buffer_bytes)
        if (not isinstance(buffer, np.ndarray) or buffer.dtype != np.uint8 or buffer.ndim != 1
                or not buffer.flags.c_contiguous or not buffer.flags.writeable
                or buffer.size < self.buffer_bytes):
            raise ConfigError(
                f"allocator: expected a writable contiguous 1-D uint8 numpy array of at least "
                f"{self.buffer_bytes} bytes, got {type(buffer).__name__} "
                f"{getattr(buffer, 'dtype', '')} {getattr(buffer, 'shape', '')}")
        return buffer[:self.buffer_bytes]

    def _release(self, read: _PageRead) -> None:
        self._decoder.unstage(read)     # a page read and not decoded (dropped, failed)
        with self._lock:
            if read.released:
                return
            read.released = True
            if not read.counted:
                return
            self._in_use -= 1
            if not self._closed:
                if read.pooled:
                    self._free.append(read.buffer)
                if self._state is not None:
                    self._dispatch(self._state)

    def _dispatch(self, state: _StreamState) -> None:
        """Start reading the next pages of the stream while the read-ahead has
        room (lock held): into a pool buffer, or a buffer of the caller's
        where the stream's ``keep`` gives one (it holds a place all the same
        until handed over)."""
        while state.next < len(state.order) and self._in_use < self.max_buffers:
            info = self.store.pages[state.order[state.next]]
            kept = state.keep(info.index) if state.keep is not None else None
            if kept is None:
                buffer = self._take_buffer()
                if buffer is None:
                    return
                read = self._new_read(info, buffer, pooled=True)
            else:
                self._in_use += 1
                self.peak_outstanding_bytes = max(self.peak_outstanding_bytes,
                                                  self.outstanding_bytes)
                read = self._new_read(info, kept, pooled=False)
                read.counted = True
            state.next += 1
            state.queued.append(read)
            self._submit(read)

    # -- reading ------------------------------------------------------------------------
    def _check_index(self, index) -> int:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"page index {index!r}: expected an integer")
        if not 0 <= index < len(self.store.pages):
            raise IndexError(f"page index {index} out of range: the store has "
                             f"{len(self.store.pages)} pages")
        return int(index)

    def stream(self, indices: Iterable[int] | None = None, *, release: str = "auto",
               keep: Callable[[int], np.ndarray | None] | None = None
               ) -> Iterator[tuple[int, Page]]:
        """Yield ``(index, page)`` for the pages ``indices``, in that order.

        Parameters
        ----------
        indices : iterable of int, optional
            Page indices, in the order wanted (repeats allowed).  Default:
            every page of the store in order.
        release : {"auto", "manual"}
            ``auto``: a page's buffer is reused once the consumer asks for
            the next page (do not keep the arrays of a page after that).
            ``manual``: it is reused after :meth:`release`; a consumer that
            holds every buffer and asks for more gets a RuntimeError.
        keep : callable, optional
            ``keep(index) -> numpy.ndarray or None``, called as a page's read
            starts: a buffer of the caller's that the page is read into and
            that it keeps (a page the host caches, read ahead like the
            others), as ``out`` of :meth:`read_page`; None: a pool buffer.
            A kept page holds a place of the read-ahead until handed over,
            then none (no :meth:`release`, whatever ``release`` says).

        Returns
        -------
        iterator of (int, garaphpy.storage.store.Page)
            The page's views (``sources``, ``idxoff``, ``weights``) lie in
            the pool buffer ``page.image``.

        Raises
        ------
        garaphpy.errors.StoreError, garaphpy.errors.StoreCorruptError, OSError
            A block could not be read (raised when the consumer reaches its
            page); whatever a reader thread raised is raised here.
        """
        self._check_open()
        if release not in ("auto", "manual"):
            raise ConfigError(f"release={release!r}: expected 'auto' or 'manual'")
        order = [self._check_index(i) for i in
                 (range(len(self.store.pages)) if indices is None else indices)]
        return self._stream(order, release == "manual", keep)

    def prefetch(self, indices: Iterable[int],
                 keep: Callable[[int], np.ndarray | None] | None = None) -> bool:
        """Start reading ``indices`` for a stream of them to come.

        A run whose iterations each walk every streamed page calls this when
        a walk ends, so that the next iteration's first pages are read while
        the iteration ends (instead of the device idling until the next
        stream begins).  A :meth:`stream` of the same order takes the pages
        read so far; one of another order takes those of its first pages
        read in its order and drops the others (:attr:`bytes_dropped`).
        ``keep`` as for :meth:`stream` (the stream that takes the pages
        gives its own for the pages after them).  Returns False (and does
        nothing) while a stream runs.
        """
        self._check_open()
        order = [self._check_index(i) for i in indices]
        with self._lock:
            if self._state is not None or not order:
                return False
            state = self._state = self._prefetched = _StreamState(order, keep)
            self._dispatch(state)
        return True

    def cancel_prefetch(self) -> None:
        """Stop the reads of a :meth:`prefetch` no stream has taken yet (its
        pages are not wanted any more); what they read counts in
        :attr:`bytes_dropped`."""
        with self._lock:
            state = self._prefetched
            if state is None or self._state is not state:
                return
            self._prefetched = self._state = None
            dropped = state.cancel_queued()
        self._drop(dropped)

    def _drop(self, reads: list[_PageRead]) -> None:
        """Give back the buffers of reads handed to the threads and not wanted;
        the bytes they read count in :attr:`bytes_dropped`."""
        for read in reads:  # no thread may still write into a reused buffer
            try:
                self._wait(read)
            except RuntimeError:
                pass
            with self._lock:
                self._bytes_dropped += read.bytes_done
            self._release(read)

    def _stream(self, order: list[int], manual: bool,
                keep: Callable[[int], np.ndarray | None] | None = None
                ) -> Iterator[tuple[int, Page]]:
        # the stream starts at the first next(): a generator never iterated holds nothing
        dropped: list[_PageRead] = []
        with self._lock:
            self._check_open()
            prefetched, self._prefetched = self._prefetched, None
            if self._state is not None and self._state is not prefetched:
                raise RuntimeError("PageReader: one stream at a time; finish or close the "
                                   "current one first")
            if prefetched is not None and prefetched.order == order:
                state = prefetched
                state.keep = keep
            else:
                state = self._state = _StreamState(order, keep)
                if prefetched is not None:
                    # the reads under way of this order's first pages are kept
                    queued = prefetched.queued
                    while queued and state.next < len(order) \
                            and queued[0].info.index == order[state.next]:
                        state.queued.append(queued.popleft())
                        state.next += 1
                    dropped = prefetched.cancel_queued()
        self._drop(dropped)
        current = None
        try:
            for _ in range(len(state.order)):
                if current is not None:
                    self._release(current)
                    current = None
                with self._lock:
                    self._check_open()
                    self._dispatch(state)
                    if not state.queued:
                        raise RuntimeError(
                            f"PageReader: all {self.max_buffers} page buffers "
                            f"(readahead_bytes={self.readahead_bytes}) are held by the consumer;"
                            " release pages (PageReader.release) before asking for more")
                    read = state.queued.popleft()
                try:
                    self._wait(read)
                except BaseException:
                    state.queued.appendleft(read)
                    raise
                self._decoder.decode_here(read)
                if read.error is not None:
                    self._release(read)
                    raise read.error
                page = self._page_of(read)
                with self._lock:
                    self._bytes_delivered += read.info.disk_bytes
                if not read.pooled:     # the caller keeps the buffer: its place is free
                    self._release(read)
                elif manual:
                    with self._lock:
                        self._held[id(page)] = (read, page)
                else:
                    current = read
                yield read.info.index, page
        finally:
            with self._lock:
                leftovers = state.cancel_queued()
            self._drop(leftovers)
            if current is not None:
                self._release(current)
            with self._lock:
                self._state = None

    def release(self, page: Page) -> None:
        """Return the buffer of ``page`` (from a ``release="manual"`` stream) to the pool."""
        with self._lock:
            entry = self._held.pop(id(page), None)
        if entry is None:
            raise ValueError("release: not a page held from a release='manual' stream of "
                             "this reader (or released already)")
        self._release(entry[0])

    def read_page(self, index: int, out: np.ndarray | None = None) -> Page:
        """Read one page now, through the reader threads, into ``out`` or a new buffer.

        The result equals :meth:`Store.read_page`.  It waits behind reads of
        a stream already handed to the threads.

        Parameters
        ----------
        index : int
        out : numpy.ndarray of uint8, optional
            Contiguous, at least ``pages[index].nbytes`` bytes (its
            ``disk_bytes`` where a ``decode="stored"`` reader gives the page
            as stored; aligned to
            ``config.BLOCK_ALIGNMENT`` and padded to it for ``O_DIRECT``
            straight into it; otherwise through a staging buffer).  Not part
            of the pool.
        """
        self._check_open()
        info = self.store.pages[self._check_index(index)]
        nbytes = info.disk_bytes if self.decode == "stored" else info.nbytes
        if out is None:
            out = aligned_empty(max(align(nbytes, config.BLOCK_ALIGNMENT), 1))
        elif (not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.ndim != 1
              or not out.flags.c_contiguous or out.size < nbytes):
            raise ConfigError(f"out: expected a contiguous 1-D uint8 array of at least "
                              f"{nbytes} bytes (page {index})")
        read = self._new_read(info, out, pooled=False)
        self._submit(read)
        self._wait(read)
        self._decoder.decode_here(read)
        if read.error is not None:
            raise read.error
        with self._lock:
            self._bytes_delivered += info.disk_bytes
        return self._page_of(read)

    def __repr__(self) -> str:
        return (f"PageReader({str(self.store.path)!r}, {len(self._files)} directories, "
                f"{self.max_buffers} buffers of {self.buffer_bytes} bytes"
                f"{', closed' if self._closed else ''})")
