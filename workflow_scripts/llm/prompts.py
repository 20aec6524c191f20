"""Prompt templates of every LLM stage, their config overrides, and parsers for the replies they ask for.

In:  the config's `prompts:` mapping (optional overrides of the defaults below), and per request the fields a
     template names (question, title, ...) plus the evidence units' texts in rank order.
Out: `Template`s, chat messages (`render`), each structured step's reply constraint (`Template.constraint`, see
     `constraints.py`), and parsed replies (`Reply`: value, whether JSON had to be repaired, and why parsing
     failed; `read_reply` adds how a generated reply was obtained).

Templates are lists of (role, content) messages in `str.format` syntax: `{question}` is filled from the
request's fields, `{evidence}` with the evidence units, each written as the template's `evidence_item`
("[{index}] {text}", 1-based index) and separated by blank lines. Literal braces are written `{{` and `}}`.
An override may replace a template's `messages` and/or `evidence_item`, and must use exactly the default's
placeholders (a dropped placeholder would silently ignore an input; an extra one cannot be filled).

Defaults follow the studies: `answer_rag` is Study C's grounding instruction (answer only from the retrieved
papers, no outside knowledge, say when the evidence is insufficient); `rephrase`, `subqueries`,
`rerank_listwise`, `tool_call`/`tool_answer` and `synthetic_queries` are Study C's LLM steps; `judge_study_c`
and `judge_study_a` are the two judges (parsed in `judges.py`); `reask` is the follow-up turn sent after an
unusable judge reply.

Reply constraints are declared next to the templates (below DEFAULTS): the two judges, synthetic queries, sub-queries
(exactly n strings), the listwise rerank (a permutation of the n candidate numbers) and the tool call (a search
with a query, or a direct answer) are decoded under their JSON Schema on every backend; free-text steps
(answers, rephrase, the tool's final answer) are not constrained. An override keeps its step's constraint: one
whose messages no longer mention a field the schema requires gets a warning naming the template (the model
would be made to write fields it was never asked for).

JSON replies are parsed strictly first, then repaired: the first balanced {...} or [...] block is extracted
(code fences and chatter around it dropped), trailing commas are removed, single-quoted strings and Python
literals (True/False/None) are converted. Anything still unparseable is a failure with its reason.
"""

import json
import logging
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

from workflow_scripts.core.contracts import STUDY_C_METRICS
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm import constraints
from workflow_scripts.llm.constraints import Constraint, bounded_text, integer, record

log = logging.getLogger(__name__)

ROLES = ("system", "user", "assistant")
EVIDENCE_FIELD = "evidence"
EVIDENCE_ITEM_FIELDS = frozenset({"index", "text"})
NO_EVIDENCE = "(no documents)"


@dataclass(frozen=True)
class Template:
    """A named chat prompt: (role, format string) messages and how one evidence unit is written."""

    name: str
    messages: tuple[tuple[str, str], ...]
    evidence_item: str = "[{index}] {text}"
    constraint: Callable[[Mapping[str, str]], Constraint] | None = field(default=None, compare=False)

    @property
    def fields(self) -> frozenset[str]:
        """The placeholders of the messages (including "evidence" when the template shows evidence)."""
        return frozenset(name for _, content in self.messages for name in placeholders(content, self.name))

    @property
    def uses_evidence(self) -> bool:
        return EVIDENCE_FIELD in self.fields


ANSWER_SYSTEM = (
    "You are a research assistant. Answer the question using only the retrieved papers. Do not use outside "
    "knowledge. If the retrieved papers do not contain enough information to answer the question, say that the "
    "available information is insufficient."
)
TOOL_SYSTEM = (
    "You answer questions about research papers. You may call a search tool once to retrieve papers from a "
    'corpus. To search, reply with only a JSON object {{"search": "<search query>"}}. To answer without '
    'searching, reply with only a JSON object {{"answer": "<your answer>"}}.'
)
JUDGE_C_USER = (
    "Question: {question}\n\nAnswer: {answer}\n\n"
    "First decide is_answer: true if the answer makes a genuine attempt to answer the question, false if it "
    "refuses, says the information is insufficient, or is empty or irrelevant. If is_answer is true, rate "
    "accuracy, completeness, faithfulness, relevance, clarity and overall, each as an integer from 1 to 5. If "
    "is_answer is false, set all six scores to 0. Reply with only a JSON object:\n"
    '{{"is_answer": true, "accuracy": 4, "completeness": 3, "faithfulness": 4, "relevance": 5, "clarity": 4, '
    '"overall": 4}}'
)
JUDGE_A_USER = (
    "Question: {question}\n\nReference answers (one per annotator):\n{references}\n\n"
    "Evidence shown to the answerer:\n\n{evidence}\n\nAnswer to grade: {answer}\n\n"
    "Grade the answer.\n"
    "- abstained: true if the answer declines to answer or says the evidence is insufficient.\n"
    "- correctness, against the reference answers: 0 = wrong, unsupported, or an abstention although the "
    "references give an answer; 1 = partly correct or materially incomplete; 2 = correct (an abstention is "
    "correct when the references say the question is unanswerable).\n"
    "- faithfulness, against the evidence shown only: 0 = its claims are unsupported, 1 = partly supported, "
    "2 = supported; null when the answer abstained.\n"
    'Reply with only a JSON object: {{"abstained": false, "correctness": 2, "faithfulness": 2}}'
)

