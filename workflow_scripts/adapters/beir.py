"""BEIR adapter: a BEIR-layout dataset (corpus, queries, qrels) → the canonical units, questions and qrels.

In:  the dataset's config entry with three file keys (each optionally gzip-compressed, detected by magic bytes):
     - `corpus`:  JSON Lines, one document a line: {"_id", "title", "text", "metadata"};
     - `queries`: JSON Lines, one query a line: {"_id", "text", "metadata"};
     - `qrels`:   TSV with the header `query-id  corpus-id  score`, integer scores.
Out: an `Ingested` bundle:
     - units: one per document; unit_id = group_id = `_id`, kind "document", position 0, title (null when empty),
       text, meta = the `metadata` object as JSON (null when empty or absent);
     - questions: every query of the queries file, judged or not; group_id = qid, query_type null, answers [],
       gold_unit_ids = the sorted ids judged with relevance > 0, unaligned_evidence [];
     - qrels: every row of the qrels file (relevance ≤ 0 rows kept as judged non-relevant);
     - counts: `corpus_docs`, `queries`, `queries_with_qrels`, `qrels`.

A line that is not a JSON object, lacks `_id` or `text`, a qrels score that is not an integer, or a
(query, document) pair judged twice raises `InputError` naming the file and line.

`require_path`, `read_queries`, `read_qrels` and `questions_frame` are shared with the TREC adapter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple

import polars as pl

from workflow_scripts import files
from workflow_scripts.adapters import Ingested
from workflow_scripts.contracts import QRELS, QUESTIONS, UNITS, frame
from workflow_scripts.errors import InputError

QRELS_HEADER = ["query-id", "corpus-id", "score"]


class Qrel(NamedTuple):
    line: int
    qid: str
    unit_id: str
    relevance: int


def require_path(spec: Mapping[str, Any], key: str, dataset: str) -> Path:
    """The existing file named by `spec[key]`; else an InputError naming `datasets.<dataset>.<key>`."""
    if not spec.get(key):
        raise InputError(f"datasets.{dataset}.{key}: missing; give the path of the file")
    return files.require_file(spec[key], f"datasets.{dataset}.{key}")


def load(spec: Mapping[str, Any], dataset: str) -> Ingested:
    corpus = require_path(spec, "corpus", dataset)
    queries_path = require_path(spec, "queries", dataset)
    qrels_path = require_path(spec, "qrels", dataset)
    units = [unit_row(number, record, corpus, dataset) for number, record in files.read_jsonl(corpus)]
    queries = read_queries(queries_path)
    qrels = read_qrels(qrels_path)
    judged = {qrel.qid for qrel in qrels}
    return Ingested(
        units=frame(units, UNITS),
        questions=questions_frame(queries, qrels, dataset),
        qrels=qrels_frame(qrels),
        counts={
            "corpus_docs": len(units),
            "queries": len(queries),
            "queries_with_qrels": sum(qid in judged for qid in queries),
            "qrels": len(qrels),
        },
    )


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


def unit_row(number: int, record: Any, path: Path, dataset: str) -> dict[str, Any]:
    unit_id = _field(record, "_id", path, number)
    metadata = record.get("metadata")
    return {
        "dataset": dataset,
        "group_id": unit_id,
        "unit_id": unit_id,
        "kind": "document",
        "position": 0,
        "title": record.get("title") or None,
        "text": _field(record, "text", path, number),
        "meta": json.dumps(metadata, ensure_ascii=False, sort_keys=True) if metadata else None,
    }


def read_queries(path: Path) -> dict[str, str]:
    """qid → text, in file order, from a BEIR queries file; a repeated qid names its line."""
    queries: dict[str, str] = {}
    for number, record in files.read_jsonl(path):
        qid = _field(record, "_id", path, number)
        if qid in queries:
            raise InputError(f"{path}: line {number} repeats query id {qid!r}")
        queries[qid] = _field(record, "text", path, number)
    return queries


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


def qrels_frame(rows: Iterable[Qrel]) -> pl.DataFrame:
    return frame(({"qid": r.qid, "unit_id": r.unit_id, "relevance": r.relevance} for r in rows), QRELS)


def questions_frame(queries: Mapping[str, str], qrels: Iterable[Qrel], dataset: str) -> pl.DataFrame:
    """One question per query; gold_unit_ids = sorted ids judged with relevance > 0."""
    gold: dict[str, list[str]] = {}
    for row in qrels:
        if row.relevance > 0:
            gold.setdefault(row.qid, []).append(row.unit_id)
    rows = (
        {
            "dataset": dataset,
            "qid": qid,
            "group_id": qid,
            "text": text,
            "query_type": None,
            "answers": [],
            "gold_unit_ids": sorted(gold.get(qid, [])),
            "unaligned_evidence": [],
        }
        for qid, text in queries.items()
    )
    return frame(rows, QUESTIONS)
