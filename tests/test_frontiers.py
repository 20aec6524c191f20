"""Budget frontiers: hand-computed rules, and the usage guarantees checked by simulation.

The simulations draw calibration and held-out scores from known distributions, apply the public threshold
functions and count how often the realized held-out usage exceeds the budget (a violation: usage > ρ).
- Conservative (one-sided DKW, ε = sqrt(ln(1/δ)/2n)): the violation frequency must be ≤ δ plus three Monte-Carlo
  standard errors. DKW bounds the population usage P(S > t); with as many held-out as calibration queries the
  binomial noise of the held-out count stays inside ε (the test checks both).
- Deployable (nominal (1 − ρ) quantile): the threshold's true exceedance rate is centred on ρ (for a continuous
  score it is Beta(⌊nρ⌋ + 1, n − ⌊nρ⌋), mean ≈ ρ + 1/n) and the held-out count adds symmetric noise, so a
  violation is close to a coin flip: 0.40–0.60 (a held-out count exactly equal to ρm is no violation, which
  pulls it a little under one half).
"""

import math

import numpy as np
import polars as pl
import pytest
from scipy.stats import norm

from workflow_scripts.core.contracts import AUDIT, ROUTER_FRONTIERS
from workflow_scripts.core.tables import conform
from workflow_scripts.core.errors import InputError
from workflow_scripts.routing.frontiers import (
    audit_splits,
    calibration_audit,
    check_budgets,
    dkw_epsilon,
    frontier_table,
    grouped_split,
    rule_thresholds,
)

CALIBRATION = pl.DataFrame({"qid": [f"c{i}" for i in range(10)], "score": np.arange(1.0, 11.0)})
HELDOUT = pl.DataFrame({"qid": list("abcde"), "score": [2.5, 7.0, 7.5, 9.0, 11.0],
                        "metric_on": [1.0, 1.0, 0.0, 1.0, 1.0], "metric_off": [0.0, 1.0, 1.0, 0.0, 0.0]})


def test_frontiers_by_hand():
    table = conform(frontier_table(CALIBRATION, HELDOUT, [0.3, 0.9], delta=0.05), ROUTER_FRONTIERS)
    row = {(r["frontier"], r["budget"]): r for r in table.iter_rows(named=True)}
    # deployable at 0.3: k = ceil(10 * 0.7) = 7, t = 7; held-out scores above 7: 7.5, 9, 11.
    deployable = row[("deployable", 0.3)]
    assert (deployable["threshold"], deployable["calibration_usage"], deployable["usage"]) == (7.0, 0.3, 0.6)
    assert deployable["transfer_error"] == pytest.approx(0.3)
    assert deployable["accuracy"] == pytest.approx((0 + 1 + 0 + 1 + 1) / 5)  # c off, d and e on
    # exact at 0.3: floor(1.5) = 1 query, the top one (e: on = 1); the rest keep metric_off (b = 1).
    exact = row[("exact", 0.3)]
    assert (exact["usage"], exact["threshold"], exact["accuracy"]) == (0.2, None, pytest.approx(3 / 5))
    # conservative: eps = sqrt(ln 20 / 20) = 0.387; at 0.3 the target is negative, so nothing triggers;
    # at 0.9 the target is 0.513, k = ceil(10 * 0.487) = 5, t = 5.
    epsilon = math.sqrt(math.log(20) / 20)
    assert row[("conservative", 0.3)]["threshold"] == math.inf and row[("conservative", 0.3)]["usage"] == 0.0
    assert row[("conservative", 0.3)]["accuracy"] == pytest.approx(0.4)
    assert row[("conservative", 0.9)]["epsilon"] == epsilon
    assert (row[("conservative", 0.9)]["threshold"], row[("conservative", 0.9)]["usage"]) == (5.0, 0.8)
    # budgets.heldout_term: ε gains the held-out Hoeffding term, sqrt(ln 40 / 20) + sqrt(ln 40 / 10) = 1.02
    wide = frontier_table(CALIBRATION, HELDOUT, [0.3, 0.9], heldout_term=True)
    wide = wide.filter(pl.col("frontier") == "conservative")
    assert wide["epsilon"].to_list() == [pytest.approx(math.sqrt(math.log(40) / 20) + math.sqrt(math.log(40) / 10))] * 2
    assert wide["usage"].to_list() == [0.0, 0.0]


def test_exact_frontier_shares_a_straddling_tie_block():
    heldout = pl.DataFrame({"qid": list("abcde"), "score": [1.0, 2.0, 2.0, 2.0, 3.0],
                            "metric_on": [0.0, 1.0, 0.0, 0.0, 1.0], "metric_off": [0.0] * 5})
    exact = frontier_table(CALIBRATION, heldout, [0.6]).filter(pl.col("frontier") == "exact").row(0, named=True)
    # three places: e (score 3) plus two of the three tied at 2, whose gains sum to 1 → 2/3 expected.
    assert exact["usage"] == 0.6 and exact["accuracy"] == pytest.approx((1 + 2 / 3) / 5)


def deployable_at(scores, budget: float) -> float:
    return float(rule_thresholds(np.sort(np.asarray(scores, dtype=float)), check_budgets([budget]))[0])


def conservative_at(scores, budget: float, delta: float, heldout_n: int | None = None) -> float:
    slack = dkw_epsilon(len(scores), delta, heldout_n)
    return float(rule_thresholds(np.sort(np.asarray(scores, dtype=float)), check_budgets([budget]) - slack)[0])


