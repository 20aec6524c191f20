"""Generated questions: per-paper questions written by the generator from sampled units (Study A on a corpus
without questions, e.g. unarXive full texts).

In:  a dataset's raw files, read through its format's unit stream (`registry.stream_for`, the stream ingest reads:
     the same unit ids); its `generate_questions` settings (`per_paper`, `kinds`, `min_words`, `seed`); the
     generator config and the `generated_question` template (with the config's `prompts` override).
Out: GENERATED_QUESTIONS (qid "<source unit id>:q", group_id = the paper, source_unit_id = the gold evidence,
     source_kind, text = the question, answer = the reference answer) and a JSON report: papers, papers with no
     candidate unit, candidate units, units sampled, questions kept, failures by cause, how the used replies were
     obtained, and the
     settings. Ingest turns the table into the dataset's questions (answers [answer], gold_unit_ids [source]) and
     qrels (source unit, relevance 1).

Sampling: for each paper in stream order, its candidate units are those of `kinds` whose text has at least
`min_words` words; `per_paper` of them (all, when fewer) are drawn by `random.Random(f"{seed}:{paper}")`, so a
paper's sample depends only on the seed and the paper, not on the other papers or their order; the sample is kept
in reading order. One paper's units are held at a time.

The generator sees the paper title, the unit's section and text, and writes one JSON object decoded under its reply
schema (`templates.QUESTION_REPLY`: question ≤ 200 and answer ≤ 120 characters). A unit is dropped, counted by
cause, when the call fails ("request_error"), the reply was cut by its token budget ("length"), it holds no JSON
object ("no_json"), the question or answer is missing or blank ("missing_field"), the question copies the unit's
text ("copies_text": the question is a verbatim piece of the unit of 8 words or more), it is a worked example's
question (a string of the template's assistant turns, `Template.example_texts`: "copies_example"), or the paper
already has the same question ("duplicate_question", case-insensitive).
"""

import json
import logging
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import groupby
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import GENERATED_QUESTIONS
from workflow_scripts.core.tables import frame
from workflow_scripts.ingest.adapters.registry import stream_for
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.parsing import parse_json, read_reply
from workflow_scripts.llm.templates import Template, normalized

log = logging.getLogger("ragfrontier.questions")

CAUSES = ("request_error", "length", "no_json", "missing_field", "copies_text", "copies_example", "duplicate_question")
COPY_WORDS = 8  # a question that is a verbatim run of this many words of its unit copies the text


def words(text: str) -> list[str]:
    return text.split()


def sample_units(units: Iterable[Mapping[str, Any]], settings: Mapping[str, Any]) -> Iterator[tuple[str, list, int]]:
    """(paper, its sampled units in reading order, its candidate count) for each paper of the unit stream."""
    kinds = set(settings["kinds"])
    for paper, rows in groupby(units, key=lambda unit: unit["group_id"]):
        candidates = [{**unit, "text": " ".join(words(unit["text"]))} for unit in rows
                      if unit["kind"] in kinds and len(words(unit["text"])) >= settings["min_words"]]
        picked = random.Random(f"{settings['seed']}:{paper}").sample(
            range(len(candidates)), min(settings["per_paper"], len(candidates)))
        yield paper, [candidates[index] for index in sorted(picked)], len(candidates)


def kind_label(unit: Mapping[str, Any]) -> str:
    """How the prompt names the unit: "paragraph", "figure caption", "table caption", …"""
    if unit["kind"] != "caption":
        return unit["kind"]
    meta = json.loads(unit.get("meta") or "{}")
    return f"{meta.get('ref_type', 'figure')} caption"


def request(unit: Mapping[str, Any], template: Any) -> llm.Request:
    return llm.Request(unit["unit_id"], template, {
        "title": unit.get("title") or "", "section": unit.get("section") or "(none)", "kind": kind_label(unit),
        "text": unit["text"],
    })


def parse_question(
    text: str, unit_text: str, examples: frozenset[str] = frozenset()
) -> tuple[dict[str, str] | None, str | None]:
    """({"question": …, "answer": …}, None) from a reply, or (None, the failure cause); `examples`: the template's
    worked-example texts (`Template.example_texts`)."""
    reply = parse_json(text, dict)
    if reply.value is None:
        return None, "no_json"
    fields = {}
    for name in ("question", "answer"):
        value = reply.value.get(name)
        if not isinstance(value, str) or not words(value):
            return None, "missing_field"
        fields[name] = " ".join(words(value))
    question = fields["question"].lower()
    if len(words(question)) >= COPY_WORDS and question.rstrip("?. ") in unit_text.lower():
        return None, "copies_text"
    if normalized(fields["question"]) in examples:
        return None, "copies_example"
    return fields, None


def keep_questions(
    units: Sequence[Mapping[str, Any]], replies: pl.DataFrame, examples: frozenset[str] = frozenset()
) -> tuple[list[dict], Counter, Counter]:
    """GENERATED_QUESTIONS rows, failure counts and how the used replies were obtained, from the sampled units and
    their GENERATIONS rows (same order); `examples` as in `parse_question`."""
    rows, failures, obtained, seen = [], Counter(), Counter(), set()
    for unit, reply in zip(units, replies.iter_rows(named=True)):
        if reply["status"] != "ok":
            failures["request_error"] += 1
            continue
        fields, cause = parse_question(reply["text"], unit["text"], examples)
        if cause:
            cut = reply["finish_reason"] == "length" and cause in ("no_json", "missing_field")
            failures["length" if cut else cause] += 1
            continue
        key = (unit["group_id"], fields["question"].lower())
        if key in seen:
            failures["duplicate_question"] += 1
            continue
        seen.add(key)
        obtained[read_reply(reply)[1]] += 1
        rows.append({"qid": f"{unit['unit_id']}:q", "group_id": unit["group_id"], "source_unit_id": unit["unit_id"],
                     "source_kind": unit["kind"], "text": fields["question"], "answer": fields["answer"]})
    return rows, failures, obtained


def generate_questions(dataset: str, spec: Mapping[str, Any], engine: llm.Engine, cache: Path,
                       template: Template) -> tuple[pl.DataFrame, dict[str, Any]]:
    """The dataset's generated questions (GENERATED_QUESTIONS, sorted by qid) and the report of how they came about."""
    settings = spec["generate_questions"]
    papers, candidates, empty, units = 0, 0, [], []
    for paper, sampled, count in sample_units(stream_for(dataset, spec["format"])(spec, dataset), settings):
        papers += 1
        candidates += count
        units += sampled
        if not sampled:
            empty.append(paper)
    replies = llm.generate([request(unit, template) for unit in units], engine, cache)
    rows, failures, obtained = keep_questions(units, replies, template.example_texts)
    report = {
        "papers": papers, "papers_without_candidates": len(empty), "papers_without_candidates_ids": empty[:20],
        "candidate_units": candidates, "units_sampled": len(units), "questions": len(rows),
        "questions_by_kind": dict(sorted(Counter(row["source_kind"] for row in rows).items())),
        "failures": {cause: failures[cause] for cause in CAUSES}, "replies_used": dict(sorted(obtained.items())),
        "settings": dict(settings),
    }
    log.info("%s: %d questions from %d sampled units of %d papers; failures %s", dataset, len(rows), len(units),
             papers, report["failures"])
    return frame(rows, GENERATED_QUESTIONS).sort("qid"), report
