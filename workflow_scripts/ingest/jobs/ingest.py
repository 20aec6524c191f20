"""Rule ingest (per dataset): the raw files → units, questions, qrels and the ingest report (ingest/stage.py).

In:  params: the dataset's config entry; input: the generated questions, for a dataset with `generate_questions`.
Out: results/<dataset>/units.parquet, questions.parquet, qrels.parquet, ingest_report.json.
"""

import json
import logging
from typing import Any

from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.ingest.stage import ingest_dataset

log = logging.getLogger("ragfrontier.ingest")


def main(smk: Any) -> None:
    dataset = smk.wildcards.dataset
    summary = ingest_dataset(dataset, smk.params.spec, dict(smk.output.items()), smk.input.get("generated_questions"))
    log.info("%s: %s", dataset, json.dumps(summary))


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
