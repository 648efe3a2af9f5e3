"""The CPU's direction with each direction's disk reads counted (Garaph sections 2.2, 4.2).

:func:`~garaphpy.scheduler.disk_decisions.disk_direction`'s truth table:
a forced direction wins, the in-memory rule's choice stands where both
directions read the same bytes (in memory: none) and the sparse direction
copies no in-edge out of the pages (or the choice is the pull), and
otherwise the direction of fewer seconds (disk bytes at the disk's speed
plus edges and copied edges at the CPU's) is taken.
"""

from __future__ import annotations

import pytest

from garaphpy import config
from garaphpy.scheduler import decisions
from garaphpy.scheduler.disk_decisions import disk_direction, sparse_edge_units

DISK = 1e9          # bytes a second
EDGES = 1e8         # edges a second


def choose(chosen="pull", pull_edges=1e6, sparse_edges=1e5, pull_bytes=0, sparse_bytes=0,
           forced="auto", copied_edges=0):
    return disk_direction(chosen, pull_edges, sparse_edges, pull_bytes, sparse_bytes, DISK,
                          EDGES, forced, copied_edges=copied_edges)


@pytest.mark.parametrize("chosen", ["pull", "notify-pull"])
def test_the_in_memory_choice_stands_where_both_read_the_same(chosen):
    # the sparse direction computes far less, but the term is zero: the rule's choice
    assert choose(chosen, 1e6, 1.0, 0, 0) == chosen
    assert choose(chosen, 1.0, 1e6, 5_000, 5_000) == chosen


@pytest.mark.parametrize("forced", ["pull", "notify-pull"])
def test_a_forced_direction_wins(forced):
    assert choose("pull", 1e6, 1.0, 10**9, 0, forced=forced) == forced
    assert choose("notify-pull", 1.0, 1e6, 0, 10**9, forced=forced) == forced


@pytest.mark.parametrize("chosen", ["pull", "notify-pull"])
@pytest.mark.parametrize("pull_bytes, sparse_bytes, pull_edges, sparse_edges, expected", [
    # the pull reads 1 s of pages, the sparse direction none and 0.01 s of edges
    (10**9, 0, 1e6, 1e6, "notify-pull"),
    # the sparse direction reads more pages than the pull saves in edges
    (0, 10**9, 1e6, 1e6, "pull"),
    # both read; the pull's edges (1 s) outweigh its extra 0.5 s of reads' saving
    (10**9, 5 * 10**8, 1e8, 1e6, "notify-pull"),
    # the sparse direction's edges (2 s) outweigh the pull's extra 1 s of reads
    (2 * 10**9, 10**9, 0.0, 2e8, "pull"),
    # a tie goes to the sparse direction
    (2 * 10**9, 10**9, 0.0, 1e8, "notify-pull"),
])
def test_fewer_seconds_win_where_reads_differ(chosen, pull_bytes, sparse_bytes, pull_edges,
                                              sparse_edges, expected):
    assert choose(chosen, pull_edges, sparse_edges, pull_bytes, sparse_bytes) == expected


def test_sparse_edge_units_are_the_in_memory_rules_prices():
    # Garaph's: notify-pull costs NOTIFY_PULL_COST_FACTOR f |E| (rho = 1) against |E|
    units = sparse_edge_units(250, 1000, settling=False)
    assert units == pytest.approx(config.NOTIFY_PULL_COST_FACTOR * 250)
    assert (units <= 1000) == (decisions.choose_direction(0.25, 1.0) == "notify-pull")
    # Beamer's: alpha times the frontier's out-edges
    assert sparse_edge_units(40, 1000, settling=True) == \
        pytest.approx(config.CPU_SETTLING_PULL_FACTOR * 40)
    assert sparse_edge_units(0, 0, settling=False) == 0.0


def test_a_notify_pull_copying_most_in_edges_pulls_where_both_read_the_same():
    factor = config.NOTIFY_PULL_DISK_COPY_FACTOR
    # kron:16's SSSP at f = 0.02 from disk: every page either way, 83% of |E| copied
    pull_edges, sparse_edges = 1.8e6, 2 * 0.02 * 1.8e6
    copied = int(0.83 * pull_edges)
    assert sparse_edges + factor * copied > pull_edges
    assert choose("notify-pull", pull_edges, sparse_edges, 10**7, 10**7,
                  copied_edges=copied) == "pull"
    # few edges copied: the in-memory rule's notify-pull stands
    few = int((pull_edges - sparse_edges) / factor) - 1
    assert choose("notify-pull", pull_edges, sparse_edges, 10**7, 10**7,
                  copied_edges=few) == "notify-pull"
    # the pull stays a pull: a copy only adds to the sparse direction
    assert choose("pull", pull_edges, 1.0, 10**7, 10**7, copied_edges=1) == "pull"


def test_copies_count_where_reads_differ():
    factor = config.NOTIFY_PULL_DISK_COPY_FACTOR
    # the pull reads 0.01 s more, the sparse direction copies 0.02 s of edges more
    copied = int(0.02 * EDGES / factor)
    assert choose("notify-pull", 1e6, 1e6, 10**7, 0, copied_edges=0) == "notify-pull"
    assert choose("notify-pull", 1e6, 1e6, 10**7, 0, copied_edges=copied) == "pull"
    assert choose("pull", 1e6, 1e6, 10**7, 0, copied_edges=copied, forced="notify-pull") \
        == "notify-pull"
