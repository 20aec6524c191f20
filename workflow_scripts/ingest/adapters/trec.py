"""TREC-style adapter: a classic test collection (documents, topics, qrels) → canonical units, questions, qrels.

In:  the dataset's config entry with three file keys, each with a format key:
     - `collection` + `collection_format`:
       "html_tar": a tar (optionally gzip) of HTML files, one document each, as Anserini's `HtmlCollection` reads
                   CACM. unit_id = the member's file name without `.html`. text = the file with its tags removed
                   (a tag is `<` followed by a letter, `/`, `!` or `?`, up to `>`, as an HTML tokenizer reads
                   it), HTML entities unescaped, each line's whitespace runs collapsed to one space and trimmed,
                   blank lines dropped, lines joined by newlines. For CACM that is everything Anserini indexes: the
                   title line, the date, the authors, the CA-number line and the citation triples. title and
                   meta are null (the title is only the first line of text; it is not repeated in `title`).
       "smart":    SMART records (`.I id`, then `.T` title, `.A` authors, `.B` biblio, `.W` text; Cranfield's
                   cran.all.1400). unit_id = the `.I` number without leading zeros. title = `.T` (null when
                   empty), text = `.W` as found (Cranfield's `.W` starts by repeating the title, so
                   `retrieval.title: ignore` indexes title + abstract once; `prepend` doubles the title), meta = JSON
                   {"authors", "biblio"}. Every field's lines are whitespace-collapsed and joined with one space.
                   A marker already seen in the same record (Cranfield docs 240, 576, 578 carry stray `.A`, `.B`,
                   `.W` lines inside their text) does not open a field: its lines continue the current field;
                   such markers are counted as `smart_repeated_markers`. Records with an empty `.W` (Cranfield
                   471 and 995, which are empty altogether) are kept here with empty text; the shared ingest step
                   drops them.
     - `topics` + `topics_format`:
       "cacm":  `<DOC>`, `<DOCNO> n </DOCNO>`, text lines, `</DOC>` (Anserini's `CacmTopicReader`); qid = n.
       "smart": `.I` then `.W` (Cranfield's cran.qry). qid = the query's 1-based position in the file, because the
                `.I` numbers skip values (001 … 365) while cranqrel numbers the queries 1 … 225 in file order.
       "tsv":   `qid<TAB>text`, no header.
       Topic text is whitespace-collapsed to single spaces.
     - `qrels` + `qrels_format`:
       "trec":      `qid Q0 docid relevance` (whitespace-separated), relevance an integer. Ids are kept exactly as
                    written: Anserini's CACM qrels name docs below 1000 unpadded (`CACM-756` for the file
                    CACM-0756), so 55 of its 796 judgments match no unit here, just as in Anserini's own runs.
       "cranfield": `qid docid code`; Cleverdon's codes 1 (complete answer) … 4 (minimum interest) become
                    graded relevance 5 − code (4 … 1). Code −1 (one pair per query, undocumented) is dropped and
                    counted as `qrels_code_minus1_dropped`; any other code is an error. Ids lose leading zeros,
                    as the `.I` numbers do.
Out: an `Ingested` bundle like the BEIR adapter's: units (group_id = unit_id, kind "document", position 0);
     questions for every topic (group_id = qid, gold_unit_ids = sorted ids with relevance > 0); every kept qrel;
     counts `collection_docs`, `topics`, `topics_with_qrels`, `qrels`, plus the format-specific ones above.

The collection is streamed: `stream` yields each document's unit as it is read (one tar member, or one SMART
record, at a time); topics and qrels are read after it, line by line, into memory (they are small).

Unknown format values, unreadable archives and malformed lines raise `InputError` naming the config key or the
file and line.
"""

from __future__ import annotations

import html
import json
import re
import tarfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from workflow_scripts.ingest import files
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested, UnitStream
from workflow_scripts.ingest.adapters.beir import Qrel, document_row, judged_rest, parse_relevance, unique_qrels
from workflow_scripts.ingest.adapters.source_records import collect, input_path, normalize_whitespace

TAG = re.compile(r"<[A-Za-z/!?][^>]*>")
SMART_FIELDS = (".T", ".A", ".B", ".W")
CRANFIELD_CODES = {1, 2, 3, 4}

Counts = dict[str, int]


