"""Rule route_features: the pair's configured feature families per labelled question (routing/features.py).

In:  the labels and what each family reads (base run, units, dense ranking; questions; closed-book answers; the
     BM25 probe); params: the pair (its `features`).
Out: results/<dataset>/routing/<pair>/features.parquet: qid and exactly the columns of those families
     (features.features_contract).
"""

from typing import Any

from workflow_scripts.core.contracts import GENERATIONS, LABELS, QUESTIONS, RANKING, RUNS, UNITS
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.routing.features import (
    features_contract,
    keep_features,
    labelled_features,
    probe_features,
    query_features,
    uncertainty_features,
)


def main(smk: Any) -> None:
    families = smk.params.pair["features"]
    labelled = read_table(smk.input.labels, LABELS, columns=["qid"])["qid"]
    tables = []
    if "base_arm" in families:
        run = read_table(smk.input.base_run, RUNS)
        kinds = read_table(smk.input.units, UNITS, where=("unit_id", run["unit_id"].unique()),
                           columns=["unit_id", "kind"])
        tables.append(keep_features(run, read_table(smk.input.dense, RANKING), kinds))
    if "query_only" in families:
        tables.append(query_features(read_table(smk.input.questions, QUESTIONS)))
    if "uncertainty" in families:
        tables.append(uncertainty_features(read_table(smk.input.closed_book, GENERATIONS)))
    if "retrieval_score" in families:
        tables.append(probe_features(read_table(smk.input.probe, RANKING), labelled.to_list()))
    write_table(labelled_features(tables, labelled), smk.output.features, features_contract(families))


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
