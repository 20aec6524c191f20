"""Rule review_export (per dataset): a blind, stratified review sheet per judge (judging/review.py).

In:  the questions, units, every policy's answers, runs and both judges' judgments; params: the policies, their runs,
     review.per_stratum and review.seed.
Out: results/<dataset>/review/grounded_sample.csv and quality_sample.csv.
"""

from pathlib import Path
from typing import Any

from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.judging import review


def main(smk: Any) -> None:
    for judge in review.JUDGES:
        items = review.judged_items(judge, smk.input.questions, smk.params.policies, smk.input[judge],
                                    smk.input.answers, smk.params.runs, smk.input.units)
        review.export_sheet(judge, items, Path(smk.output[judge]), smk.params.per_stratum, smk.params.seed)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
