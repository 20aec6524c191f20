"""2WikiMultiHopQA adapter (format "twowiki"), open-corpus setting: one passage pool shared by all questions.

In:  `spec["corpus"]`: a JSON list (or JSON Lines; plain or gzip) of passages {title, text}.
     `spec["questions"]`: a JSON list (or JSON Lines) in the official 2Wiki layout without `context`
     (`_id, type, question, supporting_facts [[title, sent_id]], answer, …`).
     `spec["qrels"]`: TSV with the header `query-id  corpus-idx  corpus-title  score`, one row per (question,
     gold passage); corpus-idx is the 0-based position in the corpus list.
Out: an `Ingested` bundle:
     units     — one per passage: unit_id "p<idx>", group_id = unit_id (a global corpus has no natural
                 group), kind "passage", position 0, title, text stripped, meta null.
     questions — qid = group_id = `_id`; query_type = `type`; answers [answer]; gold_unit_ids = the qrels
                 passages with score > 0 (file order); unaligned_evidence = supporting-fact titles that are
                 not the title of a gold passage. A question without qrels rows is kept (counted).
     qrels     — one row per qrels line, relevance = score. Rows naming a question absent from the questions
                 file are kept as they are (the shared ingest step counts them).
     counts    — passages, questions, qrels_rows, questions_without_qrels, supporting_titles_unaligned.

The corpus (a JSON list or JSON Lines) is streamed passage by passage; what is kept of it is each passage's
title, by position (the qrels name a passage by index and title, and questions compare supporting-fact titles
with their gold passages' titles): a list of short strings, like the unit ids the ingest stage keeps, not the
texts. The questions and qrels are read after the corpus, into memory.

A qrels row whose corpus-title differs from the title of the passage at corpus-idx, an index outside the
corpus, a non-integer index or score, or a header other than the expected one raises InputError naming the
qrels file and line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from workflow_scripts.ingest import files
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested, Rest, UnitStream
from workflow_scripts.ingest.adapters.hotpotqa import official_question_row, supporting_facts
from workflow_scripts.ingest.adapters.source_records import (
    collect,
    field,
    input_path,
    keyed_records,
    read_records,
    unit_row,
)

QRELS_HEADER = ["query-id", "corpus-idx", "corpus-title", "score"]
COUNTS = ("passages", "questions", "qrels_rows", "questions_without_qrels", "supporting_titles_unaligned")


def stream(spec: Mapping, dataset: str) -> UnitStream:
    """Yield the corpus passages one by one, then read the questions and qrels (see the module docstring)."""
    corpus_path = input_path(spec, dataset, "corpus")
    questions_path = input_path(spec, dataset, "questions")
    qrels_path = input_path(spec, dataset, "qrels")
    counts = dict.fromkeys(COUNTS, 0)
    titles: list[str] = []  # passage index → title
    for unit in _passages(corpus_path):
        yield unit
        titles.append(unit["title"])
    qrels = _qrels(qrels_path, titles)
    gold: dict[str, list[str]] = {}
    for row in qrels:
        if row["relevance"] > 0:
            gold.setdefault(row["qid"], []).append(row["unit_id"])
    questions = []
    for qid, where, record in keyed_records(questions_path, "_id"):
        gold_ids = gold.get(qid, [])
        gold_titles = {titles[int(unit_id.removeprefix("p"))] for unit_id in gold_ids}
        unaligned = [title for title in supporting_facts(record, where) if title not in gold_titles]
        questions.append(official_question_row(record, qid, where, gold_ids, unaligned))
        counts["questions_without_qrels"] += qid not in gold
        counts["supporting_titles_unaligned"] += len(unaligned)
    counts["passages"] = len(titles)
    counts["questions"] = len(questions)
    counts["qrels_rows"] = len(qrels)
    return Rest(questions=questions, qrels=qrels, counts=counts)


def load(spec: Mapping, dataset: str) -> Ingested:
    return collect(stream(spec, dataset), dataset)


def _passages(path: Path) -> Iterator[dict]:
    for index, (place, record) in enumerate(read_records(path)):
        unit_id = f"p{index}"
        title = field(record, "title", str, place)
        text = field(record, "text", str, place).strip()
        yield unit_row(unit_id, unit_id, "passage", 0, title, text)


def _qrels(path: Path, corpus_titles: list[str]) -> list[dict]:
    """Qrels rows from the TSV, each checked against the corpus passage it names."""
    rows = []
    lines = files.read_tsv(path, columns=4)
    header = next(lines, (1, []))
    if header[1][:4] != QRELS_HEADER:
        raise InputError(f"{path}: line {header[0]} should be the header {' '.join(QRELS_HEADER)} (tab-separated)")
    for number, fields in lines:
        qid, index, title, score = fields[:4]
        where = f"{path}: line {number}"
        if not index.isdigit() or int(index) >= len(corpus_titles):
            raise InputError(
                f"{where}: corpus-idx {index!r} is not a position in the corpus (0 to {len(corpus_titles) - 1})"
            )
        if title != corpus_titles[int(index)]:
            raise InputError(
                f"{where}: corpus-title {title!r} differs from the corpus passage {index}'s title "
                f"{corpus_titles[int(index)]!r}; the qrels do not belong to this corpus"
            )
        try:
            relevance = int(score)
        except ValueError:
            raise InputError(f"{where}: score {score!r} is not an integer") from None
        rows.append({"qid": qid, "unit_id": f"p{index}", "relevance": relevance})
    return rows
