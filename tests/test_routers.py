"""Routers: grouped out-of-fold scores, the threshold sweep's tie rule, frozen artifacts that round-trip exactly."""

import json
import math

import numpy as np
import polars as pl
import pytest
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from workflow_scripts.core.contracts import ROUTER_OOF_SCORES, ROUTER_ROUTED
from workflow_scripts.core.tables import conform
from workflow_scripts.core.errors import InputError
from workflow_scripts.routing.routers import (
    apply_frozen,
    choose_threshold,
    fit_router,
    freeze,
    frozen_features,
    make_router,
    model_scores,
    out_of_fold_scores,
    signal_absent,
    sweep_threshold,
    utility_curve,
)

FEATURES = ("x1", "x2", "x3")


def synthetic(n: int = 300, groups: int = 60, seed: int = 1) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Utility depends on x1 (benefit likelier when x1 is high); x2, x3 are noise; 5% harms everywhere."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    draw = rng.random(n)
    benefit = 1 / (1 + np.exp(-(2 * x[:, 0] - 1)))
    u = np.where(draw < 0.05, -1.0, np.where(draw < 0.05 + 0.95 * benefit, 1.0, 0.0))
    qids = [f"q{i:03d}" for i in range(n)]
    features = pl.DataFrame({"qid": qids, **{name: x[:, j] for j, name in enumerate(FEATURES)}})
    labels = pl.DataFrame({"qid": qids, "delta": u, "metric_off": np.zeros(n), "metric_on": u})
    group_table = pl.DataFrame({"qid": qids, "group_id": [f"g{i % groups:02d}" for i in range(n)]})
    return features, labels, group_table


LEARNED = [make_router("ridge", features=FEATURES), make_router("bur_linear", features=FEATURES),
           make_router("bur_gbm", features=FEATURES, max_iter=30, min_samples_leaf=10)]


@pytest.mark.parametrize("spec", LEARNED, ids=lambda spec: spec.name)
def test_out_of_fold_scores_are_grouped_deterministic_and_carry_the_signal(spec):
    features, labels, groups = synthetic()
    scores = conform(out_of_fold_scores(features, labels, groups, spec, n_splits=5, seed=3), ROUTER_OOF_SCORES)
    assert scores.height == features.height and scores["fold"].n_unique() == 5
    assert scores.group_by("group_id").agg(pl.col("fold").n_unique())["fold"].max() == 1
    assert not scores["signal_absent"].any()
    assert scores.equals(out_of_fold_scores(features, labels, groups, spec, n_splits=5, seed=3))
    joined = scores.join(labels, on="qid")
    assert np.corrcoef(joined["score"], joined["delta"])[0, 1] > 0.2


def test_ridge_matches_scikit_learn_pipeline():
    features, labels, _ = synthetic()
    spec = make_router("ridge", features=FEATURES)
    model = fit_router(spec, features, labels["delta"].to_numpy())
    X = features.select(FEATURES).to_numpy()
    reference = make_pipeline(StandardScaler(), Ridge(alpha=20.0)).fit(X, labels["delta"].to_numpy())
    np.testing.assert_allclose(model_scores(model, FEATURES, features), reference.predict(X), rtol=1e-12, atol=1e-12)


def test_constant_labels_run_and_flag_absent_signal():
    features, labels, groups = synthetic()
    ties = labels.with_columns(pl.lit(0.0).alias("delta"), pl.lit(1.0).alias("metric_on"),
                               pl.lit(1.0).alias("metric_off"))
    assert signal_absent(ties["delta"].to_numpy()) and not signal_absent(labels["delta"].to_numpy())
    for spec in LEARNED:
        scores = out_of_fold_scores(features, ties, groups, spec, n_splits=4)
        assert scores["signal_absent"].all() and scores["score"].n_unique() == 1
        choice = sweep_threshold(scores["score"], ties["metric_on"], ties["metric_off"], 0.02)
        assert choice.triggered == 0 and choice.utility == pytest.approx(1.0)
        model = fit_router(spec, features, ties["delta"].to_numpy())
        assert json.loads(freeze(spec, model, choice.threshold, {}))["signal_absent"] is True


def test_sweep_prefers_fewer_triggers_on_ties():
    # Sorted by score: a rescue, then two ties, then a harm. Without a cost, triggering 1, 2 or 3 queries is
    # equally good (utility 0.5 + 0.25); the rule takes one trigger, threshold = the highest score left off.
    scores, on, off = [0.9, 0.5, 0.3, 0.1], [1, 1, 0, 0], [0, 1, 0, 1]
    choice = sweep_threshold(scores, on, off, cost_per_trigger=0.0)
    assert (choice.threshold, choice.triggered, choice.trigger_rate, choice.utility) == (0.5, 1, 0.25, 0.75)
    curve = utility_curve(scores, on, off, cost_per_trigger=0.02)
    assert curve["triggered"].to_list() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(curve["utility"], [0.5, 0.745, 0.74, 0.735, 0.48])
    assert curve["threshold"].to_list() == [0.9, 0.5, 0.3, 0.1, -math.inf]


