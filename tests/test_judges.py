"""Judges: validation of Study C and Study A replies (out-of-range scores fail, never clamped), the parse → repair
→ re-ask → parse_failed loop on a scripted judge, and Study B's EM / F1 / containment on textbook cases."""

import json
import math

import polars as pl
import pytest
from llm_fakes import WordTokenBackend

from workflow_scripts.core.vocabulary import STUDY_C_METRICS
from workflow_scripts.judging import judges, metrics
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.llm.templates import JUDGE_QUALITY_REPLY


def test_study_c_validation():
    scores = {"accuracy": 4, "completeness": 3, "faithfulness": 5, "relevance": 5, "clarity": 4.0, "overall": 4}
    assert judges.validate_quality({"is_answer": True, **scores}) == ({"is_answer": True, **scores}, None)
    zeros, _ = judges.validate_quality({"is_answer": False, "accuracy": 3})
    assert zeros == {"is_answer": False, **dict.fromkeys(STUDY_C_METRICS, 0)}
    assert judges.validate_quality({"is_answer": True, **scores, "overall": 6})[1] == '"overall" = 6 is outside 1–5'
    assert "outside 1–5" in judges.validate_quality({"is_answer": True, **scores, "accuracy": 0})[1]
    assert "integer" in judges.validate_quality({"is_answer": True, **scores, "clarity": "4"})[1]
    assert "integer" in judges.validate_quality({"is_answer": True, **scores, "clarity": 3.5})[1]
    assert '"is_answer" must be true or false' in judges.validate_quality({"is_answer": "yes", **scores})[1]


def test_grounded_judge_validation():
    assert judges.validate_grounded({"abstained": True, "correctness": 0, "faithfulness": 2}) == (
        {"abstained": True, "correctness": 0, "faithfulness": None}, None
    )
    assert judges.validate_grounded({"abstained": False, "correctness": 1, "faithfulness": 2})[0]["faithfulness"] == 2
    assert judges.validate_grounded({"abstained": False, "correctness": 3, "faithfulness": 2})[1] == (
        '"correctness" = 3 is outside 0–2'
    )
    assert "faithfulness" in judges.validate_grounded({"abstained": False, "correctness": 2})[1]
    assert "integer" in judges.validate_grounded({"abstained": False, "correctness": True, "faithfulness": 1})[1]


class ScriptedJudge(WordTokenBackend):
    """A judge backend: the reply depends on the answer text in the prompt and on whether it is a re-ask."""

    fingerprint = "scripted-judge"

    def __init__(self):
        self.prompts: list[str] = []

    def complete(self, batch, sampling):
        outcomes = []
        for prompt in batch:
            self.prompts.append(prompt.text)
            answer = prompt.messages[1]["content"].split("Answer: ")[1].split("\n")[0]
            reask = prompt.messages[-1]["content"].startswith("Your reply could not be used")
            good = {"is_answer": True, "accuracy": 4, "completeness": 3, "faithfulness": 4, "relevance": 5,
                    "clarity": 4, "overall": 4}
            reply = {
                "strict": json.dumps(good),
                "fenced": "```json\n" + json.dumps(good)[:-1] + ",}\n```",
                "refusal": '{"is_answer": false}',
                "garbage-then-good": json.dumps(good) if reask else "I think it is fine.",
                "out-of-range": json.dumps({**good, "overall": 7}),
            }.get(answer)
            if answer == "server-down":
                outcomes.append(llm.Outcome(error="HTTP 503 (gave up after 4 tries)"))
            else:
                outcomes.append(llm.Outcome(text=reply, finish_reason="stop", latency_s=0.01, prompt_tokens=10,
                                            completion_tokens=3))
        return outcomes


def test_judge_loop_repairs_reasks_and_counts_failures(tmp_path, caplog):
    backend = ScriptedJudge()  # free text: the path of a server without structured outputs
    engine = llm.Engine(llm.engine_config({"backend": "transformers", "model": "judge", "structured_outputs": False}),
                        backend)
    answers = ["strict", "fenced", "refusal", "garbage-then-good", "out-of-range", "server-down"]
    items = pl.DataFrame({"item_id": [f"q{i}|classic" for i in range(6)], "question": ["Why?"] * 6, "answer": answers})
    with caplog.at_level("INFO"):
        table = judges.judge(judges.QUALITY, items, engine, tmp_path, load_templates(), max_reasks=2)
    rows = {row["answer"]: row for row in items.join(table, on="item_id").iter_rows(named=True)}
    assert [rows[a]["status"] for a in answers] == ["ok", "ok", "ok", "ok", "parse_failed", "error"]
    assert [rows[a]["attempts"] for a in answers] == [1, 1, 1, 2, 3, 1]
    assert [rows[a]["obtained"] for a in answers] == ["parsed", "repaired", "parsed", "reasked", "parse_failed", "error"]
    # every call's usage is summed: re-asks, and the refusal's re-score under the is_answer branch; a failed call's
    # is unknown
    assert [rows[a]["prompt_tokens"] for a in answers] == [10, 10, 20, 20, 30, None]
    assert [rows[a]["completion_tokens"] for a in answers] == [3, 3, 6, 6, 9, None]
    assert rows["refusal"]["overall"] == 0 and rows["refusal"]["is_answer"] is False
    assert rows["garbage-then-good"]["overall"] == 4
    assert rows["out-of-range"]["overall"] is None and rows["out-of-range"]["failure"] == '"overall" = 7 is outside 1–5'
    assert rows["server-down"]["failure"].startswith("HTTP 503")
    assert table["item_id"].to_list() == items["item_id"].to_list()
    counts = judges.summary(table)
    assert (counts["parse_failed"], counts["error"], counts["repaired"], counts["reasked"], counts["ok"]) == (1, 1, 1, 1, 4)
    assert math.isclose(counts["parse_failed_share"], 1 / 6)
    assert "1 parse_failed (16.7%)" in caplog.text
    reasks = [p for p in backend.prompts if "outside 1–5" in p]
    assert len(reasks) == 2 and reasks[1].count("outside 1–5") == 2, "each re-ask adds the reply and the reason"

    backend.prompts.clear()
    again = judges.judge(judges.QUALITY, items, engine, tmp_path, load_templates(), max_reasks=2)
    assert len(backend.prompts) == 1, "only the errored call is made again; the rest come from the cache"
    assert again.drop("reply").equals(table.drop("reply"))