def test_ties_never_push_calibration_usage_over_the_budget():
    scores = [1.0, 1.0, 1.0, 1.0, 2.0]
    assert deployable_at(scores, 0.5) == 1.0  # k = 3; only the 2.0 is above: usage 0.2 ≤ 0.5
    assert deployable_at(np.arange(100.0), 0.7) == 29.0  # exactly 70 of 100 above (no rounding slip)


def test_budgets_outside_the_unit_interval_are_named():
    for budget in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(InputError, match=f"budget {budget} is outside"):
            frontier_table(CALIBRATION, HELDOUT, [0.5, budget])
    with pytest.raises(InputError, match="delta"):
        conservative_at([1.0, 2.0], 0.5, delta=0.7)


def _violations(draw, n_cal: int, m: int, budget: float, delta: float, splits: int, seed: int,
                heldout_n: int | None = None) -> tuple[float, float, float]:
    """Violation frequencies of the deployable and conservative rules, and of the conservative population usage
    (standard-normal draws only), over `splits` simulated calibration / held-out pairs."""
    rng = np.random.default_rng(seed)
    calibration, heldout = draw(rng, (splits, n_cal)), draw(rng, (splits, m))
    nominal = np.array([deployable_at(row, budget) for row in calibration])
    strict = np.array([conservative_at(row, budget, delta, heldout_n) for row in calibration])
    limit = budget * m + 1e-9
    deployable = ((heldout > nominal[:, None]).sum(axis=1) > limit).mean()
    conservative = ((heldout > strict[:, None]).sum(axis=1) > limit).mean()
    return deployable, conservative, (norm.sf(strict) > budget).mean()


def _mc_bound(delta: float, splits: int) -> float:
    return delta + 3 * math.sqrt(delta * (1 - delta) / splits)


def normal(rng, shape):
    return rng.normal(size=shape)


def test_simulated_usage_guarantees_continuous_scores():
    splits, delta = 2000, 0.05
    for budget in (0.5, 0.2):
        deployable, conservative, population = _violations(normal, 400, 400, budget, delta, splits, seed=11)
        assert 0.40 <= deployable <= 0.60, (budget, deployable)
        assert conservative <= _mc_bound(delta, splits), (budget, conservative)
        assert population <= _mc_bound(delta, splits), (budget, population)


def test_simulated_small_heldout_needs_the_heldout_term():
    # 1,000 calibration but only 150 held-out queries: the held-out count's own noise (sd 0.041 at ρ = 0.5)
    # exceeds the DKW slack (0.039), so the realized rate breaks δ; the held-out term restores it.
    splits, delta = 1000, 0.05
    _, population_only, population = _violations(normal, 1000, 150, 0.5, delta, splits, seed=5)
    assert population <= _mc_bound(delta, splits) < population_only
    _, with_heldout, _ = _violations(normal, 1000, 150, 0.5, delta, splits, seed=5, heldout_n=150)
    assert with_heldout <= _mc_bound(delta, splits)


def test_simulated_usage_guarantee_with_heavily_tied_scores():
    def rounded(rng, shape):  # ~20 distinct values: most scores tie with many others
        return np.round(rng.normal(size=shape), 1)

    splits, delta = 1000, 0.05
    _, conservative, _ = _violations(rounded, 300, 300, 0.5, delta, splits, seed=2)
    assert conservative <= _mc_bound(delta, splits)


def test_grouped_split_keeps_groups_whole_and_hits_the_fraction():
    groups = np.repeat(np.arange(40), 5).astype(str)
    mask = grouped_split(groups, 0.5, np.random.default_rng(0))
    assert mask.sum() == 100
    assert all(len(set(mask[groups == g])) == 1 for g in np.unique(groups))
    with pytest.raises(InputError, match="two groups"):
        grouped_split(np.array(["g"] * 4), 0.5, np.random.default_rng(0))


def test_calibration_audit_counts_router_split_violations():
    rng = np.random.default_rng(4)
    n = 600
    qids = [f"q{i}" for i in range(n)]
    labels = pl.DataFrame({"qid": qids, "metric_on": rng.integers(0, 2, n).astype(float),
                           "metric_off": rng.integers(0, 2, n).astype(float)})
    groups = pl.DataFrame({"qid": qids, "group_id": [f"g{i // 3}" for i in range(n)]})
    scores = pl.concat([pl.DataFrame({"qid": qids, "router": name, "score": rng.normal(size=n)})
                        for name in ("r1", "r2", "r3")])
    audit = conform(calibration_audit(scores, labels, groups, ["r1", "r2", "r3"], [0.3, 0.5], R=40, seed=1), AUDIT)
    assert audit["combinations"].to_list() == [120] * 4
    share = {(r["budget"], r["rule"]): r["violation_share"] for r in audit.iter_rows(named=True)}
    assert 0.3 <= share[(0.5, "deployable")] <= 0.7 and share[(0.5, "conservative")] <= 0.1
    detail = audit_splits(scores, labels, groups, ["r1"], [0.5], R=3, seed=1)
    assert detail.equals(audit_splits(scores, labels, groups, ["r1"], [0.5], R=3, seed=1))
    with pytest.raises(InputError, match="router 'r9'"):
        calibration_audit(scores, labels, groups, ["r9"], [0.5])
    assert dkw_epsilon(300, 0.05) == pytest.approx(math.sqrt(math.log(20) / 600))
