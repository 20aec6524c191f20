"""LLM settings: one LLM block of the config (e.g. `models.generator`) validated once into an `EngineConfig`, and
decoding settings (`Sampling`) with their per-call overrides.

In:  an LLM block (backend, model, device, dtype, sampling, base_url, ..., the `vllm` block) and where it sits in
     the config (for messages); sampling overrides of one `generate` call.
Out: `engine_config` → `EngineConfig`, `sampling_from` → `Sampling`; an InputError naming each key at fault.

Each key is checked against the config schema's `$defs/llm` (workflow_scripts/config/config.schema.yaml: names, types,
ranges, enums), the one statement of them, then the rules that span keys, stated only here: dtype applies to the
transformers backend only, the openai backend needs base_url, `tokenizer` applies to openai and `serve` to vllm only,
and the variable named by api_key_env must be set. A retired key is refused by the schema with why (`removed`).
`validate_config` calls `engine_config` for models.generator and models.judge, so a run stops before any job on the
same rules the engine applies when it loads. Each backend module's docstring says which keys it reads.
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from workflow_scripts.core.errors import InputError
from workflow_scripts.core.schema import schema_problems


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


DEFAULT_SAMPLING = Sampling()  # greedy, 256 new tokens


def sampling_from(settings: Mapping[str, Any], base: Sampling = DEFAULT_SAMPLING, where: str = "sampling") -> Sampling:
    """`base` with the given settings applied; InputError naming each unknown key or bad value (the config schema's
    `$defs/llm` sampling block)."""
    problems = schema_problems(settings, "#/$defs/llm/properties/sampling", where)
    if problems:
        raise InputError("\n".join(problems))
    values = dict(settings)
    if "stop" in values:
        values["stop"] = tuple(values["stop"])
    return replace(base, **values)


@dataclass(frozen=True)
class EngineConfig:
    """One LLM as configured (e.g. `models.generator`); each backend module's docstring says which keys it reads."""

    backend: str
    model: str
    device: str = "cpu"
    dtype: str = "float32"
    sampling: Sampling = DEFAULT_SAMPLING
    max_prompt_tokens: int = 2048
    batch_size: int = 8
    shard_size: int = 64
    top_logprobs: int = 5
    base_url: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 3
    concurrency: int = 8
    chars_per_token: float = 4.0
    tokenizer: str | None = None
    serve: bool = False
    batch: bool = False
    batch_poll_s: float = 30.0
    structured_outputs: bool = True
    vllm: Mapping[str, Any] = field(default_factory=dict)


COST_KEYS = ("prices",)  # an LLM block's keys that price its calls (cost/ledger.py) and never reach the engine


def engine_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """An LLM block as its jobs read it: without `COST_KEYS`, so that a new price reruns no LLM job."""
    return {key: value for key, value in spec.items() if key not in COST_KEYS}


def engine_config(spec: Mapping[str, Any], where: str = "models.generator") -> EngineConfig:
    """Validate an LLM block into an `EngineConfig` (see the module docstring); one InputError listing each key at
    fault."""
    problems = schema_problems(spec, "#/$defs/llm", where)
    if problems:
        raise InputError("\n".join(problems))
    spec = engine_spec(spec)
    config = EngineConfig(**{**spec, "sampling": sampling_from(spec.get("sampling") or {}, where=f"{where}.sampling")})
    problems = []
    if config.dtype != "float32" and config.backend != "transformers":
        problems.append(
            f"{where}.dtype applies to the transformers backend; for vllm set {where}.vllm.dtype, and a served "
            f"model's precision is the server's"
        )
    if config.backend == "openai" and not config.base_url:
        problems.append(f"{where}.base_url is required for the openai backend (e.g. http://localhost:8000/v1)")
    if config.serve and config.backend != "vllm":
        problems.append(
            f"{where}.serve applies to the vllm backend (one vLLM server for the run's jobs); the "
            f"{config.backend} backend {'is a server already' if config.backend == 'openai' else 'has none'}"
        )
    if (config.batch or "batch_poll_s" in spec) and config.backend != "openai":
        problems.append(f"{where}.batch applies to the openai backend (a server's Batch API); the {config.backend} "
                        f"backend batches its requests itself")
    if config.tokenizer and config.backend != "openai":
        problems.append(f"{where}.tokenizer applies to the openai backend; the {config.backend} backend uses "
                        f"{where}.model's own tokenizer")
    if config.api_key_env and not os.environ.get(config.api_key_env):
        problems.append(
            f"{where}.api_key_env: the environment variable {config.api_key_env!r} is not set; export it before the "
            f"run (the key itself never goes into the config)"
        )
    if problems:
        raise InputError("\n".join(problems))
    return config
