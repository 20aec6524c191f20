"""Probability-weighted judge scores: the expected value of each score a judge's reply schema constrains, read
from the token distribution at the position where the engine wrote that score.

In:  a reply constraint (`llm.constraints.Constraint`: its JSON Schema says which top-level fields are scores and
     which values each may take after the fields before it), the parsed reply, and the reply's generated tokens
     with their alternatives (`TokenStep`s, recorded by every backend for a constrained request).
Out: per scored field a `FieldScore`: the expected value Σ_k p(k)·k over the values the grammar allowed at that
     position (renormalised over them; a boolean's is P(true)), the probability mass the model put on those values
     before the grammar mask (transformers only: null elsewhere), and the basis —
     - "masked_exact": the alternatives listed every token the grammar allowed there (transformers from its masked
       logits; vLLM when its processed log-probabilities are masked and the list ran past the allowed tokens),
     - "top_k": from the top-k log-probabilities a backend returned (an OpenAI-compatible server; vLLM otherwise):
       allowed values outside the top k count as probability 0,
     - "argmax_only": no distribution (no steps recorded, a server that returns no log-probabilities, or none of
       the listed tokens is an allowed value): the expected value is the reply's own value.
     A field the grammar forces to one value there (e.g. Study C's scores after is_answer false) takes it with
     probability 1 and needs no distribution.

Scoring positions: the reply is compact JSON under the schema, so a field's value starts right after `"name":`
(whitespace allowed). The step whose token covers that offset is the scoring step; each alternative token there is
mapped to the allowed value its text begins (after the part of the token before the value's start, which every
alternative must share), e.g. "t" or "true" → true. A value whose JSON text is a proper prefix of another's (1 and
10 in a 1–10 scale) cannot be told apart at its first token: `score_fields` refuses such a schema with one error
naming the template and the field.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from workflow_scripts.core.vocabulary import SCORE_BASES
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm.backends import TokenStep

MASKED_EXACT, TOP_K, ARGMAX_ONLY = SCORE_BASES  # strongest first: a row's basis is its weakest field's


@dataclass(frozen=True)
class FieldScore:
    expected: float | None
    mass: float | None
    basis: str


def _values(schema: Mapping[str, Any]) -> list[Any] | None:
    """The JSON values a scored field may take (None: not a score field — a string, an object, ...)."""
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema:
        return list(schema["enum"])
    kind = schema.get("type")
    if kind == "boolean":
        return [True, False]
    if kind == "null":
        return [None]
    if kind == "integer" and "minimum" in schema and "maximum" in schema:
        return list(range(int(schema["minimum"]), int(schema["maximum"]) + 1))
    return None


def _branches(schema: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [branch for branch in schema.get("anyOf", [schema]) if branch.get("type") == "object"]


def score_fields(schema: Mapping[str, Any], template: str) -> tuple[str, ...]:
    """The top-level fields whose every alternative is a boolean, an integer range, a const or null, in the schema's
    order; InputError when two of a field's values cannot be told apart at their first token."""
    fields: dict[str, list[Any]] = {}
    excluded: set[str] = set()
    for branch in _branches(schema):
        for name, spec in branch.get("properties", {}).items():
            values = _values(spec)
            if values is None:
                excluded.add(name)
            else:
                fields.setdefault(name, []).extend(values)
    for name, values in fields.items():
        texts = sorted({json.dumps(value) for value in values if value is not None})
        clash = [(a, b) for a in texts for b in texts if a != b and b.startswith(a)]
        if name not in excluded and clash:
            a, b = clash[0]
            raise InputError(
                f"template {template}: the score field '{name}' has values {a} and {b} whose first token cannot be "
                f"told apart (one is a prefix of the other); probability-weighted scoring needs values that differ in "
                f"their first character, e.g. a 1–9 or 0–5 scale, or set judging.scoring: argmax"
            )
    return tuple(name for name in fields if name not in excluded)


def allowed_values(schema: Mapping[str, Any], reply: Mapping[str, Any], field: str) -> list[Any]:
    """The values `field` may take given the reply's fields before it (the anyOf branches still consistent)."""
    allowed: list[Any] = []
    for branch in _branches(schema):
        properties = branch.get("properties", {})
        if field not in properties:
            continue
        before = list(properties)[: list(properties).index(field)]
        if all(name in reply and jsonschema.Draft202012Validator(properties[name]).is_valid(reply[name])
               for name in before):
            allowed += [value for value in _values(properties[field]) or [] if value not in allowed]
    return allowed


def _value_offsets(text: str, reply: Mapping[str, Any], fields: Sequence[str]) -> dict[str, int]:
    """Character offset in `text` where each field's value starts (fields in reply order, searched left to right)."""
    offsets, position = {}, 0
    for name in reply:
        match = re.compile(rf'"{re.escape(name)}"\s*:\s*').search(text, position)
        if match is None:
            break
        offsets[name] = match.end()
        position = match.end()
    return {name: offsets[name] for name in fields if name in offsets}


def _step_at(steps: Sequence[TokenStep], offset: int) -> tuple[TokenStep, str] | None:
    """The step whose token covers character `offset`, and the part of that token before it."""
    start = 0
    for step in steps:
        end = start + len(step.token)
        if start <= offset < end:
            return step, step.token[: offset - start]
        start = end
    return None


def _distribution(step: TokenStep, prefix: str, values: Sequence[Any]) -> dict[Any, float]:
    """Probability of each allowed value at a scoring step (renormalised over the alternatives that begin one)."""
    texts = {json.dumps(value): value for value in values}
    weights: dict[Any, float] = {}
    for text, logprob in step.alternatives:
        if not text.startswith(prefix) or not math.isfinite(logprob):
            continue
        rest = text[len(prefix):]
        matches = [
            value for written, value in texts.items() if rest and (written.startswith(rest) or rest.startswith(written))
        ]
        if len(matches) == 1:
            weights[matches[0]] = weights.get(matches[0], 0.0) + math.exp(logprob)
    total = sum(weights.values())
    return {value: weight / total for value, weight in weights.items()} if total > 0 else {}


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def field_scores(
    schema: Mapping[str, Any], fields: Sequence[str], reply: Mapping[str, Any], steps: Sequence[TokenStep] | None
) -> dict[str, FieldScore]:
    """The expected value, pre-mask mass and basis of each scored field present in `reply` (see the module text)."""
    joined = "".join(step.token for step in steps) if steps else ""
    offsets = _value_offsets(joined, reply, fields) if steps else {}
    scores = {}
    for name in fields:
        if name not in reply:
            continue
        values = allowed_values(schema, reply, name)
        if len(values) <= 1:  # forced by the grammar here
            scores[name] = FieldScore(_number(reply[name]), None, MASKED_EXACT)
            continue
        found = _step_at(steps, offsets[name]) if name in offsets else None
        distribution = _distribution(found[0], found[1], [v for v in values if v is not None]) if found else {}
        if not distribution:
            scores[name] = FieldScore(_number(reply[name]), None, ARGMAX_ONLY)
            continue
        step = found[0]
        expected = sum(probability * float(value) for value, probability in distribution.items())
        scores[name] = FieldScore(expected, step.mass, MASKED_EXACT if step.complete else TOP_K)
    return scores


def weakest(bases: Sequence[str]) -> str:
    """The weakest of some fields' bases (a row's basis); argmax_only for none."""
    return max(bases, key=SCORE_BASES.index) if bases else ARGMAX_ONLY
