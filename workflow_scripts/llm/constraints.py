"""Output constraints of the structured LLM steps: a JSON Schema per reply, decoded under it on every backend.

In:  a step's JSON Schema (declared next to its template in `templates.py`; some depend on the request, e.g. the
     number of sub-queries), optionally an exact grammar where the engines do not enforce a JSON Schema keyword,
     and the replies generated under it.
Out: `Constraint`s: the cache-key text, the worst-case token budget, the grammar an engine compiles (`grammar_spec`)
     and `check`, the validation of a parsed reply against the schema (the `jsonschema` library).

Engines: transformers compiles the constraint with xgrammar (the grammar library vLLM uses) into a
logits processor inside the same batched `generate`; vllm passes it as `StructuredOutputsParams`; the openai
backend sends the schema as `response_format: {"type": "json_schema", ...}`. Replies are compact JSON (xgrammar's
`any_whitespace=False`: separators ", " and ": ").

Exactness: xgrammar and vLLM do not enforce `uniqueItems`, so the listwise-rerank permutation also carries an
exact grammar (EBNF, the xgrammar / vLLM dialect): a state per set of numbers already used, so a repeated or
out-of-range candidate number cannot be emitted. It has 2^n states, so it is built up to `MAX_PERMUTATION` (12)
candidates (compiles in about 0.5 s); above that the schema alone is decoded (range and length exact) and a
repeated number is caught by `check`. An openai server receives the schema; `check` always runs.

Token budget: a constrained reply cut by max_new_tokens is not valid JSON, so its budget comes from the schema:
the longest reply it admits in bytes (a string counts 4 bytes per character, the widest UTF-8 code point: xgrammar
counts maxLength in code points and emits no escape sequences under it, measured on 0.2.8; integers their widest
bound; separators and braces included) plus one end-of-sequence token. Every token of a byte-level tokenizer is
at least one byte, so a reply within the grammar always fits. (A server with another grammar engine may write
escapes or whitespace; a reply it cuts is counted as "length".) A reply still cut (the
server's own limit) is recorded as finish_reason "length" and counted as its own failure cause, never as a parse
failure. Free-text steps keep their configured max_new_tokens.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import jsonschema

from workflow_scripts.core.errors import InputError

MAX_PERMUTATION = 12
CHAR_BYTES = 4  # the widest UTF-8 code point: one character of a bounded string
SEPARATOR_BYTES = 2  # ", " between items, ": " after a key


@dataclass(frozen=True)
class Constraint:
    """A reply constraint: `template` names the step, `schema_json` is the JSON Schema as declared, compact, with
    its keys in declaration order (the engines decode an object's properties in the order the schema lists them,
    so sorting the keys would reorder the reply: a judge's is_answer after its scores), `grammar` an exact EBNF
    grammar when the schema alone is not exact for the engines (else None)."""

    template: str
    schema_json: str
    grammar: str | None = None

    @classmethod
    def of(cls, template: str, schema: Mapping[str, Any], grammar: str | None = None) -> "Constraint":
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as error:
            raise InputError(
                f"template {template}: its reply schema is not a valid JSON Schema: {error.message}"
            ) from None
        return cls(template, json.dumps(schema, separators=(",", ":")), grammar)

    @cached_property
    def schema(self) -> dict[str, Any]:
        return json.loads(self.schema_json)

    @property
    def key(self) -> str:
        """What the cache key records of the constraint (equal keys decode identically)."""
        return self.schema_json if self.grammar is None else f"{self.schema_json}\n{self.grammar}"

    @cached_property
    def token_budget(self) -> int:
        """Worst-case tokens of a reply: its longest compact JSON in bytes, plus an end-of-sequence token."""
        return max_bytes(self.schema, self.template) + 1

    def grammar_spec(self) -> tuple[str, str]:
        """("grammar", EBNF) when an exact grammar exists, else ("json", the schema's JSON)."""
        return ("grammar", self.grammar) if self.grammar is not None else ("json", self.schema_json)

    def check(self, value: Any) -> str | None:
        """None if `value` satisfies the schema, else the first violation in words."""
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(self.schema).iter_errors(value))
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path)
        return f"{where + ': ' if where else ''}{error.message}"

    def required_fields(self) -> set[str]:
        """The property names the schema requires at the top level (of any alternative)."""
        alternatives = self.schema.get("anyOf", [self.schema])
        return {name for alternative in alternatives for name in alternative.get("required", [])}