REPHRASE_USER = (
    "Rewrite the question below into one clean academic semantic-search query. Keep its original technical terms "
    "and add two to five related academic terms. Do not use boolean operators, quotation marks or any other "
    "search-engine syntax. Reply with the query only.\n\nQuestion: {question}"
)
SUBQUERIES_USER = (
    "Write {n} diverse search queries that together cover the question below, each from a different angle. Reply "
    "with only a JSON list of {n} strings.\n\nQuestion: {question}"
)
RERANK_USER = (
    "Question: {question}\n\nCandidate papers:\n\n{evidence}\n\nRank the {n} candidates by how relevant they are to "
    "the question. Reply with only a JSON list of their numbers, most relevant first, for example [2, 1, 3]."
)
TOOL_RESULTS_USER = (
    "Search results:\n\n{evidence}\n\nNow answer the question using only these papers. If they do not contain "
    "enough information, say that the available information is insufficient."
)
SYNTHETIC_USER = (
    "Title: {title}\nAbstract: {abstract}\n\nWrite two search queries a researcher could type to find this paper:\n"
    '- "problem": the problem or research gap the paper addresses;\n'
    '- "method": its methodology or technical approach.\n'
    "Each query is one or two lines of natural language and must not repeat the paper title verbatim. Reply with "
    'only a JSON object: {{"problem": "...", "method": "..."}}'
)
REASK_USER = (
    "Your reply could not be used: {reason}. Reply again with only the JSON object in the requested format."
)

# ---- reply constraints of the structured steps (constraints.py), one per template that asks for JSON ----------

SYNTHETIC_QUERY_CHARS = 300  # "one or two lines of natural language"
SUBQUERY_CHARS = 200
TOOL_QUERY_CHARS = 200
TOOL_ANSWER_CHARS = 600
JUDGE_C_REPLY = Constraint.of("judge_study_c", {"anyOf": [
    record(is_answer={"const": True}, **{metric: integer(1, 5) for metric in STUDY_C_METRICS}),
    record(is_answer={"const": False}, **{metric: {"const": 0} for metric in STUDY_C_METRICS}),
]})
JUDGE_A_REPLY = Constraint.of("judge_study_a", {"anyOf": [
    record(abstained={"const": False}, correctness=integer(0, 2), faithfulness=integer(0, 2)),
    record(abstained={"const": True}, correctness=integer(0, 2), faithfulness={"type": "null"}),
]})
SYNTHETIC_REPLY = Constraint.of(
    "synthetic_queries", record(problem=bounded_text(SYNTHETIC_QUERY_CHARS), method=bounded_text(SYNTHETIC_QUERY_CHARS))
)
TOOL_CALL_REPLY = Constraint.of("tool_call", {"anyOf": [
    record(search=bounded_text(TOOL_QUERY_CHARS)), record(answer=bounded_text(TOOL_ANSWER_CHARS)),
]})


@cache
def subqueries_reply(n: int) -> Constraint:
    """Exactly n sub-queries (distinctness is checked by the fusion step)."""
    return Constraint.of("subqueries", {"type": "array", "items": bounded_text(SUBQUERY_CHARS), "minItems": n, "maxItems": n})


@cache
def ranking_reply(n: int) -> Constraint:
    return constraints.permutation("rerank_listwise", n)


def _count(fields: Mapping[str, str]) -> int:
    return int(fields["n"])


DEFAULTS: dict[str, Template] = {
    template.name: template
    for template in (
        Template("answer_rag", (
            ("system", ANSWER_SYSTEM), ("user", "Retrieved papers:\n\n{evidence}\n\nQuestion: {question}"),
        )),
        Template("answer_closed_book", (
            ("system", "You are a research assistant. Answer the question concisely from your own knowledge."),
            ("user", "Question: {question}"),
        )),
        Template("rephrase", (
            ("system", "You rewrite questions into academic search queries."), ("user", REPHRASE_USER),
        )),
        Template("subqueries", (
            ("system", "You write search queries for a corpus of research papers."), ("user", SUBQUERIES_USER),
        ), constraint=lambda fields: subqueries_reply(_count(fields))),
        Template("rerank_listwise", (
            ("system", "You rank research papers by relevance to a question."), ("user", RERANK_USER),
        ), constraint=lambda fields: ranking_reply(_count(fields))),
        Template("tool_call", (("system", TOOL_SYSTEM), ("user", "Question: {question}")),
                 constraint=lambda fields: TOOL_CALL_REPLY),
        Template("tool_answer", (
            ("system", TOOL_SYSTEM), ("user", "Question: {question}"), ("assistant", "{call}"),
            ("user", TOOL_RESULTS_USER),
        )),
        Template("synthetic_queries", (
            ("system", "You write search queries that would retrieve a given scientific paper."),
            ("user", SYNTHETIC_USER),
        ), constraint=lambda fields: SYNTHETIC_REPLY),
        Template("judge_study_c", (
            ("system", "You are an impartial judge of answers to research questions."), ("user", JUDGE_C_USER),
        ), constraint=lambda fields: JUDGE_C_REPLY),
        Template("judge_study_a", (
            ("system", "You are a strict grader of answers to questions about a research paper."),
            ("user", JUDGE_A_USER),
        ), constraint=lambda fields: JUDGE_A_REPLY),
        Template("reask", (("user", REASK_USER),)),
    )
}


