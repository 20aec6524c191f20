"""QASPER adapter: the official QASPER JSON release → units, questions and qrels, evidence aligned to units.

In:  `spec["path"]`, one JSON file (plain or gzip) in the published QASPER v0.3 layout: an object mapping
     paper_id → {title, abstract, full_text: [{section_name, paragraphs: [str]}], figures_and_tables:
     [{caption, file}], qas: [{question, question_id, answers: [{answer: {unanswerable, extractive_spans,
     yes_no, free_form_answer, evidence, highlighted_evidence}, annotation_id, worker_id}], ...}]}.
Out: an `Ingested` bundle:
     units     — per paper, in reading order (`position` 0, 1, …; unit_id "<paper_id>#<position>", group_id =
                 paper_id, title = paper title): the abstract (kind "abstract", only if non-blank); for each
                 section a "heading" unit holding the section name (if non-blank) and its paragraphs (kind
                 "paragraph"), both with `section` = the section name as given (nested names keep their
                 " ::: "); then each figure/table caption (kind "caption", meta = {"file": ...}). Blank
                 paragraphs and captions are emitted as they are; the shared ingest step drops and counts them.
     questions — qid = question_id, group_id = paper_id, query_type null, one answer per annotation in the
                 official evaluator's precedence ("Unanswerable"; extractive spans joined with ", "; the
                 free-form answer; "Yes"/"No"), gold_unit_ids = units the evidence aligns to (paper order),
                 unaligned_evidence = evidence strings that align to no unit (the question is kept, flagged).
     qrels     — one row per (qid, gold unit), relevance 1.
     counts    — papers, questions, annotations, annotations_without_answer, evidence_strings (distinct
                 non-blank strings per question, over all its annotations), evidence_blank, evidence_aligned,
                 evidence_unaligned, evidence_ambiguous (aligned to more than one unit),
                 float_selected_evidence, questions_with_evidence, questions_without_alignable_evidence.

Alignment. Evidence and unit texts are compared after collapsing whitespace runs and stripping; blank units
never match. `answer.evidence` is used (whole paragraphs in QASPER); `highlighted_evidence` (sub-spans of those
paragraphs) is not. An evidence string starting with "FLOAT SELECTED:" names a figure or table: the prefix is
removed and the rest is matched against caption units only — exact equality first, else containment in either
direction (QASPER writes "FLOAT SELECTED: Table 1: <caption>"; containment tolerates a caption that was
extracted with a fragment more or less than the evidence copy). Any other evidence is matched against abstract,
heading and paragraph units only — exact equality first, else units whose text contains the evidence (a
sentence quoted rather than its whole paragraph). Containment is one-way here because a short unit (a heading)
inside a long evidence paragraph says nothing about where the evidence is. All equally good matches become gold (a
paragraph repeated verbatim is the same evidence); an evidence string matching several units is counted as
ambiguous rather than resolved arbitrarily.

QASPER is one JSON document (an object of papers), so the file is read and parsed whole (`files.read_json`):
memory holds the parsed release. `stream` then yields the units paper by paper.

A missing key or a value of the wrong type raises InputError naming the file, the paper id and the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from workflow_scripts.ingest import files
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested, Rest, UnitStream
from workflow_scripts.ingest.adapters.source_records import (
    NONE_TYPE,
    collect,
    field,
    gold_qrels,
    input_path,
    normalize_whitespace,
    question_row,
    strings,
    unit_row,
)

FLOAT_PREFIX = "FLOAT SELECTED:"
COUNT_NAMES = (
    "papers",
    "questions",
    "annotations",
    "annotations_without_answer",
    "evidence_strings",
    "evidence_blank",
    "evidence_aligned",
    "evidence_unaligned",
    "evidence_ambiguous",
    "float_selected_evidence",
    "questions_with_evidence",
    "questions_without_alignable_evidence",
)


def stream(spec: Mapping, dataset: str) -> UnitStream:
    """Read the QASPER JSON file at `spec["path"]` and yield its units paper by paper (see the module docstring)."""
    path = input_path(spec, dataset, "path")
    papers = files.read_json(path)
    if not isinstance(papers, dict):
        raise InputError(f"{path}: expected a JSON object mapping paper ids to papers, found {type(papers).__name__}")
    counts = dict.fromkeys(COUNT_NAMES, 0)
    questions: list[dict] = []
    for paper_id, paper in papers.items():
        where = f"{path}: paper {paper_id!r}"
        paper_units = _paper_units(paper_id, paper, where)
        questions += [
            _question(paper_id, qa, paper_units, counts, f"{where}, qas[{index}]")
            for index, qa in enumerate(field(paper, "qas", list, where))
        ]
        yield from paper_units
        counts["papers"] += 1
    return Rest(questions=questions, qrels=gold_qrels(questions), counts=counts)


def load(spec: Mapping, dataset: str) -> Ingested:
    """Read the QASPER JSON file at `spec["path"]` and build the canonical tables (see the module docstring)."""
    return collect(stream(spec, dataset), dataset)


def _paper_units(paper_id: str, paper: Any, where: str) -> list[dict]:
    """The paper's units in reading order: abstract, then headings and paragraphs, then captions."""
    title = field(paper, "title", str, where)
    abstract = field(paper, "abstract", str, where)
    pieces: list[tuple[str, str | None, str, str | None]] = []  # (kind, section, text, meta)
    if abstract.strip():
        pieces.append(("abstract", None, abstract, None))
    for index, section in enumerate(field(paper, "full_text", list, where)):
        section_where = f"{where}, full_text[{index}]"
        name = field(section, "section_name", (str, NONE_TYPE), section_where)
        name = name if name and name.strip() else None
        if name:
            pieces.append(("heading", name, name, None))
        pieces += [("paragraph", name, text, None) for text in strings(section, "paragraphs", section_where)]
    for index, figure in enumerate(field(paper, "figures_and_tables", list, where)):
        figure_where = f"{where}, figures_and_tables[{index}]"
        caption = field(figure, "caption", str, figure_where)
        pieces.append(("caption", None, caption, json.dumps({"file": figure.get("file")})))
    return [
        unit_row(paper_id, f"{paper_id}#{position}", kind, position, title, text, section, meta)
        for position, (kind, section, text, meta) in enumerate(pieces)
    ]


