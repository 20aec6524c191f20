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
    })
    rows = {row["policy"]: row for row in summarize(table, ["keep", "hybrid"]).iter_rows(named=True)}
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
