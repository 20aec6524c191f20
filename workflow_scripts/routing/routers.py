"""Routers: a score per query (higher = more worth switching arms / retrieving), the grouped out-of-fold protocol,
the utility-maximizing threshold sweep, and frozen artifacts that a held-out rule applies without anything else.

In:  a wide feature table (qid + Float64 feature columns, from `features`), a LABELS table (qid, delta,
     metric_on, metric_off, from `labels`) and the query groups (qid, group_id: paper or question context).
Out: out-of-fold scores (qid, group_id, fold, score, signal_absent); a threshold choice (threshold, utility,
     trigger rate); a frozen artifact (UTF-8 JSON bytes); routed held-out queries (qid, score, triggered).

A pair's protocol over the configured routers (`routing.routers`), on its labels, features and splits:
`fit_routers` (rule route_fit) fits each router on dev only — out-of-fold scores, the utility sweep at the cost
per trigger c (routing.cost_per_trigger, or with routing.measured_cost per_unit × the router's measured extra
cost of one trigger on dev, priced by cost/pricing.py) and the model refitted on all of dev, frozen;
`heldout_tables` (rule route_heldout) scores calibration and held-out with the frozen artifacts alone and gives
the held-out policies (hit rates, trigger rate, rescues, harms, utility) and their group-bootstrap comparisons
with always-on and off. The jobs read and write the files; `frozen_paths` matches a rule's frozen/<router>.json
files to the routers.

Router kinds (`RouterSpec.kind`):
- ridge — Study A's router: StandardScaler + Ridge (alpha 20) regressing delta; works for any real label.
- bur_linear — Budgeted Utility Router, linear: StandardScaler + multinomial logistic regression (L2, C = 1) on
  the three-valued utility u ∈ {−1, 0, +1}; score = P(u=+1 | x) − P(u=−1 | x) = the model's E[u | x]. Chosen over
  ridge because u is a class label: the logistic model keeps the estimate inside [−1, 1], separates "harm" from
  "no effect" instead of averaging them into one line, and its expected utility is exactly the quantity a
  budgeted router should rank by. It refuses labels outside {−1, 0, +1} (use ridge or bur_gbm for those).
- bur_gbm — Budgeted Utility Router, boosted trees: scikit-learn HistGradientBoostingRegressor (squared error,
  so it also estimates E[u | x]; no early stopping, so the fit is deterministic given the seed). It fits and
  predicts on one OpenMP thread: router tables are small (thousands of rows), where extra threads only add
  synchronisation (a 200-tree fit on 240 rows took 8 s on 2 threads and 0.08 s on one).
- score — a single feature times a sign, no fitting: entropy (+unc_entropy: more uncertain → retrieve),
  min_confidence (−unc_min_prob: a less confident weakest token → retrieve), bm25_top (+bm25_top1: a strong
  probe match means the evidence is there to be used → retrieve).
- random — uniform score from sha256(seed, qid): seeded, and independent of row order and of the other queries.
- always / never — constant scores with fixed thresholds −inf / +inf (every query / no query triggers).

A learned router whose training labels are all equal (e.g. every question a tie) fits a constant model, scores
every query the same and is flagged `signal_absent`; nothing divides by a zero variance (StandardScaler keeps
scale 1 for a constant feature).

Decision rule everywhere: trigger ⇔ score > threshold (strict). The sweep's candidate thresholds are −inf
(trigger all) and each distinct score (trigger exactly the scores above it), so tied scores always fall on the
same side; among thresholds whose mean utility mean(metric − c × triggered) is within 1e-12 of the best, the one
with the fewest triggers wins.

Frozen artifacts are JSON: linear and logistic models as coefficients, scaler means and scales; the GBM as a
base64 pickle inside the JSON with its sha256 and the scikit-learn version that wrote it. The hash is checked
before unpickling and the version must match: this guards against a corrupted or mismatched file, not against a
forged one — load only artifacts this pipeline wrote. Scoring always goes through the same numpy code whether a
model is fresh or frozen, so a round trip gives bit-identical scores.
"""

