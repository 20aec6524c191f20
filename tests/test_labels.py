"""Utility labels: Study A's Δ between arms and Study B's retrieval utility, with hand-counted summaries."""

import polars as pl
import pytest

from workflow_scripts.core.contracts import LABELS
from workflow_scripts.core.tables import conform
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.vocabulary import is_closed_book_pair
from workflow_scripts.routing.labels import (
    answer_correctness,
    arm_labels,
    outcome_summary,
    retrieval_labels,
)


def metrics(values: dict[str, float], measure: str = "Success@10") -> pl.DataFrame:
    return pl.DataFrame({"qid": list(values), "measure": measure, "value": list(values.values())})


def test_arm_delta_counts_rescues_harms_ties():
    keep = metrics({"q1": 0, "q2": 1, "q3": 1, "q4": 0})
    hybrid = metrics({"q1": 1, "q2": 0, "q3": 1, "q4": 0})
    labels = conform(arm_labels(keep, hybrid), LABELS)
    assert labels["delta"].to_list() == [1.0, -1.0, 0.0, 0.0]
    assert labels["outcome"].to_list() == ["rescue", "harm", "tie", "tie"]
    summary = outcome_summary(labels).row(0, named=True)
    assert (summary["n"], summary["gains"], summary["harms"], summary["ties"]) == (4, 1, 1, 2)
    assert summary["mean_off"] == 0.5 and summary["mean_on"] == 0.5 and summary["harm_rate"] == 0.25


def test_graded_metric_gives_real_valued_delta():
    labels = arm_labels(metrics({"q1": 0.25, "q2": 0.5}, "RR@10"), metrics({"q1": 0.5, "q2": 0.5}, "RR@10"),
                        measure="RR@10")
    assert labels["delta"].to_list() == [0.25, 0.0]
    assert labels["outcome"].to_list() == ["rescue", "tie"]


def test_arms_on_different_queries_or_missing_measure_are_refused():
    with pytest.raises(InputError, match="different queries"):
        arm_labels(metrics({"q1": 1}), metrics({"q2": 1}))
    with pytest.raises(InputError, match="no values for measure 'nDCG@10'"):
        arm_labels(metrics({"q1": 1}), metrics({"q1": 1}), measure="nDCG@10")


def test_retrieval_utility_distribution_and_harm_rate_per_dataset_model():
    correctness = pl.DataFrame({
        "qid": ["a1", "a2", "a3", "a4", "b1", "b2"],
        "correct_without": [0, 1, 1, 0, 0, 0],
        "correct_with": [1, 0, 1, 0, 1, 1],
    })
    labels = conform(retrieval_labels(correctness), LABELS)
    assert labels["delta"].to_list() == [1.0, -1.0, 0.0, 0.0, 1.0, 1.0]
    assert labels["outcome"].to_list() == ["benefit", "harm", "neutral", "neutral", "benefit", "benefit"]
    tagged = labels.with_columns(pl.Series("dataset", ["hotpotqa"] * 4 + ["2wiki"] * 2), pl.lit("qwen").alias("model"))
    summary = {row["dataset"]: row for row in outcome_summary(tagged, by=["dataset", "model"]).iter_rows(named=True)}
    assert summary["hotpotqa"]["harm_rate"] == 0.25 and summary["hotpotqa"]["gain_rate"] == 0.25
    assert summary["hotpotqa"]["mean_off"] == 0.5 and summary["hotpotqa"]["mean_on"] == 0.5
    wiki = summary["2wiki"]
    assert (wiki["gains"], wiki["mean_on"], wiki["mean_delta"]) == (2, 1.0, 1.0)


def test_missing_correctness_is_refused():
    with pytest.raises(InputError, match="correct_with"):
        retrieval_labels(pl.DataFrame({"qid": ["a"], "correct_without": [1], "correct_with": [None]}))


