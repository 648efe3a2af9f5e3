"""Accumulative (delta) PageRank for asynchronous and sparse runs (Garaph sections 2.3, 4.2, 6).

The scores are PageRank's exactly as :mod:`garaphpy.programs.pagerank`
defines them (damping d, dangling mass spread uniformly, sum 1).  What a
vertex holds during the run is different: S_v, the mass v has *published*
so far.  With N = |V| and the *leaky* update (dangling mass dropped)::

    L(S)_v = (1 - d) / N  +  d * sum_{u -> v} S_u / outdeg(u)

a vertex computes x = L(S)_v from its in-neighbours' published masses and
publishes it (S_v <- x) only when x - S_v > eps = l1_bound (1 - d) / N;
otherwise it keeps S_v and goes quiet.  S starts at (1 - d) / N = L(0).  The
run ends when no vertex published in an iteration; ``finalize`` returns
S / sum(S).

Why the normalised result is PageRank.  With (P' x)_v = sum_{u -> v}
x_u / outdeg(u), PageRank satisfies PR = c 1 + d P' PR with
c = (1 - d + d D) / N (D its dangling mass), so
PR = c (I - d P')^-1 1, a multiple of the leaky fixed point
x* = ((1 - d) / N) (I - d P')^-1 1: normalising x* gives PR.

Why the bound ``l1_bound`` holds, sync or async, pull or notify-pull:

1. S never decreases and S <= L(S) throughout.  It starts at L(0) <= L(S);
   a vertex publishes x = L(S~)_v computed from values S~ it read, which
   never exceed the current ones (values only grow), so S_v = x <= L(S)_v
   after the write, and the other vertices' S_w <= L(S)_w hold on since L
   is monotone.
   So S stays below x* (S <= L^k(S) -> x*) while every publication adds
   more than eps: the run ends.  x >= S_v as well; the test is one-sided so
   that rounding of a differently grouped sum can never make S shrink.
2. At the end the residual e = L(S) - S lies in [0, eps] at every vertex.
   An in-neighbour that published after v read it became active, so v was
   evaluated again in the next iteration: v's last evaluation saw final
   values, and either kept S_v (e_v <= eps) or published x (e_v = 0).  A
   vertex never evaluated has no in-edges: L(S)_v = S_v = (1 - d) / N.
3. With s = sum(S) >= 1 - d (every S_v >= (1 - d) / N) and r = S / s, the
   PageRank power step T gives T(r) - r = e / s + c 1 for a scalar c, and
   sum(T(r)) = sum(r) = 1 makes c = -mean(e) / s.  So
   ||T(r) - r||_1 = ||e - mean(e)||_1 / s <= (N eps / 2) / (1 - d) = l1_bound / 2
   (N numbers in [0, eps] deviate from their mean by at most N eps / 2 in
   total: half at 0 and half at eps is the worst case), and, T being a
   d-contraction, ||r - PR||_1 <= l1_bound / (2 (1 - d)).

Why this is the accumulative form that suits asynchronous pull.  A
vertex's increments (deltas) never travel along edges: v re-reads the
cumulative S_u of its in-neighbours, so under any interleaving (Gauss-Seidel
order, several threads) every increment is counted exactly once.  Pulling
bare deltas would count one twice or lose it without per-edge state or a
push into the destination, and Garaph has no scatter (section 2.3).  A
vertex whose in-neighbours published nothing stays inactive, so late
iterations are sparse and notify-pull (section 4.2) takes them, unlike plain
PageRank, whose teleport and dangling terms change every vertex every
iteration.  Synchronous runs are deterministic; asynchronous ones reach the
same fixed point within the bound, usually in fewer iterations.

What it costs.  The leaky series from (1 - d) / N shrinks its residual by
d rho(P') per sweep (d once the graph has a cycle no mass leaves), while the
power iteration of pagerank.py, starting from 1/N, often converges much
faster; and the threshold is per vertex.  On rmat:22 (16 threads, GPU host,
2026-11-22) this program gathered 81 |E| edges synchronously and 50 |E|
asynchronously (84 and 55 iterations, the last 16-17 notify-pull) to a power
step of 6-8e-6, where PageRank at tolerance 1e-4 gathered 12 |E| to a step
of 3e-5.  It is the form for asynchronous runs and for graphs whose parts
converge at different speeds, not the fastest way to a whole PageRank.

The verifier is PageRank's (GAPBS's PRVerifier,
:func:`garaphpy.programs.pagerank.power_step_report`): one numpy power step
must move the normalised scores by less than ``l1_bound`` in L1 (the
derivation above gives half of that, leaving room for rounding).
"""

from __future__ import annotations

import numpy as np

from ..program import VertexProgram
from . import _common
from .pagerank import power_step_report


class DeltaPageRank(VertexProgram):
    """PageRank by accumulated published mass; vertices go quiet once converged.

    Vertices hold S_v, the mass published so far; x = (1-d)/N + d *
    sum_{u->v} S_u/outdeg(u) is published only when it exceeds S_v by more
    than l1_bound (1-d) / N.  ``finalize`` normalises S to sum 1, which
    is PageRank with dangling mass spread uniformly (see the module
    docstring for why, and for the bound).

    Constants
    ---------
    damping : float, default 0.85
        d, in [0, 1).
    l1_bound : float, default 1e-4
        > 0: one PageRank power step from the result moves it by at most
        l1_bound / 2 in L1 (the verifier checks < l1_bound).

    Values
    ------
    float64 scores > 0 summing to 1; every vertex has one (no unreachable
    vertices).  During the run: published masses, from (1-d)/N upwards.

    Execution
    ---------
    async by default (sync is valid and deterministic); sum = add; all
    vertices active at first, then those that published; no tolerance: the
    run ends when no vertex is active, within ``max_iterations`` = 1000.
    Pull and notify-pull both give the bound.

    Verifier
    --------
    PageRank's: one numpy power step from the scores moves them by less than
    ``l1_bound`` (L1); the scores are positive and sum to 1.
    """

    value_dtype = np.float64
    value_name = "pagerank"
    sum = "add"
    execution = "async"
    max_iterations = 1000
    initially_active = "all"
    tolerance = None
    constants = {"damping": 0.85, "l1_bound": 1e-4}

    def __init__(self, **constants):
        super().__init__(**constants)
        _common.require(self, "damping", 0.0 <= self.constants["damping"] < 1.0,
                        "0 <= damping < 1")
        _common.require(self, "l1_bound", self.constants["l1_bound"] > 0.0, "l1_bound > 0")

    def init(num_vertices):
        # L(0): the teleport mass every vertex holds before any edge is pulled
        return (1.0 - damping) / num_vertices

    def gather(src, src_out_degree):
        # S_u / outdeg(u); u has the edge (u, v), so outdeg(u) >= 1
        return src / src_out_degree

    def apply(value, accum, num_vertices):
        # x = L(S)_v; publish it when it exceeds S_v by more than eps (x >= S_v always)
        leaky = (1.0 - damping) / num_vertices + damping * accum
        if leaky - value > l1_bound * (1.0 - damping) / num_vertices:
            return leaky
        return value

    def activate(new, old):
        return new != old

    def finalize(self, values: np.ndarray) -> np.ndarray:
        """Scores: the published masses normalised to sum 1."""
        total = values.sum()
        return values / total if total > 0 else values

    def verify(self, graph, result):
        checked = ("DeltaPageRank: one power step moves the scores by < l1_bound (L1), "
                   "sum = 1")
        bound = float(self.constants["l1_bound"]) + 1e-12  # + rounding of the sums
        return power_step_report(graph, result, float(self.constants["damping"]), bound,
                                 checked)