def test_sweep_keeps_tied_scores_together_and_can_trigger_all():
    choice = sweep_threshold([0.9, 0.9, 0.1], [1, 0, 0], [0, 1, 0], cost_per_trigger=0.0)
    assert choice.triggered == 0  # the tied pair is +1 and -1 together: no gain, so no trigger
    every = sweep_threshold([0.1, 0.2], [1, 1], [0, 0])
    assert every.threshold == -math.inf and every.trigger_rate == 1.0 and every.utility == pytest.approx(0.98)
    with pytest.raises(InputError, match="finite"):
        sweep_threshold([np.nan, 0.2], [1, 1], [0, 0])


def test_always_and_never_have_fixed_thresholds():
    on, off = [1, 0, 1], [0, 0, 1]
    always = choose_threshold(make_router("always"), [1.0] * 3, on, off, 0.02)
    never = choose_threshold(make_router("never"), [0.0] * 3, on, off, 0.02)
    assert (always.threshold, always.trigger_rate, always.utility) == (-math.inf, 1.0, pytest.approx(2 / 3 - 0.02))
    assert (never.threshold, never.trigger_rate, never.utility) == (math.inf, 0.0, pytest.approx(1 / 3))


ALL_SPECS = LEARNED + [make_router("entropy"), make_router("min_confidence"), make_router("random"),
                       make_router("always"), make_router("never")]


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda spec: spec.name)
def test_frozen_artifact_round_trip_gives_identical_scores(spec):
    features, labels, _ = synthetic()
    features = features.with_columns(pl.col("x1").alias("unc_entropy"), pl.col("x2").abs().alias("unc_min_prob"))
    dev, heldout = features.head(200), features.tail(100)
    model = fit_router(spec, dev, labels["delta"].head(200).to_numpy(), seed=7)
    threshold = 0.05 if spec.kind not in ("always", "never") else {"always": -math.inf, "never": math.inf}[spec.kind]
    artifact = freeze(spec, model, threshold, {"dataset": "synthetic", "cost_per_trigger": 0.02})
    columns = frozen_features(artifact)
    routed = conform(apply_frozen(artifact, heldout.select("qid", *columns)), ROUTER_ROUTED)
    expected = model_scores(model, spec.features, heldout)
    assert np.array_equal(routed["score"].to_numpy(), expected)
    assert routed["triggered"].to_list() == (expected > threshold).tolist()


def test_score_baselines_point_the_right_way():
    table = pl.DataFrame({"qid": ["sure", "unsure"], "unc_entropy": [0.1, 2.0], "unc_min_prob": [0.9, 0.1],
                          "bm25_top1": [3.0, 15.0]})
    for name in ("entropy", "min_confidence", "bm25_top"):
        spec = make_router(name)
        scores = model_scores(fit_router(spec, table, np.zeros(2)), spec.features, table)
        assert scores[1] > scores[0], name


def test_random_router_is_seeded_and_order_free():
    features, _, _ = synthetic(n=50)
    spec = make_router("random")
    artifact = freeze(spec, fit_router(spec, features, np.zeros(50), seed=1), 0.5, {})
    first = apply_frozen(artifact, features.select("qid"))
    again = apply_frozen(artifact, features.sample(fraction=1.0, shuffle=True, seed=0).select("qid"))
    assert first.sort("qid").equals(again.sort("qid"))
    other = model_scores(fit_router(spec, features, np.zeros(50), seed=2), (), features)
    assert not np.array_equal(other, first["score"].to_numpy())
    assert 0.3 < first["triggered"].mean() < 0.7


def test_apply_frozen_refuses_unknown_or_missing_features_and_corrupted_models():
    features, labels, _ = synthetic()
    spec = make_router("ridge", features=FEATURES)
    artifact = freeze(spec, fit_router(spec, features, labels["delta"].to_numpy()), 0.0, {})
    with pytest.raises(InputError, match=r"unknown columns \['x4'\]"):
        apply_frozen(artifact, features.with_columns(pl.col("x1").alias("x4")))
    with pytest.raises(InputError, match=r"missing columns \['x3'\]"):
        apply_frozen(artifact, features.drop("x3"))
    gbm = make_router("bur_gbm", features=FEATURES, max_iter=5)
    data = json.loads(freeze(gbm, fit_router(gbm, features, labels["delta"].to_numpy()), 0.0, {}))
    data["model"]["sha256"] = "0" * 64
    with pytest.raises(InputError, match="sha256"):
        apply_frozen(json.dumps(data).encode(), features)
    with pytest.raises(InputError, match="format"):
        apply_frozen(b'{"format": "other"}', features)


def test_invalid_specs_and_labels_are_refused():
    with pytest.raises(InputError, match="unknown"):
        make_router("oracle")
    with pytest.raises(InputError, match="at least one feature"):
        make_router("ridge")
    with pytest.raises(InputError, match="unknown parameters"):
        make_router("ridge", features=FEATURES, depth=3)
    features, labels, groups = synthetic()
    with pytest.raises(InputError, match=r"\{-1, 0, \+1\}"):
        fit_router(make_router("bur_linear", features=FEATURES), features, labels["delta"].to_numpy() * 0.5)
    with pytest.raises(InputError, match="at least 5 groups"):
        out_of_fold_scores(features, labels, groups.with_columns(pl.lit("g").alias("group_id")), LEARNED[0])
    with pytest.raises(InputError, match="no label or group"):
        out_of_fold_scores(features, labels.head(10), groups, LEARNED[0])
