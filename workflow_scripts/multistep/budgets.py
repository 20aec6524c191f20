"""Budgets over retrieval calls: stop routers with frozen thresholds, and the exact / deployable / conservative
frontiers of one multi-step policy, the budget being the mean retrieval calls per question.

In:  TRAJECTORIES rows logged without an online rule, the per-step correctness (effects.step_correctness), the
     questions' grouped splits (SPLITS: dev | calibration | heldout), the stop routers (vocabulary.STOP_ROUTERS),
     the ridge alphas, the budget grid ρ (config budgets.grid: the share of the K − 1 extra retrievals a question
     may take, so the target is 1 + ρ(K − 1) calls per question), δ and the bootstrap settings.
Out: `frontier_table` → MULTISTEP_FRONTIERS rows: per router, frontier and budget, the frozen threshold, the calls
     spent on calibration and realized on held-out (transfer_error = realized − target), held-out correctness, what
     the extra steps rescue and harm against one retrieval, the generation seconds and tokens spent, and the
     paired difference against spending the same calls blindly (the fixed-K curve, mixed between its two nearest
     K: what a router must beat to be worth having), with its bootstrap CI over question groups and its paired
     permutation p (stats/paired.py).

A stop router scores every logged step s that has a next step with a continue score c (higher: retrieve again).
At threshold t a question retrieves again after step s while c > t (strictly, as Study B's routers) at every step
so far and its chain has not ended, so it spends 1 + #{s : min(c_1 … c_s) > t} calls. Routers:
- uncertainty: 1 − the forced answer's lowest token probability (a failed answer counts as 1);
- entropy: the forced answer's mean token entropy (a failed answer counts as the largest seen);
- novelty: how many units the step brought that were not already in the evidence;
- ridge: a ridge regression (routing/routers.py, the Study B router) on STEP_FEATURES predicting what the next
  step gains, correct(s + 1) − correct(s); its alpha chosen by grouped cross-validation on the dev questions
  (sklearn GroupKFold over question groups, routing.n_splits folds), then fitted on every dev step.
Frontiers (the frozen-threshold protocol of Study B: thresholds come from calibration, held-out only measures):
- exact: the smallest threshold whose mean calls on the held-out questions themselves stay within the target (a
  diagnostic of how well the score orders steps; not deployable);
- deployable: the smallest threshold whose mean calls on calibration stay within the target, applied unchanged;
- conservative: the same at the lower target 1 + (ρ − ε)(K − 1). The extra calls are a sum of K − 1 indicators,
  1[min(c_1 … c_j) > t and the chain reaches j + 1], each monotone in t; the one-sided DKW bound on each, with δ
  split over the K − 1 of them (a union bound), gives ε = sqrt(ln((K − 1)/δ) / (2n)) uniformly in t, so with
  probability ≥ 1 − δ the population's mean calls stay within 1 + ρ(K − 1). K = 2 is Study B's rule. With
  budgets.heldout_term, δ is halved again and the held-out mean's Hoeffding term sqrt(ln(2/δ)/(2m)) is added, so
  the calls realized on the m held-out questions are covered too (routing/frontiers.py). Like Study B's rule, the
  bound treats calibration questions as independent draws: right where a group holds one question (HotpotQA,
  MuSiQue and 2Wiki contexts), optimistic where many questions share a paper.
Questions whose forced answer failed at some step cannot be scored at every threshold: they are left out, counted.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from sklearn.linear_model import Ridge
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from workflow_scripts.core.errors import InputError
from workflow_scripts.core.vocabulary import CONSERVATIVE, DEPLOYABLE, EXACT_FRONTIER, STOP_ROUTERS
from workflow_scripts.routing.frontiers import ROUNDING, check_budgets, check_delta
from workflow_scripts.routing.routers import fit_router, make_router, model_scores
from workflow_scripts.stats.paired import compare_policies

STEP_FEATURES = ("step", "answer_min_prob", "answer_entropy", "new_units", "added_units", "top_score",
                 "thought_words")


def step_features(trajectories: pl.DataFrame) -> pl.DataFrame:
    """(qid, step, *STEP_FEATURES) per logged step; a failed answer's probability is 0 and its entropy the
    largest seen (the most uncertain), a step that retrieved nothing has top score 0."""
    worst = trajectories["answer_entropy"].max()
    return trajectories.select(
        "qid", "step",
        pl.col("answer_min_prob").fill_null(0.0),
        pl.col("answer_entropy").fill_null(worst if worst is not None else 0.0),
        pl.col("new_units").cast(pl.Float64),
        pl.col("added_units").cast(pl.Float64),
        pl.col("scores").list.max().fill_null(0.0).alias("top_score"),
        pl.col("thought").str.split(" ").list.len().cast(pl.Float64).alias("thought_words"),
    ).with_columns(pl.col("step").cast(pl.Float64))


def continue_scores(router: str, features: pl.DataFrame, model: Mapping[str, Any] | None = None) -> np.ndarray:
    """Each step's continue score under `router` (module docstring)."""
    if router == "uncertainty":
        return 1.0 - features["answer_min_prob"].to_numpy()
    if router == "entropy":
        return features["answer_entropy"].to_numpy()
    if router == "novelty":
        return features["new_units"].to_numpy()
    if router == "ridge":
        return model_scores(model, list(STEP_FEATURES), features)
    raise InputError(f"multistep.stop_routers: {router!r} is unknown; use some of {list(STOP_ROUTERS)}")


