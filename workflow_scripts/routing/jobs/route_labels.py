"""Rule route_labels: the pair's labels and utility distribution (routing/labels.py).

In:  the two sides' per-query metrics (Study A) or answers and the questions (Study B, two imported systems), the
     splits; params: the pair and whether its labels come from answers.
Out: results/<dataset>/routing/<pair>/labels.parquet (LABELS) and utility.csv.
"""

import logging
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import GENERATIONS, LABELS, METRICS, QUESTIONS, SPLITS, UTILITY_REPORT
from workflow_scripts.core.tables import read_table, write_report, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.routing.labels import answer_labels, arm_labels, outcome_summary, utility_table

log = logging.getLogger("ragfrontier.route")


def main(smk: Any) -> None:
    pair = smk.params.pair
    if smk.params.from_answers:
        labels, model, unscorable = answer_labels(
            read_table(smk.input.questions, QUESTIONS), read_table(smk.input.base, GENERATIONS),
            read_table(smk.input.alternative, GENERATIONS), pair["measure"], pair["f1_threshold"])
    else:
        labels = arm_labels(read_table(smk.input.base, METRICS), read_table(smk.input.alternative, METRICS),
                            pair["measure"], (pair["base"], pair["alternative"]))
        model, unscorable = None, 0
    write_table(labels, smk.output.labels, LABELS)
    utility = utility_table(labels, read_table(smk.input.splits, SPLITS), smk.wildcards.dataset, smk.wildcards.pair,
                            pair["measure"], model, unscorable)
    utility = write_report(utility, smk.output.utility, UTILITY_REPORT, float_precision=6)
    log_labels(labels, utility, unscorable)


def log_labels(labels: pl.DataFrame, utility: pl.DataFrame, unscorable: int) -> None:
    """What a reader of the job's log needs about the labels: questions left out, a label without signal."""
    if unscorable:
        log.warning("labels: %d questions have no reference answers and are left out", unscorable)
    if utility["signal_absent"][0]:
        log.warning("labels: every question has the same label (%s): the routers run, but there is no signal "
                    "to learn and every learned router scores all questions alike", labels["outcome"][0])
    log.info("labels: %s", outcome_summary(labels).to_dicts())


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
