"""PageRank with uniformly spread dangling mass (Page et al. 1999; Garaph section 6, "PR").

Definition, for N = |V| and damping d::

    PR(v) = (1 - d) / N + d * ( sum_{u -> v} PR(u) / outdeg(u)  +  D / N )
    D     = sum of PR(u) over vertices u with outdeg(u) == 0     (dangling mass)

The scores are the stationary distribution of the random surfer that
follows a random out-edge with probability d, jumps to a uniformly random
vertex otherwise, and always jumps from a vertex without out-edges.  They
sum to 1.  Edge values are ignored; a self-loop counts as an out-edge and
feeds its own vertex; with ``duplicates="keep"`` every parallel edge counts.

Power iteration from PR = 1/N.  D is the aggregate ``dangling``, reduced by
the engine over all vertices before every iteration; apply asks for it as a
parameter of that name.
Every vertex stays active (activate is always True); the run stops when the
L1 change of an iteration, sum_v |PR_new(v) - PR(v)|, falls below
``tolerance`` (1e-4, GAPBS's ``-t`` default, so that timings compare with
GAPBS's pr) or after ``max_iterations`` (100).

The verifier follows GAPBS's ``PRVerifier``: one independent power step
from the result, in numpy, must move the scores by less than the tolerance
in L1.  Why that bound holds: the step map T(x) is a d-contraction in L1
(its linear part sends |e| to at most d * ||e||_1, dangling mass included),
so after a synchronous iteration that changed the scores by less than tol,
the next one moves them by less than d * tol < tol.  An asynchronous
iteration that updates every vertex once from values no older than the
iteration's start obeys the same bound.  The scores must also be positive
and sum to 1 within tolerance / (1 - d): since sum(T(x)) - 1 = d (sum(x) - 1),
|sum(x) - 1| <= ||T(x) - x||_1 / (1 - d) (a synchronous run keeps the sum at
1 up to rounding; an asynchronous one drifts within that).

The accumulative (delta) variant, whose vertices go quiet once their
published mass stops growing, is :mod:`garaphpy.programs.delta_pagerank`;
it shares this verifier (:func:`power_step_report`).
"""

from __future__ import annotations

import numpy as np

from ..program import VertexProgram
from . import _common


def dangling_mass(value, out_degree):
    # aggregate ``dangling``: the score of a vertex without out-edges, else 0
    # (no docstring: the vertex-program subset rejects string constants)
    return value if out_degree == 0 else 0.0


