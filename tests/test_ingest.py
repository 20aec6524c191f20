"""Ingest's shared clean-up after every adapter: empty units dropped and counted, duplicate ids refused with a
few examples, qrels that point outside the tables kept and counted, unknown formats named."""

import json

import pytest

from workflow_scripts.core.errors import InputError
from ingest_helpers import load_dataset

from workflow_scripts.ingest.stage import report


def paper(paper_id: str, paragraphs: list[str], questions: list[tuple[str, list[str]]]) -> dict:
    qas = [
        {"question": f"question {qid}?", "question_id": qid,
         "answers": [{"answer": {"unanswerable": False, "extractive_spans": [], "yes_no": None,
                                 "free_form_answer": "an answer", "evidence": evidence, "highlighted_evidence": []},
                      "annotation_id": f"a-{qid}", "worker_id": "w"}]}
        for qid, evidence in questions
    ]
    return {"title": f"Paper {paper_id}", "abstract": "An abstract.",
            "full_text": [{"section_name": "Intro", "paragraphs": paragraphs}], "figures_and_tables": [], "qas": qas}


def ingest(tmp_path, papers: dict):
    path = tmp_path / "papers.json"
    path.write_text(json.dumps(papers))
    return load_dataset("mini", {"format": "qasper", "path": str(path)})


def test_empty_units_are_dropped_and_counted(tmp_path):
    ingested = ingest(tmp_path, {"p1": paper("p1", ["First paragraph.", "   ", "Second paragraph."], [("q1", ["First paragraph."])])})
    assert ingested.counts["units_empty_dropped"] == 1
    assert "" not in ingested.units["text"].to_list()
    assert report(ingested)["units_by_kind"] == {"abstract": 1, "heading": 1, "paragraph": 2}


def test_duplicate_question_ids_are_refused_with_examples(tmp_path):
    papers = {"p1": paper("p1", ["Text one."], [("dup", ["Text one."])]), "p2": paper("p2", ["Text two."], [("dup", [])])}
    with pytest.raises(InputError, match=r"datasets.mini \(qasper\): table 'questions': 1 duplicated qid values: 'dup'"):
        ingest(tmp_path, papers)


def test_qrels_to_dropped_units_are_kept_and_counted(tmp_path):
    ingested = ingest(tmp_path, {"p1": paper("p1", ["Kept text.", " "], [("q1", ["Kept text."])])})
    assert ingested.counts["qrels_unknown_units"] == 0 and ingested.qrels.height == 1


def test_unknown_format_names_the_dataset_key():
    with pytest.raises(InputError, match=r"datasets.mini.format: unknown format 'qaspr'"):
        load_dataset("mini", {"format": "qaspr", "path": "x"})


def test_cacm_qrels_with_unpadded_ids_are_counted(shared_data):
    cacm = shared_data / "cacm"
    ingested = load_dataset("cacm", {
        "format": "trec", "collection": str(cacm / "cacm.tar.gz"), "collection_format": "html_tar",
        "topics": str(cacm / "topics.cacm.txt"), "topics_format": "cacm",
        "qrels": str(cacm / "qrels.cacm.txt"), "qrels_format": "trec",
    })
    # Anserini's CACM qrels name 55 documents below 1000 without zero padding (CACM-756 for CACM-0756).
    assert ingested.counts["qrels_unknown_units"] == 55 and ingested.qrels.height == 796


def test_corpus_only_formats_need_no_questions_but_others_do(tmp_path, shared_data):
    path = shared_data / "arxiv-metadata-sample" / "arxiv-metadata-oai-snapshot.first200.jsonl"
    corpus = load_dataset("arxiv", {"format": "arxiv_metadata", "path": str(path)})
    assert corpus.units.height > 0 and corpus.questions.is_empty()  # Study C writes its queries later
    with pytest.raises(InputError, match="no questions"):
        ingest(tmp_path, {"p1": paper("p1", ["Some text."], [])})
