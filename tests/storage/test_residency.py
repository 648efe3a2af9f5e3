"""Which bytes of an array are in host memory: ``mincore(2)`` against what the
test did to the page cache.

A file written, synced and dropped from the page cache
(``posix_fadvise(DONTNEED)``), then mapped as a store maps its arrays, is
cold; reading part of it makes at least that part resident, reading all of
it makes it all resident.  Arrays in written anonymous memory are resident.
Where the platform has no ``mincore`` the answer is None.  The dropping
tests skip on file systems whose pages the kernel keeps in memory (tmpfs).
"""

from __future__ import annotations

import numpy as np
import pytest

from garaphpy.storage import residency
from garaphpy.storage.page_io import drop_from_page_cache

pytestmark = pytest.mark.skipif(residency._mincore() is None, reason="no mincore here")


def dropped_map(path, values: np.ndarray) -> np.ndarray:
    """``values`` written to ``path``, dropped from the page cache and mapped
    copy-on-write (as :meth:`Store.open` maps a store's arrays)."""
    values.tofile(path)
    drop_from_page_cache(path)
    mapped = np.memmap(path, values.dtype, mode="c", shape=values.shape).view(np.ndarray)
    if residency.cold_bytes([mapped]) == 0:
        pytest.skip("this file system keeps the file's pages in memory")
    return mapped


def test_a_dropped_file_is_cold_until_read(tmp_path):
    values = np.arange(4 << 20, dtype=np.int64)          # 32 MiB
    mapped = dropped_map(tmp_path / "out_targets.bin", values)
    cold = residency.cold_bytes([mapped])
    # read-ahead by an earlier reader may have left a little; most is cold
    assert values.nbytes // 2 < cold <= values.nbytes
    part = mapped[: 1 << 20]                           # the first 8 MiB
    assert part.sum() == values[: 1 << 20].sum()
    assert residency.resident_bytes(part) == part.nbytes
    assert residency.cold_bytes([mapped]) <= values.nbytes - part.nbytes
    assert mapped.sum() == values.sum()
    assert residency.cold_bytes([mapped]) == 0
    assert residency.resident_bytes(mapped) == mapped.nbytes


def test_written_arrays_are_resident_and_counts_stay_within_the_array():
    written = np.ones(3 * residency.PAGE_BYTES + 5, np.uint8)
    assert residency.cold_bytes([written]) == 0
    # a slice that starts and ends inside pages counts at most its own bytes
    assert residency.resident_bytes(written[7:-7]) == written.nbytes - 14
    assert residency.resident_bytes(written[:0]) == 0
    assert residency.cold_bytes([]) == 0


def test_without_mincore_nothing_is_known(monkeypatch):
    monkeypatch.setattr(residency, "_mincore", lambda: None)
    assert residency.resident_bytes(np.ones(10)) is None
    assert residency.cold_bytes([np.ones(10)]) is None
    assert residency.resident_bytes(np.ones(0)) == 0
