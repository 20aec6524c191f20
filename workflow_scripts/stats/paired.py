"""Paired comparisons with a bootstrap over groups (papers / question contexts), a paired permutation test, and
win / tie / loss shares.

In:  a per-query table with a group column (group_id) and one numeric column per policy (e.g. the hit, the
     correctness or the utility of adaptive, always-Hybrid and Keep on the same queries; no missing values —
     drop queries not scored under every policy first), and the pairs (a, b) to compare as a − b.
Out: per pair the estimate (mean of the per-query differences), the confidence interval, the permutation
     p-value, the number of queries and of groups, and the shares of queries where a wins, ties or loses against b
     (COMPARISONS table).

The bootstrap resamples whole groups with replacement, B = 2000 times by default, with a fixed seed, so queries
of one paper stay together and their correlation widens the interval as it should. The statistic is the pooled
mean Σ_groups Σ d / Σ_groups n_g over the resampled groups (the same estimator as the point estimate, so groups
of different sizes weigh by their queries). "percentile" (default): the 2.5% and 97.5% points (for 95%) of the
B resampled statistics (numpy, linear interpolation). "bca": bias-corrected and accelerated, from
scipy.stats.bootstrap on the paired group-level data (group sum, group size), so its acceleration is scipy's
jackknife over groups. When every group has the same mean difference (e.g. all ties) every resample is
that value, and the interval is that single point.

Checked by simulation (tests/test_stats.py): with 60 groups of 1–8 queries and random group effects the 95%
percentile interval covers the true mean difference about 94% of the time (the usual slight shortfall of the
percentile bootstrap with few groups, from the (G − 1)/G shrinkage of the resampled variance).

The permutation test (`group_permutation_test`, column p_permutation) asks whether a and b are exchangeable
within each group: under that null, swapping the two policies' scores on every query of a group flips the sign of
the group's summed difference. scipy.stats.permutation_test (permutation_type="samples" on the one sample of
group sums, i.e. sign flips) compares the observed Σ_groups Σ d (∝ the pooled mean) with its sign-flip
distribution: exact (all 2^G sign patterns) when 2^G ≤ B, else B random patterns with a fixed seed (each tail
(hits + 1) / (B + 1), so never 0); two-sided p = min(1, 2 × the smaller tail). All-zero differences give p = 1.
With few groups the test cannot reach a small p whatever the data: exact, the observed pattern and its mirror are 2
of 2^G, so p ≥ 2^(1 − G) (0.25 with 3 groups); sampled, p ≥ 2 / (B + 1). `smallest_p` gives that floor (column
p_floor), so a reader can tell "no effect" from "too few groups to tell".

The interval and the p come from different procedures (a resampling interval; an exact randomization test), so
they can disagree at the stated level: a percentile interval that excludes 0 beside a p above 1 − confidence, as
with few or very unequal groups, where the bootstrap's spread shrinks by (G − 1) / G. The findings say so when
they do (report/summary.py) rather than pick the friendlier of the two.

For users: docs/statistics.md, "Bootstrap over groups" and "Paired permutation test".
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from workflow_scripts.core.contracts import COMPARISONS
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.vocabulary import BOOTSTRAP_METHODS


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    n: int
    n_groups: int


def _pooled_mean(sums: np.ndarray, sizes: np.ndarray, axis: int = -1) -> np.ndarray:
    return sums.sum(axis=axis) / sizes.sum(axis=axis)


def group_bootstrap(values: Any, groups: Any, B: int = 2000, seed: int = 0, method: str = "percentile",
                    confidence: float = 0.95) -> Interval:
    """Mean of `values` with a CI from resampling whole groups (one group id per value)."""
    d = np.asarray(values, dtype=float)
    g = np.asarray(groups)
    if d.ndim != 1 or d.shape != g.shape or d.size == 0 or not np.isfinite(d).all():
        raise InputError("group bootstrap: need one finite value and one group per query")
    if method not in BOOTSTRAP_METHODS:
        raise InputError(f"group bootstrap: method '{method}' is unknown; use one of {list(BOOTSTRAP_METHODS)}")
    if B < 100 or not 0.0 < confidence < 1.0:
        raise InputError(f"group bootstrap: need B ≥ 100 (got {B}) and a confidence level in (0, 1)")
    _, inverse = np.unique(g, return_inverse=True)
    sums = np.bincount(inverse, weights=d)
    sizes = np.bincount(inverse).astype(float)
    if sums.size < 2:
        raise InputError("group bootstrap: need at least two groups to resample")
    estimate = float(_pooled_mean(sums, sizes))
    if np.ptp(sums / sizes) == 0:
        return Interval(estimate, estimate, estimate, d.size, sums.size)
    rng = np.random.default_rng(seed)
    if method == "percentile":
        picks = rng.integers(0, sums.size, size=(B, sums.size))
        tail = 50.0 * (1.0 - confidence)
        low, high = np.percentile(_pooled_mean(sums[picks], sizes[picks]), [tail, 100.0 - tail])
    else:
        from scipy import stats as scipy_stats  # here: the LLM stages import this module; few bootstrap

        result = scipy_stats.bootstrap((sums, sizes), _pooled_mean, paired=True, vectorized=True, n_resamples=B,
                                       method="BCa", confidence_level=confidence, rng=rng)
        low, high = result.confidence_interval
    return Interval(estimate, float(low), float(high), d.size, sums.size)


def group_permutation_test(values: Any, groups: Any, B: int = 2000, seed: int = 0) -> float:
    """Two-sided p-value of a paired sign-flip permutation test of mean(values) = 0, flipping whole groups."""
    from scipy import stats as scipy_stats

    d = np.asarray(values, dtype=float)
    g = np.asarray(groups)
    if d.ndim != 1 or d.shape != g.shape or d.size == 0 or not np.isfinite(d).all():
        raise InputError("permutation test: need one finite value and one group per query")
    if B < 100:
        raise InputError(f"permutation test: need B ≥ 100 (got {B})")
    _, inverse = np.unique(g, return_inverse=True)
    sums = np.bincount(inverse, weights=d)
    if not sums.any():
        return 1.0
    result = scipy_stats.permutation_test((sums,), lambda x, axis: np.sum(x, axis=axis), permutation_type="samples",
                                          vectorized=True, n_resamples=B, alternative="two-sided",
                                          rng=np.random.default_rng(seed))
    return float(result.pvalue)


def smallest_p(n_groups: int, B: int) -> float:
    """The smallest two-sided p `group_permutation_test` can return with `n_groups` groups and B resamples."""
    return min(1.0, 2.0 ** (1 - n_groups)) if 2 ** n_groups <= B else 2.0 / (B + 1)


def win_tie_loss(a: Any, b: Any) -> tuple[float, float, float]:
    """Shares of queries where a > b, a == b, a < b."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise InputError("win/tie/loss: need two non-empty paired 1-D score arrays")
    return float(np.mean(a > b)), float(np.mean(a == b)), float(np.mean(a < b))


