"""2WikiMultiHopQA open-corpus adapter on the shared files; expected numbers come from
../shared/data/2wikimultihopqa/PROVENANCE.md or were read by hand from the raw files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from workflow_scripts.core import contracts, tables
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested
from workflow_scripts.ingest.adapters.twowiki import load

HEADER = "query-id\tcorpus-idx\tcorpus-title\tscore\n"


@pytest.fixture(scope="module")
def twowiki(shared_data: Path) -> Ingested:
    folder = shared_data / "2wikimultihopqa"
    spec = {
        "corpus": str(folder / "hipporag_2wiki_corpus_6119.json.gz"),
        "questions": str(folder / "lag_dev_questions_covered_354.json"),
        "qrels": str(folder / "qrels_covered_354.tsv"),
    }
    return load(spec, "twowiki")


def test_counts(twowiki: Ingested) -> None:
    tables.conform(twowiki.units, contracts.UNITS)
    tables.conform(twowiki.questions, contracts.QUESTIONS)
    tables.conform(twowiki.qrels, contracts.QRELS)
    assert twowiki.units.height == 6119
    assert twowiki.units["kind"].unique().to_list() == ["passage"]
    assert twowiki.units["title"].n_unique() == 6119  # titles unique
    assert twowiki.questions.height == 354
    assert dict(Counter(twowiki.questions["query_type"].to_list())) == {
        "compositional": 146,
        "bridge_comparison": 83,
        "comparison": 67,
        "inference": 58,
    }
    assert twowiki.qrels.height == 874
    assert twowiki.questions["gold_unit_ids"].list.len().sum() == 874
    assert twowiki.questions["gold_unit_ids"].list.len().min() >= 1
    # every supporting-fact title of the 354 exists in the corpus and has its qrels row
    assert twowiki.questions["unaligned_evidence"].list.len().sum() == 0
    assert twowiki.counts["questions_without_qrels"] == 0


def test_spot_check(twowiki: Ingested) -> None:
    first = twowiki.units.row(0, named=True)
    assert (first["unit_id"], first["group_id"], first["title"]) == ("p0", "p0", "Teutberga")
    assert first["text"].startswith("Teutberga( died 11 November 875) was a queen of Lotharingia")
    question = twowiki.questions.filter(pl.col("qid") == "c4bdfbea08c911ebbd92ac1f6bf848b6").row(0, named=True)
    assert question["text"] == "Was Ausaf Ali or Steven Perry born first?"
    assert question["query_type"] == "comparison"
    assert question["answers"] == ["Ausaf Ali"]
    assert question["gold_unit_ids"] == ["p1428", "p1421"]  # qrels lines 2-3
    titles = dict(twowiki.units.filter(pl.col("unit_id").is_in(["p1428", "p1421"])).select("unit_id", "title").rows())
    assert titles == {"p1428": "Ausaf Ali", "p1421": "Steven Perry"}


SMALL_QUESTIONS = [
    {
        "_id": "q1",
        "type": "comparison",
        "question": "?",
        "supporting_facts": [["Alpha", 0], ["Beta", 1]],
        "answer": "A",
    },
    {"_id": "q2", "type": "inference", "question": "??", "supporting_facts": [["Gamma", 0]], "answer": "no"},
]


def write_small(tmp_path: Path, qrels_rows: str, questions: list[dict] = SMALL_QUESTIONS) -> dict[str, str]:
    """A two-passage corpus (Alpha, Beta), `questions` and `qrels_rows`, as the three files of a spec."""
    corpus = [{"title": "Alpha", "text": "alpha text"}, {"title": "Beta", "text": "beta text"}]
    spec = {
        key: str(tmp_path / name) for key, name in (("corpus", "c.json"), ("questions", "q.json"), ("qrels", "r.tsv"))
    }
    Path(spec["corpus"]).write_text(json.dumps(corpus), encoding="utf-8")
    Path(spec["questions"]).write_text(json.dumps(questions), encoding="utf-8")
    Path(spec["qrels"]).write_text(qrels_rows, encoding="utf-8")
    return spec


def test_small_files_question_without_qrels_and_unaligned_title(tmp_path: Path) -> None:
    spec = write_small(tmp_path, HEADER + "q1\t0\tAlpha\t1\nq1\t1\tBeta\t0\n")
    ingested = load(spec, "small")
    rows = {row["qid"]: row for row in ingested.questions.iter_rows(named=True)}
    assert rows["q1"]["gold_unit_ids"] == ["p0"]  # score 0 is a judgment but not gold
    assert rows["q1"]["unaligned_evidence"] == ["Beta"]
    assert rows["q2"]["gold_unit_ids"] == [] and rows["q2"]["unaligned_evidence"] == ["Gamma"]
    assert ingested.qrels.rows() == [("q1", "p0", 1), ("q1", "p1", 0)]
    assert ingested.counts["questions_without_qrels"] == 1
    assert ingested.counts["supporting_titles_unaligned"] == 2


def test_qrels_title_mismatch_names_the_line(tmp_path: Path) -> None:
    spec = write_small(tmp_path, HEADER + "q1\t0\tAlpha\t1\nq1\t0\tBeta\t1\n")
    with pytest.raises(InputError, match=r"r\.tsv: line 3: corpus-title 'Beta' differs .* title 'Alpha'"):
        load(spec, "small")


def test_bad_qrels_rows(tmp_path: Path) -> None:
    for rows, message in (
        ("q1\t0\tAlpha\t1\n", r"line 1 should be the header"),
        (HEADER + "q1\t2\tAlpha\t1\n", r"line 2: corpus-idx '2' is not a position in the corpus \(0 to 1\)"),
        (HEADER + "q1\tx\tAlpha\t1\n", r"line 2: corpus-idx 'x'"),
        (HEADER + "q1\t0\tAlpha\thigh\n", r"line 2: score 'high' is not an integer"),
        (HEADER + "q1\t0\tAlpha\n", r"line 2 has 3 tab-separated fields, expected 4"),
    ):
        with pytest.raises(InputError, match=message):
            load(write_small(tmp_path, rows), "small")


def test_missing_question_key(tmp_path: Path) -> None:
    spec = write_small(tmp_path, HEADER, questions=[{"_id": "q1", "question": "?", "supporting_facts": []}])
    with pytest.raises(InputError, match=r"q\.json, item \[0\] \(_id 'q1'\): missing key 'type'"):
        load(spec, "small")
    with pytest.raises(InputError, match=r"datasets\.small\.qrels: missing"):
        load({"corpus": spec["corpus"], "questions": spec["questions"]}, "small")
