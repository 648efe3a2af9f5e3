"""The store's choices, each a small pure function (Garaph sections 2.1-2.2).

The engine's own switches live in :mod:`garaphpy.scheduler.decisions`; these
are the storage side's, below it in the layers (the builder and the page
reader make them before any engine exists).  Each takes measured inputs and
returns the choice with the inputs that made it, to be recorded where users
see build and run facts.

* **compressed pages** (section 2.1's pages, GCGT's idea): a build keeps
  its pages compressed (:mod:`garaphpy.storage.page_codec`) when they are
  enough smaller and this host decodes them faster than the disk would
  read the bytes they save (:func:`compress_pages`), and, built out of
  core, when a page compressed whole fits the build's memory budget
  (:func:`compress_fits_memory`);
* **read-ahead** (section 2.2's streaming from SSDs): the pages a reader
  keeps in flight, enough to cover a page's read at the disk's measured
  speed and the stalls it should hide (:func:`readahead_pages`);
* **the host's pages** (section 2.2's secondary storage "as memory
  extension", HyTGraph's per-partition choice): the pages the host budget
  holds beside the GPU's kept pages are revised between iterations when the
  pages a frontier asks for have moved enough (:func:`revise_host_pages`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

__all__ = ["COMPRESS_MAX_RATIO", "COMPRESS_WORKING_BYTES_PER_PAGE_BYTE", "CompressChoice",
           "HOST_PAGES_REVISE_GAIN", "HOST_PAGE_REUSE_DECAY", "MIN_READAHEAD_PAGES",
           "READAHEAD_COVER_SECONDS", "compress_fits_memory", "compress_pages",
           "readahead_pages", "revise_host_pages"]

#: A build keeps its pages compressed only when they take at most this
#: fraction of the plain bytes.  The codec gives 0.27-0.37 on web-NotreDame,
#: soc-Slashdot0811, ca-HepPh and rmat/kron graphs of scale 20-22
#: (``bench/results/compressed-pages-devvm-2026-12-02.md``); a graph near 1
#: (random ids, no locality) saves too little to be worth a second format on
#: every path that reads pages.
COMPRESS_MAX_RATIO = 0.75

#: Working memory of compressing one page whole, per plain byte of the page:
#: its sources copied, its edge stream and its image (out-of-core builds of
#: 3.2-4M edges in one page under a 32 MiB budget measured 1.6x the page
#: above the plain build, tests/bad_inputs/test_store_safety.py).
COMPRESS_WORKING_BYTES_PER_PAGE_BYTE = 2

#: Seconds of stall the read-ahead hides beside one page's read: a consumer
#: that pauses between pages (an iteration's end, a checkpoint) or a disk
#: that pauses (a virtio host's scheduling, a flush) shows gaps of a few to
#: tens of milliseconds; kron24 from one virtio disk read at 1.1-1.7 GB/s
#: whatever the readers (bench/results/compressed-pages-devvm-2026-12-02.md).
READAHEAD_COVER_SECONDS = 0.02

#: Pages a reader's window holds at least: the one the consumer holds and the
#: one being read.
MIN_READAHEAD_PAGES = 2


@dataclass(frozen=True)
class CompressChoice:
    """A build's choice of page format, with what it was made from.

    Attributes
    ----------
    compress : bool
        Pages written compressed.
    reason : str
        One line: forced, or the measurement that decided.
    ratio : float or None
        Compressed over plain bytes of the pages measured.
    decode_bytes_per_s : float or None
        Plain bytes this host's page reader decodes a second.
    disk_bytes_per_s : float or None
        Sequential read speed of the store's directories.
    sample_edges : int
        Edges of the pages measured (0: nothing measured).
    """

    compress: bool
    reason: str
    ratio: float | None = None
    decode_bytes_per_s: float | None = None
    disk_bytes_per_s: float | None = None
    sample_edges: int = 0

    def record(self) -> dict:
        """The choice as the store's manifest keeps it (``layout.compress``)."""
        return asdict(self)


