"""arXiv metadata adapter (format "arxiv_metadata"): one document unit per paper (title + abstract).

In:  `spec["path"]`, JSON Lines (or a JSON list; plain or gzip) in the Kaggle arXiv metadata snapshot layout:
     `id, submitter, authors, title, comments, journal-ref, doi, report-no, categories, license, abstract,
     versions, update_date, authors_parsed` (only id, title, abstract and categories are required).
Out: an `Ingested` bundle with units only (questions and qrels are empty tables with the contract schemas):
     units  — one per paper with a non-blank abstract: unit_id = group_id = `id`, kind "document", position 0,
              title and text = the title and the abstract, whitespace-normalized (the snapshot keeps the
              submission's hard line breaks), meta {"categories": [the space-separated categories],
              "update_date": … or null}.
     counts — papers_read, papers_without_abstract_skipped (blank or null abstract; not emitted).

The file is streamed record by record (`stream` yields each paper's unit as its record is read).

A missing key or a value of the wrong type raises InputError naming the file, the line, the paper id and the key.
"""

from __future__ import annotations

from collections.abc import Mapping

from workflow_scripts.ingest.adapters import Ingested, Rest, UnitStream
from workflow_scripts.ingest.adapters.source_records import (
    NONE_TYPE,
    collect,
    field,
    input_path,
    keyed_records,
    meta_json,
    normalize_whitespace,
    unit_row,
)

COUNTS = ("papers_read", "papers_without_abstract_skipped")


def stream(spec: Mapping, dataset: str) -> UnitStream:
    """Yield an arXiv metadata file's units paper by paper (see the module docstring)."""
    path = input_path(spec, dataset, "path")
    counts = dict.fromkeys(COUNTS, 0)
    for paper_id, where, record in keyed_records(path, "id"):
        title = normalize_whitespace(field(record, "title", str, where))
        abstract = normalize_whitespace(field(record, "abstract", (str, NONE_TYPE), where) or "")
        meta = {"categories": field(record, "categories", str, where).split(), "update_date": record.get("update_date")}
        counts["papers_read"] += 1
        if not abstract:
            counts["papers_without_abstract_skipped"] += 1
            continue
        yield unit_row(paper_id, paper_id, "document", 0, title, abstract, meta=meta_json(meta))
    return Rest(counts=counts)


def load(spec: Mapping, dataset: str) -> Ingested:
    """Read an arXiv metadata file (see the module docstring)."""
    return collect(stream(spec, dataset), dataset)
