"""The run's summary: findings first, then the tables.

In:  the paths of the run's tables (CSV, Parquet, the generated-questions JSON, Study C's and the judge
     validation's Markdown), the datasets and the run's `name`.
Out:
- results/summary_<name>.md (`summary_text`): a "Findings" section of sentences generated from the tables (per
  routing pair: what always switching rescues and harms, each router's held-out result vs always-on and vs off with
  its CI and p, realized vs target usage at the budgets; per judged comparison: the difference, CI and n, flagged
  when the judge gave every answer the same score or the CI includes 0; per Study C strategy: Hit@3 and the
  judged overall score vs classic), then per dataset the tables a reader needs, each with one line saying what it
  is and trimmed to its headline columns (the CSV beside it keeps all), and a link to the dataset's page;
- results/summary_<name>/<dataset>.md (`dataset_text`): every table of the dataset in full, the long per-budget,
  per-router and cost tables included.

Plain functions of paths and tables; the `summary` rule's job (report/jobs/summary.py) writes what they return.
Cell text is HTML-escaped (it can hold corpus text or model output, and the report renders it as HTML). A table
is recognized by the end of its path (`TABLES`), the path itself being written once, in its rule's `output:`.
"""

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.vocabulary import FRONTIER_KINDS, FRONTIER_RULES


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


def read_any(path: str) -> pl.DataFrame:
    if path.endswith(".json"):
        rows = flat_items(json.loads(Path(path).read_text()))
        return pl.DataFrame({"key": [key for key, _ in rows], "value": [value for _, value in rows]})
    return pl.read_parquet(path) if path.endswith(".parquet") else pl.read_csv(path)


@dataclass(frozen=True)
class Table:
    """How the summary shows one kind of table: its title, one line saying what it is, and the columns the landing
    page keeps (None: every column; () : the table is on the dataset's page only)."""
    title: str
    about: str
    shown: tuple[str, ...] | None = None


TABLES = {
    "generated_questions_report.json": Table(
        "Generated questions", "Units sampled, questions kept and failures by cause of the question generator."),
    "metrics/summary.csv": Table(
        "Retrieval metrics", "Mean of each measure per arm and split (ir-measures; `n` queries)."),
    "cost/stages.csv": Table(
        "Measured cost per stage", "Ledger totals per stage (basis: item = measured per item, job_even = the job's "
        "benchmark seconds split evenly over its items; money at the LLM blocks' `prices`).", ()),
    "answers/summary.csv": Table(
        "Answers: judged quality per policy", "Judged answers per policy and the judges' mean scores; "
        "`distinct_*` counts the different scores the judge gave (1 = it gave every answer the same).",
        ("policy", "judged", "grounded_questions", "correctness", "faithfulness", "answer_rate",
         "overall_unconditional", "distinct_correctness", "distinct_overall")),
    "answers/comparisons.csv": Table(
        "Answers: paired correctness differences", "Mean per-question difference a − b of judged correctness, "
        "CI from a bootstrap over groups, paired permutation p.",
        ("a", "b", "estimate", "low", "high", "p_permutation", "n", "n_groups", "win", "tie", "loss")),
    "judging/report.md": Table("Judge validation against the reference label", "The judge's own report."),
    "utility.csv": Table(
        "Routing: utility distribution", "Per split: questions where switching rescues (gains), harms or ties, and "
        "the mean metric off / always on.",
        ("split", "measure", "n", "gains", "harms", "ties", "mean_off", "mean_on", "mean_delta", "signal_absent")),
    "policies.csv": Table(
        "Routing: held-out policies", "Per router: held-out metric off, always on and adaptive, trigger rate, "
        "rescues and harms among the triggered, utility = mean(metric − c × triggered).",
        ("router", "questions", "off", "always_on", "adaptive", "trigger_rate", "rescues", "harms",
         "cost_per_trigger", "utility")),
    "comparisons.csv": Table(
        "Routing: adaptive vs always-on and vs off", "Mean per-question difference a − b on held-out, CI from a "
        "bootstrap over groups, paired permutation p, win / tie / loss shares.", ()),
    "frontiers.parquet": Table(
        "Routing: budget frontiers", f"Per router, frontier ({' / '.join(FRONTIER_KINDS)}) and target usage ρ: "
        "realized held-out usage and accuracy.", ()),
    "audit.parquet": Table(
        "Routing: calibration audit", "Share of router × split combinations whose held-out usage exceeds ρ.", ()),
    "policy_costs.csv": Table(
        "Cost: each router's frozen policy", "Mean measured seconds, token-equivalents and money (at the LLM "
        "blocks' `prices`; empty when not priced) per held-out query by component.", ()),
    "reuse.csv": Table(
        "Cost: reuse vs recompute", "Triggering the alternative arm, reusing the base arm's rankings and rerank "
        "scores or recomputing them.", ()),
    "cost_frontiers.parquet": Table(
        "Cost: frontier points with measured cost", "Per router, frontier and budget: usage, accuracy, seconds, "
        "token-equivalents and money per held-out query.", ()),
    "study_c/tables/retrieval.csv": Table(
        "Study C: retrieval of the source paper", "Hit@1, Hit@3 and MRR@3 of the paper each query was written from, "
        "per strategy and query type (judge-free).",
        ("strategy", "query_type", "queries", "hit_at_1", "hit_at_3", "mrr_at_3")),
    "study_c/tables/paired.csv": Table(
        "Study C: judged overall vs classic", "Mean paired difference of the unconditional overall score (1–5), CI "
        "from a bootstrap over papers.", ()),
    "study_c/tables/paired_retrieval.csv": Table(
        "Study C: Hit@3 vs classic", "Mean paired difference of the gold paper's Hit@3, CI from a bootstrap over "
        "papers (judge-free).", ()),
    "study_c/tables/quality.csv": Table("Study C: judged quality per strategy", "The judge's scores per strategy.", ()),
    "study_c/tables/report.md": Table("Study C: strategies", "Study C's own tables (study_c/tables/*.csv).", ()),
}


