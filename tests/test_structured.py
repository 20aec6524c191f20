"""Structured outputs: every JSON step decoded under its schema. Each constraint kind on the real SmolLM2 through
the transformers backend (xgrammar), the exact permutation grammar, token budgets, cache keys, request building for
the vllm (fake module) and openai (a local server) backends, and the bad-input errors."""

import json
import logging
import math
import sys
import types
from typing import ClassVar

import pytest
from local_server import JsonHandler, chat_completion, serving

from workflow_scripts.core.vocabulary import STUDY_C_METRICS
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm import constraints
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.backends.openai import OpenAIBackend
from workflow_scripts.llm.constraints import Constraint
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.llm.templates import (
    JUDGE_GROUNDED_REPLY,
    JUDGE_QUALITY_REPLY,
    TOOL_CALL_REPLY,
    ranking_reply,
    subqueries_reply,
)
from workflow_scripts.retrieval import rerank

TEMPLATES = load_templates()
SMOLLM2 = {"backend": "transformers", "model": "HuggingFaceTB/SmolLM2-135M-Instruct", "batch_size": 4,
           "max_prompt_tokens": 512, "sampling": {"max_new_tokens": 16}}
ABSTRACT = ("We present a nearly linear time algorithm for solving linear systems in graph Laplacians, using "
            "low-stretch spanning trees as preconditioners.")
PAPERS = tuple(f"Paper {index}: a study of topic {index} in machine learning." for index in range(1, 11))


def _request(request_id: str, template: str, fields: dict, evidence: tuple[str, ...] = ()) -> llm.Request:
    return llm.Request(request_id, TEMPLATES[template], fields, evidence)


STEPS = [
    _request("judge_c", "judge_quality", {"question": "What is the capital of France?", "answer": "Paris."}),
    _request("judge_a", "judge_grounded", {"question": "Which dataset?", "answer": "SQuAD.", "references": "- SQuAD"},
             ("We train on SQuAD.",)),
    _request("synthetic", "synthetic_queries", {"title": "Fast Laplacian solvers", "abstract": ABSTRACT}),
    _request("subqueries", "subqueries", {"question": "How do transformers handle long context?", "n": "3"}),
    _request("rerank", "rerank_listwise", {"question": "Which paper studies topic 3?", "n": "10"}, PAPERS),
    _request("tool", "tool_call", {"question": "Which papers study graph Laplacian solvers?"}),
    _request("question", "generated_question", {"title": "Fast Laplacian solvers", "section": "Introduction",
                                                "kind": "paragraph", "text": ABSTRACT}),
]


