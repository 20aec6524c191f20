"""Utility labels: what switching (arm A → arm B) or retrieving (without → with) changes for each query.

In:  Study A — two per-query metric tables of the `evaluate` stage (qid, measure, value), one per arm, and the
     measure to compare (default Success@10 = hit@10). Study B — one table (qid, correct_without, correct_with)
     of per-query correctness of the no-retrieval and the retrieval answer, built by `answer_correctness` from
     the questions' reference answers and two GENERATIONS tables (closed_book and the retrieval arm's answers)
     with one deterministic scorer of `judging/metrics.py`: em (exact match), f1 (token F1 ≥ a threshold) or contains
     (a normalized reference appears in the answer), each 0/1 so that u ∈ {−1, 0, +1}.
Out: a LABELS table (qid, metric_off, metric_on, delta, outcome), where "off" is what the query gets when the
     router does not fire (arm A / no retrieval) and "on" when it fires (arm B / retrieval); delta = on − off.
     For a 0/1 metric delta ∈ {−1, 0, +1}; for a graded metric it is real-valued and the outcome is its sign.
     Outcome vocabulary follows each study: rescue / harm / tie (Study A), benefit / harm / neutral (Study B).
     `outcome_summary` gives counts and rates (the utility distribution and harm rate) per group of rows;
     `utility_table` the pair's utility.csv (UTILITY_REPORT): that distribution per split and overall, tagged.

Every frontier, router and report downstream reads metric_off / metric_on / delta from this one table.
"""

from collections.abc import Sequence

import polars as pl

from workflow_scripts.core.vocabulary import ARM_OUTCOMES, RETRIEVAL_OUTCOMES, SCORERS
from workflow_scripts.core.errors import InputError
from workflow_scripts.judging.metrics import score_answers


def _outcome(vocabulary: tuple[str, str, str]) -> pl.Expr:
    positive, negative, zero = vocabulary
    return (
        pl.when(pl.col("delta") > 0).then(pl.lit(positive))
        .when(pl.col("delta") < 0).then(pl.lit(negative))
        .otherwise(pl.lit(zero))
        .alias("outcome")
    )


def _check_values(table: pl.DataFrame, columns: Sequence[str], what: str) -> None:
    """qid and the numeric `columns` are present and the numbers complete."""
    for column in ("qid", *columns):
        if column not in table.columns:
            raise InputError(f"{what}: column '{column}' is missing (columns: {table.columns})")
    for column in columns:
        if table[column].null_count() or table[column].cast(pl.Float64).is_nan().any():
            raise InputError(f"{what}: column '{column}' has missing values; score every query before labelling")


def _check_unique(table: pl.DataFrame, what: str) -> None:
    if table["qid"].is_duplicated().any():
        duplicated = table.filter(pl.col("qid").is_duplicated())["qid"].unique().sort().head(5).to_list()
        raise InputError(f"{what}: duplicated qids {duplicated}")


def _one_measure(metrics: pl.DataFrame, measure: str, arm: str) -> pl.DataFrame:
    chosen = metrics.filter(pl.col("measure") == measure)
    if chosen.is_empty():
        measures = sorted(metrics["measure"].unique().to_list())
        raise InputError(f"arm labels: arm '{arm}' has no values for measure '{measure}' (it has {measures})")
    _check_values(chosen, ["value"], f"arm labels ({arm}, {measure})")
    _check_unique(chosen, f"arm labels ({arm}, {measure})")
    return chosen.select("qid", pl.col("value").cast(pl.Float64))


def arm_labels(
    metrics_a: pl.DataFrame, metrics_b: pl.DataFrame, measure: str = "Success@10", arms: tuple[str, str] = ("A", "B")
) -> pl.DataFrame:
    """Δ = metric(B) − metric(A) per query; both arms must have judged the same queries."""
    a = _one_measure(metrics_a, measure, arms[0]).rename({"value": "metric_off"})
    b = _one_measure(metrics_b, measure, arms[1]).rename({"value": "metric_on"})
    only_a = sorted(set(a["qid"]) - set(b["qid"]))
    only_b = sorted(set(b["qid"]) - set(a["qid"]))
    if only_a or only_b:
        raise InputError(
            f"arm labels: arms '{arms[0]}' and '{arms[1]}' were judged on different queries "
            f"(only in {arms[0]}: {only_a[:5]}, only in {arms[1]}: {only_b[:5]}); evaluate both on the same qrels"
        )
    joined = a.join(b, on="qid").with_columns((pl.col("metric_on") - pl.col("metric_off")).alias("delta"))
    return joined.with_columns(_outcome(ARM_OUTCOMES)).sort("qid")


def _answer_texts(answers: pl.DataFrame, side: str) -> pl.DataFrame:
    """qid → answer text of one GENERATIONS table; every answer must have succeeded."""
    for column in ("request_id", "status", "text"):
        if column not in answers.columns:
            raise InputError(f"answer correctness ({side}): column '{column}' is missing (columns: {answers.columns})")
    failed = answers.filter(pl.col("status") != "ok")
    if failed.height:
        raise InputError(f"answer correctness ({side}): {failed.height} answers failed (e.g. "
                         f"{failed['request_id'].head(3).to_list()}); rerun to retry them (failures are not cached)")
    return answers.select(pl.col("request_id").alias("qid"), pl.col("text").fill_null(""))