def max_bytes(schema: Mapping[str, Any], where: str) -> int:
    """The longest compact JSON text (bytes) a schema admits; InputError for an unbounded one."""
    if "anyOf" in schema:
        return max(max_bytes(alternative, where) for alternative in schema["anyOf"])
    if "const" in schema:
        return len(json.dumps(schema["const"]).encode())
    if "enum" in schema:
        return max(len(json.dumps(value).encode()) for value in schema["enum"])
    kind = schema.get("type")
    if kind == "boolean":
        return len("false")
    if kind == "null":
        return len("null")
    if kind == "integer":
        if "minimum" not in schema or "maximum" not in schema:
            raise InputError(f"template {where}: an integer in its reply schema needs minimum and maximum")
        return max(len(str(schema["minimum"])), len(str(schema["maximum"])))
    if kind == "string":
        if "maxLength" not in schema:
            raise InputError(f"template {where}: a string in its reply schema needs maxLength")
        return 2 + CHAR_BYTES * schema["maxLength"]
    if kind == "array":
        if "maxItems" not in schema:
            raise InputError(f"template {where}: an array in its reply schema needs maxItems")
        count = schema["maxItems"]
        return 2 + count * max_bytes(schema["items"], where) + max(count - 1, 0) * SEPARATOR_BYTES
    if kind == "object":
        properties = schema.get("properties", {})
        if schema.get("additionalProperties", True) is not False:
            raise InputError(f"template {where}: an object in its reply schema needs additionalProperties: false")
        members = [len(json.dumps(name).encode()) + SEPARATOR_BYTES + max_bytes(value, where)
                   for name, value in properties.items()]
        return 2 + sum(members) + max(len(members) - 1, 0) * SEPARATOR_BYTES
    raise InputError(f"template {where}: cannot bound the reply schema {dict(schema)!r} (no type, enum or const)")


# ---- the constraint kinds the steps use -------------------------------------------------------------------


def bounded_text(max_length: int) -> dict[str, Any]:
    """A string of 1 to `max_length` characters (a blank one is the step's own failure cause)."""
    return {"type": "string", "minLength": 1, "maxLength": max_length}


def integer(low: int, high: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": low, "maximum": high}


def record(**properties: Any) -> dict[str, Any]:
    """A JSON object with exactly these properties, in this order."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def permutation_grammar(n: int) -> str:
    """EBNF of a compact JSON list holding each of 1..n exactly once (one rule per set of numbers used so far)."""
    full = (1 << n) - 1
    rules = ['root ::= "[" s0 "]"']
    for used in range(full):
        alternatives = []
        for number in range(1, n + 1):
            bit = 1 << (number - 1)
            if used & bit:
                continue
            separator = '", " ' if used else ""
            rest = "" if used | bit == full else f" s{used | bit}"
            alternatives.append(f'{separator}"{number}"{rest}')
        rules.append(f"s{used} ::= " + " | ".join(alternatives))
    return "\n".join(rules)


def permutation(template: str, n: int) -> Constraint:
    """Candidate numbers 1..n, each once, as a JSON list (exact grammar up to MAX_PERMUTATION candidates)."""
    schema = {"type": "array", "items": integer(1, n), "minItems": n, "maxItems": n, "uniqueItems": True}
    return Constraint.of(template, schema, permutation_grammar(n) if n <= MAX_PERMUTATION else None)
