"""Rule import_run (per dataset and retrieval.runs entry): a TREC run made elsewhere as a first-stage ranking
(retrieval/runs.py).

In:  the run file (retrieval.runs.<name>.path, {dataset} replaced), the dataset's questions and units.
Out: results/<dataset>/first_stage/run_<name>.parquet (RANKING).
"""

import logging
from pathlib import Path
from typing import Any

from workflow_scripts.core.contracts import QUESTIONS, RANKING, UNITS
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.retrieval.runs import import_run

log = logging.getLogger("ragfrontier.runs")


def main(smk: Any) -> None:
    questions = read_table(smk.input.questions, QUESTIONS, columns=["qid"])
    units = read_table(smk.input.units, UNITS, columns=["unit_id"])
    ranking = import_run(Path(smk.input.run), questions, units)
    write_table(ranking, smk.output.ranking, RANKING)
    log.info("%s: run %s, %d rows for %d questions", smk.wildcards.dataset, smk.wildcards.run, ranking.height,
             ranking["qid"].n_unique())


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