import base64
import hashlib
import json
import math
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import sklearn
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from workflow_scripts.core.errors import InputError
from workflow_scripts.core.vocabulary import (
    ADAPTIVE,
    ALWAYS_ON,
    CONTROL_ROUTERS,
    FEATURE_FAMILY,
    LEARNED_ROUTERS,
    OFF,
    SCORE_ROUTERS,
)
from workflow_scripts.cost.pricing import Costs, PairPlan, trigger_cost
from workflow_scripts.routing.labels import with_splits
from workflow_scripts.stats.paired import compare_policies

ARTIFACT_FORMAT = "ragfrontier.router/1"
KINDS = LEARNED_ROUTERS + ("score",) + CONTROL_ROUTERS  # a score router is one of SCORE_ROUTERS, by its feature
FIXED_THRESHOLDS = {"always": -math.inf, "never": math.inf}
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "ridge": {"alpha": 20.0},
    "bur_linear": {"C": 1.0},
    "bur_gbm": {"max_iter": 200, "learning_rate": 0.05, "max_leaf_nodes": 15, "min_samples_leaf": 20,
                "l2_regularization": 1.0},
}
TIE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class RouterSpec:
    name: str
    kind: str
    features: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ThresholdChoice:
    threshold: float
    utility: float
    trigger_rate: float
    triggered: int


def make_router(name: str, kind: str | None = None, features: Sequence[str] = (), **params: Any) -> RouterSpec:
    """A router spec; `kind` defaults to `name` (score baselines by name: entropy, min_confidence, bm25_top)."""
    if kind is None and name in SCORE_ROUTERS:
        feature, sign = SCORE_ROUTERS[name]
        return RouterSpec(name, "score", (feature,), {"sign": sign})
    kind = kind or name
    if kind not in KINDS:
        raise InputError(f"router '{name}': kind '{kind}' is unknown; use one of {list(KINDS)} "
                         f"or a baseline name {list(SCORE_ROUTERS)}")
    if kind in LEARNED_ROUTERS and not features:
        raise InputError(f"router '{name}': a {kind} router needs at least one feature")
    if kind == "score" and (len(features) != 1 or params.get("sign") not in (1, -1, 1.0, -1.0)):
        raise InputError(f"router '{name}': a score router needs exactly one feature and sign +1 or -1")
    if kind in CONTROL_ROUTERS and features:
        raise InputError(f"router '{name}': a {kind} router reads no features (got {list(features)})")
    unknown = set(params) - set(DEFAULT_PARAMS.get(kind, {})) - ({"sign"} if kind == "score" else set())
    if unknown:
        raise InputError(f"router '{name}': unknown parameters {sorted(unknown)} for kind {kind}")
    return RouterSpec(name, kind, tuple(features), DEFAULT_PARAMS.get(kind, {}) | params)


def feature_matrix(features: pl.DataFrame, names: Sequence[str]) -> np.ndarray:
    """The named feature columns as a float64 matrix; missing columns or values are an InputError."""
    missing = [name for name in names if name not in features.columns]
    if missing:
        raise InputError(f"router features {missing} are missing from the feature table ({features.columns})")
    matrix = features.select(pl.col(name).cast(pl.Float64) for name in names).to_numpy() if names else \
        np.empty((features.height, 0))
    if not np.isfinite(matrix).all():
        bad = sorted({names[j] for j in np.nonzero(~np.isfinite(matrix))[1]})
        raise InputError(f"router features {bad} have missing or non-finite values")
    return matrix


def _scaler_params(scaler: StandardScaler) -> dict[str, list[float]]:
    return {"mean": scaler.mean_.tolist(), "scale": scaler.scale_.tolist()}


