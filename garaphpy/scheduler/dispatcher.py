"""The hybrid dispatcher's decisions: the cost ratio alpha and the page queue (Garaph section 5.1).

At the start of every iteration Garaph compares the CPU's cost with the GPU's:

    alpha = min(2 f rho, 1) * T_pull / T_GPU                     (Equation 3)

``2 f rho T_pull`` is what a notify-pull costs the CPU (section 4.2), capped
at a full pull, and ``T_GPU`` what a pull of every page costs the GPU.  With
alpha < 1 the CPU alone is cheaper and the iteration runs on the CPU (which
then chooses notify-pull or pull); otherwise CPU and GPU take pages from one
queue as they become free.

:class:`HybridPolicy` holds the ratio T_pull / T_GPU and the two processors'
page rates.  It starts from a ratio measured once at start-up (one page
pulled by each processor, :meth:`HybridPolicy.calibrate`) or one the user
gives, and follows the measured page times afterwards:

* a hybrid iteration (or a CPU pull) gives seconds per edge of each
  processor's pull, and the ratio of the two;
* a CPU notify-pull of fraction f that took ``t_cpu`` gives the pull time
  the cost model implies, ``T_pull = t_cpu / (2 f rho)``, so that the next
  decision compares the measured CPU cost, scaled to the next f, with the
  GPU's (Garaph's ``t_cpu / (f t_gpu)`` update).

Every decision is kept with its inputs (:attr:`HybridPolicy.decisions`);
a policy can be configured (threshold, a forced mode, the initial ratio,
the smoothing of the updates) or replaced by a subclass overriding
:meth:`HybridPolicy.decide` or :meth:`HybridPolicy.should_take`.

:class:`PageQueue` is the queue of one hybrid iteration.  The GPU takes
pages from its front (resident pages first), the CPU from its back.  It
improves on the paper at the tail: a processor does not take a page it
would finish later than the other processor would finish the page together
with everything else still to do (its work in hand and the rest of the
queue), estimated from the measured rates.  A processor that declines stops
taking for the iteration: the queue only shrinks, so its prospects do not
improve.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field

from .. import config
from ..errors import ConfigError

PROCESSORS = ("cpu", "gpu")
MODES = ("cpu", "hybrid")


@dataclass
class Decision:
    """One iteration's choice and what it was made from.

    Attributes
    ----------
    iteration : int
    active_fraction : float
        f: the active vertices' out-degrees over |E|.
    rho : float
        1 for pages in host memory, k for pages on secondary storage.
    ratio : float or None
        T_pull / T_GPU used (None: not known yet, the CPU runs alone).
    alpha : float or None
        min(2 f rho, 1) * ratio.
    mode : {"cpu", "hybrid"}
    forced : bool
        The mode was forced (:attr:`HybridPolicy.force`) rather than chosen.
    ratio_source : str
        Where the ratio came from: ``"given"``, ``"probe"`` or ``"measured"``.
    """

    iteration: int
    active_fraction: float
    rho: float
    ratio: float | None
    alpha: float | None
    mode: str
    forced: bool
    ratio_source: str

    def as_dict(self) -> dict:
        """JSON-able dict."""
        return asdict(self)


@dataclass
class Observation:
    """What one iteration measured, fed back to the policy.

    Attributes
    ----------
    mode : {"cpu", "hybrid"}
    direction : {"pull", "notify-pull"}
        The CPU's direction in a CPU iteration.
    active_fraction, rho : float
        The iteration's f and rho.
    num_edges : int
        |E|.
    cpu_edges, gpu_edges : int
        Edges each processor pulled (a notify-pull's gathered edges for the CPU).
    cpu_seconds, gpu_seconds : float
        Busy time of each processor on its pages.
    """

    mode: str
    direction: str
    active_fraction: float
    rho: float
    num_edges: int
    cpu_edges: int = 0
    gpu_edges: int = 0
    cpu_seconds: float = 0.0
    gpu_seconds: float = 0.0


@dataclass
class HybridPolicy:
    """Garaph's dispatcher policy: CPU-only or hybrid by alpha, and the tail rule.

    Parameters
    ----------
    initial_ratio : float, optional
        T_pull / T_GPU before anything is measured; None: measured at start-up
        by :meth:`calibrate` (one page pulled by each processor).
    threshold : float
        Hybrid when alpha >= threshold (Garaph: 1).
    force : {None, "cpu", "hybrid"}
        Run every iteration in this mode (for study); None decides by alpha.
    smoothing : float
        Weight of a new measurement in the running estimates (0 < s <= 1).
    tail_rule : bool
        Apply the tail rule (:meth:`should_take`); False takes pages greedily
        as in the paper.

    Attributes
    ----------
    decisions : list of Decision
        One per iteration of the run, in order.
    cpu_seconds_per_edge, gpu_seconds_per_edge : float or None
        The processors' measured pull rates (the tail rule's estimates).
    """

    initial_ratio: float | None = None
    threshold: float = 1.0
    force: str | None = None
    smoothing: float = config.HYBRID_SMOOTHING
    tail_rule: bool = True
    decisions: list = field(default_factory=list)
    cpu_seconds_per_edge: float | None = None
    gpu_seconds_per_edge: float | None = None
    ratio: float | None = None
    ratio_source: str = "none"

    def __post_init__(self):
        if self.force not in (None,) + MODES:
            raise ConfigError(f"HybridPolicy(force={self.force!r}): expected None, 'cpu' or "
                              "'hybrid'")
        if not 0.0 < self.smoothing <= 1.0:
            raise ConfigError(f"HybridPolicy(smoothing={self.smoothing!r}): expected 0 < s <= 1")
        if self.initial_ratio is not None:
            if not self.initial_ratio > 0:
                raise ConfigError(f"HybridPolicy(initial_ratio={self.initial_ratio!r}): "
                                  "expected a positive number")
            self.ratio = float(self.initial_ratio)
            self.ratio_source = "given"

    # -- the per-iteration decision ---------------------------------------------------
    def decide(self, iteration: int, active_fraction: float, rho: float) -> Decision:
        """CPU-only when alpha < threshold, else hybrid; recorded in :attr:`decisions`."""
        ratio = self.ratio
        alpha = None if ratio is None else min(2.0 * active_fraction * rho, 1.0) * ratio
        if self.force is not None:
            mode, forced = self.force, True
        else:
            mode = "hybrid" if alpha is not None and alpha >= self.threshold else "cpu"
            forced = False
        decision = Decision(iteration, active_fraction, rho, ratio, alpha, mode, forced,
                            self.ratio_source)
        self.decisions.append(decision)
        return decision

    # -- measurements -------------------------------------------------------------------
    def calibrate(self, cpu_edges: int, cpu_seconds: float, gpu_edges: int,
                  gpu_seconds: float) -> None:
        """Set the rates from a start-up probe (unless a ratio was given)."""
        if cpu_edges > 0 and cpu_seconds > 0:
            self.cpu_seconds_per_edge = cpu_seconds / cpu_edges
        if gpu_edges > 0 and gpu_seconds > 0:
            self.gpu_seconds_per_edge = gpu_seconds / gpu_edges
        if self.ratio_source != "given" and self.cpu_seconds_per_edge \
                and self.gpu_seconds_per_edge:
            self.ratio = self.cpu_seconds_per_edge / self.gpu_seconds_per_edge
            self.ratio_source = "probe"

    def observe(self, observation: Observation) -> None:
        """Update the rates and the ratio from an iteration's measurements."""
        o = observation
        measured = False
        if o.cpu_edges > 0 and o.cpu_seconds > 0 and (o.mode == "hybrid"
                                                     or o.direction == "pull"):
            self.cpu_seconds_per_edge = self._smooth(self.cpu_seconds_per_edge,
                                                     o.cpu_seconds / o.cpu_edges)
            measured = True
        if o.gpu_edges > 0 and o.gpu_seconds > 0:
            self.gpu_seconds_per_edge = self._smooth(self.gpu_seconds_per_edge,
                                                     o.gpu_seconds / o.gpu_edges)
            measured = True
        if self.gpu_seconds_per_edge is None or o.num_edges == 0:
            return
        t_gpu = self.gpu_seconds_per_edge * o.num_edges
        if o.mode == "cpu" and o.direction == "notify-pull":
            if o.active_fraction > 0 and o.cpu_seconds > 0:
                # T_pull as the cost model implies it from the measured notify-pull
                t_pull = o.cpu_seconds / min(2.0 * o.active_fraction * o.rho, 1.0)
                self._update_ratio(t_pull / t_gpu)
        elif measured and self.cpu_seconds_per_edge is not None:
            # the rates are smoothed already: their ratio, not smoothed a second time
            self.ratio = self.cpu_seconds_per_edge / self.gpu_seconds_per_edge
            self.ratio_source = "measured"

    def _update_ratio(self, measured: float) -> None:
        self.ratio = self._smooth(self.ratio, measured)
        self.ratio_source = "measured"

    def _smooth(self, previous: float | None, measured: float) -> float:
        if previous is None:
            return measured
        return (1.0 - self.smoothing) * previous + self.smoothing * measured

    # -- the tail rule ---------------------------------------------------------------------
    def estimate_seconds(self, processor: str, edges: int) -> float | None:
        """Estimated time for ``processor`` to pull ``edges`` edges (None: no rate yet)."""
        rate = self.cpu_seconds_per_edge if processor == "cpu" else self.gpu_seconds_per_edge
        return None if rate is None else rate * edges

    def should_take(self, processor: str, page_edges: int, own_backlog: float,
                    other_backlog: float, queued_edges: int) -> bool:
        """Whether ``processor`` takes a page of ``page_edges`` edges now.

        Parameters
        ----------
        processor : {"cpu", "gpu"}
        page_edges : int
            The page it would take.
        own_backlog, other_backlog : float
            Seconds until each processor finishes the pages it holds.
        queued_edges : int
            Edges of every page still queued, this one included.

        Returns
        -------
        bool
            False when it would finish the page later than the other
            processor would finish the page and everything else queued.
        """
        if not self.tail_rule:
            return True
        other = "gpu" if processor == "cpu" else "cpu"
        own = self.estimate_seconds(processor, page_edges)
        rest = self.estimate_seconds(other, queued_edges)
        if own is None or rest is None:
            return True
        return own_backlog + own <= other_backlog + rest


