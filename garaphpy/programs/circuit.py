"""Circuit simulation: nodal analysis by Jacobi iteration (Garaph section 6 and CuSha, "CS").

The graph is a resistor network: edge (u, v) with value g_uv > 0 is a
conductance.  Kirchhoff's current law at a free node v, over its in-edges,
gives its voltage as the conductance-weighted mean of its neighbours'::

    V_v = sum_{u -> v} g_uv V_u / G_v,      G_v = sum_{u -> v} g_uv  (weighted_in_degree)

(on an undirected graph this is exactly nodal analysis).  Fixed-voltage
nodes, decided locally so that the rule works inside the program subset:

* the run's sources are held at 1 V;
* the *ground*: every non-source vertex whose original (user) id is a
  multiple of the constant ``ground_every`` (default 16), held at 0 V;
* a non-source, non-ground vertex without in-edges is floating: it keeps
  its initial 0 V.

All other vertices start at 0 V.  The reported voltages are the fixed point
of the Jacobi step V_v <- sum g_uv V_u / G_v at the free vertices (the
linear system's solution where it is unique; vertices with no path from a
fixed node keep 0).  ``vertex % ground_every`` uses Python's modulo (the
result has the divisor's sign), also for negative ids.

Execution: sync, sum = add, all vertices active in every iteration; stops
on the L1 change < ``tolerance`` (1e-4) or after ``max_iterations`` (1000).

The verifier: sources exactly 1, ground and floating vertices exactly 0,
every voltage in [0, 1] (the maximum principle), and one numpy Jacobi step
from the result moves the voltages by less than ``tolerance * C`` in L1,
C = max over free u of sum_{v free, u->v} g_uv / G_v (the step's L1 norm
on the free vertices), which a synchronous run stopped by its L1 criterion
satisfies.
"""

from __future__ import annotations

import numpy as np

from ..program import VertexProgram
from . import _common

#: Rounding allowed outside [0, 1] by the range check.
RANGE_SLACK = 1e-12


class CircuitSimulation(VertexProgram):
    """Node voltages of a resistor network (Jacobi nodal analysis).

    V_v <- sum_{u->v} g_uv V_u / sum_{u->v} g_uv for free vertices; sources
    held at 1 V; non-source vertices whose user id is a multiple of
    ``ground_every`` held at 0 V (ground); everything else starts at 0 V; a
    free vertex without in-edges keeps 0 V.

    Constants
    ---------
    ground_every : int, default 16
        Grounding rule: vertex id % ground_every == 0 (non-sources), >= 1.

    Parameters of the run
    ---------------------
    sources : the vertices held at 1 V (needs_sources).

    Values
    ------
    float64 voltages in [0, 1]; unreachable (no path from a source): 0 V.

    Execution
    ---------
    sync; sum = add; all vertices active in every iteration; stops on the
    L1 change < ``tolerance`` = 1e-4 or after ``max_iterations`` = 1000.
    Needs edge weights (conductances, finite and > 0).

    Verifier
    --------
    Fixed nodes exact (sources 1 V, ground and floating 0 V), voltages in
    [0, 1], one numpy Jacobi step moves < tolerance * C in L1.
    """

    value_dtype = np.float64
    value_name = "voltage"
    sum = "add"
    execution = "sync"
    max_iterations = 1000
    initially_active = "all"
    tolerance = 1e-4
    needs_weights = True
    weight_domain = "positive"
    needs_sources = True
    constants = {"ground_every": 16}

    def __init__(self, **constants):
        super().__init__(**constants)
        every = self.constants["ground_every"]
        _common.require(self, "ground_every", float(every).is_integer() and every >= 1,
                        "an integer >= 1")
        self.constants["ground_every"] = int(every)

    def init(is_source):
        return 1.0 if is_source else 0.0

    def gather(src, weight):
        return weight * src

    def apply(value, accum, vertex, weighted_in_degree, is_source):
        if is_source:
            return 1.0
        if vertex % ground_every == 0:
            return 0.0
        if weighted_in_degree > 0.0:
            # V_v = sum g_uv V_u / G_v
            return accum / weighted_in_degree
        return value

    def activate(new, old):
        return True

    def grounded(self, graph, sources):
        """Mask of the ground vertices (0 V) of a run with these internal source ids."""
        original = np.asarray(graph.original_ids(), dtype=np.int64)
        ground = np.mod(original, self.constants["ground_every"]) == 0
        ground[sources] = False
        return ground

    def verify(self, graph, result):
        checked = "CS: fixed nodes exact, voltages in [0, 1], one Jacobi step moves < tol*C (L1)"
        voltage, sources, is_source, failure = _common.checked_inputs(
            graph, result, checked, weights="positive", requirement="CS needs finite conductances > 0")
        if failure:
            return failure
        n = graph.num_vertices
        ground = self.grounded(graph, sources)
        in_count, conductance = _common.in_sums(graph, n)
        free = ~is_source & ~ground & (in_count > 0)
        floating = ~is_source & ~ground & (in_count == 0)
        # ---- one Jacobi step: V_v = sum g_uv V_u / G_v on the free vertices
        average, spread = _common.weighted_average_step(graph, voltage, free, conductance)
        moved = np.abs(average - voltage)
        error = float(moved.sum()) if np.isfinite(moved).all() else np.inf
        bound = _common.run_tolerance(self, result) * spread + _common.rounding_slack(n)
        with np.errstate(invalid="ignore"):
            # a mean of values in [0, 1] may round a few ulps outside it
            outside = ~((voltage >= -RANGE_SLACK) & (voltage <= 1.0 + RANGE_SLACK))
        problems = [
            ("source not at 1 V", is_source & (voltage != 1.0)),
            ("ground not at 0 V", ground & (voltage != 0.0)),
            ("floating (no in-edge) not at its initial 0 V", floating & (voltage != 0.0)),
            ("outside [0, 1] V", outside),
        ]
        if not error < bound:
            problems.append(("moved most by one Jacobi step", _common.holding_half(moved)))
        return _common.report(graph, voltage, checked, problems,
                              f"L1 step {error:.3g} (bound {bound:.3g}, C = {spread:.3g}), "
                              f"{int(ground.sum()):,} grounded")
