"""The run's summary: findings first, then the tables.

In:  per dataset, the run's tables and stage reports as `Shown` entries (the summary job reads each through its
     contract): its routing pair ("" for a dataset-wide one), where it lives, its contract (or, for a JSON or
     Markdown report, its Document: title, one line saying what it is, the columns the landing page keeps), and its
     content (a table, or a stage's Markdown quoted as it is); the run's `name`.
Out:
- results/summary_<name>.md (`summary_text`): a "Findings" section of sentences generated from the tables (per
  routing pair: what always switching rescues and harms, each router's held-out result vs always-on and vs off with
  its CI and p, realized vs target usage at the budgets; per judged comparison: the difference, CI and n, flagged
  when the judge gave every answer the same score or the CI includes 0; per Study C strategy: Hit@3 and the
  judged overall score vs classic), then per dataset the tables a reader needs, each with one line saying what it
  is and trimmed to its headline columns (the CSV beside it keeps all), and a link to the dataset's page;
- results/summary_<name>/<dataset>.md (`dataset_text`): every table of the dataset in full, the long per-budget,
  per-router and cost tables included.

Plain functions of tables and values: nothing here opens a file (the `summary` rule's job, report/jobs/summary.py,
reads the tables and writes what these return). A finding looks its tables up by their contracts' names; cell
text is HTML-escaped (it can hold corpus text or model output, and the report renders it as HTML).
"""

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import (
    ANSWER_SUMMARY,
    COMPARISONS,
    FRONTIERS,
    JUDGE_VERDICT,
    REFERENCE_COMPARISONS,
    ROUTER_COMPARISONS,
    ROUTER_POLICIES,
    STUDY_C_PAIRED,
    STUDY_C_PAIRED_RETRIEVAL,
    STUDY_C_QUALITY,
    UTILITY_REPORT,
)
from workflow_scripts.core.tables import Contract, Document
from workflow_scripts.core.vocabulary import FRONTIER_RULES


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


# --- findings: sentences generated from the tables