def _fit_learned(spec: RouterSpec, X: np.ndarray, y: np.ndarray, seed: int) -> dict[str, Any]:
    if spec.kind == "ridge":
        pipeline = Pipeline([("scale", StandardScaler()), ("ridge", Ridge(alpha=spec.params["alpha"]))]).fit(X, y)
        ridge = pipeline.named_steps["ridge"]
        return {"kind": "linear", **_scaler_params(pipeline.named_steps["scale"]),
                "coef": ridge.coef_.tolist(), "intercept": float(ridge.intercept_)}
    if spec.kind == "bur_linear":
        if not set(np.unique(y)) <= {-1.0, 0.0, 1.0}:
            raise InputError(f"router '{spec.name}': bur_linear needs utility labels in {{-1, 0, +1}}; "
                             f"got values like {np.unique(y)[:5].tolist()} (use ridge or bur_gbm)")
        logistic = LogisticRegression(C=spec.params["C"], max_iter=2000)
        pipeline = Pipeline([("scale", StandardScaler()), ("logistic", logistic)]).fit(X, y)
        return {"kind": "logistic", **_scaler_params(pipeline.named_steps["scale"]),
                "classes": logistic.classes_.tolist(), "coef": logistic.coef_.tolist(),
                "intercept": logistic.intercept_.tolist()}
    with threadpool_limits(limits=1, user_api="openmp"):
        model = HistGradientBoostingRegressor(early_stopping=False, random_state=seed, **spec.params).fit(X, y)
    blob = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
    return {"kind": "gbm", "sklearn": sklearn.__version__, "sha256": hashlib.sha256(blob).hexdigest(),
            "pickle": base64.b64encode(blob).decode("ascii")}


def fit_router(spec: RouterSpec, features: pl.DataFrame, labels: np.ndarray, seed: int = 0) -> dict[str, Any]:
    """Fit `spec` on the rows of `features` with `labels` (same order); return the JSON-able model."""
    y = np.asarray(labels, dtype=float)
    if y.shape != (features.height,) or not np.isfinite(y).all():
        raise InputError(f"router '{spec.name}': need one finite label per feature row ({features.height} rows)")
    if spec.kind == "score":
        return {"kind": "score", "feature": spec.features[0], "sign": float(spec.params["sign"])}
    if spec.kind == "random":
        return {"kind": "random", "seed": int(seed)}
    if spec.kind in FIXED_THRESHOLDS:
        return {"kind": "constant", "value": 1.0 if spec.kind == "always" else 0.0}
    if features.height == 0:
        raise InputError(f"router '{spec.name}': no training rows")
    if np.ptp(y) == 0:
        return {"kind": "constant", "value": float(y[0]), "signal_absent": True}
    return _fit_learned(spec, feature_matrix(features, spec.features), y, seed)


def _standardize(model: Mapping[str, Any], X: np.ndarray) -> np.ndarray:
    return (X - np.asarray(model["mean"])) / np.asarray(model["scale"])


def _unpickle(model: Mapping[str, Any]) -> HistGradientBoostingRegressor:
    blob = base64.b64decode(model["pickle"])
    if hashlib.sha256(blob).hexdigest() != model["sha256"]:
        raise InputError("router artifact: the GBM model's sha256 does not match; the artifact is corrupted")
    if model["sklearn"] != sklearn.__version__:
        raise InputError(f"router artifact: the GBM was saved by scikit-learn {model['sklearn']}, this is "
                         f"{sklearn.__version__}; refit the router with this version")
    return pickle.loads(blob)


