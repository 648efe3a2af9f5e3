"""Which pages stay on the GPU, and how each other page reaches it (beyond Garaph section 5.2).

Garaph (section 5.2) streams every page every iteration when the pages do
not all fit the GPU.  Here:

* **partial residency** (:func:`resident_pages`): the pages the budget holds
  beside the stream buffers stay on the device for the whole run, chosen by
  ``config.GPU_RESIDENT_ORDER``; only the others stream;
* **a choice per page and iteration** (:func:`choose_transfers`), for
  programs whose vertices follow from their in-neighbours that changed
  alone (``VertexProgram.apply_keeps_best``: min and max programs, where
  combining an edge twice changes nothing):

  - ``skip``: no active vertex has an edge into the page (exact for those
    programs; a resident page is skipped too);
  - ``copy``: the page's whole image over the bus (Garaph's path);
  - ``compact``: the active vertices' edges into the page, gathered by host
    threads into a pinned buffer and pushed with the sum's atomics
    (Subway's SubCSR, Sabet et al. EuroSys'20 section 3);
  - ``zero-copy``: the GPU reads the active vertices' edges from pinned host
    memory itself, a warp's lanes on consecutive edges (EMOGI, Min et al.
    VLDB'21; HyTGraph's implicit transfers, section 4).

  The choice prices each with rates it measures as the run goes (bytes per
  second over the bus and of zero-copy reads, edges per second of the host
  gather), in the manner of the dispatcher's alpha (section 5.1); a forced
  choice (``config.GPU_TRANSFER``) is for study.

Programs of other kinds (PageRank's sums) copy every streamed page.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ... import config
from ...errors import ConfigError

RESIDENT, SKIP, COPY, COMPACT, ZERO_COPY = range(5)
#: What each code means, in the iteration records.
TRANSFER_NAMES = ("resident", "skip", "copy", "compact", "zero-copy")
#: What ``config.GPU_TRANSFER`` may say.
FORCED_CHOICES = ("auto", "copy", "skip", "compact", "zero-copy")
RESIDENT_ORDERS = ("edges", "order")


def resident_pages(page_sizes, page_edges, room: int, order: str = "edges") -> np.ndarray:
    """The pages kept on the device: as many as ``room`` bytes hold, in ``order``.

    Parameters
    ----------
    page_sizes, page_edges : sequences of int
        Each page's image bytes and edges.
    room : int
        Device bytes left for resident pages.
    order : {"edges", "order"}
        "edges": the most edges per byte first (a graph's pages differ in
        the padding of their arrays and their last partial page); "order":
        the store's order.  The choice is greedy: a page that does not fit
        is passed over for later, smaller ones.

    Returns
    -------
    numpy.ndarray of bool
        Per page, whether it is resident; never more than ``room`` bytes.
    """
    if order not in RESIDENT_ORDERS:
        raise ConfigError(f"GPU_RESIDENT_ORDER={order!r}: expected one of "
                          f"{', '.join(RESIDENT_ORDERS)}")
    sizes = np.asarray(page_sizes, np.int64)
    edges = np.asarray(page_edges, np.int64)
    chosen = np.zeros(sizes.size, bool)
    if order == "edges":
        density = edges / np.maximum(sizes, 1)
        ranking = np.lexsort((np.arange(sizes.size), -density))
    else:
        ranking = np.arange(sizes.size)
    left = int(room)
    for page in ranking.tolist():
        if sizes[page] <= left:
            chosen[page] = True
            left -= int(sizes[page])
    return chosen



def resident_tiers(page_sizes, packed_sizes, page_edges, room: int,
                   order: str = "edges") -> tuple[np.ndarray, np.ndarray]:
    """The pages kept on the device packed, and those kept as they are.

    First as many pages as ``room`` holds packed (:func:`resident_pages` over
    the packed sizes: the fewer pages stream, the fewer bytes cross the bus),
    then, with the room left, packed pages kept as they are instead (the most
    edges per extra byte first: they need no unpacking before their pull).
    A page that does not pack smaller (its packed size is its size) is kept
    as it is.

    Returns
    -------
    (numpy.ndarray of bool, numpy.ndarray of bool)
        Per page: kept as it is; kept packed.  Never more than ``room`` bytes.
    """
    sizes = np.asarray(page_sizes, np.int64)
    packed_sizes = np.minimum(np.asarray(packed_sizes, np.int64), sizes)
    edges = np.asarray(page_edges, np.int64)
    packed = resident_pages(packed_sizes, edges, room, order)
    left = int(room) - int(packed_sizes[packed].sum())
    extra = sizes - packed_sizes
    whole = packed & (extra == 0)
    packed &= ~whole
    candidates = np.flatnonzero(packed)
    if candidates.size:
        density = edges[candidates] / np.maximum(extra[candidates], 1)
        for page in candidates[np.lexsort((candidates, -density))].tolist():
            if extra[page] <= left:
                whole[page], packed[page] = True, False
                left -= int(extra[page])
    return whole, packed

def pages_kept_until_sparse(kept, packed_sizes, page_edges, room: int,
                            order: str = "edges") -> np.ndarray:
    """The pages a plan streams that are kept on the device packed, in ``room``
    bytes, until the selective transfers' arrays take that room (the plan's
    own kept pages stay as they are: releasing these leaves the plan made with
    the arrays' room).

    Parameters
    ----------
    kept : sequence of bool
        Per page, kept on the device by the plan (as it is or packed).
    packed_sizes, page_edges : sequences of int
        Each page's packed bytes and edges.
    room : int
        The arrays' bytes and what the plan left free.
    order : {"edges", "order"}
        As :func:`resident_pages`.

    Returns
    -------
    numpy.ndarray of bool
        Per page, kept packed until then; never more than ``room`` bytes.
    """
    kept = np.asarray(kept, bool)
    extra = np.zeros(kept.size, bool)
    candidates = np.flatnonzero(~kept)
    if candidates.size and room > 0:
        chosen = resident_pages(np.asarray(packed_sizes, np.int64)[candidates],
                                np.asarray(page_edges, np.int64)[candidates], room, order)
        extra[candidates[chosen]] = True
    return extra


@dataclass
class TransferRates:
    """The rates the transfer choice prices with, learnt as the run goes.

    Attributes
    ----------
    bus : float
        Bytes per second of copies to the device (pinned memory).
    gather : float
        Edges per second the host threads gather into the compacted buffer.
    zero_copy : float
        Bytes per second the GPU reads from pinned host memory itself.
    count : float
        Edges per second the host counts per page (the frontier's out-edges;
        of a vertex whose targets are sorted, at most
        :data:`~garaphpy.kernels.gpu_subgraph.SORTED_RUN_EDGES` count).
    pull, packed_pull : float
        Edges per second the GPU pulls a page kept on the device: as it is,
        and packed.
    """

    bus: float = field(default_factory=lambda: config.GPU_BUS_BYTES_PER_SECOND)
    gather: float = field(default_factory=lambda: config.GPU_GATHER_EDGES_PER_SECOND)
    zero_copy: float = field(default_factory=lambda: config.GPU_ZERO_COPY_BYTES_PER_SECOND)
    count: float = field(default_factory=lambda: config.GPU_GATHER_EDGES_PER_SECOND)
    pull: float = field(default_factory=lambda: config.GPU_PULL_EDGES_PER_SECOND)
    packed_pull: float = field(default_factory=lambda: config.GPU_PACKED_PULL_EDGES_PER_SECOND)

    #: Shortest measurement learnt from (shorter ones are mostly launch time).
    MIN_SECONDS = 200e-6

    def learn(self, name: str, amount: float, seconds: float,
              smoothing: float | None = None) -> bool:
        """Fold one measurement (``amount`` units in ``seconds``) into rate ``name``
        (``smoothing``: default ``config.GPU_TRANSFER_SMOOTHING``).

        Returns whether it was used (too short a measurement is not).
        """
        if smoothing is None:
            smoothing = config.GPU_TRANSFER_SMOOTHING
        if seconds < self.MIN_SECONDS or amount <= 0:
            return False
        measured = amount / seconds
        setattr(self, name, (1.0 - smoothing) * getattr(self, name) + smoothing * measured)
        return True

    def as_dict(self) -> dict:
        return {"bus": self.bus, "gather": self.gather, "zero_copy": self.zero_copy,
                "count": self.count, "pull": self.pull, "packed_pull": self.packed_pull}


def edge_bytes(vertex_bytes: int, weight_bytes: int) -> dict:
    """Bytes that cross the bus per active edge: a compacted edge (target and
    value; its source and offset are per vertex) and a zero-copy edge (the
    target, the value where the page is read, in 32-byte sectors that a
    warp's consecutive lanes fill)."""
    return {"compact": vertex_bytes + weight_bytes, "zero-copy": vertex_bytes + weight_bytes}


def choose_transfers(active_edges: np.ndarray, page_bytes: np.ndarray, resident: np.ndarray,
                     rates: TransferRates, *, exact: bool, forced: str = "auto",
                     bytes_per_edge: dict | None = None, compact_capacity: int = 2 ** 62,
                     total_active_edges: int | None = None, vertex_bytes: int = 4,
                     pull_seconds: np.ndarray | None = None,
                     pushes: tuple = (COMPACT, ZERO_COPY),
                     read_seconds: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """Per page, how its work reaches the GPU this iteration.

    A streamed page is skipped, copied, compacted or read in place; a page
    kept on the device is skipped or pulled, or, given its pull's cost
    (``pull_seconds``) and left to the automatic choice, its active edges are
    pushed instead when that costs less (a sparse frontier needs a few of a
    page's edges: HyTGraph's choice between a partition's whole work and its
    active part, made for resident partitions too).

    Parameters
    ----------
    active_edges : int64 array or None
        Per page, the frontier's out-edges into it (None: not counted; every
        page is taken as reached).
    page_bytes : int64 array
        Each page's image size.
    resident : bool array
        Pages kept on the device.
    rates : TransferRates
    exact : bool
        Whether skipping and pushing active edges gives the pull's result
        (the program declares ``apply_keeps_best``); otherwise every
        streamed page is copied.
    forced : {"auto", "copy", "skip", "compact", "zero-copy"}
    bytes_per_edge : dict
        :func:`edge_bytes`.
    compact_capacity : int
        Edges the device's compacted buffer holds: pages past it are copied.
    total_active_edges : int
        The frontier's out-edges in all (zero-copy reads every target of an
        active vertex to find those into its pages).
    vertex_bytes : int
        Bytes of a vertex id.
    pull_seconds : float array, optional
        Per page, the GPU's time to pull it when kept on the device (None:
        kept pages are pulled whenever reached).
    pushes : tuple of int
        The pushes available (``COMPACT``, ``ZERO_COPY``); a forced push that
        is not is taken as ``"skip"``.
    read_seconds : float array, optional
        Per page, the time its read from disk takes before a copy (pages in
        neither the GPU's nor the host's budget; Garaph section 2.2): a copy
        costs it, a skip or a push (from the out-edges in host memory) not.

    Returns
    -------
    (numpy.ndarray of int8, dict)
        The codes (:data:`TRANSFER_NAMES`) and the predicted seconds of the
        streamed pages' work and the kept pages' pulls (``{"seconds": ...}``)
        with the choice's counts.
    """
    if forced not in FORCED_CHOICES:
        raise ConfigError(f"GPU_TRANSFER={forced!r}: expected one of "
                          f"{', '.join(FORCED_CHOICES)}")
    page_bytes = np.asarray(page_bytes, np.int64)
    resident = np.asarray(resident, bool)
    choices = np.where(resident, RESIDENT, COPY).astype(np.int8)
    if bytes_per_edge is None:
        bytes_per_edge = edge_bytes(vertex_bytes, 0)
    copy_seconds = page_bytes / rates.bus
    if read_seconds is not None:
        copy_seconds = copy_seconds + np.asarray(read_seconds, np.float64)
    if not exact or forced == "copy" or active_edges is None:
        return choices, _summary(choices, float(copy_seconds[~resident].sum()))
    active_edges = np.asarray(active_edges, np.int64)
    unreached = active_edges == 0
    choices[unreached] = SKIP
    streamed = ~resident & ~unreached
    compact_seconds = active_edges * (1.0 / rates.gather
                                      + bytes_per_edge["compact"] / rates.bus)
    zero_copy_seconds = active_edges * (bytes_per_edge["zero-copy"] / rates.zero_copy)
    if COMPACT not in pushes:
        compact_seconds = np.full(active_edges.size, np.inf)
    if ZERO_COPY not in pushes:
        zero_copy_seconds = np.full(active_edges.size, np.inf)
    if (forced == "compact" and COMPACT not in pushes) or (
            forced == "zero-copy" and ZERO_COPY not in pushes):
        forced = "skip"
    # zero-copy also reads the targets of the active edges into the other pages
    total = int(active_edges.sum() if total_active_edges is None else total_active_edges)
    zero_copy_fixed = total * vertex_bytes / rates.zero_copy
    if forced == "compact":
        choices[streamed] = COMPACT
    elif forced == "zero-copy":
        choices[streamed] = ZERO_COPY
    # each page's whole work: its copy when streamed, its pull when kept
    whole_code = np.where(resident, RESIDENT, COPY).astype(np.int8)
    whole_seconds = copy_seconds.astype(np.float64)
    if pull_seconds is not None:
        whole_seconds = np.where(resident, np.asarray(pull_seconds, np.float64),
                                 whole_seconds)
    if forced == "auto":
        candidates = streamed | (resident & ~unreached if pull_seconds is not None
                                 else np.zeros_like(streamed))
        costs = np.stack([whole_seconds, compact_seconds, zero_copy_seconds])
        best = np.argmin(costs, axis=0)
        pushed = np.array([-1, COMPACT, ZERO_COPY], np.int8)[best]
        choices[candidates] = np.where(best == 0, whole_code, pushed)[candidates]
        # zero-copy is worth it only when what it saves covers its fixed reads
        zero_copy = choices == ZERO_COPY
        if zero_copy.any():
            instead = np.minimum(whole_seconds, compact_seconds)[zero_copy]
            if zero_copy_seconds[zero_copy].sum() + zero_copy_fixed >= instead.sum():
                choices[zero_copy] = np.where(
                    whole_seconds[zero_copy] <= compact_seconds[zero_copy],
                    whole_code[zero_copy], COMPACT)
    # the compacted buffer's room: the pages that save the most go first
    compact = np.flatnonzero(choices == COMPACT)
    if compact.size and int(active_edges[compact].sum()) > compact_capacity:
        saving = whole_seconds[compact] - compact_seconds[compact]
        kept = 0
        for page in compact[np.argsort(-saving, kind="stable")].tolist():
            if kept + int(active_edges[page]) <= compact_capacity:
                kept += int(active_edges[page])
            else:
                choices[page] = whole_code[page]
    seconds = float(np.where(choices == COPY, copy_seconds, 0.0).sum()
                    + np.where(choices == COMPACT, compact_seconds, 0.0).sum()
                    + np.where(choices == ZERO_COPY, zero_copy_seconds, 0.0).sum())
    if pull_seconds is not None:
        seconds += float(np.where(choices == RESIDENT, whole_seconds, 0.0).sum())
    if (choices == ZERO_COPY).any():
        seconds += zero_copy_fixed
    return choices, _summary(choices, seconds)


def _summary(choices: np.ndarray, seconds: float) -> dict:
    counts = np.bincount(choices, minlength=len(TRANSFER_NAMES))
    return {"seconds": seconds,
            **{name: int(count) for name, count in zip(TRANSFER_NAMES, counts.tolist())}}


def pushed_ranges(page_first: np.ndarray, page_end: np.ndarray, pages: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The vertex ranges of ``pages`` (increasing indices), neighbours merged:
    sorted, disjoint (int64 first, end)."""
    if pages.size == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty
    first = np.asarray(page_first, np.int64)[pages]
    end = np.asarray(page_end, np.int64)[pages]
    merged_first, merged_end = [int(first[0])], [int(end[0])]
    for lo, hi in zip(first[1:].tolist(), end[1:].tolist()):
        if lo <= merged_end[-1]:
            merged_end[-1] = max(merged_end[-1], hi)
        else:
            merged_first.append(lo)
            merged_end.append(hi)
    return np.array(merged_first, np.int64), np.array(merged_end, np.int64)


def describe_choices(choices: np.ndarray) -> str:
    """One letter per page (r resident, s skip, c copy, p compact, z zero-copy),
    for the iteration record."""
    return "".join("rscpz"[c] for c in np.asarray(choices).tolist())
