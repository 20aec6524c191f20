"""Budget frontiers and the calibration audit: how well a router's score spends a retrieval budget ρ ∈ (0, 1).

In:  router scores on a calibration split (qid, score) and on the held-out split (qid, score, metric_on,
     metric_off — the query's metric when the router fires / does not, from the LABELS table); a budget grid.
Out: `frontier_table` — one row per (frontier, budget): threshold, epsilon, calibration_usage, usage,
     transfer_error = usage − ρ, accuracy = mean metric under the policy; `calibration_audit` — over R grouped
     calibration/held-out re-splits × every router, the share of combinations whose realized held-out usage exceeds
     ρ, per budget and rule; `frontier_tables` — both for every router of a pair's routed.parquet (ROUTED) that has
     a budget knob (routers that never or always fire have none and are left out).

Rules (trigger ⇔ score > threshold, strictly, everywhere):
- exact: the top ⌊ρn⌋ held-out queries by score (a ranking diagnostic, not deployable). A block of tied scores
  straddling the cut is shared out evenly: each of its m queries is counted with weight r/m for the r places
  left, i.e. the expected accuracy under a random tie-break, so ties never favour a router.
- deployable (nominal): threshold = the empirical (1 − ρ) quantile of the calibration scores by the inverted CDF,
  t = s_(k) with k = ⌈n(1 − ρ)⌉ (s_(1) ≤ … ≤ s_(n)). Every calibration score tied with t stays off, so the
  calibration usage is ⌊nρ⌋/n at most, with or without ties. Applied unchanged to held-out.
- conservative: the same rule at the lower target ρ − ε, with the one-sided DKW slack ε = sqrt(ln(1/δ) / (2n))
  (Massart 1990, valid for δ ≤ 1/2). One-sided because only usage above ρ is a violation: with probability
  ≥ 1 − δ, F(t) ≥ F_n(t) − ε for every t, hence the population usage P(S > t) = 1 − F(t) ≤ 1 − F_n(t) + ε ≤ ρ.
  The argument needs no continuity, so tied scores cannot break it (F_n(s_(k)) ≥ k/n however many tie with
  s_(k)). The two-sided form would use ln(2/δ) and be needlessly wider. When ρ − ε ≤ 0 nothing is retrieved
  (threshold +inf). The guarantee is on the population rate; the usage realized on m held-out queries adds its
  own binomial noise (sd sqrt(ρ(1 − ρ)/m)), which ε absorbs in practice when m is not much smaller than n. With
  `heldout_term` (config `budgets.heldout_term`) the rule also covers that: ε = sqrt(ln(2/δ)/(2n)) +
  sqrt(ln(2/δ)/(2m)) (δ split in two halves, DKW on calibration plus Hoeffding on the held-out count), so the
  realized rate is ≤ ρ with probability ≥ 1 − δ.
Budgets are decimal fractions; ⌈⌉ and ⌊⌋ of n·ρ absorb a 1e-9 rounding error so that e.g. n = 100, ρ = 0.7
triggers exactly 70.

For users: docs/statistics.md, "Budget frontiers and the calibration audit".
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from workflow_scripts.core.contracts import ROUTER_FRONTIERS
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.vocabulary import CONSERVATIVE, DEPLOYABLE, EXACT_FRONTIER
from workflow_scripts.routing.routers import FIXED_THRESHOLDS

ROUNDING = 1e-9


def check_budgets(budgets: Iterable[float]) -> np.ndarray:
    """The budget grid as an array; a budget outside (0, 1) is an InputError naming it."""
    values = [float(budget) for budget in budgets]
    if not values:
        raise InputError("budgets.grid: no budgets given")
    for budget in values:
        if not 0.0 < budget < 1.0:
            raise InputError(f"budgets.grid: budget {budget} is outside (0, 1); a budget is a fraction of queries")
    return np.asarray(values)


def check_delta(delta: float) -> float:
    if not 0.0 < delta <= 0.5:
        raise InputError(f"budgets.delta: {delta} must be in (0, 0.5] (the one-sided DKW bound needs δ ≤ 1/2)")
    return float(delta)


def _scores(values: Any, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or array.size == 0 or not np.isfinite(array).all():
        raise InputError(f"{what}: scores must be a non-empty 1-D array of finite numbers")
    return array


def dkw_epsilon(n_calibration: int, delta: float, heldout_n: int | None = None) -> float:
    """One-sided DKW slack for n calibration scores; plus the held-out Hoeffding term when `heldout_n` is given."""
    delta = check_delta(delta)
    if heldout_n is None:
        return math.sqrt(math.log(1.0 / delta) / (2.0 * n_calibration))
    half = math.log(2.0 / delta)
    return math.sqrt(half / (2.0 * n_calibration)) + math.sqrt(half / (2.0 * heldout_n))


def rule_thresholds(sorted_calibration: np.ndarray, usage: np.ndarray) -> np.ndarray:
    """The deployable rule's thresholds at target usages (the conservative rule's at budgets − ε):
    t = s_(k), k = ⌈n(1 − usage)⌉ over the sorted calibration scores; +inf where the target usage is ≤ 0."""
    n = sorted_calibration.size
    k = np.ceil(n * (1.0 - usage) - ROUNDING).astype(int)
    positive = usage > 0
    return np.where(positive, sorted_calibration[np.clip(k, 1, n) - 1], np.inf)


class _Heldout:
    """Held-out scores sorted ascending with suffix sums of the gain (metric_on − metric_off)."""

    def __init__(self, scores: np.ndarray, metric_on: np.ndarray, metric_off: np.ndarray):
        order = np.argsort(scores, kind="stable")
        self.scores = scores[order]
        self.gain = (metric_on - metric_off)[order]
        self.suffix = np.concatenate([np.cumsum(self.gain[::-1])[::-1], [0.0]])
        self.base = float(metric_off.mean())
        self.n = scores.size

    def triggered(self, thresholds: np.ndarray) -> np.ndarray:
        return self.n - np.searchsorted(self.scores, thresholds, side="right")

    def accuracy(self, triggered: np.ndarray) -> np.ndarray:
        return self.base + self.suffix[self.n - triggered] / self.n

    def exact_accuracy(self, budgets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slots, accuracy) of the top ⌊ρn⌋, a tie block straddling the cut sharing the remaining slots."""
        slots = np.floor(budgets * self.n + ROUNDING).astype(int)
        accuracy = np.empty(budgets.size)
        for index, r in enumerate(slots):
            if r == 0:
                accuracy[index] = self.base
                continue
            cut = self.scores[self.n - r]  # the lowest score inside the top r
            above = self.n - np.searchsorted(self.scores, cut, side="right")
            tied = slice(np.searchsorted(self.scores, cut, side="left"), self.n - above)
            tied_gain = self.gain[tied].sum() * (r - above) / (tied.stop - tied.start)
            accuracy[index] = self.base + (self.suffix[self.n - above] + tied_gain) / self.n
        return slots, accuracy


