"""Rule answer_summary (per dataset): the policies' judged quality side by side, and their paired differences.

In:  every policy's answers and two judgment tables, and the splits; params: the policies, judging.scoring,
     routing.bootstrap and routing.seed.
Out: results/<dataset>/answers/summary.csv and comparisons.csv (COMPARISONS).
"""

from typing import Any

from workflow_scripts.answers import answering
from workflow_scripts.core.contracts import (
    ANSWER_SUMMARY,
    COMPARISONS,
    GENERATIONS,
    JUDGMENTS_GROUNDED,
    JUDGMENTS_QUALITY,
    SPLITS,
)
from workflow_scripts.core.tables import read_table, write_report
from workflow_scripts.jobs.runtime import run_job


def main(smk: Any) -> None:
    policies = list(smk.params.policies)
    grounded = [read_table(path, JUDGMENTS_GROUNDED) for path in smk.input.grounded]
    quality = [read_table(path, JUDGMENTS_QUALITY) for path in smk.input.quality]
    table = answering.policy_table(policies, grounded, quality, smk.params.scoring)
    answers = {policy: read_table(path, GENERATIONS, columns=["status", "error"])
               for policy, path in zip(policies, smk.input.answers, strict=True)}
    write_report(answering.summarize(table, policies, answers), smk.output.summary, ANSWER_SUMMARY, float_precision=4)
    splits = read_table(smk.input.splits, SPLITS)
    paired = answering.comparisons(table, policies, splits, smk.params.bootstrap, smk.params.seed)
    write_report(paired, smk.output.comparisons, COMPARISONS, float_precision=4)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
