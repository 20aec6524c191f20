"""Prompt templates: the studies' default wording, config overrides and their validation, rendering of evidence,
and the parsers of structured replies (JSON repair, sub-queries, listwise ranking, tool calls, synthetic queries)."""

import pytest

from workflow_scripts.core.errors import InputError
from workflow_scripts.llm.parsing import Reply, parse_json
from workflow_scripts.llm.rendering import NO_EVIDENCE, load_templates, render
from workflow_scripts.llm.templates import DEFAULTS, Template


@pytest.fixture(scope="module")
def templates() -> dict[str, Template]:
    return load_templates()


def test_answer_template_carries_study_c_grounding_and_numbers_the_evidence(templates):
    messages = render(templates["answer_rag"], {"question": "What is X?"}, ["Paper one.", "Paper two."])
    system, user = messages
    assert system["role"] == "system" and "only the retrieved papers" in system["content"]
    assert "outside knowledge" in system["content"] and "insufficient" in system["content"]
    assert user["content"] == "Retrieved papers:\n\n[1] Paper one.\n\n[2] Paper two.\n\nQuestion: What is X?"
    empty = render(templates["answer_rag"], {"question": "What is X?"}, [])
    assert NO_EVIDENCE in empty[1]["content"]


def test_every_default_states_its_task(templates):
    assert {"answer_rag", "answer_closed_book", "rephrase", "subqueries", "rerank_listwise", "tool_call",
            "tool_answer", "synthetic_queries", "judge_quality", "judge_grounded", "reask"} <= set(templates)
    rephrase = render(templates["rephrase"], {"question": "q"})[1]["content"]
    assert "two to five related" in rephrase and "boolean" in rephrase and "technical terms" in rephrase
    subqueries = render(templates["subqueries"], {"question": "q", "n": "3"})[1]["content"]
    assert "3 diverse" in subqueries and "JSON list of 3 strings" in subqueries
    tool = render(templates["tool_call"], {"question": "q"})[0]["content"]
    assert '{"search": "<search query>"}' in tool and '{"answer": "<your answer>"}' in tool
    synthetic = render(templates["synthetic_queries"], {"title": "T", "abstract": "A"})[1]["content"]
    assert '{"problem": "...", "method": "..."}' in synthetic and "title verbatim" in synthetic
    judge = render(templates["judge_quality"], {"question": "q", "answer": "a"})[1]["content"]
    assert all(metric in judge for metric in ("is_answer", "accuracy", "completeness", "clarity", "overall"))
    tool_answer = render(templates["tool_answer"], {"question": "q", "call": '{"search": "x"}'}, ["doc"])
    assert [m["role"] for m in tool_answer] == ["system", "user", "assistant", "user"]


def test_render_checks_fields_and_evidence(templates):
    with pytest.raises(ValueError, match="needs fields"):
        render(templates["rephrase"], {"query": "q"})
    with pytest.raises(ValueError, match="shows no evidence"):
        render(templates["rephrase"], {"question": "q"}, ["unit"])
    braces = render(templates["rephrase"], {"question": "a {curly} question"})[1]["content"]
    assert "a {curly} question" in braces


def test_overrides_replace_messages_and_are_validated():
    custom = {"messages": [{"role": "user", "content": "Docs:\n{evidence}\nQ: {question}\nShort answer:"}],
              "evidence_item": "({index}) {text}"}
    templates = load_templates({"answer_rag": custom})
    assert render(templates["answer_rag"], {"question": "q"}, ["d"]) == [
        {"role": "user", "content": "Docs:\n(1) d\nQ: q\nShort answer:"}
    ]
    assert templates["rephrase"] == DEFAULTS["rephrase"]
    with pytest.raises(InputError, match="unknown templates \\['answer'\\]"):
        load_templates({"answer": custom})
    with pytest.raises(InputError, match=r"prompts.answer_rag: .*placeholders \['evidence', 'question'\]"):
        load_templates({"answer_rag": {"messages": [{"role": "user", "content": "Q: {question}"}]}})
    with pytest.raises(InputError, match="literal braces"):
        load_templates({"rephrase": {"messages": [{"role": "user", "content": 'JSON {"q": {question}'}]}})
    with pytest.raises(InputError, match="evidence_item"):
        load_templates({"answer_rag": {"evidence_item": "[{index}]"}})
    with pytest.raises(InputError, match="role"):
        load_templates({"rephrase": {"messages": [{"role": "tool", "content": "{question}"}]}})


@pytest.mark.parametrize(
    "reply, value, repaired",
    [
        ('{"a": 1}', {"a": 1}, False),
        ('Sure! Here it is:\n```json\n{"a": 1, "b": [1, 2,],}\n```\nHope this helps.', {"a": 1, "b": [1, 2]}, True),
        ("{'a': 'it\\'s', \"b\": \"don't\", 'c': True, 'd': None}", {"a": "it's", "b": "don't", "c": True, "d": None}, True),
        ('The answer {"note": "a } inside", "x": 2} and {"y": 3}', {"note": "a } inside", "x": 2}, True),
    ],
)
def test_parse_json_strict_then_repaired(reply, value, repaired):
    assert parse_json(reply) == Reply(value, repaired, None)


def test_parse_json_failures_say_why():
    assert parse_json("no json here").failure == "no JSON object in the reply"
    assert "cannot be parsed" in parse_json('{"a": 1 "b": 2}').failure
    assert parse_json('["x", "y"]', list).value == ["x", "y"]
    assert parse_json('{"a": 1}', list).value is None
