"""The openai backend: `/chat/completions` of an OpenAI-compatible server (a served vLLM, Ollama) at `base_url`.

In:  an engine config (`settings.EngineConfig`: model, base_url, api_key_env, top_logprobs, timeout_s, max_retries,
     backoff_s, concurrency, chars_per_token); then batches of `Prompt`s with their `Sampling`.
Out: one `Outcome` per prompt: text, finish_reason, token counts from `usage`, top-k uncertainty, latency; or the
     error that stopped it.

Requests carry `logprobs` and `top_logprobs: k` (`top_logprobs: 0` sends neither); `concurrency` requests are in
flight. The API key is read from the environment variable named by `api_key_env` and only ever put in the request
header. Refused connections, timeouts, HTTP 429 and 5xx are retried `max_retries` times with exponential backoff
(`backoff_s` × 2^attempt); a request that still fails, or gets another 4xx or an unreadable body, is recorded with
its cause and the run carries on. Each row carries its own request's wall time (retries included).

A constrained request sends its schema as `response_format: {"type": "json_schema", ...}`; a server that rejects
it stops the job with one error naming the key that turns it off. There is no tokenizer here: the rendered prompt
is the JSON of the messages, and tokens are counted as ceil(characters / `chars_per_token`), an estimate.
Uncertainty is over the top-k log probabilities the server returns ("top_<k>"), null when it returns none.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

from workflow_scripts.core.errors import InputError
from workflow_scripts.llm.backends import Outcome, Prompt, TokenStep, constrained_sampling, topk_uncertainty
from workflow_scripts.llm.settings import EngineConfig, Sampling

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
SCHEMA_REJECTED = frozenset({400, 422, 501})
SCHEMA_WORDS = re.compile(r"response_format|json_schema|schema|structured|grammar", re.IGNORECASE)


def load(config: EngineConfig, model_cache: Path, where: str) -> tuple[OpenAIBackend, None]:
    """The backend of `config` (a server's context length is not known here)."""
    return OpenAIBackend(config, where), None


class OpenAIBackend:
    """/v1/chat/completions of an OpenAI-compatible server; the key is read from the environment, never stored."""

    name = "openai"

    def __init__(self, config: EngineConfig, where: str = "models.generator"):
        self.config, self.where = config, where
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self.device = config.base_url
        self.fingerprint = f"openai-model:{config.model}"
        self.uncertainty_basis = f"top_{config.top_logprobs}" if config.top_logprobs else None

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
                outcome = parse_chat_completion(response.json(), constrained=prompt.constraint is not None)
            except (ValueError, KeyError, IndexError, TypeError) as error:
                outcome = Outcome(error=f"unreadable response from {self.url}: {error}")
            return outcome._replace(latency_s=time.perf_counter() - started)
        tries = self.config.max_retries + 1
        return Outcome(error=f"{cause} (gave up after {tries} tries)", latency_s=time.perf_counter() - started)

    def complete(self, batch: list[Prompt], sampling: Sampling) -> list[Outcome]:
        with ThreadPoolExecutor(max_workers=self.config.concurrency) as pool:
            return list(pool.map(lambda prompt: self._call(prompt, sampling), batch))


def parse_chat_completion(payload: Mapping[str, Any], constrained: bool = False) -> Outcome:
    """An `Outcome` from a chat-completions response body (usage and logprobs are optional); for a constrained
    request its tokens with their `top_logprobs` as `steps` (the server's top k: basis top_k in judging/scores.py)."""
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
    tokens = (choice.get("logprobs") or {}).get("content") or []
    alternatives = tuple(
        TokenStep(token["token"], tuple((top["token"], float(top["logprob"])) for top in token.get("top_logprobs") or []))
        for token in tokens
    ) if constrained and tokens else None
    return Outcome(
        text=text, finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
        prompt_tokens=usage.get("prompt_tokens"), completion_tokens=usage.get("completion_tokens"),
        mean_entropy=entropy, min_token_prob=min_prob, sequence_logprob=logprob, steps=alternatives,
    )

