"""Parsing the JSON replies the structured steps ask for.

In:  a reply's text (or a GENERATIONS row: text, finish_reason, constrained) and the JSON kind expected (object or
     list).
Out: `Reply`s: the value (None on failure), whether the JSON had to be repaired, and why parsing failed;
     `read_reply` adds how a generated reply was obtained (constrained, parsed, repaired, length, parse_failed).

JSON replies are parsed strictly first, then repaired: the first balanced {...} or [...] block is extracted
(code fences and chatter around it dropped), trailing commas are removed, single-quoted strings and Python
literals (True/False/None) are converted. Anything still unparseable is a failure with its reason.
"""

import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple


class Reply(NamedTuple):
    """A parsed model reply: `value` (None on failure), whether JSON needed repair, and the failure reason."""

    value: Any
    repaired: bool = False
    failure: str | None = None


def read_reply(row: Mapping[str, Any], kind: type = dict) -> tuple[Reply, str]:
    """(the parsed JSON reply of a GENERATIONS row, how it was obtained): "constrained" (decoded under its
    schema and strict JSON), "parsed" (strict JSON, unconstrained), "repaired"; on failure "length" (the reply
    was cut by the token budget) or "parse_failed"."""
    parsed = parse_json(row["text"], kind)
    if parsed.value is None:
        return parsed, "length" if row["finish_reason"] == "length" else "parse_failed"
    if parsed.repaired:
        return parsed, "repaired"
    return parsed, "constrained" if row["constrained"] else "parsed"


def _balanced_block(text: str, opener: str) -> str | None:
    """The first balanced `opener`...closer block of `text`, skipping brackets inside quoted strings."""
    closer = {"{": "}", "[": "]"}[opener]
    start = text.find(opener)
    while start != -1:
        depth, quote, escaped = 0, None, False
        for at in range(start, len(text)):
            char = text[at]
            if quote:
                if char == quote and not escaped:
                    quote = None
                escaped = not escaped and char == "\\"
                continue
            if char in "\"'":
                quote = char
            elif char == opener:
                depth += 1
            elif char == closer:
                depth -= 1
                if depth == 0:
                    return text[start : at + 1]
        start = text.find(opener, start + 1)
    return None


PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}
WORD = re.compile(r"[A-Za-z_]+")


def _jsonify_quotes(block: str) -> str:
    """Rewrite single-quoted strings as JSON strings and Python literals as JSON ones (outside strings)."""
    out, at = [], 0
    while at < len(block):
        char = block[at]
        if char in "\"'":
            end, escaped = at + 1, False
            while end < len(block) and (block[end] != char or escaped):
                escaped = not escaped and block[end] == "\\"
                end += 1
            body = block[at + 1 : end]
            out.append(f'"{body}"' if char == '"' else json.dumps(body.replace("\\'", "'")))
            at = end + 1
            continue
        word = WORD.match(block, at)
        if word:
            out.append(PYTHON_LITERALS.get(word.group(), word.group()))
            at += len(word.group())
            continue
        out.append(char)
        at += 1
    return "".join(out)


def parse_json(text: str, kind: type = dict) -> Reply:
    """Parse a reply that should be a JSON object (`kind=dict`) or list (`kind=list`), repairing if needed."""
    try:
        value = json.loads(text)
        if isinstance(value, kind):
            return Reply(value)
    except json.JSONDecodeError:
        pass
    block = _balanced_block(text, "{" if kind is dict else "[")
    if block is None:
        return Reply(None, failure=f"no JSON {'object' if kind is dict else 'list'} in the reply")
    without_commas = re.sub(r",\s*([}\]])", r"\1", block)
    for candidate in (block, without_commas, _jsonify_quotes(without_commas)):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, kind):
            return Reply(value, repaired=True)
    return Reply(None, failure="the JSON in the reply cannot be parsed, even after repair")
