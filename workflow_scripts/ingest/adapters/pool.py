"""Re-ranking pool adapter: a candidate pool TSV (qid, doc_id, query, passage) + qrels → units, questions, qrels.

In:  the dataset's config entry:
     - `pool`: TSV without a header, exactly 4 tab-separated columns `qid, doc_id, query, passage` per line, each
       query's candidates on consecutive or scattered lines (BERGEN's `rerank_file.trecdl19.spladev3.top50.txt`
       and many re-ranking benchmarks ship this shape; the line order is usually the first stage's rank order);
     - `qrels` + `qrels_format`: "trec" (`qid Q0 doc_id relevance`, as Anserini's qrels.dl19-passage.txt; the
       default) or "json" (one object {qid: {doc_id: grade}}, BERGEN's qrel_trecdl19.txt and pytrec_eval's layout).
Out: an `Ingested` bundle:
     - units: one per pool line, kind "passage", group_id = qid (the `group` scope ranks exactly a question's
       own candidates), unit_id = "<qid>#<doc_id>" (a passage may sit in several queries' pools, and a unit has one
       group), position = its index in that query's pool in file order, title null, text = the passage,
       meta = {"doc_id": doc_id};
     - questions: one per qid in file order, text = its query string (whitespace-collapsed);
     - qrels: every judgment, its doc_id mapped to "<qid>#<doc_id>" (the same unit id as the pool's candidate);
     - counts: `pool_pairs`, `queries`, `queries_with_qrels`, `qrels`, `pool_pairs_judged` (pool lines with a
       judgment);
     - notes: why `qrels_unknown_units` (judged passages outside the pool) is expected here.

The pool is streamed (`stream` yields each line's unit as it is read); besides the current line it keeps the
unit ids seen (with their line, for the repeated-pair message) and each qid's query string. The qrels are read
after it, into memory.

A line without exactly 4 fields, a qid whose query string differs from its first line's, a (qid, doc_id) pair
listed twice, or a qrels value that is not an integer raises `InputError` naming the file, the line and the qid.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any

from workflow_scripts.ingest import files
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.vocabulary import POOL_QRELS_FORMATS
from workflow_scripts.ingest.adapters import Ingested, UnitStream
from workflow_scripts.ingest.adapters.beir import Qrel, judged_rest
from workflow_scripts.ingest.adapters.source_records import collect, input_path, normalize_whitespace, unit_row
from workflow_scripts.ingest.adapters.trec import read_trec_qrels

COLUMNS = ("qid", "doc_id", "query", "passage")

UNKNOWN_UNITS_NOTE = (
    "expected for a re-ranking pool: these are judged passages that are not among the pool's candidates "
    "({judged} of the {qrels} judgments fall inside the pool). They are kept, so every measure is computed against "
    "all judgments, as trec_eval on a full-collection run would be: recall and AP count the relevant passages "
    "the first stage missed, and nDCG's ideal ranking includes them"
)


def pool_unit_id(qid: str, doc_id: str) -> str:
    return f"{qid}#{doc_id}"


def stream(spec: Mapping[str, Any], dataset: str) -> UnitStream:
    """Yield the pool's units line by line, then read the qrels (see the module docstring)."""
    pool_path = input_path(spec, dataset, "pool")
    qrels_path = input_path(spec, dataset, "qrels")
    in_pool: dict[str, int] = {}
    queries = yield from read_pool(pool_path, in_pool)
    qrels = [row._replace(unit_id=pool_unit_id(row.qid, row.unit_id)) for row in read_qrels(spec, dataset, qrels_path)]
    judged = sum(row.unit_id in in_pool for row in qrels)
    rest = judged_rest(
        len(in_pool), queries, qrels, "pool_pairs", "queries", extra_counts={"pool_pairs_judged": judged}
    )
    rest.notes["qrels_unknown_units"] = UNKNOWN_UNITS_NOTE.format(judged=judged, qrels=len(qrels))
    return rest


def load(spec: Mapping[str, Any], dataset: str) -> Ingested:
    return collect(stream(spec, dataset), dataset)


def read_pool(path: Path, seen: dict[str, int] | None = None) -> Generator[dict, None, dict[str, str]]:
    """Yield the unit rows of a pool TSV line by line and return qid → query text; `seen` collects unit id →
    line. See the module docstring for the checks."""
    queries: dict[str, tuple[str, int]] = {}
    seen = {} if seen is None else seen
    positions: dict[str, int] = {}
    for number, fields in files.read_tsv(path, 1):
        qid = fields[0]
        if len(fields) != len(COLUMNS):
            raise InputError(
                f"{path}: line {number} (qid {qid!r}) has {len(fields)} tab-separated fields, expected "
                f"{len(COLUMNS)}: {', '.join(COLUMNS)} (a tab inside the passage text splits it; replace it by a space)"
            )
        _, doc_id, query, passage = fields
        query = normalize_whitespace(query)
        first_query, first_line = queries.setdefault(qid, (query, number))
        if query != first_query:
            raise InputError(
                f"{path}: line {number} (qid {qid!r}) gives the query {query!r}, but line {first_line} gave "
                f"{first_query!r}; one qid must keep one query string (give the other query its own qid)"
            )
        unit_id = pool_unit_id(qid, doc_id)
        earlier = seen.setdefault(unit_id, number)
        if earlier != number:
            raise InputError(
                f"{path}: line {number} (qid {qid!r}) lists doc_id {doc_id!r} again (first at line {earlier}); "
                f"keep one line per (qid, doc_id)"
            )
        position = positions[qid] = positions.get(qid, -1) + 1
        yield unit_row(qid, unit_id, "passage", position, None, passage, meta=json.dumps({"doc_id": doc_id}))
    return {qid: text for qid, (text, _) in queries.items()}


def read_qrels(spec: Mapping[str, Any], dataset: str, path: Path) -> list[Qrel]:
    qrels_format = spec.get("qrels_format", "trec")
    if qrels_format not in QRELS_READERS:
        raise InputError(f"datasets.{dataset}.qrels_format: {qrels_format!r} is not a known format; "
                         f"use one of {list(POOL_QRELS_FORMATS)}")
    return QRELS_READERS[qrels_format](path)


def read_json_qrels(path: Path) -> list[Qrel]:
    """Rows of a {qid: {doc_id: grade}} JSON file (line 0: the judgments of one JSON object have no lines)."""
    judgments = files.read_json(path)
    if not isinstance(judgments, dict):
        raise InputError(
            f"{path}: expected one JSON object {{qid: {{doc_id: grade}}}}, found {type(judgments).__name__}"
        )
    rows = []
    for qid, grades in judgments.items():
        if not isinstance(grades, dict):
            raise InputError(
                f"{path}: qid {qid!r}: expected an object {{doc_id: grade}}, found {type(grades).__name__}"
            )
        for doc_id, grade in grades.items():
            if not isinstance(grade, int) or isinstance(grade, bool):
                raise InputError(f"{path}: qid {qid!r}, doc_id {doc_id!r}: grade {grade!r} is not an integer")
            rows.append(Qrel(0, qid, doc_id, grade))
    return rows


QRELS_READERS = {"trec": lambda path: read_trec_qrels(path)[0], "json": read_json_qrels}  # POOL_QRELS_FORMATS
