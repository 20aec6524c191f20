"""Rule review_agreement (per dataset and judge): the reviewed sheet → judge–human agreement, corrected means and
PPI estimates (judging/review.py).

In:  the reviewed sheet named in review.reviewed, and what review_export read; params: as review_export's, plus
     review.ppi_min_reviewed and judging.scoring.
Out: results/<dataset>/review/<judge>_agreement.csv.
"""

from pathlib import Path
from typing import Any

from workflow_scripts.core.contracts import REVIEW_AGREEMENT
from workflow_scripts.core.tables import write_report
from workflow_scripts.jobs.review import judged_items_of
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.judging import review


def main(smk: Any) -> None:
    judge = smk.wildcards.judge
    items = judged_items_of(smk, judge)
    table = review.judge_agreement(judge, items, Path(smk.input.reviewed), smk.params.per_stratum, smk.params.seed,
                                   smk.params.ppi_min_reviewed, smk.params.scoring)
    write_report(table, Path(smk.output.agreement), REVIEW_AGREEMENT)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