def _heldout_arrays(heldout: pl.DataFrame) -> _Heldout:
    missing = [column for column in ("qid", "score", "metric_on", "metric_off") if column not in heldout.columns]
    if missing:
        raise InputError(f"frontiers: the held-out table lacks columns {missing}")
    metrics = [heldout[column].cast(pl.Float64).to_numpy() for column in ("metric_on", "metric_off")]
    if not all(np.isfinite(metric).all() for metric in metrics):
        raise InputError("frontiers: metric_on / metric_off have missing values on held-out")
    return _Heldout(_scores(heldout["score"].to_numpy(), "held-out"), *metrics)


def frontier_table(calibration: pl.DataFrame, heldout: pl.DataFrame, budgets: Sequence[float], delta: float = 0.05,
                   heldout_term: bool = False) -> pl.DataFrame:
    """The exact, deployable and conservative frontiers of one router (see the module docstring)."""
    grid = check_budgets(budgets)
    if "score" not in calibration.columns:
        raise InputError("frontiers: the calibration table lacks a score column")
    sorted_calibration = np.sort(_scores(calibration["score"].to_numpy(), "calibration"))
    n_cal = sorted_calibration.size
    held = _heldout_arrays(heldout)
    epsilon = dkw_epsilon(n_cal, delta, held.n if heldout_term else None)
    slots, exact_accuracy = held.exact_accuracy(grid)
    rows = [{"frontier": EXACT_FRONTIER, "budget": grid, "threshold": np.full(grid.size, np.nan), "epsilon": 0.0,
             "calibration_usage": np.full(grid.size, np.nan), "usage": slots / held.n, "accuracy": exact_accuracy}]
    for rule, slack in ((DEPLOYABLE, 0.0), (CONSERVATIVE, epsilon)):
        thresholds = rule_thresholds(sorted_calibration, grid - slack)
        triggered = held.triggered(thresholds)
        calibration_triggered = n_cal - np.searchsorted(sorted_calibration, thresholds, side="right")
        rows.append({"frontier": rule, "budget": grid, "threshold": thresholds, "epsilon": slack,
                     "calibration_usage": calibration_triggered / n_cal, "usage": triggered / held.n,
                     "accuracy": held.accuracy(triggered)})
    table = pl.concat([pl.DataFrame(row).with_columns(pl.col("epsilon").cast(pl.Float64)) for row in rows])
    return table.with_columns(
        pl.col("threshold", "calibration_usage").fill_nan(None),
        (pl.col("usage") - pl.col("budget")).alias("transfer_error"),
        pl.lit(n_cal, dtype=pl.Int64).alias("n_calibration"),
        pl.lit(held.n, dtype=pl.Int64).alias("n_heldout"),
    ).select(list(ROUTER_FRONTIERS.columns))


