"""Rule route_fit: each router fitted on dev only and frozen (routing/protocol.py `fit_routers`).

In:  the labels, features and splits, and with routing.measured_cost the cost ledger; params: the routing
     settings, the routers and the measured-cost settings.
Out: results/<dataset>/routing/<pair>/oof_scores.parquet, thresholds.csv and frozen/<router>.json.
"""

from typing import Any

import polars as pl

from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.core.contracts import OOF_SCORES, ROUTER_THRESHOLDS, SPLITS
from workflow_scripts.core.tables import read_table, write_report, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.routing import protocol


def main(smk: Any) -> None:
    oof, sweeps, artifacts = protocol.fit_routers(
        pl.read_parquet(smk.input.labels), pl.read_parquet(smk.input.features), read_table(smk.input.splits, SPLITS),
        smk.params.routers, smk.params.routing, smk.wildcards.pair, smk.params.measured, smk.input.get("ledger"),
    )
    for name, path in protocol.frozen_paths(smk.params.routers, smk.output.frozen).items():
        write_text_atomic(artifacts[name].decode("utf-8"), path)
    write_table(oof, smk.output.oof, OOF_SCORES)
    write_report(sweeps, smk.output.thresholds, ROUTER_THRESHOLDS, float_precision=6)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
