"""Rule route_fit: each router fitted on dev only and frozen (routing/routers.py `fit_routers`).

In:  the labels, features and splits, and with routing.measured_cost the cost ledger and what pricing reads
     (cost/pricing.py); params: the pair, the routing settings, the routers and the measured-cost settings.
Out: results/<dataset>/routing/<pair>/oof_scores.parquet, thresholds.csv and frozen/<router>.json.
"""

from typing import Any

from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.core.contracts import LABELS, OOF_SCORES, ROUTER_THRESHOLDS, SPLITS
from workflow_scripts.core.tables import read_table, write_report, write_table
from workflow_scripts.jobs.costs import pair_costs_from_files
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.routing.features import features_contract
from workflow_scripts.routing.routers import dev_labels, fit_routers, frozen_paths


def main(smk: Any) -> None:
    settings, pair_name = smk.params.routing, smk.wildcards.pair
    labels, splits = read_table(smk.input.labels, LABELS), read_table(smk.input.splits, SPLITS)
    features = read_table(smk.input.features, features_contract(smk.params.pair["features"]))
    priced = None
    if settings.get("measured_cost"):  # the pair's cost plan and its measured costs on dev
        priced = pair_costs_from_files(
            pair_name, smk.params.measured, smk.input.ledger, dev_labels(labels, splits)["qid"]
        )
    oof, sweeps, artifacts = fit_routers(labels, features, splits, smk.params.routers, settings, pair_name, priced)
    for name, path in frozen_paths(smk.params.routers, smk.output.frozen).items():
        write_text_atomic(artifacts[name].decode("utf-8"), path)
    write_table(oof, smk.output.oof, OOF_SCORES)
    write_report(sweeps, smk.output.thresholds, ROUTER_THRESHOLDS, float_precision=6)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
