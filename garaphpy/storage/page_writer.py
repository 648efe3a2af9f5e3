"""Writing a store's page images as data blocks over its storage directories.

Garaph section 2.1 (a page is ``sources | idxoff | weights``, each array
aligned) and section 2.2 (a page's data blocks are spread over several
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
from . import filesafety, layout
from .layout import BLOCK_DTYPE


def _splitmix64(value: int) -> int:
    value = (value + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return value ^ (value >> 31)


def block_directory(page: int, block: int, num_dirs: int) -> int:
    """Storage directory of data block ``block`` of page ``page`` (section 2.2)."""
    return _splitmix64((page << 24) | block) % num_dirs


BLOCK_FILE = "blocks.dat"


def write_array(directory: Path, name: str, array: np.ndarray, arrays: dict) -> None:
    array = np.ascontiguousarray(array)
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    filesafety.write_file(path, array)
    arrays[name] = {"dtype": array.dtype.str if array.dtype.names is None else "structured",
                    "shape": list(array.shape), "nbytes": int(array.nbytes),
                    "crc32": zlib.crc32(memoryview(array).cast("B"))}


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

    def write_page(self, page: int, image: np.ndarray) -> tuple[int, int]:
        """Write one page image as blocks; returns (first block, block count)."""
        first = len(self.blocks)
        view = memoryview(image).cast("B")
        pieces = [view[lo:lo + self.block_bytes] for lo in range(0, len(view), self.block_bytes)]
        checksums = list(self.pool.map(zlib.crc32, pieces))
        for index, (piece, crc) in enumerate(zip(pieces, checksums)):
            directory = block_directory(page, index, len(self.directories))
            handle, path = self.handles[directory], self.paths[directory]
            offset = self.positions[directory]
            filesafety.write_fully(handle, piece, path)
            padded = layout.align(len(piece), config.BLOCK_ALIGNMENT)
            if padded > len(piece):
                filesafety.write_fully(handle, b"\0" * (padded - len(piece)), path)
            self.positions[directory] = offset + padded
            self.blocks.append((page, index, directory, offset, len(piece), crc))
        return first, len(pieces)

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


def write_pages(writer: StoreWriter, shards, pages_count, in_offsets, csc_src, csc_weight,
                 sizing: layout.PageSizing, source_dtype, weight_dtype, progress: Progress):
    page_rows = []
    shard_start = 0
    for page, count in enumerate(pages_count.tolist()):
        page_shards = shards[shard_start:shard_start + count]
        edge_begin = int(page_shards["edge_begin"][0])
        edge_end = int(page_shards["edge_end"][-1])
        num_edges = edge_end - edge_begin
        offsets = layout.page_array_offsets(num_edges, sizing)
        image = np.zeros(offsets["nbytes"], np.uint8)
        image[:num_edges * sizing.source_bytes].view(source_dtype)[:] = csc_src[edge_begin:edge_end]
        idxoff = image[offsets["idxoff"]:offsets["idxoff"] + 2 * num_edges].view(np.uint16)
        kernels.fill_idxoff(in_offsets, page_shards["first_vertex"], page_shards["num_vertices"],
                            page_shards["edge_begin"], page_shards["edge_end"], edge_begin, idxoff)
        if weight_dtype is not None:
            start = offsets["weights"]
            image[start:start + num_edges * sizing.weight_bytes].view(weight_dtype)[:] = \
                csc_weight[edge_begin:edge_end]
        first_block, num_blocks = writer.write_page(page, image)
        last = page_shards[-1]
        page_rows.append({
            "first_shard": shard_start, "num_shards": count,
            "first_vertex": int(page_shards["first_vertex"][0]),
            "end_vertex": int(last["first_vertex"] + last["num_vertices"]),
            "edge_begin": edge_begin, "num_edges": num_edges,
            "nbytes": offsets["nbytes"], "idxoff_offset": offsets["idxoff"],
            "weights_offset": offsets["weights"],
            "first_block": first_block, "num_blocks": num_blocks,
        })
        shard_start += count
        progress.update(edge_end, "writing pages")
    return page_rows
