"""Safety at run time: no network access except to an endpoint the config names, and API keys only from the
environment, never written anywhere.

The workflow runs under a socket guard (a `sitecustomize` module on PYTHONPATH, so Snakemake and every job's
Python load it): any DNS lookup or TCP/UDP connection to somewhere other than the configured endpoint is
recorded and refused. HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE are removed from the environment, so the model
loaders must stay offline on their own. Generation and judging go to a fake OpenAI-compatible server on
127.0.0.1 (the one endpoint the config names), with the key in an environment variable; the server must receive
the key, and no file the run writes (results, logs, Snakemake's own logs and metadata, the config) nor its
output may contain it.
"""

from __future__ import annotations

import os
import subprocess
from typing import ClassVar

import polars as pl
import pytest
import yaml
from conftest import PROJECT_ROOT
from local_server import JsonHandler, chat_completion, serving
from workflow_helpers import SNAKEMAKE, make_workdir

from workflow_scripts.config.validate import validate_config
from workflow_scripts.core.errors import InputError

FAKE_KEY = "sk-ragfrontier-test-4f1c9a7e2b"
GUARD = '''\
import os, socket

_log = os.environ["RAGFRONTIER_GUARD_LOG"]
_allowed = set(os.environ.get("RAGFRONTIER_GUARD_ALLOW", "").split(","))
_local = {"localhost", "127.0.0.1", "::1"}


def _refuse(what):
    with open(_log, "a") as log:
        log.write(f"{os.getpid()} {what}\\n")
    raise OSError(f"network access blocked by the test guard: {what}")


_connect = socket.socket.connect
_getaddrinfo = socket.getaddrinfo


def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and f"{address[0]}:{address[1]}" not in _allowed:
        _refuse(f"connect {address[0]}:{address[1]}")
    return _connect(self, address)


def getaddrinfo(host, port, *args, **kwargs):
    if host not in _local and host is not None:
        _refuse(f"resolve {host}:{port}")
    return _getaddrinfo(host, port, *args, **kwargs)


socket.socket.connect = connect
socket.getaddrinfo = getaddrinfo
'''


class FakeOpenAI(JsonHandler):
    """/v1/chat/completions answering every request with one short text (and /v1/models, which the openai backend
    asks first); records the Authorization headers."""

    models = ("fake-model",)
    headers_seen: ClassVar[list[str]] = []

    def do_POST(self):
        body = self.read_json()
        FakeOpenAI.headers_seen.append(self.headers.get("Authorization", ""))
        self.send_json(200, chat_completion(f"A short answer ({len(body['messages'])}).", prompt_tokens=20,
                                            completion_tokens=5))


@pytest.fixture
def fake_server():
    FakeOpenAI.headers_seen = []
    with serving(FakeOpenAI) as url:
        yield url.removeprefix("http://").removesuffix("/v1")


def served_config(endpoint: str) -> dict:
    llm = {"backend": "openai", "model": "fake-model", "base_url": f"http://{endpoint}/v1",
           "api_key_env": "RAGFRONTIER_TEST_KEY", "top_logprobs": 0, "max_retries": 0, "timeout_s": 30}
    models = yaml.safe_load((PROJECT_ROOT / "config.yaml").read_text())["models"]
    return {
        "datasets": {"mini": {"format": "qasper", "path": "data/mini.json"}},
        "arms": {  # the embedder and SmolLM2 (the LLM reranker) are loaded under the guard
            "dense": {"first_stage": "dense", "candidates": 3, "keep": 3, "scope": "group"},
            "keep": {"first_stage": "dense", "candidates": 2, "rerank": "smollm2_yes_no", "keep": 2, "scope": "group"},
        },
        "evaluation": {"measures": ["Success@3"]},
        "routing": {"pairs": {}, "bootstrap": {"resamples": 200}},
        "generation": {"policies": ["dense"], "splits": ["calibration"], "judge_reasks": 0},
        "models": models | {"generator": llm, "judge": llm},
    }


@pytest.mark.slow
@pytest.mark.integration
def test_run_touches_only_the_configured_endpoint_and_never_writes_the_key(tmp_path, fake_server):
    work = make_workdir(tmp_path, served_config(fake_server))
    (work / "data" / "mini.json").write_text((PROJECT_ROOT / "tests" / "data" / "qasper_mini.json").read_text())
    cache = work / "results" / "cache"  # a private cache: nothing may be served from earlier runs
    cache.unlink()
    cache.mkdir()
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(GUARD)
    attempts = tmp_path / "network_attempts.log"
    env = {name: value for name, value in os.environ.items() if name not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env |= {
        "PYTHONPATH": str(guard), "RAGFRONTIER_GUARD_LOG": str(attempts), "RAGFRONTIER_GUARD_ALLOW": fake_server,
        "RAGFRONTIER_TEST_KEY": FAKE_KEY, "PYTHONUNBUFFERED": "1",
    }
    process = subprocess.run(
        [*SNAKEMAKE, "--cores", "2"], cwd=work, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        timeout=1200,
    )
    assert process.returncode == 0, process.stdout[-6000:]
    assert not attempts.exists(), f"network access outside the configured endpoint:\n{attempts.read_text()}"
    assert FakeOpenAI.headers_seen and set(FakeOpenAI.headers_seen) == {f"Bearer {FAKE_KEY}"}
    assert FAKE_KEY not in process.stdout
    leaks = [str(path) for path in work.rglob("*") if path.is_file() and FAKE_KEY.encode() in path.read_bytes()]
    assert leaks == []
    generations = pl.read_parquet(work / "results" / "mini" / "answers" / "dense.parquet")
    assert generations.height == 3 and set(generations["status"]) == {"ok"} and set(generations["backend"]) == {"openai"}


def test_the_guard_catches_a_hub_lookup(tmp_path):
    """The guard is not vacuous: a plain Hugging Face hub lookup in a guarded Python is recorded and refused."""
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(GUARD)
    attempts = tmp_path / "attempts.log"
    env = {name: value for name, value in os.environ.items() if name not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env |= {"PYTHONPATH": str(guard), "RAGFRONTIER_GUARD_LOG": str(attempts)}
    code = "import huggingface_hub; huggingface_hub.model_info('sentence-transformers/all-MiniLM-L6-v2')"
    process = subprocess.run([*SNAKEMAKE[:1], "-c", code], env=env, text=True, capture_output=True, timeout=120)
    assert process.returncode != 0
    assert "resolve huggingface.co" in attempts.read_text()


def test_missing_api_key_variable_stops_before_any_job(monkeypatch):
    monkeypatch.delenv("RAGFRONTIER_TEST_KEY", raising=False)
    config = served_config("127.0.0.1:9") | {"name": "served"}
    config["datasets"] = {"demo": {"format": "qasper", "path": str(PROJECT_ROOT / "data" / "demo" / "papers.json")}}
    with pytest.raises(InputError) as error:
        validate_config(config)
    assert "models.generator.api_key_env: the environment variable 'RAGFRONTIER_TEST_KEY' is not set" in str(error.value)
    assert FAKE_KEY not in str(error.value)
