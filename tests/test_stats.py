"""Paired comparisons: the group bootstrap by hand on tiny data, the paired permutation test's exact p-values,
win/tie/loss, and coverage by simulation."""

import numpy as np
import polars as pl
import pytest

from workflow_scripts.core.contracts import COMPARISONS
from workflow_scripts.core.tables import conform
from workflow_scripts.core.errors import InputError
from workflow_scripts.stats.paired import (
    compare_policies,
    group_bootstrap,
    group_permutation_test,
    smallest_p,
    win_tie_loss,
)


def test_two_equal_groups_give_the_hand_computed_percentile_interval():
    # Group means 0 and 1, two queries each: a resample holds both groups (0.5) with probability 1/2, only one
    # (0 or 1) with 1/4 each, so the 2.5% and 97.5% percentiles are 0 and 1.
    result = group_bootstrap([0.0, 0.0, 1.0, 1.0], ["a", "a", "b", "b"], B=2000, seed=0)
    assert (result.estimate, result.low, result.high, result.n, result.n_groups) == (0.5, 0.0, 1.0, 4, 2)


def test_pooled_mean_weighs_groups_by_their_queries_and_is_seeded():
    values, groups = [1.0, 0.0, -1.0, 1.0, 0.0, 0.0], ["p1", "p1", "p2", "p3", "p3", "p3"]
    result = group_bootstrap(values, groups, B=500, seed=3)
    assert result.estimate == pytest.approx(1 / 6) and result.n_groups == 3
    assert -1.0 <= result.low <= result.estimate <= result.high <= 1.0
    assert result == group_bootstrap(values, groups, B=500, seed=3)
    bca = group_bootstrap(values, groups, B=500, seed=3, method="bca")
    assert bca.estimate == result.estimate and bca.low <= bca.high


def test_all_ties_give_a_point_interval_without_warnings(recwarn):
    result = group_bootstrap(np.zeros(9), np.repeat(["a", "b", "c"], 3), method="bca")
    assert (result.estimate, result.low, result.high) == (0.0, 0.0, 0.0)
    assert not recwarn.list


def test_bad_inputs_are_refused():
    with pytest.raises(InputError, match="two groups"):
        group_bootstrap([1.0, 0.0], ["a", "a"])
    with pytest.raises(InputError, match="method"):
        group_bootstrap([1.0, 0.0], ["a", "b"], method="studentized")
    with pytest.raises(InputError, match="finite"):
        group_bootstrap([np.nan, 0.0], ["a", "b"])


def test_win_tie_loss_and_the_comparison_table():
    assert win_tie_loss([1, 2, 3], [1, 1, 4]) == (1 / 3, 1 / 3, 1 / 3)
    table = pl.DataFrame({"group_id": ["a", "a", "b", "c"], "adaptive": [1, 1, 0, 1], "always": [1, 0, 0, 1],
                          "keep": [0, 1, 0, 1]})
    comparisons = conform(compare_policies(table, [("adaptive", "always"), ("adaptive", "keep")], B=500), COMPARISONS)
    first = comparisons.row(0, named=True)
    assert (first["a"], first["b"], first["estimate"]) == ("adaptive", "always", 0.25)
    assert (first["n"], first["n_groups"]) == (4, 3)
    assert (first["win"], first["tie"], first["loss"]) == (0.25, 0.75, 0.0)
    # group sums of adaptive − always: a = 1, b = 0, c = 0: every sign pattern gives |Σ| = 1, so p = 1
    assert first["p_permutation"] == 1.0
    with pytest.raises(InputError, match="missing values"):
        compare_policies(table.with_columns(pl.lit(None).alias("keep")), [("adaptive", "keep")])
    with pytest.raises(InputError, match=r"\['hybrid'\]"):
        compare_policies(table, [("adaptive", "hybrid")])


