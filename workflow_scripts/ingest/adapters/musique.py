"""MuSiQue adapter (format "musique"): the original MuSiQue layout with per-question paragraphs.

In:  `spec["path"]`, a JSON list or JSON Lines file (plain or gzip) of records `id, paragraphs [{idx, title,
     paragraph_text, is_supporting}], question, question_decomposition, answer, answer_aliases, answerable`.
Out: an `Ingested` bundle, one group per question (group_id = `id`):
     units     — one per paragraph: unit_id "<id>#<idx>", kind "paragraph", position = order in the list,
                 title, text = `paragraph_text` stripped, meta null.
     questions — qid = `id`; query_type = the hop type from the id prefix ("2hop", "3hop1", … — null if the id
                 has none); answers = [answer] + answer_aliases (distinct); gold_unit_ids = the paragraphs
                 marked `is_supporting`; unaligned_evidence empty (support is given per paragraph).
     qrels     — relevance 1 per (question, gold paragraph).
     counts    — questions, paragraphs, gold_paragraphs, questions_unanswerable (`answerable` false: kept,
                 MuSiQue-Full's unanswerable contrast questions), questions_without_hop_type.

The file is streamed record by record (`stream` yields each question's paragraph units as its record is read);
the question rows are kept until the end.

A missing key or a value of the wrong type raises InputError naming the file, the line or list item, the
question id and the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from workflow_scripts.ingest.adapters import Ingested, Rest, UnitStream
from workflow_scripts.ingest.adapters.source_records import (
    collect,
    distinct,
    field,
    gold_qrels,
    input_path,
    keyed_records,
    question_row,
    strings,
    supporting_paragraphs,
)

HOP_TYPE = re.compile(r"^(\d+hop\d*)__")
COUNTS = ("questions", "paragraphs", "gold_paragraphs", "questions_unanswerable", "questions_without_hop_type")


def stream(spec: Mapping, dataset: str) -> UnitStream:
    """Yield a MuSiQue file's paragraph units question by question (see the module docstring)."""
    path = input_path(spec, dataset, "path")
    counts = dict.fromkeys(COUNTS, 0)
    questions: list[dict] = []
    for qid, where, record in keyed_records(path, "id"):
        question_units, gold = supporting_paragraphs(record, "paragraphs", qid, where, id_key="idx")
        yield from question_units
        hop_type = HOP_TYPE.match(qid)
        answers = distinct([field(record, "answer", str, where), *strings(record, "answer_aliases", where)])
        text = field(record, "question", str, where)
        query_type = hop_type.group(1) if hop_type else None
        questions.append(question_row(qid, qid, text, query_type, answers, gold, []))
        counts["questions"] += 1
        counts["paragraphs"] += len(question_units)
        counts["gold_paragraphs"] += len(gold)
        counts["questions_unanswerable"] += not field(record, "answerable", bool, where)
        counts["questions_without_hop_type"] += hop_type is None
    return Rest(questions=questions, qrels=gold_qrels(questions), counts=counts)


def load(spec: Mapping, dataset: str) -> Ingested:
    """Read a MuSiQue file (see the module docstring)."""
    return collect(stream(spec, dataset), dataset)
