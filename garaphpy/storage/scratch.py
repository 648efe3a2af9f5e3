"""Scratch files of an out-of-core build, written and read back checked.

When the edges do not fit the memory budget (Garaph section 6.5: the
preprocessing scans the input once or twice), the builder spills them into
buckets of consecutive destination (or source) ranges on disk and appends
each sorted group's results to a few files.  A scratch file lives in the
build's own temporary directory, but nothing stops another process from
truncating or rewriting it while the build runs, so nothing read back is
trusted:

* every file is written with append semantics (``O_APPEND``): a write after
  a truncation lands at the new end, never in a hole that reads as zeros;
* its size and CRC-32 are recorded as it is written and checked when it is
  read (:func:`read_scratch`, :func:`map_scratch`);
* vertex ids read back from buckets are checked against the bucket's range
  before any kernel indexes with them (:meth:`Buckets.load`).

Any mismatch is a :class:`~garaphpy.errors.StoreError` naming the file, and
nothing is stored.
"""

from __future__ import annotations

import mmap
import os
import zlib
from pathlib import Path

import numpy as np

from ..errors import StoreError
from . import _build_kernels as kernels
from . import filesafety


class _Record:
    """Bytes written to a scratch file and their running CRC-32."""

    __slots__ = ("nbytes", "crc")

    def __init__(self):
        self.nbytes = 0
        self.crc = 0

    def add(self, data) -> None:
        view = memoryview(data).cast("B")
        self.nbytes += len(view)
        self.crc = zlib.crc32(view, self.crc)


def _append(path: Path, fd: int, array: np.ndarray, record: _Record) -> None:
    data = np.ascontiguousarray(array)
    filesafety.write_fully(fd, data, path)
    record.add(data)


def _check_size(path: Path, record: _Record, size: int) -> None:
    if size != record.nbytes:
        raise StoreError(f"{path}: scratch file of this build holds {size:,} bytes, "
                         f"{record.nbytes:,} were written; nothing was stored")


def _check_crc(path: Path, record: _Record, data) -> None:
    if zlib.crc32(memoryview(data).cast("B")) != record.crc:
        raise StoreError(f"{path}: scratch file of this build was changed (CRC-32 mismatch); "
                         "nothing was stored")


def _stat_size(path: Path, record: _Record) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        raise StoreError(f"{path}: scratch file of this build disappeared ({record.nbytes:,} "
                         "bytes expected); nothing was stored") from None


def read_scratch(path: Path, dtype: np.dtype, record: _Record) -> np.ndarray:
    """The items of a scratch file, its size and CRC-32 checked against ``record``."""
    _check_size(path, record, _stat_size(path, record))
    try:
        data = np.fromfile(path, dtype)
    except OSError as error:
        raise StoreError(f"{path}: cannot read this build's scratch file "
                         f"({error.strerror or error})") from None
    if data.nbytes != record.nbytes:
        raise StoreError(f"{path}: scratch file of this build changed while read "
                         f"({data.nbytes:,} of {record.nbytes:,} bytes); nothing was stored")
    _check_crc(path, record, data)
    return data


def map_scratch(path: Path, dtype: np.dtype, record: _Record) -> np.ndarray:
    """A read-only memory map of a scratch file, its size and CRC-32 checked.

    The pages read for the check are dropped from the process again (they
    stay in the page cache): mapping a file of any size costs no memory
    until its items are used.
    """
    if record.nbytes == 0:
        return np.zeros(0, dtype)
    _check_size(path, record, _stat_size(path, record))
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    if len(mapped) != record.nbytes:
        mapped.close()
        raise StoreError(f"{path}: scratch file of this build changed while read "
                         f"({len(mapped):,} of {record.nbytes:,} bytes); nothing was stored")
    crc, step = 0, 1 << 22
    with memoryview(mapped) as view:
        for start in range(0, len(view), step):
            crc = zlib.crc32(view[start:start + step], crc)
            release(mapped, start, start + step)
    if crc != record.crc:
        mapped.close()
        raise StoreError(f"{path}: scratch file of this build was changed (CRC-32 mismatch); "
                         "nothing was stored")
    return np.frombuffer(mapped, dtype)


