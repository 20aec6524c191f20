"""Rule evaluate_arm (per dataset and arm): the arm's per-query metrics and their summary (retrieval/evaluate.py).

In:  the arm's run, the qrels and splits; params: the measures (ir-measures syntax).
Out: results/<dataset>/metrics/<arm>.parquet (per query) and <arm>_summary.parquet (per split and overall).
"""

from typing import Any

from workflow_scripts.core.contracts import METRICS, METRICS_SUMMARY, QRELS, RUNS, SPLITS
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.retrieval.evaluate import evaluate_arm


def main(smk: Any) -> None:
    metrics, summary = evaluate_arm(read_table(smk.input.run, RUNS), read_table(smk.input.qrels, QRELS),
                                    read_table(smk.input.splits, SPLITS), smk.params.measures, smk.wildcards.arm)
    write_table(metrics, smk.output.metrics, METRICS)
    write_table(summary, smk.output.summary, METRICS_SUMMARY)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
