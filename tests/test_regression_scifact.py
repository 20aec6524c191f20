"""Anserini-style BM25 regressions: our Lucene index and search must reproduce Anserini's published numbers.

Each YAML in tests/regressions/ pins a dataset (paths under ../shared/data), the index and search settings, and
the published metric values; the index is built once per regression (module-scoped) and the numbers are compared
to the YAML's `decimals`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ir_measures
import polars as pl
import pytest
import yaml

from workflow_scripts.ingest.adapters import Ingested
from workflow_scripts.ingest.adapters.registry import adapter_for
from workflow_scripts.retrieval import bm25

pytestmark = [pytest.mark.slow, pytest.mark.regression, pytest.mark.needs_data]

REGRESSIONS = Path(__file__).parent / "regressions"
FILE_KEYS = ("corpus", "queries", "qrels", "collection", "topics")


def load_regression(name: str) -> dict[str, Any]:
    return yaml.safe_load((REGRESSIONS / f"{name}.yaml").read_text(encoding="utf-8"))


def ingest(spec: dict[str, Any], shared_data: Path) -> Ingested:
    spec = {key: shared_data / value if key in FILE_KEYS else value for key, value in spec.items()}
    loader, _ = adapter_for("regression", spec["format"])
    return loader(spec, "regression")


@pytest.fixture(scope="module", params=["scifact_bm25_flat", "cacm_bm25"])
def regression(request: pytest.FixtureRequest, shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
    config = load_regression(request.param)
    ingested = ingest(config["dataset"], shared_data)
    index_dir = tmp_path_factory.mktemp(config["name"]) / "index"
    bm25.build_index(ingested.units, index_dir, config["index"]["threads"])
    settings = config["search"]
    ranking, unranked = bm25.search(
        index_dir,
        ingested.questions,
        k=settings["k"],
        scope=settings["scope"],
        k1=settings["k1"],
        b=settings["b"],
        threads=settings["threads"],
        remove_query=settings["remove_query"],
    )
    return config, ingested, index_dir, ranking, unranked


def evaluate(ranking: pl.DataFrame, qrels: pl.DataFrame, measures: list[str]) -> dict[str, float]:
    parsed = [ir_measures.parse_measure(name) for name in measures]
    judged = [ir_measures.Qrel(*row) for row in qrels.select("qid", "unit_id", "relevance").iter_rows()]
    run = [
        ir_measures.ScoredDoc(qid, unit, float(-rank))
        for qid, unit, rank in ranking.select("qid", "unit_id", "rank").iter_rows()
    ]
    values = ir_measures.calc_aggregate(parsed, judged, run)
    return {name: values[measure] for name, measure in zip(measures, parsed)}


def test_index_matches_anserini_stats(regression) -> None:
    config, ingested, index_dir, _, _ = regression
    from pyserini.index.lucene import LuceneIndexReader

    stats = LuceneIndexReader(str(index_dir)).stats()
    assert stats["documents"] == config["index"]["documents"] == ingested.units.height
    if "total_terms" in config["index"]:
        assert stats["total_terms"] == config["index"]["total_terms"]


def test_every_query_is_ranked_to_depth(regression) -> None:
    config, ingested, _, ranking, unranked = regression
    assert unranked == []
    assert set(ranking["qid"].unique()) == set(ingested.questions["qid"])
    assert ranking["rank"].max() <= config["search"]["k"]


def test_metrics_match_published(regression) -> None:
    config, ingested, _, ranking, _ = regression
    published = config["evaluation"]["measures"]
    decimals = config["evaluation"]["decimals"]
    ours = evaluate(ranking, ingested.qrels, list(published))
    assert {name: round(value, decimals) for name, value in ours.items()} == published, ours


@pytest.mark.parametrize("regression", ["cacm_bm25"], indirect=True)
def test_top_ranks_equal_anserini_sample_run(regression, shared_data: Path) -> None:
    config, _, _, ranking, _ = regression
    pinned = config["anserini_run"]
    anserini = pl.read_csv(
        shared_data / pinned["path"],
        separator=" ",
        has_header=False,
        new_columns=["qid", "q0", "unit_id", "rank", "score", "tag"],
        schema_overrides={"qid": pl.String, "rank": pl.Int32},
    )
    ours = ranking.filter(pl.col("rank") <= pinned["depth"])
    assert (
        ours.select("qid", "rank", "unit_id")
        .sort("qid", "rank")
        .equals(anserini.select("qid", "rank", "unit_id").sort("qid", "rank"))
    )
    paired = anserini.join(ours, on=["qid", "rank"], suffix="_ours")
    assert (paired["score"] - paired["score_ours"]).abs().max() <= pinned["score_tolerance"]
