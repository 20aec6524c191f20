"""Prompt templates of every LLM stage, and the reply constraint each structured step declares next to its texts.

In:  nothing (the defaults below); `rendering.load_templates` applies the config's `prompts:` overrides.
Out: `Template`s (`DEFAULTS`), each structured step's reply constraint (`Template.constraint`, see `constraints.py`),
     and `placeholders`, the fields a template's format strings name.

Templates are lists of (role, content) messages in `str.format` syntax: `{question}` is filled from the
request's fields, `{evidence}` with the evidence units, each written as the template's `evidence_item`
("[{index}] {text}", 1-based index) and separated by blank lines (`rendering.render`). Literal braces are
written `{{` and `}}`.

Defaults follow the studies: `answer_rag` is Study C's grounding instruction (answer only from the retrieved
papers, no outside knowledge, say when the evidence is insufficient); `rephrase`, `subqueries`,
`rerank_listwise`, `tool_call`/`tool_answer` and `synthetic_queries` are Study C's LLM steps; `generated_question`
writes a question and its answer from one unit of a paper (Study A on a corpus without questions, ingest/questions.py,
with one made-up worked example as a previous turn); `multistep_thought` writes the next sentence of an IRCoT chain
of thought (multistep/loop.py); `judge_quality` and `judge_grounded` are the two judges (parsed in
`judging/judges.py`); `reask` is the follow-up turn sent after an
unusable judge reply.

Reply constraints are declared next to the templates (below DEFAULTS): the two judges, synthetic queries, sub-queries
(exactly n strings), the listwise rerank (a permutation of the n candidate numbers) and the tool call (a search
with a query, or a direct answer) are decoded under their JSON Schema on every backend; free-text steps
(answers, rephrase, the tool's final answer) are not constrained.
"""

import json
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache

from workflow_scripts.core.vocabulary import STUDY_C_METRICS
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm import constraints
from workflow_scripts.llm.constraints import Constraint, bounded_text, integer, record

EVIDENCE_FIELD = "evidence"


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

    @property
    def example_texts(self) -> frozenset[str]:
        """The strings of the JSON worked examples in its assistant turns, whitespace-normalized and lower-cased: a
        reply that repeats one copied the example (turns with placeholders or without JSON hold no example)."""
        texts: set[str] = set()
        for role, content in self.messages:
            if role != "assistant" or placeholders(content, self.name):
                continue
            try:
                example = json.loads(content.format())
            except ValueError:
                continue
            values = (
                list(example.values()) if isinstance(example, dict) else example if isinstance(example, list) else []
            )
            texts |= {normalized(value) for value in values if isinstance(value, str)}
        return frozenset(texts)


def normalized(text: str) -> str:
    """Whitespace runs to one space, lower case: how a reply is compared with a worked example."""
    return " ".join(text.split()).lower()


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


