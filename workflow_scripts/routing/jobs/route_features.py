"""Rule route_features: the pair's configured feature families per labelled question (routing/features.py).

In:  the labels and what each family reads (base run, units, dense ranking; questions; closed-book answers; the
     BM25 probe); params: the pair (its `features`).
Out: results/<dataset>/routing/<pair>/features.parquet.
"""

from typing import Any

from workflow_scripts.core.contracts import FEATURES
from workflow_scripts.core.tables import write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.routing import protocol


def main(smk: Any) -> None:
    inputs = {key: str(path) for key, path in smk.input.items()}
    table = protocol.feature_table(smk.params.pair["features"], inputs)
    write_table(table, smk.output.features, FEATURES.select(*table.columns))


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
