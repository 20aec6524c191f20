"""The openai backend against a real OpenAI-compatible server: vLLM's own (`llm/server.py`, from .venv-vllm, which
the README's test command builds) serving SmolLM2-135M-Instruct on CPU, with the official `openai` client.

Served and offline runs of the same model see the same prompt ids (`tokenizer`: completions mode) and decode the same
way (the offline backend's engine arguments), so free text, judge replies with their per-step alternatives, and the
uncertainty columns are compared with the offline `vllm` backend row by row. Also: a request the server rejects is
that row's error, a model the server does not serve and an unreachable server are one error each before any work,
and a job killed while its server starts leaves no process behind. One server serves the module.

One engine per run (`serve: true`): a block finds the run's server and shares the offline engine's cache keys; the
tiny DAG run with one server and with an engine per job writes the same tables; a killed run leaves no server."""

import json
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from batch_server import BatchServer
from local_server import left_after, process_group, serving
from tiny_demo import differences, offline_env, tiny_workdir
from workflow_helpers import SNAKEMAKE, snakemake

from workflow_scripts.core.errors import InputError
from workflow_scripts.judging import judges
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.backends import openai_batch
from workflow_scripts.llm.backends.vllm import VLLM_ENV
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.llm.server import SERVED_NAME, RunServerBackend, registry, run_batch, serve, server_key
from workflow_scripts.llm.templates import JUDGE_QUALITY_REPLY

pytestmark = [pytest.mark.slow]

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
VLLM = {"backend": "vllm", "model": SMOLLM2, "max_prompt_tokens": 512, "batch_size": 8,
        "sampling": {"max_new_tokens": 24}, "vllm": {"max_model_len": 2048, "kv_cache_gib": 1}}
TEMPLATES = load_templates()
QUESTIONS = ("What is the capital of France?", "What do cats eat?", "Who wrote Hamlet?", "What is 2 + 2?")
EVIDENCE = ("Paris is the capital and largest city of France.", "Cats are obligate carnivores; they eat meat.")


def _requests() -> list[llm.Request]:
    """Closed-book and RAG answers (evidence cut by the tokenizer) and two constrained replies."""
    answers = [llm.Request(f"q{at}", TEMPLATES["answer_closed_book"], {"question": text})
               for at, text in enumerate(QUESTIONS)]
    rag = [llm.Request(f"rag{at}", TEMPLATES["answer_rag"], {"question": text}, EVIDENCE)
           for at, text in enumerate(QUESTIONS[:2])]
    judge = llm.Request("judge", TEMPLATES["judge_quality"], {"question": "What do cats eat?", "answer": "Meat."})
    rerank = llm.Request("rerank", TEMPLATES["rerank_listwise"], {"question": "Which paper is about topic 2?", "n": "4"},
                         tuple(f"Paper {at} studies topic {at}." for at in range(1, 5)))
    return answers + rag + [judge, rerank]


@pytest.fixture(scope="module")
def served(models_cache):
    """The openai block of a vLLM server of VLLM for the module."""
    assert (VLLM_ENV / "bin" / "python").is_file(), "run ./setup.sh --vllm first (the README's test command does)"
    with serve(VLLM, models_cache) as block:
        yield block


@pytest.fixture(scope="module")
def both(served, models_cache, tmp_path_factory):
    """(served table, offline table) of the same requests."""
    served_table = llm.generate(_requests(), llm.load_engine(served, models_cache), tmp_path_factory.mktemp("served"))
    offline = llm.load_engine(VLLM, models_cache)
    try:
        offline_table = llm.generate(_requests(), offline, tmp_path_factory.mktemp("offline"))
    finally:
        offline.backend.close()
    return served_table, offline_table


def test_served_and_offline_give_the_same_rows(both):
    served, offline = both
    assert served["status"].to_list() == ["ok"] * len(_requests()), served["error"].to_list()
    assert served["backend"].unique().to_list() == ["openai"] and offline["backend"].unique().to_list() == ["vllm"]
    same = ["request_id", "text", "finish_reason", "prompt_tokens", "completion_tokens", "constrained",
            "evidence_kept", "evidence_truncated", "uncertainty_basis", "token_basis"]
    for served_row, offline_row in zip(served.select(same).iter_rows(named=True), offline.select(same).iter_rows(named=True)):
        assert served_row == offline_row, "served and offline differ"
    for column in ("mean_entropy", "min_token_prob", "sequence_logprob"):
        for a, b in zip(served[column], offline[column]):
            assert (a is None and b is None) or a == pytest.approx(b, rel=1e-4, abs=1e-5), column


