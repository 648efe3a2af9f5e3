"""The CPU's direction when pages come from disk: what each direction reads (Garaph sections 2.2, 4.2).

Garaph prices a notify-pull over pages on secondary storage by rho = k, the
ratio of sequential to random read speed (section 4.2): its notify-pull
reads single edges at random.  garaphpy reads whole pages, in either
direction, so what a direction costs on this tier is the bytes of the pages
it needs that are in neither budget, at the disk's speed, plus its edges at
the CPU's speed:

* a pull needs every page holding a destination it may change: every page
  (a pull applies every vertex), or with early exit the pages holding a
  vertex not yet settled;
* a notify-pull needs the pages holding the notified vertices' in-edges
  (the pages with an in-edge from the frontier); a push from the frontier
  (``CpuPlan.settling_push``) reads the CSR of out-edges, in host memory,
  and no page.

A notify-pull from disk also copies the notified vertices' in-edges out
of the pages it reads and pulls over the copies once the reads are done
(in memory it reads the CSC in place; a pull works page by page as the
pages arrive).  Each copied edge costs ``config.NOTIFY_PULL_DISK_COPY_FACTOR``
edges of a pull: on a skewed graph the notified vertices hold most
in-edges long after the frontier is small (kron:16: 83% of them at f =
0.02), and a notify-pull reading the same pages as a pull is then slower.

:func:`disk_direction` takes the direction the in-memory rule chose
(:func:`~garaphpy.scheduler.decisions.choose_direction` or
:func:`~garaphpy.scheduler.decisions.settling_direction`, their compute
compared with rho = 1) and keeps it where the two directions would read the
same bytes from disk and the sparse direction copies nothing (a push, or
no edge notified); otherwise it takes the direction of fewer seconds,
reads, edges and copies together.  The CPU engine asks it in
synchronous runs, where both directions take a frontier one hop a step; an
asynchronous pull sweeps the pages in order and carries a change many hops
in one iteration (SSSP on a grid from disk: 2.4 times the iterations and 5
times the bytes when priced an iteration at a time), so those runs keep
Garaph's rho = k.
"""

from __future__ import annotations

from .. import config
from . import decisions

__all__ = ["disk_direction", "sparse_edge_units"]


def sparse_edge_units(active_out_edges: int, num_edges: int, settling: bool) -> float:
    """The in-memory rule's price of the sparse direction, in edges of a pull:
    ``NOTIFY_PULL_COST_FACTOR * f * |E|`` (:func:`decisions.choose_direction`
    with rho = 1), or with early exit Beamer's ``CPU_SETTLING_PULL_FACTOR``
    times the frontier's out-edges (:func:`decisions.settling_direction`)."""
    factor = config.CPU_SETTLING_PULL_FACTOR if settling else config.NOTIFY_PULL_COST_FACTOR
    if not settling:
        return factor * decisions.active_fraction(active_out_edges, num_edges) * num_edges
    return float(factor * active_out_edges)


def disk_direction(chosen: str, pull_edges: float, sparse_edges: float,
                   pull_disk_bytes: int, sparse_disk_bytes: int, disk_bytes_per_s: float,
                   edges_per_s: float, forced: str = "auto", copied_edges: int = 0) -> str:
    """The CPU's direction with each direction's reads from disk counted.

    Parameters
    ----------
    chosen : {"pull", "notify-pull"}
        The in-memory rule's direction (compute alone).
    pull_edges, sparse_edges : float
        What each direction computes, in edges of a pull (the in-memory rule's
        prices: |E| or the unsettled vertices' in-edges and one flag a
        vertex; :func:`sparse_edge_units`).
    pull_disk_bytes, sparse_disk_bytes : int
        Disk bytes of the pages each direction needs that are in neither
        budget (pages the host budget holds cost nothing).
    disk_bytes_per_s : float
        The disk's read speed (the run's page plan, or
        :func:`~garaphpy.storage.read_ratio.disk_read_speed`).
    edges_per_s : float
        The CPU's edges a second (all its threads).
    forced : {"auto", "pull", "notify-pull"}
        A forced direction wins.
    copied_edges : int, default 0
        The in-edges a notify-pull copies out of the pages (the notified
        vertices'; 0 for a push), ``config.NOTIFY_PULL_DISK_COPY_FACTOR``
        edges of a pull each.

    Returns
    -------
    str
        ``forced`` unless "auto"; ``chosen`` when both directions read the
        same bytes and ``chosen`` is the pull or nothing is copied; else
        ``"pull"`` when ``pull_disk_bytes / disk_bytes_per_s + pull_edges /
        edges_per_s`` is below the sparse direction's ``sparse_disk_bytes /
        disk_bytes_per_s + (sparse_edges + NOTIFY_PULL_DISK_COPY_FACTOR *
        copied_edges) / edges_per_s``, else ``"notify-pull"``.
    """
    if forced != "auto":
        return forced
    if pull_disk_bytes == sparse_disk_bytes and (chosen == "pull" or not copied_edges):
        return chosen
    copy_edges = config.NOTIFY_PULL_DISK_COPY_FACTOR * copied_edges
    pull_seconds = pull_disk_bytes / disk_bytes_per_s + pull_edges / edges_per_s
    sparse_seconds = (sparse_disk_bytes / disk_bytes_per_s
                      + (sparse_edges + copy_edges) / edges_per_s)
    return "pull" if pull_seconds < sparse_seconds else "notify-pull"
