"""Arms: RRF fusion, candidate cuts, reranking and the RUNS contract, checked against hand computations."""

import ir_measures
import polars as pl
import pytest

from workflow_scripts.core.contracts import RANKING, RUNS
from workflow_scripts.core.tables import conform, frame
from workflow_scripts.retrieval.arms import candidates, final_run, write_trec
from workflow_scripts.retrieval.evaluate import parse_measures, per_query

HYBRID = {"first_stage": "hybrid", "candidates": 3, "keep": 2, "rrf_k": 60, "fusion_depth": 3, "rerank": None}


def ranking(rows):
    return frame([dict(qid=q, unit_id=u, rank=r, score=s) for q, u, r, s in rows], RANKING)


DENSE = ranking([("q", "a", 1, 0.9), ("q", "b", 2, 0.8), ("q", "c", 3, 0.7), ("q", "d", 4, 0.6)])
BM25 = ranking([("q", "c", 1, 12.0), ("q", "e", 2, 11.0), ("q", "a", 3, 10.0), ("q", "b", 4, 9.0)])


def test_rrf_matches_hand_computation():
    pool = candidates(HYBRID, {"dense": DENSE, "bm25": BM25})
    # depth 3: dense a,b,c; bm25 c,e,a. a: 1/61+1/63, c: 1/63+1/61 (tie with a → unit_id), b: 1/62, e: 1/62.
    assert pool["unit_id"].to_list() == ["a", "c", "b"]
    assert pool["fused_score"][0] == pytest.approx(1 / 61 + 1 / 63)
    assert pool.filter(pl.col("unit_id") == "b")["bm25_rank"].to_list() == [None]
    assert pool["rank"].to_list() == [1, 2, 3]


def test_hybrid_run_keeps_every_stage_column():
    run = final_run(HYBRID, candidates(HYBRID, {"dense": DENSE, "bm25": BM25}), None)
    assert run.columns == list(RUNS.columns)
    assert run.select("unit_id", "dense_rank", "bm25_rank").rows() == [("a", 1, 3), ("c", 3, 1)]
    assert run["score"].to_list() == run["fused_score"].to_list()


def test_rerank_reorders_and_cuts():
    arm = {"first_stage": "dense", "candidates": 3, "keep": 2, "rerank": "ce"}
    scores = pl.DataFrame({"qid": ["q", "q", "q"], "unit_id": ["a", "b", "c"], "rerank_score": [0.1, 0.5, 0.9]})
    run = final_run(arm, candidates(arm, {"dense": DENSE}), scores)
    assert run.select("unit_id", "rank", "dense_rank").rows() == [("c", 1, 3), ("b", 2, 2)]
    assert run["score"].to_list() == [0.9, 0.5]


def test_missing_rerank_score_is_an_error():
    arm = {"first_stage": "dense", "candidates": 3, "keep": 2, "rerank": "ce"}
    scores = pl.DataFrame({"qid": ["q"], "unit_id": ["a"], "rerank_score": [0.1]})
    with pytest.raises(ValueError, match="2 candidate pairs have no rerank score"):
        final_run(arm, candidates(arm, {"dense": DENSE}), scores)


def test_trec_export(tmp_path):
    arm = {"first_stage": "bm25", "candidates": 2, "keep": 2, "rerank": None}
    run = final_run(arm, candidates(arm, {"bm25": BM25}), None)
    write_trec(run, tmp_path / "r.trec", "bm25")
    assert (tmp_path / "r.trec").read_text() == "q Q0 c 1 2 bm25\nq Q0 e 2 1 bm25\n"


def test_trec_eval_on_the_export_reproduces_the_metrics_despite_tied_scores(tmp_path):
    """Tied model scores ranked by unit_id ascending: trec_eval (pytrec_eval, the C code) re-sorts ties by docno
    descending, so on raw scores it evaluates another order; on the exported scores it agrees with evaluate.py."""
    qids = [f"q{i}" for i in range(6)]
    units = ["a", "b", "c", "d"]
    run = conform(pl.DataFrame({
        "qid": [q for q in qids for _ in units], "unit_id": units * len(qids), "rank": list(range(1, 5)) * len(qids),
        "score": [1.0, 1.0, 1.0, 0.5] * len(qids),
    }).with_columns(pl.lit(None).alias(name) for name in RUNS.columns if name not in ("qid", "unit_id", "rank", "score"))
      .select(list(RUNS.columns)), RUNS)
    qrels = pl.DataFrame({"qid": qids, "unit_id": ["a", "a", "b", "a", "c", "a"], "relevance": [1, 2, 1, 2, 1, 1]})
    measures = parse_measures(["nDCG@10", "RR@10", "AP", "P@1"])
    ours = per_query(run, qrels, measures).group_by("measure").agg(pl.col("value").mean()).sort("measure")
    qrel_rows = [ir_measures.Qrel(*row) for row in qrels.iter_rows()]

    def trec_eval(path):
        scores = ir_measures.pytrec_eval.calc_aggregate(measures, qrel_rows, ir_measures.read_trec_run(str(path)))
        return {str(measure): value for measure, value in scores.items()}

    write_trec(run, tmp_path / "run.trec", "tied")
    exported = trec_eval(tmp_path / "run.trec")
    assert {m: round(v, 4) for m, v in exported.items()} == {m: round(v, 4) for m, v in ours.iter_rows()}
    raw = "".join(f"{q} Q0 {u} {r} {s:.6f} raw\n" for q, u, r, s in run.select("qid", "unit_id", "rank", "score").iter_rows())
    (tmp_path / "raw.trec").write_text(raw)
    assert trec_eval(tmp_path / "raw.trec") != exported  # what the old export let trec_eval compute