def _uniform_from_hash(seed: int, qid: str) -> float:
    digest = hashlib.sha256(f"{seed}\x00{qid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def model_scores(model: Mapping[str, Any], feature_names: Sequence[str], features: pl.DataFrame) -> np.ndarray:
    """Scores of a fitted (or frozen) model on the rows of `features`."""
    kind = model["kind"]
    if kind == "constant":
        return np.full(features.height, float(model["value"]))
    if kind == "random":
        return np.array([_uniform_from_hash(model["seed"], qid) for qid in features["qid"]], dtype=float)
    X = feature_matrix(features, feature_names)
    if kind == "score":
        return model["sign"] * X[:, 0]
    if kind == "linear":
        return _standardize(model, X) @ np.asarray(model["coef"]) + model["intercept"]
    if kind == "logistic":
        logits = _standardize(model, X) @ np.asarray(model["coef"]).T + np.asarray(model["intercept"])
        classes = np.asarray(model["classes"], dtype=float)
        if len(classes) == 2:
            return classes[0] + (classes[1] - classes[0]) / (1.0 + np.exp(-logits[:, 0]))
        logits -= logits.max(axis=1, keepdims=True)
        probabilities = np.exp(logits)
        return (probabilities / probabilities.sum(axis=1, keepdims=True)) @ classes
    if kind == "gbm":
        with threadpool_limits(limits=1, user_api="openmp"):
            return _unpickle(model).predict(X)
    raise InputError(f"router artifact: model kind '{kind}' is unknown")


def _routing_table(features: pl.DataFrame, labels: pl.DataFrame, groups: pl.DataFrame, label: str) -> pl.DataFrame:
    for name, table, columns in (("features", features, ["qid"]), ("labels", labels, ["qid", label]),
                                 ("groups", groups, ["qid", "group_id"])):
        missing = [column for column in columns if column not in table.columns]
        if missing:
            raise InputError(f"out-of-fold scores: the {name} table lacks columns {missing}")
    joined = features.join(labels.select("qid", pl.col(label).alias("__label")), on="qid", how="left").join(
        groups.select("qid", "group_id"), on="qid", how="left")
    unlabelled = joined.filter(pl.col("__label").is_null() | pl.col("group_id").is_null())["qid"].to_list()
    if unlabelled:
        raise InputError(f"out-of-fold scores: queries {unlabelled[:5]} ({len(unlabelled)}) have no label or group")
    return joined.sort("qid")


def out_of_fold_scores(
    features: pl.DataFrame, labels: pl.DataFrame, groups: pl.DataFrame, spec: RouterSpec, n_splits: int = 5,
    seed: int = 0, label: str = "delta",
) -> pl.DataFrame:
    """Grouped K-fold: every query is scored by a model fitted on the other folds' groups only."""
    table = _routing_table(features, labels, groups, label)
    n_groups = table["group_id"].n_unique()
    if n_splits < 2 or n_groups < n_splits:
        raise InputError(f"out-of-fold scores: {n_splits} folds need at least {max(n_splits, 2)} groups "
                         f"(have {n_groups}); lower routing.n_splits")
    y = table["__label"].to_numpy().astype(float)
    scores = np.empty(table.height)
    folds = np.empty(table.height, dtype=np.int32)
    flat = np.zeros(table.height, dtype=bool)
    splitter = GroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    for fold, (train, test) in enumerate(splitter.split(np.zeros(table.height), y, table["group_id"].to_numpy())):
        model = fit_router(spec, table[train], y[train], seed)
        scores[test] = model_scores(model, spec.features, table[test])
        folds[test] = fold
        flat[test] = bool(model.get("signal_absent", False))
    return pl.DataFrame({"qid": table["qid"], "group_id": table["group_id"], "fold": folds, "score": scores,
                         "signal_absent": flat})


def signal_absent(labels: np.ndarray) -> bool:
    """True when every label is the same (e.g. all ties): no router can learn anything from them."""
    values = np.asarray(labels, dtype=float)
    return values.size == 0 or bool(np.ptp(values) == 0)


def _check_sweep_inputs(*arrays: np.ndarray) -> None:
    shape = arrays[0].shape
    if len(shape) != 1 or shape[0] == 0 or any(array.shape != shape for array in arrays):
        raise InputError("threshold sweep: scores and metrics must be non-empty 1-D arrays of one length")
    if not all(np.isfinite(array).all() for array in arrays):
        raise InputError("threshold sweep: scores and metrics must be finite")


def utility_curve(scores: Any, metric_on: Any, metric_off: Any, cost_per_trigger: float = 0.02) -> pl.DataFrame:
    """Every distinct decision the rule `score > threshold` can make on these scores: threshold, triggered,
    trigger_rate and mean utility = mean(metric − cost × triggered), from "none triggered" to "all triggered"."""
    s, on, off = (np.asarray(array, dtype=float) for array in (scores, metric_on, metric_off))
    _check_sweep_inputs(s, on, off)
    values, inverse = np.unique(-s, return_inverse=True)  # distinct scores, descending
    block_gain = np.bincount(inverse, weights=on - off - cost_per_trigger, minlength=values.size)
    block_size = np.bincount(inverse, minlength=values.size)
    n = s.size
    gain = np.concatenate([[0.0], np.cumsum(block_gain)])
    triggered = np.concatenate([[0], np.cumsum(block_size)])
    thresholds = np.concatenate([-values, [-math.inf]])
    return pl.DataFrame({"threshold": thresholds, "triggered": triggered, "trigger_rate": triggered / n,
                         "utility": off.mean() + gain / n})


def sweep_threshold(scores: Any, metric_on: Any, metric_off: Any, cost_per_trigger: float = 0.02) -> ThresholdChoice:
    """The threshold maximizing mean(metric − cost × triggered); near-ties go to the fewest triggers."""
    curve = utility_curve(scores, metric_on, metric_off, cost_per_trigger)
    utility = curve["utility"].to_numpy()
    best = int(np.flatnonzero(utility >= utility.max() - TIE_TOLERANCE)[0])
    row = curve.row(best, named=True)
    return ThresholdChoice(float(row["threshold"]), float(row["utility"]), float(row["trigger_rate"]),
                           int(row["triggered"]))


def choose_threshold(spec: RouterSpec, scores: Any, metric_on: Any, metric_off: Any,
                     cost_per_trigger: float = 0.02) -> ThresholdChoice:
    """The swept threshold, or the fixed one of always / never (reported with its utility on these queries)."""
    if spec.kind not in FIXED_THRESHOLDS:
        return sweep_threshold(scores, metric_on, metric_off, cost_per_trigger)
    on, off = np.asarray(metric_on, dtype=float), np.asarray(metric_off, dtype=float)
    _check_sweep_inputs(on, off)
    fires = spec.kind == "always"
    utility = float((on - cost_per_trigger).mean() if fires else off.mean())
    return ThresholdChoice(FIXED_THRESHOLDS[spec.kind], utility, float(fires), on.size if fires else 0)


def _encode_float(value: float) -> float | str:
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def freeze(spec: RouterSpec, model: Mapping[str, Any], threshold: float, metadata: Mapping[str, Any]) -> bytes:
    """The frozen router: model, feature names, threshold and metadata as UTF-8 JSON (all a held-out rule reads)."""
    artifact = {
        "format": ARTIFACT_FORMAT,
        "router": spec.name,
        "kind": spec.kind,
        "features": list(spec.features),
        "params": dict(spec.params),
        "threshold": _encode_float(float(threshold)),
        "signal_absent": bool(model.get("signal_absent", False)),
        "model": dict(model),
        "metadata": dict(metadata),
    }
    try:
        return json.dumps(artifact, indent=1, sort_keys=True, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise InputError(f"router '{spec.name}': metadata must be plain JSON values ({error})") from None


def read_artifact(artifact: bytes) -> dict[str, Any]:
    """Parse and check a frozen router artifact."""
    try:
        data = json.loads(artifact.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"router artifact: not a JSON artifact ({error})") from None
    if not isinstance(data, dict) or data.get("format") != ARTIFACT_FORMAT:
        raise InputError(f"router artifact: format is not {ARTIFACT_FORMAT!r}; refreeze it with this version")
    return data


def frozen_features(artifact: bytes) -> list[str]:
    """The feature columns a frozen router reads (select exactly these, plus qid, before `apply_frozen`)."""
    return list(read_artifact(artifact)["features"])


def apply_frozen(artifact: bytes, features: pl.DataFrame) -> pl.DataFrame:
    """Score and route queries with the artifact alone: qid, score, triggered (score > frozen threshold).
    The feature table must hold qid and exactly the artifact's features: a missing or unknown column is refused."""
    data = read_artifact(artifact)
    known = data["features"]
    if "qid" not in features.columns:
        raise InputError("apply frozen router: the feature table has no qid column")
    given = [column for column in features.columns if column != "qid"]
    unknown = sorted(set(given) - set(known))
    missing = [name for name in known if name not in given]
    if unknown or missing:
        raise InputError(f"apply frozen router '{data['router']}': it was frozen with features {known}; "
                         f"unknown columns {unknown}, missing columns {missing}")
    scores = model_scores(data["model"], known, features)
    threshold = float(data["threshold"])  # "inf" / "-inf" strings decode too
    return pl.DataFrame({"qid": features["qid"], "score": scores, "triggered": scores > threshold})


# --- A pair's protocol over the configured routers (rules route_fit and route_heldout)


def router_spec(name: str, spec: Mapping[str, Any], feature_names: list[str]) -> RouterSpec:
    """A RouterSpec from a `routing.routers` entry; learned routers read every configured feature."""
    params = {key: value for key, value in spec.items() if key != "kind"}
    kind = spec.get("kind", name)
    if kind in SCORE_ROUTERS:
        feature, sign = SCORE_ROUTERS[kind]
        return make_router(name, "score", (feature,), sign=sign)
    learned = kind in LEARNED_ROUTERS
    return make_router(name, None if kind == name and not learned else kind, feature_names if learned else (), **params)


def frozen_paths(routers: Mapping[str, Any], paths: Sequence[str]) -> dict[str, str]:
    """Router name → its frozen/<router>.json among `paths` (matched by file name, in the config's router order)."""
    by_name = {Path(path).stem: str(path) for path in paths}
    return {name: by_name[name] for name in routers}


def dev_labels(labels: pl.DataFrame, splits: pl.DataFrame) -> pl.DataFrame:
    """The labels of the dev split, with group and split, in qid order: all that fitting a router may see."""
    return with_splits(labels, splits).filter(pl.col("split") == "dev").sort("qid")


def cost_per_trigger(settings: Mapping[str, Any], spec: RouterSpec, pair_name: str,
                     priced: tuple[PairPlan, Costs] | None) -> tuple[float, str]:
    """c of the utility sweep and how it was set: routing.cost_per_trigger (an abstract unit), or with
    routing.measured_cost the mean measured extra cost of one trigger on dev (cost.trigger_cost for this router's
    feature families, from `priced`: the pair's plan and its costs on dev, jobs/costs.pair_costs_from_files) times
    `per_unit`, the utility one unit of that cost is worth."""
    measured_cost = settings.get("measured_cost")
    if not measured_cost:
        return float(settings["cost_per_trigger"]), "abstract"
    plan, costs = priced
    families = frozenset(FEATURE_FAMILY[feature] for feature in spec.features)
    extra = trigger_cost(plan, costs, families)[measured_cost["unit"]]
    if extra.null_count():
        raise InputError(f"routing.measured_cost.unit = money: pair '{pair_name}' triggers LLM calls of a model "
                         f"without prices; set prices (input_per_mtok, output_per_mtok, currency) on "
                         f"models.generator and models.judge, or measure seconds or token_equivalents")
    mean = float(extra.mean())
    return measured_cost["per_unit"] * mean, f"measured: {mean:.6g} {measured_cost['unit']} per trigger on dev"


def fit_routers(labels: pl.DataFrame, features: pl.DataFrame, splits: pl.DataFrame, routers: Mapping[str, Any],
                settings: Mapping[str, Any], pair_name: str, priced: tuple[PairPlan, Costs] | None = None,
                ) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, bytes]]:
    """Dev split only: out-of-fold scores, the utility sweep, then the model refitted on all dev and frozen.
    Returns the out-of-fold scores of every router, the sweep (thresholds.csv) and each router's frozen artifact.
    `priced`: with routing.measured_cost, the pair's cost plan and its costs on the dev questions."""
    labels = dev_labels(labels, splits)
    features = features.filter(pl.col("qid").is_in(labels["qid"].implode())).sort("qid")
    names = [column for column in features.columns if column != "qid"]
    oof_tables, sweeps, artifacts = [], [], {}
    for name in routers:
        spec = router_spec(name, routers[name], names)
        oof = out_of_fold_scores(features.select("qid", *spec.features), labels, labels, spec,
                                 settings["n_splits"], settings["seed"])
        oof = oof.join(labels.select("qid", "metric_on", "metric_off"), on="qid").sort("qid")
        cost, basis = cost_per_trigger(settings, spec, pair_name, priced)
        choice = choose_threshold(spec, oof["score"], oof["metric_on"], oof["metric_off"], cost)
        model = fit_router(spec, features.select("qid", *spec.features), labels["delta"].to_numpy(), settings["seed"])
        metadata = {"pair": pair_name, "dev_questions": labels.height, "dev_utility": choice.utility,
                    "dev_trigger_rate": choice.trigger_rate, "cost_per_trigger": cost, "cost_basis": basis}
        artifacts[name] = freeze(spec, model, choice.threshold, metadata)
        oof_tables.append(oof.with_columns(pl.lit(name).alias("router")))
        sweeps.append({"router": name, "cost_per_trigger": cost, "threshold": choice.threshold,
                       "dev_utility": choice.utility, "dev_trigger_rate": choice.trigger_rate,
                       "signal_absent": bool(oof["signal_absent"].any())})
    return pl.concat(oof_tables), pl.DataFrame(sweeps), artifacts


