"""The frontier type: one form held, the others made once on demand.

Each conversion is checked against plain NumPy (``np.flatnonzero``, a
boolean mask, ``np.add.reduce`` of the out-degrees); each form is made at
most once (the same array is handed out again); a frontier made from ids
hands the GPU's uint8 activity to a staging buffer larger than the graph and
clears every stale flag in it.
"""

from __future__ import annotations

import numpy as np
import pytest

from garaphpy.scheduler import frontier as frontier_module
from garaphpy.scheduler.frontier import Frontier


@pytest.fixture
def random_flags():
    rng = np.random.default_rng(7)
    return rng.random(5000) < 0.3


@pytest.mark.parametrize("threads", [1, 2])
def test_ids_from_flags_are_numpys_and_made_once(random_flags, threads, monkeypatch):
    frontier = Frontier.of_flags(random_flags, threads)
    ids = frontier.ids
    np.testing.assert_array_equal(ids, np.flatnonzero(random_flags))
    assert ids.dtype == np.int64 and frontier.size == len(frontier) == ids.size
    monkeypatch.setattr(frontier_module.kernels, "active_vertex_ids",
                        lambda *a: pytest.fail("converted twice"))
    assert frontier.ids is ids
    assert frontier.flags is random_flags        # the form it was made from, as given


def test_flags_from_ids_are_a_mask_made_once(random_flags):
    ids = np.flatnonzero(random_flags)
    frontier = Frontier.of_ids(ids, random_flags.size)
    flags = frontier.flags
    assert flags.dtype == np.bool_
    np.testing.assert_array_equal(flags, random_flags)
    assert frontier.flags is flags and frontier.ids is ids


def test_device_flags_fill_a_larger_staging_buffer_and_clear_stale_flags(random_flags):
    ids = np.flatnonzero(random_flags)
    staging = np.ones(random_flags.size + 3, np.uint8)      # the last frontier's flags
    out = Frontier.of_ids(ids, random_flags.size).device_flags(staging)
    assert out is staging
    expected = np.zeros(staging.size, np.uint8)
    expected[ids] = 1
    np.testing.assert_array_equal(staging, expected)


def test_out_edges_are_the_sum_of_the_out_degrees_counted_once(random_flags):
    rng = np.random.default_rng(3)
    out_degree = rng.integers(0, 50, random_flags.size).astype(np.int64)
    frontier = Frontier.of_flags(random_flags, 2)
    expected = int(out_degree[random_flags].sum())
    assert frontier.out_edges(out_degree) == expected
    out_degree[:] = 0           # counted once: the frontier's graph does not change
    assert frontier.out_edges(out_degree) == expected


def test_of_keeps_a_frontier_and_wraps_ids():
    frontier = Frontier.of_ids([1, 4], 6)
    assert Frontier.of(frontier, 6) is frontier
    wrapped = Frontier.of(np.array([2, 3]), 6)
    np.testing.assert_array_equal(wrapped.flags, [0, 0, 1, 1, 0, 0])


def test_a_frontier_takes_exactly_one_form():
    with pytest.raises(ValueError, match="ids or flags, exactly one"):
        Frontier(4)
    with pytest.raises(ValueError, match="ids or flags, exactly one"):
        Frontier(4, ids=np.zeros(0, np.int64), flags=np.zeros(4, np.bool_))
