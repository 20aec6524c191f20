"""The openai backend: an OpenAI-compatible server (vLLM's OpenAI server, Ollama, a hosted API) at `base_url`,
through the official `openai` client.

In:  an engine config (`settings.EngineConfig`: model, base_url, api_key_env, tokenizer, top_logprobs, timeout_s,
     max_retries, concurrency, chars_per_token, structured_outputs, batch, batch_poll_s); then batches of `Prompt`s
     with their `Sampling`.
Out: one `Outcome` per prompt: text, finish_reason, token counts from the server's `usage`, top-k uncertainty,
     latency; or the error that stopped it.

How a prompt is sent (`prompt_mode`):
- "completions" — `tokenizer` names the served model's tokenizer locally (a model reference as for the offline
  backends: a packaged name, a GGUF file or a model folder). Prompts are then the model's chat template rendered,
  counted and cut here by the same `ChatTokenizer` as the transformers and vllm backends, and the rendered text goes
  to `/v1/completions`, where the server tokenizes it into the same ids: served and offline runs see identical
  prompts (tests/test_served.py checks `usage.prompt_tokens` against the local count).
- "chat" — otherwise: the messages go to `/v1/chat/completions` and the server applies its own template; evidence is
  cut on an estimate, ceil(characters / `chars_per_token`) tokens. The rendered prompt (the cache key's text) is the
  JSON of the messages.

Before any work, `load` asks the server for `/v1/models`: an unreachable server is one error naming `base_url` and
the model block, a model the server does not serve one naming both and what it serves. A vLLM server (its models
are `owned_by` "vllm") gets vLLM's own request fields: a constrained request's schema or exact grammar as
`structured_outputs` (as the offline vllm backend decodes it), and in completions mode `return_tokens_as_token_ids`,
so a step's alternatives are token ids, decoded here, and `add_special_tokens: false` (the rendered template
holds its own BOS). Another server tokenizes the completions prompt with its own defaults: check `prompt_tokens`
against the local count for a model whose tokenizer adds a BOS. Other servers get `response_format: json_schema`; one
that
rejects it stops the job with one error naming the key that turns it off.

`concurrency` requests are in flight on one event loop (`openai.AsyncOpenAI`). The client retries connection errors,
timeouts, 408, 409, 429 and 5xx `max_retries` times with its own exponential backoff, honouring the server's
Retry-After; a request that still fails, gets another 4xx or an unreadable body is recorded with its cause and the
run carries on. The API key is read from the environment variable named by `api_key_env` and only ever given to the
client. Uncertainty is over the top-k log probabilities the server returns ("top_<k>"; a constrained request asks
for at least ALTERNATIVES, as the vllm backend does, unless `top_logprobs` is 0), null when it returns none; a log
probability of -9999 or less
is how vLLM's server writes a token the grammar masked (-inf), so a step listing one listed every allowed token.

With `batch: true` each shard of requests goes through the OpenAI Batch API instead (`openai_batch.py`): the same
bodies, and the replies read by the same parser.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import time
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import openai
import pydantic

from workflow_scripts.core import models
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm.backends import (
    ALTERNATIVES,
    Outcome,
    Prompt,
    TokenStep,
    chosen_steps,
    constrained_sampling,
    topk_uncertainty,
)
from workflow_scripts.llm.backends import openai_batch
from workflow_scripts.llm.chat_tokenizer import ChatTokenizer
from workflow_scripts.llm.settings import EngineConfig, Sampling

# the body keys each endpoint's `create` takes as arguments; any other key goes in `extra_body` (vLLM's own fields,
# and response_format, which the completions endpoint of the client does not declare)
STANDARD_KEYS = {
    "completions": frozenset({"model", "prompt", "temperature", "max_tokens", "seed", "top_p", "stop", "logprobs"}),
    "chat": frozenset({"model", "messages", "temperature", "max_tokens", "seed", "top_p", "stop", "logprobs",
                       "top_logprobs", "response_format"}),
}
SCHEMA_REJECTED = frozenset({400, 422, 501})
SCHEMA_WORDS = re.compile(r"response_format|json_schema|schema|structured|grammar", re.IGNORECASE)
MASKED_LOGPROB = -9999.0  # vLLM's server writes -inf (a token the grammar masked) as -9999.0
TOKEN_ID_PREFIX = "token_id:"  # a token as vLLM writes it under return_tokens_as_token_ids


def load(config: EngineConfig, model_cache: Path, where: str) -> tuple[OpenAIBackend, int | None]:
    """The backend of `config`, once the server answered that it serves `config.model`, and the context length the
    server reports for it (vLLM's `max_model_len`; None when it reports none)."""
    backend = OpenAIBackend(config, where, model_cache)
    served = backend.served_model()
    if backend.tokenizer_folder is not None:
        backend.chat  # noqa: B018 — read the local tokenizer now: a bad reference fails before any work
    return backend, served.get("max_model_len")


class OpenAIBackend:
    """An OpenAI-compatible server through `openai.AsyncOpenAI`; the key is read from the environment, never stored."""

    name = "openai"
    record_steps = True  # a constrained reply's steps (judging/scores.py), as on the vllm backend

    def __init__(self, config: EngineConfig, where: str = "models.generator", model_cache: Path | None = None):
        self.config, self.where, self.model_cache = config, where, model_cache
        self.base_url = config.base_url.rstrip("/")
        self.device = config.base_url
        self.uncertainty_basis = f"top_{config.top_logprobs}" if config.top_logprobs else None
        self.token_basis = "tokenizer" if config.tokenizer else "estimate"
        self.tokenizer_folder, fingerprint = None, ""
        if config.tokenizer:
            if model_cache is None:
                raise ValueError("a tokenizer reference needs the model cache (a GGUF file is converted there)")
            self.tokenizer_folder, fingerprint = models.causal_lm_folder(config.tokenizer, model_cache)
        self.prompt_mode = "completions" if self.tokenizer_folder is not None else "chat"
        # the prompt text is in the cache key; the tokenizer's fingerprint says which tokenizer rendered it
        self.fingerprint = f"openai-model:{config.model}" + (f"+tokenizer:{fingerprint}" if fingerprint else "")
        self.vllm_server = False

    @cached_property
    def chat(self) -> ChatTokenizer:
        return ChatTokenizer(self.tokenizer_folder)

    def _api_key(self) -> str:
        # the client needs some key; a local server without authentication ignores it
        return os.environ[self.config.api_key_env] if self.config.api_key_env else "unused"

    def served_model(self) -> dict[str, Any]:
        """The server's `/v1/models` entry of `config.model`; InputError when the server cannot be reached or does
        not serve it. Records whether the server is vLLM (its models are owned_by "vllm")."""
        client = openai.OpenAI(base_url=self.base_url, api_key=self._api_key(), timeout=self.config.timeout_s,
                               max_retries=self.config.max_retries)
        try:
            entries = [entry.model_dump() for entry in client.models.list()]
        except openai.APIConnectionError as error:
            raise InputError(
                f"{self.where}.base_url: no OpenAI-compatible server answers at {self.config.base_url} "
                f'({type(error).__name__}: {error}); start the server (docs/models.md, "Served models") or correct '
                "the URL"
            ) from None
        except openai.APIStatusError as error:
            raise InputError(
                f"{self.where}.base_url: the server at {self.config.base_url} refused to list its models (HTTP "
                f"{error.status_code}: {_message(error)}); check {self.where}.api_key_env and the URL"
            ) from None
        finally:
            client.close()
        found = next((entry for entry in entries if entry.get("id") == self.config.model), None)
        if found is None:
            names = ", ".join(sorted(str(entry.get("id")) for entry in entries)) or "no models"
            raise InputError(
                f"{self.where}.model: the server at {self.config.base_url} does not serve {self.config.model!r}; it "
                f"serves {names}"
            )
        self.vllm_server = found.get("owned_by") == "vllm"
        return found

    # ---- prompts ----------------------------------------------------------------------------------------------

    def render(self, messages: list[dict[str, str]]) -> str:
        if self.prompt_mode == "completions":
            return self.chat.render(messages)
        return json.dumps(messages, ensure_ascii=False, separators=(",", ":"))

    def count_tokens(self, text: str) -> int:
        if self.prompt_mode == "completions":
            return len(self.chat.encode(text))
        return math.ceil(len(text) / self.config.chars_per_token)

    def cut(self, text: str, max_tokens: int) -> str:
        if self.prompt_mode == "completions":
            return self.chat.cut(text, max_tokens)
        return text[: int(max_tokens * self.config.chars_per_token)]

    # ---- requests ---------------------------------------------------------------------------------------------

    def top_logprobs(self, prompt: Prompt) -> int:
        """The top-k asked for: `top_logprobs` (0: none), and at least ALTERNATIVES for a constrained reply's
        steps."""
        if self.config.top_logprobs and prompt.constraint is not None and self.record_steps:
            return max(self.config.top_logprobs, ALTERNATIVES)
        return self.config.top_logprobs or (1 if prompt.tokens else 0)  # a request for its tokens needs their logprob

    def body(self, prompt: Prompt, sampling: Sampling) -> dict[str, Any]:
        """The JSON body of one request (a constrained one carries its schema, with its own token budget: see
        `constrained_sampling`)."""
        sampling = constrained_sampling(sampling, prompt.constraint)
        body: dict[str, Any] = {"model": self.config.model}
        if self.prompt_mode == "completions":
            body["prompt"] = prompt.text
            if self.vllm_server:  # the rendered template holds its special tokens already (no second BOS)
                body["add_special_tokens"] = False
        else:
            body["messages"] = prompt.messages
        body.update(temperature=sampling.temperature, max_tokens=sampling.max_new_tokens, seed=sampling.seed)
        if sampling.temperature > 0:
            body["top_p"] = sampling.top_p
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        k = self.top_logprobs(prompt)
        if k and self.prompt_mode == "completions":
            body["logprobs"] = k
            if self.vllm_server:
                body["return_tokens_as_token_ids"] = True
        elif k:
            body.update(logprobs=True, top_logprobs=k)
        if prompt.constraint is not None:
            if self.vllm_server:
                kind, spec = prompt.constraint.grammar_spec()
                body["structured_outputs"] = {kind: spec}
            else:
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": prompt.constraint.template, "schema": prompt.constraint.schema, "strict": True,
                }}
        return body

    def complete(self, batch: list[Prompt], sampling: Sampling) -> list[Outcome]:
        if self.config.batch:
            return self._complete_batch(batch, sampling)
        return asyncio.run(self._complete(batch, sampling))

    def _complete_batch(self, batch: list[Prompt], sampling: Sampling) -> list[Outcome]:
        """The prompts as one OpenAI batch (`openai_batch.py`): the online requests' bodies, read as online replies."""
        if self.model_cache is None:
            raise ValueError("a batch needs the model cache (it records pending batches there)")
        client = openai.OpenAI(base_url=self.base_url, api_key=self._api_key(), timeout=self.config.timeout_s,
                               max_retries=self.config.max_retries)
        try:
            return openai_batch.run(client, [self.body(prompt, sampling) for prompt in batch],
                                    openai_batch.ENDPOINTS[self.prompt_mode], self.model_cache,
                                    self.config.batch_poll_s, lambda index, payload: self._read(batch[index], payload),
                                    self.where)
        except openai.APIConnectionError as error:
            raise InputError(
                f"{self.where}.base_url: the batch endpoints at {self.config.base_url} did not answer "
                f"({type(error).__name__}); the pending batch, if any, is resumed by the next run"
            ) from None
        except openai.APIStatusError as error:
            raise InputError(
                f"{self.where}.batch: the server at {self.config.base_url} refused a files / batches call "
                f"(HTTP {error.status_code}: {_message(error)[:200]}); set {self.where}.batch: false for a "
                f"server without the Batch API"
            ) from None
        finally:
            client.close()

    def _read(self, prompt: Prompt, payload: Mapping[str, Any]) -> Outcome:
        """The Outcome of a reply body to `prompt` (online or from a batch's output file)."""
        if self.prompt_mode == "completions":
            decode = self._decode if prompt.constraint is not None or prompt.tokens else None
            outcome = parse_completion(payload, decode, chosen_only=prompt.tokens and prompt.constraint is None)
        else:
            outcome = parse_chat_completion(payload, constrained=prompt.constraint is not None,
                                            chosen_only=prompt.tokens and prompt.constraint is None)
        if prompt.constraint is not None and outcome.steps is not None:  # its uncertainty: over the top k asked for
            outcome = outcome._replace(uncertainty_basis=f"top_{self.top_logprobs(prompt)}")
        return outcome

    async def _complete(self, batch: list[Prompt], sampling: Sampling) -> list[Outcome]:
        gate = asyncio.Semaphore(self.config.concurrency)
        async with openai.AsyncOpenAI(base_url=self.base_url, api_key=self._api_key(), timeout=self.config.timeout_s,
                                      max_retries=self.config.max_retries) as client:
            async def one(prompt: Prompt) -> Outcome:
                async with gate:
                    return await self._call(client, prompt, sampling)

            try:  # a request that stops the job (InputError) cancels its siblings in flight
                async with asyncio.TaskGroup() as group:
                    tasks = [group.create_task(one(prompt)) for prompt in batch]
            except ExceptionGroup as failed:
                raise failed.exceptions[0] from None
            return [task.result() for task in tasks]

    async def _call(self, client: openai.AsyncOpenAI, prompt: Prompt, sampling: Sampling) -> Outcome:
        started = time.perf_counter()
        body = self.body(prompt, sampling)
        standard = {key: value for key, value in body.items() if key in STANDARD_KEYS[self.prompt_mode]}
        extra = {key: value for key, value in body.items() if key not in standard}
        endpoint = client.completions if self.prompt_mode == "completions" else client.chat.completions
        url = f"{self.base_url}/{'completions' if self.prompt_mode == 'completions' else 'chat/completions'}"
        tries = self.config.max_retries + 1
        try:
            response = await endpoint.create(**standard, extra_body=extra or None)
        except openai.APIConnectionError as error:  # APITimeoutError too
            return Outcome(error=f"{type(error).__name__} from {url} (gave up after {tries} tries)",
                           latency_s=time.perf_counter() - started)
        except (ValueError, openai.APIResponseValidationError) as error:  # a 200 whose body is not the JSON expected
            return Outcome(error=f"unreadable response from {url}: {error}", latency_s=time.perf_counter() - started)
        except openai.APIStatusError as error:
            message = _message(error)
            if prompt.constraint is not None and error.status_code in SCHEMA_REJECTED and SCHEMA_WORDS.search(message):
                raise InputError(
                    f"the server at {self.config.base_url} rejected a request with a reply schema (template "
                    f"{prompt.constraint.template}; HTTP {error.status_code}: {message[:200]}); if it does not support "
                    f"structured outputs, set {self.where}.structured_outputs: false (replies are then parsed, "
                    f"repaired and re-asked)"
                ) from None
            retried = f" (gave up after {tries} tries)" if error.status_code in (408, 409, 429) or \
                error.status_code >= 500 else ""
            return Outcome(error=f"HTTP {error.status_code} from {url}: {message[:200]}{retried}",
                           latency_s=time.perf_counter() - started)
        try:
            if not isinstance(response, pydantic.BaseModel):  # a body the client could not parse comes back as text
                raise TypeError(f"not a JSON completion: {str(response)[:200]!r}")
            outcome = self._read(prompt, response.model_dump())
        except (ValueError, KeyError, IndexError, TypeError) as error:
            outcome = Outcome(error=f"unreadable response from {url}: {error}")
        return outcome._replace(latency_s=time.perf_counter() - started)

    def _decode(self, token: str) -> str:
        """A token as the server wrote it: vLLM's "token_id:<id>" decoded with the local tokenizer, else as is."""
        if token.startswith(TOKEN_ID_PREFIX):
            return self.chat.decode([int(token[len(TOKEN_ID_PREFIX):])])
        return token


