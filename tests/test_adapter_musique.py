"""MuSiQue adapter on the shared 100-question file; expected numbers come from
../shared/data/musique/PROVENANCE.md or were read by hand from the raw file."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from workflow_scripts.core import contracts, tables
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested
from workflow_scripts.ingest.adapters.musique import load

FILE = ("musique", "kag_musique_ans_train_100.json.gz")


@pytest.fixture(scope="module")
def musique(shared_data: Path) -> Ingested:
    return load({"path": str(shared_data.joinpath(*FILE))}, "musique")


def test_counts(musique: Ingested) -> None:
    tables.conform(musique.units, contracts.UNITS)
    tables.conform(musique.questions, contracts.QUESTIONS)
    tables.conform(musique.qrels, contracts.QRELS)
    assert musique.questions.height == 100
    assert musique.units.height == 2000
    assert musique.units.group_by("group_id").len()["len"].to_list() == [20] * 100
    assert dict(Counter(musique.questions["query_type"].to_list())) == {
        "2hop": 68,
        "3hop1": 24,
        "3hop2": 3,
        "4hop1": 3,
        "4hop3": 2,
    }
    assert dict(Counter(musique.questions["gold_unit_ids"].list.len().to_list())) == {2: 68, 3: 27, 4: 5}
    assert musique.qrels.height == 2 * 68 + 3 * 27 + 4 * 5
    assert musique.counts["questions_unanswerable"] == 0  # all answerable
    assert musique.questions["unaligned_evidence"].list.len().sum() == 0


def test_spot_check(musique: Ingested) -> None:
    qid = "2hop__150763_14904"
    question = musique.questions.filter(pl.col("qid") == qid).row(0, named=True)
    assert question["text"] == (
        "Who was the first president of the association which published Journal of Psychotherapy Integration?"
    )
    assert question["answers"] == ["G. Stanley Hall", "Stanley Hall"]  # answer + its alias
    # the decomposition's paragraph_support_idx values are 6 and 10
    assert question["gold_unit_ids"] == [f"{qid}#6", f"{qid}#10"]
    first = musique.units.filter(pl.col("unit_id") == f"{qid}#0").row(0, named=True)
    assert (first["group_id"], first["kind"], first["position"]) == (qid, "paragraph", 0)
    assert first["title"] == "Journal of Mathematical Physics"
    assert first["text"].startswith("The Journal of Mathematical Physics is a peer-reviewed journal")
    assert first["meta"] is None and first["section"] is None


def record(qid: str = "2hop__1_2", **changes: object) -> dict:
    base = {
        "id": qid,
        "paragraphs": [
            {"idx": 0, "title": "A", "paragraph_text": " a text ", "is_supporting": True},
            {"idx": 1, "title": "B", "paragraph_text": "b text", "is_supporting": False},
        ],
        "question": "Q?",
        "question_decomposition": [],
        "answer": "x",
        "answer_aliases": ["y", "x"],
        "answerable": True,
    }
    base.update(changes)
    return base


def test_json_lines_and_flags(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl.gz"
    lines = [record(), record("odd_id", answerable=False)]
    path.write_bytes(gzip.compress("\n".join(json.dumps(line) for line in lines).encode()))
    ingested = load({"path": str(path)}, "m")
    assert ingested.questions["query_type"].to_list() == ["2hop", None]
    assert ingested.questions["answers"].to_list()[0] == ["x", "y"]
    assert ingested.units["text"].to_list()[0] == "a text"
    assert ingested.counts["questions_unanswerable"] == 1
    assert ingested.counts["questions_without_hop_type"] == 1


def test_missing_paragraph_key(tmp_path: Path) -> None:
    broken = record("3hop1__9")
    del broken["paragraphs"][1]["is_supporting"]
    path = tmp_path / "m.json"
    path.write_text(json.dumps([record(), broken]), encoding="utf-8")
    with pytest.raises(
        InputError, match=r"m\.json, item \[1\] \(id '3hop1__9'\), paragraphs\[1\]: missing key 'is_supp"
    ):
        load({"path": str(path)}, "m")


def test_wrong_type_and_malformed_line(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps([record(answer_aliases="y")]), encoding="utf-8")
    with pytest.raises(InputError, match="key 'answer_aliases' should be list"):
        load({"path": str(path)}, "m")
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(record()) + "\n" + json.dumps(record())[:-1] + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"m\.jsonl: line 2 is not valid JSON"):
        load({"path": str(path)}, "m")