def test_the_grounded_judge_sees_references_and_evidence(tmp_path):
    seen = []

    class Grader(ScriptedJudge):
        def complete(self, batch, sampling):
            seen.extend(prompt.messages[1]["content"] for prompt in batch)
            return [llm.Outcome(text='{"abstained": true, "correctness": 0, "faithfulness": 1}', finish_reason="stop",
                                prompt_tokens=50, completion_tokens=7)]

    engine = llm.Engine(llm.engine_config({"backend": "transformers", "model": "grader"}), Grader())
    items = pl.DataFrame({
        "item_id": ["q1|keep"], "question": ["Which dataset?"], "answer": ["The evidence is insufficient."],
        "references": [["SQuAD", "SQuAD 1.1"]], "evidence": [["We train on SQuAD.", "Results in Table 2."]],
    })
    table = judges.judge(judges.GROUNDED, items, engine, tmp_path, load_templates())
    assert table.row(0, named=True) | {"reply": None} == {
        "item_id": "q1|keep", "status": "ok", "attempts": 1, "obtained": "constrained", "abstained": True,
        "correctness": 0, "faithfulness": None, "reply": None, "failure": None, "judge_model": "grader",
        # no token steps from this backend: the written values, basis argmax_only (faithfulness forced to null)
        "abstained_prob": 1.0, "abstained_mass": None, "correctness_expected": 0.0, "correctness_mass": None,
        "faithfulness_expected": None, "faithfulness_mass": None, "score_basis": "argmax_only",
        "prompt_tokens": 50, "completion_tokens": 7,  # the call's usage, priced by models.judge.prices
    }
    assert "- SQuAD\n- SQuAD 1.1" in seen[0] and "[1] We train on SQuAD.\n\n[2] Results in Table 2." in seen[0]


def test_a_constrained_reply_cut_by_its_budget_is_length_and_never_reasked(tmp_path):
    class Cut(ScriptedJudge):
        def complete(self, batch, sampling):
            self.prompts.extend(prompt.text for prompt in batch)
            assert all(prompt.constraint is JUDGE_QUALITY_REPLY for prompt in batch)
            assert sampling.max_new_tokens == JUDGE_QUALITY_REPLY.token_budget and sampling.stop == ()
            return [llm.Outcome(text='{"is_answer": true, "accu', finish_reason="length", completion_tokens=9)
                    for _ in batch]

    backend = Cut()
    engine = llm.Engine(llm.engine_config({"backend": "transformers", "model": "judge"}), backend)
    items = pl.DataFrame({"item_id": ["q1|classic"], "question": ["Why?"], "answer": ["Because."]})
    table = judges.judge(judges.QUALITY, items, engine, tmp_path, load_templates(), max_reasks=2)
    row = table.row(0, named=True)
    assert (row["status"], row["obtained"], row["attempts"]) == ("length", "length", 1)
    assert row["failure"] == "the reply was cut at 9 tokens" and len(backend.prompts) == 1
    assert judges.summary(table)["length"] == 1 and judges.summary(table)["parse_failed"] == 0


def test_answer_normalization_and_scores():
    assert metrics.normalize_answer("  The Eiffel-Tower, in Paris!  ") == "eiffeltower in paris"
    assert metrics.normalize_answer("An apple a day") == "apple day"
    assert metrics.exact_match("the Eiffel Tower", ["Tower of Pisa", "Eiffel Tower"]) == 1.0
    assert metrics.exact_match("Eiffel", ["Eiffel Tower"]) == 0.0
    # prediction tokens: barack obama was president (4); reference: obama (1) → P = 1/4, R = 1, F1 = 0.4
    assert math.isclose(metrics.token_f1("Barack Obama was president", ["Obama"]), 0.4)
    assert math.isclose(metrics.token_f1("Barack Obama was president", ["Obama", "Barack Obama"]), 2 / 3)
    assert metrics.token_f1("yes it is", ["yes"]) == 0.0, "HotpotQA: yes/no/noanswer must match exactly"
    assert metrics.exact_match("No.", ["no"]) == 1.0
    assert metrics.contains_answer("He was born in 1990 in Paris.", ["paris", "London"])
    assert not metrics.contains_answer("In 19901.", ["1990"])
    table = metrics.score_answers(["Paris", "the city of Paris"], [["Paris"], ["Paris", "Lyon"]])
    assert table.to_dict(as_series=False) == {"em": [1.0, 0.0], "f1": [1.0, 0.5], "contains": [True, True]}
    with pytest.raises(ValueError, match="no reference answers"):
        metrics.score_answers(["x"], [[]])