def placeholders(text: str, where: str) -> list[str]:
    """The `{name}` placeholders of a format string; InputError for malformed braces or non-name fields."""
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as error:
        raise InputError(f"{where}: {error} in {text[:80]!r}; write literal braces as {{{{ and }}}}") from None
    bad = [name for name in names if not name.isidentifier()]
    if bad:
        raise InputError(f"{where}: placeholders must be plain names like {{question}}, got {bad}")
    return names


def _override(default: Template, override: Any) -> Template:
    where = f"prompts.{default.name}"
    if not isinstance(override, Mapping) or set(override) - {"messages", "evidence_item"} or not override:
        raise InputError(f"{where}: expected a mapping with 'messages' and/or 'evidence_item', got {override!r}")
    messages = default.messages
    if "messages" in override:
        given = override["messages"]
        if not isinstance(given, Sequence) or isinstance(given, str) or not given:
            raise InputError(f"{where}.messages: expected a non-empty list of {{role, content}} mappings")
        messages = []
        for at, message in enumerate(given):
            if not isinstance(message, Mapping) or set(message) != {"role", "content"}:
                raise InputError(f"{where}.messages[{at}]: expected a mapping with exactly 'role' and 'content'")
            if message["role"] not in ROLES or not isinstance(message["content"], str):
                raise InputError(f"{where}.messages[{at}]: role must be one of {ROLES} and content a string")
            messages.append((message["role"], message["content"]))
        messages = tuple(messages)
    evidence_item = override.get("evidence_item", default.evidence_item)
    item_fields = set(placeholders(str(evidence_item), f"{where}.evidence_item"))
    if "text" not in item_fields or item_fields - EVIDENCE_ITEM_FIELDS:
        raise InputError(
            f"{where}.evidence_item: must contain {{text}} and may contain {{index}}; got {evidence_item!r}"
        )
    template = Template(default.name, messages, str(evidence_item), default.constraint)
    if template.fields != default.fields:
        raise InputError(
            f"{where}: the messages must use exactly the placeholders {sorted(default.fields)}; "
            f"got {sorted(template.fields)}"
        )
    _warn_unasked(template)
    return template


def _warn_unasked(template: Template) -> None:
    """Warn when an overridden template's messages never mention a field its reply schema requires."""
    if template.constraint is None:
        return
    probe = template.constraint({name: "2" for name in template.fields - {EVIDENCE_FIELD}})  # "n" fields need a number
    said = " ".join(content for _, content in template.messages)
    unasked = sorted(name for name in probe.required_fields() if not re.search(rf"\b{re.escape(name)}\b", said))
    if unasked:
        log.warning(
            "prompts.%s: the messages never mention %s, which the reply schema requires; the model will be made to "
            "write fields it was not asked for (name them in the prompt)", template.name, unasked,
        )


def load_templates(overrides: Mapping[str, Any] | None = None) -> dict[str, Template]:
    """The default templates with the config's `prompts:` overrides applied (validated)."""
    overrides = overrides or {}
    unknown = sorted(set(overrides) - set(DEFAULTS))
    if unknown:
        raise InputError(f"prompts: unknown templates {unknown}; known: {sorted(DEFAULTS)}")
    return {name: _override(default, overrides[name]) if name in overrides else default
            for name, default in DEFAULTS.items()}


def render(template: Template, fields: Mapping[str, str], evidence: Sequence[str] = ()) -> list[dict[str, str]]:
    """Chat messages of `template` filled with `fields` and the evidence units (in rank order)."""
    expected = template.fields - {EVIDENCE_FIELD}
    if set(fields) != expected:
        raise ValueError(f"template {template.name} needs fields {sorted(expected)}, got {sorted(fields)}")
    if evidence and not template.uses_evidence:
        raise ValueError(f"template {template.name} shows no evidence, but {len(evidence)} units were given")
    values = dict(fields)
    if template.uses_evidence:
        items = [template.evidence_item.format(index=index, text=text) for index, text in enumerate(evidence, 1)]
        values[EVIDENCE_FIELD] = "\n\n".join(items) if items else NO_EVIDENCE
    return [{"role": role, "content": content.format(**values)} for role, content in template.messages]


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