def answer_correctness(
    questions: pl.DataFrame, without: pl.DataFrame, with_retrieval: pl.DataFrame, scorer: str,
    f1_threshold: float = 0.5,
) -> tuple[pl.DataFrame, int]:
    """(qid, correct_without, correct_with) as 0/1 for every question both answer tables cover and that has
    reference answers, plus how many covered questions were left out because they have none (reported, never
    scored: an empty reference list has no correct answer to compare with)."""
    if scorer not in SCORERS:
        raise InputError(f"answer correctness: scorer '{scorer}' is unknown; use one of {list(SCORERS)}")
    off, on = _answer_texts(without, "without retrieval"), _answer_texts(with_retrieval, "with retrieval")
    if set(off["qid"]) != set(on["qid"]):
        differ = sorted(set(off["qid"]) ^ set(on["qid"]))
        raise InputError(f"answer correctness: the two answer tables cover different questions (e.g. {differ[:5]}); "
                         f"generate both policies on the same splits")
    joined = questions.select("qid", "answers").join(off.rename({"text": "off"}), on="qid") \
        .join(on.rename({"text": "on"}), on="qid").sort("qid")
    if joined.height != off.height:
        unknown = sorted(set(off["qid"]) - set(joined["qid"]))
        raise InputError(f"answer correctness: answered questions {unknown[:5]} are not in the questions table")
    scorable = joined.filter(pl.col("answers").list.len() > 0)
    references = scorable["answers"].to_list()

    def correct(column: str) -> pl.Series:
        scores = score_answers(scorable[column].to_list(), references)
        hit = scores["f1"] >= f1_threshold if scorer == "f1" else scores[scorer].cast(pl.Boolean)
        return hit.cast(pl.Float64)

    table = pl.DataFrame({"qid": scorable["qid"], "correct_without": correct("off"), "correct_with": correct("on")},
                         schema={"qid": pl.String, "correct_without": pl.Float64, "correct_with": pl.Float64})
    return table, joined.height - scorable.height


def answer_labels(questions: pl.DataFrame, without: pl.DataFrame, with_retrieval: pl.DataFrame, scorer: str,
                  f1_threshold: float = 0.5) -> tuple[pl.DataFrame, str, int]:
    """Study B's labels from the closed-book and the retrieval arm's GENERATIONS scored against the `questions`'
    reference answers, the generator model(s) behind them (' | '-joined) and the questions without references."""
    correctness, unscorable = answer_correctness(questions, without, with_retrieval, scorer, f1_threshold)
    if correctness.is_empty():
        raise InputError(f"labels: none of the {unscorable} answered questions has reference answers to score "
                         f"against; Study B needs a dataset with answers (questions.parquet column 'answers')")
    models = sorted(set(without["model"]) | set(with_retrieval["model"]))
    return retrieval_labels(correctness), " | ".join(models), unscorable


def retrieval_labels(correctness: pl.DataFrame) -> pl.DataFrame:
    """u = correct(with retrieval) − correct(without) per query, from columns qid, correct_without, correct_with."""
    _check_values(correctness, ["correct_without", "correct_with"], "retrieval labels")
    _check_unique(correctness, "retrieval labels")
    table = correctness.select(
        "qid",
        pl.col("correct_without").cast(pl.Float64).alias("metric_off"),
        pl.col("correct_with").cast(pl.Float64).alias("metric_on"),
    ).with_columns((pl.col("metric_on") - pl.col("metric_off")).alias("delta"))
    return table.with_columns(_outcome(RETRIEVAL_OUTCOMES)).sort("qid")


def outcome_summary(labels: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """Per group of rows (e.g. dataset, model): n, gains (rescue/benefit), harms, ties and their rates, the mean
    metric with the router never firing (off) and always firing (on), and the mean delta."""
    _check_values(labels, ["metric_off", "metric_on", "delta"], "outcome summary")
    aggregations = [
        pl.len().alias("n"),
        (pl.col("delta") > 0).sum().alias("gains"),
        (pl.col("delta") < 0).sum().alias("harms"),
        (pl.col("delta") == 0).sum().alias("ties"),
        pl.col("metric_off").mean().alias("mean_off"),
        pl.col("metric_on").mean().alias("mean_on"),
        pl.col("delta").mean().alias("mean_delta"),
    ]
    grouped = labels.group_by(list(by), maintain_order=True).agg(aggregations) if by else labels.select(aggregations)
    rates = [(pl.col(count) / pl.col("n")).alias(f"{count[:-1]}_rate") for count in ("gains", "harms", "ties")]
    return grouped.with_columns(rates).sort(list(by)) if by else grouped.with_columns(rates)


def with_splits(table: pl.DataFrame, splits: pl.DataFrame) -> pl.DataFrame:
    """`table` (qid, …) with each question's group_id and split (SPLITS); questions without a split are dropped."""
    return table.join(splits.select("qid", "group_id", "split"), on="qid", how="inner")


def utility_table(labels: pl.DataFrame, splits: pl.DataFrame, dataset: str, pair_name: str, measure: str,
                  model: str | None, unscorable: int) -> pl.DataFrame:
    """The utility distribution (outcome_summary) per split and over all splits, tagged with dataset, pair, model,
    the questions left out for lack of references and whether every label is equal (`signal_absent`)."""
    by_split = outcome_summary(with_splits(labels, splits), ["split"])
    overall = outcome_summary(labels).with_columns(pl.lit("all").alias("split"))
    table = pl.concat([overall.select(by_split.columns), by_split])
    tags = [pl.lit(dataset).alias("dataset"), pl.lit(pair_name).alias("pair"),
            pl.lit(model, dtype=pl.String).alias("model"), pl.lit(measure).alias("measure")]
    signal_absent = labels["delta"].n_unique() <= 1
    return table.select(*tags, pl.all()).with_columns(
        pl.lit(unscorable).alias("without_reference"), pl.lit(signal_absent).alias("signal_absent")
    )
