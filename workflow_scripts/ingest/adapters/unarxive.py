"""unarXive adapter (format "unarxive"): full-text arXiv papers → paragraph, heading and caption units.

In:  `spec["path"]`, either an unarXive tar archive (plain or gzip; every `.jsonl` member is read, in name
     order) or a plain JSON Lines file (plain or gzip). One record per paper: `paper_id, metadata {title, …},
     abstract {text, …} (optional), body_text [{section, sec_number, sec_type, content_type, text, …}],
     ref_entries {id: {type: formula | figure | table, caption | latex}}`.
Out: an `Ingested` bundle with units only (questions and qrels are empty tables with the contract schemas):
     per paper, in reading order (position 0, 1, …; unit_id "<paper_id>#<position>", group_id = paper_id,
     title = the paper title from `metadata`, whitespace-normalized):
     - the abstract (kind "abstract"), when the record has one;
     - for each body_text item: when its (section, sec_number) differs from the previous item's and the
       section name is not blank, first a "heading" unit whose text is the section name (meta {"sec_number",
       "sec_type"}); then the item as a "paragraph" unit (section = the section name or null; meta
       {"content_type": paragraph | list | proof | …}). The section number is compared too, so two
       consecutive sections that share a name ("Proof of Proposition" 1 and 2) each get their heading;
     - each ref_entries figure or table → a "caption" unit (text = caption; meta {"ref_type", "ref_id"}),
       except captions that are unarXive's placeholder "NO_CAPTION" (most of them in the 2022 sample: no
       text to retrieve; counted as `captions_placeholder_skipped`); formulas (and any other entry type) are
       not units and are counted as `ref_entries_skipped`.
     In every unit text the inline markers are replaced — {{formula:…}} → "[formula]", {{cite:…}} →
     "[citation]", {{figure:…}} → "[figure]", {{table:…}} → "[table]", any other {{kind:…}} → "[kind]" —
     and whitespace runs (hard line breaks of LaTeX sources, no-break spaces) collapse to one space.
     With `spec["kinds"]` (e.g. ["abstract"]: one title + abstract document per paper, the corpus Study C
     samples from) only units of those kinds are kept; the others are counted as units_other_kinds_skipped.
     counts — papers, abstracts, paragraphs (body_text items), headings, captions_figure and captions_table
     (figure / table entries read, placeholders included), captions_placeholder_skipped, ref_entries_skipped,
     and markers_<kind>, the markers replaced per kind (formula, cite, figure and table always present).

Streamed: `stream` yields each paper's units as its record is read. A tar archive is opened once (through gzip
when compressed); its member list is read first (headers only: one pass over the archive, so a truncated archive
is reported before any paper), then each .jsonl member is read line by line, in name order (archive order in
practice; another order costs a re-read of the compressed archive up to the member, not memory).

A missing key or a value of the wrong type raises InputError naming the file (and tar member), the line, the
paper id and the key.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from workflow_scripts.ingest import files
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested, Rest, UnitStream
from workflow_scripts.ingest.adapters.source_records import (
    NONE_TYPE,
    collect,
    field,
    input_path,
    meta_json,
    normalize_whitespace,
    read_records,
    stream_records,
    unit_row,
)

MARKER = re.compile(r"\{\{([a-z]+):[^{}\s]+\}\}")
MARKER_TEXT = {"cite": "[citation]"}
MARKER_KINDS = ("formula", "cite", "figure", "table")
CAPTION_TYPES = ("figure", "table")
NO_CAPTION = "NO_CAPTION"  # unarXive's placeholder for a figure or table without a caption
COUNTS = (
    "papers",
    "abstracts",
    "paragraphs",
    "headings",
    "captions_figure",
    "captions_table",
    "captions_placeholder_skipped",
    "ref_entries_skipped",
)
TAR_MAGIC_OFFSET = 257


def stream(spec: Mapping, dataset: str) -> UnitStream:
    """Yield the units of an unarXive archive or JSON Lines file paper by paper (see the module docstring)."""
    path = input_path(spec, dataset, "path")
    counts = dict.fromkeys(COUNTS + tuple(f"markers_{kind}" for kind in MARKER_KINDS), 0)
    kinds = spec.get("kinds")
    skipped = 0
    for place, paper in _paper_records(path):
        for unit in _paper_units(paper, place, counts):
            if kinds and unit["kind"] not in kinds:
                skipped += 1
            else:
                yield unit
    if kinds:
        counts["units_other_kinds_skipped"] = skipped
    return Rest(counts=counts)  # no questions or qrels: empty frames with the contract schemas


def load(spec: Mapping, dataset: str) -> Ingested:
    """Read the papers of an unarXive archive or JSON Lines file (see the module docstring)."""
    return collect(stream(spec, dataset), dataset)


def _paper_records(path: Path) -> Iterator[tuple[str, dict]]:
    """(place, paper record) from a tar archive's .jsonl members or from a JSON Lines file, streamed."""
    try:
        with files.open_binary(path) as handle:
            head = handle.read(TAR_MAGIC_OFFSET + 5)
    except files.READ_ERRORS as error:
        raise InputError(f"{path}: cannot read the file: {error}") from None
    if head[TAR_MAGIC_OFFSET : TAR_MAGIC_OFFSET + 5] != b"ustar":
        yield from read_records(path)
        return
    handle = files.open_binary(path)
    try:
        archive = tarfile.open(fileobj=handle, mode="r:")
        members = sorted(
            (member for member in archive.getmembers() if member.isfile() and member.name.endswith(".jsonl")),
            key=lambda member: member.name,
        )
    except tarfile.TarError as error:
        handle.close()
        raise InputError(f"{path}: cannot read the tar archive: {error}") from None
    except files.READ_ERRORS as error:  # the compressed stream itself is broken
        handle.close()
        raise InputError(f"{path}: cannot read the file: {error}") from None
    with handle, archive:
        if not members:
            raise InputError(f"{path}: the tar archive has no .jsonl member (expected unarXive JSON Lines files)")
        for member in members:
            yield from stream_records(lambda member=member: archive.extractfile(member), f"{path}[{member.name}]")


