"""HotpotQA adapters ("hotpotqa", "ircot") on the shared files; expected numbers come from
../shared/data/hotpotqa/PROVENANCE.md or were read by hand from the raw files."""

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
from workflow_scripts.ingest.adapters.hotpotqa import ircot_answers, load_hotpotqa, load_ircot


def conforms(ingested: Ingested) -> None:
    tables.conform(ingested.units, contracts.UNITS)
    tables.conform(ingested.questions, contracts.QUESTIONS)
    tables.conform(ingested.qrels, contracts.QRELS)


@pytest.fixture(scope="module")
def distractor(shared_data: Path) -> Ingested:
    return load_hotpotqa({"path": str(shared_data / "hotpotqa" / "hotpot_dev_distractor_100.json")}, "hotpot")


@pytest.fixture(scope="module")
def fullwiki(shared_data: Path) -> Ingested:
    path = shared_data / "hotpotqa" / "amor_test_fullwiki_500.original.jsonl.gz"
    return load_hotpotqa({"path": str(path)}, "fullwiki")


@pytest.fixture(scope="module")
def ircot(shared_data: Path) -> Ingested:
    return load_ircot({"path": str(shared_data / "hotpotqa" / "ircot_format_dev_500.jsonl.gz")}, "ircot")


def test_distractor_counts(distractor: Ingested) -> None:
    conforms(distractor)
    questions = distractor.questions
    assert questions.height == 100
    assert dict(Counter(questions["query_type"].to_list())) == {"bridge": 85, "comparison": 15}
    assert distractor.counts["supporting_facts"] == 239
    assert distractor.units.height == 1000  # 10 distractor-setting paragraphs each
    # both gold paragraphs present for 100/100, and each question's facts name exactly two titles
    assert questions["gold_unit_ids"].list.len().to_list() == [2] * 100
    assert questions["unaligned_evidence"].list.len().sum() == 0
    assert distractor.qrels.height == 200
    assert distractor.qrels["relevance"].unique().to_list() == [1]
    assert (distractor.units["dataset"] == "hotpot").all()


def test_distractor_spot_check(distractor: Ingested) -> None:
    qid = "5a85355a5542997b5ce3ffc8"
    question = distractor.questions.filter(pl.col("qid") == qid).row(0, named=True)
    assert question["answers"] == ["beer and whisky"]
    assert question["group_id"] == qid
    # supporting facts: Lucy Saunders [1], Michael Jackson (writer) [0, 1]; context indexes 9 and 2
    assert question["gold_unit_ids"] == [f"{qid}#2", f"{qid}#9"]
    units = {row["unit_id"]: row for row in distractor.units.filter(pl.col("group_id") == qid).iter_rows(named=True)}
    assert len(units) == 10
    jackson = units[f"{qid}#2"]
    assert (jackson["title"], jackson["kind"], jackson["position"]) == ("Michael Jackson (writer)", "paragraph", 2)
    assert jackson["text"].startswith(
        "Michael James Jackson (27 March 1942 – 30 August 2007) was an English writer and journalist. He was"
    )
    assert json.loads(jackson["meta"]) == {"supporting_sentence_ids": [0, 1]}
    assert json.loads(units[f"{qid}#9"]["meta"]) == {"supporting_sentence_ids": [1]}
    assert units[f"{qid}#0"]["meta"] is None
    assert units[f"{qid}#0"]["text"].startswith("Herbert Leon Kessler is a highly notable")

    comparison = distractor.questions.filter(pl.col("qid") == "5ae2a0f9554299495565daec").row(0, named=True)
    assert comparison["query_type"] == "comparison"
    assert comparison["answers"] == ["no"]
    assert comparison["gold_unit_ids"] == ["5ae2a0f9554299495565daec#0", "5ae2a0f9554299495565daec#9"]


def test_fullwiki_jsonl_with_empty_contexts(fullwiki: Ingested) -> None:
    conforms(fullwiki)
    questions = fullwiki.questions
    assert questions.height == 500
    assert dict(Counter(questions["query_type"].to_list())) == {"bridge": 371, "comparison": 129}
    sizes = Counter(fullwiki.units.group_by("group_id").len()["len"].to_list())
    assert sizes == {10: 495, 4: 2, 2: 1}  # and 2 questions without any paragraph
    assert fullwiki.counts["questions_without_paragraphs"] == 2
    # all gold titles are in the context for only 151/500 questions
    assert questions.filter(pl.col("unaligned_evidence").list.len() == 0).height == 151
    empty = questions.filter(pl.col("qid").is_in(["5a83ed9b55429933447460b8", "5ab69f13554299710c8d1ef3"]))
    assert empty["gold_unit_ids"].to_list() == [[], []]
    assert sorted(empty["unaligned_evidence"].to_list()) == [["Cistus", "Stapelianthus"], ["Dandong", "Hotan"]]
    kansas = questions.filter(pl.col("qid") == "5a7166395542994082a3e814").row(0, named=True)
    assert kansas["gold_unit_ids"] == ["5a7166395542994082a3e814#6"]  # University of Kansas
    assert kansas["unaligned_evidence"] == ["Kansas Song"]


def test_ircot_counts(ircot: Ingested) -> None:
    conforms(ircot)
    questions = ircot.questions
    assert questions.height == 500
    assert questions["gold_unit_ids"].list.len().to_list() == [2] * 500  # exactly 2 supporting paragraphs each
    assert questions["query_type"].null_count() == 500
    sizes = ircot.units.group_by("group_id").len()["len"]
    assert (sizes == 10).sum() == 489
    assert sizes.filter(sizes != 10).is_between(2, 8).all() and (sizes != 10).sum() == 11
    yes_no = questions.filter(pl.col("answers").list.first().str.to_lowercase().is_in(["yes", "no"]))
    assert yes_no.height == 80
    assert ircot.qrels.height == 1000


