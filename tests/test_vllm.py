"""vLLM's CPU build as a real backend: the engine runs SmolLM2-135M-Instruct in .venv-vllm (built by
`./setup.sh --vllm`, which the README's test command runs). Greedy text against the transformers backend, token
log probabilities → the three uncertainty columns, structured outputs, a failed request recorded as an error,
a cache-hit run that never starts the engine, and a killed job that leaves no engine process behind. One engine
serves the module (it takes about a minute to start)."""

import json
import math
import subprocess
import sys

import pytest
from local_server import left_after, process_group

from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.backends.vllm import VLLM_ENV
from workflow_scripts.llm.constraints import Constraint
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.llm.templates import JUDGE_QUALITY_REPLY, TOOL_CALL_REPLY, Template

pytestmark = [pytest.mark.slow]

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
VLLM = {"backend": "vllm", "model": SMOLLM2, "max_prompt_tokens": 512, "batch_size": 8,
        "sampling": {"max_new_tokens": 16}, "vllm": {"max_model_len": 4096, "kv_cache_gib": 1}}
TRANSFORMERS = {"backend": "transformers", "model": SMOLLM2, "max_prompt_tokens": 512, "batch_size": 1,
                "sampling": {"max_new_tokens": 16}}
TEMPLATES = load_templates()
QUESTIONS = ("What is the capital of France?", "What do cats eat?", "Who wrote Hamlet?", "What is 2 + 2?",
             "What colour is the sky?", "Name a prime number.")


def _questions() -> list[llm.Request]:
    return [llm.Request(f"q{at}", TEMPLATES["answer_closed_book"], {"question": text}) for at, text in enumerate(QUESTIONS)]


@pytest.fixture(scope="module")
def vllm_engine(models_cache):
    assert (VLLM_ENV / "bin" / "python").is_file(), "run ./setup.sh --vllm first (the README's test command does)"
    engine = llm.load_engine(VLLM, models_cache)
    yield engine
    engine.backend.close()


@pytest.fixture(scope="module")
def vllm_answers(vllm_engine, tmp_path_factory):
    return llm.generate(_questions(), vllm_engine, tmp_path_factory.mktemp("vllm-cache"))


def test_vllm_greedy_text_matches_the_transformers_backend(vllm_answers, models_cache, tmp_path):
    reference = llm.generate(_questions(), llm.load_engine(TRANSFORMERS, models_cache), tmp_path)
    assert vllm_answers["status"].to_list() == ["ok"] * len(QUESTIONS)
    assert vllm_answers["prompt_tokens"].to_list() == reference["prompt_tokens"].to_list(), "the same prompt ids"
    same = [a == b for a, b in zip(vllm_answers["text"], reference["text"])]
    print(f"vllm vs transformers, greedy, float32: {sum(same)} of {len(same)} replies identical")
    # both float32 and greedy; vLLM's CPU attention kernels sum in another order, so a near-tie between two tokens
    # can flip late in a reply (docs/models.md, "vLLM on CPU"): the first tokens must agree everywhere
    assert sum(same) >= len(QUESTIONS) - 1, list(zip(vllm_answers["text"], reference["text"]))
    for a, b in zip(vllm_answers["text"], reference["text"]):
        assert a.split()[:3] == b.split()[:3], (a, b)


def test_vllm_logprobs_fill_the_uncertainty_columns(vllm_answers):
    for row in vllm_answers.iter_rows(named=True):
        assert row["backend"] == "vllm" and row["uncertainty_basis"] == "top_5" and row["source"] == "generated"
        assert 0 < row["min_token_prob"] <= 1 and -math.inf < row["sequence_logprob"] <= 0
        assert 0 <= row["mean_entropy"] <= math.log(5) + 1e-6, "top-5 entropy is at most log 5"
        assert 1 <= row["completion_tokens"] <= 16 and row["latency_s"] > 0


def test_vllm_structured_outputs_and_a_failed_request_is_recorded(vllm_engine, tmp_path):
    judge = llm.Request("judge", TEMPLATES["judge_quality"], {"question": "What do cats eat?", "answer": "Fish."})
    rerank = llm.Request("rerank", TEMPLATES["rerank_listwise"], {"question": "Which paper is about topic 2?", "n": "5"},
                         tuple(f"Paper {at} studies topic {at}." for at in range(1, 6)))
    broken = Constraint.of("tool_call", TOOL_CALL_REPLY.schema, "root ::= no_such_rule")
    template = Template("tool_call", TEMPLATES["tool_call"].messages, constraint=lambda fields: broken)
    failing = llm.Request("broken", template, {"question": "Any papers on graphs?"})
    table = llm.generate([judge, rerank, failing], vllm_engine, tmp_path)
    rows = {row["request_id"]: row for row in table.iter_rows(named=True)}
    assert rows["judge"]["status"] == "ok" and rows["judge"]["constrained"]
    assert JUDGE_QUALITY_REPLY.check(json.loads(rows["judge"]["text"])) is None
    assert sorted(json.loads(rows["rerank"]["text"])) == [1, 2, 3, 4, 5], "the permutation grammar, on vLLM"
    assert rows["broken"]["status"] == "error" and rows["broken"]["error"].startswith("vllm: ")
    again = llm.generate([judge, failing], vllm_engine, tmp_path)
    assert again["source"].to_list() == ["cache", "generated"], "an error is never cached"


def test_vllm_prefix_cache_reset_keeps_the_replies(vllm_answers, vllm_engine, tmp_path):
    """benchmarks/bench_multistep.py empties vLLM's prefix cache between the sides it times: vLLM must accept the
    reset (no request running) and the prompts computed afresh must give the same replies."""
    vllm_engine.backend.reset_prefix_cache()
    again = llm.generate(_questions(), vllm_engine, tmp_path)
    assert set(again["source"]) == {"generated"} and again["text"].to_list() == vllm_answers["text"].to_list()


def test_vllm_cache_hit_never_starts_the_engine(vllm_answers, vllm_engine, models_cache, tmp_path):
    cache = tmp_path / "cache"
    llm.generate(_questions(), vllm_engine, cache)
    fresh = llm.load_engine(VLLM, models_cache)
    table = llm.generate(_questions(), fresh, cache)
    assert set(table["source"]) == {"cache"} and table["text"].to_list() == vllm_answers["text"].to_list()
    assert "worker" not in vars(fresh.backend), "an all-cached stage must not start vLLM"


JOB_THAT_IS_KILLED = """
import json, sys, time
from pathlib import Path
from workflow_scripts.llm import engine as llm
engine = llm.load_engine(json.loads(sys.argv[1]), Path(sys.argv[2]))
print(engine.backend.worker.pid, flush=True)  # the engine is up
time.sleep(600)
"""


def test_a_killed_job_leaves_no_vllm_engine_running(models_cache, project_root):
    """SIGKILL a job whose engine is up: the worker and vLLM's engine processes (its process group) end too."""
    job = subprocess.Popen([sys.executable, "-c", JOB_THAT_IS_KILLED, json.dumps(VLLM), str(models_cache)],
                           cwd=project_root, stdout=subprocess.PIPE, text=True)
    try:
        worker = int(job.stdout.readline())
        engine = process_group(worker)
        assert any("VLLM" in name for name in engine), f"vLLM's engine runs in the worker's group: {engine}"
    finally:
        job.kill()
        job.wait()
    left = left_after(lambda: process_group(worker))
    assert not left, f"still running after the job was killed: {left}"