def compress_pages(compressed_bytes: int, plain_bytes: int,
                   decode_bytes_per_s: float | Callable[[], float],
                   disk_bytes_per_s: float | Callable[[], float], *,
                   max_ratio: float = COMPRESS_MAX_RATIO) -> CompressChoice:
    """Whether a build keeps its pages compressed, from a measurement on its pages.

    A page of ``P`` plain bytes stored in ``C`` read from a disk of speed
    ``d`` and decoded at ``r`` plain bytes a second costs ``C / d + P / r``
    against ``P / d`` plain: compression pays when decoding the page takes
    no longer than reading the bytes it saves, ``P / r <= (P - C) / d``, and
    when ``C <= max_ratio * P`` (:data:`COMPRESS_MAX_RATIO`).  Serial
    costs: the page reader overlaps decoding with the next reads, so this
    is the safe side.  The GPU decodes the pages it streams on the device
    (about 50 times the bus's bandwidth), so the host's rate is what may
    lose.

    Parameters
    ----------
    compressed_bytes, plain_bytes : int
        Bytes of the measured pages compressed and plain (> 0).
    decode_bytes_per_s : float or callable
        Plain bytes the host's page reader decodes a second; a callable
        measures it, called only where the ratio leaves the choice open.
    disk_bytes_per_s : float or callable
        The storage directories' sequential read speed (a callable: as
        ``decode_bytes_per_s``).
    max_ratio : float
        The largest compressed/plain ratio kept.
    """
    ratio = compressed_bytes / plain_bytes if plain_bytes > 0 else 1.0
    if ratio > max_ratio:
        return CompressChoice(False, f"plain: compressed pages take {ratio:.2f} of the plain "
                                     f"bytes (more than {max_ratio:.2f})", ratio=round(ratio, 4))
    decode_bytes_per_s = float(decode_bytes_per_s() if callable(decode_bytes_per_s)
                               else decode_bytes_per_s)
    disk_bytes_per_s = float(disk_bytes_per_s() if callable(disk_bytes_per_s)
                             else disk_bytes_per_s)
    measured = dict(ratio=round(ratio, 4), decode_bytes_per_s=decode_bytes_per_s,
                    disk_bytes_per_s=disk_bytes_per_s)
    facts = (f"{ratio:.2f} of the plain bytes, decoded at {decode_bytes_per_s / 1e9:.2f} GB/s, "
             f"disk {disk_bytes_per_s / 1e9:.2f} GB/s")
    # decode P at r no slower than reading the P - C saved at d
    if decode_bytes_per_s * (1.0 - ratio) < disk_bytes_per_s:
        return CompressChoice(False, f"plain: compressed pages take {facts}; decoding a page "
                                     "takes longer than reading the bytes it saves", **measured)
    return CompressChoice(True, f"compressed: {facts}", **measured)


def compress_fits_memory(largest_page_bytes: int, memory_budget: int | None) -> bool:
    """Whether an out-of-core build may compress its pages: a page is encoded
    whole, which takes :data:`COMPRESS_WORKING_BYTES_PER_PAGE_BYTE` times its
    plain bytes, and that must stay within half the build's ``memory_budget``
    (the other half holds the CSC index and vertex arrays being written).
    None: a build in memory, whose pages are slices of a CSC it holds."""
    if memory_budget is None:
        return True
    return COMPRESS_WORKING_BYTES_PER_PAGE_BYTE * largest_page_bytes <= memory_budget // 2


