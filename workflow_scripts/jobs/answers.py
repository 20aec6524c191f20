"""What the jobs that answer and judge a policy read (generate_answers, judge_answers): its questions and the
evidence its arm shows, through their contracts.

In:  the Snakemake job (inputs questions, splits and, for a retrieval policy, run and units; params.splits, the
     splits answered; wildcards.policy; its shard).
Out: `answered_inputs` → (the questions answered, qid → evidence texts in rank order; answers/answering.py
     answered_questions and evidence). Only the units the run ranks for these questions are read (a filtered pass
     over units.parquet), so a job holds its questions' evidence, not the corpus.
"""

from typing import Any

import polars as pl

from workflow_scripts.answers import answering
from workflow_scripts.core.contracts import QUESTIONS, RUNS, SPLITS, UNITS
from workflow_scripts.core.tables import read_table
from workflow_scripts.core.vocabulary import CLOSED_BOOK
from workflow_scripts.jobs.runtime import shard_of


def answered_inputs(smk: Any) -> tuple[pl.DataFrame, dict[str, tuple[str, ...]]]:
    questions = answering.answered_questions(read_table(smk.input.questions, QUESTIONS),
                                             read_table(smk.input.splits, SPLITS), smk.params.splits, shard_of(smk))
    if smk.wildcards.policy == CLOSED_BOOK:
        return questions, answering.evidence(questions, None, None)
    ranked = read_table(smk.input.run, RUNS).filter(pl.col("qid").is_in(questions["qid"].implode()))
    texts = read_table(smk.input.units, UNITS, where=("unit_id", ranked["unit_id"].unique()),
                       columns=["unit_id", "text"])
    return questions, answering.evidence(questions, ranked, texts)
