"""Rule route_frontiers: budget frontiers per router and the calibration audit (routing/frontiers.py).

In:  routed.parquet; params: the routers, `budgets` and the routing seed.
Out: results/<dataset>/routing/<pair>/frontiers.parquet and audit.parquet.
"""

from typing import Any

from workflow_scripts.core.contracts import AUDIT, FRONTIERS, ROUTED
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.routing.frontiers import frontier_tables


def main(smk: Any) -> None:
    frontiers, audit = frontier_tables(read_table(smk.input.routed, ROUTED), smk.params.routers, smk.params.budgets,
                                       smk.params.seed)
    write_table(frontiers, smk.output.frontiers, FRONTIERS)
    write_table(audit, smk.output.audit, AUDIT)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
