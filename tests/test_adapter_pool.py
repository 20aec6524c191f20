"""Re-ranking pool adapter: BERGEN's DL19 pool TSV gives PROVENANCE.md's counts and SPLADE-v3's file-order
nDCG@10; judged passages outside the pool are kept and explained; malformed pools fail naming file, line and qid."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from workflow_scripts.core.contracts import RUNS
from workflow_scripts.core.tables import conform
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested
from ingest_helpers import load_dataset

from workflow_scripts.ingest.stage import log_warnings, report
from workflow_scripts.retrieval.evaluate import parse_measures, per_query

POOL = "trec-dl19-passage/bergen-provence/rerank_file.trecdl19.spladev3.top50.txt"


def spec(shared_data: Path, qrels_format: str = "trec") -> dict:
    qrels = {"trec": "trec-dl19-passage/qrels.dl19-passage.txt", "json": "trec-dl19-passage/bergen-provence/qrel_trecdl19.txt"}
    return {"format": "pool_tsv", "pool": str(shared_data / POOL), "qrels": str(shared_data / qrels[qrels_format]),
            "qrels_format": qrels_format}


@pytest.fixture(scope="module")
def dl19(shared_data: Path) -> Ingested:
    return load_dataset("dl19", spec(shared_data))


def test_dl19_pool_counts(dl19: Ingested) -> None:
    assert dl19.units.height == 4300
    assert dl19.questions.height == 43
    assert dl19.units["group_id"].n_unique() == 43
    assert dl19.units.group_by("group_id").len()["len"].unique().to_list() == [100]
    assert dl19.units["meta"].str.json_path_match("$.doc_id").n_unique() == 4297
    assert dl19.qrels.height == 9260
    assert Counter(dl19.qrels["relevance"].to_list()) == {0: 5158, 1: 1601, 2: 1804, 3: 697}
    counts = dl19.counts
    assert (counts["pool_pairs"], counts["queries"], counts["queries_with_qrels"], counts["qrels"]) == (4300, 43, 43, 9260)
    assert counts["pool_pairs_judged"] == 2272
    assert counts["qrels_unknown_units"] == 9260 - 2272
    assert counts["qrels_unknown_questions"] == 0 and counts["units_empty_dropped"] == 0


def test_dl19_unknown_unit_qrels_are_explained_not_warned(dl19: Ingested, caplog: pytest.LogCaptureFixture) -> None:
    note = report(dl19)["notes"]["qrels_unknown_units"]
    assert note.startswith("expected for a re-ranking pool") and "2272 of the 9260 judgments" in note
    with caplog.at_level(logging.INFO, logger="ragfrontier.ingest"):
        log_warnings("dl19", dl19.counts, dl19.notes)
    [record] = [record for record in caplog.records if "qrels_unknown_units" in record.getMessage()]
    assert record.levelno == logging.INFO and "6988 (expected for a re-ranking pool" in record.getMessage()


def test_dl19_queries_equal_the_anserini_topics(dl19: Ingested, shared_data: Path) -> None:
    topics = dict(
        line.split("\t", 1) for line in (shared_data / "trec-dl19-passage/topics.dl19-passage.txt").read_text().splitlines()
    )
    assert dict(dl19.questions.select("qid", "text").iter_rows()) == {qid: text.strip() for qid, text in topics.items()}


def test_dl19_unit_ids_join_pool_and_qrels(dl19: Ingested) -> None:
    unit = dl19.units.filter(pl.col("unit_id") == "19335#8412682").row(0, named=True)
    assert (unit["group_id"], unit["position"], unit["kind"], unit["title"]) == ("19335", 0, "passage", None)
    assert unit["text"].startswith("Environmental anthropology is a sub-specialty within the field of anthropology")
    graded = dl19.qrels.filter(pl.col("unit_id") == "19335#8412682")["relevance"].to_list()
    assert graded == [3]


def test_json_qrels_equal_the_trec_qrels(dl19: Ingested, shared_data: Path) -> None:
    from_json = load_dataset("dl19", spec(shared_data, "json"))
    assert from_json.qrels.sort(["qid", "unit_id"]).equals(dl19.qrels.sort(["qid", "unit_id"]))
    assert from_json.units.equals(dl19.units)


def test_dl19_file_order_reproduces_spladev3_ndcg(dl19: Ingested) -> None:
    """PROVENANCE.md: the file's order is SPLADE-v3's ranking, nDCG@10 0.7226 over all judgments (published
    full-collection SPLADE-v3: 0.7264)."""
    run = conform(
        dl19.units.select("group_id", "unit_id", "position").rename({"group_id": "qid"}).with_columns(
            (pl.col("position") + 1).cast(pl.Int32).alias("rank"), (-pl.col("position")).cast(pl.Float64).alias("score"),
            *(pl.lit(None).alias(name) for name in RUNS.columns if name not in ("qid", "unit_id", "rank", "score")),
        ).select(list(RUNS.columns)),
        RUNS,
    )
    metrics = per_query(run, dl19.qrels, parse_measures(["nDCG@10", "R(rel=2)@100"]))
    means = dict(metrics.group_by("measure").agg(pl.col("value").mean()).iter_rows())
    assert round(means["nDCG@10"], 4) == 0.7226
    assert round(means["R(rel=2)@100"], 4) == 0.6465


def write_pool(tmp_path: Path, lines: list[str]) -> dict:
    pool = tmp_path / "pool.tsv"
    pool.write_text("".join(line + "\n" for line in lines))
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 Q0 d1 2\nq1 Q0 d9 1\n")
    return {"format": "pool_tsv", "pool": str(pool), "qrels": str(qrels)}


def test_small_pool(tmp_path: Path) -> None:
    ingested = load_dataset("mini", write_pool(tmp_path, ["q1\td1\twhat is x\tx is y", "q1\td2\twhat  is x\tz",
                                                          "q2\td1\tanother\tx is y"]))
    assert ingested.units["unit_id"].to_list() == ["q1#d1", "q1#d2", "q2#d1"]
    assert ingested.units["position"].to_list() == [0, 1, 0]
    assert ingested.questions["gold_unit_ids"].to_list() == [["q1#d1", "q1#d9"], []]
    assert ingested.counts["pool_pairs_judged"] == 1 and ingested.counts["qrels_unknown_units"] == 1


@pytest.mark.parametrize("line, fields", [("q2\td3\tquery only", 3), ("q2\td3\tquery\tpassage\twith a tab", 5)])
def test_wrong_column_count_names_file_line_and_qid(tmp_path: Path, line: str, fields: int) -> None:
    dataset = write_pool(tmp_path, ["q1\td1\twhat is x\tx is y", line])
    with pytest.raises(InputError, match=rf"pool.tsv: line 2 \(qid 'q2'\) has {fields} tab-separated fields, expected 4: "
                                         r"qid, doc_id, query, passage"):
        load_dataset("mini", dataset)


def test_changing_query_string_names_file_line_and_qid(tmp_path: Path) -> None:
    dataset = write_pool(tmp_path, ["q1\td1\twhat is x\tx is y", "q2\td1\tother\tx", "q1\td2\twhat is z\tz"])
    with pytest.raises(InputError, match=r"pool.tsv: line 3 \(qid 'q1'\) gives the query 'what is z', but line 1 gave "
                                         r"'what is x'; one qid must keep one query string"):
        load_dataset("mini", dataset)


def test_repeated_pair_names_both_lines(tmp_path: Path) -> None:
    dataset = write_pool(tmp_path, ["q1\td1\twhat is x\tx is y", "q1\td1\twhat is x\tx is y"])
    with pytest.raises(InputError, match=r"pool.tsv: line 2 \(qid 'q1'\) lists doc_id 'd1' again \(first at line 1\)"):
        load_dataset("mini", dataset)


def test_json_qrels_with_a_bad_grade_names_qid_and_doc(tmp_path: Path) -> None:
    dataset = write_pool(tmp_path, ["q1\td1\twhat is x\tx is y"])
    (tmp_path / "qrels.json").write_text('{"q1": {"d1": "2"}}')
    dataset.update(qrels=str(tmp_path / "qrels.json"), qrels_format="json")
    with pytest.raises(InputError, match=r"qrels.json: qid 'q1', doc_id 'd1': grade '2' is not an integer"):
        load_dataset("mini", dataset)