def _message(error: openai.APIStatusError) -> str:
    """The server's own words of an error response (its JSON `message` or `error`, else the body)."""
    body = error.body  # the client has already taken the `error` member out of a JSON body
    if isinstance(body, Mapping):
        return str(body.get("message") or body)
    return str(body if body is not None else error.message)


def _step(token: str, chosen: float, alternatives: list[tuple[str, float]]) -> tuple[TokenStep, tuple]:
    """A TokenStep (masked alternatives dropped, `complete` when one was listed) and its (chosen, top-k) logprobs."""
    kept = tuple((name, value) for name, value in alternatives if value > MASKED_LOGPROB)
    return (TokenStep(token, kept, len(kept) < len(alternatives)),
            (chosen, [value if value > MASKED_LOGPROB else -math.inf for _, value in alternatives]))


def parse_chat_completion(payload: Mapping[str, Any], constrained: bool = False, chosen_only: bool = False) -> Outcome:
    """An `Outcome` from a chat-completions response body (usage and logprobs are optional); for a constrained
    request its tokens with their `top_logprobs` as `steps` (the server's top k: basis top_k in judging/scores.py)."""
    choice = payload["choices"][0]
    text = choice["message"]["content"]
    if not isinstance(text, str):
        raise TypeError("the message has no text content")
    tokens = (choice.get("logprobs") or {}).get("content") or []
    parsed = [_step(token["token"], float(token["logprob"]),
                    [(top["token"], float(top["logprob"])) for top in token.get("top_logprobs") or []])
              for token in tokens]
    return _outcome(choice, payload.get("usage") or {}, text, parsed, constrained, chosen_only)