def kind_of(path: str) -> str | None:
    """The TABLES key whose path ends `path` (the longest that fits), or None."""
    fits = [suffix for suffix in TABLES if path.endswith(suffix)]
    return max(fits, key=len) if fits else None


def dataset_of(path: str) -> str:
    return Path(path).parts[1]  # results/<dataset>/...


def pair_of(path: str) -> str:
    """The routing pair of results/<dataset>/{routing,cost}/<pair>/..., else ""."""
    parts = Path(path).parts
    return parts[3] if len(parts) > 4 and parts[2] in ("routing", "cost") else ""


def section_title(path: str) -> str:
    kind = kind_of(path)
    title = TABLES[kind].title if kind else Path(path).name
    return f"{title} — {pair_of(path)}" if pair_of(path) else title


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
    """"Δ +0.012 (95% CI −0.03 to +0.05, p = 0.6)" plus a plain flag when the interval includes 0."""
    low, high = row.get("low"), row.get("high")
    level = f"{round(100 * row['confidence'])}% CI" if row.get("confidence") else "95% CI"
    text = f"Δ {signed(row[estimate])} ({level} {signed(low)} to {signed(high)}, p = {p_value(row.get('p_permutation'))})"
    if low is not None and high is not None and low <= 0 <= high:
        text += ", the CI includes 0"
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


def judged_findings(summary: pl.DataFrame, comparisons: pl.DataFrame) -> list[str]:
    """Per judged comparison: the difference with its CI and n, flagged when the judge gave constant scores."""
    distinct = dict(zip(summary["policy"], summary["distinct_correctness"])) if "distinct_correctness" in summary.columns else {}
    sentences = []
    for row in comparisons.iter_rows(named=True):
        constant = distinct.get(row["a"]) == 1 and distinct.get(row["b"]) == 1
        sentences.append(
            f"Judged correctness {row['a']} − {row['b']}: {interval(row)}, n = {row['n']} questions in "
            f"{row['n_groups']} groups"
            + (". The judge gave every answer the same correctness score, so this difference carries no "
               "information." if constant else "."))
    if not comparisons.height and summary.height > 1:
        sentences.append("No question was judged under every policy: no paired comparison of judged answers.")
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
    return sentences


def findings(paths: Sequence[str], dataset: str) -> list[str]:
    """The findings of one dataset, from the tables among `paths` (missing tables: no sentence)."""
    mine = {}
    for path in paths:
        if dataset_of(path) == dataset and kind_of(path):
            mine.setdefault(kind_of(path), {})[pair_of(path)] = path
    sentences = []
    for pair, path in mine.get("utility.csv", {}).items():
        if pair in mine.get("policies.csv", {}) and pair in mine.get("comparisons.csv", {}):
            frontiers = mine.get("frontiers.parquet", {}).get(pair)
            sentences += routing_findings(pair, pl.read_csv(path), pl.read_csv(mine["policies.csv"][pair]),
                                          pl.read_csv(mine["comparisons.csv"][pair]),
                                          pl.read_parquet(frontiers) if frontiers else None)
    if "answers/comparisons.csv" in mine and "answers/summary.csv" in mine:
        sentences += judged_findings(pl.read_csv(mine["answers/summary.csv"][""]),
                                     pl.read_csv(mine["answers/comparisons.csv"][""]))
    study_c = ("study_c/tables/paired_retrieval.csv", "study_c/tables/paired.csv", "study_c/tables/quality.csv")
    if all(kind in mine for kind in study_c):
        sentences += study_c_findings(*(pl.read_csv(mine[kind][""]) for kind in study_c))
    return sentences


