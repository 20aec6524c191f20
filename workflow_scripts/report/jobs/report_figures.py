"""Rule report_figures: the figures of one routing pair (report/figures.py).

In:  routed.parquet (scores, triggers and labels of calibration and held-out questions per router),
     frontiers.parquet, audit.parquet, and the pair's policy_costs.parquet / cost_frontiers.parquet (cost stage).
Out: results/<dataset>/report/<pair>/{frontiers,calibration,outcomes,utility,cost_breakdown,cost_frontiers}.png,
     each flagged for `snakemake --report` with a caption in report/.
"""

from typing import Any

import polars as pl

from workflow_scripts.core.contracts import COST_FRONTIERS, POLICY_COSTS, read_table
from workflow_scripts.core.runtime import run_job
from workflow_scripts.report import figures


def main(smk: Any) -> None:
    routed = pl.read_parquet(smk.input.routed)
    frontiers = pl.read_parquet(smk.input.frontiers)  # FRONTIERS rows plus the router column (route_frontiers)
    figures.frontier_figure(frontiers, smk.output.frontiers)
    figures.calibration_figure(frontiers, pl.read_parquet(smk.input.audit), smk.output.calibration)
    figures.outcomes_figure(routed, smk.output.outcomes)
    figures.utility_figure(routed, smk.output.utility)
    figures.cost_breakdown_figure(read_table(smk.input.policies, POLICY_COSTS), smk.output.cost_breakdown)
    figures.cost_frontier_figure(read_table(smk.input.cost_frontiers, COST_FRONTIERS), smk.output.cost_frontiers)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
