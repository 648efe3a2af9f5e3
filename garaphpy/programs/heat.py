"""Heat simulation: diffusion to the steady state (Garaph section 6 and CuSha, "HS").

Definition, with diffusion rate k in (0, 1] and W_v = sum of the weights of
v's in-edges (``weighted_in_degree``)::

    T_s(t)   = 1                          at the run's sources, always
    T_v(0)   = 0                          elsewhere
    T_v(t+1) = (1 - k) T_v(t) + k * sum_{u -> v} w_uv T_u(t) / W_v    (W_v > 0)
    T_v(t+1) = T_v(t)                     (no in-edge: keeps its temperature, 0)

Edge weights are thermal conductances: finite and > 0 (an unweighted graph
counts every edge as 1).  The value reported is the steady state, the
fixed point T_v = sum w_uv T_u / W_v at every non-source vertex with
in-edges (k sets the speed, not the limit): the harmonic extension of the
sources' temperature, with vertices without in-edges as cold (0) boundary.
On an undirected connected graph with no such vertex it is 1 everywhere,
approached geometrically at the rate of the absorbing random walk, which
can be slow with few sources.  Vertices no heat reaches stay at 0.

Execution: sync, sum = add, all vertices active in every iteration; the
run stops when the L1 change of an iteration falls below ``tolerance``
(1e-4) or after ``max_iterations`` (1000) -- a run stopped by the limit
reports non-convergence and normally fails the verifier.

The verifier (GAPBS habit: a fixed-point check by one independent step):
sources exactly 1; vertices without in-edges exactly 0; every value in
[0, 1]; and one numpy step from the result moves the values by less than
``tolerance * C`` in L1, where C = max over free u of ((1 - k) + k * sum_{v
free, u->v} w_uv / W_v) is the L1 norm of the step's linear part on the
free vertices (non-sources with in-edges).  A synchronous run that stopped
on its L1 criterion satisfies this bound; so does an asynchronous one that
updates every vertex once per iteration from values no older than the
iteration's start.
"""

from __future__ import annotations

import numpy as np

from ..program import VertexProgram
from . import _common

#: Rounding allowed outside [0, 1] by the range check.
RANGE_SLACK = 1e-12


class HeatSimulation(VertexProgram):
    """Heat diffusion from sources held at temperature 1 to the steady state.

    T_v <- (1-k) T_v + k * sum_{u->v} w_uv T_u / sum_{u->v} w_uv for every
    non-source vertex with in-edges; sources fixed at 1; the others start at
    0; a vertex without in-edges keeps its temperature.

    Constants
    ---------
    k : float, default 0.5
        Diffusion rate, in (0, 1].

    Parameters of the run
    ---------------------
    sources : the heated vertices (needs_sources), held at 1.

    Values
    ------
    float64 temperatures in [0, 1]; unreachable (no path from a source): 0.

    Execution
    ---------
    sync; sum = add; all vertices active in every iteration; stops on the
    L1 change < ``tolerance`` = 1e-4 or after ``max_iterations`` = 1000.
    Needs edge weights (conductances, finite and > 0).

    Verifier
    --------
    Sources at 1, vertices without in-edges at 0, values in [0, 1], and one
    numpy step moves the values by < tolerance * C in L1 (C: the step's L1
    norm on the free vertices).
    """

    value_dtype = np.float64
    value_name = "temperature"
    sum = "add"
    execution = "sync"
    max_iterations = 1000
    initially_active = "all"
    tolerance = 1e-4
    needs_weights = True
    weight_domain = "positive"
    needs_sources = True
    constants = {"k": 0.5}

    def __init__(self, **constants):
        super().__init__(**constants)
        _common.require(self, "k", 0.0 < self.constants["k"] <= 1.0, "0 < k <= 1")

    def init(is_source):
        return 1.0 if is_source else 0.0

    def gather(src, weight):
        return weight * src

    def apply(value, accum, weighted_in_degree, is_source):
        if is_source:
            return 1.0
        if weighted_in_degree > 0.0:
            # (1-k) T_v + k * sum w_uv T_u / W_v
            return (1.0 - k) * value + k * (accum / weighted_in_degree)
        return value

    def activate(new, old):
        return True

    def verify(self, graph, result):
        checked = "HS: sources at 1, values in [0, 1], one step moves < tolerance*C (L1)"
        temperature, sources, is_source, failure = _common.checked_inputs(
            graph, result, checked, weights="positive", requirement="HS needs finite weights > 0")
        if failure:
            return failure
        n = graph.num_vertices
        k = float(self.constants["k"])
        in_count, weighted_in = _common.in_sums(graph, n)
        free = ~is_source & (in_count > 0)
        # ---- one step: T_v + k (sum w_uv T_u / W_v - T_v) on the free vertices
        average, spread = _common.weighted_average_step(graph, temperature, free, weighted_in)
        moved = np.zeros(n, dtype=np.float64)
        moved[free] = k * np.abs(average[free] - temperature[free])
        error = float(moved.sum()) if np.isfinite(moved).all() else np.inf
        contraction = (1.0 - k) + k * spread if free.any() else 0.0
        bound = _common.run_tolerance(self, result) * contraction + _common.rounding_slack(n)
        with np.errstate(invalid="ignore"):
            # a mean of values in [0, 1] may round a few ulps outside it
            outside = ~((temperature >= -RANGE_SLACK) & (temperature <= 1.0 + RANGE_SLACK))
        problems = [
            ("source not at 1", is_source & (temperature != 1.0)),
            ("no in-edge, but not at its initial 0", ~is_source & (in_count == 0)
             & (temperature != 0.0)),
            ("outside [0, 1]", outside),
        ]
        if not error < bound:
            problems.append(("moved most by one step", _common.holding_half(moved)))
        return _common.report(graph, temperature, checked, problems,
                              f"L1 step {error:.3g} (bound {bound:.3g}, C = {contraction:.3g})")
