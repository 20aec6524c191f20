"""Prompt templates of every LLM stage, their config overrides, and parsers for the replies they ask for.

In:  the config's `prompts:` mapping (optional overrides of the defaults below), and per request the fields a
     template names (question, title, ...) plus the evidence units' texts in rank order.
Out: `Template`s, chat messages (`render`), and parsed replies (`Reply`: value, whether JSON had to be repaired,
     and why parsing failed).

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

JSON replies are parsed strictly first, then repaired: the first balanced {...} or [...] block is extracted
(code fences and chatter around it dropped), trailing commas are removed, single-quoted strings and Python
literals (True/False/None) are converted. Anything still unparseable is a failure with its reason.
"""

import json
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from workflow_scripts.errors import InputError

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
        )),
        Template("rerank_listwise", (
            ("system", "You rank research papers by relevance to a question."), ("user", RERANK_USER),
        )),
        Template("tool_call", (("system", TOOL_SYSTEM), ("user", "Question: {question}"))),
        Template("tool_answer", (
            ("system", TOOL_SYSTEM), ("user", "Question: {question}"), ("assistant", "{call}"),
            ("user", TOOL_RESULTS_USER),
        )),
        Template("synthetic_queries", (
            ("system", "You write search queries that would retrieve a given scientific paper."),
            ("user", SYNTHETIC_USER),
        )),
        Template("judge_study_c", (
            ("system", "You are an impartial judge of answers to research questions."), ("user", JUDGE_C_USER),
        )),
        Template("judge_study_a", (
            ("system", "You are a strict grader of answers to questions about a research paper."),
            ("user", JUDGE_A_USER),
        )),
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
    template = Template(default.name, messages, str(evidence_item))
    if template.fields != default.fields:
        raise InputError(
            f"{where}: the messages must use exactly the placeholders {sorted(default.fields)}; "
            f"got {sorted(template.fields)}"
        )
    return template


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


def parse_query(text: str) -> Reply:
    """A rewritten search query: the first non-empty line, without a "Query:" label or surrounding quotes."""
    for line in text.splitlines():
        line = re.sub(r"^\s*(search\s+)?query\s*:\s*", "", line.strip(), flags=re.IGNORECASE).strip().strip("\"'`")
        if line:
            return Reply(line)
    return Reply(None, failure="empty reply")


def parse_subqueries(text: str, n: int) -> Reply:
    """Up to `n` distinct non-empty sub-queries from a JSON list; fewer than `n` means the caller falls back."""
    parsed = parse_json(text, list)
    if parsed.value is None:
        return parsed
    usable: list[str] = []
    for item in parsed.value:
        if isinstance(item, str) and item.strip() and item.strip() not in usable:
            usable.append(item.strip())
    failure = None if len(usable) >= n else f"{len(usable)} usable sub-queries, {n} asked for"
    return Reply(usable[:n], parsed.repaired, failure)


def parse_ranking(text: str, n: int) -> Reply:
    """A permutation of range(n) (0-based) from a JSON list of 1-based candidate numbers, most relevant first.

    Numbers may be ints or strings like "3" or "[3]"; out-of-range and repeated numbers are ignored, and
    candidates the model left out follow in their original order. A reply naming no valid number fails.
    """
    parsed = parse_json(text, list)
    if parsed.value is None:
        return parsed
    order: list[int] = []
    for item in parsed.value:
        digits = re.fullmatch(r"\s*\[?\s*(\d+)\s*\]?\s*", str(item)) if not isinstance(item, bool) else None
        index = int(digits.group(1)) - 1 if digits else -1
        if 0 <= index < n and index not in order:
            order.append(index)
    if not order:
        return Reply(None, parsed.repaired, f"no candidate number between 1 and {n} in the reply")
    return Reply(order + [index for index in range(n) if index not in order], parsed.repaired)


class ToolDecision(NamedTuple):
    """The tool-call step's choice: action "search" (text is the query) or "answer" (text is the answer)."""

    action: str
    text: str


def parse_tool_call(text: str) -> Reply:
    """A `ToolDecision` from {"search": "..."} or {"answer": "..."} (exactly one of the two, a string)."""
    parsed = parse_json(text, dict)
    if parsed.value is None:
        return parsed
    actions = [key for key in ("search", "answer") if key in parsed.value]
    if len(actions) != 1 or not isinstance(parsed.value[actions[0]], str):
        return Reply(None, parsed.repaired, 'expected exactly one of "search" or "answer" with a string value')
    value = parsed.value[actions[0]].strip()
    if actions[0] == "search" and not value:
        return Reply(None, parsed.repaired, "empty search query")
    return Reply(ToolDecision(actions[0], value), parsed.repaired)


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


def parse_synthetic(text: str, title: str) -> Reply:
    """{"problem": ..., "method": ...}: two non-empty queries of at most 2 lines, neither containing the title."""
    parsed = parse_json(text, dict)
    if parsed.value is None:
        return parsed
    queries = {}
    for kind in ("problem", "method"):
        query = parsed.value.get(kind)
        if not isinstance(query, str) or not query.strip():
            return Reply(None, parsed.repaired, f'missing or empty "{kind}" query')
        if len([line for line in query.splitlines() if line.strip()]) > 2:
            return Reply(None, parsed.repaired, f'the "{kind}" query is longer than 2 lines')
        if title.strip() and _squash(title) in _squash(query):
            return Reply(None, parsed.repaired, f'the "{kind}" query repeats the title verbatim')
        queries[kind] = query.strip()
    return Reply(queries, parsed.repaired)
