"""kernels/cpu/notify.py: mark_out_neighbours, the notified vertices as flags."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from garaphpy.kernels.cpu import frontier_degree_prefix, mark_out_neighbours


@pytest.mark.parametrize("chunks", [1, 3, 16])
@pytest.mark.parametrize("active", [0.0, 0.02, 0.4, 1.0])
def test_the_flags_are_the_out_neighbours_of_the_frontier(chunks, active):
    """Against SciPy: the frontier's indicator times the adjacency matrix, on a
    graph with a hub (its edges cut over every chunk), loops and duplicates."""
    rng = np.random.default_rng(17)
    n = 300
    sources = np.concatenate([rng.integers(0, n, 3000), np.zeros(500, np.int64)])
    targets = np.concatenate([rng.integers(0, n, 3000), rng.integers(0, n, 500)])
    adjacency = sp.csr_matrix((np.ones(sources.size), (sources, targets)), shape=(n, n))
    adjacency.sum_duplicates()
    adjacency.sort_indices()
    offsets = adjacency.indptr.astype(np.int64)
    frontier = np.flatnonzero(rng.random(n) < active).astype(np.int64)
    expected = np.zeros(n + 1, bool)
    indicator = np.zeros(n)
    indicator[frontier] = 1.0
    expected[:n] = (adjacency.T @ indicator) > 0
    reached = np.zeros(n + 1, bool)
    prefix = frontier_degree_prefix(frontier, offsets, 2)
    mark_out_neighbours(frontier, prefix, offsets, adjacency.indices.astype(np.int64),
                        reached, chunks)
    np.testing.assert_array_equal(reached, expected)
