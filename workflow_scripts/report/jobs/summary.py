"""Rule summary: results/summary_<name>.md (report/summary.py).

In:  the CSV and Parquet tables the studies produce (retrieval metrics, answers, routing policies, comparisons,
     audit, measured cost per stage, per policy and with / without reuse), per dataset, Study C's own Markdown
     tables (study_c/tables/report.md) when Study C runs, the judge validation's report, and the
     generated-questions report (JSON) of a dataset with `generate_questions`; params: the datasets and `name`.
Out: results/summary_<name>.md (config `name`, one per study config): generated findings, then the headline tables;
     results/summary_<name>/<dataset>.md: every table of the dataset in full; results/summary_<name>/findings.rst:
     the findings for the landing page of `snakemake --report` (report/workflow.rst includes it).
"""

from typing import Any

from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.report.summary import dataset_text, findings_rst, summary_text


def main(smk: Any) -> None:
    paths, name = list(smk.input), smk.params.name
    for dataset, page in zip(smk.params.datasets, smk.output.pages, strict=True):
        write_text_atomic(dataset_text(paths, dataset, name), page)
    write_text_atomic(findings_rst(paths, smk.params.datasets), smk.output.findings)
    write_text_atomic(summary_text(paths, smk.params.datasets, name), smk.output.summary)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
