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

from collections.abc import Mapping
from typing import Any

import polars as pl

from workflow_scripts.routing.frontiers import calibration_audit, frontier_table
from workflow_scripts.routing.routers import FIXED_THRESHOLDS


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
