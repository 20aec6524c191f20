"""Answer stage: generate each policy's answers from its retrieved units, judge them, and compare the policies.

In:  questions, splits and units; for a retrieval policy its arm's run (the top-K units, in rank order, are the
     evidence); the generator and judge configs (`models.generator`, `models.judge`) and the prompt templates.
     The reserved policy name `closed_book` answers without retrieval. Answers cover the splits in `params.splits`:
     `generation.splits`, or every split for the two policies of a Study B routing pair (their labels and
     uncertainty features feed routers fitted on dev); judging always stays on `generation.splits`.
Out (results/<dataset>/answers/):
- <policy>.parquet                GENERATIONS rows (request_id = qid): answer text, tokens, uncertainty, latency;
- <policy>_study_a.parquet        Study A judge: correctness 0/1/2 against the references, faithfulness 0/1/2
                                  against the units shown (none for abstentions);
- <policy>_study_c.parquet        Study C judge: is_answer, then accuracy … overall 1–5 (question and answer only);
- summary.csv                     per policy: answers, Study A means on the questions every policy answered and was
                                  judged on (faithfulness also dropping questions where any policy abstained),
                                  Study C answer rate and unconditional / conditional overall means, the number of
                                  distinct correctness and overall scores, and per judge the parse failures, how
                                  every judgment came about (`<judge>_replies`, e.g. "constrained: 15; length: 2";
                                  see judges.obtained_counts) and its score basis (`<judge>_basis`, e.g.
                                  "masked_exact: 17"). Scores are read as `judging.scoring` says (judges.reading):
                                  probability-weighted by default, else the values the judge wrote;
- comparisons.csv                 paired differences of correctness (as read above) vs the first policy, bootstrap
                                  over groups.
Every LLM call goes through `llm.generate`, so a rerun is a cache hit and arms share identical prompts.
"""

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.core.contracts import (
    COMPARISONS,
    GENERATIONS,
    JUDGMENTS_A,
    JUDGMENTS_C,
    QUESTIONS,
    SCORE_BASES,
    RUNS,
    SPLITS,
    UNITS,
    read_table,
    write_table,
)
from workflow_scripts.core.runtime import run_job
from workflow_scripts.core.shards import own_rows, shard_of
from workflow_scripts.core.vocabulary import ANSWER_TEMPLATES, CLOSED_BOOK
from workflow_scripts.judging import judges
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.routing.stats import compare_policies

log = logging.getLogger("ragfrontier.answer")

JUDGES = {"study_a": judges.STUDY_A, "study_c": judges.STUDY_C}


def answered_questions(smk: Any) -> pl.DataFrame:
    """The questions of the configured splits (of the job's shard): qid, group_id, text, answers."""
    splits = read_table(smk.input.splits, SPLITS).filter(pl.col("split").is_in(smk.params.splits))
    questions = read_table(smk.input.questions, QUESTIONS).select("qid", "text", "answers")
    questions = questions.join(splits.select("qid", "group_id"), on="qid").sort("qid")
    return own_rows(questions, "qid", shard_of(smk), "questions")


def evidence(smk: Any, questions: pl.DataFrame) -> dict[str, tuple[str, ...]]:
    """qid → the policy's evidence texts in rank order (none for closed_book)."""
    if smk.wildcards.policy == CLOSED_BOOK:
        return {qid: () for qid in questions["qid"]}
    run = read_table(smk.input.run, RUNS).filter(pl.col("qid").is_in(questions["qid"].implode()))
    units = read_table(smk.input.units, UNITS, where=("unit_id", run["unit_id"].unique()))
    run = run.join(units.select("unit_id", "text"), on="unit_id")
    texts = run.sort(["qid", "rank"]).group_by("qid", maintain_order=True).agg(pl.col("text"))
    shown = dict(zip(texts["qid"], texts["text"].to_list()))
    return {qid: tuple(shown.get(qid, [])) for qid in questions["qid"]}


def generate_rule(smk: Any) -> None:
    questions = answered_questions(smk)
    shown = evidence(smk, questions)
    templates = load_templates(smk.params.prompts)
    (name,) = ANSWER_TEMPLATES[CLOSED_BOOK if smk.wildcards.policy == CLOSED_BOOK else "retrieval"]
    template = templates[name]
    requests = [llm.Request(qid, template, {"question": text}, shown[qid]) for qid, text in questions.select("qid", "text").iter_rows()]
    engine = llm.load_engine(smk.params.generator, Path(smk.params.model_cache), "models.generator")
    write_table(llm.generate(requests, engine, Path(smk.params.cache)), smk.output.answers, GENERATIONS)


