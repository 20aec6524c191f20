"""Rule answer_summary (per dataset): the policies' judged quality side by side, and their paired differences.

In:  every policy's two judgment tables and the splits; params: the policies, judging.scoring, routing.bootstrap
     and routing.seed.
Out: results/<dataset>/answers/summary.csv and comparisons.csv (COMPARISONS).
"""

from typing import Any

from workflow_scripts.answers import answering
from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.core.runtime import run_job


def main(smk: Any) -> None:
    policies = list(smk.params.policies)
    table = answering.policy_table(policies, smk.input.grounded, smk.input.quality, smk.params.scoring)
    write_text_atomic(answering.summarize(table, policies).write_csv(float_precision=4), smk.output.summary)
    paired = answering.comparisons(table, policies, smk.input.splits, smk.params.bootstrap, smk.params.seed)
    write_text_atomic(paired.write_csv(float_precision=4), smk.output.comparisons)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
