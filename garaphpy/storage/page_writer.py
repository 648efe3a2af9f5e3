"""Writing a store's page images as data blocks over its storage directories.

Garaph section 2.1 (a page is ``sources | idxoff | weights``, each array
aligned; or, in a store built with ``compress``, the compressed image of
:mod:`garaphpy.storage.page_codec`) and section 2.2 (a page's data blocks are spread over several
storage devices by a hash of (page, block), so that reading a page draws on
all of them).  Every block is checksummed (CRC-32) as it is written, and
every write is checked (:func:`garaphpy.storage.filesafety.write_fully`).
"""

from __future__ import annotations

import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .. import config
from ..progress import Progress
from . import _build_kernels as kernels
from .._numba_setup import parallel_section
from . import filesafety, layout, page_codec
from .layout import BLOCK_DTYPE
from .scratch import release_pages


def _splitmix64(value: int) -> int:
    value = (value + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return value ^ (value >> 31)


def block_directory(page: int, block: int, num_dirs: int) -> int:
    """Storage directory of data block ``block`` of page ``page`` (section 2.2)."""
    return _splitmix64((page << 24) | block) % num_dirs


BLOCK_FILE = "blocks.dat"


def write_array(directory: Path, name: str, array: np.ndarray, arrays: dict,
                step: int = 1 << 22) -> None:
    """Write ``array`` to ``directory / name`` and record it in ``arrays``;
    written ``step`` bytes at a time, a scratch file's mapped pages dropped
    once written (:func:`garaphpy.storage.scratch.release_pages`)."""
    array = np.ascontiguousarray(array)
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    view = memoryview(array).cast("B")
    crc = 0
    filesafety.write_file(path, b"")
    for start in range(0, len(view), step):
        part = view[start:start + step]
        filesafety.write_file(path, part, append=True)
        crc = zlib.crc32(part, crc)
        release_pages(array, start, start + len(part))
    arrays[name] = {"dtype": array.dtype.str if array.dtype.names is None else "structured",
                    "shape": list(array.shape), "nbytes": int(array.nbytes), "crc32": crc}


class StoreWriter:
    """Writes page blocks across storage directories and records them."""

    def __init__(self, directories: list[Path], block_bytes: int):
        self.directories = directories
        self.block_bytes = block_bytes
        self.paths = [d / BLOCK_FILE for d in directories]
        self.handles = [os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                        for p in self.paths]
        self.positions = [0] * len(directories)
        self.blocks = []
        self.pool = ThreadPoolExecutor(max_workers=max(2, min(8, config.default_threads())))

    def write_page(self, page: int, windows) -> tuple[int, int]:
        """Write one page image as blocks; returns (first block, block count).

        ``windows`` yields the image in consecutive parts, each a whole
        number of blocks but the last (:func:`page_windows`).
        """
        first = len(self.blocks)
        index = 0
        for window in windows:
            view = memoryview(window).cast("B")
            pieces = [view[lo:lo + self.block_bytes]
                      for lo in range(0, len(view), self.block_bytes)]
            checksums = list(self.pool.map(zlib.crc32, pieces))
            for piece, crc in zip(pieces, checksums):
                directory = block_directory(page, index, len(self.directories))
                handle, path = self.handles[directory], self.paths[directory]
                offset = self.positions[directory]
                filesafety.write_fully(handle, piece, path)
                padded = layout.align(len(piece), config.BLOCK_ALIGNMENT)
                if padded > len(piece):
                    filesafety.write_fully(handle, b"\0" * (padded - len(piece)), path)
                self.positions[directory] = offset + padded
                self.blocks.append((page, index, directory, offset, len(piece), crc))
                index += 1
            del view, pieces
        return first, index

    def close(self) -> np.ndarray:
        self.pool.shutdown()
        failure = None
        for handle, path in zip(self.handles, self.paths):
            try:
                os.fsync(handle)
            except OSError as error:
                failure = failure or filesafety.write_error(path, error, 0)
            finally:
                os.close(handle)
        if failure is not None:
            raise failure
        table = np.zeros(len(self.blocks), BLOCK_DTYPE)
        for i, row in enumerate(self.blocks):
            table[i] = row
        return table


#: Bytes of a page image held at once (rounded to whole blocks): pages are
#: built and written part by part, so writing a store takes this much
#: memory whatever the page size or the memory budget.
PAGE_WINDOW_BYTES = 8 << 20


def _copy_bytes(window: np.ndarray, window_start: int, region_start: int, values,
                dtype: np.dtype) -> None:
    """Copy the bytes of ``values`` (as ``dtype``), an array placed at byte
    ``region_start`` of the image, that fall in ``window`` (image bytes
    ``window_start`` onwards)."""
    itemsize = dtype.itemsize
    lo = max(window_start, region_start)
    hi = min(window_start + window.size, region_start + len(values) * itemsize)
    if lo >= hi:
        return
    first_item = (lo - region_start) // itemsize
    end_item = -(-(hi - region_start) // itemsize)
    data = np.ascontiguousarray(values[first_item:end_item], dtype).view(np.uint8)
    skip = lo - region_start - first_item * itemsize
    window[lo - window_start:hi - window_start] = data[skip:skip + hi - lo]
    release_pages(values[first_item:end_item])


def _idxoff(in_offsets, page_shards, edge_begin: int, edge_end: int) -> np.ndarray:
    """IdxOff of edges edge_begin..edge_end-1 of a page (shards clipped to them)."""
    overlap = page_shards[(page_shards["edge_end"] > edge_begin)
                          & (page_shards["edge_begin"] < edge_end)]
    idxoff = np.zeros(edge_end - edge_begin, np.uint16)
    kernels.fill_idxoff(in_offsets, np.ascontiguousarray(overlap["first_vertex"], np.int64),
                        np.ascontiguousarray(overlap["num_vertices"], np.int64),
                        np.maximum(overlap["edge_begin"], edge_begin).astype(np.int64),
                        np.minimum(overlap["edge_end"], edge_end).astype(np.int64),
                        edge_begin, idxoff)
    return idxoff


def page_windows(page_shards, in_offsets, csc_src, csc_weight, sizing: layout.PageSizing,
                 source_dtype, weight_dtype, window_bytes: int):
    """The image of the page of ``page_shards`` (``sources | idxoff | weights``,
    Garaph section 2.1), in consecutive parts of ``window_bytes``."""
    edge_begin = int(page_shards["edge_begin"][0])
    edge_end = int(page_shards["edge_end"][-1])
    num_edges = edge_end - edge_begin
    offsets = layout.page_array_offsets(num_edges, sizing)
    source_dtype = np.dtype(source_dtype)
    for start in range(0, offsets["nbytes"], window_bytes):
        window = np.zeros(min(window_bytes, offsets["nbytes"] - start), np.uint8)
        _copy_bytes(window, start, 0, csc_src[edge_begin:edge_end], source_dtype)
        first = max(0, (start - offsets["idxoff"]) // 2)
        end = min(num_edges, -(-(start + window.size - offsets["idxoff"]) // 2))
        if first < end:
            idxoff = _idxoff(in_offsets, page_shards, edge_begin + first, edge_begin + end)
            _copy_bytes(window, start, offsets["idxoff"] + 2 * first, idxoff,
                        np.dtype(np.uint16))
            del idxoff
        if weight_dtype is not None:
            _copy_bytes(window, start, offsets["weights"], csc_weight[edge_begin:edge_end],
                        np.dtype(weight_dtype))
        yield window
        del window


def compressed_image(page_shards, in_offsets, csc_src, csc_weight, sizing: layout.PageSizing,
                     source_dtype, weight_dtype) -> tuple[np.ndarray, int] | None:
    """The compressed image of the page of ``page_shards`` (the edge stream of
    :mod:`~garaphpy.storage.page_codec`, then the edge values, 64-byte
    aligned) and where its values start; None when the page stays plain (int64
    ids, sources not sorted per destination, or no smaller than plain)."""
    if np.dtype(source_dtype) != np.int32:
        return None
    edge_begin = int(page_shards["edge_begin"][0])
    edge_end = int(page_shards["edge_end"][-1])
    num_edges = edge_end - edge_begin
    last = page_shards[-1]
    sources = np.ascontiguousarray(csc_src[edge_begin:edge_end], np.int32)
    with parallel_section():
        stream = page_codec.encode_sources(
            sources, np.asarray(in_offsets, np.int64), edge_begin,
            int(page_shards["first_vertex"][0]), int(last["first_vertex"] + last["num_vertices"]))
    if stream is None:
        return None
    weights_offset = layout.align(stream.nbytes, layout.PAGE_ARRAY_ALIGNMENT)
    weight_bytes = num_edges * sizing.weight_bytes
    nbytes = layout.align(weights_offset + weight_bytes, layout.PAGE_ARRAY_ALIGNMENT)
    if nbytes >= layout.page_array_offsets(num_edges, sizing)["nbytes"]:
        return None
    image = np.zeros(nbytes, np.uint8)
    image[:stream.nbytes] = stream.view(np.uint8)
    if weight_dtype is not None and num_edges:
        image[weights_offset:weights_offset + weight_bytes] = np.ascontiguousarray(
            csc_weight[edge_begin:edge_end], np.dtype(weight_dtype)).view(np.uint8)
    return image, weights_offset


def write_pages(writer: StoreWriter, shards, pages_count, in_offsets, csc_src, csc_weight,
                 sizing: layout.PageSizing, source_dtype, weight_dtype, progress: Progress,
                 compress: bool = False):
    """Write every page; the page table's rows.  With ``compress``, each page
    whose compressed image is smaller is written compressed."""
    page_rows = []
    shard_start = 0
    window_bytes = writer.block_bytes * max(1, PAGE_WINDOW_BYTES // writer.block_bytes)
    for page, count in enumerate(pages_count.tolist()):
        page_shards = shards[shard_start:shard_start + count]
        edge_begin = int(page_shards["edge_begin"][0])
        edge_end = int(page_shards["edge_end"][-1])
        num_edges = edge_end - edge_begin
        offsets = layout.page_array_offsets(num_edges, sizing)
        packed = compressed_image(page_shards, in_offsets, csc_src, csc_weight, sizing,
                                  source_dtype, weight_dtype) if compress else None
        if packed is None:
            windows = page_windows(page_shards, in_offsets, csc_src, csc_weight, sizing,
                                   source_dtype, weight_dtype, window_bytes)
        else:
            windows = [packed[0][lo:lo + window_bytes]
                       for lo in range(0, packed[0].size, window_bytes)]
        first_block, num_blocks = writer.write_page(page, windows)
        last = page_shards[-1]
        stored = {} if packed is None else {
            "codec": page_codec.GAP_BP128, "stored_nbytes": int(packed[0].size),
            "stored_weights_offset": int(packed[1])}
        del packed, windows
        page_rows.append({
            "first_shard": shard_start, "num_shards": count,
            "first_vertex": int(page_shards["first_vertex"][0]),
            "end_vertex": int(last["first_vertex"] + last["num_vertices"]),
            "edge_begin": edge_begin, "num_edges": num_edges,
            "nbytes": offsets["nbytes"], "idxoff_offset": offsets["idxoff"],
            "weights_offset": offsets["weights"],
            "first_block": first_block, "num_blocks": num_blocks, **stored,
        })
        shard_start += count
        progress.update(edge_end, "writing pages")
    return page_rows