def test_summary_allows_one_qid_under_several_models_but_labels_refuse_duplicates():
    labels = retrieval_labels(pl.DataFrame({"qid": ["a"], "correct_without": [0], "correct_with": [1]}))
    both = pl.concat([labels.with_columns(pl.lit(m).alias("model")) for m in ("qwen", "granite")])
    assert outcome_summary(both, by=["model"])["n"].to_list() == [1, 1]
    with pytest.raises(InputError, match="duplicated qids"):
        retrieval_labels(pl.DataFrame({"qid": ["a", "a"], "correct_without": [0, 1], "correct_with": [1, 1]}))


def generations(texts: dict[str, str], status: dict[str, str] | None = None) -> pl.DataFrame:
    """The GENERATIONS columns answer_correctness reads (request_id = qid, status, text)."""
    status = status or {}
    return pl.DataFrame({"request_id": list(texts), "text": list(texts.values()),
                         "status": [status.get(qid, "ok") for qid in texts]})


QUESTIONS = pl.DataFrame(
    {"qid": ["q1", "q2", "q3", "q4", "q5"],
     "answers": [["Paris"], ["Barack Obama", "Obama"], ["1969"], ["yes"], []]},
    schema={"qid": pl.String, "answers": pl.List(pl.String)},
)
WITHOUT = generations({"q1": "London", "q2": "President Barack Obama", "q3": "1969", "q4": "no", "q5": "x"})
WITH = generations({"q1": "The answer is Paris.", "q2": "Obama", "q3": "in 1970", "q4": "Yes.", "q5": "x"})


@pytest.mark.parametrize("scorer, threshold, without, with_retrieval", [
    ("em", 0.5, [0, 0, 1, 0], [0, 1, 0, 1]),          # normalized exact match against any reference
    ("f1", 0.5, [0, 1, 1, 0], [1, 1, 0, 1]),          # "president barack obama" vs "barack obama": F1 0.8
    ("f1", 0.9, [0, 0, 1, 0], [0, 1, 0, 1]),          # ... below 0.9; "answer is paris" vs "paris": F1 0.5
    ("contains", 0.5, [0, 1, 1, 0], [1, 1, 0, 1]),    # a normalized reference appears inside the answer
])
def test_answer_correctness_scores_both_answers_with_one_scorer(scorer, threshold, without, with_retrieval):
    table, unscorable = answer_correctness(QUESTIONS, WITHOUT, WITH, scorer, threshold)
    assert table["qid"].to_list() == ["q1", "q2", "q3", "q4"] and unscorable == 1  # q5 has no reference answer
    assert table["correct_without"].to_list() == without and table["correct_with"].to_list() == with_retrieval
    labels = conform(retrieval_labels(table), LABELS)
    assert labels["delta"].to_list() == [b - a for a, b in zip(without, with_retrieval)]
    assert set(labels["delta"]) <= {-1.0, 0.0, 1.0}


def test_answer_correctness_refuses_failed_mismatched_or_unknown_inputs():
    with pytest.raises(InputError, match=r"with retrieval\): 1 answers failed.*rerun"):
        answer_correctness(QUESTIONS, WITHOUT, generations({**dict(zip(WITH["request_id"], WITH["text"]))},
                                                           {"q2": "error"}), "em")
    with pytest.raises(InputError, match="different questions"):
        answer_correctness(QUESTIONS, WITHOUT, WITH.head(3), "em")
    with pytest.raises(InputError, match="scorer 'bleu' is unknown"):
        answer_correctness(QUESTIONS, WITHOUT, WITH, "bleu")
    with pytest.raises(InputError, match=r"\['q9'\] are not in the questions table"):
        answer_correctness(QUESTIONS, generations({"q9": "a"}), generations({"q9": "b"}), "em")


def test_only_a_closed_book_base_makes_a_retrieval_pair():
    assert is_closed_book_pair({"base": "closed_book", "alternative": "bm25"})
    assert not is_closed_book_pair({"base": "keep", "alternative": "hybrid"})
