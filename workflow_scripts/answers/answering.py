"""Answering: each policy's questions, evidence and requests, the judges' items, and the policies compared.

In:  questions, splits and units; for a retrieval policy its arm's run (the top-K units, in rank order, are the
     evidence); the generator and judge configs (`models.generator`, `models.judge`) and the prompt templates.
     The reserved policy name `closed_book` answers without retrieval. Answers cover the splits in `params.splits`:
     `generation.splits`, or every split for the two policies of a Study B routing pair (their labels and
     uncertainty features feed routers fitted on dev); judging always stays on `generation.splits`.
Out (results/<dataset>/answers/ and judgments/):
- answers/<policy>.parquet        GENERATIONS rows (request_id = qid): answer text, tokens, uncertainty, latency;
- judgments/<policy>_grounded.parquet  the grounded judge (Study A): correctness 0/1/2 against the references,
                                  faithfulness 0/1/2 against the units shown (none for abstentions);
- judgments/<policy>_quality.parquet   the quality judge (Study C's): is_answer, then accuracy … overall 1–5
                                  (question and answer only);
- answers/summary.csv             per policy: answers, the grounded judge's means on the questions every policy
                                  answered and was judged on (faithfulness also dropping questions where any policy
                                  abstained), the quality judge's answer rate and unconditional / conditional
                                  overall means, the number of distinct correctness and overall scores, and per judge
                                  the parse failures, how
                                  every judgment came about (`<judge>_replies`, e.g. "constrained: 15; length: 2";
                                  see judges.obtained_counts) and its score basis (`<judge>_basis`, e.g.
                                  "masked_exact: 17"). Scores are read as `judging.scoring` says (judges.reading):
                                  probability-weighted by default, else the values the judge wrote; and the
                                  requests that failed: answers never judged, judgments whose call errored, the
                                  most common cause;
- answers/comparisons.csv         paired differences of correctness (as read above) vs the first policy, bootstrap
                                  over groups.
Every LLM call goes through `llm.generate`, so a rerun is a cache hit and arms share identical prompts. Plain
functions of frames; the rules' jobs (answers/jobs/<rule>.py) read the tables (the two that answer and judge through
jobs/answers.py) and write them.
"""

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import COMPARISONS
from workflow_scripts.core.vocabulary import ANSWER_TEMPLATES, CLOSED_BOOK, SCORE_BASES
from workflow_scripts.core.shards import Shard, own_rows
from workflow_scripts.judging import judges
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.templates import Template
from workflow_scripts.stats.paired import compare_policies

log = logging.getLogger("ragfrontier.answer")

JUDGES = {"grounded": judges.GROUNDED, "quality": judges.QUALITY}


def answered_questions(questions: pl.DataFrame, splits: pl.DataFrame, answered: Sequence[str],
                       shard: Shard | None) -> pl.DataFrame:
    """The questions (QUESTIONS) of the `answered` splits (SPLITS) of the job's shard: qid, group_id, text,
    answers."""
    table = splits.filter(pl.col("split").is_in(answered))
    texts = questions.select("qid", "text", "answers")
    texts = texts.join(table.select("qid", "group_id"), on="qid").sort("qid")
    return own_rows(texts, "qid", shard, "questions")


def evidence(questions: pl.DataFrame, ranked: pl.DataFrame | None,
             texts: pl.DataFrame | None) -> dict[str, tuple[str, ...]]:
    """qid → the evidence texts in rank order: the `ranked` rows (RUNS) of the policy's arm with the units' `texts`
    (unit_id, text); no evidence for any question without a run (closed_book)."""
    if ranked is None or texts is None:
        return {qid: () for qid in questions["qid"]}
    ranked = ranked.filter(pl.col("qid").is_in(questions["qid"].implode()))
    ranked = ranked.join(texts.select("unit_id", "text"), on="unit_id")
    grouped = ranked.sort(["qid", "rank"]).group_by("qid", maintain_order=True).agg(pl.col("text"))
    shown = dict(zip(grouped["qid"], grouped["text"].to_list()))
    return {qid: tuple(shown.get(qid, [])) for qid in questions["qid"]}


def answer_requests(policy: str, questions: pl.DataFrame, shown: Mapping[str, tuple[str, ...]],
                    templates: Mapping[str, Template]) -> list[llm.Request]:
    """One request per question: the policy's answer template (closed-book or with evidence) and its evidence."""
    (name,) = ANSWER_TEMPLATES[CLOSED_BOOK if policy == CLOSED_BOOK else "retrieval"]
    return [llm.Request(qid, templates[name], {"question": text}, shown[qid])
            for qid, text in questions.select("qid", "text").iter_rows()]


def judge_items(questions: pl.DataFrame, shown: Mapping[str, tuple[str, ...]], answers: pl.DataFrame) -> pl.DataFrame:
    """What the judges see of each answered question: item_id, question, answer, references, evidence (an answer
    whose generation failed is not judged)."""
    texts = answers.filter(pl.col("status") == "ok")
    items = questions.join(texts.select(pl.col("request_id").alias("qid"), pl.col("text").alias("answer")), on="qid")
    return items.select(
        pl.col("qid").alias("item_id"),
        pl.col("text").alias("question"),
        "answer",
        pl.col("answers").alias("references"),
        pl.Series("evidence", [list(shown[qid]) for qid in items["qid"]], dtype=pl.List(pl.String)),
    )