def routed_scores(frozen: Mapping[str, bytes], features: pl.DataFrame) -> pl.DataFrame:
    """Each frozen router applied to `features` (the artifact is all it reads): qid, router, score, triggered."""
    tables = []
    for name, artifact in frozen.items():
        routed = apply_frozen(artifact, features.select("qid", *frozen_features(artifact)))
        tables.append(routed.with_columns(pl.lit(name).alias("router")))
    return pl.concat(tables).select("qid", "router", "score", "triggered")


def policy_rows(heldout: pl.DataFrame, costs: Mapping[str, float]) -> list[dict[str, Any]]:
    """Held-out hit rate, trigger rate, rescues, harms and utility (with the cost per trigger each router was
    frozen with) of each router's adaptive policy."""
    rows = []
    for (router,), table in heldout.group_by("router", maintain_order=True):
        fired = table["triggered"]
        adaptive = table[ADAPTIVE]
        rows.append({
            "router": router, "questions": table.height, OFF: table["metric_off"].mean(),
            ALWAYS_ON: table["metric_on"].mean(), ADAPTIVE: adaptive.mean(), "trigger_rate": fired.mean(),
            "rescues": int((fired & (table["delta"] > 0)).sum()), "harms": int((fired & (table["delta"] < 0)).sum()),
            "cost_per_trigger": costs[router],
            "utility": float((adaptive - costs[router] * fired.cast(pl.Float64)).mean()),
        })
    return rows


