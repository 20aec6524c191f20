"""Rule report_figures: the figures of one routing pair (report/figures.py).

In:  routed.parquet (scores, triggers and labels of calibration and held-out questions per router),
     frontiers.parquet, audit.parquet, and the pair's policy_costs.parquet / cost_frontiers.parquet (cost stage).
Out: results/<dataset>/report/<pair>/{frontiers,calibration,outcomes,utility,cost_breakdown,cost_frontiers}.png,
     each flagged for `snakemake --report` with a caption in report/.
"""

from typing import Any

from workflow_scripts.core.contracts import AUDIT, COST_FRONTIERS, FRONTIERS, POLICY_COSTS, ROUTED
from workflow_scripts.core.tables import read_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.report import figures


def main(smk: Any) -> None:
    routed = read_table(smk.input.routed, ROUTED)
    frontiers = read_table(smk.input.frontiers, FRONTIERS)
    figures.frontier_figure(frontiers, smk.output.frontiers)
    figures.calibration_figure(frontiers, read_table(smk.input.audit, AUDIT), smk.output.calibration)
    figures.outcomes_figure(routed, smk.output.outcomes)
    figures.utility_figure(routed, smk.output.utility)
    figures.cost_breakdown_figure(read_table(smk.input.policies, POLICY_COSTS), smk.output.cost_breakdown)
    figures.cost_frontier_figure(read_table(smk.input.cost_frontiers, COST_FRONTIERS), smk.output.cost_frontiers)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
