"""Rule splits (per dataset): every question to dev / calibration / heldout, grouped (ingest/splits.py).

In:  results/<dataset>/questions.parquet; params: splits.fractions and splits.seed.
Out: results/<dataset>/splits.parquet (SPLITS).
"""

import logging
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import QUESTIONS, SPLITS
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.ingest.splits import make_splits

log = logging.getLogger("ragfrontier.splits")


def main(smk: Any) -> None:
    splits = make_splits(read_table(smk.input.questions, QUESTIONS), smk.params.fractions, smk.params.seed)
    write_table(splits, smk.output.splits, SPLITS)
    summary = splits.group_by("split").agg(pl.len().alias("questions"), pl.col("group_id").n_unique().alias("groups"))
    log.info("%s splits: %s", smk.wildcards.dataset, summary.sort("split").to_dicts())


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
