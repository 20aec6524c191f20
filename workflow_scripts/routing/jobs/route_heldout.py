"""Rule route_heldout: calibration and held-out scored by the frozen routers; held-out policies and comparisons.

In:  the labels, features, splits and frozen/<router>.json; params: the routing settings (bootstrap, seed) and
     the routers.
Out: results/<dataset>/routing/<pair>/routed.parquet, policies.csv and comparisons.csv.
"""

from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import ROUTED, ROUTER_COMPARISONS, ROUTER_POLICIES, SPLITS
from workflow_scripts.core.tables import read_table, write_report, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.routing import protocol


def main(smk: Any) -> None:
    frozen = {name: Path(path).read_bytes()
              for name, path in protocol.frozen_paths(smk.params.routers, smk.input.frozen).items()}
    routed, policies, comparisons = protocol.heldout_tables(
        pl.read_parquet(smk.input.labels), pl.read_parquet(smk.input.features), read_table(smk.input.splits, SPLITS),
        frozen, smk.params.routing,
    )
    write_table(routed, smk.output.routed, ROUTED)
    write_report(policies, smk.output.policies, ROUTER_POLICIES, float_precision=6)
    write_report(comparisons, smk.output.comparisons, ROUTER_COMPARISONS, float_precision=6)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