def policy_table(policies: Sequence[str], grounded: Sequence[pl.DataFrame], quality: Sequence[pl.DataFrame],
                 scoring: str = "expected") -> pl.DataFrame:
    """One row per (qid, policy) with both judges' verdicts (null where a judgment failed), each score read as
    `judging.scoring` says (judges.reading): correctness, faithful, answer (is_answer or P(is_answer)), overall
    (unconditional) and overall_given (given is_answer); `grounded` and `quality` are each policy's judgments."""
    read = judges.reading(scoring)
    rows = []
    for policy, judged_grounded, judged_quality in zip(policies, grounded, quality, strict=True):
        a = judged_grounded.select(
            "item_id", "status", pl.col("obtained").alias("obtained_grounded"), "abstained",
            pl.col(read["correctness"]).cast(pl.Float64).alias("correctness"),
            pl.col(read["faithfulness"]).cast(pl.Float64).alias("faithful"),
            pl.col("score_basis").alias("basis_grounded"), pl.col("failure").alias("failure_grounded"))
        c = judged_quality.select(
            "item_id",
            pl.col("status").alias("status_quality"),
            pl.col("obtained").alias("obtained_quality"),
            "is_answer",
            pl.col(read["is_answer"]).cast(pl.Float64).alias("answer"),
            pl.col(read["overall"]).cast(pl.Float64).alias("overall"),
            (
                pl.col(read["overall_given"])
                if scoring == "expected"
                else pl.when(pl.col("is_answer")).then(pl.col(read["overall_given"]))
            )
            .cast(pl.Float64)
            .alias("overall_given"),
            pl.col("score_basis").alias("basis_quality"),
            pl.col("failure").alias("failure_quality"),
        )
        rows.append(a.join(c, on="item_id", how="full", coalesce=True).with_columns(pl.lit(policy).alias("policy")))
    return pl.concat(rows).rename({"item_id": "qid"})


def errors(table: pl.DataFrame, answers: Mapping[str, pl.DataFrame], policy: str) -> dict[str, Any]:
    """A policy's failed requests: its answers (GENERATIONS, every split) that errored and were never judged, its
    judgments (either judge) whose call errored, and the most common cause among both with its count."""
    failed = answers[policy].filter(pl.col("status") == "error")["error"].to_list()
    mine = table.filter(pl.col("policy") == policy)
    judged = [*mine.filter(pl.col("status") == "error")["failure_grounded"].to_list(),
              *mine.filter(pl.col("status_quality") == "error")["failure_quality"].to_list()]
    causes = Counter(str(cause) for cause in [*failed, *judged]).most_common(1)
    return {"answers": answers[policy].height, "answer_errors": len(failed), "judge_errors": len(judged),
            "error_cause": f"{causes[0][1]}× {causes[0][0]}" if causes else None}


def summarize(table: pl.DataFrame, policies: Sequence[str], answers: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Study A means on the questions every policy has a judgment for; Study C answer rate and overall means; the
    requests that failed (`errors`)."""
    judged_everywhere = (
        table.filter(pl.col("correctness").is_not_null())
        .group_by("qid")
        .len()
        .filter(pl.col("len") == len(policies))["qid"]
    )
    no_abstention = (
        table.group_by("qid").agg(pl.col("abstained").fill_null(True).any()).filter(~pl.col("abstained"))["qid"]
    )
    common = table.filter(pl.col("qid").is_in(judged_everywhere.implode()))
    faithful = common.filter(pl.col("qid").is_in(no_abstention.implode()))
    return pl.DataFrame([
        {
            "policy": policy,
            "judged": table.filter(pl.col("policy") == policy).height,
            "grounded_questions": common.filter(pl.col("policy") == policy).height,
            "correctness": common.filter(pl.col("policy") == policy)["correctness"].mean(),
            "faithfulness_questions": faithful.filter(pl.col("policy") == policy).height,
            "faithfulness": faithful.filter(pl.col("policy") == policy)["faithful"].mean(),
            "answer_rate": table.filter(pl.col("policy") == policy)["answer"].mean(),
            "overall_unconditional": table.filter(pl.col("policy") == policy)["overall"].mean(),
            "overall_conditional": table.filter((pl.col("policy") == policy) & pl.col("overall_given").is_not_null())[
                "overall_given"].mean(),
            **{f"distinct_{label}": table.filter(pl.col("policy") == policy)[label].drop_nulls().n_unique()
               for label in ("correctness", "overall")},
            **{f"{judge}_basis": judges.obtained_counts(table.filter(pl.col("policy") == policy)[column].to_list(),
                                                        SCORE_BASES)
               for judge, column in (("grounded", "basis_grounded"), ("quality", "basis_quality"))},
            **{column: table.filter((pl.col("policy") == policy) & (pl.col(status) == "parse_failed")).height
               for column, status in (("grounded_parse_failed", "status"), ("quality_parse_failed", "status_quality"))},
            **{f"{judge}_replies": judges.obtained_counts(table.filter(pl.col("policy") == policy)[column].to_list())
               for judge, column in (("grounded", "obtained_grounded"), ("quality", "obtained_quality"))},
            **errors(table, answers, policy),
        }
        for policy in policies
    ])


def comparisons(table: pl.DataFrame, policies: Sequence[str], splits: pl.DataFrame, bootstrap: Mapping[str, Any],
                seed: int) -> pl.DataFrame:
    """Paired differences of correctness of every policy vs the first, bootstrap over groups (the `splits` table's
    group_id; COMPARISONS; no rows when no question was judged under every policy)."""
    groups = splits.select("qid", "group_id")
    wide = table.pivot(on="policy", index="qid", values="correctness").drop_nulls().join(groups, on="qid")
    pairs = [(policy, policies[0]) for policy in policies[1:]]
    if not (pairs and wide.height):
        log.warning("no question was judged under every policy: no paired comparison")
        return pl.DataFrame(schema=COMPARISONS.schema)
    return compare_policies(wide.with_columns(pl.col(policies).cast(pl.Float64)), pairs, B=bootstrap["resamples"],
                            seed=seed, method=bootstrap["method"], confidence=bootstrap["confidence"])
