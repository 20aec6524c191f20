"""Rule route_features: the pair's configured feature families per labelled question (routing/features.py).

In:  the labels and what each family reads (base run, units, dense ranking; questions; closed-book answers; the
     BM25 probe); params: the pair (its `features`).
Out: results/<dataset>/routing/<pair>/features.parquet: qid and exactly the columns of those families
     (features.family_columns).
"""

from typing import Any

from workflow_scripts.core.contracts import FEATURES
from workflow_scripts.core.tables import write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.routing import protocol
from workflow_scripts.routing.features import family_columns


def main(smk: Any) -> None:
    families = smk.params.pair["features"]
    inputs = {key: str(path) for key, path in smk.input.items()}
    table = protocol.feature_table(families, inputs)
    # the contract is the configured families' columns, so a column missing or extra is a contract error
    write_table(table, smk.output.features, FEATURES.select("qid", *family_columns(families)))


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
