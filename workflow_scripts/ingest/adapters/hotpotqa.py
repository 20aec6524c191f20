"""HotpotQA adapters: the official HotpotQA layout (format "hotpotqa") and IRCoT's processed layout ("ircot").

In ("hotpotqa"): `spec["path"]`, a JSON list or JSON Lines file (plain or gzip) of records `_id, question,
     answer, type, level, supporting_facts [[title, sent_id]], context [[title, [sentences]]]` — the distractor
     or the fullwiki setting (a record may have an empty context).
In ("ircot"): `spec["path"]`, JSON Lines (plain or gzip) of records `question_id, question_text,
     answers_objects [{number, date {day, month, year}, spans}], contexts [{id, title, paragraph_text,
     is_supporting}]`.
Out: an `Ingested` bundle, one group per question (group_id = the question id):
     units     — one per context paragraph i: unit_id "<qid>#<i>", kind "paragraph", position i, title = the
                 paragraph title, text = the sentences joined ("hotpotqa"; they carry their leading spaces) or
                 `paragraph_text` ("ircot"), stripped. "hotpotqa" gold paragraphs carry meta
                 {"supporting_sentence_ids": [...]} (sentence-level support kept); all other meta is null.
     questions — qid = group_id = the question id; query_type = `type` ("hotpotqa") or null ("ircot");
                 answers: [answer] ("hotpotqa"), the IRCoT answer strings ("ircot", see `ircot_answers`);
                 gold_unit_ids = the paragraphs whose title occurs in `supporting_facts` ("hotpotqa") or that
                 are `is_supporting` ("ircot"); unaligned_evidence = supporting-fact titles absent from the
                 context (the question is kept, flagged).
     qrels     — relevance 1 per (question, gold paragraph).
     counts    — see HOTPOTQA_COUNTS and IRCOT_COUNTS.

Both files are streamed record by record (`stream_hotpotqa`, `stream_ircot` yield each question's paragraph
units as its record is read); the question rows are kept until the end (one per question, no paragraph text).

A missing key or a value of the wrong type raises InputError naming the file, the line or list item, the
question id and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested, Rest, UnitStream
from workflow_scripts.ingest.adapters.source_records import (
    collect,
    distinct,
    field,
    gold_qrels,
    input_path,
    keyed_records,
    meta_json,
    question_row,
    strings,
    supporting_paragraphs,
    unit_row,
)

HOTPOTQA_COUNTS = (
    "questions",
    "paragraphs",
    "gold_paragraphs",
    "supporting_facts",
    "supporting_facts_sentence_out_of_range",
    "supporting_titles_unaligned",
    "questions_with_unaligned_evidence",
    "questions_without_paragraphs",
)
IRCOT_COUNTS = ("questions", "paragraphs", "gold_paragraphs", "questions_without_gold")


def stream_hotpotqa(spec: Mapping, dataset: str) -> UnitStream:
    """Yield the paragraph units of an official-layout HotpotQA file question by question (see the module
    docstring)."""
    path = input_path(spec, dataset, "path")
    counts = dict.fromkeys(HOTPOTQA_COUNTS, 0)
    questions: list[dict] = []
    for qid, where, record in keyed_records(path, "_id"):
        question_units, question = _hotpotqa_question(record, qid, where, counts)
        yield from question_units
        questions.append(question)
    return Rest(questions=questions, qrels=gold_qrels(questions), counts=counts)


def load_hotpotqa(spec: Mapping, dataset: str) -> Ingested:
    """Read an official-layout HotpotQA file (see the module docstring)."""
    return collect(stream_hotpotqa(spec, dataset), dataset)


def supporting_facts(record: Mapping, where: str) -> dict[str, list[int]]:
    """`supporting_facts` [[title, sent_id], ...] as title → sentence ids (title order of first mention)."""
    support: dict[str, list[int]] = {}
    for index, fact in enumerate(field(record, "supporting_facts", list, where)):
        if not (
            isinstance(fact, list)
            and len(fact) == 2
            and isinstance(fact[0], str)
            and isinstance(fact[1], int)
            and not isinstance(fact[1], bool)
        ):
            raise InputError(
                f"{where}: supporting_facts[{index}] should be [title, sentence index], found {str(fact)[:80]}"
            )
        support.setdefault(fact[0], []).append(fact[1])
    return support


def _context(record: Mapping, where: str) -> list[tuple[str, list[str]]]:
    """`context` [[title, [sentences]], ...] checked, as (title, sentences) pairs."""
    paragraphs = []
    for index, item in enumerate(field(record, "context", list, where)):
        if not (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], list)
            and all(isinstance(sentence, str) for sentence in item[1])
        ):
            raise InputError(f"{where}: context[{index}] should be [title, [sentences]], found {str(item)[:80]}")
        paragraphs.append((item[0], item[1]))
    return paragraphs


def _hotpotqa_question(record: Mapping, qid: str, where: str, counts: dict[str, int]) -> tuple[list[dict], dict]:
    """The question's paragraph units and its question row; counts updated."""
    context = _context(record, where)
    support = supporting_facts(record, where)
    units = []
    for position, (title, sentences) in enumerate(context):
        sentence_ids = support.get(title)
        meta = None
        if sentence_ids is not None:
            meta = meta_json({"supporting_sentence_ids": sorted(set(sentence_ids))})
            counts["supporting_facts_sentence_out_of_range"] += sum(not 0 <= i < len(sentences) for i in sentence_ids)
        units.append(
            unit_row(qid, f"{qid}#{position}", "paragraph", position, title, "".join(sentences).strip(), meta=meta)
        )
    gold = [unit["unit_id"] for unit in units if unit["title"] in support]
    titles = {title for title, _ in context}
    unaligned = [title for title in support if title not in titles]
    counts["questions"] += 1
    counts["paragraphs"] += len(units)
    counts["gold_paragraphs"] += len(gold)
    counts["supporting_facts"] += sum(len(ids) for ids in support.values())
    counts["supporting_titles_unaligned"] += len(unaligned)
    counts["questions_with_unaligned_evidence"] += bool(unaligned)
    counts["questions_without_paragraphs"] += not units
    return units, official_question_row(record, qid, where, gold, unaligned)


