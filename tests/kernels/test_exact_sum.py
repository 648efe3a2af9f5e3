"""Add aggregates are exact sums: the same bits whatever the parts, the
threads or the partitions that folded them, within one unit in the last
place of the true sum (checked against Python's ``fractions``)."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numba
import numpy as np
import pytest

import garaphpy
from garaphpy.api import NotConvergedWarning
from garaphpy.kernels.cpu import exact_sum
from garaphpy.kernels.cpu_program import compile_program
from garaphpy.programs import PageRank


def true_sum(terms) -> float:
    return float(sum(map(Fraction, np.asarray(terms, np.float64).tolist()), Fraction(0)))


def terms_of(kind: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 4000))
    terms = rng.standard_normal(n) * np.exp2(rng.integers(-70, 70, n))
    if kind == "positive":
        terms = np.abs(terms)
    elif kind == "cancelling":
        terms = np.concatenate([terms, -terms[::-1], [1e-300, 5e-324]])
    elif kind == "wide":
        terms[: min(4, n)] = [1e300, -1e300, 5e-324, -2.5e-320][: min(4, n)]
    elif kind == "dangling":       # PageRank's: many equal small scores
        terms = np.full(n, 0.1) / n
    return terms


@pytest.mark.parametrize("kind", ["mixed", "positive", "cancelling", "wide", "dangling"])
@pytest.mark.parametrize("seed", range(4))
def test_sums_are_the_same_bits_in_any_order_and_split(kind, seed):
    terms = terms_of(kind, seed)
    rng = np.random.default_rng(100 + seed)
    expected = true_sum(terms)
    got = exact_sum.exact_sum(terms)
    if expected == 0:
        assert got == 0
    else:
        assert abs(got - expected) <= np.spacing(abs(expected))
    shuffled = terms[rng.permutation(terms.size)]
    assert exact_sum.exact_sum(shuffled) == got
    cuts = np.sort(rng.integers(0, terms.size, 5))
    rows = np.stack([exact_sum.accumulator_of(part) for part in np.split(shuffled, cuts)])
    assert exact_sum.value(exact_sum.merge_rows(rows)) == got


def test_infinities_and_nans_follow_ieee_whatever_the_order():
    assert exact_sum.exact_sum([1.0, np.inf, 2.0]) == np.inf
    assert exact_sum.exact_sum([-np.inf, 1.0]) == -np.inf
    assert np.isnan(exact_sum.exact_sum([np.inf, 3.0, -np.inf]))
    assert np.isnan(exact_sum.exact_sum([1.0, np.nan]))
    assert exact_sum.exact_sum([1e308, 1e308]) == np.inf       # as float addition overflows
    assert exact_sum.exact_sum([1e308, 1e308, -1e308]) == 1e308  # no intermediate overflow
    assert exact_sum.exact_sum([]) == 0.0


@numba.njit(cache=True)
def _add_repeatedly(accumulators, x, times):
    for _ in range(times):
        exact_sum.add_term(accumulators, 0, x)


def test_a_long_fold_is_carried_before_its_limbs_could_overflow():
    """Past ``TERMS_BEFORE_NORMALIZING`` terms the fold carries its limbs
    (its count starts again) and the sum stays exact."""
    term = np.ldexp(np.float64(2 ** 53 - 1), -20)       # every fraction bit set
    times = exact_sum.TERMS_BEFORE_NORMALIZING + 7
    rows = np.zeros((1, exact_sum.WIDTH), np.int64)
    _add_repeatedly(rows, term, times)
    assert rows[0, exact_sum.COUNT] == 7
    assert exact_sum.value(rows[0]) == float(Fraction(term) * times)


def test_compute_aggregates_gives_the_same_bits_for_any_parts():
    program = PageRank()
    compiled = compile_program(program)
    n = 5000
    rng = np.random.default_rng(3)
    values = rng.random(n) / n
    out_degree = (rng.random(n) < 0.4).astype(np.int64)      # 60% dangling
    attrs = (out_degree, out_degree, np.zeros(n), np.arange(n), np.zeros(n, np.bool_))
    identities = np.zeros(1)
    results = set()
    for parts in (1, 2, 7, 64):
        starts = np.linspace(0, n, parts + 1).astype(np.int64)
        partial, sums = compiled.kernels.compute_aggregates(values, attrs, n, 1, identities,
                                                            starts)
        merged = exact_sum.merge_parts(partial, sums, compiled.aggregate_monoids)
        results.add(float(merged[0]))
    assert len(results) == 1
    expected = true_sum(values[out_degree == 0])
    assert abs(results.pop() - expected) <= np.spacing(expected)


def test_pagerank_in_float32_is_the_same_bits_from_one_thread_or_two():
    """Float32 contributions round a last bit of the dangling sum into a
    whole float32 step where a score sits near a tie: the sum must not
    depend on the threads' parts."""
    rng = np.random.default_rng(7)
    n = 20_000
    sources, targets = rng.integers(0, n // 2, 120_000), rng.integers(0, n, 120_000)
    graph = garaphpy.Graph.from_arrays(sources, targets, num_vertices=n)
    runs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotConvergedWarning)
        for threads in (1, 2):
            result = garaphpy.run(graph, "pagerank", mode="cpu", threads=threads,
                                  max_iterations=12)
            assert result.plan.cpu.float32_contributions
            runs.append(result.values)
    np.testing.assert_array_equal(runs[0], runs[1])
