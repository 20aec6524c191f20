"""Answer summary: Study A compares correctness only on questions judged under every policy, and faithfulness
only where no policy abstained; Study C reports answer rate and both overall means."""

import polars as pl
import pytest

from workflow_scripts.answers.answering import summarize


def test_judge_summaries_follow_the_comparison_rules():
    table = pl.DataFrame({
        "qid":         ["q1", "q2", "q3", "q1", "q2", "q3"],
        "policy":      ["keep"] * 3 + ["hybrid"] * 3,
        "status":      ["ok", "ok", "ok", "ok", "ok", "parse_failed"],
        "abstained":   [False, True, False, False, False, None],
        "correctness": [2, 0, 1, 1, 2, None],
        "faithful":    [2, None, 1, 0, 1, None],
        "obtained_grounded":  ["constrained"] * 5 + ["parse_failed"],
        "status_quality":    ["ok"] * 6,
        "obtained_quality":  ["constrained"] * 4 + ["repaired", "reasked"],
        "is_answer":   [True, False, True, True, True, True],
        "answer":      [1.0, 0.0, 1.0, 1.0, 1.0, 1.0],
        "overall":     [4, 0, 2, 3, 5, 1],
        "overall_given": [4, None, 2, 3, 5, 1],
        "basis_grounded":     ["masked_exact"] * 5 + [None],
        "basis_quality":     ["masked_exact"] * 5 + ["argmax_only"],
        "failure_grounded":  [None] * 5 + ["no JSON"],
        "failure_quality":   [None] * 6,
    })
    answers = {"keep": pl.DataFrame({"status": ["ok"] * 3, "error": [None] * 3}, schema={"status": pl.String, "error": pl.String}),
               "hybrid": pl.DataFrame({"status": ["ok"] * 3, "error": [None] * 3}, schema={"status": pl.String, "error": pl.String})}
    rows = {row["policy"]: row for row in summarize(table, ["keep", "hybrid"], answers).iter_rows(named=True)}
    # q3 was not judged under hybrid: correctness compares q1, q2. Faithfulness also drops q2 (keep abstained).
    assert rows["keep"]["grounded_questions"] == 2 and rows["keep"]["correctness"] == pytest.approx(1.0)
    assert rows["hybrid"]["correctness"] == pytest.approx(1.5)
    assert rows["keep"]["faithfulness_questions"] == 1 and rows["keep"]["faithfulness"] == 2.0
    assert rows["hybrid"]["faithfulness"] == 0.0
    assert rows["keep"]["answer_rate"] == pytest.approx(2 / 3)
    assert rows["keep"]["overall_unconditional"] == pytest.approx(2.0)
    assert rows["keep"]["overall_conditional"] == pytest.approx(3.0)
    assert rows["hybrid"]["grounded_parse_failed"] == 1
    assert rows["hybrid"]["grounded_replies"] == "constrained: 2; parse_failed: 1"
    assert rows["hybrid"]["quality_replies"] == "constrained: 1; repaired: 1; reasked: 1"
    assert rows["hybrid"]["quality_basis"] == "masked_exact: 2; argmax_only: 1"
    assert rows["keep"]["distinct_overall"] == 3 and rows["hybrid"]["distinct_correctness"] == 2

    assert (rows["hybrid"]["answer_errors"], rows["hybrid"]["judge_errors"], rows["hybrid"]["error_cause"]) == (0, 0, None)


def test_failed_requests_are_counted_with_their_most_common_cause():
    """A served model that refuses some requests: 2 of 4 answers fail with HTTP 400 (never judged), one judgment's
    call fails too; the summary counts both and names the commonest cause."""
    table = pl.DataFrame({"qid": ["q1", "q2"], "policy": ["rag", "rag"], "status": ["ok", "error"],
                          "status_quality": ["error", "ok"], "failure_grounded": [None, "HTTP 500: boom"],
                          "failure_quality": ["HTTP 400: refused", None], "abstained": [False, None],
                          "correctness": [2.0, None], "faithful": [2.0, None], "obtained_grounded": ["constrained", "error"],
                          "obtained_quality": ["error", "constrained"], "is_answer": [None, True], "answer": [None, 1.0],
                          "overall": [None, 4.0], "overall_given": [None, 4.0], "basis_grounded": ["masked_exact", None],
                          "basis_quality": [None, "masked_exact"]})
    answers = {"rag": pl.DataFrame({"status": ["ok", "ok", "error", "error"],
                                    "error": [None, None, "HTTP 400: refused", "HTTP 400: refused"]})}
    (row,) = summarize(table, ["rag"], answers).iter_rows(named=True)
    assert (row["answers"], row["answer_errors"], row["judge_errors"]) == (4, 2, 2)
    assert row["error_cause"] == "3× HTTP 400: refused"
