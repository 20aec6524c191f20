"""TREC-style adapter: real CACM and Cranfield files give PROVENANCE.md's counts; malformed inputs fail clearly."""

from __future__ import annotations

import io
import json
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from workflow_scripts.core.contracts import QRELS, QUESTIONS, UNITS
from workflow_scripts.core.tables import conform
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested, trec


@pytest.fixture(scope="module")
def cacm(shared_data: Path) -> Ingested:
    folder = shared_data / "cacm"
    spec = {
        "collection": folder / "cacm.tar.gz",
        "collection_format": "html_tar",
        "topics": folder / "topics.cacm.txt",
        "topics_format": "cacm",
        "qrels": folder / "qrels.cacm.txt",
        "qrels_format": "trec",
    }
    return trec.load(spec, "cacm")


@pytest.fixture(scope="module")
def cranfield(shared_data: Path) -> Ingested:
    folder = shared_data / "cranfield"
    spec = {
        "collection": folder / "cran.all.1400",
        "collection_format": "smart",
        "topics": folder / "cran.qry",
        "topics_format": "smart",
        "qrels": folder / "cranqrel",
        "qrels_format": "cranfield",
    }
    return trec.load(spec, "cranfield")


def check_contracts(ingested: Ingested) -> None:
    conform(ingested.units, UNITS)
    conform(ingested.questions, QUESTIONS)
    conform(ingested.qrels, QRELS)


# --- CACM -------------------------------------------------------------------------------------------------------


def test_cacm_counts(cacm: Ingested) -> None:
    assert cacm.units.height == 3204
    assert cacm.units["unit_id"].sort().to_list() == [f"CACM-{n:04d}" for n in range(1, 3205)]
    assert cacm.questions.height == 64
    assert cacm.qrels.height == 796
    assert cacm.qrels["qid"].n_unique() == 52
    assert cacm.qrels["relevance"].unique().to_list() == [1]
    assert (cacm.questions["gold_unit_ids"].list.len() > 0).sum() == 52
    assert cacm.counts == {"collection_docs": 3204, "topics": 64, "topics_with_qrels": 52, "qrels": 796}
    check_contracts(cacm)


def test_cacm_qrels_name_docs_below_1000_without_zero_padding(cacm: Ingested) -> None:
    """Anserini's qrels.cacm.txt writes `CACM-756` for the file CACM-0756: kept as is, so 55 judgments (46 docs)
    match no unit, exactly as in Anserini's own evaluation (the published MAP / P@30 count them as missed)."""
    units = set(cacm.units["unit_id"])
    unknown = cacm.qrels.filter(~cacm.qrels["unit_id"].is_in(list(units)))
    assert unknown.height == 55
    assert unknown["unit_id"].n_unique() == 46
    assert unknown["qid"].n_unique() == 19
    assert all(f"CACM-{int(unit[5:]):04d}" in units and len(unit) < 9 for unit in unknown["unit_id"])


def test_cacm_document_text(cacm: Ingested) -> None:
    units = {row["unit_id"]: row for row in cacm.units.iter_rows(named=True)}
    assert units["CACM-0002"]["text"] == (
        "Extraction of Roots by Repeated Subtractions for Digital Computers\n"
        "CACM December, 1958\n"
        "Sugai, I.\n"
        "CA581202 JB March 22, 1978 8:29 PM\n"
        "2 5 2\n2 5 2\n2 5 2"
    )
    first = units["CACM-0001"]
    assert first["text"].startswith(
        "Preliminary Report-International Algebraic Language\nCACM December, 1958\nPerlis, A. J.\nSamelson,K.\n"
        "CA581203 JB March 22, 1978 8:28 PM\n100 5 1\n123 5 1\n"
    )
    assert first["text"].endswith("\n410 6 1\n3184 6 1")
    assert (first["title"], first["meta"], first["group_id"], first["kind"]) == (None, None, "CACM-0001", "document")
    assert not any("<" in text and "pre>" in text for text in cacm.units["text"])


