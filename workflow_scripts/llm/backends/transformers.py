"""The transformers backend: batched generation with a transformers causal LM, on CPU or GPU (the offline default).

In:  an engine config (`settings.EngineConfig`: model, device, dtype, batch_size) and the model cache folder (a GGUF
     model is converted there once); then batches of `Prompt`s with their `Sampling`.
Out: one `Outcome` per prompt: text, finish_reason, token counts, uncertainty over the full vocabulary, latency.

Prompts are the model's chat template rendered without torch (`chat_tokenizer.py`), in left-padded batches of
`batch_size`, greedy unless temperature > 0, weights in `dtype` (float32 unless set; another precision is part of
the model fingerprint, so it has its own cache entries). The weights, and with them torch, are loaded only when a
request is missing from the cache: an all-cached stage reads the tokenizer files only.

Uncertainty comes from the model's raw next-token logits over the full vocabulary (before temperature / top-p), so
it does not depend on the sampling settings ("full_vocabulary"). A constrained reply is decoded by an xgrammar
logits processor inside the same batched `generate`, grammars compiled once per (tokenizer, constraint) and reused
across batches (`Grammars`), and is measured over the distribution the grammar left at each step (disallowed
tokens masked, the rest renormalized): `uncertainty_basis` "grammar_masked".

Sampled generation (temperature > 0) seeds torch with `seed` before each batch, so it is reproducible for the same
batches only; greedy output does not depend on the batching beyond floating-point noise. A batch's wall time is
split over its requests in proportion to the tokens each processed (`apportion`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from functools import cached_property, partial
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
    chosen_steps,
    TokenStep,
    apportion,
    check_context,
)
from workflow_scripts.llm.chat_tokenizer import ChatTokenizer
from workflow_scripts.llm.constraints import Constraint
from workflow_scripts.llm.settings import EngineConfig, Sampling

log = logging.getLogger(__name__)
GRAMMAR_MASKED = "grammar_masked"


def load(config: EngineConfig, model_cache: Path, where: str) -> tuple[TransformersBackend, int | None]:
    """The backend of `config` (weights not loaded yet) and the model's context length when known."""
    folder, fingerprint = models.causal_lm_folder(config.model, model_cache)
    limit = models.context_length(folder)
    check_context(config, limit, where)
    if config.dtype != "float32":  # another precision gives other outputs: its own cache entries
        fingerprint = f"{fingerprint}+{config.dtype}"
    chat = ChatTokenizer(folder)
    weights = partial(models.causal_lm_weights, config.model, folder, fingerprint, config.device, config.dtype)
    return TransformersBackend(chat, fingerprint, weights, config.device, config.batch_size), limit


class TransformersBackend(ChatTemplateBackend):
    """Batched generation with a transformers causal LM. Prompts are rendered, counted and encoded by a
    torch-free `ChatTokenizer`; the weights (`load_model()`, e.g. `models.causal_lm_weights`), and with them
    torch, are loaded only when the first batch is generated, so a stage whose requests are all cached never
    imports torch."""

    name = "transformers"
    uncertainty_basis = "full_vocabulary"
    record_steps = True  # a constrained reply's steps (judging/scores.py); benchmarks/bench_expected.py turns it off

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
    def grammars(self) -> Grammars:
        return Grammars(self.chat.folder, self.model.config.vocab_size, sorted(self.eos_ids), self.fingerprint)

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
            grammar = self.grammars.processor([prompt.constraint for prompt in batch], self.record_steps)
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
            steps = None
            if grammar is not None:  # uncertainty over the distribution the grammar left (masked, renormalized)
                allowed = torch.stack([grammar.allowed[step][row] for step in range(end)])
                logits = logits.masked_fill(~allowed, -math.inf)
            logprobs = logits.log_softmax(-1)
            if grammar is not None and self.record_steps:
                masses = [float(grammar.masses[step][row]) for step in range(end)]
                steps = self._steps(tokens[:end], logprobs, allowed, masses)
            chosen = logprobs[torch.arange(end), torch.tensor(tokens[:end])]
            if batch[row].tokens and grammar is None:
                steps = chosen_steps([self.chat.decode([token]) for token in tokens[:end]], chosen.tolist())
            entropy = -(logprobs.exp() * logprobs).nan_to_num().sum(-1)
            text = self.chat.decode(tokens[:end], skip_special_tokens=True)
            for stop in sampling.stop:
                text = text.split(stop, 1)[0]
            outcomes.append(Outcome(
                text=text, finish_reason="stop" if stopped else "length", prompt_tokens=int(prompt_tokens),
                completion_tokens=end, mean_entropy=float(entropy.mean()), min_token_prob=float(chosen.exp().min()),
                sequence_logprob=float(chosen.sum()), uncertainty_basis=GRAMMAR_MASKED if grammar is not None else None,
                steps=steps,
            ))
        return outcomes

    def _steps(self, tokens: list[int], logprobs: Any, allowed: Any, masses: list[float]) -> tuple[TokenStep, ...]:
        """A constrained reply's steps: at each, the chosen token's text and, where the grammar allowed at most
        ALTERNATIVES tokens, every allowed token with its masked log-probability and the unmasked mass on them."""
        steps = []
        for step, token in enumerate(tokens):
            count = int(allowed[step].sum())
            alternatives: tuple[tuple[str, float], ...] = ()
            mass = None
            if count <= ALTERNATIVES:
                ids = allowed[step].nonzero().flatten().tolist()
                values = logprobs[step, ids].tolist()
                alternatives = tuple(sorted(((self.chat.decode([i]), v) for i, v in zip(ids, values)),
                                            key=lambda pair: -pair[1]))
                mass = masses[step]
            steps.append(TokenStep(self.chat.decode([token]), alternatives, count <= ALTERNATIVES, mass))
        return tuple(steps)

    def complete(self, batch: list[Prompt], sampling: Sampling) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for start in range(0, len(batch), self.batch_size):
            started = time.perf_counter()
            chunk = self._batch(batch[start : start + self.batch_size], sampling)
            outcomes += apportion(time.perf_counter() - started, chunk)
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

    def processor(self, batch: Sequence[Constraint], masses: bool = True) -> Any:
        """An xgrammar logits processor for these rows that also records, per step, which tokens it allowed and the
        probability the unmasked model put on them."""
        import torch

        class Masking(self.xgrammar.contrib.hf.LogitsProcessor):
            allowed: list[Any]

            def __call__(self, input_ids: Any, scores: Any) -> Any:
                # the mask is applied in place (to generate's own logits too): the unmasked distribution first
                before = scores.float().softmax(-1) if masses else None
                scores = super().__call__(input_ids, scores)
                allowed = ~torch.isneginf(scores)
                self.allowed.append(allowed)
                if masses:
                    self.masses.append((before * allowed).sum(-1))
                return scores

        masking = Masking([self.compile(constraint) for constraint in batch])
        masking.allowed, masking.masses = [], []
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

