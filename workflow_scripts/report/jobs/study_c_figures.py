"""Rule study_c_figures (per dataset, when `study_c` is configured): Study C's figures (report/figures.py).

In:  Study C's quality.csv, paired.csv and cost.csv (study_c/comparisons.py).
Out: results/<dataset>/report/study_c/{metrics,paired,cost}.png: per-metric bars, the paired-delta forest plot and
     cost per strategy, flagged for the report.
"""

from typing import Any

import polars as pl

from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.report import figures


def main(smk: Any) -> None:
    figures.study_c_metrics_figure(pl.read_csv(smk.input.quality), smk.output.metrics)
    figures.study_c_paired_figure(pl.read_csv(smk.input.paired), smk.output.paired)
    figures.study_c_cost_figure(pl.read_csv(smk.input.cost), smk.output.cost)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
