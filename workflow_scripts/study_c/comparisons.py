"""Study C's comparisons of its strategies: what the judge sees of each answer, then the study's tables plus cost.

In:  the synthetic queries (gold = the source paper), and per strategy its run (STUDY_C_RUNS), answers with costs
     (STUDY_C_ANSWERS) and Study C judgments (JUDGMENTS_QUALITY); the strategies in configured order (classic is the
     paired baseline) and the bootstrap settings.
Out (results/<dataset>/study_c/):
- judgments/<strategy>.parquet  JUDGMENTS_QUALITY per answered query (item_id = qid); failed answers are not judged;
- tables/*.csv and tables/report.md, per strategy × query type (problem, method, and "all" pooled):
  quality.csv    queries, judged (status ok), parse_failed, how the judgments came about (judge_replies, e.g.
                 "constrained: 40") and their score basis (judging/scores.py), answer rate (is_answer among judged),
                 the number of distinct overall scores, and for each of the six scores the conditional mean (given
                 is_answer, the study's headline) and the unconditional mean (refusals kept as zeros). Scores are
                 read as `judging.scoring` says (`verdict_columns`): expected (default) — is_answer as P(true), a
                 score unconditionally as P(true) × E[score | is_answer true] and conditionally as E[score | true]
                 (judging/judges.py re-scores a reply that chose false under the is_answer-true branch) — or argmax,
                 the values written;
  retrieval.csv  Hit@1, Hit@3 and MRR@3 of the gold paper in the strategy's run (over every query);
  paired.csv     vs classic: mean per-query difference of the unconditional overall score on queries judged under
                 both, 95% CI from a bootstrap over papers (both queries of a paper resampled together),
                 p_permutation (two-sided paired permutation test flipping each paper's summed difference),
                 win / tie / loss shares;
  paired_retrieval.csv  the same for Hit@3 of the gold paper (0 / 1 per query, over every query): judge-free, so a
                 strategy's retrieval difference has a CI even where the judge cannot tell answers apart;
  gold.csv       overall score on gold-hit vs gold-miss queries (hit = gold paper in the top-k shown): conditional
                 and unconditional means and the unconditional hit − miss difference;
  gap.csv        problem − method difference of the conditional and unconditional overall means;
  cost.csv       per query: LLM calls, prompt and completion tokens, measured LLM, retrieval and total seconds, money
                 (when models.generator has prices);
                 share of queries that searched; fallbacks by cause.
A cell with no queries is left empty (null), never 0. Plain functions; the rules' jobs (study_c/jobs/study_c_judge.py,
study_c_tables.py) read the Snakemake job and write the files.
"""

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import SCORE_BASES, STUDY_C_METRICS, STUDY_C_PAIRED
from workflow_scripts.core.tables import frame
from workflow_scripts.cost.ledger import money_of
from workflow_scripts.judging import judges
from workflow_scripts.stats.paired import group_bootstrap, group_permutation_test, smallest_p, win_tie_loss

log = logging.getLogger("ragfrontier.study_c")

BASELINE = "classic"
ALL = "all"
COST_COLUMNS = ("llm_calls", "prompt_tokens", "completion_tokens", "llm_seconds", "retrieval_seconds")
HIT_CUTOFF = 3  # the study's Hit@3 (the generator sees the top 3)
# a paired measure (a per-query column) → whether only queries judged under both strategies count
PAIRED_MEASURES = {"overall": True, f"hit_at_{HIT_CUTOFF}": False}


def hit_at(k: int) -> pl.Expr:
    """Per query: the gold paper is within the run's top k (not retrieved at all: a miss)."""
    return (pl.col("gold_rank") <= k).fill_null(False)


def judge_items(queries: pl.DataFrame, answers: pl.DataFrame) -> pl.DataFrame:
    """What the quality judge sees of each answered query: item_id (= qid), question, answer; failed answers are
    not judged."""
    answered = answers.filter(pl.col("answer_status") == "ok")
    return answered.join(queries, on="qid").select(
        pl.col("qid").alias("item_id"), pl.col("text").alias("question"), "answer").sort("item_id")


