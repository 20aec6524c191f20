"""Rule review_export (per dataset): a blind, stratified review sheet per judge (judging/review.py).

In:  the questions, units, every policy's answers, runs and both judges' judgments; params: the policies, their runs,
     review.per_stratum and review.seed.
Out: results/<dataset>/review/grounded_sample.csv and quality_sample.csv.
"""

from typing import Any

from workflow_scripts.core.contracts import REVIEW_SHEETS
from workflow_scripts.core.tables import write_report
from workflow_scripts.jobs.review import judged_items_of
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.judging import review


def main(smk: Any) -> None:
    for judge in review.JUDGES:
        sheet = review.export_sheet(judge, judged_items_of(smk, judge), smk.params.per_stratum, smk.params.seed)
        write_report(sheet, smk.output[judge], REVIEW_SHEETS[judge])


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
