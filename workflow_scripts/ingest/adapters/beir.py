"""BEIR adapter: a BEIR-layout dataset (corpus, queries, qrels) → the canonical units, questions and qrels.

In:  the dataset's config entry with three file keys (each optionally gzip-compressed, detected by magic bytes):
     - `corpus`:  JSON Lines, one document a line: {"_id", "title", "text", "metadata"};
     - `queries`: JSON Lines, one query a line: {"_id", "text", "metadata"}; `metadata.answers` (a string or a
       list of strings), when present, are the question's reference answers (answer scoring, Study B's labels);
     - `qrels`:   TSV with the header `query-id  corpus-id  score`, integer scores.
Out: an `Ingested` bundle:
     - units: one per document; unit_id = group_id = `_id`, kind "document", position 0, title (null when empty),
       text, meta = the `metadata` object as JSON (null when empty or absent);
     - questions: every query of the queries file, judged or not; group_id = qid, query_type null, answers from
       `metadata.answers` (else []),
       gold_unit_ids = the sorted ids judged with relevance > 0, unaligned_evidence [];
     - qrels: every row of the qrels file (relevance ≤ 0 rows kept as judged non-relevant);
     - counts: `corpus_docs`, `queries`, `queries_with_qrels`, `qrels`.

The corpus is streamed (`stream` yields each document's unit as its line is read); queries and qrels are read
after it, into memory (they are small next to a corpus).

A line that is not a JSON object, lacks `_id` or `text`, a qrels score that is not an integer, or a
(query, document) pair judged twice raises `InputError` naming the file and line.

`Qrel`, `document_row`, `parse_relevance`, `unique_qrels` and `judged_rest` are shared with the TREC and pool
adapters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from workflow_scripts.ingest import files
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested, Rest, UnitStream
from workflow_scripts.ingest.adapters.source_records import collect, input_path, question_row, unit_row

QRELS_HEADER = ["query-id", "corpus-id", "score"]


class Qrel(NamedTuple):
    line: int
    qid: str
    unit_id: str
    relevance: int


def stream(spec: Mapping[str, Any], dataset: str) -> UnitStream:
    """Yield the corpus units line by line, then read the queries and qrels (see the module docstring)."""
    corpus = input_path(spec, dataset, "corpus")
    queries_path = input_path(spec, dataset, "queries")
    qrels_path = input_path(spec, dataset, "qrels")
    docs = 0
    for number, record in files.read_jsonl(corpus):
        yield corpus_unit(number, record, corpus)
        docs += 1
    queries, answers = read_query_records(queries_path)
    qrels = read_qrels(qrels_path)
    return judged_rest(docs, queries, qrels, "corpus_docs", "queries", answers=answers)


def load(spec: Mapping[str, Any], dataset: str) -> Ingested:
    return collect(stream(spec, dataset), dataset)


def _field(record: Any, key: str, path: Path, number: int) -> str:
    """`record[key]` as a string (an integer id is accepted); else an InputError naming file and line."""
    if not isinstance(record, dict):
        raise InputError(f"{path}: line {number} is not a JSON object")
    value = record.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise InputError(f"{path}: line {number} has no string field '{key}'")
    return value


def document_row(unit_id: str, text: str, title: str | None = None, meta: str | None = None) -> dict:
    """A whole-document unit row: group_id = unit_id, kind "document", position 0."""
    return unit_row(unit_id, unit_id, "document", 0, title, text, meta=meta)


def corpus_unit(number: int, record: Any, path: Path) -> dict:
    """The unit row of one corpus line (see the module docstring)."""
    unit_id = _field(record, "_id", path, number)
    metadata = record.get("metadata")
    return document_row(
        unit_id,
        _field(record, "text", path, number),
        title=record.get("title") or None,
        meta=json.dumps(metadata, ensure_ascii=False, sort_keys=True) if metadata else None,
    )


def read_query_records(path: Path) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(qid → text, qid → reference answers) from one pass over a BEIR queries file. A repeated qid names its line;
    the answers come from `metadata.answers` (a list of strings, or one string), and queries without them are left
    out of the second mapping. Anything else there names the file, line and query."""
    queries: dict[str, str] = {}
    answers: dict[str, list[str]] = {}
    for number, record in files.read_jsonl(path):
        qid = _field(record, "_id", path, number)
        if qid in queries:
            raise InputError(f"{path}: line {number} repeats query id {qid!r}")
        queries[qid] = _field(record, "text", path, number)
        metadata = record.get("metadata") or {}
        given = metadata.get("answers") if isinstance(metadata, dict) else None
        if given is None:
            continue
        given = [given] if isinstance(given, str) else given
        if not isinstance(given, list) or not given or not all(isinstance(answer, str) and answer.strip()
                                                               for answer in given):
            raise InputError(f"{path}: line {number}: metadata.answers of query {qid!r} must be a non-empty string "
                             f"or a non-empty list of them")
        answers[qid] = list(dict.fromkeys(answer.strip() for answer in given))
    return queries, answers


