"""The CPU's switches: pull or notify-pull (Garaph section 4.2), and the source-side precompute.

Pull costs T_pull whatever the frontier; notify-pull notifies the fraction
f of the edges leaving the active vertices and costs about 2 f rho T_pull
(rho = 1 in memory, k for pages read from secondary storage).  So the CPU
notify-pulls when f <= 1 / (2 rho).  This is the one place that decision is
made; the engine records it with its inputs every iteration.

A pull may also compute a gather that depends on the source alone once per
vertex (section 4.1's pull, with PageRank's outgoing contribution computed
ahead as hand-tuned codes do); :func:`precompute_source_gathers` decides
when, and the engine records it.
"""

from __future__ import annotations

from .. import config

DIRECTIONS = ("auto", "pull", "notify-pull")

#: Source-side gather parameters other than the value: per-vertex attributes
#: the edge loop reads at the source unless they are folded in beforehand.
SOURCE_ATTRIBUTES = frozenset({"src_out_degree", "src_in_degree"})


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


def precompute_source_gathers(direction: str, synchronous: bool,
                              gather_parameters: frozenset,
                              source_gather_available: bool) -> bool:
    """Whether an iteration computes gather(u) once per vertex before its edge loop.

    True when all of these hold:

    * ``config.CPU_SOURCE_PRECOMPUTE`` is set;
    * the gather is source-side (``source_gather_available``) and reads a
      per-source attribute besides ``src`` (:data:`SOURCE_ATTRIBUTES`): that
      read is a random access per edge the precompute removes; a gather of
      ``src`` alone reads one array either way, so the O(|V|) pass would
      only cost;
    * the iteration pulls: notify-pull runs on sparse active sets, where
      its work (the notified vertices' in-edges) can be far below the
      |V| gathers of a precompute;
    * the run is synchronous: an asynchronous pull must see a value
      updated in the same iteration at once, and a contribution computed at
      its start would not.

    Parameters
    ----------
    direction : {"pull", "notify-pull"}
        The iteration's direction (:func:`choose_direction`).
    synchronous : bool
        Whether the run commits its values at the end of each iteration.
    gather_parameters : frozenset of str
        The parameters the program's gather asks for.
    source_gather_available : bool
        Whether the compiled program has a per-vertex form of its gather
        (``CpuProgram.source_gather_call``).
    """
    return (config.CPU_SOURCE_PRECOMPUTE and source_gather_available
            and bool(gather_parameters & SOURCE_ATTRIBUTES)
            and direction == "pull" and synchronous)