def judge_rule(smk: Any) -> None:
    questions = answered_questions(smk)
    shown = evidence(smk, questions)
    answers = read_table(smk.input.answers, GENERATIONS).filter(pl.col("status") == "ok")
    items = questions.join(answers.select(pl.col("request_id").alias("qid"), pl.col("text").alias("answer")), on="qid")
    items = items.select(
        pl.col("qid").alias("item_id"), pl.col("text").alias("question"), "answer", pl.col("answers").alias("references"),
        pl.Series("evidence", [list(shown[qid]) for qid in items["qid"]], dtype=pl.List(pl.String)),
    )
    templates = load_templates(smk.params.prompts)
    engine = llm.load_engine(smk.params.judge, Path(smk.params.model_cache), "models.judge")
    for name, path in (("study_a", smk.output.study_a), ("study_c", smk.output.study_c)):
        spec = JUDGES[name]
        write_table(judges.judge(spec, items, engine, Path(smk.params.cache), templates, smk.params.max_reasks), path, spec.contract)


def policy_table(policies: Sequence[str], study_a: Sequence[str], study_c: Sequence[str],
                 scoring: str = "expected") -> pl.DataFrame:
    """One row per (qid, policy) with both judges' verdicts (null where a judgment failed), each score read as
    `judging.scoring` says (judges.reading): correctness, faithful, answer (is_answer or P(is_answer)), overall
    (unconditional) and overall_given (given is_answer)."""
    read = judges.reading(scoring)
    rows = []
    for policy, path_a, path_c in zip(policies, study_a, study_c):
        a = read_table(path_a, JUDGMENTS_A).select(
            "item_id", "status", pl.col("obtained").alias("obtained_a"), "abstained",
            pl.col(read["correctness"]).cast(pl.Float64).alias("correctness"),
            pl.col(read["faithfulness"]).cast(pl.Float64).alias("faithful"),
            pl.col("score_basis").alias("basis_a"))
        c = read_table(path_c, JUDGMENTS_C).select(
            "item_id", pl.col("status").alias("status_c"), pl.col("obtained").alias("obtained_c"), "is_answer",
            pl.col(read["is_answer"]).cast(pl.Float64).alias("answer"),
            pl.col(read["overall"]).cast(pl.Float64).alias("overall"),
            (pl.col(read["overall_given"]) if scoring == "expected" else pl.when(pl.col("is_answer")).then(
                pl.col(read["overall_given"]))).cast(pl.Float64).alias("overall_given"),
            pl.col("score_basis").alias("basis_c"))
        rows.append(a.join(c, on="item_id", how="full", coalesce=True).with_columns(pl.lit(policy).alias("policy")))
    return pl.concat(rows).rename({"item_id": "qid"})


def summarize(table: pl.DataFrame, policies: Sequence[str]) -> pl.DataFrame:
    """Study A means on the questions every policy has a judgment for; Study C answer rate and overall means."""
    judged_everywhere = table.filter(pl.col("correctness").is_not_null()).group_by("qid").len().filter(pl.col("len") == len(policies))["qid"]
    no_abstention = table.group_by("qid").agg(pl.col("abstained").fill_null(True).any()).filter(~pl.col("abstained"))["qid"]
    common = table.filter(pl.col("qid").is_in(judged_everywhere.implode()))
    faithful = common.filter(pl.col("qid").is_in(no_abstention.implode()))
    return pl.DataFrame([
        {
            "policy": policy,
            "judged": table.filter(pl.col("policy") == policy).height,
            "study_a_questions": common.filter(pl.col("policy") == policy).height,
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
               for judge, column in (("study_a", "basis_a"), ("study_c", "basis_c"))},
            **{column: table.filter((pl.col("policy") == policy) & (pl.col(status) == "parse_failed")).height
               for column, status in (("study_a_parse_failed", "status"), ("study_c_parse_failed", "status_c"))},
            **{f"{judge}_replies": judges.obtained_counts(table.filter(pl.col("policy") == policy)[column].to_list())
               for judge, column in (("study_a", "obtained_a"), ("study_c", "obtained_c"))},
        }
        for policy in policies
    ])


def summary_rule(smk: Any) -> None:
    policies = list(smk.params.policies)
    table = policy_table(policies, smk.input.study_a, smk.input.study_c, smk.params.scoring)
    write_text_atomic(summarize(table, policies).write_csv(float_precision=4), smk.output.summary)
    groups = read_table(smk.input.splits, SPLITS).select("qid", "group_id")
    wide = table.pivot(on="policy", index="qid", values="correctness").drop_nulls().join(groups, on="qid")
    pairs = [(policy, policies[0]) for policy in policies[1:]]
    if pairs and wide.height:
        boot = smk.params.bootstrap
        comparisons = compare_policies(wide.with_columns(pl.col(policies).cast(pl.Float64)), pairs, B=boot["resamples"],
                                       seed=smk.params.seed, method=boot["method"], confidence=boot["confidence"])
        text = comparisons.write_csv(float_precision=4)
    else:
        text = ",".join(COMPARISONS.columns) + "\n"
        log.warning("no question was judged under every policy: no paired comparison")
    write_text_atomic(text, smk.output.comparisons)


def main(smk: Any) -> None:
    {"generate_answers": generate_rule, "judge_answers": judge_rule, "answer_summary": summary_rule}[smk.rule](smk)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
