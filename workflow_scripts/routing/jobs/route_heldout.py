"""Rule route_heldout: calibration and held-out scored by the frozen routers; held-out policies and comparisons
(routing/routers.py `heldout_tables`).

In:  the labels, features, splits and frozen/<router>.json; params: the pair, the routing settings (bootstrap, seed)
     and the routers.
Out: results/<dataset>/routing/<pair>/routed.parquet, policies.csv and comparisons.csv.
"""

from pathlib import Path
from typing import Any

from workflow_scripts.core.contracts import LABELS, ROUTED, ROUTER_COMPARISONS, ROUTER_POLICIES, SPLITS
from workflow_scripts.core.tables import read_table, write_report, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.routing.features import features_contract
from workflow_scripts.routing.routers import frozen_paths, heldout_tables


def main(smk: Any) -> None:
    paths = frozen_paths(smk.params.routers, smk.input.frozen)
    frozen = {name: Path(path).read_bytes() for name, path in paths.items()}
    features = read_table(smk.input.features, features_contract(smk.params.pair["features"]))
    routed, policies, comparisons = heldout_tables(read_table(smk.input.labels, LABELS), features,
                                                   read_table(smk.input.splits, SPLITS), frozen, smk.params.routing)
    write_table(routed, smk.output.routed, ROUTED)
    write_report(policies, smk.output.policies, ROUTER_POLICIES, float_precision=6)
    write_report(comparisons, smk.output.comparisons, ROUTER_COMPARISONS, float_precision=6)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
