"""The CPU's direction switch: pull or notify-pull (Garaph section 4.2).

Pull costs T_pull whatever the frontier; notify-pull notifies the fraction
f of the edges leaving the active vertices and costs about 2 f rho T_pull
(rho = 1 in memory, k for pages read from secondary storage).  So the CPU
notify-pulls when f <= 1 / (2 rho).  This is the one place that decision is
made; the engine records it with its inputs every iteration.
"""

from __future__ import annotations

from .. import config

DIRECTIONS = ("auto", "pull", "notify-pull")


def active_fraction(active_out_edges: int, num_edges: int) -> float:
    """f = (sum of the out-degrees of the active vertices) / |E|."""
    return active_out_edges / num_edges if num_edges else 0.0


def choose_direction(f: float, rho: float = config.RHO_IN_MEMORY,
                     forced: str = "auto") -> str:
    """``"notify-pull"`` when f <= 1 / (NOTIFY_PULL_COST_FACTOR * rho), else ``"pull"``.

    Parameters
    ----------
    f : float
        Active fraction (:func:`active_fraction`).
    rho : float
        1 for pages in host memory, k (sequential/random read speed ratio)
        for pages on secondary storage.
    forced : {"auto", "pull", "notify-pull"}
        A forced direction (for study) wins over the threshold.
    """
    if forced != "auto":
        return forced
    return "notify-pull" if f <= 1.0 / (config.NOTIFY_PULL_COST_FACTOR * rho) else "pull"