def parse_completion(payload: Mapping[str, Any], decode=None, chosen_only: bool = False) -> Outcome:
    """An `Outcome` from a completions response body; with `decode` (a constrained request: token → text), its
    tokens with their alternatives as `steps`."""
    choice = payload["choices"][0]
    text = choice["text"]
    if not isinstance(text, str):
        raise TypeError("the choice has no text")
    logprobs = choice.get("logprobs") or {}
    constrained, decode = decode is not None and not chosen_only, decode or (lambda token: token)
    parsed = [_step(decode(token), float(chosen), [(decode(name), float(value)) for name, value in
                                                   sorted((top or {}).items(), key=lambda pair: -pair[1])])
              for token, chosen, top in zip(logprobs.get("tokens") or [], logprobs.get("token_logprobs") or [],
                                            logprobs.get("top_logprobs") or [])]
    return _outcome(choice, payload.get("usage") or {}, text, parsed, constrained, chosen_only)


def _outcome(
    choice: Mapping[str, Any], usage: Mapping[str, Any], text: str, parsed: list, constrained: bool,
    chosen_only: bool = False,
) -> Outcome:
    entropy, min_prob, logprob = topk_uncertainty([values for _, values in parsed])
    return Outcome(
        text=text, finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
        prompt_tokens=usage.get("prompt_tokens"), completion_tokens=usage.get("completion_tokens"),
        mean_entropy=entropy, min_token_prob=min_prob, sequence_logprob=logprob,
        steps=tuple(step for step, _ in parsed) if constrained and parsed else
        chosen_steps([step.token for step, _ in parsed], [chosen for _, (chosen, _) in parsed])
        if chosen_only and parsed else None,
    )