def grouped_split(groups: np.ndarray, calibration_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Calibration mask: groups in a seeded random order join calibration until it holds at least the fraction of
    queries (at least one group on each side)."""
    names, inverse, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    if names.size < 2:
        raise InputError("calibration audit: need at least two groups to split calibration from held-out")
    order = rng.permutation(names.size)
    filled = np.cumsum(sizes[order])
    reached = np.searchsorted(filled, calibration_fraction * groups.size - ROUNDING) + 1  # first to reach it
    take = int(np.clip(reached, 1, names.size - 1))
    in_calibration = np.zeros(names.size, dtype=bool)
    in_calibration[order[:take]] = True
    return in_calibration[inverse]


def audit_splits(scores: pl.DataFrame, labels: pl.DataFrame, groups: pl.DataFrame, routers: Sequence[str],
                 budgets: Sequence[float], R: int = 20, seed: int = 0, delta: float = 0.05,
                 calibration_fraction: float = 0.5, heldout_term: bool = False) -> pl.DataFrame:
    """One row per (split, router, budget, rule): threshold, usage, violated (usage > budget), accuracy.
    `scores` is long (qid, router, score); `labels` has qid, metric_on, metric_off; `groups` qid, group_id."""
    grid = check_budgets(budgets)
    check_delta(delta)
    if R < 1 or not 0.0 < calibration_fraction < 1.0:
        raise InputError(f"calibration audit: need R ≥ 1 (got {R}) and a calibration fraction in (0, 1)")
    base = labels.select("qid", "metric_on", "metric_off").join(groups.select("qid", "group_id"), on="qid")
    per_router = {}
    for router in routers:
        table = base.join(scores.filter(pl.col("router") == router).select("qid", "score"), on="qid", how="left")
        if table.height != labels.height or table["score"].null_count():
            raise InputError(f"calibration audit: router '{router}' needs exactly one score and one group per "
                             f"labelled query")
        per_router[router] = table.sort("qid")
    group_ids = next(iter(per_router.values()))["group_id"].to_numpy()
    rng = np.random.default_rng(seed)
    frames = []
    for split in range(R):
        mask = grouped_split(group_ids, calibration_fraction, rng)
        for router, table in per_router.items():
            score = table["score"].to_numpy()
            sorted_calibration = np.sort(score[mask])
            held = _Heldout(score[~mask], *(table[c].cast(pl.Float64).to_numpy()[~mask]
                                            for c in ("metric_on", "metric_off")))
            epsilon = dkw_epsilon(sorted_calibration.size, delta, held.n if heldout_term else None)
            for rule, slack in ((DEPLOYABLE, 0.0), (CONSERVATIVE, epsilon)):
                thresholds = rule_thresholds(sorted_calibration, grid - slack)
                triggered = held.triggered(thresholds)
                frames.append(pl.DataFrame({
                    "split": split, "router": router, "budget": grid, "rule": rule, "threshold": thresholds,
                    "usage": triggered / held.n, "violated": triggered > grid * held.n + ROUNDING,
                    "accuracy": held.accuracy(triggered)}))
    return pl.concat(frames)


def calibration_audit(scores: pl.DataFrame, labels: pl.DataFrame, groups: pl.DataFrame, routers: Sequence[str],
                      budgets: Sequence[float], R: int = 20, seed: int = 0, delta: float = 0.05,
                      calibration_fraction: float = 0.5, heldout_term: bool = False) -> pl.DataFrame:
    """Share of router × split combinations whose realized held-out usage exceeds the budget, per budget and rule."""
    detail = audit_splits(scores, labels, groups, routers, budgets, R, seed, delta, calibration_fraction,
                          heldout_term)
    return detail.group_by("budget", "rule").agg(
        pl.len().cast(pl.Int64).alias("combinations"),
        pl.col("violated").sum().cast(pl.Int64).alias("violations"),
        pl.col("violated").mean().alias("violation_share"),
        pl.col("usage").mean().alias("mean_usage"),
        pl.col("accuracy").mean().alias("mean_accuracy"),
    ).sort("budget", "rule")


def frontier_tables(routed: pl.DataFrame, routers: Mapping[str, Any], budgets: Mapping[str, Any],
                    seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Exact / deployable / conservative frontiers per router with a budget knob (calibration split → held-out),
    and the calibration audit over repeated grouped splits."""
    knobbed = [name for name, spec in routers.items() if spec.get("kind", name) not in FIXED_THRESHOLDS]
    tables = []
    for router in knobbed:
        table = routed.filter(pl.col("router") == router)
        frontier = frontier_table(table.filter(pl.col("split") == "calibration"),
                                  table.filter(pl.col("split") == "heldout"), budgets["grid"], budgets["delta"],
                                  budgets["heldout_term"])
        tables.append(frontier.with_columns(pl.lit(router).alias("router")))
    labels = routed.select("qid", "metric_on", "metric_off", "delta").unique("qid")
    groups = routed.select("qid", "group_id").unique("qid")
    audit = calibration_audit(routed.select("qid", "router", "score"), labels, groups, knobbed, budgets["grid"],
                              budgets["audit_splits"], seed, budgets["delta"], heldout_term=budgets["heldout_term"])
    return pl.concat(tables), audit
