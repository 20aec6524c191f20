"""Rule summary: results/summary_<name>.md (report/summary.py).

In:  every table and stage report the summary shows (retrieval metrics, answers, routing policies, comparisons,
     frontiers, audit, measured cost per stage, per policy and with / without reuse, Study C's tables and its own
     Markdown, the judge validation's report, the generated-questions report); params: `tables`, per input in
     order its dataset, routing pair and contract (or Document), routing.routers (their kinds),
     generation.partial_error_share, evaluation.references, the datasets and `name`.
Out: results/summary_<name>.md (config `name`, one per study config): generated findings, then the headline tables;
     results/summary_<name>/<dataset>.md: every table of the dataset in full; results/summary_<name>/findings.rst:
     the findings for the landing page of `snakemake --report` (report/workflow.rst includes it).
"""

import json
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.config.validate import measure_name
from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.core.contracts import METRICS_SUMMARY_REPORT, metrics_summary_report
from workflow_scripts.core.tables import Contract, Document, read_report, read_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.report.summary import Shown, dataset_text, findings_rst, report_table, summary_text

def content(path: str, spec: Contract | Document) -> pl.DataFrame | str:
    """The table at `path` read through its contract, or a stage report: JSON as a key / value table, Markdown as
    its text. The retrieval metrics' contract has a column per measure the arms measured (the file's header)."""
    if isinstance(spec, Document):
        text = Path(path).read_text(encoding="utf-8")
        return report_table(json.loads(text)) if path.endswith(".json") else text
    if path.endswith(".parquet"):
        return read_table(path, spec)
    if spec.name == METRICS_SUMMARY_REPORT:
        fixed = set(metrics_summary_report(()).columns)
        spec = metrics_summary_report([name for name in pl.read_csv(path, n_rows=0).columns if name not in fixed])
    return read_report(path, spec)


def canonical(measures: dict[str, float]) -> dict[str, float]:
    """Reference values keyed by the measure's name as ir-measures writes it (the metrics table's columns)."""
    return {measure_name(measure): value for measure, value in measures.items()}


def main(smk: Any) -> None:
    name, datasets = smk.params.name, smk.params.datasets
    settings = {"kinds": {router: spec.get("kind", router) for router, spec in smk.params.routers.items()},
                "partial_share": smk.params.partial_error_share,
                "references": {key: {**spec, "measures": canonical(spec["measures"])}
                               for key, spec in smk.params.references.items()}}
    shown: dict[str, list[Shown]] = {dataset: [] for dataset in datasets}
    for entry, path in zip(smk.params.tables, smk.input, strict=True):
        shown[entry["dataset"]].append(Shown(entry["pair"], path, entry["spec"], content(path, entry["spec"])))
    for dataset, page in zip(datasets, smk.output.pages, strict=True):
        write_text_atomic(dataset_text(shown[dataset], dataset, name, settings), page)
    write_text_atomic(findings_rst(shown, settings), smk.output.findings)
    write_text_atomic(summary_text(shown, name, settings), smk.output.summary)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
