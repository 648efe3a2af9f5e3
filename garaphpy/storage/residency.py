"""Which bytes of a store's arrays are in host memory now (Garaph section 2.2's tiers).

A store maps its vertex-indexed arrays and the out-edge CSR from its files
(:func:`~garaphpy.storage.store.Store.open`), so an array is read from storage
the first time its pages are touched, unless the operating system's page
cache holds them already.  A processor that has not yet touched the
out-edge CSR (the CPU of a hybrid run whose GPU holds the pages) pays those
reads in its first iterations: on kron24 from a dropped page cache, the
CPU's BFS read 1.98 GB in 6 iterations (129 ms an iteration against 9.2 in
memory, H200 host, 2026-12-05).  :func:`cold_bytes` asks the kernel
(``mincore(2)``) which of an array's pages are resident, so a choice between
processors can price what the other would read.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import mmap
import sys

import numpy as np

PAGE_BYTES = mmap.PAGESIZE
#: Windows of pages asked of the kernel for a large array, and pages a window.
SAMPLED_WINDOWS = 256
WINDOW_PAGES = 16


@functools.lru_cache(maxsize=1)
def _mincore():
    """libc's ``mincore``, or None where the platform has none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        mincore = libc.mincore
    except (OSError, AttributeError):
        return None
    mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    mincore.restype = ctypes.c_int
    return mincore


def resident_bytes(array: np.ndarray) -> int | None:
    """The bytes of ``array`` whose memory pages are resident in host memory
    (for a file mapping: in the page cache), or None where the kernel cannot
    say (no ``mincore``, or it refused the range).

    The kernel looks each page up, about 150 ns a page where the file is
    cached but not yet mapped (a 256 MB array: 10 ms on the dev VM), so an
    array over ``SAMPLED_WINDOWS`` windows of ``WINDOW_PAGES`` pages is
    estimated from that many windows spread evenly over it.  Pages only
    partly the array's count in full, at most the array's ``nbytes`` in all.
    """
    nbytes = int(array.nbytes)
    if nbytes == 0:
        return 0
    mincore = _mincore()
    if mincore is None:
        return None
    address = int(array.ctypes.data)
    start = address - address % PAGE_BYTES
    num_pages = -(-(address + nbytes - start) // PAGE_BYTES)
    if num_pages <= SAMPLED_WINDOWS * WINDOW_PAGES:
        firsts, window = np.zeros(1, np.int64), num_pages
    else:
        firsts = np.linspace(0, num_pages - WINDOW_PAGES, SAMPLED_WINDOWS).astype(np.int64)
        window = WINDOW_PAGES
    flags = np.zeros((firsts.size, window), np.uint8)
    row = flags.ctypes.data
    for first in firsts.tolist():
        if mincore(start + first * PAGE_BYTES, window * PAGE_BYTES, row) != 0:
            return None
        row += window
    resident = int(np.count_nonzero(flags & 1))
    return min(round(resident * num_pages / flags.size) * PAGE_BYTES, nbytes)


def cold_bytes(arrays) -> int | None:
    """The bytes of ``arrays`` not resident in host memory (:func:`resident_bytes`),
    or None where the kernel cannot say for one of them."""
    cold = 0
    for array in arrays:
        resident = resident_bytes(array)
        if resident is None:
            return None
        cold += int(array.nbytes) - resident
    return cold
