"""Probability-weighted judge scores (judging/scores.py): the score fields a schema declares, the expected value at
the token where each score was written (masked_exact, top_k, argmax_only), the Study C gate, the openai path
against a local server returning top_logprobs, and the real SmolLM2 on transformers and vLLM against a hand
computation from the model's own logits."""

import json
import math
from typing import ClassVar

import numpy as np
import polars as pl
import pytest
from llm_fakes import WordTokenBackend
from local_server import JsonHandler, chat_completion, serving

from workflow_scripts.core.errors import InputError
from workflow_scripts.judging import judges, scores
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.backends import ALTERNATIVES, Outcome, TokenStep
from workflow_scripts.llm.backends.openai import OpenAIBackend
from workflow_scripts.llm.constraints import Constraint, integer, record
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.llm.templates import JUDGE_GROUNDED_REPLY, JUDGE_QUALITY_REPLY

TEMPLATES = load_templates()
LOG = math.log


def _steps(*tokens: str | tuple[str, dict[str, float]], complete: bool = True) -> tuple[TokenStep, ...]:
    """Steps of a reply: a plain token, or (token, {alternative: probability})."""
    out = []
    for token in tokens:
        if isinstance(token, str):
            out.append(TokenStep(token, ((token, 0.0),), complete, None))
        else:
            text, alternatives = token
            out.append(TokenStep(text, tuple((alt, LOG(p)) for alt, p in alternatives.items()), complete, 0.9))
    return tuple(out)


def test_score_fields_follow_the_schema_and_refuse_values_a_first_token_cannot_tell_apart():
    assert scores.score_fields(JUDGE_GROUNDED_REPLY.schema, "judge_grounded") == ("abstained", "correctness", "faithfulness")
    assert scores.score_fields(JUDGE_QUALITY_REPLY.schema, "judge_quality")[0] == "is_answer"
    ten = Constraint.of("my_judge", record(score=integer(1, 10)))
    with pytest.raises(InputError, match=r"template my_judge: the score field 'score' has values 1 and 10"):
        scores.score_fields(ten.schema, "my_judge")
    refusal = {"is_answer": False, "accuracy": 0, "completeness": 0, "faithfulness": 0, "relevance": 0, "clarity": 0}
    assert scores.allowed_values(JUDGE_QUALITY_REPLY.schema, refusal, "overall") == [0]
    assert scores.allowed_values(JUDGE_QUALITY_REPLY.schema, {"is_answer": True}, "accuracy") == [1, 2, 3, 4, 5]


def test_expected_scores_from_masked_and_top_k_distributions():
    reply = {"abstained": False, "correctness": 2, "faithfulness": 1}
    fields = scores.score_fields(JUDGE_GROUNDED_REPLY.schema, "judge_grounded")
    steps = _steps('{"', "abst", 'ained":', ("false", {"false": 0.8, "t": 0.2}), ',"', "correct", 'ness":',
                   ("2", {"2": 0.5, "1": 0.3, "0": 0.2}), ',"', "faith", 'fulness":', ("1", {"1": 0.6, "2": 0.4}), "}")
    found = scores.field_scores(JUDGE_GROUNDED_REPLY.schema, fields, reply, steps)
    assert found["abstained"].expected == pytest.approx(0.2)  # P(true): "t" begins true
    assert found["correctness"].expected == pytest.approx(0.5 * 2 + 0.3 * 1)
    assert found["faithfulness"].expected == pytest.approx(0.4 * 2 + 0.6 * 1)
    assert found["correctness"].basis == scores.MASKED_EXACT and found["correctness"].mass == 0.9
    # a server's top k (unmasked): a token the grammar does not allow there is not a value; the rest renormalise
    top = _steps('{"abstained": ', ("false", {"false": 0.9, "true": 0.05}), ', "correctness": ',
                 ("2", {"2": 0.4, "two": 0.3, "1": 0.1}), ', "faithfulness": ', ("1", {"1": 0.5}), "}", complete=False)
    found = scores.field_scores(JUDGE_GROUNDED_REPLY.schema, fields, reply, top)
    assert found["correctness"].expected == pytest.approx((0.4 * 2 + 0.1) / 0.5) and found["correctness"].basis == "top_k"
    assert scores.weakest([s.basis for s in found.values()]) == scores.TOP_K
    # no steps (a server without log-probabilities): the written values
    bare = scores.field_scores(JUDGE_GROUNDED_REPLY.schema, fields, reply, None)
    assert bare["correctness"].expected == 2.0 and bare["correctness"].basis == scores.ARGMAX_ONLY
    # an abstention: faithfulness is forced to null
    forced = scores.field_scores(JUDGE_GROUNDED_REPLY.schema, fields, {"abstained": True, "correctness": 0, "faithfulness": None}, None)
    assert forced["faithfulness"].expected is None and forced["faithfulness"].basis == scores.MASKED_EXACT