def number(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def signed(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:+.{digits}f}"


def p_value(value: Any) -> str:
    return "n/a" if value is None else f"{value:.2g}"


def interval(row: dict[str, Any], estimate: str = "estimate") -> str:
    """"Δ +0.012 (95% CI −0.03 to +0.05, p = 0.6)", then what the two tests say together: "the CI includes 0" when
    both find nothing, a plain "the two tests disagree" when the interval and the permutation p fall on different
    sides of the level (docs/statistics.md), and the smallest p the groups allow when it is above the level."""
    low, high, p = row.get("low"), row.get("high"), row.get("p_permutation")
    confidence = row.get("confidence") or 0.95
    alpha = 1 - confidence
    text = (f"Δ {signed(row[estimate])} ({round(100 * confidence)}% CI {signed(low)} to {signed(high)}, "
            f"p = {p_value(p)})")
    if low is not None and high is not None:
        outside = excludes_zero(row) != 0
        if not outside and (p is None or p >= alpha):
            text += ", the CI includes 0"
        elif outside and p is not None and p >= alpha:
            text += f", the CI excludes 0 but p ≥ {alpha:.2g}: the two tests disagree"
        elif not outside:
            text += f", the CI includes 0 but p < {alpha:.2g}: the two tests disagree"
    floor, groups = row.get("p_floor"), row.get("n_groups", row.get("papers"))
    if floor is not None and floor >= alpha:
        text += f"; with {groups} groups p cannot fall below {p_value(floor)}"
    return text


def excludes_zero(row: dict[str, Any]) -> int:
    """+1 when the CI lies above 0, −1 below, 0 when it includes 0 (or is missing)."""
    low, high = row.get("low"), row.get("high")
    return 0 if low is None or high is None else 1 if low > 0 else -1 if high < 0 else 0


def routing_findings(pair: str, utility: pl.DataFrame, policies: pl.DataFrame, comparisons: pl.DataFrame,
                     frontiers: pl.DataFrame | None) -> list[str]:
    """Per routing pair: what always switching does on held-out; the router with the best held-out utility vs
    always-on and off with CIs, and how many others beat them; the budgets' realized vs target usage."""
    rows = {row["split"]: row for row in utility.iter_rows(named=True)}
    held = rows.get("heldout") or rows["all"]
    where = "held-out" if "heldout" in rows else "all"
    sentences = [
        f"Pair `{pair}` ({held['measure']}): on {held['n']} {where} questions, always switching rescues "
        f"{held['gains']}, harms {held['harms']} and ties {held['ties']}; mean {number(held['mean_off'])} off → "
        f"{number(held['mean_on'])} always on."
        + (" Every question has the same label: there is nothing for a router to learn." if held["signal_absent"]
           else "")]
    adaptive = policies.filter((pl.col("trigger_rate") > 0) & (pl.col("trigger_rate") < 1))  # routers that choose
    candidates = adaptive if adaptive.height else policies
    if candidates.height:
        best = candidates.sort("utility", descending=True, maintain_order=True).row(0, named=True)
        mine = comparisons.filter(pl.col("router") == best["router"])
        names = {"always_on": "always-on", "off": "off"}
        versus = "; ".join(f"vs {names.get(other['b'], other['b'])} {interval(other)}"
                           for other in mine.iter_rows(named=True))
        cost = best["cost_per_trigger"]
        sentences.append(
            f"Best held-out utility (metric − c × trigger, c = {cost:g}): router `{best['router']}`, "
            f"{number(best['utility'])} vs {number(best['always_on'] - cost)} always switching and "
            f"{number(best['off'])} never, firing on {100 * best['trigger_rate']:.0f}% of {best['questions']} "
            f"questions ({best['rescues']} rescues, {best['harms']} harms); its metric {number(best['adaptive'])} vs "
            f"always-on {number(best['always_on'])} and off {number(best['off'])}"
            + (f" ({versus}; n = {mine['n'][0]} in {mine['n_groups'][0]} groups)." if mine.height else "."))
        others = comparisons.filter(pl.col("router").is_in(adaptive["router"].implode())
                                    & (pl.col("router") != best["router"]))
        if others.height:
            counts = []
            for other in ("always_on", "off"):
                signs = [excludes_zero(row) for row in others.filter(pl.col("b") == other).iter_rows(named=True)]
                counts.append(f"{signs.count(1)} above and {signs.count(-1)} below {names[other]}")
            count = others["router"].n_unique()
            sentences.append(f"Of the {count} other router{'s' if count > 1 else ''} that choose{'' if count > 1 else 's'}, "
                             f"with the CI excluding 0: " + "; ".join(counts) + ".")
    if frontiers is not None and frontiers.height:
        budgets = sorted(frontiers["budget"].unique().to_list())
        parts = []
        for rule in FRONTIER_RULES:
            table = frontiers.filter(pl.col("frontier") == rule).with_columns((pl.col("usage") - pl.col("budget")).alias("excess"))
            if not table.height:
                continue
            worst = table.sort("excess", descending=True, maintain_order=True).row(0, named=True)
            parts.append(f"{rule} thresholds exceed ρ at {table.filter(pl.col('excess') > 0).height} of "
                         f"{table.height} router × budget points (largest usage − ρ {signed(worst['excess'], 2)}, "
                         f"`{worst['router']}` at ρ = {worst['budget']:g})")
        if parts:
            sentences.append(f"Realized held-out usage vs target ρ ∈ [{budgets[0]:g}, {budgets[-1]:g}]: "
                             + "; ".join(parts) + ".")
    return sentences


MEASURE_NAMES = {"auroc": "AUROC", "spearman": "Spearman ρ", "kappa": "Cohen's κ"}


def verdict_text(verdict: dict[str, Any]) -> str:
    """"AUROC 0.433 (95% CI 0.391 to 0.474) against `contains`; validated when the CI's lower end is above 0.5"."""
    return (f"{MEASURE_NAMES.get(verdict['measure'], verdict['measure'])} {number(verdict['estimate'])} (CI "
            f"{number(verdict['low'])} to {number(verdict['high'])}) against the `{verdict['reference']}` label; "
            f"validated when the CI's lower end is above {verdict['above']:g}")


def failures(summary: pl.DataFrame, row: Mapping[str, Any], partial_share: float) -> str:
    """"; partial: 7 of 17 answers' requests failed (answers or judgments; most common: 5× HTTP 400 …)" when the
    two policies' failed requests exceed `partial_share` of their answers (generation.partial_error_share)."""
    if "answer_errors" not in summary.columns:
        return ""
    sides = summary.filter(pl.col("policy").is_in([row["a"], row["b"]]))
    failed = int(sides["answer_errors"].sum() + sides["judge_errors"].sum())
    answers = int(sides["answers"].sum())
    if not failed or failed <= partial_share * answers:
        return ""
    causes = ", ".join(cause for cause in sides["error_cause"].drop_nulls().to_list())
    return (f"; partial: {failed} requests of {answers} answers failed (answers never judged, or judgments that "
            f"errored; most common: {causes}) and are not in n")


def judged_findings(summary: pl.DataFrame, comparisons: pl.DataFrame, verdict: pl.DataFrame | None = None,
                    reference: pl.DataFrame | None = None, partial_share: float = 0.0) -> list[str]:
    """Per judged comparison: the difference with its CI and n, gated by the judge's validation on the dataset
    (`verdict`, judging.validate.gate): a validated judge's differences are findings; a failed judge's are not, and
    the reference label's paired difference (`reference`) stands in their place; with no validation the lines say
    once that the judge is not validated on this data. Flagged when the judge gave constant scores."""
    distinct = dict(zip(summary["policy"], summary["distinct_correctness"])) if "distinct_correctness" in summary.columns else {}
    gate = verdict.row(0, named=True) if verdict is not None and verdict.height else None
    if gate is not None and not gate["validated"]:
        sentences = [f"The judge failed validation here: {verdict_text(gate)}. Its judged differences are not findings; "
                     f"the reference label's stand in their place."]
        judged = {(row["a"], row["b"]): row for row in comparisons.iter_rows(named=True)}
        for row in (reference if reference is not None else comparisons.clear()).iter_rows(named=True):
            other = judged.get((row["a"], row["b"]))
            sentences.append(
                f"Reference label (`{gate['reference']}`) {row['a']} − {row['b']}: {interval(row)}, n = {row['n']} "
                f"questions in {row['n_groups']} groups{failures(summary, row, partial_share)}"
                + (f" (the failed judge's Δ {signed(other['estimate'])} is not a finding)." if other else "."))
        return sentences
    sentences = []
    for row in comparisons.iter_rows(named=True):
        constant = distinct.get(row["a"]) == 1 and distinct.get(row["b"]) == 1
        sentences.append(
            f"Judged correctness {row['a']} − {row['b']}: {interval(row)}, n = {row['n']} questions in "
            f"{row['n_groups']} groups{failures(summary, row, partial_share)}"
            + (". The judge gave every answer the same correctness score, so this difference carries no "
               "information." if constant else "."))
    if not comparisons.height and summary.height > 1:
        sentences.append("No question was judged under every policy: no paired comparison of judged answers.")
    if comparisons.height:
        sentences.append(f"The judge is validated here: {verdict_text(gate)}." if gate is not None else
                         "The judge is not validated on this data (no judging.validate against reference answers): "
                         "judged differences are the judge's, not established correctness.")
    return sentences


def study_c_findings(paired_retrieval: pl.DataFrame, paired: pl.DataFrame, quality: pl.DataFrame) -> list[str]:
    """Per Study C strategy (all queries): Hit@3 and the judged overall score vs classic with CIs."""
    judged = {row["strategy"]: row for row in paired.filter(pl.col("query_type") == "all").iter_rows(named=True)}
    distinct = quality.filter(pl.col("query_type") == "all")
    constant = bool(distinct.height) and distinct["distinct_overall"].max() <= 1
    sentences = []
    for row in paired_retrieval.filter(pl.col("query_type") == "all").iter_rows(named=True):
        overall = judged.get(row["strategy"])
        text = (f"Study C `{row['strategy']}` vs classic: Hit@3 over {row['queries']} queries of {row['papers']} "
                f"papers {interval(row, 'delta')}")
        if overall is not None:
            text += f"; judged overall (1–5) over {overall['queries']} judged queries {interval(overall, 'delta')}"
        sentences.append(text + ".")
    if constant:
        sentences.append("The quality judge gave every Study C answer the same overall score: its differences carry no "
                         "information; read Hit@3.")
    elif judged:
        sentences.append("The quality judge is not validated on this data (Study C's queries have no reference "
                         "answers): its judged differences are the judge's; Hit@3 of the source paper is judge-free.")
    return sentences


def findings(entries: Sequence[Shown], partial_share: float = 0.0) -> list[str]:
    """The findings of one dataset, from its tables (a table that is missing: no sentence)."""
    mine: dict[str, dict[str, Any]] = {}
    for entry in entries:
        mine.setdefault(entry.spec.name, {})[entry.pair] = entry.content
    sentences = []
    for pair, utility in mine.get(UTILITY_REPORT.name, {}).items():
        if pair in mine.get(ROUTER_POLICIES.name, {}) and pair in mine.get(ROUTER_COMPARISONS.name, {}):
            sentences += routing_findings(pair, utility, mine[ROUTER_POLICIES.name][pair],
                                          mine[ROUTER_COMPARISONS.name][pair], mine.get(FRONTIERS.name, {}).get(pair))
    if COMPARISONS.name in mine and ANSWER_SUMMARY.name in mine:
        sentences += judged_findings(mine[ANSWER_SUMMARY.name][""], mine[COMPARISONS.name][""],
                                     mine.get(JUDGE_VERDICT.name, {}).get(""),
                                     mine.get(REFERENCE_COMPARISONS.name, {}).get(""), partial_share)
    study_c = (STUDY_C_PAIRED_RETRIEVAL.name, STUDY_C_PAIRED.name, STUDY_C_QUALITY.name)
    if all(name in mine for name in study_c):
        sentences += study_c_findings(*(mine[name][""] for name in study_c))
    return sentences


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


NO_FINDINGS = "No routing pair, judged comparison or Study C table to read."
ABOUT_FINDINGS = ("Generated from the tables (CIs from a bootstrap over groups — papers or question contexts; p from a "
                  "paired permutation test).")


def all_findings(shown: Mapping[str, Sequence[Shown]], partial_share: float = 0.0) -> dict[str, list[str]]:
    """Dataset → its findings, for each dataset with a table to show."""
    return {dataset: findings(entries, partial_share) or [NO_FINDINGS] for dataset, entries in shown.items() if entries}


def findings_rst(shown: Mapping[str, Sequence[Shown]], partial_share: float = 0.0) -> str:
    """The findings in reStructuredText, for the landing page of `snakemake --report` (report/workflow.rst)."""
    lines = [ABOUT_FINDINGS, ""]
    for dataset, sentences in all_findings(shown, partial_share).items():
        lines += [f"**{dataset}**", ""] + [f"- {sentence.replace('`', '``')}" for sentence in sentences] + [""]
    return "\n".join(lines)


def summary_text(shown: Mapping[str, Sequence[Shown]], name: str, partial_share: float = 0.0) -> str:
    """results/summary_<name>.md: findings per dataset, then per dataset its headline tables."""
    by_dataset = all_findings(shown, partial_share)
    lines = [f"# ragfrontier results: {cell(name)}", "", "## Findings", "", ABOUT_FINDINGS, ""]
    for dataset, sentences in by_dataset.items():
        lines += [f"**{cell(dataset)}**", ""] + [f"- {cell(sentence)}" for sentence in sentences] + [""]
    for dataset in by_dataset:
        lines += [f"## {cell(dataset)}", "",
                  f"Every table of this dataset in full, the per-budget, per-router and cost tables included: "
                  f"[{dataset_page(name, dataset)}]({dataset_page(name, dataset)}). Cost columns are measured wall "
                  "seconds and token-equivalents priced by `costs.prices`.", ""]
        for entry in shown[dataset]:
            if on_landing(entry):
                lines += table_lines(entry, full=False)
    return "\n".join(lines)


def dataset_text(entries: Sequence[Shown], dataset: str, name: str) -> str:
    """results/summary_<name>/<dataset>.md: every table of the dataset in full."""
    lines = [f"# ragfrontier results: {cell(name)} — {cell(dataset)}", "",
             f"Every table of the dataset in full (the findings: [summary_{name}.md](../summary_{name}.md)). Cost "
             "columns are measured wall seconds and token-equivalents priced by `costs.prices`.", ""]
    for entry in entries:
        lines += table_lines(entry, full=True)
    return "\n".join(lines)
