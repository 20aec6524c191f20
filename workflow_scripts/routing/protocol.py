"""The routing protocol of one configured pair of policies (off → on): learn when switching pays, measure it honestly.

Plain functions of tables, paths and settings; the rules' jobs (routing/jobs/route_*.py) read the Snakemake job
and write what these return.

In:  Study A pair (base → alternative arm): per-query metrics of the two arms (`evaluate`). Study B pair (base
     `closed_book` → a retrieval arm): the closed-book and the arm's GENERATIONS (`answer`, generated on every
     split) and the questions' reference answers, scored by the pair's deterministic scorer (em | f1 | contains).
     Both: the splits, the units and questions, the base arm's run, the closed-book answers' token uncertainty
     and the first-stage rankings the feature families read; the pair's and routers' config.
Out (results/<dataset>/routing/<pair>/):
- labels.parquet      Δ = metric(on) − metric(off) per judged question (rescue / harm / tie); for Study B
                      u = correct(with) − correct(without) ∈ {−1, 0, +1} (benefit / harm / neutral);
- utility.csv         the utility distribution per split and overall (n, gains, harms, ties and their rates, mean
                      off / on / delta), with dataset, generator model (Study B), measure, questions left out for
                      lack of reference answers and `signal_absent` (every label equal: nothing to learn);
- features.parquet    the configured feature families per question (`features`);
- oof_scores.parquet  out-of-fold dev scores per router (grouped K-fold by paper/context);
- frozen/<router>.json  model, feature scaling and threshold fitted on dev only — the only thing later rules read
                      of a router; thresholds.csv the dev sweep (cost per trigger, threshold, utility, trigger
                      rate) per router. The sweep's c is routing.cost_per_trigger, or with routing.measured_cost the
                      router's measured extra cost of one trigger on dev (cost ledger) × per_unit;
- routed.parquet      every calibration and held-out question scored by each frozen router;
- policies.csv        held-out hit rates of off, always-on and each adaptive router, trigger rate, rescues, harms,
                      utility = mean(metric − c × triggered) with the router's frozen c; comparisons.csv bootstrap-over-groups CIs of
                      adaptive − always-on and adaptive − off with win / tie / loss;
- frontiers.parquet   exact / deployable / conservative frontiers per router over the budget grid (calibration
                      split → held-out); audit.parquet the calibration audit over repeated grouped splits.
Routers that never or always fire have no budget knob and are left out of frontiers and the audit.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.vocabulary import FEATURE_FAMILY
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.vocabulary import ADAPTIVE, ALWAYS_ON, LEARNED_ROUTERS, OFF, SCORE_ROUTERS
from workflow_scripts.cost.pricing import measured_costs, trigger_cost
from workflow_scripts.routing.frontiers import calibration_audit, frontier_table
from workflow_scripts.routing.labels import with_splits
from workflow_scripts.routing.routers import (
    FIXED_THRESHOLDS,
    apply_frozen,
    choose_threshold,
    fit_router,
    freeze,
    frozen_features,
    make_router,
    out_of_fold_scores,
    read_artifact,
)
from workflow_scripts.stats.paired import compare_policies


def router_spec(name: str, spec: Mapping[str, Any], feature_names: list[str]):
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


def cost_per_trigger(settings: Mapping[str, Any], spec: Any, dev_qids: pl.Series, pair_name: str,
                     measured: Mapping[str, Any] | None, ledger: str | None) -> tuple[float, str]:
    """c of the utility sweep and how it was set: routing.cost_per_trigger (an abstract unit), or with
    routing.measured_cost the mean measured extra cost of one trigger on dev (cost.trigger_cost for this router's
    feature families) times `per_unit`, the utility one unit of that cost is worth."""
    measured_cost = settings.get("measured_cost")
    if not measured_cost:
        return float(settings["cost_per_trigger"]), "abstract"
    plan, costs = measured_costs(pair_name, measured, ledger, dev_qids)
    families = frozenset(FEATURE_FAMILY[feature] for feature in spec.features)
    extra = trigger_cost(plan, costs, families)[measured_cost["unit"]]
    if extra.null_count():
        raise InputError(f"routing.measured_cost.unit = money: pair '{pair_name}' triggers LLM calls of a model without "
                         f"prices; set prices (input_per_mtok, output_per_mtok, currency) on models.generator and "
                         f"models.judge, or measure seconds or token_equivalents")
    mean = float(extra.mean())
    return measured_cost["per_unit"] * mean, f"measured: {mean:.6g} {measured_cost['unit']} per trigger on dev"


def fit_routers(labels: pl.DataFrame, features: pl.DataFrame, splits: pl.DataFrame, routers: Mapping[str, Any],
                settings: Mapping[str, Any], pair_name: str, measured: Mapping[str, Any] | None = None,
                ledger: str | None = None) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, bytes]]:
    """Dev split only: out-of-fold scores, the utility sweep, then the model refitted on all dev and frozen.
    Returns the out-of-fold scores of every router, the sweep (thresholds.csv) and each router's frozen artifact."""
    labels = with_splits(labels, splits).filter(pl.col("split") == "dev")
    features = features.filter(pl.col("qid").is_in(labels["qid"].implode())).sort("qid")
    labels = labels.sort("qid")
    names = [column for column in features.columns if column != "qid"]
    oof_tables, sweeps, artifacts = [], [], {}
    for name in routers:
        spec = router_spec(name, routers[name], names)
        oof = out_of_fold_scores(features.select("qid", *spec.features), labels, labels, spec,
                                 settings["n_splits"], settings["seed"])
        oof = oof.join(labels.select("qid", "metric_on", "metric_off"), on="qid").sort("qid")
        cost, basis = cost_per_trigger(settings, spec, labels["qid"], pair_name, measured, ledger)
        choice = choose_threshold(spec, oof["score"], oof["metric_on"], oof["metric_off"], cost)
        model = fit_router(spec, features.select("qid", *spec.features), labels["delta"].to_numpy(), settings["seed"])
        metadata = {"pair": pair_name, "dev_questions": labels.height, "dev_utility": choice.utility,
                    "dev_trigger_rate": choice.trigger_rate, "cost_per_trigger": cost, "cost_basis": basis}
        artifacts[name] = freeze(spec, model, choice.threshold, metadata)
        oof_tables.append(oof.with_columns(pl.lit(name).alias("router")))
        sweeps.append({"router": name, "cost_per_trigger": cost, "threshold": choice.threshold, "dev_utility": choice.utility,
                       "dev_trigger_rate": choice.trigger_rate, "signal_absent": bool(oof["signal_absent"].any())})
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
            "cost_per_trigger": costs[router], "utility": float((adaptive - costs[router] * fired.cast(pl.Float64)).mean()),
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
    comparisons = [
        compare_policies(table.rename({"metric_on": ALWAYS_ON, "metric_off": OFF}),
                         [(ADAPTIVE, ALWAYS_ON), (ADAPTIVE, OFF)], B=boot["resamples"], seed=settings["seed"],
                         method=boot["method"], confidence=boot["confidence"]).with_columns(pl.lit(router).alias("router"))
        for (router,), table in heldout.group_by("router", maintain_order=True)
    ]
    return routed, pl.DataFrame(policy_rows(heldout, costs)), pl.concat(comparisons)


def frontier_tables(routed: pl.DataFrame, routers: Mapping[str, Any], budgets: Mapping[str, Any],
                    seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Exact / deployable / conservative frontiers per router with a budget knob, and the calibration audit."""
    knobbed = [name for name, spec in routers.items() if spec.get("kind", name) not in FIXED_THRESHOLDS]
    tables = []
    for router in knobbed:
        table = routed.filter(pl.col("router") == router)
        frontier = frontier_table(table.filter(pl.col("split") == "calibration"), table.filter(pl.col("split") == "heldout"),
                                  budgets["grid"], budgets["delta"], budgets["heldout_term"])
        tables.append(frontier.with_columns(pl.lit(router).alias("router")))
    labels = routed.select("qid", "metric_on", "metric_off", "delta").unique("qid")
    audit = calibration_audit(routed.select("qid", "router", "score"), labels, routed.select("qid", "group_id").unique("qid"),
                              knobbed, budgets["grid"], budgets["audit_splits"], seed, budgets["delta"],
                              heldout_term=budgets["heldout_term"])
    return pl.concat(tables), audit