# --- the pages


def table_lines(path: str, full: bool) -> list[str]:
    """One table's section: title, what it is, where it lives, and the table (trimmed on the landing page)."""
    kind = kind_of(path)
    spec = TABLES.get(kind) if kind else None
    lines = [f"### {cell(section_title(path))}", ""]
    if spec:
        lines += [spec.about, ""]
    lines += [f"`{path}`", ""]
    if path.endswith(".md"):  # a stage's own Markdown tables (Study C, judge validation), quoted as they are
        return lines + [Path(path).read_text(), ""]
    table = read_any(path)
    if not full and spec and spec.shown:
        table = table.select([name for name in spec.shown if name in table.columns])
    return lines + [f"n = {table.height} rows" if table.height else "(no rows)", "",
                    *([markdown_table(table), ""] if table.height else [])]


def on_landing(path: str) -> bool:
    kind = kind_of(path)
    return not (kind and TABLES[kind].shown == ())


def dataset_page(name: str, dataset: str) -> str:
    """The dataset's page, relative to results/ (where summary_<name>.md lies)."""
    return f"summary_{name}/{dataset}.md"


NO_FINDINGS = "No routing pair, judged comparison or Study C table to read."
ABOUT_FINDINGS = ("Generated from the tables (CIs from a bootstrap over groups — papers or question contexts; p from a "
                  "paired permutation test).")


def all_findings(paths: Sequence[str], datasets: Sequence[str]) -> dict[str, list[str]]:
    """Dataset → its findings, for each dataset with a table among `paths`."""
    present = [dataset for dataset in datasets if any(dataset_of(path) == dataset for path in paths)]
    return {dataset: findings(paths, dataset) or [NO_FINDINGS] for dataset in present}


def findings_rst(paths: Sequence[str], datasets: Sequence[str]) -> str:
    """The findings in reStructuredText, for the landing page of `snakemake --report` (report/workflow.rst)."""
    lines = [ABOUT_FINDINGS, ""]
    for dataset, sentences in all_findings(paths, datasets).items():
        lines += [f"**{dataset}**", ""] + [f"- {sentence.replace('`', '``')}" for sentence in sentences] + [""]
    return "\n".join(lines)


def summary_text(paths: Sequence[str], datasets: Sequence[str], name: str) -> str:
    """results/summary_<name>.md: findings per dataset, then per dataset its headline tables."""
    by_dataset = all_findings(paths, datasets)
    lines = [f"# ragfrontier results: {cell(name)}", "", "## Findings", "", ABOUT_FINDINGS, ""]
    for dataset, sentences in by_dataset.items():
        lines += [f"**{cell(dataset)}**", ""] + [f"- {cell(sentence)}" for sentence in sentences] + [""]
    present = list(by_dataset)
    for dataset in present:
        lines += [f"## {cell(dataset)}", "",
                  f"Every table of this dataset in full, the per-budget, per-router and cost tables included: "
                  f"[{dataset_page(name, dataset)}]({dataset_page(name, dataset)}). Cost columns are measured wall "
                  "seconds and token-equivalents priced by `costs.prices`.", ""]
        for path in paths:
            if dataset_of(path) == dataset and on_landing(path):
                lines += table_lines(path, full=False)
    return "\n".join(lines)


def dataset_text(paths: Sequence[str], dataset: str, name: str) -> str:
    """results/summary_<name>/<dataset>.md: every table of the dataset in full."""
    lines = [f"# ragfrontier results: {cell(name)} — {cell(dataset)}", "",
             f"Every table of the dataset in full (the findings: [summary_{name}.md](../summary_{name}.md)). Cost "
             "columns are measured wall seconds and token-equivalents priced by `costs.prices`.", ""]
    for path in paths:
        if dataset_of(path) == dataset:
            lines += table_lines(path, full=True)
    return "\n".join(lines)