def test_ircot_spot_check(ircot: Ingested) -> None:
    first = ircot.questions.row(0, named=True)
    assert first["qid"] == "5a8c7595554299585d9e36b6"
    assert first["text"].startswith("What government position was held by the woman who portrayed Corliss Archer")
    assert first["answers"] == ["Chief of Protocol"]
    assert first["gold_unit_ids"] == ["5a8c7595554299585d9e36b6#1", "5a8c7595554299585d9e36b6#6"]
    shirley = ircot.units.filter(pl.col("unit_id") == "5a8c7595554299585d9e36b6#1").row(0, named=True)
    assert shirley["title"] == "Shirley Temple"
    assert shirley["text"].startswith("Shirley Temple Black (April 23, 1928 – February 10, 2014) was an American")
    derrickson = ircot.questions.filter(pl.col("qid") == "5a8b57f25542995d1e6f1371").row(0, named=True)
    assert derrickson["answers"] == ["yes"]
    assert derrickson["gold_unit_ids"] == ["5a8b57f25542995d1e6f1371#1", "5a8b57f25542995d1e6f1371#4"]


def answer(number: str = "", spans: list[str] | None = None, day: str = "", month: str = "", year: str = "") -> dict:
    return {"number": number, "date": {"day": day, "month": month, "year": year}, "spans": spans or []}


def test_ircot_answer_strings() -> None:
    assert ircot_answers([answer(spans=["Paris", "Lyon"])], "x") == ["Paris", "Lyon"]
    assert ircot_answers([answer(number="12")], "x") == ["12"]
    assert ircot_answers([answer(month="June", year="1990")], "x") == ["June 1990"]
    assert ircot_answers([answer(day="4", month="July", year="1776")], "x") == ["4 July 1776"]
    assert ircot_answers([answer(spans=["a"]), answer(spans=["a"]), answer(spans=["b"])], "x") == ["a", "b"]
    with pytest.raises(InputError, match=r"x\[0\]: the answer object has no number, spans or date"):
        ircot_answers([answer()], "x")
    with pytest.raises(InputError, match="missing key 'spans'"):
        ircot_answers([{"number": "", "date": {}}], "x")


def hotpot_record(qid: str = "q1", **changes: object) -> dict:
    record = {
        "_id": qid,
        "question": "Which came first?",
        "answer": "A",
        "type": "comparison",
        "level": "hard",
        "supporting_facts": [["A", 0], ["Z", 0]],
        "context": [["A", ["First.", " Second."]], ["B", ["Other."]]],
    }
    record.update(changes)
    return record


def test_small_file_json_list_and_gzip_jsonl(tmp_path: Path) -> None:
    as_list = tmp_path / "list.json"
    as_list.write_text(json.dumps([hotpot_record()]), encoding="utf-8")
    as_lines = tmp_path / "lines.jsonl.gz"
    as_lines.write_bytes(gzip.compress((json.dumps(hotpot_record()) + "\n\n").encode()))
    for path in (as_list, as_lines):
        ingested = load_hotpotqa({"path": str(path)}, "tiny")
        conforms(ingested)
        assert ingested.units["text"].to_list() == ["First. Second.", "Other."]
        assert ingested.questions.row(0, named=True)["gold_unit_ids"] == ["q1#0"]
        assert ingested.questions.row(0, named=True)["unaligned_evidence"] == ["Z"]
        assert ingested.counts["supporting_titles_unaligned"] == 1


def test_out_of_range_sentence_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text(json.dumps([hotpot_record(supporting_facts=[["B", 3]])]), encoding="utf-8")
    ingested = load_hotpotqa({"path": str(path)}, "tiny")
    assert ingested.counts["supporting_facts_sentence_out_of_range"] == 1
    assert json.loads(ingested.units.row(1, named=True)["meta"]) == {"supporting_sentence_ids": [3]}


def test_malformed_json_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(hotpot_record()) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"broken\.jsonl: line 2 is not valid JSON"):
        load_hotpotqa({"path": str(path)}, "tiny")


def test_missing_key_names_file_record_and_key(tmp_path: Path) -> None:
    record = hotpot_record("q7")
    del record["answer"]
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps(hotpot_record()) + "\n" + json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"h\.jsonl, line 2 \(_id 'q7'\): missing key 'answer'"):
        load_hotpotqa({"path": str(path)}, "tiny")
    ircot = tmp_path / "i.jsonl"
    ircot.write_text(json.dumps({"question_id": "q9", "question_text": "?", "answers_objects": []}) + "\n")
    with pytest.raises(InputError, match=r"i\.jsonl, line 1 \(question_id 'q9'\): missing key 'contexts'"):
        load_ircot({"path": str(ircot)}, "tiny")


def test_amor_supporting_fact_groups_are_rejected(shared_data: Path) -> None:
    """AMOR's original file regroups supporting facts as [title, [ids], [sentences], {…}]: not the official layout."""
    path = shared_data / "hotpotqa" / "amor_dev_distractor_100.original.jsonl.gz"
    with pytest.raises(InputError, match=r"line 1 .*supporting_facts\[0\] should be \[title, sentence index\]"):
        load_hotpotqa({"path": str(path)}, "amor")


def test_config_errors_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"datasets\.hp\.path: missing"):
        load_hotpotqa({"format": "hotpotqa"}, "hp")
    with pytest.raises(InputError, match=r"datasets\.hp\.path: file .* does not exist"):
        load_ircot({"path": str(tmp_path / "nope.jsonl")}, "hp")