def release(mapped: mmap.mmap, start: int, end: int) -> None:
    """Drop pages start..end-1 of a read-only file mapping from the process
    (they are read again from the page cache when used)."""
    start -= start % mmap.PAGESIZE
    end = min(end, len(mapped))
    if end > start and hasattr(mapped, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        mapped.madvise(mmap.MADV_DONTNEED, start, end - start)


def release_pages(array: np.ndarray, start: int = 0, end: int | None = None) -> None:
    """:func:`release` bytes start..end-1 of ``array`` where it is (a view of)
    an array of :func:`map_scratch`; nothing otherwise."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    mapped = root.base.obj if isinstance(root.base, memoryview) else None
    if not isinstance(mapped, mmap.mmap) or mapped.closed:
        return
    offset = array.ctypes.data - root.ctypes.data
    release(mapped, offset + start, offset + (array.nbytes if end is None else end))


def scan_blocks(array: np.ndarray, step: int = 1 << 20):
    """``array`` in consecutive parts of ``step`` items, each part's pages
    dropped once the caller is done with it (:func:`release_pages`): a pass
    over a mapped scratch array costs one part of memory."""
    for start in range(0, array.shape[0], step):
        part = array[start:start + step]
        yield part
        release_pages(part)


def weight_statistics(weights: np.ndarray) -> tuple:
    """(smallest, largest, number < 0, number <= 0) of a non-empty weight
    array, as Python numbers, read part by part (:func:`scan_blocks`)."""
    rows = np.array([(part.min(), part.max(), np.count_nonzero(part < 0),
                      np.count_nonzero(part <= 0)) for part in scan_blocks(weights)],
                    dtype=[("low", weights.dtype), ("high", weights.dtype),
                           ("negative", np.int64), ("nonpositive", np.int64)])
    return (rows["low"].min().item(), rows["high"].max().item(),
            int(rows["negative"].sum()), int(rows["nonpositive"].sum()))


class AppendFile:
    """A scratch file the build appends arrays to, every write checked and
    checksummed; :meth:`map` maps it back, checked."""

    def __init__(self, path: Path):
        self.path = path
        self.record = _Record()
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)

    def append(self, array: np.ndarray) -> None:
        _append(self.path, self.fd, array, self.record)

    def map(self, dtype: np.dtype) -> np.ndarray:
        return map_scratch(self.path, np.dtype(dtype), self.record)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


class Buckets:
    """Edges spilled to disk in buckets of consecutive key ranges.

    With ``merge`` given, a bucket that grows past ``merge_edges`` edges is
    read back and its duplicate edges merged (``merge(buckets, bucket,
    with_weight)`` reads the bucket, deleting its files, and yields its
    merged edges as ``(src, dst, weight, removed)`` pieces in order), so
    that a destination of very many copies of one edge (a duplicate bomb)
    never grows a bucket past the memory budget.  A bucket that stays large
    after merging has its threshold doubled: merging costs at most twice
    the bucket's reads.

    The ``src`` and ``dst`` columns hold vertex ids below ``vertex_bound``
    (``num_keys`` unless given: the keys of a bucket split by a finer key
    are not vertex ids).
    """

    def __init__(self, directory: Path, prefix: str, num_keys: int, num_buckets: int,
                 vid: np.dtype, wdtype: np.dtype | None, merge=None, merge_edges: int = 0,
                 vertex_bound: int | None = None):
        self.directory = directory
        self.prefix = prefix
        self.num_keys = num_keys
        self.vertex_bound = num_keys if vertex_bound is None else vertex_bound
        self.width = max(1, -(-num_keys // num_buckets))
        self.num_buckets = -(-num_keys // self.width) if num_keys else 0
        self.counts = np.zeros(self.num_buckets, np.int64)
        self.records: dict[tuple[int, str], _Record] = {}
        self.vid = vid
        self.wdtype = wdtype
        self.merge = merge
        self.merge_limits = np.full(self.num_buckets, max(1, merge_edges), np.int64)
        #: duplicate edges merged away while spilling
        self.merged = 0

    def _path(self, bucket: int, column: str) -> Path:
        return self.directory / f"{self.prefix}-{bucket:05d}.{column}"

    def add(self, key, src, dst, weight) -> None:
        buckets = np.empty(key.size, np.int64)
        kernels.bucket_of(key, self.width, buckets)
        columns = [("src", src), ("dst", dst)] + ([("w", weight)] if weight is not None else [])
        offsets, *sorted_columns = kernels.counting_sort(
            buckets, 0, self.num_buckets, *[c for _, c in columns], include_keys=False)
        for bucket in np.flatnonzero(np.diff(offsets)):
            lo, hi = offsets[bucket], offsets[bucket + 1]
            for (name, _), values in zip(columns, sorted_columns):
                path = self._path(bucket, name)
                record = self.records.setdefault((int(bucket), name), _Record())
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                try:
                    _append(path, fd, values[lo:hi], record)
                finally:
                    os.close(fd)
            self.counts[bucket] += hi - lo
            if self.merge is not None and self.counts[bucket] > self.merge_limits[bucket]:
                self._merge_bucket(int(bucket), weight is not None)

    def _merge_bucket(self, bucket: int, with_weight: bool) -> None:
        names = ("src", "dst", "w") if with_weight else ("src", "dst")
        paths = {name: self._path(bucket, name).with_suffix(f".{name}-merged")
                 for name in names}
        records = {name: _Record() for name in names}
        handles = {name: os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND,
                                 0o644) for name, path in paths.items()}
        count = 0
        try:
            for src, dst, weight, removed in self.merge(self, bucket, with_weight):
                self.merged += removed
                count += src.size
                for name, values in zip(names, (src, dst, weight)):
                    _append(paths[name], handles[name], values, records[name])
        finally:
            for handle in handles.values():
                os.close(handle)
        for name in names:
            os.replace(paths[name], self._path(bucket, name))
            self.records[(bucket, name)] = records[name]
        self.counts[bucket] = count
        if count > self.merge_limits[bucket] // 2:
            self.merge_limits[bucket] *= 2

    def groups(self, budget_edges: int):
        """Runs of consecutive buckets holding at most ``budget_edges`` edges
        (a single larger bucket forms a group of its own)."""
        start, held = 0, 0
        for bucket in range(self.num_buckets):
            if held and held + self.counts[bucket] > budget_edges:
                yield start, bucket
                start, held = bucket, 0
            held += self.counts[bucket]
        if start < self.num_buckets:
            yield start, self.num_buckets

    def load(self, first: int, end: int, with_weight: bool):
        """Concatenate buckets first..end-1, deleting their files.

        Every bucket file must hold exactly the bytes written to it (size
        and CRC-32), and its ids must lie in range (the bucket's keys, and
        0..num_keys-1 for the other column): anything else is a StoreError
        naming the file, never a store with edges missing nor a kernel
        indexing past its arrays.
        """
        columns = {}
        for name, dtype in (("src", self.vid), ("dst", self.vid), ("w", self.wdtype)):
            if name == "w" and not with_weight:
                continue
            parts = []
            for bucket in range(first, end):
                if self.counts[bucket] == 0:
                    continue
                path = self._path(bucket, name)
                record = self.records[(bucket, name)]
                part = read_scratch(path, np.dtype(dtype), record)
                if name != "w":
                    self._check_ids(path, part, bucket, name)
                parts.append(part)
                path.unlink()
            columns[name] = np.concatenate(parts) if parts else np.zeros(0, dtype)
        return columns["src"], columns["dst"], columns.get("w")

    def chunks(self, bucket: int, with_weight: bool, chunk_edges: int):
        """Bucket ``bucket`` in pieces of at most ``chunk_edges`` edges, in the
        order written, deleting its files once read.

        The checks of :meth:`load`, made as the pieces are read: each piece's
        ids are checked before it is yielded, and the files' sizes before
        the first piece and their CRC-32s after the last (a consumer stores
        nothing before the generator ends).
        """
        columns = [("src", self.vid), ("dst", self.vid)]
        if with_weight:
            columns.append(("w", self.wdtype))
        count = int(self.counts[bucket])
        paths = [self._path(bucket, name) for name, _ in columns]
        records = [self.records[(bucket, name)] for name, _ in columns]
        for path, record in zip(paths, records):
            _check_size(path, record, _stat_size(path, record))
        handles = []
        try:
            for path in paths:
                handles.append(open(path, "rb"))
            crcs = [0] * len(columns)
            for start in range(0, count, chunk_edges):
                size = min(chunk_edges, count - start)
                parts = []
                for i, ((name, dtype), path, handle) in enumerate(zip(columns, paths, handles)):
                    part = np.fromfile(handle, np.dtype(dtype), size)
                    if part.size != size:
                        raise StoreError(f"{path}: scratch file of this build changed while "
                                         "read; nothing was stored")
                    crcs[i] = zlib.crc32(memoryview(part).cast("B"), crcs[i])
                    if name != "w":
                        self._check_ids(path, part, bucket, name)
                    parts.append(part)
                yield parts[0], parts[1], parts[2] if with_weight else None
                del parts
        except OSError as error:
            raise StoreError(f"{error.filename or paths[0]}: cannot read this build's scratch "
                             f"file ({error.strerror or error})") from None
        finally:
            for handle in handles:
                handle.close()
        for path, record, crc in zip(paths, records, crcs):
            if crc != record.crc:
                raise StoreError(f"{path}: scratch file of this build was changed (CRC-32 "
                                 "mismatch); nothing was stored")
            path.unlink()

    def _check_ids(self, path: Path, ids: np.ndarray, bucket: int, column: str) -> None:
        low, high = 0, self.vertex_bound
        if column == self.prefix:       # the bucket's own key column
            low, high = self.key_range(bucket, bucket + 1, self.num_keys)
        if ids.size and (int(ids.min()) < low or int(ids.max()) >= high):
            raise StoreError(f"{path}: scratch file of this build holds vertex ids outside "
                             f"{low}..{high - 1}; nothing was stored")

    def key_range(self, first: int, end: int, num_keys: int):
        return first * self.width, min(end * self.width, num_keys)