def test_cacm_topics(cacm: Ingested) -> None:
    questions = {row["qid"]: row for row in cacm.questions.iter_rows(named=True)}
    assert sorted(questions, key=int) == [str(n) for n in range(1, 65)]
    assert questions["1"]["text"] == (
        "What articles exist which deal with TSS (Time Sharing System), an operating system for IBM computers?"
    )
    assert questions["1"]["gold_unit_ids"] == ["CACM-1410", "CACM-1572", "CACM-1605", "CACM-2020", "CACM-2358"]
    assert questions["3"]["text"] == "Intermediate languages used in construction of multi-targeted compilers; TCOLL"


# --- Cranfield --------------------------------------------------------------------------------------------------


def test_cranfield_counts(cranfield: Ingested) -> None:
    assert cranfield.units.height == 1400
    assert set(cranfield.units["unit_id"]) == {str(n) for n in range(1, 1401)}
    assert cranfield.questions.height == 225
    assert cranfield.questions["qid"].to_list() == [str(n) for n in range(1, 226)]
    assert cranfield.counts["qrels_code_minus1_dropped"] == 225
    assert cranfield.qrels.height == 1837 - 225
    # cranqrel codes 1 → 128, 2 → 387, 3 → 734, 4 → 363 (PROVENANCE.md); gain = 5 - code
    assert Counter(cranfield.qrels["relevance"]) == {4: 128, 3: 387, 2: 734, 1: 363}
    assert cranfield.qrels["qid"].n_unique() == 225
    assert cranfield.counts["topics_with_qrels"] == 225
    check_contracts(cranfield)


def test_cranfield_documents(cranfield: Ingested) -> None:
    units = {row["unit_id"]: row for row in cranfield.units.iter_rows(named=True)}
    first = units["1"]
    assert first["title"] == "experimental investigation of the aerodynamics of a wing in a slipstream ."
    assert first["text"].startswith(
        "experimental investigation of the aerodynamics of a wing in a slipstream . an experimental study of a wing"
    )
    assert first["text"].endswith("an empirical evaluation of the destalling effects was made for "
                                  "the specific configuration of the experiment .")
    assert json.loads(first["meta"]) == {"authors": "brenckman,m.", "biblio": "j. ae. scs. 25, 1958, 324."}
    # doc 240 has stray `.A` / `.B` lines inside its text: they must not replace the authors or cut the text
    stray = units["240"]
    assert json.loads(stray["meta"]) == {"authors": "dean r. chapman", "biblio": "naca technote 3792"}
    assert "a prandtl number of unity in low-speed flow without injection ." in stray["text"]
    assert stray["text"].endswith("reduces to zero the heat transfer in a laminar separated flow .")
    assert cranfield.counts["smart_repeated_markers"] == 4


def test_cranfield_empty_documents(cranfield: Ingested) -> None:
    empty = cranfield.units.filter(cranfield.units["text"] == "")
    assert empty["unit_id"].to_list() == ["471", "995"]
    assert empty["title"].to_list() == [None, None]
    orphaned = cranfield.qrels.filter(cranfield.qrels["unit_id"].is_in(["471", "995"]))
    assert orphaned.rows() == [("125", "995", 2)]


@pytest.mark.slow  # two BM25 indexes and 225 searches (~15 s)
def test_cranfield_title_prepend_counts_the_title_twice(cranfield: Ingested, tmp_path: Path) -> None:
    """Issue 18: `.W` already opens with the title (1396 of the 1398 documents with text), so retrieval.title
    `ignore` indexes title + abstract once (what docs/your-data.md recommends for SMART collections) and `prepend`
    indexes the title twice. Measured BM25 (k1 0.9, b 0.4, 1000 hits, relevant = codes 1-4): MAP 0.2790 with
    ignore, 0.2878 with prepend (docs/your-data.md quotes both)."""
    import polars as pl

    from workflow_scripts.retrieval import bm25
    from workflow_scripts.retrieval.evaluate import parse_measures, per_query

    units = cranfield.units.filter(pl.col("text") != "")
    opens = units.filter(pl.col("text").str.starts_with(pl.col("title")))
    assert (units.height, opens.height) == (1398, 1396)
    maps = {}
    for title in ("ignore", "prepend"):
        bm25.build_index(units, tmp_path / title, threads=2, title=title)
        ranking, _ = bm25.search(tmp_path / title, cranfield.questions, k=1000, scope="global", threads=2)
        metrics = per_query(ranking, cranfield.qrels, parse_measures(["AP"]))
        maps[title] = round(metrics["value"].mean(), 4)
    assert maps == {"ignore": 0.2790, "prepend": 0.2878}