def official_question_row(record: Mapping, qid: str, where: str, gold: list[str], unaligned: list[str]) -> dict:
    """The question row of a record in the official HotpotQA layout (2WikiMultiHopQA shares it): qid = group_id,
    text = `question`, query_type = `type`, answers = [`answer`], and the given gold ids and unaligned evidence."""
    return question_row(
        qid=qid,
        group_id=qid,
        text=field(record, "question", str, where),
        query_type=field(record, "type", str, where),
        answers=[field(record, "answer", str, where)],
        gold_unit_ids=gold,
        unaligned_evidence=unaligned,
    )


def stream_ircot(spec: Mapping, dataset: str) -> UnitStream:
    """Yield the paragraph units of an IRCoT processed-data file question by question (see the module docstring)."""
    path = input_path(spec, dataset, "path")
    counts = dict.fromkeys(IRCOT_COUNTS, 0)
    questions: list[dict] = []
    for qid, where, record in keyed_records(path, "question_id"):
        question_units, gold = supporting_paragraphs(record, "contexts", qid, where)
        yield from question_units
        answers = ircot_answers(field(record, "answers_objects", list, where), f"{where}, answers_objects")
        questions.append(question_row(qid, qid, field(record, "question_text", str, where), None, answers, gold, []))
        counts["questions"] += 1
        counts["paragraphs"] += len(question_units)
        counts["gold_paragraphs"] += len(gold)
        counts["questions_without_gold"] += not gold
    return Rest(questions=questions, qrels=gold_qrels(questions), counts=counts)


def load_ircot(spec: Mapping, dataset: str) -> Ingested:
    """Read an IRCoT processed-data file (see the module docstring)."""
    return collect(stream_ircot(spec, dataset), dataset)


def ircot_answers(answers_objects: list[Any], where: str) -> list[str]:
    """The reference answer strings of IRCoT's DROP-style answer objects, distinct, in order.

    Per object, IRCoT's precedence (`format_drop_answer` in its dataset reader, `answer_json_to_strings` in its
    DROP metric): a non-empty `number`; else the `spans`; else the `date` as its non-empty parts "day month
    year". All objects are kept (IRCoT's reader keeps only the most common one; with one object, as in every
    HotpotQA record, that is the same). An object with none of the three is an InputError.
    """
    answers: list[str] = []
    for index, answer in enumerate(answers_objects):
        answer_where = f"{where}[{index}]"
        number = field(answer, "number", (str, int, float), answer_where)
        spans = strings(answer, "spans", answer_where)
        date = field(answer, "date", dict, answer_where)
        date_text = " ".join(str(date[part]) for part in ("day", "month", "year") if date.get(part))
        if str(number).strip():
            answers.append(str(number))
        elif spans:
            answers += spans
        elif date_text:
            answers.append(date_text)
        else:
            raise InputError(f"{answer_where}: the answer object has no number, spans or date")
    return distinct(answers)
