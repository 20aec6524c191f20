"""The OpenAI Batch API path of the openai backend (`batch: true`, llm/backends/openai_batch.py) against a local
stand-in of the files and batches endpoints (tests/batch_server.py): the rows equal an online run's, a request the
output leaves out or fails is that row's error, a failed batch makes every row an error, and a run killed while its
batch is pending resumes that batch instead of submitting it again. vLLM's own batch runner reads the file the
pipeline writes in tests/test_served.py."""

import json

import pytest
from batch_server import BatchServer
from local_server import serving

from workflow_scripts.core.errors import InputError
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.backends import openai_batch
from workflow_scripts.llm.rendering import load_templates

TEMPLATES = load_templates()
SAME = ["request_id", "status", "text", "finish_reason", "prompt_tokens", "completion_tokens", "mean_entropy",
        "uncertainty_basis", "evidence_kept", "token_basis", "key"]


@pytest.fixture()
def server():
    BatchServer.reset()
    with serving(BatchServer) as url:
        yield url


def requests(*questions):
    return [llm.Request(f"q{at}", TEMPLATES["answer_closed_book"], {"question": text}) for at, text in enumerate(questions)]


def engine(url, tmp_path, **settings):
    spec = {"backend": "openai", "model": "m", "base_url": url, "max_retries": 0, **settings}
    return llm.load_engine(spec, tmp_path / "models")


def no_wait(monkeypatch):
    monkeypatch.setattr(openai_batch.time, "sleep", lambda seconds: None)


def test_a_batch_run_writes_the_rows_of_an_online_run(server, tmp_path, monkeypatch):
    no_wait(monkeypatch)
    asked = requests("What is the capital of France?", "Who wrote Hamlet?", "What do cats eat?")
    batched = llm.generate(asked, engine(server, tmp_path, batch=True, batch_poll_s=0.01), tmp_path / "batch")
    assert (BatchServer.creates, BatchServer.online) == (1, 0)
    online = llm.generate(asked, engine(server, tmp_path), tmp_path / "online")
    assert BatchServer.online == 3
    assert batched.select(SAME).rows() == online.select(SAME).rows()
    assert batched["status"].to_list() == ["ok"] * 3 and batched["text"][0].startswith("reply to")
    line = json.loads(next(iter(BatchServer.files.values())).decode().splitlines()[0])
    assert (line["custom_id"], line["method"], line["url"]) == ("request-0", "POST", "/v1/chat/completions")
    assert line["body"]["model"] == "m" and line["body"]["messages"][-1]["role"] == "user"
    assert not list((tmp_path / "models" / openai_batch.STATE_FOLDER).glob("*.json")), "the record goes once read"


def test_lines_the_output_leaves_out_or_fails_are_error_rows(server, tmp_path, monkeypatch):
    no_wait(monkeypatch)
    BatchServer.drop = frozenset({"request-1"})
    table = llm.generate(requests("first?", "second?", "a bad one?"), engine(server, tmp_path, batch=True), tmp_path / "c")
    rows = {row["request_id"]: row for row in table.iter_rows(named=True)}
    assert rows["q0"]["status"] == "ok"
    assert rows["q1"]["status"] == "error" and rows["q1"]["error"] == "batch batch-1: its output has no line for request-1"
    assert rows["q2"]["error"] == "HTTP 400 in batch batch-1: unknown parameter"
    again = llm.generate(requests("first?", "second?", "a bad one?"), engine(server, tmp_path, batch=True), tmp_path / "c")
    assert BatchServer.creates == 2 and again["source"].to_list() == ["cache", "generated", "generated"], \
        "the failed rows are not cached: the next run sends them again, in a new batch"


def test_a_failed_batch_stops_the_stage_naming_the_server_and_the_cause(server, tmp_path, monkeypatch):
    no_wait(monkeypatch)
    BatchServer.fail_with = "the input file has a line that is not JSON"
    with pytest.raises(InputError, match=r"all 2 requests to the server at .* failed; most common cause \(2×\): batch "
                                         r"batch-1 failed: the input file has a line that is not JSON"):
        llm.generate(requests("one?", "two?"), engine(server, tmp_path, batch=True), tmp_path / "c")


def test_a_run_killed_while_its_batch_is_pending_resumes_it(server, tmp_path, monkeypatch):
    def killed(seconds):
        raise KeyboardInterrupt  # as a kill during the wait: the batch stays pending on the server

    monkeypatch.setattr(openai_batch.time, "sleep", killed)
    asked = requests("What is the capital of France?", "Who wrote Hamlet?")
    with pytest.raises(KeyboardInterrupt):
        llm.generate(asked, engine(server, tmp_path, batch=True), tmp_path / "c")
    records = list((tmp_path / "models" / openai_batch.STATE_FOLDER).glob("*.json"))
    assert BatchServer.creates == 1 and [json.loads(path.read_text())["batch_id"] for path in records] == ["batch-1"]
    no_wait(monkeypatch)
    table = llm.generate(asked, engine(server, tmp_path, batch=True), tmp_path / "c")
    assert BatchServer.creates == 1, "the pending batch was picked up by its id, not submitted again"
    assert table["status"].to_list() == ["ok", "ok"] and not any(path.exists() for path in records)


def test_batch_is_for_the_openai_backend_and_a_server_without_the_batch_api_is_named(server, tmp_path, monkeypatch):
    with pytest.raises(InputError, match=r"models.generator.batch applies to the openai backend"):
        llm.engine_config({"backend": "vllm", "model": "m", "batch": True})

    class NoBatches(BatchServer):
        def do_POST(self):
            return self.send_json(404, {"error": {"message": "Not Found"}})

    with serving(NoBatches) as url:
        with pytest.raises(InputError, match=r"models.generator.batch: the server at .* refused a files / batches call "
                                             r"\(HTTP 404: Not Found\); set models.generator.batch: false"):
            llm.generate(requests("one?"), engine(url, tmp_path, batch=True), tmp_path / "c")


def test_a_pending_batch_is_recorded_per_server_and_content(tmp_path):
    content = openai_batch.batch_file([{"model": "m", "messages": []}], "/v1/chat/completions")
    one = openai_batch.state_path(tmp_path, content, "http://a:8000/v1")
    assert one == openai_batch.state_path(tmp_path, content, "http://a:8000/v1")
    assert one != openai_batch.state_path(tmp_path, content, "http://b:8000/v1"), "another server: another batch"
    assert one != openai_batch.state_path(tmp_path, content + content, "http://a:8000/v1")


def test_output_lines_naming_no_request_of_the_batch_are_ignored():
    good = {"custom_id": "request-0", "response": {"status_code": 200, "body": {"x": 1}}}
    strays = [{"custom_id": name, "response": {"status_code": 200, "body": {"x": 2}}}
              for name in ("request-7", "request-x", ["request-0"], None)]
    text = "\n".join(json.dumps(entry) for entry in [good, *strays])
    outcomes = openai_batch.read_output([text], 2, lambda index, body: llm.Outcome(text=str(body["x"])), "batch b")
    assert outcomes[0].text == "1" and outcomes[1].error == "batch b: its output has no line for request-1"