def _question(paper_id: str, qa: Any, units: list[dict], counts: dict[str, int], where: str) -> dict:
    """One question row; evidence of all its annotations aligned to `units`, counts updated."""
    qid = field(qa, "question_id", str, where)
    where = f"{where} (question {qid!r})"
    answers: list[str] = []
    evidence: list[str] = []
    for index, annotation in enumerate(field(qa, "answers", list, where)):
        answer_where = f"{where}, answers[{index}]"
        answer = field(annotation, "answer", dict, answer_where)
        answer_where += ".answer"
        text = _answer_text(answer, answer_where)
        if text:
            answers.append(text)
        counts["annotations_without_answer"] += not text
        evidence += strings(answer, "evidence", answer_where)
        counts["annotations"] += 1
    gold, unaligned = _align_all(evidence, units, counts)
    counts["questions"] += 1
    counts["questions_with_evidence"] += bool(gold or unaligned)
    counts["questions_without_alignable_evidence"] += bool(unaligned and not gold)
    return question_row(qid, paper_id, field(qa, "question", str, where), None, answers, gold, unaligned)


def _answer_text(answer: dict, where: str) -> str:
    """The reference answer string, in the official QASPER evaluator's precedence ("" if none is given)."""
    spans = strings(answer, "extractive_spans", where)
    free_form = field(answer, "free_form_answer", str, where)
    yes_no = field(answer, "yes_no", (bool, NONE_TYPE), where)
    if field(answer, "unanswerable", bool, where):
        return "Unanswerable"
    if spans:
        return ", ".join(spans)
    if free_form.strip():
        return free_form
    return "" if yes_no is None else ("Yes" if yes_no else "No")


def _align_all(evidence: list[str], units: list[dict], counts: dict[str, int]) -> tuple[list[str], list[str]]:
    """(gold unit ids in paper order, unaligned evidence strings) for a question's evidence strings."""
    candidates = [(unit["unit_id"], unit["kind"], normalize_whitespace(unit["text"])) for unit in units]
    candidates = [candidate for candidate in candidates if candidate[2]]
    gold: set[str] = set()
    unaligned: list[str] = []
    seen: set[str] = set()
    for raw in evidence:
        text = normalize_whitespace(raw)
        counts["evidence_blank"] += not text
        if not text or text in seen:
            continue
        seen.add(text)
        matches = _align(text, candidates)
        gold.update(matches)
        if not matches:
            unaligned.append(raw)
        counts["evidence_strings"] += 1
        counts["float_selected_evidence"] += text.startswith(FLOAT_PREFIX)
        counts["evidence_aligned"] += bool(matches)
        counts["evidence_unaligned"] += not matches
        counts["evidence_ambiguous"] += len(matches) > 1
    order = {unit["unit_id"]: unit["position"] for unit in units}
    return sorted(gold, key=order.__getitem__), unaligned


def _align(evidence: str, candidates: list[tuple[str, str, str]]) -> list[str]:
    """Unit ids matching one normalized evidence string (the rules are in the module docstring)."""
    is_float = evidence.startswith(FLOAT_PREFIX)
    target = evidence.removeprefix(FLOAT_PREFIX).strip() if is_float else evidence
    if not target:
        return []
    pool = [(unit_id, text) for unit_id, kind, text in candidates if (kind == "caption") == is_float]
    exact = [unit_id for unit_id, text in pool if text == target]
    if exact:
        return exact
    return [unit_id for unit_id, text in pool if target in text or (is_float and text in target)]
