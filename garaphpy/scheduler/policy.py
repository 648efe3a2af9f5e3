"""The hybrid dispatcher's decisions: the cost ratio alpha and the page queue (Garaph section 5.1).

At the start of every iteration Garaph compares the CPU's cost with the GPU's:

    alpha = min(2 f rho, 1) * T_pull / T_GPU                     (Equation 3)

(2 is ``config.NOTIFY_PULL_COST_FACTOR``; the formulas themselves are pure
functions of :mod:`garaphpy.scheduler.decisions`).  ``2 f rho T_pull`` is
what a notify-pull costs the CPU (section 4.2), capped at a full pull, and
``T_GPU`` what a pull of every page costs the GPU.  With alpha < 1 the CPU
alone is cheaper and the iteration runs on the CPU (which then chooses
notify-pull or pull); otherwise CPU and GPU take pages from one queue as
they become free.

:class:`HybridPolicy` evaluates Equation 3 on measured costs, in seconds:

    alpha = (c_0 + min((f + p) rho T_notify, T_pull) + s_cpu) / (T_GPU + s_gpu)

* ``T_pull`` and ``T_GPU``: a CPU pull and a GPU iteration over every page,
  measured once at start-up (one page pulled by each processor,
  :meth:`HybridPolicy.calibrate`) and followed afterwards (CPU pulls, GPU
  iterations, pages of hybrid iterations);
* ``T_notify``: the T_pull that the notify-pulls actually measured imply,
  ``(t_cpu - c_0) / min((f + p) rho, 1)`` (Garaph's update from measured times,
  ``t_cpu / (f t_gpu)``); it starts equal to T_pull, as the paper assumes;
* ``p``: the share of |E| the notified vertices' in-edges make up, which
  the paper takes to be f (hence its 2 f).  On power-law graphs the
  out-neighbours of a frontier are the vertices of high in-degree, and p is
  many times f: the engine estimates it from the frontier as the sum of its
  vertices' out-neighbours' in-degrees (an upper bound);
* ``c_0``: what a CPU-only iteration costs whatever its f (the cheapest one
  measured; 0 before any);
* ``s_cpu``, ``s_gpu``: bringing that processor's copy of the vertex data up
  to date first, when the other one ran the last iteration (bytes over the
  measured copy bandwidth; given by the engine).
* ``T_loop``: where the GPU would run the iteration in its device loop (a
  sparse frontier on resident pages, :func:`decisions.hybrid_device_loop`),
  what one of the loop's iterations costs, measured on the run's loops
  (``config.HYBRID_LOOP_ITERATION_SECONDS`` before), in place of ``T_GPU``.

With c_0 = s = 0, p = f and T_notify = T_pull this is the paper's
``min(2 f rho, 1) T_pull / T_GPU``; :attr:`Decision.ratio` is T_pull / T_GPU.
A ratio given by the user (``initial_ratio``) is used as is until the first
measurements replace it.

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
from dataclasses import dataclass, field

from .. import config
from ..errors import ConfigError
from . import decisions

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
        ``cpu_seconds / gpu_seconds`` once the times are known; before, with
        only a ratio, ``min(2 f rho, 1) * ratio``.
    mode : {"cpu", "hybrid"}
    forced : bool
        The mode was forced (:attr:`HybridPolicy.force`) rather than chosen.
    ratio_source : str
        Where the ratio came from: ``"given"``, ``"probe"`` or ``"measured"``.
    cpu_seconds, gpu_seconds : float or None
        The estimated cost of the iteration on the CPU alone and with the
        GPU (alpha's numerator and denominator), synchronization included.
    cpu_sync_seconds, gpu_sync_seconds : float
        Of which bringing the processor's copy of the vertex data up to date.
    pull_fraction : float or None
        p, the share of |E| a notify-pull was estimated to gather (None: not
        needed, f decided it).
    gpu_loop : bool
        The GPU's cost is its device loop's (``T_loop``), not a pull's.
    gpu_dense : bool
        The GPU's cost is T_GPU: it would pull every page whatever the
        frontier (no selective transfers, outside its device loop).
    covers : int
        Iterations the decision covers: 1, or a batch that the GPU's device
        loop ran from ``iteration`` on (:meth:`HybridPolicy.cover`).
    switch_credit : float
        Seconds the processor holding the current copy lost, over the
        iterations so far, against the other one
        (:func:`decisions.switch_credit`).
    switched : bool
        The credit paid for the copy: the mode is the other processor's
        although alpha, which charges the copy to this iteration, said
        otherwise.
    """

    iteration: int
    active_fraction: float
    rho: float
    ratio: float | None
    alpha: float | None
    mode: str
    forced: bool
    ratio_source: str
    cpu_seconds: float | None = None
    gpu_seconds: float | None = None
    cpu_sync_seconds: float = 0.0
    gpu_sync_seconds: float = 0.0
    pull_fraction: float | None = None
    gpu_loop: bool = False
    gpu_dense: bool = False
    covers: int = 1
    switch_credit: float = 0.0
    switched: bool = False

    def as_dict(self) -> dict:
        """JSON-able dict (shallow: every field is a scalar; ``dataclasses.asdict``
        costs about ten times more, on every hybrid iteration)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def entry(self) -> dict:
        """The iteration record's ``decisions["mode"]``: the inputs, and the mode
        as ``"choice"`` (spelled out: it is made on every iteration)."""
        return {"iteration": self.iteration, "active_fraction": self.active_fraction,
                "rho": self.rho, "ratio": self.ratio, "alpha": self.alpha,
                "forced": self.forced, "ratio_source": self.ratio_source,
                "cpu_seconds": self.cpu_seconds, "gpu_seconds": self.gpu_seconds,
                "cpu_sync_seconds": self.cpu_sync_seconds,
                "gpu_sync_seconds": self.gpu_sync_seconds,
                "pull_fraction": self.pull_fraction, "gpu_loop": self.gpu_loop,
                "gpu_dense": self.gpu_dense, "covers": self.covers,
                "switch_credit": self.switch_credit,
                "switched": self.switched, "choice": self.mode}


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
    gpu_iteration_seconds : float
        A GPU-alone iteration's whole time (launches and waits included); with
        direction ``"device-loop"``, an iteration of the GPU's device loop
        (the batch's time over its iterations).
    pull_fraction : float
        The share of |E| a CPU notify-pull gathered (0: take f).
    gpu_setup_seconds : float
        Of ``gpu_iteration_seconds``, what the GPU spent once for the run (the
        selective transfers' arrays made at the first sparse iteration), which
        the next iterations will not spend again.
    join_seconds : float
        In an iteration both processors ran: the dispatcher's time to bring
        the host's copy up to date before the pages and to combine the two
        copies after them (0: not such an iteration).
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
    gpu_iteration_seconds: float = 0.0
    pull_fraction: float = 0.0
    gpu_setup_seconds: float = 0.0
    join_seconds: float = 0.0


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
        Apply the tail rule (:meth:`should_take`), and let the CPU join a
        hybrid iteration only when the split pays for its synchronization
        (:meth:`plan_join`); False takes pages greedily as in the paper.
    batches : bool
        Let one decision cover a batch of iterations where the GPU alone would
        run them in its device loop (:func:`decisions.hybrid_device_loop`),
        or the CPU alone in its own batch (sparse notify-pulls, or buckets of
        values; ``HybridDriver._cpu_batch``); False: every iteration is decided,
        and none runs in a batch.
    per_run : bool
        Let the run choose, before its first iteration and again at each
        stretch's end, to finish on the GPU alone, the CPU alone or both
        (:func:`decisions.run_processors`,
        :mod:`~garaphpy.scheduler.run_choice`; with ``batches``, no forced
        mode and this class's own :meth:`decide`); False: every iteration
        is divided by alpha, as in the paper.

    Attributes
    ----------
    decisions : list of Decision
        Every decision of the run, in order: one per iteration, except that
        one decision covers a batch of the device loop's iterations
        (:attr:`Decision.covers`; :meth:`per_iteration` expands them).
    cpu_seconds_per_edge, gpu_seconds_per_edge : float or None
        The processors' measured pull rates (the tail rule's estimates).
    t_pull, t_notify, t_gpu : float or None
        T_pull, T_notify and T_GPU of the cost model, in seconds.
    t_loop : float
        T_loop: an iteration of the GPU's device loop, in seconds.
    gpu_sparse_overhead, gpu_sparse_seconds_per_edge : float or None
        A GPU iteration that runs a sparse pass (the frontier's out-edges, not
        every page): its fixed cost, the cheapest such iteration seen, and its
        time per out-edge of the frontier beyond that, in seconds; a prior
        from :meth:`seed_sparse_pass` until measured (None: neither, and
        T_GPU prices every GPU iteration).  T_GPU learns from the dense
        passes only.
    num_edges : int or None
        |E| (from :meth:`calibrate` or the first observation).
    cpu_overhead : float
        c_0 of the cost model, in seconds.
    join_seconds : float or None
        What the CPU's joining an iteration costs the dispatcher
        (synchronizing and combining the two copies), measured in the
        iterations both processors ran (None: none yet).
    switch_credit : float
        What staying on the processor with the current copy has lost so
        far against switching (:func:`decisions.switch_credit`).
    ratio : float or None
        T_pull / T_GPU (or the given initial ratio until they are known).
    """

    initial_ratio: float | None = None
    threshold: float = 1.0
    force: str | None = None
    smoothing: float = config.HYBRID_SMOOTHING
    tail_rule: bool = True
    batches: bool = True
    per_run: bool = True
    decisions: list = field(default_factory=list)
    cpu_seconds_per_edge: float | None = None
    gpu_seconds_per_edge: float | None = None
    ratio: float | None = None
    ratio_source: str = "none"
    t_pull: float | None = None
    t_notify: float | None = None
    t_gpu: float | None = None
    t_loop: float = config.HYBRID_LOOP_ITERATION_SECONDS
    gpu_sparse_overhead: float | None = None
    gpu_sparse_seconds_per_edge: float | None = None
    num_edges: int | None = None
    cpu_overhead: float = 0.0
    join_seconds: float | None = None
    switch_credit: float = 0.0

    @property
    def chooses_per_run(self) -> bool:
        """Whether this policy lets a run choose its processors per run
        (``per_run``): the default decisions (no forced mode, not a
        subclass's own :meth:`decide`), with ``batches``."""
        return bool(self.per_run and self.force is None and self.batches
                    and type(self).decide is HybridPolicy.decide)

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
    def decide(self, iteration: int, active_fraction: float, rho: float,
               cpu_sync_seconds: float = 0.0, gpu_sync_seconds: float = 0.0,
               pull_fraction=None, gpu_loop: bool = False,
               gpu_dense: bool = False) -> Decision:
        """CPU-only when alpha < threshold, else hybrid; recorded in :attr:`decisions`.

        Parameters
        ----------
        iteration : int
        active_fraction, rho : float
            f and rho of the iteration.
        cpu_sync_seconds, gpu_sync_seconds : float
            Estimated time to bring the CPU's (GPU's) copy of the vertex
            data up to date before it could run the iteration.
        pull_fraction : float or callable, optional
            The share of |E| a notify-pull would gather after notifying
            (None: f, the paper's assumption, which gives its 2 f).  A
            callable is only called when the CPU could win with f, since
            a larger share only makes the CPU dearer.
        gpu_loop : bool
            The GPU would run the iteration in its device loop: its cost is
            :attr:`t_loop` (at most T_GPU) rather than T_GPU.  Otherwise it
            is the cheaper of T_GPU and a sparse pass over the frontier's
            out-edges (:meth:`gpu_iteration_seconds`).
        gpu_dense : bool
            The GPU would pull every page whatever the frontier (its pages
            stream without the selective transfers, and the device loop
            does not take the iteration): its cost is T_GPU, however sparse
            the frontier.
        """
        cpu_cost = gpu_cost = pulled = None
        if self.t_pull is not None and self.t_gpu is not None:
            notify = self.t_pull if self.t_notify is None else self.t_notify
            if gpu_loop:
                gpu_cost = min(self.t_loop, self.t_gpu)
            elif gpu_dense:
                gpu_cost = self.t_gpu
            else:
                gpu_cost = self.gpu_iteration_seconds(active_fraction)
            gpu_cost += gpu_sync_seconds

            def cpu_seconds(pulled: float) -> float:
                return decisions.cpu_iteration_seconds(active_fraction, pulled, rho, notify,
                                                       self.t_pull, self.cpu_overhead,
                                                       cpu_sync_seconds)

            cpu_cost = cpu_seconds(active_fraction)
            if pull_fraction is not None and cpu_cost / gpu_cost < self.threshold:
                pulled = pull_fraction() if callable(pull_fraction) else pull_fraction
                pulled = max(float(pulled), active_fraction)
                cpu_cost = cpu_seconds(pulled)
            alpha = cpu_cost / gpu_cost
        elif self.ratio is not None:
            alpha = decisions.paper_alpha(active_fraction, rho, self.ratio)
        else:
            alpha = None
        mode = decisions.hybrid_mode(alpha, self.threshold, self.force)
        forced = self.force is not None
        switched = False
        if cpu_cost is not None and not forced:
            mode, switched = self._switch_by_credit(mode, cpu_cost, gpu_cost, cpu_sync_seconds,
                                                    gpu_sync_seconds)
        decision = Decision(iteration, active_fraction, rho, self.ratio, alpha, mode, forced,
                            self.ratio_source, cpu_cost, gpu_cost, cpu_sync_seconds,
                            gpu_sync_seconds, pulled, gpu_loop=gpu_loop,
                            gpu_dense=bool(gpu_dense and not gpu_loop),
                            switch_credit=self.switch_credit, switched=switched)
        self.decisions.append(decision)
        return decision

    def gpu_iteration_seconds(self, active_fraction: float) -> float:
        """A GPU iteration's estimated time (T_GPU known): the cheaper of a dense
        pass, T_GPU, and a sparse pass over the frontier's out-edges, ``f``
        |E| of them (:func:`decisions.gpu_iteration_seconds`), once a sparse
        pass is priced (:attr:`gpu_sparse_overhead`)."""
        return decisions.gpu_iteration_seconds(active_fraction, self.num_edges, self.t_gpu,
                                               self.gpu_sparse_overhead,
                                               self.gpu_sparse_seconds_per_edge)

    def seed_sparse_pass(self, overhead: float, seconds_per_edge: float) -> None:
        """A prior for the GPU's sparse passes (the driver's, from the GPU
        engine's transfer rates), kept only where nothing is measured yet."""
        if self.gpu_sparse_overhead is None and overhead > 0:
            self.gpu_sparse_overhead = float(overhead)
        if self.gpu_sparse_seconds_per_edge is None and seconds_per_edge > 0:
            self.gpu_sparse_seconds_per_edge = float(seconds_per_edge)

    def _switch_by_credit(self, mode: str, cpu_cost: float, gpu_cost: float,
                          cpu_sync_seconds: float, gpu_sync_seconds: float) -> tuple[str, bool]:
        """The mode after the switch rule (:func:`decisions.switch_credit`), where
        exactly one processor's copy is stale and alpha kept the other: whether
        the credit now pays for the copy.  Both costs include their copy; the
        threshold scales the GPU's side as it does alpha's."""
        threshold = self.threshold
        if cpu_sync_seconds > 0 and not gpu_sync_seconds and mode == "hybrid":
            switch, self.switch_credit = decisions.switch_credit(
                self.switch_credit, threshold * gpu_cost, cpu_cost - cpu_sync_seconds,
                cpu_sync_seconds)
            return ("cpu", True) if switch else (mode, False)
        if gpu_sync_seconds > 0 and not cpu_sync_seconds and mode == "cpu":
            switch, self.switch_credit = decisions.switch_credit(
                self.switch_credit, cpu_cost, threshold * (gpu_cost - gpu_sync_seconds),
                threshold * gpu_sync_seconds)
            return ("hybrid", True) if switch else (mode, False)
        self.switch_credit = 0.0
        return mode, False

    def cover(self, decision: Decision, iterations: int) -> None:
        """``decision`` covers ``iterations`` iterations from its own: a batch the
        GPU's device loop or the CPU's batch ran (no decision is recorded for
        the others)."""
        decision.covers = iterations

    def per_iteration(self) -> list[tuple[int, Decision]]:
        """``(iteration, decision)`` for every iteration decided so far, a
        decision that covers a batch repeated for each of its iterations."""
        return [(decision.iteration + k, decision) for decision in self.decisions
                for k in range(decision.covers)]

    # -- measurements -------------------------------------------------------------------
    def calibrate(self, cpu_edges: int, cpu_seconds: float, gpu_edges: int,
                  gpu_seconds: float, num_edges: int | None = None,
                  cpu_iteration_seconds: float | None = None) -> None:
        """Set the rates from a start-up probe (one page on each processor).

        With ``num_edges`` (|E|) the probe also gives T_pull and T_GPU; a
        ratio given by the user is kept (T_pull is then ratio * T_GPU).
        ``cpu_iteration_seconds``, a CPU iteration that does no work, gives c_0.
        """
        if cpu_iteration_seconds is not None and cpu_iteration_seconds > 0:
            self.cpu_overhead = float(cpu_iteration_seconds)
        if cpu_edges > 0 and cpu_seconds > 0:
            self.cpu_seconds_per_edge = cpu_seconds / cpu_edges
        if gpu_edges > 0 and gpu_seconds > 0:
            self.gpu_seconds_per_edge = gpu_seconds / gpu_edges
        if not (self.cpu_seconds_per_edge and self.gpu_seconds_per_edge):
            return
        if num_edges:
            self.num_edges = int(num_edges)
            self.t_gpu = self.gpu_seconds_per_edge * num_edges
            self.t_pull = (self.ratio * self.t_gpu if self.ratio_source == "given"
                           else self.cpu_seconds_per_edge * num_edges)
        if self.ratio_source != "given":
            self.ratio = self.cpu_seconds_per_edge / self.gpu_seconds_per_edge
            self.ratio_source = "probe"

    def observe(self, observation: Observation) -> None:
        """Update the rates and the cost model from an iteration's measurements."""
        o = observation
        if o.join_seconds > 0:
            self.join_seconds = self.smooth(self.join_seconds, o.join_seconds)
        if o.direction == "device-loop":
            if o.gpu_iteration_seconds > 0:
                self.t_loop = self.smooth(self.t_loop, o.gpu_iteration_seconds)
            return
        if o.cpu_edges > 0 and o.cpu_seconds > 0 and (o.mode == "hybrid"
                                                     or o.direction == "pull"):
            self.cpu_seconds_per_edge = self.smooth(self.cpu_seconds_per_edge,
                                                     o.cpu_seconds / o.cpu_edges)
        if o.gpu_edges > 0 and o.gpu_seconds > 0:
            self.gpu_seconds_per_edge = self.smooth(self.gpu_seconds_per_edge,
                                                     o.gpu_seconds / o.gpu_edges)
        if o.num_edges <= 0:
            return
        self.num_edges = int(o.num_edges)
        before = (self.t_pull, self.t_gpu)
        if o.mode == "cpu" and o.cpu_seconds > 0:
            overhead_before = self.cpu_overhead
            # c_0: the cheapest CPU-only iteration seen
            self.cpu_overhead = (o.cpu_seconds if not self.cpu_overhead
                                 else min(self.cpu_overhead, o.cpu_seconds))
            work = o.cpu_seconds - overhead_before
            if work > 0 and o.direction == "pull":
                self.t_pull = self.smooth(self.t_pull, work)
            elif work > 0 and o.active_fraction > 0:
                share = min((o.active_fraction + max(o.pull_fraction, o.active_fraction))
                            * o.rho, 1.0)
                previous = self.t_notify or self.t_pull
                if decisions.notify_measures_t_notify(share, work, previous, overhead_before):
                    measured = work / share
                    if previous:
                        # a hiccup, magnified by 1 / share: an estimate too high is
                        # never corrected (the CPU gets no more iterations), one too
                        # low is at the next
                        measured = min(measured, config.HYBRID_NOTIFY_RISE * previous)
                    self.t_notify = self.smooth(previous, measured)
        elif o.mode == "hybrid":
            if o.gpu_iteration_seconds > 0 and o.cpu_edges == 0:    # the GPU alone
                if o.gpu_edges < o.num_edges:
                    self._observe_sparse_pass(o.gpu_edges,
                                              o.gpu_iteration_seconds - o.gpu_setup_seconds)
                else:
                    self.t_gpu = self.smooth(self.t_gpu, o.gpu_iteration_seconds)
            elif o.gpu_edges > 0 and o.gpu_seconds > 0:
                self.t_gpu = self.smooth(self.t_gpu,
                                          o.gpu_seconds / o.gpu_edges * o.num_edges)
            if o.cpu_edges > 0 and o.cpu_seconds > 0:
                self.t_pull = self.smooth(self.t_pull,
                                           o.cpu_seconds / o.cpu_edges * o.num_edges)
        if (self.t_pull, self.t_gpu) != before and self.t_pull is not None \
                and self.t_gpu is not None:
            self.ratio = self.t_pull / self.t_gpu
            self.ratio_source = "measured"

    def _observe_sparse_pass(self, edges: int, seconds: float) -> None:
        """A GPU-alone iteration that pulled ``edges`` edges, fewer than |E| (a
        sparse pass), in ``seconds``: the cheapest such iteration is the fixed
        cost, and what one costs beyond it, per edge, the rate."""
        if seconds <= 0:
            return
        if self.gpu_sparse_overhead is None:
            # the first measured: all of it fixed cost, and per edge as much again
            # (at most twice its cost for as many edges, until a cheaper one splits them)
            self.gpu_sparse_overhead = seconds
            self.gpu_sparse_seconds_per_edge = self.smooth(self.gpu_sparse_seconds_per_edge,
                                                           seconds / max(edges, 1))
            return
        self.gpu_sparse_overhead = min(self.gpu_sparse_overhead, seconds)
        if edges > 0 and seconds > self.gpu_sparse_overhead:
            self.gpu_sparse_seconds_per_edge = self.smooth(
                self.gpu_sparse_seconds_per_edge, (seconds - self.gpu_sparse_overhead) / edges)

    def smooth(self, previous: float | None, measured: float) -> float:
        """``measured`` folded into the running estimate ``previous`` with weight
        :attr:`smoothing` (the measurement itself when there is none yet)."""
        if previous is None:
            return measured
        return (1.0 - self.smoothing) * previous + self.smoothing * measured

    # -- the tail rule ---------------------------------------------------------------------
    def estimate_seconds(self, processor: str, edges: int) -> float | None:
        """Estimated time for ``processor`` to pull ``edges`` edges (None: no rate yet)."""
        rate = self.cpu_seconds_per_edge if processor == "cpu" else self.gpu_seconds_per_edge
        return None if rate is None else rate * edges

    def should_take(self, processor: str, page_edges: int, own_backlog: float,
                    other_backlog: float, queued_edges: int, own_seconds: float | None = None,
                    rest_seconds: float | None = None) -> bool:
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
        own_seconds, rest_seconds : float, optional
            The page's estimated time on ``processor``, and the other
            processor's for every page queued (this one included), where the
            queue prices each page on its own (:meth:`page_seconds`); by
            default both follow from the edges and the pull rates.

        Returns
        -------
        bool
            False when it would finish the page later than the other
            processor would finish the page and everything else queued.
        """
        if not self.tail_rule:
            return True
        other = "gpu" if processor == "cpu" else "cpu"
        if own_seconds is None:
            own_seconds = self.estimate_seconds(processor, page_edges)
        if rest_seconds is None:
            rest_seconds = self.estimate_seconds(other, queued_edges)
        return decisions.take_page(own_seconds, rest_seconds, own_backlog, other_backlog)

    def page_seconds(self, processor: str, edges: int, bus_bytes: int = 0,
                     bus_bytes_per_second: float | None = None) -> float | None:
        """A page's estimated time on ``processor``: its edges at the pull rate,
        and on the GPU, for a page that crosses the bus (``bus_bytes`` > 0), at
        least its copy (copies and pulls overlap on the GPU's streams).
        None: no rate measured yet."""
        seconds = self.estimate_seconds(processor, edges)
        if seconds is None or processor == "cpu" or not bus_bytes or not bus_bytes_per_second:
            return seconds
        return max(seconds, bus_bytes / bus_bytes_per_second)

    def plan_join(self, cpu_seconds, gpu_seconds, gpu_alone_seconds: float | None,
                  join_seconds: float) -> dict:
        """Whether the CPU joins a hybrid iteration, and why.

        The split is the tail rule's at the start of the iteration: the CPU
        takes pages from the back of the queue while it would finish them,
        after its fixed cost c_0 (:attr:`cpu_overhead`), no later than the
        GPU the pages left.  It runs when that split, plus what joining
        costs, beats the GPU alone.

        Parameters
        ----------
        cpu_seconds, gpu_seconds : sequence of float
            Each page's estimated time on each processor, in queue order
            (the GPU's end first).
        gpu_alone_seconds : float or None
            The GPU's iteration over every page alone (None: the sum of
            ``gpu_seconds``).
        join_seconds : float
            What joining costs: the host's copy brought up to date and the
            two copies combined.

        Returns
        -------
        dict
            ``choice`` (bool), ``cpu_pages`` (pages the split gives the
            CPU), ``split_seconds`` (the split's time, joining included)
            and ``gpu_alone_seconds``.
        """
        gpu_rest = float(sum(gpu_seconds))
        alone = gpu_rest if gpu_alone_seconds is None else float(gpu_alone_seconds)
        cpu_total, taken = float(self.cpu_overhead), 0
        for cpu_page, gpu_page in zip(reversed(cpu_seconds), reversed(gpu_seconds)):
            if taken == len(cpu_seconds) - 1 or cpu_total + cpu_page > gpu_rest:
                break
            cpu_total += cpu_page
            gpu_rest -= gpu_page
            taken += 1
        split = max(cpu_total, gpu_rest) + join_seconds
        return {"choice": bool(taken and split < alone), "cpu_pages": taken,
                "split_seconds": split, "gpu_alone_seconds": alone,
                "join_seconds": join_seconds}


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
    page_seconds : dict, optional
        ``{"cpu": [...], "gpu": [...]}``: each page's estimated time on each
        processor, by page index (:meth:`HybridPolicy.page_seconds`), which
        the tail rule then weighs instead of edges at one rate.
    gpu_pages : collection of int
        Pages the CPU never takes (those kept on the GPU while others
        stream): the CPU stops at the first it meets.
    """

    def __init__(self, page_edges, order, policy: HybridPolicy, clock=time.perf_counter,
                 page_seconds: dict | None = None, gpu_pages=()):
        self.page_edges = list(page_edges)
        self.pending = list(order)
        self.queued_edges = sum(self.page_edges[p] for p in self.pending)
        self.page_seconds = page_seconds
        self.queued_seconds = None if page_seconds is None else {
            name: sum(page_seconds[name][p] for p in self.pending) for name in PROCESSORS}
        self.gpu_pages = frozenset(gpu_pages)
        self.gpu_pages_pending = sum(p in self.gpu_pages for p in self.pending)
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
            # without prices, asked as before (a policy's own should_take may not take them)
            prices = {} if self.page_seconds is None else {
                "own_seconds": self.page_seconds[processor][page],
                "rest_seconds": self.queued_seconds[other]}
            if processor == "cpu" and page in self.gpu_pages:
                take = False
            elif self.declined[other] or (processor == "gpu" and self.gpu_pages_pending):
                # pages the CPU never takes are the GPU's whatever the estimates say
                take = True
            else:
                take = self.policy.should_take(processor, edges, own_backlog, other_backlog,
                                               self.queued_edges, **prices)
            if not take:
                self.declined[processor] = True
                return None
            if processor == "gpu":
                self.pending.pop(0)
            else:
                self.pending.pop()
            self.queued_edges -= edges
            self.gpu_pages_pending -= page in self.gpu_pages
            if prices:
                for name in PROCESSORS:
                    self.queued_seconds[name] -= self.page_seconds[name][page]
                estimate = prices["own_seconds"]
            else:
                estimate = self.policy.estimate_seconds(processor, edges)
            self.busy_until[processor] = now + own_backlog + (estimate or 0.0)
            self.taken[processor].append(page)
            return page

    def finished(self, processor: str) -> None:
        """``processor`` completed everything it took (its backlog is zero now)."""
        with self.lock:
            self.busy_until[processor] = min(self.busy_until[processor], self.clock())
