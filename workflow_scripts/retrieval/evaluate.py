"""Retrieval evaluation with ir-measures: per-query and aggregate metrics of every arm's run.

In:  an arm's RUNS table, the dataset's qrels and splits; measure names in ir-measures syntax (Success@10 is
     Study A's hit@10, RR@10 is MRR@10, nDCG@10 honours graded relevance, R@k, AP, P@k …). On graded qrels a
     binary measure counts relevance >= 1 unless given a level: AP(rel=2) is trec_eval's `-l 2` map (what DL19
     tables report), R(rel=2)@100 its recall; a level above the qrels' highest grade is logged as a warning.
Out: per-query metrics (qid, split, measure, value) and an aggregate summary per split and overall; the
     retrieval summary keeps the per-split rows only when the run uses the splits (routing or answers); the arms'
     paired differences against their first stage or the dataset's first arm, per measure (`arm_comparisons`,
     ARM_COMPARISONS).

Semantics are trec_eval's with `-c`: a query with relevant qrels but an empty ranking scores 0. Questions with
no relevant unit at all (e.g. unalignable evidence) are excluded from every metric and counted in the summary.
The run's own order is what is evaluated: scores handed to ir-measures are derived from our ranks, so ties
are never re-broken by the metric library. Plain functions; the rules' jobs are retrieval/jobs/evaluate_arm.py and
retrieval_summary.py and compare_arms.py.
"""

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import ir_measures
import polars as pl

from workflow_scripts.core.contracts import ARM_COMPARISONS
from workflow_scripts.core.errors import InputError
from workflow_scripts.stats.paired import compare_policies

log = logging.getLogger("ragfrontier.evaluate")


def parse_measures(names: Iterable[str]) -> list:
    """ir-measures objects for the configured names; an unknown name is an InputError naming it."""
    measures = []
    for name in names:
        try:
            measures.append(ir_measures.parse_measure(name))
        except (ValueError, NameError, SyntaxError) as error:
            raise InputError(
                f"evaluation.measures: cannot parse {name!r} as an ir-measures measure ({error})"
            ) from None
    return measures


def level_warnings(measures: list, qrels: pl.DataFrame) -> list[str]:
    """A message per measure whose relevance level (`rel=`) exceeds the qrels' highest grade: on binary qrels
    AP(rel=2) finds nothing relevant and scores 0 everywhere."""
    top = qrels["relevance"].max() if qrels.height else 0
    return [
        f"evaluation.measures: {measure} counts only relevance >= {measure.params['rel']}, but the qrels' highest "
        f"grade is {top}{' (binary qrels)' if top == 1 else ''}: every value is 0; drop rel= for these qrels"
        for measure in measures
        if (measure.params.get("rel") or 0) > (top or 0)
    ]


def per_query(run: pl.DataFrame, qrels: pl.DataFrame, measures: list) -> pl.DataFrame:
    """One row per (judged query, measure) with its value; judged queries missing from the run score 0."""
    judged = qrels.filter(pl.col("relevance") > 0)["qid"].unique()
    qrel_rows = [
        ir_measures.Qrel(q, u, r) for q, u, r in qrels.filter(pl.col("qid").is_in(judged.implode())).iter_rows()
    ]
    scored = [
        ir_measures.ScoredDoc(q, u, float(-rank)) for q, u, rank in run.select("qid", "unit_id", "rank").iter_rows()
    ]
    rows = [
        (metric.query_id, str(metric.measure), float(metric.value))
        for metric in ir_measures.iter_calc(measures, qrel_rows, scored)
    ]
    return pl.DataFrame(rows, schema={"qid": pl.String, "measure": pl.String, "value": pl.Float64}, orient="row").sort(
        ["qid", "measure"]
    )


