"""BEIR adapter: the real SciFact files give PROVENANCE.md's counts; malformed inputs fail naming file and line."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest

from workflow_scripts.core.contracts import QRELS, QUESTIONS, UNITS
from workflow_scripts.core.tables import conform
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested, beir


@pytest.fixture(scope="module")
def scifact(shared_data: Path) -> Ingested:
    folder = shared_data / "beir-scifact"
    spec = {
        "corpus": folder / "corpus.jsonl.gz",
        "queries": folder / "queries.test.jsonl",
        "qrels": folder / "qrels" / "test.tsv",
    }
    started = time.perf_counter()
    ingested = beir.load(spec, "scifact")
    assert time.perf_counter() - started < 5
    return ingested


def test_scifact_counts(scifact: Ingested) -> None:
    assert scifact.units.height == 5183
    assert scifact.questions.height == 300
    assert scifact.qrels.height == 339
    assert scifact.qrels["relevance"].unique().to_list() == [1]
    assert scifact.counts == {"corpus_docs": 5183, "queries": 300, "queries_with_qrels": 300, "qrels": 339}


def test_scifact_every_judged_doc_is_in_the_corpus(scifact: Ingested) -> None:
    judged = set(scifact.qrels["unit_id"])
    assert judged <= set(scifact.units["unit_id"])
    gold = {unit for units in scifact.questions["gold_unit_ids"] for unit in units}
    assert gold == judged
    assert sum(len(units) for units in scifact.questions["gold_unit_ids"]) == 339


def test_scifact_spot_checks(scifact: Ingested) -> None:
    doc = scifact.units.row(0, named=True)
    assert doc["unit_id"] == doc["group_id"] == "4983"
    assert doc["title"].startswith("Microstructural development of human newborn cerebral white matter")
    assert doc["text"].startswith("Alterations of the architecture of cerebral white matter in the developing")
    assert (doc["kind"], doc["position"], doc["meta"], doc["dataset"]) == ("document", 0, None, "scifact")
    first = scifact.questions.row(0, named=True)
    assert first["qid"] == first["group_id"] == "1"
    assert first["text"] == "0-dimensional biomaterials show inductive properties."
    assert first["gold_unit_ids"] == ["31715818"]
    assert (first["answers"], first["unaligned_evidence"], first["query_type"]) == ([], [], None)


def test_scifact_tables_satisfy_the_contracts(scifact: Ingested) -> None:
    conform(scifact.units, UNITS)
    conform(scifact.questions, QUESTIONS)
    conform(scifact.qrels, QRELS)


def test_nfcorpus_queries_and_qrels(shared_data: Path) -> None:
    folder = shared_data / "beir-nfcorpus"
    queries, answers = beir.read_query_records(folder / "queries.test.jsonl")
    qrels = beir.read_qrels(folder / "qrels" / "test.tsv")
    assert len(queries) == 323
    assert len(qrels) == 12334
    assert len({row.qid for row in qrels}) == 323
    assert {row.qid for row in qrels} == set(queries)
    assert len({row.unit_id for row in qrels}) == 3128
    assert sum(row.relevance == 1 for row in qrels) == 11758
    assert sum(row.relevance == 2 for row in qrels) == 576
    assert queries["PLAIN-2"] == "Do Cholesterol Statin Drugs Cause Breast Cancer?"
    assert answers == {}  # NFCorpus queries carry no metadata.answers


# --- small hand-made inputs -------------------------------------------------------------------------------------

QUERIES = '{"_id": "q1", "text": "what is a?", "metadata": {}}\n{"_id": "q2", "text": "unjudged", "metadata": {}}\n'
QRELS_TSV = "query-id\tcorpus-id\tscore\nq1\td2\t1\nq1\td1\t2\nq1\td3\t0\n"


def write_dataset(folder: Path, corpus: bytes, qrels: str = QRELS_TSV) -> dict[str, Path]:
    spec = {"corpus": folder / "corpus.jsonl", "queries": folder / "queries.jsonl", "qrels": folder / "qrels.tsv"}
    spec["corpus"].write_bytes(corpus)
    spec["queries"].write_text(QUERIES, encoding="utf-8")
    spec["qrels"].write_text(qrels, encoding="utf-8")
    return spec


def test_small_gzip_dataset(tmp_path: Path) -> None:
    corpus = (
        '{"_id": "d1", "title": "", "text": "alpha", "metadata": {"year": 2020}}\n'
        '{"_id": "d2", "title": "Beta", "text": "beta"}\n'
    )
    spec = write_dataset(tmp_path, gzip.compress(corpus.encode()))
    ingested = beir.load(spec, "tiny")
    assert ingested.units["title"].to_list() == [None, "Beta"]
    assert [json.loads(m) if m else None for m in ingested.units["meta"]] == [{"year": 2020}, None]
    assert ingested.questions["qid"].to_list() == ["q1", "q2"]
    assert ingested.questions["gold_unit_ids"].to_list() == [["d1", "d2"], []]
    assert ingested.qrels["relevance"].to_list() == [1, 2, 0]
    assert ingested.counts == {"corpus_docs": 2, "queries": 2, "queries_with_qrels": 1, "qrels": 3}


def test_invalid_json_line_names_file_and_line(tmp_path: Path) -> None:
    spec = write_dataset(tmp_path, b'{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": \n')
    with pytest.raises(InputError, match=r"corpus\.jsonl: line 2 is not valid JSON"):
        beir.load(spec, "tiny")


def test_missing_id_names_file_and_line(tmp_path: Path) -> None:
    spec = write_dataset(tmp_path, b'{"_id": "d1", "text": "a"}\n\n{"text": "b"}\n')
    with pytest.raises(InputError, match=r"corpus\.jsonl: line 3 has no string field '_id'"):
        beir.load(spec, "tiny")


def test_non_utf8_corpus(tmp_path: Path) -> None:
    spec = write_dataset(tmp_path, b'{"_id": "d1", "text": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"corpus\.jsonl: not valid UTF-8 .*line 1"):
        beir.load(spec, "tiny")


def test_missing_file_names_the_config_key(tmp_path: Path) -> None:
    spec = write_dataset(tmp_path, b'{"_id": "d1", "text": "a"}\n')
    spec["corpus"] = tmp_path / "absent.jsonl"
    with pytest.raises(InputError, match=r"datasets\.tiny\.corpus: file .*absent\.jsonl does not exist"):
        beir.load(spec, "tiny")


def test_missing_key_names_the_config_key(tmp_path: Path) -> None:
    spec = write_dataset(tmp_path, b'{"_id": "d1", "text": "a"}\n')
    del spec["qrels"]
    with pytest.raises(InputError, match=r"datasets\.tiny\.qrels: missing"):
        beir.load(spec, "tiny")


def test_non_integer_score_names_file_and_line(tmp_path: Path) -> None:
    qrels = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\tx\n"
    spec = write_dataset(tmp_path, b'{"_id": "d1", "text": "a"}\n', qrels)
    with pytest.raises(InputError, match=r"qrels\.tsv: line 3: relevance 'x' is not an integer"):
        beir.load(spec, "tiny")


def test_qrels_without_header(tmp_path: Path) -> None:
    spec = write_dataset(tmp_path, b'{"_id": "d1", "text": "a"}\n', "q1\td1\t1\n")
    with pytest.raises(InputError, match=r"qrels\.tsv: the first line must be the header"):
        beir.load(spec, "tiny")


def test_pair_judged_twice(tmp_path: Path) -> None:
    qrels = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t0\n"
    spec = write_dataset(tmp_path, b'{"_id": "d1", "text": "a"}\n', qrels)
    with pytest.raises(InputError, match=r"qrels\.tsv: line 3 judges query 'q1' / document 'd1' again .*line 2"):
        beir.load(spec, "tiny")


def test_repeated_query_id(tmp_path: Path) -> None:
    spec = write_dataset(tmp_path, b'{"_id": "d1", "text": "a"}\n')
    spec["queries"].write_text(QUERIES + '{"_id": "q1", "text": "again"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"queries\.jsonl: line 3 repeats query id 'q1'"):
        beir.load(spec, "tiny")


def test_reference_answers_come_from_the_queries_metadata(tmp_path: Path) -> None:
    """`metadata.answers` (a list, or one string) become the question's reference answers, deduplicated; the
    walkthrough's example (data/your-data/) carries one for every question."""
    spec = write_dataset(tmp_path, b'{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": "b"}\n'
                                   b'{"_id": "d3", "text": "c"}\n')
    spec["queries"].write_text('{"_id": "q1", "text": "a?", "metadata": {"answers": ["alpha", " alpha", "A"]}}\n'
                               '{"_id": "q2", "text": "b?", "metadata": {"answers": "beta"}}\n', encoding="utf-8")
    ingested = beir.load(spec, "tiny")
    assert ingested.questions["answers"].to_list() == [["alpha", "A"], ["beta"]]
    assert ingested.counts["queries_with_answers"] == 2
    for bad in ("[3]", "[]"):
        spec["queries"].write_text('{"_id": "q1", "text": "a?", "metadata": {"answers": %s}}\n' % bad,
                                   encoding="utf-8")
        with pytest.raises(InputError, match=r"queries\.jsonl: line 1: metadata.answers of query 'q1' must be a non"):
            beir.load(spec, "tiny")
    spec["queries"].write_text('{"_id": 7, "text": "a?", "metadata": {"answers": ["alpha"]}}\n', encoding="utf-8")
    assert beir.load(spec, "tiny").questions["answers"].to_list() == [["alpha"]]  # an integer id, as the query texts
    root = Path(__file__).resolve().parents[1] / "data" / "your-data"
    example = beir.load({"corpus": root / "corpus.jsonl", "queries": root / "queries.jsonl",
                         "qrels": root / "qrels.tsv"}, "harbor_library")
    assert example.counts == {"corpus_docs": 28, "queries": 24, "queries_with_qrels": 24, "qrels": 24,
                              "queries_with_answers": 24}
