"""Three tiers of pages, one placement: the GPU's budget, the host's, or the disk (Garaph section 2.2).

Garaph keeps the graph in host memory when it fits and otherwise uses
secondary storage "as memory extension" (sections 1 and 2.2); with a GPU
that keeps some pages in its own memory there are three tiers.  A
:class:`PagePlacement` puts each page in exactly one of them:

* ``GPU``: kept on the device for the run (the GPU's plan chose it); never
  read from the host again, so the host budget does not hold it;
* ``HOST``: held by the host budget's page cache, read from disk at most
  once;
* ``DISK``: read from the storage directories every iteration that needs it.

:func:`place_pages` fills the host's room with pages the GPU does not keep:
by default the longest prefix of them in page order (every iteration of a
pull walks the pages in order, and a fixed set does not thrash,
:mod:`~garaphpy.storage.host_budget`); given each page's reuse score
(:class:`PageReuse`, the chance the next iteration asks for it, HyTGraph's
per-partition choice), the pages most likely asked for first.  What an
iteration must read from disk is then the pages it needs that are in
neither budget (:meth:`PagePlacement.disk_reads`), each once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from . import decisions

__all__ = ["DISK", "GPU", "HOST", "TIER_NAMES", "PagePlacement", "PageReuse",
           "place_pages", "pages_holding"]

GPU, HOST, DISK = 0, 1, 2
TIER_NAMES = ("gpu", "host", "disk")


@dataclass(frozen=True)
class PagePlacement:
    """Each page's tier (one per page: no page is in two budgets).

    Attributes
    ----------
    tiers : numpy.ndarray of int8
        Per page, :data:`GPU`, :data:`HOST` or :data:`DISK`.
    page_bytes : numpy.ndarray of int64
        Host bytes of each page image (what the host's room is counted in).
    disk_bytes : numpy.ndarray of int64
        Bytes a read of each page moves from disk (compressed pages: as stored).
    host_room : int
        Host bytes the page cache may hold.
    """

    tiers: np.ndarray
    page_bytes: np.ndarray
    disk_bytes: np.ndarray
    host_room: int

    def pages(self, tier: int) -> np.ndarray:
        """The pages of ``tier``, in page order."""
        return np.flatnonzero(self.tiers == tier)

    @property
    def host_bytes(self) -> int:
        """Host bytes of the pages the host budget holds."""
        return int(self.page_bytes[self.tiers == HOST].sum())

    def disk_reads(self, needed: np.ndarray | None = None) -> np.ndarray:
        """The pages an iteration reads from disk: those on disk only that it
        needs (``needed``, a bool per page; None: every page)."""
        on_disk = self.tiers == DISK
        if needed is not None:
            on_disk &= np.asarray(needed, bool)
        return np.flatnonzero(on_disk)

    def must_move(self, needed: np.ndarray | None = None) -> int:
        """Disk bytes of :meth:`disk_reads`."""
        return int(self.disk_bytes[self.disk_reads(needed)].sum())

    def record(self) -> dict:
        """Page counts and bytes per tier, for a run's records."""
        entry = {}
        for tier, name in enumerate(TIER_NAMES):
            chosen = self.tiers == tier
            entry[f"{name}_pages"] = int(chosen.sum())
            entry[f"{name}_bytes"] = int(self.disk_bytes[chosen].sum())
        entry["host_room"] = int(self.host_room)
        return entry


def place_pages(page_bytes: Sequence[int], host_room: int, gpu_kept: Iterable[int] = (), *,
                reuse: np.ndarray | None = None, disk_bytes: Sequence[int] | None = None,
                current: np.ndarray | None = None) -> PagePlacement:
    """Each page in one tier: the GPU's kept pages on the GPU, as many others
    as ``host_room`` holds in the host, the rest on disk.

    Parameters
    ----------
    page_bytes : sequence of int
        Host bytes of each page image, in page order.
    host_room : int
        Bytes of page images the host budget holds (>= 0).
    gpu_kept : iterable of int
        Pages the GPU keeps for the run.
    reuse : numpy.ndarray of float, optional
        Per page, its reuse score (:class:`PageReuse`).  None: the longest
        prefix, in page order, of the pages the GPU does not keep.  Given:
        the pages of highest expected saving (score times disk bytes) per
        host byte first, ties to the pages in ``current``'s host tier, then
        page order; a page that does not fit is passed over for the next.
    disk_bytes : sequence of int, optional
        Disk bytes of each page (default ``page_bytes``).
    current : numpy.ndarray of int8, optional
        The tiers placed before (ties go to its host pages).
    """
    sizes = np.asarray(page_bytes, np.int64)
    if host_room < 0:
        raise ConfigError(f"host_room={host_room}: expected a number of bytes >= 0")
    disk = sizes if disk_bytes is None else np.asarray(disk_bytes, np.int64)
    tiers = np.full(sizes.size, DISK, np.int8)
    kept = np.fromiter((int(k) for k in gpu_kept), np.int64)
    if kept.size and (kept.min() < 0 or kept.max() >= sizes.size):
        raise ConfigError(f"gpu_kept: pages out of range 0..{sizes.size - 1}")
    tiers[kept] = GPU
    others = np.flatnonzero(tiers != GPU)
    if reuse is None:
        # the longest prefix of the others that fits
        count = int(np.searchsorted(np.cumsum(sizes[others]), host_room, side="right"))
        tiers[others[:count]] = HOST
    else:
        # disk bytes spared an iteration per host byte held
        density = (np.asarray(reuse, np.float64)[others] * disk[others]
                   / np.maximum(sizes[others], 1))
        was_host = (np.zeros(others.size, bool) if current is None
                    else np.asarray(current)[others] == HOST)
        # the densest saving first, then the current host pages, then page order
        ranked = others[np.lexsort((others, ~was_host, -density))]
        room = int(host_room)
        for k in ranked.tolist():
            if sizes[k] <= room:
                tiers[k] = HOST
                room -= int(sizes[k])
    return PagePlacement(tiers, sizes, disk, int(host_room))


class PageReuse:
    """Per page, the chance the next iteration asks for it: an exponential
    average of whether each iteration did (:data:`~garaphpy.storage.decisions.HOST_PAGE_REUSE_DECAY`).

    Parameters
    ----------
    num_pages : int
    decay : float
        Weight of the past, in [0, 1).
    """

    def __init__(self, num_pages: int, decay: float = decisions.HOST_PAGE_REUSE_DECAY):
        if not 0.0 <= decay < 1.0:
            raise ConfigError(f"decay={decay!r}: expected a number in [0, 1)")
        self.decay = decay
        self.scores = np.zeros(num_pages, np.float64)
        self.iterations = 0

    def note(self, asked: np.ndarray) -> None:
        """One iteration's pages: ``asked[k]`` whether it read page ``k``."""
        asked = np.asarray(asked, bool)
        if self.iterations == 0:
            self.scores = asked.astype(np.float64)
        else:
            self.scores = self.decay * self.scores + (1.0 - self.decay) * asked
        self.iterations += 1

    def saving(self, placement: PagePlacement) -> float:
        """Expected disk bytes an iteration spares by the host pages of ``placement``."""
        host = placement.tiers == HOST
        return float((self.scores[host] * placement.disk_bytes[host]).sum())


def revised_placement(placement: PagePlacement, reuse: PageReuse) -> tuple[PagePlacement, dict]:
    """``placement`` with its host pages chosen again by ``reuse`` where
    :func:`~garaphpy.storage.decisions.revise_host_pages` says it pays (the
    GPU's pages stay); returns the placement (``placement`` itself when not
    revised) and the decision's entry (``choice`` and its inputs)."""
    revised = place_pages(placement.page_bytes, placement.host_room,
                          placement.pages(GPU), reuse=reuse.scores,
                          disk_bytes=placement.disk_bytes, current=placement.tiers)
    entering = int(((revised.tiers == HOST) & (placement.tiers != HOST)).sum())
    mean_page = float(placement.disk_bytes.mean()) if placement.disk_bytes.size else 0.0
    revise, entry = decisions.revise_host_pages(reuse.saving(placement), reuse.saving(revised),
                                                mean_page, entering)
    entry["choice"] = revise
    return (revised if revise else placement), entry


def pages_holding(flags: np.ndarray, page_first_vertex: np.ndarray,
                  page_end_vertex: np.ndarray) -> np.ndarray:
    """Per page, whether a vertex of its range ``[first, end)`` is flagged."""
    below = np.zeros(flags.size + 1, np.int64)
    np.cumsum(flags, out=below[1:])
    return below[np.asarray(page_end_vertex, np.int64)] > \
        below[np.asarray(page_first_vertex, np.int64)]