def test_served_constrained_replies_keep_every_allowed_alternative(both):
    served, offline = both
    rows = {row["request_id"]: row for row in served.iter_rows(named=True)}
    assert JUDGE_QUALITY_REPLY.check(json.loads(rows["judge"]["text"])) is None
    assert sorted(json.loads(rows["rerank"]["text"])) == [1, 2, 3, 4], "the permutation grammar, served"
    offline_rows = {row["request_id"]: row for row in offline.iter_rows(named=True)}
    for name in ("judge", "rerank"):
        steps, reference = rows[name]["token_steps"], offline_rows[name]["token_steps"]
        assert [step["token"] for step in steps] == [step["token"] for step in reference]
        assert [step["complete"] for step in steps] == [step["complete"] for step in reference]
        assert any(step["complete"] for step in steps), "masked tokens come back as -9999: every allowed one listed"


def test_served_judge_scores_are_masked_exact(served, models_cache, tmp_path):
    items = pl.DataFrame({
        "item_id": ["q1"], "question": ["What do cats eat?"], "answer": ["Cats eat meat."],
        "references": [["meat"]], "evidence": [["Cats are obligate carnivores."]]})
    judge = {**served, "sampling": {"max_new_tokens": 64}}
    row = judges.judge(judges.GROUNDED, items, llm.load_engine(judge, models_cache, "models.judge"), tmp_path,
                       TEMPLATES).row(0, named=True)
    assert row["score_basis"] == "masked_exact", row


def test_vllms_batch_runner_reads_the_batch_file_the_pipeline_writes(served, models_cache, tmp_path, monkeypatch):
    """The Batch API end to end with vLLM's own batch runner (`vllm run-batch`, the served model's engine) behind the
    files / batches stand-in: the pipeline writes the batch file, vLLM runs it, and the pipeline reads its output file
    into the rows an online run of the same requests gets from vLLM's server. Chat messages (vLLM's runner serves
    /v1/chat/completions only), so the server applies the chat template on both sides."""
    monkeypatch.setattr(openai_batch.time, "sleep", lambda seconds: None)

    def process(content: str) -> str:
        (tmp_path / "input.jsonl").write_text(content)
        run_batch(VLLM, models_cache, tmp_path / "input.jsonl", tmp_path / "output.jsonl")
        return (tmp_path / "output.jsonl").read_text()

    chat = {"backend": "openai", "model": SERVED_NAME, "max_prompt_tokens": 512, "sampling": {"max_new_tokens": 24},
            "top_logprobs": 5}
    asked = _requests()[:3] + [_requests()[6]]  # free text and a constrained judge reply
    BatchServer.reset(process=process, owned_by="vllm", models=(SERVED_NAME,))
    with serving(BatchServer) as url:
        batched = llm.generate(asked, llm.load_engine({**chat, "base_url": url, "batch": True}, models_cache),
                               tmp_path / "batch")
    online = llm.generate(asked, llm.load_engine({**chat, "base_url": served["base_url"]}, models_cache),
                          tmp_path / "online")
    assert batched["status"].to_list() == ["ok"] * len(asked), batched["error"].to_list()
    assert BatchServer.creates == 2, "a shard's free-text requests and its constrained ones are a batch each"
    same = ["request_id", "text", "finish_reason", "prompt_tokens", "completion_tokens", "constrained", "token_basis"]
    assert batched.select(same).rows() == online.select(same).rows()
    assert batched["mean_entropy"].to_list() == pytest.approx(online["mean_entropy"].to_list(), rel=1e-3)


def test_a_call_whose_every_request_the_server_rejects_stops_naming_the_server_and_the_cause(served, models_cache,
                                                                                             tmp_path):
    engine = llm.load_engine(served, models_cache)
    with pytest.raises(InputError, match=r"all 2 requests to the server at .* failed; most common cause \([12]×\): "
                                         r"HTTP 400 from .*2048"):
        llm.generate(_requests()[:2], engine, tmp_path, {"max_new_tokens": 4000})  # past max_model_len 2048


def test_a_model_the_server_does_not_serve_and_an_unreachable_server_stop_before_any_work(served, models_cache):
    with pytest.raises(InputError, match=rf"models.judge.model: the server at .* does not serve 'gpt-9'; it serves "
                                         rf"{SERVED_NAME}"):
        llm.load_engine({**served, "model": "gpt-9"}, models_cache, "models.judge")
    with pytest.raises(InputError, match=r"models.judge.base_url: no OpenAI-compatible server answers at "
                                         r"http://127.0.0.1:9/v1"):
        llm.load_engine({**served, "base_url": "http://127.0.0.1:9/v1", "max_retries": 0}, models_cache, "models.judge")


JOB_THAT_IS_KILLED = """
import json, logging, sys
from pathlib import Path
from workflow_scripts.llm.server import serve
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
with serve(json.loads(sys.argv[1]), Path(sys.argv[2])):
    pass
"""