def summarize(metrics: pl.DataFrame, splits: pl.DataFrame, arm: str) -> pl.DataFrame:
    """Mean of each measure per split and over all judged questions, with the number of questions behind it."""
    with_split = metrics.join(splits.select("qid", "split"), on="qid", how="left")
    # each group's values sorted before they are summed: a parallel group_by gathers them in varying order, and a
    # float sum in another order moves the mean in its last bit (seen on SciFact: 4.9e-16 between two runs)
    mean = pl.col("value").sort().mean().alias("mean")
    by_split = with_split.group_by("split", "measure").agg(mean, pl.len().alias("questions"))
    overall = with_split.group_by("measure").agg(mean, pl.len().alias("questions"))
    summary = pl.concat([by_split, overall.with_columns(pl.lit("all").alias("split")).select(by_split.columns)])
    return summary.with_columns(pl.lit(arm).alias("arm")).select("arm", "split", "measure", "mean", "questions").sort(
        ["split", "measure"]
    )


def summary_table(summaries: list[pl.DataFrame], by_split: bool = True) -> pl.DataFrame:
    """All arms' summaries side by side: one row per (arm, split), one column per measure; only the `all` rows
    unless `by_split` (the dev / calibration / held-out split means something only to routing and answers)."""
    combined = pl.concat(summaries)
    if not by_split:
        combined = combined.filter(pl.col("split") == "all")
    wide = combined.pivot(on="measure", index=["arm", "split"], values="mean")
    counts = combined.group_by("arm", "split").agg(pl.col("questions").max())
    return wide.join(counts, on=["arm", "split"]).sort(["split", "arm"])


def markdown(table: pl.DataFrame) -> str:
    """A Markdown table (4 decimals) for humans; the CSV beside it keeps full precision."""
    header = "| " + " | ".join(table.columns) + " |\n|" + "---|" * len(table.columns) + "\n"
    cells = (
        "| " + " | ".join(f"{value:.4f}" if isinstance(value, float) else str(value) for value in row) + " |"
        for row in table.iter_rows()
    )
    return header + "\n".join(cells) + "\n"


def evaluate_arm(run: pl.DataFrame, qrels: pl.DataFrame, splits: pl.DataFrame, measure_names: Iterable[str],
                 arm: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """An arm's per-query metrics and their summary per split (questions without a relevant unit left out)."""
    measures = parse_measures(measure_names)
    for message in level_warnings(measures, qrels):
        log.warning(message)
    metrics = per_query(run, qrels, measures)
    unjudged = splits.height - metrics["qid"].n_unique()
    log.info("%s: %d questions without a relevant unit are excluded from the metrics", arm, unjudged)
    return metrics, summarize(metrics, splits, arm)


def arm_comparisons(metrics: Mapping[str, pl.DataFrame], pairs: Sequence[tuple[str, str]], splits: pl.DataFrame,
                    bootstrap: Mapping[str, Any], seed: int) -> pl.DataFrame:
    """Per measure and pair (arm, baseline arm; retrieval/arms.py comparison_baselines), the arm against the
    baseline on the queries both score: the mean per-query difference with its bootstrap over the `splits` table's
    groups, the paired permutation p and win / tie / loss (ARM_COMPARISONS; no rows without a pair)."""
    long = pl.concat([frame.select("qid", "measure", "value").with_columns(pl.lit(arm).alias("arm"))
                      for arm, frame in metrics.items()])
    groups = splits.select("qid", "group_id")
    rows = []
    for (measure,), frame in sorted(long.group_by("measure"), key=lambda item: item[0]):
        wide = frame.pivot(on="arm", index="qid", values="value").drop_nulls().join(groups, on="qid").sort("qid")
        scored = [(a, b) for a, b in pairs if a in wide.columns and b in wide.columns]
        if not (wide.height and scored):
            continue
        table = compare_policies(wide, scored, B=bootstrap["resamples"], seed=seed, method=bootstrap["method"],
                                 confidence=bootstrap["confidence"])
        rows.append(table.with_columns(pl.lit(measure).alias("measure")))
    if not rows:
        return pl.DataFrame(schema=ARM_COMPARISONS.schema)
    return pl.concat(rows).select(list(ARM_COMPARISONS.columns))