def stream(spec: Mapping[str, Any], dataset: str) -> UnitStream:
    """Yield the collection's units as they are read, then read the topics and qrels (see the module docstring)."""
    read_collection = _reader(spec, "collection_format", COLLECTION_READERS, dataset)
    read_topics = _reader(spec, "topics_format", TOPIC_READERS, dataset)
    read_qrels = _reader(spec, "qrels_format", QRELS_READERS, dataset)
    unit_counts: Counts = {}
    docs = 0
    for unit in read_collection(input_path(spec, dataset, "collection"), unit_counts):
        yield unit
        docs += 1
    topics = read_topics(input_path(spec, dataset, "topics"))
    qrels, qrels_counts = read_qrels(input_path(spec, dataset, "qrels"))
    extra = {**unit_counts, **qrels_counts}
    return judged_rest(docs, topics, qrels, "collection_docs", "topics", extra_counts=extra)


def load(spec: Mapping[str, Any], dataset: str) -> Ingested:
    return collect(stream(spec, dataset), dataset)


def _reader(spec: Mapping[str, Any], key: str, readers: Mapping[str, Callable], dataset: str) -> Callable:
    try:
        return readers[spec.get(key)]
    except (KeyError, TypeError):
        raise InputError(
            f"datasets.{dataset}.{key}: {spec.get(key)!r} is not a known format; use one of {sorted(readers)}"
        ) from None


# --- collections -------------------------------------------------------------------------------------------


def html_text(markup: str) -> str:
    """Text of an HTML page: tags removed, entities unescaped, whitespace collapsed per line, blank lines dropped."""
    lines = (normalize_whitespace(line) for line in html.unescape(TAG.sub("", markup)).splitlines())
    return "\n".join(line for line in lines if line)


def read_html_tar(path: Path, counts: Counts) -> Iterator[dict]:
    """One unit per file of the tar, in archive order, read member by member (forward through the archive, which
    is decompressed as it is read)."""
    try:
        with files.open_binary(path) as handle, tarfile.open(fileobj=handle, mode="r:*") as archive:
            for member in archive:
                if member.isfile():
                    markup = files.decode_utf8(archive.extractfile(member).read(), f"{path}:{member.name}")
                    yield document_row(html_id(member.name), html_text(markup))
    except tarfile.TarError as error:
        raise InputError(f"{path}: not a readable tar archive: {error}") from None
    except files.READ_ERRORS as error:
        raise InputError(f"{path}: cannot read the file: {error}") from None


def html_id(member_name: str) -> str:
    name = PurePosixPath(member_name).name
    return name.removesuffix(".html")


def smart_records(
    path: Path, fields: tuple[str, ...], counts: Counts | None = None
) -> Iterator[tuple[int, str, dict[str, str]]]:
    """(line, `.I` value, field → collapsed text) per SMART record, each yielded once the next `.I` (or the end of
    the file) closes it; repeated field markers are counted in `counts["smart_repeated_markers"]`."""
    counts = {} if counts is None else counts
    counts["smart_repeated_markers"] = 0
    record: tuple[int, str, dict[str, list[str]]] | None = None
    current: list[str] | None = None

    def parsed(number: int, ident: str, body: dict[str, list[str]]) -> tuple[int, str, dict[str, str]]:
        return number, ident, {key: normalize_whitespace(" ".join(lines)) for key, lines in body.items()}

    for number, line in files.read_lines(path):
        marker = line.rstrip()
        if marker.startswith(".I ") or marker == ".I":
            if record is not None:
                yield parsed(*record)
            record = (number, marker[2:].strip(), {})
            current = None
        elif marker in fields and record is not None:
            if marker in record[2]:
                counts["smart_repeated_markers"] += 1
            else:
                current = record[2].setdefault(marker, [])
        elif current is not None:
            current.append(line)
        elif line.strip():
            raise InputError(f"{path}: line {number}: text outside a field; expected a `.I` or a field marker")
    if record is not None:
        yield parsed(*record)


def smart_id(value: str, path: Path, number: int) -> str:
    """A SMART `.I` number as a string without leading zeros."""
    try:
        return str(int(value))
    except ValueError:
        raise InputError(f"{path}: line {number}: `.I` value {value!r} is not a number") from None