class PageQueue:
    """The pages of one hybrid iteration, taken by two processors.

    Parameters
    ----------
    page_edges : sequence of int
        Edges of every page, by page index.
    order : sequence of int
        Page indices from the GPU's end (resident pages first) to the CPU's.
    policy : HybridPolicy
        Gives the tail rule and the rate estimates.
    clock : callable
        Seconds (``time.perf_counter``; tests pass their own).
    """

    def __init__(self, page_edges, order, policy: HybridPolicy, clock=time.perf_counter):
        self.page_edges = list(page_edges)
        self.pending = list(order)
        self.queued_edges = sum(self.page_edges[p] for p in self.pending)
        self.policy = policy
        self.clock = clock
        self.lock = threading.Lock()
        # when each processor is expected to finish what it took (absolute clock)
        self.busy_until = {"cpu": 0.0, "gpu": 0.0}
        self.declined = {"cpu": False, "gpu": False}
        self.taken = {"cpu": [], "gpu": []}

    def take(self, processor: str) -> int | None:
        """The next page for ``processor`` (GPU: front, CPU: back), or None.

        None when the queue is empty or the tail rule tells the processor
        to leave the rest to the other one (then None from then on).
        """
        with self.lock:
            if not self.pending or self.declined[processor]:
                return None
            other = "gpu" if processor == "cpu" else "cpu"
            page = self.pending[0] if processor == "gpu" else self.pending[-1]
            edges = self.page_edges[page]
            now = self.clock()
            own_backlog = max(0.0, self.busy_until[processor] - now)
            other_backlog = max(0.0, self.busy_until[other] - now)
            if self.declined[other]:
                take = True
            else:
                take = self.policy.should_take(processor, edges, own_backlog, other_backlog,
                                               self.queued_edges)
            if not take:
                self.declined[processor] = True
                return None
            if processor == "gpu":
                self.pending.pop(0)
            else:
                self.pending.pop()
            self.queued_edges -= edges
            estimate = self.policy.estimate_seconds(processor, edges) or 0.0
            self.busy_until[processor] = now + own_backlog + estimate
            self.taken[processor].append(page)
            return page

    def finished(self, processor: str) -> None:
        """``processor`` completed everything it took (its backlog is zero now)."""
        with self.lock:
            self.busy_until[processor] = min(self.busy_until[processor], self.clock())