class PageRank(VertexProgram):
    """PageRank, dangling mass spread uniformly (power iteration, pull).

    PR(v) = (1-d)/N + d * (sum_{u->v} PR(u)/outdeg(u) + D/N), with D the sum
    of PR over vertices without out-edges; PR starts at 1/N; scores sum to 1.

    Constants
    ---------
    damping : float, default 0.85
        d, in [0, 1).

    Values
    ------
    float64 scores > 0; every vertex has one (no unreachable vertices).

    Execution
    ---------
    sync by default (async is valid too); sum = add; all vertices active in
    every iteration; stops on the L1 change < ``tolerance`` = 1e-4 (GAPBS's
    default) or after ``max_iterations`` = 100.  apply takes the aggregate
    ``dangling`` (monoid add over ``dangling_mass(value, out_degree)``).

    Verifier
    --------
    GAPBS-style: one numpy power step from the result moves the scores by
    less than the tolerance (L1); the scores are positive and sum to 1
    within tolerance / (1 - d).

    Precision
    ---------
    float64 throughout, except that a run on the CPU alone with a
    tolerance of at least ``3 * 2**-24 * d / (1 - d)`` (1.0e-6 for
    d = 0.85; the default 1e-4 is) holds the contributions PR(u)/outdeg(u)
    in float32, GAPBS's precision, as
    ``float32_gather_tolerance`` allows: their rounding moves the result
    by less than the verifier's bound.
    """

    value_dtype = np.float64
    value_name = "pagerank"
    sum = "add"
    execution = "sync"
    max_iterations = 100
    initially_active = "all"
    tolerance = 1e-4
    constants = {"damping": 0.85}
    aggregates = {"dangling": ("add", dangling_mass)}

    def __init__(self, **constants):
        super().__init__(**constants)
        damping = self.constants["damping"]
        _common.require(self, "damping", 0.0 <= damping < 1.0, "0 <= damping < 1")
        # a contribution PR(u)/outdeg(u) rounded to float32 (relative error <= 2^-24)
        # moves an iteration's result by at most d * 2^-24 in L1 (the contributions of
        # all edges sum to at most 1); a run stopped at an L1 change < tol then has a
        # power step < d * tol + d * 2^-24, below tol for tol > 2^-24 d / (1 - d):
        # three times that, as margin (1.0e-6 for d = 0.85)
        self.float32_gather_tolerance = 3 * 2.0 ** -24 * damping / (1.0 - damping)

    def init(num_vertices):
        return 1.0 / num_vertices

    def gather(src, src_out_degree):
        # PR(u) / outdeg(u); u has the edge (u, v), so outdeg(u) >= 1
        return src / src_out_degree

    def apply(accum, num_vertices, dangling):
        # (1-d)/N + d * (sum PR(u)/outdeg(u) + D/N); dangling = D, the aggregate
        return (1.0 - damping) / num_vertices + damping * (accum + dangling / num_vertices)

    def activate(new, old):
        return True

    def verify(self, graph, result):
        checked = "PageRank: one power step moves the scores by < tolerance (L1), sum = 1"
        bound = _common.run_tolerance(self, result) + 1e-12  # + rounding of the sums
        return power_step_report(graph, result, float(self.constants["damping"]), bound,
                                 checked)


def power_step_report(graph, result, damping: float, bound: float, checked: str):
    """GAPBS's PRVerifier: one numpy power step from the scores moves them by < ``bound``.

    The step is the definition of the module docstring (dangling mass spread
    uniformly), computed from the store's edges.  Also checks that every
    score is positive and finite and that the scores sum to 1 within
    ``bound / (1 - damping)``.

    Returns
    -------
    VerifyReport
        Vertices moved most by the step (those holding half of the L1
        change) and non-positive scores are named.
    """
    scores, problem = _common.result_values(graph, result)
    if problem:
        return _common.failed(checked, problem)
    n = graph.num_vertices
    if n == 0:
        return _common.report(graph, scores, checked, [])
    d = damping
    # ---- out-degrees, counted from the edges themselves
    out_degree = np.zeros(n, dtype=np.int64)
    for src, _, _ in _common.edge_chunks(graph):
        out_degree += np.bincount(src, minlength=n)
    # ---- one power step: y = (1-d)/N + d * (A' (x / outdeg) + D/N)
    contribution = np.divide(scores, out_degree, out=np.zeros(n), where=out_degree > 0)
    incoming = np.zeros(n, dtype=np.float64)
    for src, dst, _ in _common.edge_chunks(graph):
        incoming += np.bincount(dst, weights=contribution[src], minlength=n)
    dangling = scores[out_degree == 0].sum()
    step = (1.0 - d) / n + d * (incoming + dangling / n)
    moved = np.abs(step - scores)
    error = float(moved.sum()) if np.isfinite(moved).all() else np.inf
    total = float(scores.sum())
    problems = [("not a positive finite score", ~(np.isfinite(scores) & (scores > 0)))]
    if error >= bound:
        problems.append(("moved most by the power step", _common.holding_half(moved)))
    # sum(step) - 1 = d (sum(x) - 1), so |sum(x) - 1| <= ||step - x||_1 / (1 - d): a
    # synchronous run keeps the sum at 1 up to rounding, an asynchronous one within this
    sum_bound = bound / (1.0 - d)
    if not abs(total - 1.0) < sum_bound:
        problems.append(("scores do not sum to 1 (largest scores)",
                         _common.holding_half(scores)))
    extra = (f"L1 step {error:.3g} (bound {bound:.3g}), sum of scores {total:.12g} "
             f"(1 within {sum_bound:.3g})")
    return _common.report(graph, scores, checked, problems, extra)