def verdict_columns(scoring: str) -> list[pl.Expr]:
    """The judge's verdict as the tables read it (`judging.scoring`): `answer` (is_answer, or P(is_answer)), each
    metric unconditionally (refusals 0; expected: P(is_answer) · E[score | is_answer]) and `<metric>_given` (given
    is_answer; argmax: the written score of an answer, null for a refusal)."""
    if scoring == "expected":
        return [pl.col("is_answer_prob").alias("answer"),
                *(pl.col(f"{metric}_expected").alias(metric) for metric in STUDY_C_METRICS),
                *(pl.col(f"{metric}_given_is_answer").alias(f"{metric}_given") for metric in STUDY_C_METRICS)]
    return [pl.col("is_answer").cast(pl.Float64).alias("answer"),
            *(pl.col(metric).cast(pl.Float64) for metric in STUDY_C_METRICS),
            *(pl.when(pl.col("is_answer")).then(pl.col(metric)).cast(pl.Float64).alias(f"{metric}_given")
              for metric in STUDY_C_METRICS)]


def per_query(queries: pl.DataFrame, strategies: Sequence[str], runs: Sequence[pl.DataFrame],
              answers: Sequence[pl.DataFrame], judgments: Sequence[pl.DataFrame],
              scoring: str = "expected") -> pl.DataFrame:
    """One row per (strategy, query): type, paper, gold rank (null: not retrieved), costs, judge verdict (read as
    `verdict_columns` says)."""
    rows = []
    for strategy, run, answer, judged in zip(strategies, runs, answers, judgments):
        gold = run.join(queries.select("qid", "paper_id"), on="qid").filter(pl.col("docid") == pl.col("paper_id"))
        verdicts = judged.select(pl.col("item_id").alias("qid"), pl.col("status").alias("judge_status"),
                                 pl.col("obtained").alias("judge_obtained"), "score_basis", *verdict_columns(scoring))
        rows.append(
            queries.select("qid", "paper_id", "query_type")
            .join(answer.select("qid", "searched", "fallback", *COST_COLUMNS), on="qid", how="left")
            .join(gold.select("qid", pl.col("rank").alias("gold_rank")), on="qid", how="left")
            .join(verdicts, on="qid", how="left")
            .with_columns(pl.lit(strategy).alias("strategy"))
        )
    return pl.concat(rows, how="vertical_relaxed")


def cells(table: pl.DataFrame, strategies: Sequence[str]) -> list[tuple[str, str, pl.DataFrame]]:
    """(strategy, query type, rows) for every strategy × (problem, method, all)."""
    out = []
    for strategy in strategies:
        mine = table.filter(pl.col("strategy") == strategy)
        for kind in ("problem", "method", ALL):
            out.append((strategy, kind, mine if kind == ALL else mine.filter(pl.col("query_type") == kind)))
    return out


def _mean(series: pl.Series) -> float | None:
    mean = series.cast(pl.Float64).mean() if series.len() else None
    return None if mean is None else float(mean)


def quality(table: pl.DataFrame, strategies: Sequence[str]) -> pl.DataFrame:
    rows = []
    for strategy, kind, rows_ in cells(table, strategies):
        judged = rows_.filter(pl.col("judge_status") == "ok")
        row = {"strategy": strategy, "query_type": kind, "queries": rows_.height, "judged": judged.height,
               "parse_failed": rows_.filter(pl.col("judge_status") == "parse_failed").height,
               "judge_replies": judges.obtained_counts(rows_["judge_obtained"].to_list()),
               "score_basis": judges.obtained_counts(judged["score_basis"].to_list(), SCORE_BASES),
               "answer_rate": _mean(judged["answer"]),
               "distinct_overall": judged["overall"].drop_nulls().n_unique()}
        for metric in STUDY_C_METRICS:
            row[f"{metric}_cond"] = _mean(judged[f"{metric}_given"].drop_nulls())
        for metric in STUDY_C_METRICS:
            row[f"{metric}_uncond"] = _mean(judged[metric])
        rows.append(row)
    return pl.DataFrame(rows)