class GateJudge(WordTokenBackend):
    """A quality judge that refuses ("is_answer": false) unless the is_answer-true branch is forced, with steps."""

    fingerprint = "gate-judge"

    def __init__(self):
        self.schemas = []

    def complete(self, batch, sampling):
        outcomes = []
        for prompt in batch:
            forced = "anyOf" not in prompt.constraint.schema
            self.schemas.append(forced)
            if forced:
                reply = {"is_answer": True, **{m: 4 for m in ("accuracy", "completeness", "faithfulness", "relevance",
                                                               "clarity", "overall")}}
                tokens = ['{"is_answer":', "true"]
                for name in list(reply)[1:]:
                    tokens += [f',"{name}":', ("4", {"4": 0.5, "2": 0.5})]
            else:
                reply = {"is_answer": False, **dict.fromkeys(("accuracy", "completeness", "faithfulness", "relevance",
                                                               "clarity", "overall"), 0)}
                tokens = ['{"is_answer":', ("false", {"false": 0.7, "true": 0.3})]
                tokens += [f',"{name}":0' for name in list(reply)[1:]]
            outcomes.append(Outcome(text=json.dumps(reply, separators=(",", ":")), finish_reason="stop",
                                    prompt_tokens=10, completion_tokens=20, steps=_steps(*tokens, "}")))
        return outcomes


def test_a_gated_refusal_is_rescored_under_the_answer_branch(tmp_path):
    backend = GateJudge()
    config = llm.engine_config({"backend": "transformers", "model": "gate"}, "models.judge")
    items = pl.DataFrame({"item_id": ["q1"], "question": ["Why?"], "answer": ["Because."]})
    table = judges.judge(judges.QUALITY, items, llm.Engine(config, backend), tmp_path, TEMPLATES)
    row = table.row(0, named=True)
    assert backend.schemas == [False, True]  # the reply, then the re-score under is_answer true
    assert row["is_answer"] is False and row["overall"] == 0 and row["is_answer_prob"] == pytest.approx(0.3)
    assert row["overall_given_is_answer"] == pytest.approx(3.0)  # 0.5 · 4 + 0.5 · 2
    assert row["overall_expected"] == pytest.approx(0.3 * 3.0) and row["score_basis"] == "masked_exact"


class LogprobServer(JsonHandler):
    """/v1/chat/completions returning a grounded-judge reply with top_logprobs per token ("bare" model: none)."""

    bodies: ClassVar[list[dict]] = []
    TOKENS: ClassVar[list] = [('{"abstained": ', {}), ("false", {"false": 0.9, "true": 0.1}),
                              (', "correctness": ', {}), ("1", {"1": 0.5, "2": 0.25, "0": 0.25}),
                              (', "faithfulness": ', {}), ("2", {"2": 1.0}), ("}", {})]

    def do_POST(self):
        body = self.read_json()
        LogprobServer.bodies.append(body)
        text = "".join(token for token, _ in self.TOKENS)
        content = [{"token": token, "logprob": LOG(top.get(token, 1.0)),
                    "top_logprobs": [{"token": alt, "logprob": LOG(p)} for alt, p in (top or {token: 1.0}).items()]}
                   for token, top in self.TOKENS]
        logprobs = {} if body["model"] == "bare" else {"logprobs": {"content": content}}
        self.send_json(200, chat_completion(text, **logprobs))


@pytest.fixture()
def logprob_server():
    LogprobServer.bodies = []
    with serving(LogprobServer) as url:
        yield url


def test_openai_expected_scores_come_from_top_logprobs_and_a_bare_server_is_warned_about(logprob_server, tmp_path,
                                                                                          caplog):
    items = pl.DataFrame({"item_id": ["q1"], "question": ["Which dataset?"], "answer": ["SQuAD."],
                          "references": [["SQuAD"]], "evidence": [["We train on SQuAD."]]})

    def engine(model):
        config = llm.engine_config({"backend": "openai", "model": model, "base_url": logprob_server, "max_retries": 0,
                                    "top_logprobs": 5}, "models.judge")
        return llm.Engine(config, OpenAIBackend(config, "models.judge"))

    row = judges.judge(judges.GROUNDED, items, engine("served"), tmp_path / "a", TEMPLATES).row(0, named=True)
    assert LogprobServer.bodies[-1]["top_logprobs"] == ALTERNATIVES and "response_format" in LogprobServer.bodies[-1]
    assert row["correctness"] == 1 and row["correctness_expected"] == pytest.approx(0.5 + 0.25 * 2)
    assert row["abstained_prob"] == pytest.approx(0.1) and row["score_basis"] == "top_k"
    assert row["correctness_mass"] is None
    with caplog.at_level("WARNING"):
        bare = judges.judge(judges.GROUNDED, items, engine("bare"), tmp_path / "b", TEMPLATES).row(0, named=True)
    assert bare["score_basis"] == "argmax_only" and bare["correctness_expected"] == 1.0
    assert "bare" in caplog.text and "argmax_only" in caplog.text


