"""Rule route_costs (per dataset and routing pair): what each frozen routing policy costs (routing/policy_costs.py).

In:  the dataset's ledger, routed.parquet, frontiers.parquet, the frozen routers; params: the pair, its costing
     settings (arms, costs.reuse, costs.prices, the reranked arms' rankings, the pair's own stages) and the budgets.
Out: results/<dataset>/cost/<pair>/policy_costs.parquet + .csv, cost_frontiers.parquet, reuse.parquet + .csv.
"""

import logging
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import COST_FRONTIERS, FRONTIERS, POLICY_COSTS, REUSE_COSTS, ROUTED
from workflow_scripts.core.tables import read_table, write_report, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.jobs.costs import pair_costs_from_files
from workflow_scripts.routing.policy_costs import cost_frontiers, policy_costs, reuse_costs, router_families

log = logging.getLogger("ragfrontier.cost")


def main(smk: Any) -> None:
    routed = read_table(smk.input.routed, ROUTED)
    heldout = routed.filter(pl.col("split") == "heldout")
    settings = {"pair": smk.params.pair, **smk.params.costing}
    plan, costs = pair_costs_from_files(smk.wildcards.pair, settings, smk.input.ledger, heldout["qid"])
    families = router_families(Path(path).read_bytes() for path in smk.input.frozen)
    policies = write_table(policy_costs(plan, costs, heldout, families), smk.output.policies, POLICY_COSTS)
    write_report(policies, smk.output.policies_csv, POLICY_COSTS, float_precision=6)
    frontiers = read_table(smk.input.frontiers, FRONTIERS)
    frontiers = cost_frontiers(plan, costs, routed, frontiers, families, smk.params.budgets)
    write_table(frontiers, smk.output.frontiers, COST_FRONTIERS)
    reuse = reuse_costs(plan, costs) if plan.base_is_arm else pl.DataFrame(schema=REUSE_COSTS.schema)
    reuse = write_table(reuse, smk.output.reuse, REUSE_COSTS)
    write_report(reuse, smk.output.reuse_csv, REUSE_COSTS, float_precision=6)
    totals = policies.group_by("router", maintain_order=True).agg(pl.col("usage").first(), pl.col("seconds").sum())
    log.info("%s: mean seconds per held-out query by router: %s", smk.wildcards.pair, totals.rows())


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