def test_a_job_killed_while_its_server_starts_leaves_no_process(models_cache, project_root):
    job = subprocess.Popen([sys.executable, "-c", JOB_THAT_IS_KILLED, json.dumps(VLLM), str(models_cache)],
                           cwd=project_root, stdout=subprocess.PIPE, text=True)
    try:
        line = next(line for line in job.stdout if "(process group " in line)  # after any conversion lines
        group = int(line.split("(process group ")[1].split(")")[0])
        deadline = time.monotonic() + 180
        while len(process_group(group)) < 2 and time.monotonic() < deadline:  # vLLM's engine process has started
            time.sleep(0.5)
        assert len(process_group(group)) >= 2, process_group(group)
    finally:
        job.kill()
        job.wait()
    left = left_after(lambda: process_group(group))
    assert not left, f"still running after the job was killed: {left}"


# ---- one engine per run: `serve: true` ------------------------------------------------------------------------


def test_a_serve_block_uses_the_runs_server_and_shares_the_offline_cache(served, models_cache, tmp_path, monkeypatch):
    """A `serve: true` block finds the run's server in the registry and writes the rows and cache entries the
    offline engine would: an offline run afterwards finds every request in the cache."""
    block = {**VLLM, "serve": True}
    with pytest.raises(InputError, match=r"models.generator.serve is true, but no server of this run answers"):
        llm.load_engine(block, tmp_path / "no-registry")
    entry = registry(models_cache) / f"{server_key(llm.engine_config(block))}.json"
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text(json.dumps(served))
    try:
        engine = llm.load_engine(block, models_cache)
        table = llm.generate(_requests()[:3], engine, tmp_path / "cache")
    finally:
        entry.unlink()
    assert isinstance(engine.backend, RunServerBackend) and table["status"].to_list() == ["ok"] * 3
    assert table["backend"].unique().to_list() == ["vllm"] and table["device"].unique().to_list() == ["cpu"]
    offline = llm.load_engine(VLLM, models_cache)
    again = llm.generate(_requests()[:3], offline, tmp_path / "cache")
    assert again["source"].to_list() == ["cache"] * 3, "the same cache keys as offline"
    assert "worker" not in vars(offline.backend), "nothing left to generate: the offline engine never started"


def vllm_processes() -> set[int]:
    """Processes of vLLM's server or engine (a worker started with --serve, VLLM::EngineCore, VLLM::Worker)."""
    found = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            name = (proc / "comm").read_text()
        except OSError:
            continue
        if b"vllm_worker.py --serve" in command or name.startswith("VLLM::"):
            found.add(int(proc.name))
    return found


# One request at a time on both sides: vLLM's CPU kernels sum in an order that depends on the batch's shape, so a
# served run's log probabilities match an offline run's only when both batch alike (with the demo's batches the
# texts, token counts and judgments are the same and probabilities differ by at most ~3e-5 relative: docs/models.md,
# "Served models"); the offline backend batches a shard, the server what is in flight.
ONE_AT_A_TIME = {"backend": "vllm", "shard_size": 1, "vllm": {"kv_cache_gib": 1}}
SERVED_TINY = {role: {**ONE_AT_A_TIME, "serve": True} for role in ("generator", "judge")}
PER_JOB_TINY = {role: ONE_AT_A_TIME for role in ("generator", "judge")}


@pytest.mark.integration
def test_one_server_per_run_writes_the_tables_of_an_engine_per_job(tmp_path):
    """The tiny DAG with `serve: true` (one server, started by onstart, stopped by onsuccess) and with an engine per
    LLM job: the same tables; no vLLM process outlives either run."""
    before = vllm_processes()
    (tmp_path / "served").mkdir()
    (tmp_path / "per_job").mkdir()
    served_work = tiny_workdir(tmp_path / "served", SERVED_TINY)
    served_log = snakemake(served_work).stdout
    assert served_log.count("one vLLM server for the run's LLM jobs (models.generator, models.judge)") == 1
    assert not vllm_processes() - before, "the run's server and its engine are gone when the run ends"
    assert list(registry(served_work / "results" / "cache" / "models").glob("*.json")) == []
    per_job = tiny_workdir(tmp_path / "per_job", PER_JOB_TINY)
    snakemake(per_job)
    assert differences(served_work, per_job) == []


@pytest.mark.integration
def test_a_killed_run_leaves_no_server(tmp_path):
    work = tiny_workdir(tmp_path, SERVED_TINY)
    before = vllm_processes()
    run = subprocess.Popen([*SNAKEMAKE, "--cores", "2"], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, env=offline_env())
    try:
        for line in run.stdout:
            if "one vLLM server for the run" in line:
                break
        assert vllm_processes() - before, "the server runs while the run does"
    finally:
        run.kill()  # as `kill -9` of snakemake: no onerror, no atexit; the server's watchdog must end it
        run.wait()
    left = left_after(lambda: vllm_processes() - before, seconds=60)
    assert not left, f"still running after the run was killed: {left}"
