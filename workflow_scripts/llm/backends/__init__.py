"""What the engine and its backends share: a prompt as sent, a generation's outcome, the `Backend` protocol, and
the helpers every backend uses (token-level uncertainty, latency apportioning, the context-length check).

In:  `settings.py` (`EngineConfig`, `Sampling`), `constraints.py` and `chat_tokenizer.py`; each backend module
     (`transformers.py`, `openai.py`, `vllm.py`) imports this one, never the engine, so the engine can import them.
Out: `Prompt`, `Outcome`, `Backend`, `ChatTemplateBackend` (render / count / cut with the model's own chat
     template, for the transformers and vllm backends), `constrained_sampling`, `topk_uncertainty`, `apportion`,
     `check_context` and the log line `WEIGHTS_LOADED`.

A backend module exposes `load(config, model_cache, where) -> (backend, context length or None)`; the engine
(`engine.py`) picks one by `config.backend`.
"""

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple, Protocol

from workflow_scripts.core.errors import InputError
from workflow_scripts.llm.chat_tokenizer import ChatTokenizer
from workflow_scripts.llm.constraints import Constraint
from workflow_scripts.llm.settings import EngineConfig, Sampling

WEIGHTS_LOADED = "llm: loading model weights"


def constrained_sampling(settings: Sampling, constraint: Constraint | None) -> Sampling:
    """The decoding settings of one request: a constrained reply gets its schema's token budget and no stop
    strings (the grammar decides where it ends); free text keeps `settings`."""
    if constraint is None:
        return settings
    return replace(settings, max_new_tokens=constraint.token_budget, stop=())


class Prompt(NamedTuple):
    """A request as sent: the chat messages, the rendered text the model sees (the cache key's prompt) and the
    reply constraint it is decoded under (None: free text)."""

    messages: list[dict[str, str]]
    text: str
    constraint: Constraint | None = None
    tokens: bool = False  # record each generated token with its log-probability (`chosen_steps`)


ALTERNATIVES = 20  # alternatives kept per step of a constrained reply (the scoring positions allow a few tokens)


class TokenStep(NamedTuple):
    """One generated token of a constrained reply: its text, the (text, logprob) alternatives the backend saw at that
    step (highest first), whether they are every token the grammar allowed there (`complete`), and the probability
    the unmasked model put on the allowed tokens (`mass`; None when the backend does not expose it). A step where the
    grammar allowed more than ALTERNATIVES tokens (inside a string) keeps no alternatives on the masked backends.
    Read by `judging/scores.py` for probability-weighted judge scores."""

    token: str
    alternatives: tuple[tuple[str, float], ...] = ()
    complete: bool = False
    mass: float | None = None


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
    steps: tuple[TokenStep, ...] | None = None  # a constrained reply's tokens and their alternatives


def chosen_steps(tokens: Sequence[str], logprobs: Sequence[float]) -> tuple[TokenStep, ...]:
    """A free-text reply's generated tokens, each with its own log-probability as its one alternative: what a
    request asking for its tokens (`Prompt.tokens`: FLARE's look-ahead sentence, multistep/loop.py) records."""
    return tuple(TokenStep(token, ((token, float(logprob)),)) for token, logprob in zip(tokens, logprobs, strict=True))


def steps_rows(steps: Sequence[TokenStep] | None) -> list[dict] | None:
    """`TokenStep`s as rows of the token_steps column (contracts.TOKEN_STEP)."""
    if steps is None:
        return None
    return [
        {
            "token": step.token,
            "alternatives": [{"text": text, "logprob": logprob} for text, logprob in step.alternatives],
            "complete": step.complete,
            "mass": step.mass,
        }
        for step in steps
    ]


def steps_of(rows: Sequence[dict] | None) -> tuple[TokenStep, ...] | None:
    """The `TokenStep`s of a token_steps value (None stays None)."""
    if rows is None:
        return None
    return tuple(TokenStep(row["token"], tuple((alt["text"], alt["logprob"]) for alt in row["alternatives"] or ()),
                           bool(row["complete"]), row["mass"]) for row in rows)


class Backend(Protocol):
    """What `generate` needs from a backend (see the engine's module docstring)."""

    name: str
    fingerprint: str
    device: str
    uncertainty_basis: str | None
    token_basis: str  # how prompts are counted and cut: "tokenizer" (the model's own) | "estimate" (characters)

    def render(self, messages: list[dict[str, str]]) -> str: ...

    def count_tokens(self, text: str) -> int: ...

    def cut(self, text: str, max_tokens: int) -> str: ...

    def complete(self, batch: list[Prompt], sampling: Sampling) -> list[Outcome]: ...


class ChatTemplateBackend:
    """A backend whose prompts are the model's own chat template, rendered, counted and cut by a torch-free
    `ChatTokenizer` (`self.chat`), so the transformers and vllm backends see identical prompts."""

    chat: ChatTokenizer
    token_basis = "tokenizer"

    def render(self, messages: list[dict[str, str]]) -> str:
        return self.chat.render(messages)

    def count_tokens(self, text: str) -> int:
        return len(self.chat.encode(text))

    def cut(self, text: str, max_tokens: int) -> str:
        return self.chat.cut(text, max_tokens)


def check_context(config: EngineConfig, limit: int | None, where: str) -> None:
    """InputError when `max_prompt_tokens` + `sampling.max_new_tokens` exceed the model's context `limit`."""
    if limit and config.max_prompt_tokens + config.sampling.max_new_tokens > limit:
        raise InputError(
            f"{where}: max_prompt_tokens ({config.max_prompt_tokens}) + sampling.max_new_tokens "
            f"({config.sampling.max_new_tokens}) exceed the model's context of {limit} tokens"
        )


def topk_uncertainty(steps: Sequence[tuple[float, Sequence[float]]]) -> tuple[float | None, float | None, float | None]:
    """(mean entropy over the top-k, min token probability, sequence log-prob) from per-token
    (chosen token's logprob, top-k logprobs); entropy is None unless every step has top-k values. A -inf entry
    (a token the grammar masked, listed by vLLM) has probability 0 and adds nothing to the entropy."""
    if not steps:
        return None, None, None
    chosen = [logprob for logprob, _ in steps]
    entropies = [-sum(math.exp(value) * value for value in top if value > -math.inf) for _, top in steps if top]
    entropy = sum(entropies) / len(entropies) if len(entropies) == len(steps) else None
    return entropy, math.exp(min(chosen)), float(sum(chosen))


def apportion(wall: float, outcomes: list[Outcome]) -> list[Outcome]:
    """Split a batch's wall time over its outcomes in proportion to prompt + completion tokens."""
    weights = [(outcome.prompt_tokens or 0) + (outcome.completion_tokens or 0) for outcome in outcomes]
    if not sum(weights):
        weights = [1] * len(outcomes)
    return [outcome._replace(latency_s=wall * weight / sum(weights)) for outcome, weight in zip(outcomes, weights)]