def test_cranfield_queries_are_numbered_in_file_order(cranfield: Ingested) -> None:
    questions = {row["qid"]: row for row in cranfield.questions.iter_rows(named=True)}
    assert questions["3"]["text"] == (  # the file's `.I 004`
        "what problems of heat conduction in composite slabs have been solved so far ."
    )
    assert questions["225"]["text"] == (  # the file's `.I 365`
        "what design factors can be used to control lift-drag ratios at mach numbers above 5 ."
    )
    relevance = {(q, u): r for q, u, r in cranfield.qrels.rows()}
    assert relevance[("1", "184")] == 3  # cranqrel line 1: `1 184 2`
    assert relevance[("1", "12")] == 2  # `1 12 3`
    assert ("1", "486") not in relevance  # `1 486 -1`, dropped


# --- other formats on real files ---------------------------------------------------------------------------------


def test_tsv_topics_match_the_beir_queries(shared_data: Path) -> None:
    folder = shared_data / "beir-scifact"
    topics = trec.read_tsv_topics(folder / "topics.beir-v1.0.0-scifact.test.tsv.gz")
    assert len(topics) == 300
    queries = [json.loads(line) for line in (folder / "queries.test.jsonl").read_text(encoding="utf-8").splitlines()]
    assert topics == {query["_id"]: " ".join(query["text"].split()) for query in queries}


def test_trec_qrels_of_scifact(shared_data: Path) -> None:
    rows, counts = trec.read_trec_qrels(shared_data / "beir-scifact" / "qrels.beir-v1.0.0-scifact.test.txt")
    assert (len(rows), counts) == (339, {})
    assert {row.relevance for row in rows} == {1}
    assert (rows[0].qid, rows[0].unit_id) == ("1", "31715818")


# --- small hand-made inputs -------------------------------------------------------------------------------------


