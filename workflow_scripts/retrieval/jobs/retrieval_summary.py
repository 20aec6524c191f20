"""Rule retrieval_summary (per dataset): every arm's metric summary in one table (retrieval/evaluate.py).

In:  every arm's summary (METRICS_SUMMARY); params: whether the per-split rows are kept (the runs feed routing or
     answers).
Out: results/<dataset>/metrics/summary.csv and summary.md.
"""

from typing import Any

from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.core.contracts import METRICS_SUMMARY, metrics_summary_report
from workflow_scripts.core.tables import read_table, write_report
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.retrieval.evaluate import markdown, summary_table


def main(smk: Any) -> None:
    summaries = [read_table(path, METRICS_SUMMARY) for path in smk.input]
    table = summary_table(summaries, smk.params.by_split)
    measures = sorted(set().union(*(summary["measure"] for summary in summaries)))  # what the arms measured
    write_report(table, smk.output.csv, metrics_summary_report(measures), float_precision=6)
    write_text_atomic(markdown(table), smk.output.markdown)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