def _clean(text: str, counts: dict[str, int]) -> str:
    """Markers replaced by placeholders (counted per kind), whitespace collapsed."""

    def placeholder(match: re.Match) -> str:
        kind = match.group(1)
        counts[f"markers_{kind}"] = counts.get(f"markers_{kind}", 0) + 1
        return MARKER_TEXT.get(kind, f"[{kind}]")

    return normalize_whitespace(MARKER.sub(placeholder, text))


Piece = tuple[str, str | None, str, str | None]  # (kind, section, cleaned text, meta) of one unit


def _paper_units(paper: dict, place: str, counts: dict[str, int]) -> list[dict]:
    """One paper's units in reading order: abstract, headings and paragraphs, captions."""
    paper_id = str(field(paper, "paper_id", (str, int), place))
    where = f"{place} (paper_id {paper_id!r})"
    title = normalize_whitespace(field(field(paper, "metadata", dict, where), "title", str, f"{where}, metadata"))
    pieces: list[Piece] = []
    abstract = paper.get("abstract")
    if abstract is not None:
        pieces.append(("abstract", None, _clean(field(abstract, "text", str, f"{where}, abstract"), counts), None))
        counts["abstracts"] += 1
    pieces += _body_pieces(field(paper, "body_text", list, where), where, counts)
    pieces += _caption_pieces(field(paper, "ref_entries", dict, where), where, counts)
    counts["papers"] += 1
    return [
        unit_row(paper_id, f"{paper_id}#{position}", kind, position, title, text, section, meta)
        for position, (kind, section, text, meta) in enumerate(pieces)
    ]


def _body_pieces(body_text: list, where: str, counts: dict[str, int]) -> list[Piece]:
    """Headings (at each change of section name or number) and the body_text items as paragraphs."""
    pieces: list[Piece] = []
    previous: tuple[str | None, str | None] | None = None
    section: str | None = None
    for index, item in enumerate(body_text):
        item_where = f"{where}, body_text[{index}]"
        raw_section = field(item, "section", (str, NONE_TYPE), item_where)
        sec_number = item.get("sec_number")
        if (raw_section, sec_number) != previous:
            section = _clean(raw_section or "", counts) or None
            if section:
                heading_meta = meta_json({"sec_number": sec_number, "sec_type": item.get("sec_type")})
                pieces.append(("heading", section, section, heading_meta))
                counts["headings"] += 1
        previous = (raw_section, sec_number)
        text = _clean(field(item, "text", str, item_where), counts)
        paragraph_meta = meta_json({"content_type": field(item, "content_type", str, item_where)})
        pieces.append(("paragraph", section, text, paragraph_meta))
        counts["paragraphs"] += 1
    return pieces


def _caption_pieces(ref_entries: dict, where: str, counts: dict[str, int]) -> list[Piece]:
    """Figure and table captions (placeholders skipped); formulas and other entries are not units."""
    pieces: list[Piece] = []
    for ref_id, entry in ref_entries.items():
        entry_where = f"{where}, ref_entries[{ref_id!r}]"
        ref_type = field(entry, "type", str, entry_where)
        if ref_type not in CAPTION_TYPES:
            counts["ref_entries_skipped"] += 1
            continue
        counts[f"captions_{ref_type}"] += 1
        caption = field(entry, "caption", str, entry_where)
        if caption.strip() == NO_CAPTION:
            counts["captions_placeholder_skipped"] += 1
            continue
        meta = meta_json({"ref_type": ref_type, "ref_id": ref_id})
        pieces.append(("caption", None, _clean(caption, counts), meta))
    return pieces
