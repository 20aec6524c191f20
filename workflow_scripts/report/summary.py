"""The run's summary: findings first, then the tables.

In:  per dataset, the run's tables and stage reports as `Shown` entries (the summary job reads each through its
     contract): its routing pair ("" for a dataset-wide one), where it lives, its contract (or, for a JSON or
     Markdown report, its Document: title, one line saying what it is, the columns the landing page keeps), and its
     content (a table, or a stage's Markdown quoted as it is); the run's `name`.
Out:
- results/summary_<name>.md (`summary_text`): the run's findings (report/findings.py `landing`: at most about a
  dozen lines, most informative first), then per dataset the tables a reader needs, each with one line saying what
  it is and trimmed to its headline columns (the CSV beside it keeps all), and a link to the dataset's page;
- results/summary_<name>/<dataset>.md (`dataset_text`): every finding of the dataset (each routing pair, judged
  comparison and Study C strategy), then every table in full, the long per-budget, per-router and cost tables
  included.

Plain functions of tables and values: nothing here opens a file (the `summary` rule's job, report/jobs/summary.py,
reads the tables and writes what these return), and nothing here composes a finding (report/findings.py does, from
the tables by their contracts' names). Cell text is HTML-escaped (it can hold corpus text or model output, and the
report renders it as HTML).
"""

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from workflow_scripts.core.tables import Contract, Document
from workflow_scripts.report.findings import Finding, dataset_findings, landing


def cell(value: Any) -> str:
    """One Markdown table cell: numbers to 4 significant decimals, text HTML-escaped, pipes and newlines removed."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value), quote=False).replace("|", "&#124;").replace("\n", " ")


def markdown_table(table: pl.DataFrame) -> str:
    header = "| " + " | ".join(cell(name) for name in table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    rows = ["| " + " | ".join(cell(value) for value in row) + " |" for row in table.iter_rows()]
    return "\n".join([header, rule, *rows])


def flat_items(report: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """A JSON report's leaves as (dotted key, value) rows; a list is one value, its items comma-separated."""
    rows = []
    for key, value in report.items():
        if isinstance(value, dict):
            rows += flat_items(value, f"{prefix}{key}.")
        else:
            rows.append((f"{prefix}{key}", ", ".join(map(str, value)) if isinstance(value, list) else str(value)))
    return rows


def report_table(report: dict[str, Any]) -> pl.DataFrame:
    """A JSON report as a key / value table."""
    rows = flat_items(report)
    return pl.DataFrame({"key": [key for key, _ in rows], "value": [value for _, value in rows]})


@dataclass(frozen=True)
class Shown:
    """One table or stage report of a dataset, as the summary shows it (see the module docstring)."""

    pair: str
    path: str
    spec: Contract | Document
    content: pl.DataFrame | str


def section_title(entry: Shown) -> str:
    return f"{entry.spec.title} — {entry.pair}" if entry.pair else entry.spec.title


# --- the pages


def table_lines(entry: Shown, full: bool) -> list[str]:
    """One table's section: title, what it is, where it lives, and the table (trimmed on the landing page)."""
    lines = [f"### {cell(section_title(entry))}", "", entry.spec.about, "", f"`{entry.path}`", ""]
    if isinstance(entry.content, str):  # a stage's own Markdown tables (Study C, judge validation), quoted as they are
        return lines + [entry.content, ""]
    table = entry.content
    if not full and entry.spec.landing:
        table = table.select([name for name in entry.spec.landing if name in table.columns])
    return lines + [f"n = {table.height} rows" if table.height else "(no rows)", "",
                    *([markdown_table(table), ""] if table.height else [])]


def on_landing(entry: Shown) -> bool:
    return entry.spec.landing != ()


def dataset_page(name: str, dataset: str) -> str:
    """The dataset's page, relative to results/ (where summary_<name>.md lies)."""
    return f"summary_{name}/{dataset}.md"


NO_FINDINGS = (
    "No routing pair, judged comparison, Study C table or configured reference (evaluation.references) to read."
)
ABOUT_FINDINGS = (
    "Generated from the tables (CIs from a bootstrap over groups — papers or question contexts; p from a "
    "paired permutation test, read together with the CI; judged differences only where the judge passed "
    "its validation)."
)


def findings_of(entries: Sequence[Shown], settings: Mapping[str, Any]) -> list[Finding]:
    """A dataset's findings (report/findings.py) from its entries' tables, by contract name and pair; `settings`:
    the router kinds, generation.partial_error_share and evaluation.references."""
    tables: dict[str, dict[str, Any]] = {}
    for entry in entries:
        tables.setdefault(entry.spec.name, {})[entry.pair] = entry.content
    return dataset_findings(tables, settings["kinds"], settings["partial_share"], settings["references"])


def all_findings(shown: Mapping[str, Sequence[Shown]], settings: Mapping[str, Any]) -> dict[str, list[Finding]]:
    """Dataset → its findings, for each dataset with a table to show."""
    return {dataset: findings_of(entries, settings) for dataset, entries in shown.items() if entries}


def landing_lines(shown: Mapping[str, Sequence[Shown]], settings: Mapping[str, Any]) -> list[str]:
    """The landing page's findings (report/findings.landing), or the one line saying there is nothing to read."""
    return landing(all_findings(shown, settings)) or [NO_FINDINGS]


def findings_rst(shown: Mapping[str, Sequence[Shown]], settings: Mapping[str, Any]) -> str:
    """The findings in reStructuredText, for the landing page of `snakemake --report` (report/workflow.rst)."""
    lines = [ABOUT_FINDINGS, ""] + [f"- {line.replace('`', '``')}" for line in landing_lines(shown, settings)]
    return "\n".join(lines + [""])


def summary_text(shown: Mapping[str, Sequence[Shown]], name: str, settings: Mapping[str, Any]) -> str:
    """results/summary_<name>.md: the run's findings, then per dataset its headline tables."""
    lines = [f"# ragfrontier results: {cell(name)}", "", "## Findings", "", ABOUT_FINDINGS, ""]
    lines += [f"- {cell(line)}" for line in landing_lines(shown, settings)] + [""]
    for dataset, entries in shown.items():
        if not entries:
            continue
        lines += [f"## {cell(dataset)}", "",
                  f"Every finding and every table of this dataset in full, the per-pair, per-budget, per-router and "
                  f"cost tables included: [{dataset_page(name, dataset)}]({dataset_page(name, dataset)}). Cost "
                  "columns are measured wall seconds and token-equivalents priced by `costs.prices`.", ""]
        for entry in entries:
            if on_landing(entry):
                lines += table_lines(entry, full=False)
    return "\n".join(lines)


def dataset_text(entries: Sequence[Shown], dataset: str, name: str, settings: Mapping[str, Any]) -> str:
    """results/summary_<name>/<dataset>.md: every finding of the dataset, then every table in full."""
    found = findings_of(entries, settings)
    lines = [f"# ragfrontier results: {cell(name)} — {cell(dataset)}", "",
             f"Every finding and table of the dataset in full (the run's findings: "
             f"[summary_{name}.md](../summary_{name}.md)). Cost columns are measured wall seconds and "
             "token-equivalents priced by `costs.prices`.", "", "## Findings", "", ABOUT_FINDINGS, ""]
    lines += [f"- {cell(finding.text)}" for finding in found] or [f"- {NO_FINDINGS}"]
    lines += ["", "## Tables", ""]
    for entry in entries:
        lines += table_lines(entry, full=True)
    return "\n".join(lines)
