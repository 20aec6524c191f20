"""Rule compare_arms (per dataset with two or more arms): each arm against its own first stage, or else the first
arm, per measure, paired over the queries (retrieval/evaluate.py arm_comparisons).

In:  every arm's per-query metrics (METRICS) and the dataset's splits (SPLITS: the groups the bootstrap resamples);
     params: the arms in config order, the (arm, baseline) pairs (retrieval/arms.py comparison_baselines),
     routing.bootstrap and routing.seed (the same as every paired table's).
Out: results/<dataset>/metrics/paired.csv (ARM_COMPARISONS).
"""

from typing import Any

from workflow_scripts.core.contracts import ARM_COMPARISONS, METRICS, SPLITS
from workflow_scripts.core.tables import read_table, write_report
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.retrieval.evaluate import arm_comparisons


def main(smk: Any) -> None:
    metrics = {arm: read_table(path, METRICS) for arm, path in zip(smk.params.arms, smk.input.metrics)}
    pairs = [tuple(pair) for pair in smk.params.pairs]
    table = arm_comparisons(metrics, pairs, read_table(smk.input.splits, SPLITS), smk.params.bootstrap,
                            smk.params.seed)
    write_report(table, smk.output.csv, ARM_COMPARISONS, float_precision=6)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