def read_smart_collection(path: Path, counts: Counts) -> Iterator[dict]:
    """One unit per SMART record, record by record; `smart_repeated_markers` counted in `counts`."""
    for number, ident, body in smart_records(path, SMART_FIELDS, counts):
        yield document_row(
            smart_id(ident, path, number),
            body.get(".W", ""),
            title=body.get(".T") or None,
            meta=json.dumps({"authors": body.get(".A", ""), "biblio": body.get(".B", "")}, ensure_ascii=False),
        )


COLLECTION_READERS: dict[str, Callable[[Path, Counts], Iterator[dict]]] = {
    "html_tar": read_html_tar,
    "smart": read_smart_collection,
}


# --- topics --------------------------------------------------------------------------------------------------


def read_cacm_topics(path: Path) -> dict[str, str]:
    """qid → text from `<DOC> <DOCNO> n </DOCNO> text </DOC>` blocks (Anserini's CacmTopicReader)."""
    topics: dict[str, str] = {}
    qid: str | None = None
    text: list[str] = []
    for number, line in files.read_lines(path):
        stripped = line.strip()
        docno = re.fullmatch(r"<DOCNO>\s*(.*?)\s*</DOCNO>", stripped)
        if docno:
            qid, text = docno.group(1), []
        elif stripped == "</DOC>":
            if qid is None:
                raise InputError(f"{path}: line {number}: `</DOC>` without a `<DOCNO>` before it")
            if qid in topics:
                raise InputError(f"{path}: line {number}: topic {qid!r} appears twice")
            topics[qid], qid = normalize_whitespace(" ".join(text)), None
        elif qid is not None:
            text.append(line)
        elif stripped not in ("", "<DOC>"):
            raise InputError(f"{path}: line {number}: text outside a topic; expected `<DOC>` or `<DOCNO> n </DOCNO>`")
    if qid is not None:
        raise InputError(f"{path}: topic {qid!r} has no closing `</DOC>`")
    return topics


def read_smart_topics(path: Path) -> dict[str, str]:
    """Sequence number (1-based, as a string) → `.W` text; the `.I` numbers are not used."""
    records = smart_records(path, (".W",))
    return {str(position): body.get(".W", "") for position, (_, _, body) in enumerate(records, start=1)}


def read_tsv_topics(path: Path) -> dict[str, str]:
    topics: dict[str, str] = {}
    for number, fields in files.read_tsv(path, 2):
        if fields[0] in topics:
            raise InputError(f"{path}: line {number} repeats topic id {fields[0]!r}")
        topics[fields[0]] = normalize_whitespace(fields[1])
    return topics


TOPIC_READERS: dict[str, Callable[[Path], dict[str, str]]] = {
    "cacm": read_cacm_topics,
    "smart": read_smart_topics,
    "tsv": read_tsv_topics,
}


# --- qrels ---------------------------------------------------------------------------------------------------


def qrels_lines(path: Path, width: int) -> Iterator[tuple[int, list[str]]]:
    """(line, fields) of a whitespace-separated qrels file whose rows have exactly `width` fields, streamed."""
    for number, line in files.read_lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != width:
            raise InputError(f"{path}: line {number} has {len(fields)} fields, expected {width}")
        yield number, fields


def read_trec_qrels(path: Path) -> tuple[list[Qrel], Counts]:
    rows = [
        Qrel(number, qid, docid, parse_relevance(relevance, path, number))
        for number, (qid, _, docid, relevance) in qrels_lines(path, 4)
    ]
    return unique_qrels(rows, path), {}


def read_cranfield_qrels(path: Path) -> tuple[list[Qrel], Counts]:
    rows, dropped = [], 0
    for number, (qid, docid, code) in qrels_lines(path, 3):
        value = parse_relevance(code, path, number)
        if value == -1:
            dropped += 1
        elif value in CRANFIELD_CODES:
            rows.append(Qrel(number, smart_id(qid, path, number), smart_id(docid, path, number), 5 - value))
        else:
            raise InputError(f"{path}: line {number}: relevance code {value} is not one of -1, 1, 2, 3, 4")
    return unique_qrels(rows, path), {"qrels_code_minus1_dropped": dropped}


QRELS_READERS: dict[str, Callable[[Path], tuple[list[Qrel], Counts]]] = {
    "trec": read_trec_qrels,
    "cranfield": read_cranfield_qrels,
}
