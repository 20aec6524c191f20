"""Utility labels: Study A's Δ between arms and Study B's retrieval utility, with hand-counted summaries."""

import polars as pl
import pytest

from workflow_scripts.contracts import LABELS, conform
from workflow_scripts.errors import InputError
from workflow_scripts.labels import arm_labels, outcome_summary, retrieval_labels


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
