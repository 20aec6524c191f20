"""One LLM engine for every generating stage: batched, deduplicated, cached generation on three backends.

In:  `Request`s (an id, a `templates.Template`, its fields, evidence units in rank order, optional follow-up
     turns), an `Engine` (`load_engine` builds it from a config block such as `models.generator`), a cache
     folder, and optional sampling overrides (temperature, top_p, max_new_tokens, seed, stop).
Out: `generate` returns one GENERATIONS row per request, in request order: status ("ok" | "error") and the
     error's cause, the text, finish_reason ("stop" | "length"), prompt and completion tokens, token-level
     uncertainty of the generated tokens, latency, backend, device, where the row came from ("generated" |
     "cache" | "duplicate") and how much evidence survived the context-length policy.

Settings: `settings.engine_config` validates a block once (the schema's per-key rules, then the rules across keys);
`load_engine` starts from it, and `generate` applies per-call overrides with `settings.sampling_from`.

Backends (`backends/`, one module each; their docstrings say how each generates): "transformers" (CPU or GPU,
the offline default), "openai" (an OpenAI-compatible server at `base_url`), "vllm" (offline `vllm.LLM` batches in
a worker process). `backends/__init__.py` holds what they share with the engine (`Prompt`, `Outcome`, the `Backend`
protocol).

Structured outputs (`structured_outputs: true`, the default): a request whose template declares a reply
constraint (`templates.py`, `constraints.py`) is decoded under it, on each backend its own way. A constrained
request gets its schema's worst-case token budget instead of max_new_tokens and no stop strings, the constraint
joins its cache key, and its GENERATIONS row says `constrained`. Batches never mix constrained and free-text
requests. With the key off, nothing is constrained (and cache keys are as before). A free-text request with `tokens`
(FLARE's look-ahead sentence, multistep/loop.py) records each generated token with its log-probability in
`token_steps` (`backends.chosen_steps`), on every backend; that joins its cache key, no other request's.

Uncertainty (per request, over the generated tokens including a final end-of-sequence token):
`mean_entropy` (mean over tokens of the entropy of the next-token distribution, nats), `min_token_prob`
(lowest probability given to a generated token), `sequence_logprob` (sum of the generated tokens' log
probabilities). `uncertainty_basis` says what the entropy was computed over: "full_vocabulary" for
transformers; "top_<k>" for openai/vllm, where only the top-k log probabilities are returned and the entropy is
the partial sum -Σ p·log p over those k tokens (a lower bound of the full entropy; the tail mass is ignored).
When a server returns no log probabilities, all three are null. A constrained reply on transformers is
measured over the distribution the grammar left at each step: `uncertainty_basis` "grammar_masked". vllm and
openai report the engine's own log probabilities. Study B's uncertainty features come from free-text answers,
never constrained.

Latency: openai rows carry their own request's wall time (retries included). transformers and vllm generate a
batch at once; its wall time is split over its requests in proportion to the tokens each processed (prompt +
completion), a proxy for the compute each used. Cached rows keep the latency measured when they were
generated: it is the cost of that call, whoever paid it.

Cache (LLM_CACHE, Parquet shards via `cache.py`): key = sha256(model fingerprint, backend, sampling
parameters, rendered prompt). The rendered prompt is the chat-template text (transformers, vllm) or the JSON of
the messages (openai without a `tokenizer`), after evidence truncation, so a changed template or policy invalidates
exactly the
requests whose prompt changed. At temperature 0 top_p and seed are left out of the key (they do not change a
greedy output). The device is not in the key. Identical requests in one call are generated once. Missing
requests are generated in shards of `shard_size` (sorted by prompt length, so batches pad little), each
appended to the cache when finished: a killed stage loses at most one shard. Only successful generations are
cached; an error is never served from the cache, so the next run retries it. A backend loads its weights (and
the transformers backend imports torch) only when a request is missing from the cache.

Context length: a prompt longer than `max_prompt_tokens` loses evidence, never its question or instructions:
units are kept in rank order while they fit, the first that does not is cut to the remaining room (dropped if
under `MIN_CUT_TOKENS`), the rest are dropped; `evidence_kept` and `evidence_truncated` record it. A prompt
that does not fit even without evidence is an InputError. The openai backend counts and cuts with the served
model's tokenizer when `tokenizer` names it, else estimates tokens as ceil(characters / `chars_per_token`) (4, as in
Study C).

A vllm block with `serve: true` is not loaded here: `load_engine` connects to the run's own server of it
(`server.connect`, llm/server.py), which gives the same rows and cache keys as the offline engine.
"""

import json
import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from workflow_scripts.core.cache import append_cache, content_key, read_cache
from workflow_scripts.core.contracts import GENERATIONS, LLM_CACHE
from workflow_scripts.core.tables import frame
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm import rendering, server
from workflow_scripts.llm.backends import (
    ALTERNATIVES,
    Backend,
    Outcome,
    Prompt,
    constrained_sampling,
    openai,
    steps_rows,
    transformers,
    vllm,
)
from workflow_scripts.llm.constraints import Constraint
from workflow_scripts.llm.settings import EngineConfig, Sampling, engine_config, sampling_from
from workflow_scripts.llm.templates import Template

log = logging.getLogger(__name__)