def compare_policies(table: pl.DataFrame, pairs: Sequence[tuple[str, str]], group: str = "group_id",
                     B: int = 2000, seed: int = 0, method: str = "percentile",
                     confidence: float = 0.95) -> pl.DataFrame:
    """One COMPARISONS row per (a, b): the group-bootstrap CI of mean(a − b), the paired permutation p-value and
    win / tie / loss shares."""
    needed = sorted({group, *(name for pair in pairs for name in pair)})
    missing = [column for column in needed if column not in table.columns]
    if missing:
        raise InputError(f"compare policies: columns {missing} are missing (columns: {table.columns})")
    nulls = [column for column in needed if table[column].null_count()]
    if nulls:
        raise InputError(f"compare policies: columns {nulls} have missing values; keep only queries scored "
                         f"under every policy")
    rows = []
    for a, b in pairs:
        left, right = table[a].cast(pl.Float64).to_numpy(), table[b].cast(pl.Float64).to_numpy()
        interval = group_bootstrap(left - right, table[group].to_numpy(), B, seed, method, confidence)
        p_permutation = group_permutation_test(left - right, table[group].to_numpy(), B, seed)
        win, tie, loss = win_tie_loss(left, right)
        rows.append({"a": a, "b": b, "estimate": interval.estimate, "low": interval.low, "high": interval.high,
                     "p_permutation": p_permutation, "p_floor": smallest_p(interval.n_groups, B),
                     "confidence": confidence, "method": method, "resamples": B, "n": interval.n,
                     "n_groups": interval.n_groups, "win": win, "tie": tie, "loss": loss})
    return pl.DataFrame(rows, schema=COMPARISONS.schema)