# ---- the real SmolLM2: the expected score equals a hand computation from the model's logits --------------------

SMOLLM2 = {"backend": "transformers", "model": "HuggingFaceTB/SmolLM2-135M-Instruct", "batch_size": 2,
           "max_prompt_tokens": 512, "sampling": {"max_new_tokens": 16}}
ITEM = pl.DataFrame({"item_id": ["q1"], "question": ["Which dataset do the authors train on?"],
                     "answer": ["They train on SQuAD."], "references": [["SQuAD"]],
                     "evidence": [["We train our reader on SQuAD 1.1 and evaluate on Natural Questions."]]})


def _request() -> llm.Request:
    return llm.Request("q1", TEMPLATES["judge_grounded"], *judges.GROUNDED.request_parts(ITEM.row(0, named=True)))


def _hand_expected(engine: llm.Engine, generated: dict, field: str, folder) -> tuple[float, float]:
    """E[score] at `field`'s value token by hand: the transformers model's logits after the prompt and the reply's
    own tokens up to the value, softmax over the digit tokens of 0–2 (what the grammar allows there), and the
    unmasked mass on them."""
    import torch
    from transformers import AutoModelForCausalLM

    chat = engine.backend.chat
    prompt = llm.fit(_request(), engine.backend, 512).prompt.text
    tokens = [step["token"] for step in generated["token_steps"]]
    key = next(index for index in range(len(tokens)) if "".join(tokens[:index]).endswith(f'"{field}":'))
    at = next(index for index in range(key, len(tokens)) if tokens[index].strip())  # the value's token
    pieces = [chat.encode(token) for token in tokens[:at]]
    assert all(len(piece) == 1 for piece in pieces)  # each generated token's text is that one token
    ids = chat.encode(prompt) + [piece[0] for piece in pieces]
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.inference_mode():
        logits = model(torch.tensor([ids])).logits[0, -1].double()
    digits = [chat.encode(str(value))[0] for value in (0, 1, 2)]
    probabilities = logits.softmax(-1)[digits]
    weights = torch.tensor([0.0, 1.0, 2.0], dtype=torch.double)
    return float((probabilities / probabilities.sum()) @ weights), float(probabilities.sum())


@pytest.mark.slow
def test_transformers_expected_score_equals_the_hand_computation(pytestconfig, tmp_path):
    engine = llm.load_engine(SMOLLM2, pytestconfig.cache.mkdir("ragfrontier-models"), "models.judge")
    generated = llm.generate([_request()], engine, tmp_path).row(0, named=True)
    row = judges.judge(judges.GROUNDED, ITEM, engine, tmp_path, TEMPLATES).row(0, named=True)  # the same, cached
    expected, mass = _hand_expected(engine, generated, "correctness", engine.backend.chat.folder)
    assert row["score_basis"] == "masked_exact" and row["reply"] == generated["text"]
    assert row["correctness_expected"] == pytest.approx(expected, abs=1e-4)
    assert row["correctness_mass"] == pytest.approx(mass, abs=1e-4)


@pytest.mark.slow
def test_vllm_expected_score_matches_the_hand_computation(pytestconfig, tmp_path):
    # vLLM computes log-probabilities after the grammar's bitmask: its top 20 list every allowed digit
    cache = pytestconfig.cache.mkdir("ragfrontier-models")
    engine = llm.load_engine({**SMOLLM2, "backend": "vllm", "vllm": {"kv_cache_gib": 1}}, cache, "models.judge")
    try:
        generated = llm.generate([_request()], engine, tmp_path).row(0, named=True)
        row = judges.judge(judges.GROUNDED, ITEM, engine, tmp_path, TEMPLATES).row(0, named=True)
    finally:
        engine.backend.close()
    reference = llm.load_engine(SMOLLM2, cache, "models.judge")
    expected, _ = _hand_expected(reference, generated, "correctness", reference.backend.chat.folder)
    assert row["score_basis"] == "masked_exact" and row["correctness_mass"] is None
    assert {alt["text"] for step in generated["token_steps"] if step["complete"] and len(step["alternatives"]) == 3
            for alt in step["alternatives"]} >= {"0", "1", "2"}
    # vLLM's CPU kernels are not transformers': the same distribution to a few hundredths
    assert row["correctness_expected"] == pytest.approx(expected, abs=0.03)