def heldout_tables(labels: pl.DataFrame, features: pl.DataFrame, splits: pl.DataFrame, frozen: Mapping[str, bytes],
                   settings: Mapping[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Score calibration and held-out with the frozen routers (`frozen`: name → artifact, in the config's order);
    the routed scores, the held-out policies and their group-bootstrap comparisons."""
    labels = with_splits(labels, splits).filter(pl.col("split") != "dev")
    features = features.filter(pl.col("qid").is_in(labels["qid"].implode()))
    routed = routed_scores(frozen, features).join(labels, on="qid")
    heldout = routed.filter(pl.col("split") == "heldout").with_columns(
        pl.when(pl.col("triggered")).then(pl.col("metric_on")).otherwise(pl.col("metric_off")).alias(ADAPTIVE)
    )
    costs = {name: read_artifact(artifact)["metadata"]["cost_per_trigger"] for name, artifact in frozen.items()}
    boot = settings["bootstrap"]
    comparisons = []
    for (router,), table in heldout.group_by("router", maintain_order=True):
        for scale, scored in scales(table, costs[router]).items():
            comparisons.append(compare_policies(
                scored, [(ADAPTIVE, ALWAYS_ON), (ADAPTIVE, OFF)], B=boot["resamples"], seed=settings["seed"],
                method=boot["method"], confidence=boot["confidence"],
            ).with_columns(pl.lit(router).alias("router"), pl.lit(scale).alias("scale")))
    return routed, pl.DataFrame(policy_rows(heldout, costs)), pl.concat(comparisons)


def scales(table: pl.DataFrame, cost: float) -> dict[str, pl.DataFrame]:
    """A router's held-out questions as the three policies score them (group_id, adaptive, always_on, off), on the
    metric and on the utility the router was frozen for (metric − c × triggered: always switching pays c on every
    question, never switching nothing), so that a router is compared with the fixed policies on what it optimises."""
    metric = table.select("group_id", ADAPTIVE, pl.col("metric_on").alias(ALWAYS_ON), pl.col("metric_off").alias(OFF))
    utility = table.select(
        "group_id",
        (pl.col(ADAPTIVE) - cost * pl.col("triggered").cast(pl.Float64)).alias(ADAPTIVE),
        (pl.col("metric_on") - cost).alias(ALWAYS_ON),
        pl.col("metric_off").cast(pl.Float64).alias(OFF),
    )
    return {"metric": metric, "utility": utility}
