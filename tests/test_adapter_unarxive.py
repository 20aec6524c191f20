"""unarXive adapter on the shared 49-paper sample; expected numbers come from
../shared/data/unarxive-sample/PROVENANCE.md or were counted by hand (python3, json + re) from the raw archive."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from workflow_scripts.core import contracts, tables
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested
from workflow_scripts.ingest.adapters.unarxive import load


@pytest.fixture(scope="module")
def unarxive(shared_data: Path) -> Ingested:
    return load({"path": str(shared_data / "unarxive-sample" / "unarXive_data_sample.tar.gz")}, "unarxive")


def test_counts(unarxive: Ingested) -> None:
    units = tables.conform(unarxive.units, contracts.UNITS)
    assert tables.conform(unarxive.questions, contracts.QUESTIONS).height == 0
    assert tables.conform(unarxive.qrels, contracts.QRELS).height == 0
    counts = unarxive.counts
    assert counts["papers"] == 49 and units["group_id"].n_unique() == 49
    assert counts["paragraphs"] == 5967  # body_text items
    assert counts["captions_figure"] == 688 and counts["captions_table"] == 279
    assert counts["ref_entries_skipped"] == 19834  # the formulas
    # by hand: 384 figure and 202 table captions are the placeholder "NO_CAPTION"
    assert counts["captions_placeholder_skipped"] == 384 + 202
    # by hand: 692 changes of (section, sec_number) to a non-blank section name
    assert counts["headings"] == 692
    kinds = dict(units.group_by("kind").len().rows())
    assert kinds == {"abstract": 49, "heading": 692, "paragraph": 5967, "caption": (688 - 384) + (279 - 202)}
    content_types = Counter(
        json.loads(meta)["content_type"] for meta in units.filter(pl.col("kind") == "paragraph")["meta"]
    )
    assert content_types == {"paragraph": 5834, "list": 123, "proof": 10}
    ref_types = Counter(json.loads(meta)["ref_type"] for meta in units.filter(pl.col("kind") == "caption")["meta"])
    assert ref_types == {"figure": 688 - 384, "table": 279 - 202}
    # by hand: markers in abstracts, section names, body texts and non-formula captions
    assert (counts["markers_formula"], counts["markers_cite"]) == (19949, 3053)
    assert (counts["markers_figure"], counts["markers_table"]) == (284, 70)
    assert not units["text"].str.contains(r"\{\{(formula|cite|figure|table):").any()
    positions = units.group_by("group_id").agg(ok=pl.col("position").sort() == pl.int_range(pl.len()))
    assert positions["ok"].list.all().all()
    assert (units["unit_id"] == units["group_id"] + "#" + units["position"].cast(pl.String)).all()


def test_paper_reading_order(unarxive: Ingested) -> None:
    paper = unarxive.units.filter(pl.col("group_id") == "2212.11867").sort("position")
    rows = paper.rows(named=True)
    title = "Zeros of a growing number of derivatives of random polynomials with independent roots"
    assert {row["title"] for row in rows} == {title}
    assert rows[0]["kind"] == "abstract" and rows[0]["text"].startswith("Let $X_1,X_2,\\ldots$ be independent")
    assert (rows[1]["kind"], rows[1]["text"], rows[1]["section"]) == ("heading", "Introduction", "Introduction")
    assert json.loads(rows[1]["meta"]) == {"sec_number": "1", "sec_type": "section"}
    assert rows[2]["kind"] == "paragraph" and rows[2]["section"] == "Introduction"
    assert rows[2]["text"] == (
        "Let [formula] be a probability measure on [formula] X1,X2,...[formula] sampled from [formula] , and for "
        "each [formula] define the random polynomial [formula]"
    )
    assert rows[2]["unit_id"] == "2212.11867#2"
    # 16 Introduction items (positions 2-17), then subsection 1.1
    assert (rows[18]["kind"], rows[18]["text"]) == ("heading", "Notation")
    assert rows[19]["section"] == "Notation"
    assert (rows[20]["kind"], rows[20]["text"]) == ("heading", "Proof of the main result")


def test_same_section_name_with_new_number_gets_a_heading(unarxive: Ingested) -> None:
    headings = unarxive.units.filter((pl.col("group_id") == "2212.11764") & (pl.col("kind") == "heading"))
    proofs = headings.filter(pl.col("text") == "Proof of Proposition")
    assert [json.loads(meta)["sec_number"] for meta in proofs["meta"]] == ["1", "2"]


def test_caption_spot_check(unarxive: Ingested) -> None:
    caption = unarxive.units.filter(
        pl.col("text") == "HOMO-1 and HOMO of thiophene-thiophene pair at 4.0 Å separation."
    )
    row = caption.row(0, named=True)
    assert (row["group_id"], row["kind"], row["section"]) == ("2212.11831", "caption", None)
    assert json.loads(row["meta"]) == {"ref_type": "figure", "ref_id": "44e10a6e-992e-42c7-91d0-08b8e216c3a8"}


def paper(paper_id: str = "2301.00001", **changes: object) -> dict:
    record = {
        "paper_id": paper_id,
        "metadata": {"title": "A  title\n  wrapped"},
        "abstract": {"section": "Abstract", "text": "Abstract {{cite:abc}} text."},
        "body_text": [
            {"section": None, "sec_number": "-1", "content_type": "paragraph", "text": "Front matter."},
            {"section": "Intro", "sec_number": "1", "content_type": "list", "text": "See {{figure:f1}}, {{algo:a1}}."},
        ],
        "ref_entries": {
            "f1": {"type": "figure", "caption": "A {{formula:x}} plot."},
            "t1": {"type": "table", "caption": "NO_CAPTION"},
            "x": {"type": "formula", "latex": "x"},
        },
    }
    record.update(changes)
    return record


def test_plain_json_lines_and_other_markers(tmp_path: Path) -> None:
    path = tmp_path / "papers.jsonl.gz"
    path.write_bytes(gzip.compress(json.dumps(paper()).encode()))
    ingested = load({"path": str(path)}, "small")
    rows = ingested.units.rows(named=True)
    assert [(row["kind"], row["text"]) for row in rows] == [
        ("abstract", "Abstract [citation] text."),
        ("paragraph", "Front matter."),
        ("heading", "Intro"),
        ("paragraph", "See [figure], [algo]."),
        ("caption", "A [formula] plot."),
    ]
    assert rows[1]["section"] is None and rows[3]["section"] == "Intro"
    assert {row["title"] for row in rows} == {"A title wrapped"}
    assert ingested.counts["markers_algo"] == 1
    assert ingested.counts["captions_placeholder_skipped"] == 1


def tar_with(tmp_path: Path, members: dict[str, bytes]) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    path = tmp_path / "sample.tar.gz"
    path.write_bytes(buffer.getvalue())
    return path


def test_tar_errors_name_member_line_and_key(tmp_path: Path) -> None:
    no_jsonl = tar_with(tmp_path, {"d/README": b"hello"})
    with pytest.raises(InputError, match="has no .jsonl member"):
        load({"path": str(no_jsonl)}, "small")
    broken = tar_with(tmp_path, {"d/a.jsonl": json.dumps(paper()).encode() + b"\n{oops\n"})
    with pytest.raises(InputError, match=r"sample\.tar\.gz\[d/a\.jsonl\]: line 2 is not valid JSON"):
        load({"path": str(broken)}, "small")
    record = paper("2301.00002")
    del record["body_text"][1]["text"]
    missing = tar_with(tmp_path, {"d/a.jsonl": json.dumps(record).encode()})
    with pytest.raises(InputError, match=r"line 1 \(paper_id '2301.00002'\), body_text\[1\]: missing key 'text'"):
        load({"path": str(missing)}, "small")
    bad_utf8 = tar_with(tmp_path, {"d/a.jsonl": b'{"paper_id": "\xff"}'})
    with pytest.raises(InputError, match=r"\[d/a\.jsonl\]: not valid UTF-8"):
        load({"path": str(bad_utf8)}, "small")


def test_kinds_keeps_one_abstract_document_per_paper(shared_data: Path, unarxive: Ingested) -> None:
    abstracts = load({"path": str(shared_data / "unarxive-sample" / "unarXive_data_sample.tar.gz"),
                      "kinds": ["abstract"]}, "unarxive")
    assert set(abstracts.units["kind"]) == {"abstract"} and abstracts.units["group_id"].is_unique().all()
    assert abstracts.units.height == abstracts.counts["abstracts"] > 0
    assert abstracts.counts["units_other_kinds_skipped"] == unarxive.units.height - abstracts.units.height
