"""Helpers shared by the adapters: config paths, JSON records, checked fields, canonical rows, the bundle.

In:  a dataset's config entry, files (or tar members) holding a JSON list or JSON Lines of records, and the
     parsed records.
Out: checked file paths; (place, record) pairs where the place names the file and the line (JSON Lines) or list
     item (JSON list), or (id, place, record) triples for records keyed by an id; checked field values; the
     units and gold of a list of supporting-flagged paragraphs; unit, question and qrels rows; the finished
     `Ingested` bundle of a stream (`collect`) or of rows (`bundle`).

Every adapter takes its file paths from `input_path`; its `load` collects its `stream` with `collect`. The
record-based ones (hotpotqa, ircot, musique, twowiki, unarxive, arxiv_metadata) read their files with
`read_records` or `stream_records`, which stream both layouts record by record (`ingest/files.py`), and qasper
checks its fields with `field` and `strings` too.

Every problem is an `InputError` naming the config key, or the file, the record and the key at fault.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from workflow_scripts.core import contracts, tables
from workflow_scripts.ingest import files
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested, Rest, Units, UnitStream

NONE_TYPE = type(None)


def input_path(spec: Mapping, dataset: str, key: str) -> Path:
    """The existing file named by `spec[key]`; else an InputError naming `datasets.<dataset>.<key>`."""
    if not spec.get(key):
        needs = (
            f"the {spec['format']} format needs this file path" if spec.get("format") else "give the path of the file"
        )
        raise InputError(f"datasets.{dataset}.{key}: missing; {needs}")
    return files.require_file(spec[key], f"datasets.{dataset}.{key}")


def stream_records(opener: files.Opener, source: str) -> Iterator[tuple[str, dict]]:
    """(place, record) for each record of the stream `opener` opens: a JSON list (place "<source>, item [i]") or
    JSON Lines (place "<source>, line n"), read record by record (`files.stream_records`); a syntax error or a
    record that is not an object names the place."""
    for layout, index, record in files.stream_records(opener, source):
        place = f"{source}, item [{index}]" if layout == "item" else f"{source}, line {index}"
        if not isinstance(record, dict):
            raise InputError(f"{place}: expected a JSON object, found {type(record).__name__}")
        yield place, record


def read_records(path: Path) -> Iterator[tuple[str, dict]]:
    """`stream_records` of a file (plain or gzip, strict UTF-8)."""
    return stream_records(lambda: files.open_binary(path), str(path))


def keyed_records(path: Path, key: str) -> Iterator[tuple[str, str, dict]]:
    """(id, place, record) for each record of the file, id = the string `record[key]`; the place names the file,
    the line or list item, and the id: "<file>, line n (<key> '<id>')"."""
    for place, record in read_records(path):
        record_id = field(record, key, str, place)
        yield record_id, f"{place} ({key} {record_id!r})", record


def field(record: Mapping, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """`record[key]`, checked to be of `kind`; else an InputError naming `where` and the key."""
    if not isinstance(record, Mapping):
        raise InputError(f"{where}: expected a JSON object, found {type(record).__name__}")
    if key not in record:
        raise InputError(f"{where}: missing key {key!r}")
    value = record[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # JSON true/false must not pass as a number (bool is a subclass of int in Python).
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join("null" if k is NONE_TYPE else k.__name__ for k in kinds)
        raise InputError(f"{where}: key {key!r} should be {names}, found {type(value).__name__}")
    return value


def strings(record: Mapping, key: str, where: str) -> list[str]:
    """`record[key]` checked to be a list of strings."""
    values = field(record, key, list, where)
    if not all(isinstance(value, str) for value in values):
        raise InputError(f"{where}: key {key!r} should be a list of strings")
    return values


def normalize_whitespace(text: str) -> str:
    """Collapse every run of whitespace (newlines, tabs, no-break spaces) to one space; strip the ends."""
    return " ".join(text.split())


def meta_json(values: Mapping[str, Any]) -> str:
    """A unit's `meta` column value: the mapping as a JSON object (UTF-8 kept as is)."""
    return json.dumps(values, ensure_ascii=False)


def unit_row(
    group_id: str,
    unit_id: str,
    kind: str,
    position: int,
    title: str | None,
    text: str,
    section: str | None = None,
    meta: str | None = None,
) -> dict:
    return {
        "group_id": group_id,
        "unit_id": unit_id,
        "kind": kind,
        "section": section,
        "position": position,
        "title": title,
        "text": text,
        "meta": meta,
    }


def supporting_paragraphs(
    record: Mapping, key: str, qid: str, where: str, id_key: str | None = None
) -> tuple[list[dict], list[str]]:
    """(paragraph units, gold unit ids) of `record[key]`, a list of {title, paragraph_text, is_supporting}
    objects (MuSiQue, IRCoT): unit i has unit_id "<qid>#<paragraph[id_key]>" (an integer key) or "<qid>#<i>"
    when `id_key` is None, group_id qid, kind "paragraph", position i, the title, and the text stripped;
    the gold ids are those of the paragraphs with `is_supporting` true, in list order."""
    units: list[dict] = []
    gold: list[str] = []
    for position, paragraph in enumerate(field(record, key, list, where)):
        paragraph_where = f"{where}, {key}[{position}]"
        suffix = position if id_key is None else field(paragraph, id_key, int, paragraph_where)
        unit_id = f"{qid}#{suffix}"
        title = field(paragraph, "title", str, paragraph_where)
        text = field(paragraph, "paragraph_text", str, paragraph_where).strip()
        units.append(unit_row(qid, unit_id, "paragraph", position, title, text))
        if field(paragraph, "is_supporting", bool, paragraph_where):
            gold.append(unit_id)
    return units, gold


def question_row(
    qid: str,
    group_id: str,
    text: str,
    query_type: str | None,
    answers: list[str],
    gold_unit_ids: list[str],
    unaligned_evidence: list[str],
) -> dict:
    return {
        "qid": qid,
        "group_id": group_id,
        "text": text,
        "query_type": query_type,
        "answers": answers,
        "gold_unit_ids": gold_unit_ids,
        "unaligned_evidence": unaligned_evidence,
    }


def gold_qrels(questions: Iterable[Mapping]) -> list[dict]:
    """Relevance-1 qrels rows, one per (question, gold unit)."""
    return [
        {"qid": question["qid"], "unit_id": unit_id, "relevance": 1}
        for question in questions
        for unit_id in question["gold_unit_ids"]
    ]


def distinct(values: Iterable[str]) -> list[str]:
    """`values` without repeats, first occurrence order kept."""
    return list(dict.fromkeys(values))


def collect(stream: UnitStream, dataset: str) -> Ingested:
    """An adapter's stream gathered into its `Ingested` bundle (all units in memory: see `ingest/stage.py` for the
    job, which writes them as they come)."""
    units = Units(stream)
    rows = list(units)
    rest: Rest = units.rest
    ingested = bundle(dataset, rows, rest.questions, rest.qrels, rest.counts)
    ingested.notes.update(rest.notes)
    return ingested


def bundle(
    dataset: str,
    units: list[dict],
    questions: list[dict],
    qrels: list[dict],
    counts: Mapping[str, int],
) -> Ingested:
    """The `Ingested` bundle: the rows (the dataset column added) as contract-conforming frames."""
    return Ingested(
        units=tables.frame(({**row, "dataset": dataset} for row in units), contracts.UNITS),
        questions=tables.frame(({**row, "dataset": dataset} for row in questions), contracts.QUESTIONS),
        qrels=tables.frame(qrels, contracts.QRELS),
        counts=dict(counts),
    )