def gain_labels(correctness: pl.DataFrame) -> pl.DataFrame:
    """(qid, step, gain = correct(step + 1) − correct(step)) for every step that has a scored next step."""
    following = correctness.select("qid", (pl.col("step") - 1).alias("step"), pl.col("correct").alias("next"))
    return correctness.join(following, on=["qid", "step"]).drop_nulls(["correct", "next"]).select(
        "qid", "step", (pl.col("next") - pl.col("correct")).alias("gain"))


def fit_ridge(features: pl.DataFrame, labels: pl.DataFrame, groups: pl.DataFrame, alphas: Sequence[float],
              n_splits: int, seed: int) -> tuple[dict[str, Any], float]:
    """The ridge stop router fitted on the dev steps, its alpha chosen by grouped cross-validation (mean squared
    error); returns the router model (routing/routers.py) and the chosen alpha."""
    table = features.with_columns(pl.col("step").cast(pl.Int32)).join(labels, on=["qid", "step"]).join(
        groups, on="qid").with_columns(pl.col("step").cast(pl.Float64)).sort(["qid", "step"])
    n_groups = table["group_id"].n_unique()
    if n_groups < max(n_splits, 2):
        raise InputError(f"multistep stop router ridge: {n_splits} folds need at least {max(n_splits, 2)} dev question "
                         f"groups with a next step (have {n_groups}); lower routing.n_splits, add questions, or drop "
                         f"ridge from multistep.stop_routers")
    X = table.select(STEP_FEATURES).to_numpy()
    y = table["gain"].to_numpy()
    search = GridSearchCV(Pipeline([("scale", StandardScaler()), ("ridge", Ridge())]),
                          {"ridge__alpha": [float(alpha) for alpha in alphas]}, scoring="neg_mean_squared_error",
                          cv=GroupKFold(n_splits=n_splits, shuffle=True, random_state=seed), refit=False)
    search.fit(X, y, groups=table["group_id"].to_numpy())
    alpha = float(search.best_params_["ridge__alpha"])
    spec = make_router("ridge", "ridge", STEP_FEATURES, alpha=alpha)
    return fit_router(spec, table, y, seed), alpha


@dataclass
class Paths:
    """The questions of one split: per question the running minimum of its continue scores over the steps that
    have a next one (M_1 ≥ M_2 ≥ …), its correctness and its cumulative seconds and tokens at every step."""

    qids: list[str]
    groups: np.ndarray
    minima: list[np.ndarray]
    correct: list[np.ndarray]
    seconds: list[np.ndarray]
    tokens: list[np.ndarray]

    @property
    def n(self) -> int:
        return len(self.qids)

    def pooled(self) -> np.ndarray:
        return np.sort(np.concatenate(self.minima)) if self.minima else np.empty(0)

    def stops(self, threshold: float) -> np.ndarray:
        """The step each question stops at: 1 + how many of its running minima exceed the threshold."""
        return np.array([1 + int(np.sum(minima > threshold)) for minima in self.minima])

    def at(self, values: list[np.ndarray], stops: np.ndarray) -> np.ndarray:
        return np.array([value[stop - 1] for value, stop in zip(values, stops)])


