"""A build's page format, measured on its own pages (Garaph section 2.1's pages).

``store.compress`` is ``"auto"`` by default: before the pages are written
the build encodes a sample of them (pages spread evenly over the store, up
to ``config.COMPRESS_SAMPLE_EDGES`` edges), decodes them as the page reader
does (``config.PAGE_DECODERS_PER_READER`` threads, a page each, the plain
image written with its IdxOff), times the decode, takes the store
directories' sequential read speed
(:func:`garaphpy.storage.read_ratio.disk_read_speed`, measured once per
device), and lets :func:`garaphpy.storage.decisions.compress_pages` decide
(a sample that saves too few bytes is neither timed nor its disk measured).
``True`` and ``False`` force the choice without measuring.  The choice and
its measurement are recorded in the manifest (``layout.compress``) and
printed with the build's summary.  A build out of core keeps its pages plain
where compressing one whole would not fit its memory budget
(:func:`garaphpy.storage.decisions.compress_fits_memory`).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import config
from .._numba_setup import parallel_section
from ..progress import human_bytes
from . import layout, page_codec
from .decisions import CompressChoice, compress_fits_memory, compress_pages
from .page_writer import compressed_image
from .read_ratio import disk_read_speed

__all__ = ["AUTO", "choose_compression", "sample_pages"]

#: ``store.compress``'s default: measure, and compress where it pays.
AUTO = "auto"

#: Seconds the decode of the sample is timed for at least (a small sample is
#: decoded again until then: thread start-up would dominate one pass).
MIN_DECODE_SECONDS = 0.02


def sample_pages(edges_per_page: np.ndarray, sample_edges: int) -> np.ndarray:
    """Indices of pages spread evenly over the store whose edges add up to
    about ``sample_edges`` (every page when there are fewer)."""
    count = len(edges_per_page)
    if count == 0:
        return np.zeros(0, np.int64)
    mean = max(float(np.mean(edges_per_page)), 1.0)
    wanted = min(count, max(1, int(np.ceil(sample_edges / mean))))
    return np.unique(np.linspace(0, count - 1, wanted).round().astype(np.int64))


def _page_shards(shards, pages_count) -> list:
    starts = np.concatenate([[0], np.cumsum(pages_count)]).astype(np.int64)
    return [shards[starts[k]:starts[k + 1]] for k in range(len(pages_count))]


def _decode_rate(images: list, in_offsets, sizing: layout.PageSizing) -> float:
    """Plain bytes a second the page reader's decoders produce from ``images``
    (``(page_shards, image)`` pairs): ``config.PAGE_DECODERS_PER_READER``
    threads a page each, or, with fewer pages than threads, each page's
    blocks over numba's threads (as :meth:`Store.read_page` decodes); after
    one untimed decode that loads the compiled decoder, passes over the
    sample are timed until ``MIN_DECODE_SECONDS`` have gone by."""
    in_offsets = np.asarray(in_offsets, np.int64)
    threads = max(1, min(config.PAGE_DECODERS_PER_READER, os.cpu_count() or 1))
    whole_pages = len(images) >= threads
    plain_bytes = 0

    def decode(item) -> None:
        page_shards, image = item
        edge_begin = int(page_shards["edge_begin"][0])
        num_edges = int(page_shards["edge_end"][-1]) - edge_begin
        last = page_shards[-1]
        offsets = layout.page_array_offsets(num_edges, sizing)
        plain = np.empty(offsets["nbytes"], np.uint8)
        idxoff = plain[offsets["idxoff"]:offsets["idxoff"] + 2 * num_edges].view(np.uint16)
        page_codec.decode_sources(image, in_offsets, edge_begin,
                                  int(page_shards["first_vertex"][0]),
                                  int(last["first_vertex"] + last["num_vertices"]),
                                  plain[:4 * num_edges].view(np.int32), idxoff=idxoff,
                                  shard_first=page_shards["first_vertex"],
                                  parallel=not whole_pages)

    for item in images:
        edges = int(item[0]["edge_end"][-1]) - int(item[0]["edge_begin"][0])
        plain_bytes += layout.page_array_offsets(edges, sizing)["nbytes"]
    with parallel_section():
        decode(min(images, key=lambda item: item[1].nbytes))
        passes = 0
        with ThreadPoolExecutor(threads if whole_pages else 1) as pool:
            started = time.perf_counter()
            while True:
                list(pool.map(decode, images))
                passes += 1
                seconds = time.perf_counter() - started
                if seconds >= MIN_DECODE_SECONDS:
                    return passes * plain_bytes / seconds


def choose_compression(setting, shards, pages_count, in_offsets, csc_src, csc_weight,
                       sizing: layout.PageSizing, source_dtype, weight_dtype,
                       directories, memory_budget: int | None = None) -> CompressChoice:
    """The page format of a build.

    Parameters
    ----------
    setting : bool or "auto"
        ``store.compress``: True or False forces it; ``"auto"`` measures.
    shards, pages_count, in_offsets, csc_src, csc_weight, sizing, source_dtype, weight_dtype
        The build's shard table, shards per page, CSC and page sizing, as
        :func:`garaphpy.storage.page_writer.write_pages` takes them.
    directories : sequence of path
        The directories the store's pages go to (their read speed is taken).
    memory_budget : int, optional
        The memory budget of a build out of core (None: built in memory).
    """
    if setting is True:
        return CompressChoice(True, "compressed: store.compress = true")
    if setting is False:
        return CompressChoice(False, "plain: store.compress = false")
    if np.dtype(source_dtype) != np.int32:
        return CompressChoice(False, "plain: 64-bit vertex ids have no compressed format")
    pages = _page_shards(shards, pages_count)
    edges = np.array([int(p["edge_end"][-1]) - int(p["edge_begin"][0]) for p in pages],
                     np.int64)
    if not edges.sum():
        return CompressChoice(False, "plain: no edges")
    largest = layout.page_array_offsets(int(edges.max()), sizing)["nbytes"]
    if not compress_fits_memory(largest, memory_budget):
        return CompressChoice(False, f"plain: compressing a page of {human_bytes(largest)} "
                                     "whole would exceed half the build's memory budget of "
                                     f"{human_bytes(memory_budget)}")
    plain_bytes = compressed_bytes = sampled = 0
    images = []
    for k in sample_pages(edges, config.COMPRESS_SAMPLE_EDGES).tolist():
        plain = layout.page_array_offsets(int(edges[k]), sizing)["nbytes"]
        packed = compressed_image(pages[k], in_offsets, csc_src, csc_weight, sizing,
                                  source_dtype, weight_dtype)
        plain_bytes += plain
        sampled += int(edges[k])
        if packed is None:      # a page no smaller compressed stays plain
            compressed_bytes += plain
            continue
        compressed_bytes += packed[0].nbytes
        images.append((pages[k], packed[0]))
    if not images:
        return CompressChoice(False, "plain: no page measured is smaller compressed",
                              ratio=1.0, sample_edges=sampled)
    choice = compress_pages(compressed_bytes, plain_bytes,
                            lambda: _decode_rate(images, in_offsets, sizing),
                            lambda: disk_read_speed(directories))
    return CompressChoice(**{**choice.record(), "sample_edges": sampled})