def html_tar(folder: Path, members: dict[str, bytes]) -> Path:
    path = folder / "pages.tar"
    with tarfile.open(path, "w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def tiny_spec(folder: Path, collection: Path, **overrides: object) -> dict[str, object]:
    (folder / "topics.tsv").write_text("7\tfirst   topic\n", encoding="utf-8")
    (folder / "qrels.txt").write_text("7 Q0 page-1 1\n7 Q0 page-2 0\n", encoding="utf-8")
    spec = {
        "collection": collection,
        "collection_format": "html_tar",
        "topics": folder / "topics.tsv",
        "topics_format": "tsv",
        "qrels": folder / "qrels.txt",
        "qrels_format": "trec",
    }
    return {**spec, **overrides}


def test_html_tar_text(tmp_path: Path) -> None:
    page = b"<html>\n<pre>\n\n  Fish &amp; Chips\t <b>fried</b>\n\n1 <= n &lt;x&gt;\n</pre>\n</html>\n"
    ingested = trec.load(tiny_spec(tmp_path, html_tar(tmp_path, {"dir/page-1.html": page})), "tiny")
    assert ingested.units.rows() == [("tiny", "page-1", "page-1", "document", None, 0, None,
                                      "Fish & Chips fried\n1 <= n <x>", None)]
    assert ingested.questions.select("qid", "text", "gold_unit_ids").rows() == [("7", "first topic", ["page-1"])]
    assert ingested.qrels.rows() == [("7", "page-1", 1), ("7", "page-2", 0)]


def test_non_utf8_tar_member_names_the_member(tmp_path: Path) -> None:
    collection = html_tar(tmp_path, {"page-1.html": b"<pre>caf\xe9</pre>"})
    with pytest.raises(InputError, match=r"pages\.tar:page-1\.html: not valid UTF-8"):
        trec.load(tiny_spec(tmp_path, collection), "tiny")


def test_not_a_tar(tmp_path: Path) -> None:
    collection = tmp_path / "pages.tar"
    collection.write_bytes(b"plain text, not an archive\n")
    with pytest.raises(InputError, match=r"pages\.tar: not a readable tar archive"):
        trec.load(tiny_spec(tmp_path, collection), "tiny")


def test_unknown_format_names_the_config_key(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path, html_tar(tmp_path, {}), collection_format="warc")
    with pytest.raises(InputError, match=r"datasets\.tiny\.collection_format: 'warc' is not a known format"):
        trec.load(spec, "tiny")


def test_missing_collection_names_the_config_key(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path, tmp_path / "absent.tar.gz")
    with pytest.raises(InputError, match=r"datasets\.tiny\.collection: file .*absent\.tar\.gz does not exist"):
        trec.load(spec, "tiny")


def test_trec_qrels_bad_relevance(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path, html_tar(tmp_path, {}))
    Path(spec["qrels"]).write_text("7 Q0 page-1 1\n\n7 Q0 page-2 x\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"qrels\.txt: line 3: relevance 'x' is not an integer"):
        trec.load(spec, "tiny")


def test_trec_qrels_wrong_width(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path, html_tar(tmp_path, {}))
    Path(spec["qrels"]).write_text("7 page-1 1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"qrels\.txt: line 1 has 3 fields, expected 4"):
        trec.load(spec, "tiny")


def smart_spec(folder: Path, collection: str, topics: str, qrels: str) -> dict[str, object]:
    for name, text in (("docs", collection), ("topics", topics), ("qrels", qrels)):
        (folder / name).write_bytes(text.replace("\n", "\r\n").encode())
    return {
        "collection": folder / "docs",
        "collection_format": "smart",
        "topics": folder / "topics",
        "topics_format": "smart",
        "qrels": folder / "qrels",
        "qrels_format": "cranfield",
    }


DOCS = ".I 01\n.T\na title\n.A\nsmith,j.\n.B\nj. x 1\n.W\nbody  text\n.W\nmore\n.I 2\n.T\nsecond\n.W\ntwo\n"
TOPICS = ".I 004\n.W\nfirst query\n.I 009\n.W\nsecond\n query\n"


def test_small_smart_collection(tmp_path: Path) -> None:
    ingested = trec.load(smart_spec(tmp_path, DOCS, TOPICS, "1 1 1\n1 2 -1\n2 02 4\n"), "tiny")
    assert ingested.units.select("unit_id", "title", "text").rows() == [
        ("1", "a title", "body text more"),
        ("2", "second", "two"),
    ]
    assert json.loads(ingested.units["meta"][0]) == {"authors": "smith,j.", "biblio": "j. x 1"}
    assert ingested.questions.select("qid", "text", "gold_unit_ids").rows() == [
        ("1", "first query", ["1"]),
        ("2", "second query", ["2"]),
    ]
    assert ingested.qrels.rows() == [("1", "1", 4), ("2", "2", 1)]
    assert ingested.counts["qrels_code_minus1_dropped"] == 1
    assert ingested.counts["smart_repeated_markers"] == 1


def test_cranfield_code_out_of_range(tmp_path: Path) -> None:
    spec = smart_spec(tmp_path, DOCS, TOPICS, "1 1 1\n1 2 5\n")
    with pytest.raises(InputError, match=r"qrels: line 2: relevance code 5 is not one of -1, 1, 2, 3, 4"):
        trec.load(spec, "tiny")


def test_smart_text_before_first_record(tmp_path: Path) -> None:
    spec = smart_spec(tmp_path, "stray\n" + DOCS, TOPICS, "1 1 1\n")
    with pytest.raises(InputError, match=r"docs: line 1: text outside a field"):
        trec.load(spec, "tiny")


def test_cacm_topic_without_end(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path, html_tar(tmp_path, {}), topics_format="cacm")
    Path(spec["topics"]).write_text("<DOC>\n<DOCNO> 1 </DOCNO>\n text\n</DOC>\n<DOC>\n<DOCNO> 2 </DOCNO>\n", "utf-8")
    with pytest.raises(InputError, match=r"topics\.tsv: topic '2' has no closing `</DOC>`"):
        trec.load(spec, "tiny")