def parse_relevance(value: str, path: Path, number: int) -> int:
    try:
        return int(value)
    except ValueError:
        raise InputError(f"{path}: line {number}: relevance {value!r} is not an integer") from None


def read_qrels(path: Path) -> list[Qrel]:
    """Rows of a BEIR qrels TSV; the first line must be the `query-id corpus-id score` header."""
    lines = files.read_tsv(path, 3)
    header = next(lines, None)
    if header is None or header[1][:3] != QRELS_HEADER:
        raise InputError(f"{path}: the first line must be the header {' '.join(QRELS_HEADER)!r}")
    rows = [Qrel(number, fields[0], fields[1], parse_relevance(fields[2], path, number)) for number, fields in lines]
    return unique_qrels(rows, path)


def unique_qrels(rows: list[Qrel], path: Path) -> list[Qrel]:
    """`rows` unchanged, or an InputError naming both lines of the first (query, unit) pair judged twice."""
    seen: dict[tuple[str, str], int] = {}
    for row in rows:
        earlier = seen.setdefault((row.qid, row.unit_id), row.line)
        if earlier != row.line:
            raise InputError(
                f"{path}: line {row.line} judges query {row.qid!r} / document {row.unit_id!r} again "
                f"(first at line {earlier}); keep one judgment per pair"
            )
    return rows


def judged_rest(
    docs: int,
    queries: Mapping[str, str],
    qrels: list[Qrel],
    docs_key: str,
    queries_key: str,
    extra_counts: Mapping[str, int] | None = None,
    answers: Mapping[str, list[str]] | None = None,
) -> Rest:
    """What a judged collection's stream returns after its `docs` units: one question per query (group_id = qid,
    gold_unit_ids = sorted ids judged with relevance > 0, its `answers` when given); every qrel; counts `<docs_key>`
    (units), `<queries_key>` (queries), `<queries_key>_with_qrels` (queries judged at all), `qrels`, then
    `extra_counts` (and `<queries_key>_with_answers` when answers are given)."""
    answers = answers or {}
    gold: dict[str, list[str]] = {}
    for row in qrels:
        if row.relevance > 0:
            gold.setdefault(row.qid, []).append(row.unit_id)
    questions = [question_row(qid, qid, text, None, answers.get(qid, []), sorted(gold.get(qid, [])), [])
                 for qid, text in queries.items()]
    judged = {row.qid for row in qrels}
    counts = {
        docs_key: docs,
        queries_key: len(queries),
        f"{queries_key}_with_qrels": sum(qid in judged for qid in queries),
        "qrels": len(qrels),
        **(extra_counts or {}),
        **({f"{queries_key}_with_answers": sum(qid in answers for qid in queries)} if answers else {}),
    }
    qrel_rows = [{"qid": row.qid, "unit_id": row.unit_id, "relevance": row.relevance} for row in qrels]
    return Rest(questions=questions, qrels=qrel_rows, counts=counts)