def retrieval(table: pl.DataFrame, strategies: Sequence[str]) -> pl.DataFrame:
    rank = pl.col("gold_rank")
    return pl.DataFrame([
        {"strategy": strategy, "query_type": kind, "queries": rows_.height,
         "hit_at_1": _mean(rows_.select(hit_at(1)).to_series()),
         f"hit_at_{HIT_CUTOFF}": _mean(rows_.select(hit_at(HIT_CUTOFF)).to_series()),
         f"mrr_at_{HIT_CUTOFF}": _mean(
             rows_.select(pl.when(rank <= HIT_CUTOFF).then(1.0 / rank).otherwise(0.0).alias("rr")).to_series())}
        for strategy, kind, rows_ in cells(table, strategies)
    ])


def paired(table: pl.DataFrame, strategies: Sequence[str], resamples: int, confidence: float, seed: int,
           measure: str = "overall") -> pl.DataFrame:
    """Each strategy vs classic on `measure` (PAIRED_MEASURES), per query type: mean paired difference, CI by a
    bootstrap over papers, paired permutation p over papers, win / tie / loss."""
    table = table.with_columns(hit_at(HIT_CUTOFF).alias(f"hit_at_{HIT_CUTOFF}"))
    if PAIRED_MEASURES[measure]:  # judged, with a score (an unconditional expected score can be unknown)
        table = table.filter((pl.col("judge_status") == "ok") & pl.col(measure).is_not_null())
    table = table.with_columns(pl.col(measure).alias("measure"))
    base = table.filter(pl.col("strategy") == BASELINE).select("qid", pl.col("measure").alias("base"))
    rows = []
    for strategy, kind, rows_ in cells(table, [name for name in strategies if name != BASELINE]):
        both = rows_.join(base, on="qid")
        row = {"strategy": strategy, "query_type": kind, "queries": both.height, "papers": both["paper_id"].n_unique(),
               "delta": None, "low": None, "high": None, "p_permutation": None, "p_floor": None, "win": None,
               "tie": None, "loss": None}
        if both.height:
            scores, baseline = both["measure"].cast(pl.Float64).to_numpy(), both["base"].cast(pl.Float64).to_numpy()
            row["win"], row["tie"], row["loss"] = win_tie_loss(scores, baseline)
            row["delta"] = float((scores - baseline).mean())
            if row["papers"] >= 2:
                interval = group_bootstrap(scores - baseline, both["paper_id"].to_numpy(), resamples, seed,
                                           confidence=confidence)
                row["low"], row["high"] = interval.low, interval.high
                row["p_permutation"] = group_permutation_test(scores - baseline, both["paper_id"].to_numpy(),
                                                              resamples, seed)
                row["p_floor"] = smallest_p(interval.n_groups, resamples)
        rows.append(row)
    return frame(rows, STUDY_C_PAIRED)


def gold(table: pl.DataFrame, strategies: Sequence[str]) -> pl.DataFrame:
    rows = []
    for strategy, kind, rows_ in cells(table.filter(pl.col("judge_status") == "ok"), strategies):
        hit, miss = rows_.filter(pl.col("gold_rank").is_not_null()), rows_.filter(pl.col("gold_rank").is_null())
        row = {"strategy": strategy, "query_type": kind, "gold_hit": hit.height, "gold_miss": miss.height,
               "overall_cond_hit": _mean(hit["overall_given"].drop_nulls()),
               "overall_cond_miss": _mean(miss["overall_given"].drop_nulls()),
               "overall_uncond_hit": _mean(hit["overall"]), "overall_uncond_miss": _mean(miss["overall"])}
        both = row["overall_uncond_hit"] is not None and row["overall_uncond_miss"] is not None
        row["uncond_hit_minus_miss"] = row["overall_uncond_hit"] - row["overall_uncond_miss"] if both else None
        rows.append(row)
    return pl.DataFrame(rows, schema_overrides={name: pl.Float64 for name in (
        "overall_cond_hit", "overall_cond_miss", "overall_uncond_hit", "overall_uncond_miss", "uncond_hit_minus_miss")})