def readahead_pages(buffer_bytes: int, disk_bytes_per_s: float,
                    consumer_bytes_per_s: float | None = None, *,
                    reads_in_flight_bytes: int = 0,
                    cover_seconds: float = READAHEAD_COVER_SECONDS) -> int:
    """Pages a page reader keeps in flight, the one the consumer holds included.

    By Little's law the bytes in flight are the stream's rate times the
    latency they cover: the stream runs at ``rate = min(disk, consumer)``
    (an unknown consumer: as fast as the disk, the case where read-ahead
    matters), a page's read takes ``buffer_bytes / disk``, and the window
    also hides ``cover_seconds`` of stall (:data:`READAHEAD_COVER_SECONDS`).
    The window is one page for the consumer, plus ``ceil(rate * (buffer /
    disk + cover) / buffer)`` pages being read, and at least enough pages to
    keep every reader thread's read going (``reads_in_flight_bytes``, the
    directories' threads times a block each), and at least
    :data:`MIN_READAHEAD_PAGES`.  The caller bounds it by the host budget.

    Parameters
    ----------
    buffer_bytes : int
        One page buffer (the largest page).
    disk_bytes_per_s : float
        The storage directories' read speed together (> 0).
    consumer_bytes_per_s : float, optional
        Page bytes the consumer processes a second; None: unknown.
    reads_in_flight_bytes : int
        Bytes the reader threads read at once.
    cover_seconds : float
        Stall to hide, seconds.
    """
    rate = disk_bytes_per_s if consumer_bytes_per_s is None \
        else min(disk_bytes_per_s, consumer_bytes_per_s)
    latency = buffer_bytes / disk_bytes_per_s + cover_seconds
    reading = math.ceil(rate * latency / buffer_bytes)
    parallel = math.ceil(reads_in_flight_bytes / buffer_bytes)
    return max(MIN_READAHEAD_PAGES, 1 + max(reading, parallel))


#: Weight of the past in a page's reuse score: each iteration the score is
#: ``decay * score + (1 - decay) * asked`` (asked: 1 if the iteration read
#: the page, else 0), the chance that the next iteration asks for it.  0.5
#: forgets a level of a BFS in a few iterations (a frontier moves on level by
#: level) and keeps a page asked every other iteration above one never asked.
HOST_PAGE_REUSE_DECAY = 0.5

#: The host's pages are revised only when the revised set is expected to
#: spare this much more than the current one (as a fraction of what the
#: current one spares, or of one page's bytes when it spares nothing): scores
#: that wobble must not move pages back and forth.
HOST_PAGES_REVISE_GAIN = 0.1


def revise_host_pages(kept_saving: float, revised_saving: float, page_bytes: float,
                      revised_pages: int, *,
                      min_gain: float = HOST_PAGES_REVISE_GAIN) -> tuple[bool, dict]:
    """Whether the pages the host budget holds change to ``revised_pages``
    new ones between two iterations, and the inputs that decided.

    A page's expected saving is its reuse score (:data:`HOST_PAGE_REUSE_DECAY`)
    times the disk bytes its read takes; a set of pages spares the sum.
    Revising costs no read of its own: a page that enters the host's pages
    is read when an iteration first asks for it (it would be read then
    anyway) and stays; one that leaves is dropped.  So the set changes when
    the revised one spares more than ``kept_saving`` by ``min_gain`` of it
    (or of ``page_bytes``, the mean page's disk bytes, when it spares
    nothing), the hysteresis that keeps scores that wobble from moving pages.

    Parameters
    ----------
    kept_saving, revised_saving : float
        Expected disk bytes spared an iteration by the current and by the
        revised set.
    page_bytes : float
        Disk bytes of the mean page.
    revised_pages : int
        Pages the revised set holds that the current does not.
    min_gain : float
        The gain that pays (:data:`HOST_PAGES_REVISE_GAIN`).
    """
    floor = min_gain * (kept_saving if kept_saving > 0 else page_bytes)
    revise = bool(revised_pages > 0 and revised_saving - kept_saving > floor)
    return revise, {"kept_saving_bytes": float(kept_saving),
                    "revised_saving_bytes": float(revised_saving),
                    "min_gain": min_gain, "entering_pages": int(revised_pages)}