def test_permutation_test_exact_p_value_flips_whole_groups():
    # Six groups, every group's summed difference positive: of the 2^6 = 64 sign patterns only "all +" and
    # "all −" reach |Σ| ≥ the observed, so the exact two-sided p-value is 2/64.
    assert group_permutation_test([0.5, 1.0, 2.0, 0.25, 1.5, 3.0], list("abcdef")) == pytest.approx(2 / 64)
    # Two queries per group (+1, −0.5): the group sums (+0.5 each) are flipped together, so p is still 2/64;
    # flipping single queries instead would give a large p-value.
    values, groups = [1.0, -0.5] * 6, np.repeat(list("abcdef"), 2)
    assert group_permutation_test(values, groups) == pytest.approx(2 / 64)
    assert group_permutation_test(values, np.arange(12)) > 0.3
    # Group sums 3, −1, 1, 1 (Σ = 4): with +3 the sum reaches ≥ 4 when at least two of the three ±1 are + (4 of
    # the 16 patterns), so the one-sided p is 4/16 and the two-sided 2 × 4/16 = 0.5.
    assert group_permutation_test([3.0, -1.0, 1.0, 1.0], list("abcd")) == pytest.approx(0.5)
    assert group_permutation_test(np.zeros(4), list("aabb")) == 1.0


def test_permutation_test_with_many_groups_is_seeded_and_never_zero():
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(40), 3)
    shifted = rng.normal(1.0, 1.0, size=groups.size)
    p = group_permutation_test(shifted, groups, B=999, seed=4)
    assert p == group_permutation_test(shifted, groups, B=999, seed=4)
    assert p == pytest.approx(2 / 1000)  # 2 × (0 hits + 1) / (B + 1): no random sign pattern reaches the observed
    null = rng.normal(0.0, 1.0, size=groups.size)
    assert group_permutation_test(null, groups, B=999, seed=4) > 0.05
    with pytest.raises(InputError, match="finite"):
        group_permutation_test([np.nan, 1.0], ["a", "b"])


@pytest.mark.slow
def test_percentile_interval_covers_the_true_mean_difference():
    # 4,000 datasets of 60 papers with 1-8 questions each; every paper shifts its questions' differences by a
    # shared random effect (sd 0.5) on top of per-question noise (sd 1). True mean difference 0.1. The interval
    # must cover it 93-97% of the time: nominal 95%, but with 60 groups the percentile interval runs a little
    # short (15,000 simulated datasets put it at 94.2%); the Monte-Carlo standard error here is 0.4 points.
    rng = np.random.default_rng(2024)
    truth, datasets, covered = 0.1, 4000, 0
    for index in range(datasets):
        sizes = rng.integers(1, 9, size=60)
        groups = np.repeat(np.arange(60), sizes)
        values = truth + rng.normal(0, 0.5, size=60)[groups] + rng.normal(0, 1, size=groups.size)
        result = group_bootstrap(values, groups, B=2000, seed=index)
        covered += result.low <= truth <= result.high
    assert 0.93 <= covered / datasets <= 0.97, covered / datasets


def test_the_smallest_attainable_p_is_reached_and_never_undercut():
    """Three groups that all favour a: the exact test's p is its floor 2^(1-3) = 0.25, however large the effect; with
    more groups than B's exact limit the floor is 2 / (B + 1). compare_policies records it as p_floor."""
    values, groups = [5.0, 6.0, 7.0, 8.0], ["a", "b", "c", "c"]
    assert group_permutation_test(values, groups, B=2000) == smallest_p(3, 2000) == 0.25
    assert smallest_p(2, 2000) == 0.5 and smallest_p(11, 2000) == pytest.approx(2 / 2001)
    many = np.arange(1.0, 41.0)
    assert group_permutation_test(many, np.arange(40), B=999, seed=1) == pytest.approx(smallest_p(40, 999))
    table = pl.DataFrame({"group_id": groups, "x": values, "y": [0.0] * 4})
    row = compare_policies(table, [("x", "y")]).row(0, named=True)
    assert row["p_floor"] == 0.25 == row["p_permutation"] and row["low"] > 0  # the CI excludes 0, the p cannot