def gap(quality_table: pl.DataFrame, strategies: Sequence[str]) -> pl.DataFrame:
    rows = []
    for strategy in strategies:
        mine = {
            row["query_type"]: row for row in quality_table.filter(pl.col("strategy") == strategy).iter_rows(named=True)
        }
        row = {"strategy": strategy}
        for measure in ("overall_cond", "overall_uncond"):
            problem, method = mine["problem"][measure], mine["method"][measure]
            row[f"{measure}_problem_minus_method"] = (
                problem - method if problem is not None and method is not None else None
            )
        rows.append(row)
    return pl.DataFrame(rows, schema_overrides={"overall_cond_problem_minus_method": pl.Float64,
                                                "overall_uncond_problem_minus_method": pl.Float64})


def cost(table: pl.DataFrame, strategies: Sequence[str], prices: Mapping[str, Any] | None = None) -> pl.DataFrame:
    """Per strategy and query type: the mean LLM calls, tokens and seconds per query and, when the generator has
    `prices`, the money its tokens cost (cost/ledger.py money_of)."""
    rows = []
    for strategy, kind, rows_ in cells(table, strategies):
        row = {"strategy": strategy, "query_type": kind, "queries": rows_.height,
               **{f"{name}_per_query": _mean(rows_[name]) for name in COST_COLUMNS},
               "seconds_per_query": _mean(rows_["llm_seconds"] + rows_["retrieval_seconds"]),
               "money_per_query": _mean(rows_.select(money_of(prices)).to_series()) if prices else None,
               "currency": prices["currency"] if prices else None,
               "searched_share": _mean(rows_["searched"])}
        causes = rows_["fallback"].drop_nulls().value_counts().sort("fallback").rows()
        row["fallbacks"] = "; ".join(f"{cause}: {count}" for cause, count in causes)
        rows.append(row)
    return pl.DataFrame(rows)


def markdown(title: str, table: pl.DataFrame) -> str:
    def show(value: Any) -> str:
        return "" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    lines = [f"### {title}", "", "| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(show(value) for value in row) + " |" for row in table.iter_rows()]
    return "\n".join(lines) + "\n"


TITLES = {
    "quality": "Answer rate and judge scores (cond = given is_answer; uncond = refusals as 0; judging.scoring "
    "expected: "
    "probability-weighted, P(is_answer) × E[score | is_answer] unconditionally)",
    "retrieval": "Gold-paper retrieval",
    "paired": "Paired difference of the unconditional overall score vs classic (CI: bootstrap over papers; p: "
    "permutation test over papers)",
    "paired_retrieval": f"Paired difference of gold-paper Hit@{HIT_CUTOFF} vs classic (judge-free; CI: bootstrap over "
    "papers; p: permutation test over papers)",
    "gold": "Overall score on gold-hit vs gold-miss queries",
    "gap": "Problem − method gap of the overall score",
    "cost": "Cost per query (LLM calls, tokens, measured seconds, money at models.generator.prices) and fallbacks",
}


def study_tables(queries: pl.DataFrame, strategies: Sequence[str], runs: Sequence[pl.DataFrame],
                 answers: Sequence[pl.DataFrame], judgments: Sequence[pl.DataFrame], scoring: str,
                 bootstrap: Mapping[str, Any], prices: Mapping[str, Any] | None) -> dict[str, pl.DataFrame]:
    """Every table of the study (see the module docstring), by name (the keys of `TITLES`)."""
    table = per_query(queries, strategies, runs, answers, judgments, scoring)
    quality_table = quality(table, strategies)
    resamples, confidence, seed = bootstrap["resamples"], bootstrap["confidence"], bootstrap["seed"]
    return {
        "quality": quality_table, "retrieval": retrieval(table, strategies),
        "paired": paired(table, strategies, resamples, confidence, seed),
        "paired_retrieval": paired(table, strategies, resamples, confidence, seed, measure=f"hit_at_{HIT_CUTOFF}"),
        "gold": gold(table, strategies), "gap": gap(quality_table, strategies),
        "cost": cost(table, strategies, prices),
    }


def report(queries: pl.DataFrame, strategies: Sequence[str], results: Mapping[str, pl.DataFrame]) -> str:
    """tables/report.md: every table as Markdown under its title."""
    header = (f"## Study C tables: {queries['paper_id'].n_unique()} papers, {queries.height} queries, strategies "
              f"{', '.join(strategies)}\n\n")
    return header + "\n".join(markdown(TITLES[name], result) for name, result in results.items())