def paths(trajectories: pl.DataFrame, correctness: pl.DataFrame, scores: np.ndarray, qids: set[str]) -> Paths:
    """The `qids` questions' paths, each step scored by `scores` (aligned with the trajectories' rows)."""
    table = trajectories.select("qid", "group_id", "step", "seconds",
                                (pl.col("prompt_tokens") + pl.col("completion_tokens")).alias("tokens")).with_columns(
        pl.Series("score", scores, dtype=pl.Float64)).join(correctness.select("qid", "step", "correct"),
                                                           on=["qid", "step"], how="left")
    table = table.filter(pl.col("qid").is_in(sorted(qids))).sort(["qid", "step"])
    by_qid = [(qid, path) for (qid,), path in table.group_by("qid", maintain_order=True)]
    return Paths(
        qids=[qid for qid, _ in by_qid],
        groups=np.asarray([path["group_id"][0] for _, path in by_qid], dtype=object),
        minima=[np.minimum.accumulate(path["score"].to_numpy()[:-1]) for _, path in by_qid],
        correct=[path["correct"].to_numpy() for _, path in by_qid],
        seconds=[np.cumsum(path["seconds"].to_numpy()) for _, path in by_qid],
        tokens=[np.cumsum(path["tokens"].to_numpy()) for _, path in by_qid],
    )


def threshold_for(pooled: np.ndarray, n: int, extra: float) -> float:
    """The smallest threshold whose mean extra calls over n questions (pooled: their running minima, sorted) stay
    within `extra`: the (r + 1)-th largest minimum, r = ⌊extra · n⌋ (ties with it stop); −inf when every extra
    step fits, +inf when none may be taken."""
    if extra < 0:
        return math.inf
    allowed = int(math.floor(extra * n + ROUNDING))
    if allowed >= pooled.size:
        return -math.inf
    return float(pooled[pooled.size - 1 - allowed])


def epsilon(k: int, n: int, m: int, delta: float, heldout_term: bool) -> float:
    """The conservative rule's slack in ρ (module docstring)."""
    delta = check_delta(delta)
    if not heldout_term:
        return math.sqrt(math.log((k - 1) / delta) / (2.0 * n))
    return math.sqrt(math.log(2.0 * (k - 1) / delta) / (2.0 * n)) + math.sqrt(math.log(2.0 / delta) / (2.0 * m))


def blind(heldout: Paths, k: int, calls: float) -> np.ndarray:
    """Per held-out question, its expected correctness when the same mean calls are spent blindly: a fixed K mixed
    between the two K whose held-out mean calls bracket `calls` (a question whose chain ended keeps its answer)."""
    ends = np.array([minima.size + 1 for minima in heldout.minima])
    at_k = [np.minimum(ends, s) for s in range(1, k + 1)]
    spent = np.array([float(np.mean(stops)) for stops in at_k])
    upper = int(np.clip(np.searchsorted(spent, calls - ROUNDING), 1, k - 1))
    low, high = spent[upper - 1], spent[upper]
    weight = 0.0 if high <= low else float(np.clip((calls - low) / (high - low), 0.0, 1.0))
    return (1 - weight) * heldout.at(heldout.correct, at_k[upper - 1]) + weight * heldout.at(heldout.correct,
                                                                                            at_k[upper])


