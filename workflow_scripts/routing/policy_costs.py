"""What each routing policy really costs (rule `route_costs`, per dataset and routing pair base → alternative).

In:  the pair's Costs and PairPlan (cost/pricing.py, from the ledger), routed.parquet, frontiers.parquet, the frozen
     routers' artifacts (the feature families each reads) and the budget grid.
Out (results/<dataset>/cost/<pair>/, written by routing/jobs/route_costs.py):
- policy_costs  per router on held-out: pre-decision cost of its trigger family (query-only: the feature job;
  uncertainty: the no-retrieval answer; retrieval-score: the BM25 probe; base_arm: the base arm's retrieval), the
  base answer when it does not fire, and when it fires the alternative's retrieval and its generation with evidence
  — mean seconds, token-equivalents and money per query (money: the priced LLM blocks' `prices`, null when a
  component's model has none);
- cost_frontiers  every frontier point (exact / deployable / conservative, per budget) with the mean cost of the
  same triggers, so frontiers can be drawn against cost as well as usage;
- reuse  (arm pairs only) the per-query cost of triggering the alternative arm when it reuses the base arm's
  first-stage rankings and rerank scores versus recomputing them.
"""

from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl

from workflow_scripts.core.vocabulary import COST_MEASURES, FEATURE_FAMILY
from workflow_scripts.core.errors import InputError
from workflow_scripts.cost.pricing import Costs, PairPlan
from workflow_scripts.routing.frontiers import frontier_table
from workflow_scripts.routing.routers import read_artifact


def router_families(frozen: Iterable[bytes]) -> dict[str, frozenset[str]]:
    """Router → the feature families its frozen artifact reads (empty for random / always / never), in the order of
    the artifacts; the router's name is the one recorded inside the artifact."""
    families = {}
    for data in frozen:
        artifact = read_artifact(data)
        router, names = artifact["router"], artifact["features"]
        unknown = [name for name in names if name not in FEATURE_FAMILY]
        if unknown:
            raise InputError(f"route costs: router '{router}' reads features {unknown} that belong to no cost family "
                             f"(vocabulary.FEATURE_FAMILY)")
        families[router] = frozenset(FEATURE_FAMILY[name] for name in names)
    return families


def policy_costs(
    plan: PairPlan, costs: Costs, heldout: pl.DataFrame, families: Mapping[str, frozenset[str]]
) -> pl.DataFrame:
    """POLICY_COSTS rows: each router's frozen policy on held-out, cost by component (mean per query)."""
    rows = []
    for router, fams in families.items():
        table = heldout.filter(pl.col("router") == router).sort("qid")
        fired = table["triggered"].cast(pl.Float64).to_numpy()
        adaptive = (table["metric_on"] * table["triggered"] + table["metric_off"] * ~table["triggered"]).mean()
        parts = {
            "pre_decision": (costs.total(plan.pre_decision(fams)), None),
            "base_answer": (costs.total(plan.base_answer(fams)), 1.0 - fired),
            "trigger_retrieval": (costs.total(plan.trigger_retrieval(fams)), fired),
            "trigger_generation": (costs.total(plan.trigger_generation()), fired),
        }
        for component, (cost, weight) in parts.items():
            rows.append(
                {
                    "router": router,
                    "families": "+".join(sorted(fams)),
                    "component": component,
                    "usage": float(fired.mean()),
                    "accuracy": float(adaptive),
                    **{measure: mean_cost(cost[measure], weight) for measure in COST_MEASURES},
                    "currency": costs.currency,
                }
            )
    return pl.DataFrame(
        rows, schema_overrides={**{measure: pl.Float64 for measure in COST_MEASURES}, "currency": pl.String}
    )


def mean_cost(values: pl.Series, weight: Any = None) -> float | None:
    """The mean per query of a cost column, each query's cost × its `weight` (e.g. whether it fired); None when a
    query's cost is unknown (money of an unpriced model)."""
    if values.null_count():
        return None
    values = values.to_numpy() if weight is None else values.to_numpy() * weight
    return float(values.mean())


def cost_frontiers(plan: PairPlan, costs: Costs, routed: pl.DataFrame, frontiers: pl.DataFrame,
                   families: Mapping[str, frozenset[str]], budgets: Mapping[str, Any]) -> pl.DataFrame:
    """Every frontier point with the mean cost of the same triggers (frontiers.frontier_table on cost as metric)."""
    tables = []
    for router in frontiers["router"].unique(maintain_order=True):
        fams = families[router]
        off = costs.total(plan.pre_decision(fams) + plan.base_answer(fams))
        on = costs.total(plan.pre_decision(fams) + plan.trigger_retrieval(fams) + plan.trigger_generation())
        scored = routed.filter(pl.col("router") == router)
        heldout = scored.filter(pl.col("split") == "heldout").select("qid", "score")
        calibration = scored.filter(pl.col("split") == "calibration").select("score")
        measured = {}
        for column in COST_MEASURES:
            held = heldout.join(off.select("qid", pl.col(column).alias("metric_off")), on="qid").join(
                on.select("qid", pl.col(column).alias("metric_on")), on="qid")
            if measured and held.filter(pl.col("metric_off").is_null() | pl.col("metric_on").is_null()).height:
                # money of an unpriced model is unknown: the points (those of the seconds, always known) stay, null
                measured[column] = measured[COST_MEASURES[0]].select(
                    "frontier", "budget", "recomputed", pl.lit(None, dtype=pl.Float64).alias(column))
                continue
            table = frontier_table(calibration, held, budgets["grid"], budgets["delta"])
            measured[column] = table.select("frontier", "budget", pl.col("usage").alias("recomputed"),
                                            pl.col("accuracy").alias(column))
        points = frontiers.filter(pl.col("router") == router).select(
            "router", "frontier", "budget", "usage", "accuracy"
        )
        joined = points.join(measured["seconds"], on=["frontier", "budget"])
        for column in COST_MEASURES[1:]:
            joined = joined.join(measured[column].drop("recomputed"), on=["frontier", "budget"])
        if joined.height != points.height or (joined["usage"] - joined["recomputed"]).abs().max() > 1e-9:
            raise InputError(
                f"route costs: router '{router}': frontiers.parquet does not match the triggers recomputed "
                f"from routed.parquet with budgets {list(budgets['grid'])}; rerun route_frontiers"
            )
        tables.append(joined.drop("recomputed").with_columns(pl.lit(costs.currency, dtype=pl.String).alias("currency")))
    return pl.concat(tables)


def reuse_costs(plan: PairPlan, costs: Costs) -> pl.DataFrame:
    """REUSE_COSTS rows: the alternative arm's trigger cost per stage, reusing the base arm's work or not."""
    rows = []
    for mode, reuse in (("reuse", True), ("recompute", False)):
        for unit in plan.trigger_retrieval(frozenset({"base_arm"}), reuse):
            cost = costs.unit(unit)
            stage, component = (costs.rerank_stage, unit[2]) if unit[0] == "pairs" else (unit[1], unit[2])
            rows.append({"mode": mode, "stage": stage, "component": component,
                         **{measure: mean_cost(cost[measure]) for measure in COST_MEASURES}, "currency": costs.currency,
                         "rerank_pairs": cost["rerank_pairs"].fill_null(0).mean()})
    return pl.DataFrame(
        rows, schema_overrides={**{measure: pl.Float64 for measure in COST_MEASURES}, "currency": pl.String}
    )
