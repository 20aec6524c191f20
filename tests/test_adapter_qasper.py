"""Tests of the QASPER adapter on a hand-written file and on the project's demo dataset.

`tests/data/qasper_mini.json` is written by hand in the published QASPER v0.3 layout with invented content:
  paper 1901.00001 — abstract, sections "Introduction", "Method ::: Budget Allocation" (nested name, one empty
      paragraph) and "Results", one table. p1q1 has two annotations (spans; free form) whose evidence repeats one
      paragraph with different whitespace and adds another; p1q2 quotes one sentence of a paragraph (containment)
      and "FLOAT SELECTED: Table 1: …" (exact caption); p1q3 is a yes/no question ("No").
  paper 1902.00002 — empty abstract, a nested section "Setup ::: Languages", a section whose name is null, a figure
      and a table. p2q1's float evidence is the caption plus a trailing fragment (caption inside evidence);
      p2q2 is unanswerable; p2q3's evidence paraphrases a paragraph and contains the heading "Setup" (unalignable:
      plain evidence must lie inside a unit, not the reverse).
  paper 1903.00003 — one section with a paragraph repeated verbatim and no figures. p3q1's evidence hits both
      copies (ambiguous), the heading "Caching", and has a blank string; p3q2 ("Yes") cites a table the paper
      does not have (unalignable) and has a second annotation with no answer at all.
Every expected value below was worked out by hand from that file.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from workflow_scripts.core import contracts, tables
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested, qasper

MINI = Path(__file__).parent / "data" / "qasper_mini.json"


@pytest.fixture(scope="module")
def mini() -> Ingested:
    return qasper.load({"path": str(MINI)}, "mini")


def question(ingested: Ingested, qid: str) -> dict:
    return ingested.questions.filter(pl.col("qid") == qid).row(0, named=True)


def test_counts(mini: Ingested) -> None:
    assert mini.counts == {
        "papers": 3,
        "questions": 8,
        "annotations": 10,
        "annotations_without_answer": 1,
        "evidence_strings": 11,
        "evidence_blank": 1,
        "evidence_aligned": 9,
        "evidence_unaligned": 2,
        "evidence_ambiguous": 1,
        "float_selected_evidence": 3,
        "questions_with_evidence": 7,
        "questions_without_alignable_evidence": 2,
    }


def test_units_in_reading_order(mini: Ingested) -> None:
    paper = mini.units.filter(pl.col("group_id") == "1901.00001")
    assert paper["unit_id"].to_list() == [f"1901.00001#{position}" for position in range(10)]
    assert paper["position"].to_list() == list(range(10))
    assert paper["kind"].to_list() == [
        "abstract", "heading", "paragraph", "paragraph", "heading", "paragraph", "paragraph", "heading",
        "paragraph", "caption",
    ]
    assert paper["section"].to_list() == [
        None, "Introduction", "Introduction", "Introduction", "Method ::: Budget Allocation",
        "Method ::: Budget Allocation", "Method ::: Budget Allocation", "Results", "Results", None,
    ]
    assert paper["text"][4] == "Method ::: Budget Allocation"
    assert paper["text"][6] == ""
    assert set(paper["title"]) == {"Token Budgets for Reading Comprehension"}
    assert paper["meta"].to_list() == [None] * 9 + ['{"file": "2-Table1-1.png"}']


def test_unit_totals_and_special_sections(mini: Ingested) -> None:
    assert mini.units.height == 22
    assert dict(mini.units["kind"].value_counts().iter_rows()) == {
        "abstract": 2, "heading": 6, "paragraph": 11, "caption": 3,
    }
    paper = mini.units.filter(pl.col("group_id") == "1902.00002")
    assert paper["kind"].to_list()[0] == "heading"  # empty abstract: no abstract unit
    assert paper.row(5, named=True) == {
        "dataset": "mini", "group_id": "1902.00002", "unit_id": "1902.00002#5", "kind": "paragraph",
        "section": None, "position": 5, "title": "Probing Multilingual Retrievers",
        "text": "Appendix text without a heading.", "meta": None,
    }
    assert paper["section"][4] == "Setup ::: Languages"


def test_answers_follow_the_official_precedence(mini: Ingested) -> None:
    answers = dict(mini.questions.select("qid", "answers").iter_rows())
    assert answers == {
        "p1q1": ["budget-aware reader, BAR", "A budget-aware reader"],
        "p1q2": ["4 points"],
        "p1q3": ["No"],
        "p2q1": ["Swahili, Tagalog"],
        "p2q2": ["Unanswerable"],
        "p2q3": ["500"],
        "p3q1": ["recent results"],
        "p3q2": ["Yes"],
    }
    assert set(mini.questions["dataset"]) == {"mini"}
    assert mini.questions["query_type"].null_count() == 8
    assert question(mini, "p2q1")["group_id"] == "1902.00002"
    assert question(mini, "p2q1")["text"] == "Which low-resource languages are probed?"


def test_alignment(mini: Ingested) -> None:
    gold = dict(mini.questions.select("qid", "gold_unit_ids").iter_rows())
    assert gold == {
        "p1q1": ["1901.00001#2", "1901.00001#3"],  # second copy of #3 differs only in whitespace
        "p1q2": ["1901.00001#8", "1901.00001#9"],  # sentence inside #8; exact float caption #9
        "p1q3": ["1901.00001#8"],
        "p2q1": ["1902.00002#4", "1902.00002#6"],  # caption #6 inside the longer float evidence
        "p2q2": [],
        "p2q3": [],
        "p3q1": ["1903.00003#1", "1903.00003#2", "1903.00003#3"],  # heading, and both copies
        "p3q2": [],
    }
    unaligned = dict(mini.questions.select("qid", "unaligned_evidence").iter_rows())
    assert {qid: value for qid, value in unaligned.items() if value} == {
        "p2q3": ["Setup: each probe uses 500 queries per language and split."],
        "p3q2": ["FLOAT SELECTED: Table 9: Cache hit rates."],
    }


def test_qrels_mirror_gold_units(mini: Ingested) -> None:
    assert mini.qrels.height == 10
    assert set(mini.qrels["relevance"]) == {1}
    assert mini.qrels.filter(pl.col("qid") == "p3q1")["unit_id"].to_list() == [
        "1903.00003#1", "1903.00003#2", "1903.00003#3",
    ]


def test_tables_satisfy_contracts(mini: Ingested) -> None:
    for table, contract in ((mini.units, contracts.UNITS), (mini.questions, contracts.QUESTIONS),
                            (mini.qrels, contracts.QRELS)):
        assert tables.conform(table, contract).equals(table)


def test_gzip_input_reads_the_same(tmp_path: Path, mini: Ingested) -> None:
    packed = tmp_path / "qasper.json"  # no .gz suffix: gzip is detected by magic bytes
    packed.write_bytes(gzip.compress(MINI.read_bytes()))
    assert qasper.load({"path": str(packed)}, "mini").units.equals(mini.units)


def write_json(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "papers.json"
    path.write_text(json.dumps(data))
    return path


def test_missing_paper_key_names_file_paper_and_key(tmp_path: Path) -> None:
    papers = json.loads(MINI.read_text())
    del papers["1902.00002"]["full_text"]
    path = write_json(tmp_path, papers)
    with pytest.raises(InputError, match="'full_text'") as error:
        qasper.load({"path": str(path)}, "mini")
    assert str(path) in str(error.value) and "1902.00002" in str(error.value)


def test_missing_answer_key_names_question(tmp_path: Path) -> None:
    papers = json.loads(MINI.read_text())
    del papers["1903.00003"]["qas"][1]["answers"][0]["answer"]["evidence"]
    with pytest.raises(InputError, match=r"1903\.00003.*'p3q2'.*missing key 'evidence'"):
        qasper.load({"path": str(write_json(tmp_path, papers))}, "mini")


def test_wrong_type_is_an_input_error(tmp_path: Path) -> None:
    papers = json.loads(MINI.read_text())
    papers["1901.00001"]["full_text"][0]["paragraphs"] = "one string, not a list"
    with pytest.raises(InputError, match=r"full_text\[0\].*'paragraphs' should be list"):
        qasper.load({"path": str(write_json(tmp_path, papers))}, "mini")


def test_top_level_must_be_an_object(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="expected a JSON object mapping paper ids"):
        qasper.load({"path": str(write_json(tmp_path, [1, 2]))}, "mini")


def test_invalid_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "p": {\n    "title": "x",\n  }\n}\n')
    with pytest.raises(InputError, match=r"broken\.json: invalid JSON at line 4"):
        qasper.load({"path": str(path)}, "mini")


def test_missing_file_names_the_config_key(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"datasets\.mini\.path: file .*absent\.json does not exist"):
        qasper.load({"path": str(tmp_path / "absent.json")}, "mini")


def test_missing_path_key_names_the_config_key() -> None:
    with pytest.raises(InputError, match=r"datasets\.mini\.path: missing"):
        qasper.load({}, "mini")


def test_relative_path_is_read_from_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(MINI, tmp_path / "mini.json")
    monkeypatch.chdir(tmp_path)
    assert qasper.load({"path": "mini.json"}, "mini").counts["papers"] == 3


def test_demo_dataset(project_root: Path) -> None:
    demo = qasper.load({"path": str(project_root / "data" / "demo" / "papers.json")}, "demo")
    counts = demo.counts
    assert 10 <= counts["papers"] <= 14
    assert 50 <= counts["questions"] <= 70
    assert set(demo.units["kind"]) == {"abstract", "heading", "paragraph", "caption"}
    assert demo.units.filter(pl.col("section").str.contains(":::", literal=True)).height > 0
    assert counts["evidence_unaligned"] >= 2
    assert counts["float_selected_evidence"] >= 4
    assert (demo.questions["answers"].list.first() == "Unanswerable").sum() >= 3
    alignable = counts["questions_with_evidence"] - counts["questions_without_alignable_evidence"]
    assert alignable >= 0.9 * counts["questions_with_evidence"]
    assert demo.units.filter(pl.col("text").str.strip_chars() == "").height == 0
    assert demo.questions["gold_unit_ids"].list.len().sum() == demo.qrels.height
