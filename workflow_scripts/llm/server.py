"""A local vLLM OpenAI-compatible server: one engine that any number of clients (a run's jobs, tests) share.

In:  an LLM block of the `vllm` backend (model, device, top_logprobs, sampling, the `vllm` block: the block an offline
     run reads) and the model cache (a GGUF model is converted there once, as for the offline backends).
Out: `serve(spec, model_cache, where)`, a context manager that starts the server on a free port of 127.0.0.1, waits
     until it answers, and yields the `openai`-backend block that talks to it: the same model, served under the
     name `SERVED_NAME` (a run's servers: "ragfrontier-<key>"), with the model reference as `tokenizer`, so prompts are
     rendered, counted and cut as offline
     (llm/backends/openai.py, "completions"). On leaving, the server and its engine processes are stopped.

The server is vLLM's own (`vllm.entrypoints.openai.api_server`), started through `vllm_worker.py --serve` in the
Python the offline backend would use (`vllm.python`, this interpreter, or .venv-vllm), with the offline backend's
engine arguments (`VllmBackend.llm_kwargs`: the converted model folder, seed, float32 and eager mode on CPU, xgrammar
without whitespace) as command-line flags and its environment (KV-cache size, thread binding), so a served run
decodes as the offline one does. It leads its own process group, which vLLM's engine processes join; the group is
killed when the context ends, and the worker's watchdog kills it when the process that started it dies without
ending the context (killed, crashed).

One engine per run (`serve: true` on a vllm block): the Snakefile's onstart calls `start_run_servers` with the blocks
of the jobs about to run, which serves each distinct engine once and records its URL in `<model cache>/servers/`
(keyed by the engine and the run's working directory);
`connect` (called by `engine.load_engine` in each job) finds it there and returns a `RunServerBackend`, the openai
client under the offline backend's identity (name "vllm", its fingerprint, device): the same cache keys and rows as
offline, so a run with and without `serve` writes the same tables. onsuccess / onerror (and, failing those, the
interpreter's exit, then the watchdog) call `stop_run_servers`.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from workflow_scripts.core import models
from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm.backends import ALTERNATIVES
from workflow_scripts.llm.backends import vllm as vllm_backend
from workflow_scripts.llm.backends.openai import OpenAIBackend
from workflow_scripts.llm.settings import EngineConfig, engine_config

log = logging.getLogger(__name__)

SERVED_NAME = "ragfrontier-local"
START_TIMEOUT_S = 900  # a cold start on 2 shared cores is about 45 s; a GPU box loading a large model takes longer
STOP_TIMEOUT_S = 30
RUN_SERVER_TIMEOUT_S = 3600.0  # a request to the run's own server (see RunServerBackend)
CLIENT_KEYS = ("max_prompt_tokens", "batch_size", "shard_size", "top_logprobs", "sampling", "structured_outputs")
ENGINE_KEYS = ("model", "device", "vllm")  # what makes two blocks one server (the rest is per request)


def engine_flags(kwargs: Mapping[str, Any]) -> list[str]:
    """`vllm.LLM` keyword arguments as the server's command-line flags (the same EngineArgs): `--name value`,
    booleans as `--name` / `--no-name`, mappings as JSON."""
    flags = []
    for name, value in kwargs.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, Mapping):
            flags += [flag, json.dumps(value)]
        else:
            flags += [flag, str(value)]
    return flags


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 — a local http URL built here
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def serve(spec: Mapping[str, Any], model_cache: Path, where: str = "models.generator",
          start_timeout_s: float = START_TIMEOUT_S, name: str = SERVED_NAME,
          log_path: Path | None = None) -> Iterator[dict[str, Any]]:
    """Serve the `vllm` block `spec` on 127.0.0.1 under the model name `name` for the length of the `with` block;
    yields the `openai` block of that server (see the module docstring). The server's output goes to `log_path`
    (default: a temporary file, gone afterwards). InputError when the server does not come up, with its last log
    line."""
    config = engine_config({key: value for key, value in spec.items() if key != "serve"}, where)
    if config.backend != "vllm":
        raise InputError(f"{where}.backend: a local server runs a vllm block; this one is {config.backend!r}")
    backend, _ = vllm_backend.load(config, model_cache, where)
    port = free_port()
    command = [backend.python, str(vllm_backend.VLLM_WORKER), "--serve", *engine_flags(backend.llm_kwargs),
               "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port),
               "--max-logprobs", str(max(ALTERNATIVES, config.top_logprobs)), "--disable-uvicorn-access-log"]
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w+") if log_path is not None else tempfile.TemporaryFile(mode="w+") as output:  # noqa: SIM115
        started = time.perf_counter()
        server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=backend.environment,
                                  start_new_session=True)  # its own process group, with vLLM's engine processes
        log.info("starting vLLM's server for %s (process group %d) on 127.0.0.1:%d", backend.folder, server.pid, port)
        try:
            while not _answers(f"http://127.0.0.1:{port}/health"):
                if server.poll() is not None or time.perf_counter() - started > start_timeout_s:
                    state = f"exit {server.returncode}" if server.returncode is not None else \
                        f"no answer within {start_timeout_s:.0f} s"
                    raise InputError(f"{where}: vLLM's server for {backend.folder} did not start ({state}): "
                                     f"{last_error(output)}")
                time.sleep(1)
            log.info("vLLM server for %s answers at 127.0.0.1:%d after %.1f s", backend.folder, port,
                     time.perf_counter() - started)
            client = {key: value for key, value in spec.items() if key in CLIENT_KEYS}
            yield {**client, "backend": "openai", "model": name, "tokenizer": config.model,
                   "base_url": f"http://127.0.0.1:{port}/v1"}
        finally:
            stop(server)


def run_batch(spec: Mapping[str, Any], model_cache: Path, input_path: Path, output_path: Path,
              name: str = SERVED_NAME, where: str = "models.generator") -> None:
    """Run vLLM's own batch runner (`vllm run-batch`) on the OpenAI Batch file `input_path`, writing its output file
    to `output_path`, with the engine the server of `spec` would have (the offline backend's arguments, the model
    served as `name`). InputError with its last error line when it fails."""
    config = engine_config({key: value for key, value in spec.items() if key != "serve"}, where)
    backend, _ = vllm_backend.load(config, model_cache, where)
    command = [backend.python, str(vllm_backend.VLLM_WORKER), "--run-batch", "-i", str(input_path),
               "-o", str(output_path), *engine_flags(backend.llm_kwargs), "--served-model-name", name,
               "--max-logprobs", str(max(ALTERNATIVES, config.top_logprobs))]
    with tempfile.TemporaryFile(mode="w+") as output:
        runner = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=backend.environment,
                                  start_new_session=True)
        try:
            runner.wait()
        finally:
            stop(runner)
        if runner.returncode != 0:
            raise InputError(f"{where}: vLLM's batch runner failed (exit {runner.returncode}): {last_error(output)}")


def last_error(output: Any) -> str:
    """The last line of a process's output file that names an Error (else its last line)."""
    output.seek(0)
    lines = [line for line in output.read().splitlines() if line.strip()] or ["(no output)"]
    errors = [line for line in lines if "Error" in line] or lines
    return errors[-1].strip()[:400]