MIN_CUT_TOKENS = 16
LOADERS = {"transformers": transformers.load, "openai": openai.load, "vllm": vllm.load}


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
    template: Template
    fields: Mapping[str, str]
    evidence: tuple[str, ...] = ()
    followup: tuple[tuple[str, str], ...] = ()
    tokens: bool = False  # record its generated tokens with their log-probabilities (token_steps; joins its key)

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
    rendered = rendering.render(request.template, request.fields, evidence)
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


# ---- engine and generate --------------------------------------------------------------------------------


def load_engine(spec: Mapping[str, Any], model_cache: Path, where: str = "models.generator") -> Engine:
    """Validate a config block and load its backend (GGUF conversions go to `model_cache`)."""
    config = engine_config(spec, where)
    if config.serve:  # the run's own server of this engine (llm/server.py)
        backend, limit = server.connect(config, model_cache, where)
    else:
        backend, limit = LOADERS[config.backend](config, model_cache, where)
    return Engine(config, backend, limit)


def request_key(
    backend: Backend, sampling: Sampling, top_logprobs: int, prompt_text: str, constraint: Constraint | None = None,
    tokens: bool = False,
) -> str:
    """The cache key of one request (see the module docstring); a constraint adds its schema / grammar, a request
    for its tokens says so (its row carries them; every other key is as before)."""
    settings = sampling.key_fields()
    if backend.name != "transformers":
        settings["top_logprobs"] = top_logprobs
    if constraint is not None:
        settings["constraint"] = constraint.key
        settings["token_steps"] = ALTERNATIVES  # its rows carry the alternatives at each step (judging/scores.py)
    elif tokens:
        settings["token_steps"] = "chosen"  # its rows carry each generated token with its logprob (chosen_steps)
    return content_key(backend.fingerprint, backend.name, json.dumps(settings, sort_keys=True), prompt_text)



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
        "token_steps": steps_rows(outcome.steps),
        "latency_s": outcome.latency_s, "backend": backend.name, "model": engine.config.model,
        "device": backend.device, "error": outcome.error,
    }


def generate(
    requests: Sequence[Request], engine: Engine, cache_dir: Path, sampling: Mapping[str, Any] | None = None
) -> pl.DataFrame:
    """Generate every request once (cache first, then shards of new ones); GENERATIONS rows in request order."""
    ids = [request.request_id for request in requests]
    if len(set(ids)) != len(ids):
        raise ValueError(
            f"request ids must be unique; repeated: {sorted(k for k, n in Counter(ids).items() if n > 1)[:5]}"
        )
    config, backend = engine.config, engine.backend
    settings = sampling_from(sampling or {}, config.sampling)
    fitted = []
    for request in requests:
        constraint = request.constraint if config.structured_outputs else None
        if constraint is not None:
            _check_budget(engine, constraint)
        item = fit(request, backend, config.max_prompt_tokens)
        fitted.append(item._replace(prompt=item.prompt._replace(constraint=constraint, tokens=request.tokens)))
    keys = [
        request_key(backend, constrained_sampling(settings, item.prompt.constraint), config.top_logprobs,
                    item.prompt.text, item.prompt.constraint, item.prompt.tokens)
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
        append_cache(
            Path(cache_dir), frame([row for row in rows.values() if row["error"] is None], LLM_CACHE), LLM_CACHE
        )
        found.update(rows)
        log.info("generated shard %d/%d (%d requests)", start // config.shard_size + 1,
                 math.ceil(len(order) / config.shard_size), len(shard))
    table = _results(requests, fitted, keys, found, from_cache, backend.token_basis)
    _log_summary(table)
    _stop_when_every_request_failed(table, config)
    return table


def _stop_when_every_request_failed(table: pl.DataFrame, config: EngineConfig) -> None:
    """A call whose every request failed stops its stage with one message naming the server and the cause, rather
    than write a table of errors that later stages would read as missing answers."""
    errors = table.filter(pl.col("status") == "error")
    if not table.height or errors.height < table.height:
        return
    (cause, count), = Counter(errors["error"].to_list()).most_common(1)
    where = f"the server at {config.base_url}" if config.base_url else f"the {config.backend} backend"
    raise InputError(f"llm: all {table.height} requests to {where} (model '{config.model}') failed; most common "
                     f"cause ({count}×): {cause}. Check that the server is up and serves that model; nothing was "
                     f"written and the next run retries every request")


def _results(
    requests: Sequence[Request], fitted: Sequence[Fitted], keys: Sequence[str],
    found: Mapping[str, Mapping[str, Any]], from_cache: set[str], token_basis: str,
) -> pl.DataFrame:
    rows, seen = [], set()
    for request, item, key in zip(requests, fitted, keys):
        result = dict(found[key])
        error = result.get("error")
        source = "duplicate" if key in seen else "cache" if key in from_cache else "generated"
        seen.add(key)
        rows.append(
            {
                **result,
                "request_id": request.request_id,
                "status": "error" if error else "ok",
                "error": error,
                "source": source,
                "constrained": item.prompt.constraint is not None,
                "evidence_in": len(request.evidence),
                "evidence_kept": item.kept,
                "evidence_truncated": item.truncated,
                "token_basis": token_basis,
            }
        )
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