def frontier_rows(router: str, calibration: Paths, heldout: Paths, k: int, grid: np.ndarray, delta: float,
                  heldout_term: bool, bootstrap: Mapping[str, Any], seed: int) -> list[dict[str, Any]]:
    """The three frontiers of one router over the budget grid (module docstring)."""
    slack = epsilon(k, calibration.n, heldout.n, delta, heldout_term)
    one = heldout.at(heldout.correct, np.ones(heldout.n, dtype=int))
    rows = []
    for frontier, source, margin in ((EXACT_FRONTIER, heldout, 0.0), (DEPLOYABLE, calibration, 0.0),
                                     (CONSERVATIVE, calibration, slack)):
        pooled = source.pooled()
        for budget in grid:
            threshold = threshold_for(pooled, source.n, (budget - margin) * (k - 1))
            stops = heldout.stops(threshold)
            correct = heldout.at(heldout.correct, stops)
            calls = float(stops.mean())
            paired = pl.DataFrame({"group_id": heldout.groups.tolist(), "router": correct,
                                   "blind": blind(heldout, k, calls)})
            versus = compare_policies(paired, [("router", "blind")], B=bootstrap["resamples"], seed=seed,
                                      method=bootstrap["method"], confidence=bootstrap["confidence"]).row(0, named=True)
            rows.append({
                "router": router, "frontier": frontier, "budget": float(budget),
                "target_calls": 1.0 + float(budget) * (k - 1),
                "threshold": threshold if math.isfinite(threshold) else None, "epsilon": margin,
                "calibration_calls": (float(calibration.stops(threshold).mean()) if frontier != EXACT_FRONTIER
                                      else None),
                "calls": calls, "transfer_error": calls - (1.0 + float(budget) * (k - 1)),
                "accuracy": float(correct.mean()), "vs_blind": versus["estimate"], "vs_blind_low": versus["low"],
                "vs_blind_high": versus["high"], "p_permutation": versus["p_permutation"],
                "p_floor": versus["p_floor"], "confidence": versus["confidence"],
                "rescued": float(np.mean((correct == 1) & (one == 0))),
                "harmed": float(np.mean((correct == 0) & (one == 1))),
                "seconds": float(heldout.at(heldout.seconds, stops).mean()),
                "tokens": float(heldout.at(heldout.tokens, stops).mean()),
                "n_calibration": calibration.n, "n_heldout": heldout.n, "n_groups": versus["n_groups"],
            })
    return rows


def frontier_table(trajectories: pl.DataFrame, correctness: pl.DataFrame, splits: pl.DataFrame, k: int,
                   routers: Sequence[str], alphas: Sequence[float], budgets: Mapping[str, Any], n_splits: int,
                   bootstrap: Mapping[str, Any], seed: int) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Every stop router's frontiers (module docstring) and what was fitted (the ridge alpha, the questions left
    out); an empty table when K = 1 (no step to stop before)."""
    trajectories = trajectories.sort(["qid", "step"])
    scored = correctness.group_by("qid").agg(pl.col("correct").is_not_null().all().alias("ok"))
    usable = set(scored.filter("ok")["qid"].to_list())
    split_of = dict(splits.select("qid", "split").iter_rows())
    members = {name: {qid for qid in usable if split_of.get(qid) == name} for name in ("dev", "calibration",
                                                                                        "heldout")}
    fitted: dict[str, Any] = {"left_out": len(set(scored["qid"].to_list()) - usable)}
    if k < 2 or not routers:
        return pl.DataFrame(), fitted
    for name, qids in members.items():
        if not qids and (name != "dev" or "ridge" in routers):
            needs = "the ridge stop router is fitted on dev" if name == "dev" else "thresholds are frozen on " \
                "calibration and measured on held-out"
            raise InputError(f"multistep frontiers: no scored question is in the {name} split, and {needs} (config "
                             f"splits.fractions{', or drop ridge from multistep.stop_routers' * (name == 'dev')})")
    grid = check_budgets(budgets["grid"])
    features = step_features(trajectories)
    rows = []
    for router in routers:
        model = None
        if router == "ridge":
            dev = features.filter(pl.col("qid").is_in(sorted(members["dev"])))
            model, fitted["ridge_alpha"] = fit_ridge(dev, gain_labels(correctness), splits.select("qid", "group_id"),
                                                     alphas, n_splits, seed)
        scores = continue_scores(router, features, model)
        rows += frontier_rows(router, paths(trajectories, correctness, scores, members["calibration"]),
                              paths(trajectories, correctness, scores, members["heldout"]), k, grid,
                              budgets["delta"], budgets.get("heldout_term", False), bootstrap, seed)
    return pl.DataFrame(rows, infer_schema_length=None), fitted
