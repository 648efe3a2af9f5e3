"""A neural-network-like, compute-heavy propagation (Garaph section 6, "NN").

Garaph runs NN (after Bakhoda et al., ISPASS 2009) for a fixed number of
iterations to measure compute-heavy vertex updates.  Our exact definition:
each vertex is a neuron, each edge (u, v) a synapse of weight w_uv::

    x_v(0)   = 1 / (1 + indeg(v))
    x_v(t+1) = sigmoid( sum_{u -> v} w_uv * x_u(t) ),   sigmoid(s) = 1 / (1 + e^-s)

synchronously, for ``max_iterations`` = 10 iterations (Garaph's setting).
A vertex without in-edges gets sigmoid(0) = 0.5 from the first iteration
on.  The initial value depends only on the structure (not on the ids), and
differs between vertices so that a kernel reading the wrong endpoint shows.
The sigmoid is computed in the overflow-free form (e^-s for s >= 0, e^s / (1
+ e^s) otherwise), identical in Python, numba and CUDA.

Needs edge weights (any finite sign); an unweighted graph counts every
weight as 1.  ``run_until_limit``: running all iterations is success.

Fixed-iteration programs have no fixed point to check, so the verifier
replays the whole definition in numpy (edge by edge, bincount sums) for
``result.num_iterations`` synchronous iterations and compares every value
within 1e-9 (absolute).  An asynchronous NN run is a different, order-
dependent computation and does not pass this check.
"""

from __future__ import annotations

import math

import numpy as np

from ..program import VertexProgram
from . import _common

#: Absolute tolerance of the verifier's comparison (values lie in (0, 1)).
ATOL = 1e-9


class NeuralNetwork(VertexProgram):
    """Neural-network-like propagation: x_v <- sigmoid(sum over in-edges of w_uv * x_u).

    x_v starts at 1 / (1 + in_degree(v)); every iteration every vertex
    takes sigmoid of the weighted sum of its in-neighbours' values (0.5
    without in-edges).

    Values
    ------
    float64 activations in [0, 1]; every vertex has one (no notion of
    unreachable).

    Execution
    ---------
    sync; sum = add; all vertices active in every iteration; fixed
    ``max_iterations`` = 10 (``run_until_limit``), as Garaph runs it.
    Needs edge weights (any finite sign).

    Verifier
    --------
    Replays the definition in numpy for ``result.num_iterations``
    iterations and compares every value within 1e-9.
    """

    value_dtype = np.float64
    value_name = "activation"
    sum = "add"
    execution = "sync"
    max_iterations = 10
    initially_active = "all"
    needs_weights = True
    run_until_limit = True

    def init(in_degree):
        return 1.0 / (1.0 + in_degree)

    def gather(src, weight):
        return weight * src

    def apply(accum):
        # sigmoid(accum), without overflow for large |accum|
        if accum >= 0.0:
            return 1.0 / (1.0 + math.exp(-accum))
        z = math.exp(accum)
        return z / (1.0 + z)

    def activate(new, old):
        return True

    def verify(self, graph, result):
        iterations = int(getattr(result, "num_iterations", self.max_iterations))
        checked = f"NN: numpy replay of {iterations} synchronous iterations, |diff| <= {ATOL:g}"
        values, problem = _common.result_values(graph, result)
        if problem:
            return _common.failed(checked, problem)
        n = graph.num_vertices
        expected = replay(graph, iterations)
        with np.errstate(invalid="ignore"):
            differ = ~(np.abs(values - expected) <= ATOL)
        worst = float(np.nanmax(np.abs(values - expected))) if n else 0.0
        return _common.report(graph, values, checked,
                              [("differs from the replay", differ)],
                              f"largest difference {worst:.3g}")


def sigmoid(s):
    """Overflow-free logistic function, elementwise (numpy)."""
    out = np.empty_like(s)
    positive = s >= 0
    out[positive] = 1.0 / (1.0 + np.exp(-s[positive]))
    e = np.exp(s[~positive])
    out[~positive] = e / (1.0 + e)
    return out


def replay(graph, iterations):
    """The definition, run in numpy: x(0) = 1/(1+indeg), x(t+1) = sigmoid(A' W x(t))."""
    n = graph.num_vertices
    in_count, _ = _common.in_sums(graph, n)
    x = 1.0 / (1.0 + in_count)
    for _ in range(iterations):
        total = np.zeros(n, dtype=np.float64)
        for src, dst, weight in _common.edge_chunks(graph):
            total += np.bincount(dst, weights=weight * x[src], minlength=n)
        x = sigmoid(total)
    return x