def stop(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (vLLM shuts its engine down), SIGKILL after STOP_TIMEOUT_S; returns once
    no process of the group is left (engine processes outliving the server are killed and waited for)."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            os.killpg(server.pid, signal.SIGKILL)  # engine processes that outlived the server
        except ProcessLookupError:
            break  # the group is empty
        time.sleep(0.2)
    server.wait()


# ---- one engine per run ----------------------------------------------------------------------------------------

_RUN = ExitStack()


def server_key(config: EngineConfig) -> str:
    """Blocks with the same model, device and vllm block share one server, within one working directory (a run
    and its jobs share it; two runs elsewhere sharing a model cache never share a server)."""
    engine = {key: getattr(config, key) for key in ENGINE_KEYS} | {"workdir": str(Path.cwd())}
    return hashlib.sha256(json.dumps(engine, sort_keys=True).encode()).hexdigest()[:16]


def registry(model_cache: Path) -> Path:
    return Path(model_cache) / "servers"


def refuse_remote_jobs(blocks: Mapping[str, Mapping[str, Any]], local_exec: bool) -> None:
    """A run's own server listens on 127.0.0.1 of the machine Snakemake runs on: jobs a cluster executor sends to
    other nodes could not reach it, so `serve: true` is refused there, before any job, naming the fix."""
    if blocks and not local_exec:
        keys = ", ".join(f"{where}.serve" for where in sorted(blocks))
        raise InputError(f"{keys}: true starts one vLLM server on this machine, which jobs sent to cluster nodes "
                         f"cannot reach; on a cluster serve the model yourself (a server per node, or one every node "
                         f"reaches) and point backend: openai at it with base_url (docs/models.md, Served models), "
                         f"or run without serve")


def start_run_servers(blocks: Mapping[str, Mapping[str, Any]], model_cache: Path, log_folder: Path) -> list[str]:
    """Serve each distinct engine among `blocks` ({where: block} of `serve: true` vllm blocks) for the rest of this
    process, named after its key (a stale registry entry never reaches another run's server) and logging to
    `log_folder`/<key>.log, recording its openai block in the registry; the URLs started. Blocks that share an
    engine share its server, which returns as many log probabilities as the most demanding of them asks for.
    Stopped by `stop_run_servers`."""
    atexit.register(stop_run_servers)
    configs = {where: engine_config(spec, where) for where, spec in blocks.items()}
    keys = {where: server_key(config) for where, config in configs.items()}
    top_k = {key: max(configs[where].top_logprobs for where in keys if keys[where] == key) for key in keys.values()}
    started = {}
    for where, spec in sorted(blocks.items()):
        key = keys[where]
        if key not in started:
            block = _RUN.enter_context(serve({**spec, "top_logprobs": top_k[key]}, model_cache, where,
                                             name=f"ragfrontier-{key}", log_path=Path(log_folder) / f"{key}.log"))
            entry = registry(model_cache) / f"{key}.json"
            entry.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(json.dumps(block), entry)
            _RUN.callback(entry.unlink, missing_ok=True)  # forgotten before its server stops
            started[key] = block["base_url"]
    return list(started.values())


def stop_run_servers() -> None:
    """Stop the servers `start_run_servers` started, and forget them (a second call does nothing)."""
    _RUN.close()


class RunServerBackend(OpenAIBackend):
    """The openai client of a run's own vLLM server, under the offline vllm backend's identity: same name,
    fingerprint and device (so the same cache keys and rows), and the same top-k rule for constrained replies."""

    def __init__(self, config: EngineConfig, block: Mapping[str, Any], where: str, model_cache: Path):
        # a local engine: no network to time out on, but a request may queue behind the whole run's others
        client = replace(config, backend="openai", model=block["model"], base_url=block["base_url"],
                         tokenizer=config.model, vllm={}, serve=False, timeout_s=RUN_SERVER_TIMEOUT_S)
        super().__init__(client, where, model_cache)
        _, model_fingerprint = models.causal_lm_folder(config.model, model_cache)
        self.name, self.device = vllm_backend.VllmBackend.name, config.device
        self.fingerprint = vllm_backend.engine_fingerprint(config, model_fingerprint)

    def top_logprobs(self, prompt) -> int:
        if prompt.constraint is not None and self.record_steps:
            return max(self.config.top_logprobs, ALTERNATIVES)
        return self.config.top_logprobs


def connect(config: EngineConfig, model_cache: Path, where: str) -> tuple[RunServerBackend, int | None]:
    """The backend of a `serve: true` block: the run's server of its engine (InputError when none answers)."""
    entry = registry(model_cache) / f"{server_key(config)}.json"
    block = json.loads(entry.read_text()) if entry.is_file() else None
    if block is None or not _answers(block["base_url"].removesuffix("/v1") + "/health"):
        raise InputError(
            f"{where}.serve is true, but no server of this run answers for it ({entry}): the Snakefile's onstart "
            f"starts one when a run has LLM jobs to do (local execution); a job run on its own, or on a cluster node, "
            f"needs {where}.serve: false (an engine per job) or backend: openai with a server's base_url"
        )
    backend = RunServerBackend(config, block, where, model_cache)
    return backend, backend.served_model().get("max_model_len")