def literal(text: str) -> str:
    """`text` as a format string that renders to itself (its braces doubled)."""
    return text.replace("{", "{{").replace("}", "}}")


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
JUDGE_QUALITY_USER = (
    "Question: {question}\n\nAnswer: {answer}\n\n"
    "First decide is_answer: true if the answer makes a genuine attempt to answer the question, false if it "
    "refuses, says the information is insufficient, or is empty or irrelevant. If is_answer is true, rate "
    "accuracy, completeness, faithfulness, relevance, clarity and overall, each as an integer from 1 to 5. If "
    "is_answer is false, set all six scores to 0. Reply with only a JSON object:\n"
    '{{"is_answer": true, "accuracy": 4, "completeness": 3, "faithfulness": 4, "relevance": 5, "clarity": 4, '
    '"overall": 4}}'
)
JUDGE_GROUNDED_USER = (
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
QUESTION_USER = (
    "Paper: {title}\nSection: {section}\nText ({kind}): {text}\n\nWrite one question that this {kind} answers and "
    "its short "
    "answer, taken from the {kind}. The question must make sense to a reader of the paper who has not seen the "
    '{kind}: name the method, dataset, result or quantity it asks about, never "this paragraph". Reply with only '
    'a JSON object: {{"question": "...", "answer": "..."}}'
)
QUESTION_EXAMPLE_FIELDS = {  # the worked example shown before every request (made up for this prompt)
    "title": "Sparse attention for long documents", "section": "Experiments", "kind": "paragraph",
    "text": "We evaluate on the arXiv summarization benchmark. With a window of 512 tokens our model reaches a "
            "ROUGE-L of 41.2, 3.1 points above the dense baseline, while using 38% less memory.",
}
QUESTION_EXAMPLE = {  # its reply
    "question": "How much memory does sparse attention with a 512-token window save over the dense baseline on arXiv "
                "summarization?",
    "answer": "38% less memory",
}
REASK_USER = (
    "Your reply could not be used: {reason}. Reply again with only the JSON object in the requested format."
)

# ---- reply constraints of the structured steps (constraints.py), one per template that asks for JSON ----------

SYNTHETIC_QUERY_CHARS = 300  # "one or two lines of natural language"
QUESTION_CHARS = 200  # one question about one unit
QUESTION_ANSWER_CHARS = 120  # a short answer: a name, a number, a phrase
SUBQUERY_CHARS = 200
TOOL_QUERY_CHARS = 200
TOOL_ANSWER_CHARS = 600
JUDGE_QUALITY_ANSWERED_BRANCH = record(
    is_answer={"const": True}, **{metric: integer(1, 5) for metric in STUDY_C_METRICS}
)
JUDGE_QUALITY_REPLY = Constraint.of("judge_quality", {"anyOf": [
    JUDGE_QUALITY_ANSWERED_BRANCH,
    record(is_answer={"const": False}, **{metric: {"const": 0} for metric in STUDY_C_METRICS}),
]})
# the scores given is_answer true: a reply that chose false is re-scored under this branch alone (judges.Gate)
JUDGE_QUALITY_ANSWERED = Constraint.of("judge_quality", JUDGE_QUALITY_ANSWERED_BRANCH)
JUDGE_GROUNDED_REPLY = Constraint.of("judge_grounded", {"anyOf": [
    record(abstained={"const": False}, correctness=integer(0, 2), faithfulness=integer(0, 2)),
    record(abstained={"const": True}, correctness=integer(0, 2), faithfulness={"type": "null"}),
]})
SYNTHETIC_REPLY = Constraint.of(
    "synthetic_queries", record(problem=bounded_text(SYNTHETIC_QUERY_CHARS), method=bounded_text(SYNTHETIC_QUERY_CHARS))
)
QUESTION_REPLY = Constraint.of(
    "generated_question", record(question=bounded_text(QUESTION_CHARS), answer=bounded_text(QUESTION_ANSWER_CHARS))
)
TOOL_CALL_REPLY = Constraint.of("tool_call", {"anyOf": [
    record(search=bounded_text(TOOL_QUERY_CHARS)), record(answer=bounded_text(TOOL_ANSWER_CHARS)),
]})


@cache
def subqueries_reply(n: int) -> Constraint:
    """Exactly n sub-queries (distinctness is checked by the fusion step)."""
    return Constraint.of(
        "subqueries", {"type": "array", "items": bounded_text(SUBQUERY_CHARS), "minItems": n, "maxItems": n}
    )


@cache
def ranking_reply(n: int) -> Constraint:
    return constraints.permutation("rerank_listwise", n)


def _count(fields: Mapping[str, str]) -> int:
    return int(fields["n"])


DEFAULTS: dict[str, Template] = {
    template.name: template
    for template in (
        Template(
            "answer_rag",
            (
                ("system", ANSWER_SYSTEM),
                ("user", "Retrieved papers:\n\n{evidence}\n\nQuestion: {question}"),
            ),
        ),
        Template(
            "multistep_thought",
            (
                ("system", "You answer a multi-hop question one reasoning step at a time, using the retrieved "
                           "passages. Write only the next sentence of your reasoning. When you know the answer, write "
                           "the sentence 'So the answer is: <answer>.'"),
                ("user", "Retrieved passages:\n\n{evidence}\n\nQuestion: {question}\n\nReasoning so far: {chain}"),
            ),
        ),
        Template(
            "answer_closed_book",
            (
                ("system", "You are a research assistant. Answer the question concisely from your own knowledge."),
                ("user", "Question: {question}"),
            ),
        ),
        Template(
            "rephrase",
            (
                ("system", "You rewrite questions into academic search queries."),
                ("user", REPHRASE_USER),
            ),
        ),
        Template(
            "subqueries",
            (
                ("system", "You write search queries for a corpus of research papers."),
                ("user", SUBQUERIES_USER),
            ),
            constraint=lambda fields: subqueries_reply(_count(fields)),
        ),
        Template(
            "rerank_listwise",
            (
                ("system", "You rank research papers by relevance to a question."),
                ("user", RERANK_USER),
            ),
            constraint=lambda fields: ranking_reply(_count(fields)),
        ),
        Template(
            "tool_call",
            (("system", TOOL_SYSTEM), ("user", "Question: {question}")),
            constraint=lambda fields: TOOL_CALL_REPLY,
        ),
        Template(
            "tool_answer",
            (
                ("system", TOOL_SYSTEM),
                ("user", "Question: {question}"),
                ("assistant", "{call}"),
                ("user", TOOL_RESULTS_USER),
            ),
        ),
        Template(
            "synthetic_queries",
            (
                ("system", "You write search queries that would retrieve a given scientific paper."),
                ("user", SYNTHETIC_USER),
            ),
            constraint=lambda fields: SYNTHETIC_REPLY,
        ),
        Template(
            "generated_question",
            (
                (
                    "system",
                    "You write reading-comprehension questions about scientific papers. Reply with one JSON object "
                    "only.",
                ),
                ("user", literal(QUESTION_USER.format(**QUESTION_EXAMPLE_FIELDS))),
                ("assistant", literal(json.dumps(QUESTION_EXAMPLE))),
                ("user", QUESTION_USER),
            ),
            constraint=lambda fields: QUESTION_REPLY,
        ),
        Template(
            "judge_quality",
            (
                ("system", "You are an impartial judge of answers to research questions."),
                ("user", JUDGE_QUALITY_USER),
            ),
            constraint=lambda fields: JUDGE_QUALITY_REPLY,
        ),
        Template(
            "judge_grounded",
            (
                ("system", "You are a strict grader of answers to questions about a research paper."),
                ("user", JUDGE_GROUNDED_USER),
            ),
            constraint=lambda fields: JUDGE_GROUNDED_REPLY,
        ),
        Template("reask", (("user", REASK_USER),)),
    )
}