@pytest.fixture(scope="module")
def smollm2(pytestconfig):
    """SmolLM2-135M-Instruct on one torch thread (see tests/test_llm.py)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield llm.load_engine(SMOLLM2, pytestconfig.cache.mkdir("ragfrontier-models"))
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_every_constraint_kind_decodes_to_a_valid_reply_on_smollm2(smollm2, tmp_path):
    table = llm.generate(STEPS, smollm2, tmp_path)
    for request, row in zip(STEPS, table.iter_rows(named=True)):
        constraint = request.constraint
        assert row["status"] == "ok" and row["constrained"] and row["finish_reason"] == "stop", row
        value = json.loads(row["text"])  # strict JSON: no repair needed
        assert constraint.check(value) is None, (request.request_id, row["text"])
        assert row["completion_tokens"] <= constraint.token_budget
        assert row["uncertainty_basis"] == "grammar_masked" and 0 < row["min_token_prob"] <= 1
        assert 0 <= row["mean_entropy"] <= math.log(smollm2.backend.chat.tokenizer.get_vocab_size())
    replies = {row["request_id"]: json.loads(row["text"]) for row in table.iter_rows(named=True)}
    assert sorted(replies["rerank"]) == list(range(1, 11)), "a permutation: each candidate exactly once"
    assert len(replies["subqueries"]) == 3 and set(replies["tool"]) in ({"search"}, {"answer"})
    # properties come in the order the schema declares them (is_answer decided before the scores)
    assert list(replies["judge_c"]) == ["is_answer", *STUDY_C_METRICS]
    assert list(replies["question"]) == ["question", "answer"] and list(replies["judge_a"])[0] == "abstained"
    assert len(smollm2.backend.grammars.compiled) == len(STEPS), "one grammar per (tokenizer, constraint)"
    again = llm.generate(STEPS, smollm2, tmp_path)
    assert set(again["source"]) == {"cache"} and again["text"].to_list() == table["text"].to_list()


@pytest.mark.slow
def test_grammars_are_compiled_once_and_reused_across_batches(smollm2, tmp_path):
    judged = [_request(f"j{index}", "judge_quality", {"question": f"Question {index}?", "answer": f"Answer {index}."})
              for index in range(6)]  # two batches of batch_size 4
    compiled = smollm2.backend.grammars.compile(JUDGE_QUALITY_REPLY)
    table = llm.generate(judged, smollm2, tmp_path)
    assert smollm2.backend.grammars.compile(JUDGE_QUALITY_REPLY) is compiled
    assert all(JUDGE_QUALITY_REPLY.check(json.loads(text)) is None for text in table["text"])


@pytest.mark.slow
def test_pointwise_score_is_the_choice_constrained_distribution(smollm2, pytestconfig):
    """llm_pointwise reads P(Yes) under the choice constraint exactly: the full-vocabulary next-token distribution
    masked to the two choices and renormalized."""
    import torch

    scorer = rerank.load_scorer("llm_pointwise", SMOLLM2["model"], pytestconfig.cache.mkdir("ragfrontier-models"))
    question, passage = "What do cats eat?", "Cats eat fish and mice."
    score = float(scorer.score([question], [passage])[0])
    chat = smollm2.backend.chat
    prompt = chat.render([{"role": "user", "content": rerank.POINTWISE_PROMPT.format(question=question, passage=passage)}])
    with torch.inference_mode():
        logits = smollm2.backend.model(input_ids=torch.tensor([chat.encode(prompt)])).logits[0, -1]
    probabilities = logits.float().softmax(-1)
    yes, no = (chat.encode(word)[0] for word in rerank.POINTWISE_CHOICES)
    assert math.isclose(score, float(probabilities[yes] / (probabilities[yes] + probabilities[no])), rel_tol=1e-4)


@pytest.mark.slow
def test_the_permutation_grammar_is_exact(smollm2):
    import xgrammar

    grammars = smollm2.backend.grammars

    def accepts(constraint: Constraint, text: str) -> bool:
        matcher = xgrammar.GrammarMatcher(grammars.compile(constraint))
        return matcher.accept_string(text) and matcher.accept_token(smollm2.backend.chat.eos_token_id)

    ranking = ranking_reply(4)
    assert accepts(ranking, "[3, 1, 4, 2]") and not accepts(ranking, "[3, 1, 3, 2]")
    assert not accepts(ranking, "[3, 1, 4]") and not accepts(ranking, "[3, 1, 5, 2]")
    assert ranking_reply(10).grammar is not None and ranking_reply(13).grammar is None
    assert ranking_reply(13).check([1] * 13) == "[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1] has non-unique elements"


@pytest.mark.slow
def test_a_constraint_that_cannot_be_compiled_names_its_template(smollm2):
    broken = Constraint.of("judge_quality", {"type": "integer", "minimum": 0, "maximum": 1}, "root ::= missing_rule")
    with pytest.raises(InputError, match=r"template judge_quality: its reply constraint cannot be compiled"):
        smollm2.backend.grammars.compile(broken)


# ---- budgets, keys, overrides (no model) -------------------------------------------------------------------


def test_the_schema_keeps_the_declared_property_order():
    """Engines decode properties in the schema's order: a sorted schema would put a judge's scores first."""
    constraint = Constraint.of("t", constraints.record(zeta=constraints.bounded_text(3), alpha={"type": "boolean"}))
    assert list(constraint.schema["properties"]) == ["zeta", "alpha"] == constraint.schema["required"]
    assert list(JUDGE_QUALITY_REPLY.schema["anyOf"][0]["properties"]) == ["is_answer", *STUDY_C_METRICS]


def test_token_budgets_bound_the_longest_reply():
    schema = constraints.record(flag={"type": "boolean"}, score=constraints.integer(0, 100),
                                words={"type": "array", "items": constraints.bounded_text(3), "maxItems": 2})
    longest = '{"flag": false, "score": 100, "words": ["' + "😀" * 3 + '", "' + "😀" * 3 + '"]}'
    assert constraints.max_bytes(schema, "t") == len(longest.encode())
    assert Constraint.of("t", schema).token_budget == len(longest.encode()) + 1
    for unbounded, missing in (({"type": "string"}, "maxLength"), ({"type": "integer", "minimum": 0}, "maximum"),
                               ({"type": "array", "items": {"type": "boolean"}}, "maxItems")):
        with pytest.raises(InputError, match=rf"template t: .* needs .*{missing}"):
            constraints.max_bytes(unbounded, "t")
    with pytest.raises(InputError, match="template t: its reply schema is not a valid JSON Schema"):
        Constraint.of("t", {"type": "no-such-type"})


def test_the_constraint_is_part_of_the_cache_key_and_off_means_free_text():
    backend = types.SimpleNamespace(name="transformers", fingerprint="f")
    sampling = llm.Sampling(max_new_tokens=40)
    free = llm.request_key(backend, sampling, 5, "prompt")
    constrained = llm.request_key(backend, llm.constrained_sampling(sampling, JUDGE_QUALITY_REPLY), 5, "prompt",
                                  JUDGE_QUALITY_REPLY)
    assert free != constrained
    assert llm.constrained_sampling(sampling, None) == sampling
    assert llm.constrained_sampling(llm.Sampling(stop=("\n",)), JUDGE_GROUNDED_REPLY) == llm.Sampling(
        max_new_tokens=JUDGE_GROUNDED_REPLY.token_budget)
    assert subqueries_reply(3) is subqueries_reply(3) and subqueries_reply(3).key != \
        subqueries_reply(4).key


def test_a_budget_beyond_the_context_is_an_error_naming_the_template(tmp_path):
    class Backend:
        name, fingerprint, device, uncertainty_basis = "transformers", "f", "cpu", None
        token_basis = "tokenizer"

    config = llm.engine_config({"backend": "transformers", "model": "m", "max_prompt_tokens": 4000})
    engine = llm.Engine(config, Backend(), context_length=4096)
    with pytest.raises(InputError, match=r"template synthetic_queries: .* lower max_prompt_tokens to at most"):
        llm.generate([STEPS[2]], engine, tmp_path)


def test_an_override_that_no_longer_asks_for_the_schema_fields_warns(caplog):
    messages = [{"role": "user", "content": "Grade {answer} to {question}. Reply with JSON: is_answer, overall."}]
    with caplog.at_level(logging.WARNING):
        templates = load_templates({"judge_quality": {"messages": messages}})
    assert "prompts.judge_quality: the messages never mention ['accuracy', 'clarity', 'completeness'," in caplog.text
    assert templates["judge_quality"].constraint({}) is JUDGE_QUALITY_REPLY, "an override keeps its constraint"
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        load_templates({"subqueries": {"messages": [{"role": "user", "content": "{n} queries for {question}"}]}})
    assert caplog.text == ""


# ---- vllm: request building (the worker protocol: tests/test_llm.py; the real engine: tests/test_vllm.py) -------


def test_vllm_gets_structured_outputs_params_per_request(pytestconfig):
    spec = {"backend": "vllm", "model": SMOLLM2["model"], "sampling": {"max_new_tokens": 8, "stop": ["\n"]},
            "vllm": {"python": sys.executable}}
    backend = llm.load_engine(spec, pytestconfig.cache.mkdir("ragfrontier-models")).backend
    settings = llm.sampling_from({}, llm.engine_config(spec).sampling)
    free = backend.sampling_params(settings)
    assert free["structured"] is None and free["stop"] == ["\n"] and free["max_tokens"] == 8
    tool = backend.sampling_params(settings, TOOL_CALL_REPLY)
    assert tool["structured"] == {"json": TOOL_CALL_REPLY.schema_json} and tool["stop"] == []
    assert tool["max_tokens"] == TOOL_CALL_REPLY.token_budget
    ranking = backend.sampling_params(settings, ranking_reply(4))
    assert ranking["structured"] == {"grammar": constraints.permutation_grammar(4)}
    assert backend.llm_kwargs["structured_outputs_config"] == {"backend": "xgrammar", "disable_any_whitespace": True}
    assert "worker" not in vars(backend), "building requests starts no engine"


# ---- openai: response_format against a local server ---------------------------------------------------------


class SchemaServer(JsonHandler):
    """/v1/chat/completions that either honours response_format or rejects it ("reject" in the model name)."""

    bodies: ClassVar[list[dict]] = []

    def do_POST(self):
        body = self.read_json()
        SchemaServer.bodies.append(body)
        if "response_format" in body and "reject" in body["model"]:
            status, reply = 400, {"error": {"message": "response_format json_schema is not supported by this server"}}
        else:
            text = '{"search": "graph laplacian solvers"}' if "response_format" in body else "Search for it."
            status, reply = 200, chat_completion(text, prompt_tokens=30, completion_tokens=9)
        self.send_json(status, reply)


@pytest.fixture()
def schema_server():
    SchemaServer.bodies = []
    with serving(SchemaServer) as url:
        yield url


def _openai(base_url: str, **spec) -> llm.Engine:
    config = llm.engine_config({"backend": "openai", "model": "served", "base_url": base_url, "max_retries": 0,
                                "top_logprobs": 0, **spec}, "models.judge")
    return llm.Engine(config, OpenAIBackend(config, "models.judge"))


def test_openai_sends_the_schema_as_response_format(schema_server, tmp_path):
    table = llm.generate([STEPS[5]], _openai(schema_server), tmp_path)
    body = SchemaServer.bodies[-1]
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "tool_call", "schema": TOOL_CALL_REPLY.schema, "strict": True}}
    assert body["max_tokens"] == TOOL_CALL_REPLY.token_budget and "stop" not in body
    assert table["constrained"][0] and json.loads(table["text"][0]) == {"search": "graph laplacian solvers"}


def test_a_server_rejecting_response_format_names_the_key_to_turn_it_off(schema_server, tmp_path):
    with pytest.raises(InputError, match=r"rejected a request with a reply schema .*models\.judge\.structured_outputs: false"):
        llm.generate([STEPS[5]], _openai(schema_server, model="reject-me"), tmp_path)
    off = llm.generate([STEPS[5]], _openai(schema_server, model="reject-me", structured_outputs=False), tmp_path)
    assert "response_format" not in SchemaServer.bodies[-1] and not off["constrained"][0]
    assert off["status"][0] == "ok" and off["text"][0] == "Search for it."


class CompletionsServer(JsonHandler):
    """/v1/completions and /v1/models of a stand-in that says it is vLLM ("vllm" in the path prefix) or not; the
    reply text for a prompt containing "garbage" is not JSON."""

    bodies: ClassVar[list[dict]] = []

    def do_GET(self):
        owner = "vllm" if self.path.startswith("/vllm") else "someone"
        self.send_json(200, {"object": "list", "data": [{"id": "served", "object": "model", "owned_by": owner}]})

    def do_POST(self):
        body = self.read_json()
        CompletionsServer.bodies.append(body)
        if "garbage" in body["prompt"]:
            return self.send_json(200, "<html>not json</html>")
        self.send_json(200, {"choices": [{"text": '{"search": "graphs"}', "finish_reason": "stop", "index": 0}],
                             "usage": {"prompt_tokens": 40, "completion_tokens": 6}})


@pytest.mark.parametrize("owner", ["vllm", "other"])
def test_completions_mode_bodies_and_an_unreadable_reply(owner, pytestconfig, tmp_path):
    """With a `tokenizer`: the rendered prompt goes to /v1/completions; a vLLM server gets its own fields (the
    grammar, token ids, no second BOS), another server response_format (through extra_body: the client's
    completions call does not declare it); a 200 reply that is not JSON is that row's error, not the job's, unless
    every request of the call fails."""
    CompletionsServer.bodies = []
    with serving(CompletionsServer) as url:
        base = url.replace("/v1", "/vllm/v1") if owner == "vllm" else url
        spec = {"backend": "openai", "model": "served", "base_url": base, "max_retries": 0, "top_logprobs": 2,
                "tokenizer": SMOLLM2["model"]}
        engine = llm.load_engine(spec, pytestconfig.cache.mkdir("ragfrontier-models"), "models.judge")
        table = llm.generate([STEPS[5]], engine, tmp_path / "a")
        garbage = llm.generate([STEPS[5], llm.Request("g", TEMPLATES["answer_closed_book"], {"question": "garbage?"})],
                               engine, tmp_path / "b")
        with pytest.raises(InputError, match=r"all 1 requests to the server at .* \(model 'served'\) failed; most "
                                             r"common cause \(1×\): unreadable response from "):
            llm.generate([llm.Request("g", TEMPLATES["answer_closed_book"], {"question": "garbage?"})], engine,
                         tmp_path / "c")  # every request of the call failed: the stage stops, naming the server
    body = CompletionsServer.bodies[0]
    assert body["prompt"].startswith("<|im_start|>system") and "messages" not in body
    if owner == "vllm":
        assert body["structured_outputs"] == dict([TOOL_CALL_REPLY.grammar_spec()])
        assert body["add_special_tokens"] is False and body["return_tokens_as_token_ids"] is True
        assert "response_format" not in body
    else:
        assert body["response_format"]["json_schema"]["schema"] == TOOL_CALL_REPLY.schema
        assert not {"structured_outputs", "add_special_tokens", "return_tokens_as_token_ids"} & set(body)
    assert table["status"][0] == "ok" and json.loads(table["text"][0]) == {"search": "graphs"}
    assert garbage["status"].to_list() == ["ok", "error"] and garbage["error"][1].startswith("unreadable response from ")
