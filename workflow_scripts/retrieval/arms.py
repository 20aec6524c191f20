"""Retrieval arms: first-stage rankings → (fusion) → candidates → (rerank) → the arm's final top-K run.

In:  first-stage RANKING tables (dense and/or BM25, one per scope, computed once and shared by every arm that
     needs them; an imported TREC run, one per retrieval.runs entry, retrieval/runs.py), optional rerank scores
     (qid, unit_id, rerank_score), and the arm's config entry {first_stage: bm25|dense|hybrid|run, candidates: N,
     rerank: <reranker name>|null, keep: K, rrf_k, fusion_depth, fuse, run}.
Out: a RUNS table (qid, rank, unit_id, score and every per-stage column routers need) and its TREC run file.

Hybrid = reciprocal rank fusion (`fusion.rrf`, k = `rrf_k`) of its `fuse` rankings (BM25 and dense unless set;
`run` is the arm's imported run), each cut at `fusion_depth`.
Every ordering breaks ties by unit_id ascending, so identical inputs give identical runs. Plain functions; the rule's
job is retrieval/jobs/run_arm.py.
"""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.core.contracts import RUNS
from workflow_scripts.core.tables import conform
from workflow_scripts.core.vocabulary import ranking_name
from workflow_scripts.retrieval.fusion import rrf

STAGE_COLUMNS = {"dense": ("dense_score", "dense_rank"), "bm25": ("bm25_score", "bm25_rank"),
                 "run": ("run_score", "run_rank")}
DEFAULT_FUSION = ("bm25", "dense")


def first_stages(arm: Mapping[str, Any]) -> tuple[str, ...]:
    """The first-stage methods an arm reads."""
    return tuple(arm.get("fuse") or DEFAULT_FUSION) if arm["first_stage"] == "hybrid" else (arm["first_stage"],)


def stage_scope(arm: Mapping[str, Any], method: str) -> str:
    """What a shared first-stage ranking is computed over: the arm's scope, or for an imported run the
    retrieval.runs entry it names (with the method, its vocabulary.ranking_name)."""
    return arm["run"] if method == "run" else arm["scope"]


def first_stage_depth(arm: Mapping[str, Any]) -> int:
    """How deep the arm reads each first-stage ranking."""
    return arm["fusion_depth"] if arm["first_stage"] == "hybrid" else arm["candidates"]


def comparison_baselines(arms: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(arm, the arm it is compared with) for every arm but the first: a reranking arm against the first arm (config
    order) that ranks its first stage in the same scope without a reranker, so the difference is the reranker's;
    any other arm against the config's first arm."""
    names = list(arms)

    def own_first_stage(name: str) -> str | None:
        arm = arms[name]
        return next((other for other in names if other != name and not arms[other].get("rerank")
                     and first_stages(arms[other]) == first_stages(arm) and arms[other].get("run") == arm.get("run")
                     and arms[other].get("scope") == arm.get("scope")), None) if arm.get("rerank") else None

    return [(name, own_first_stage(name) or names[0]) for name in names[1:]]


def rank_by(table: pl.DataFrame, score: str) -> pl.DataFrame:
    """Order rows per query by `score` descending, unit_id ascending; add a 1-based `rank`."""
    return table.sort(["qid", score, "unit_id"], descending=[False, True, False]).with_columns(
        pl.int_range(1, pl.len() + 1, dtype=pl.Int32).over("qid").alias("rank")
    )


def stage_columns(ranking: pl.DataFrame, method: str, depth: int) -> pl.DataFrame:
    """A first-stage ranking cut at `depth`, its columns renamed to <method>_score / <method>_rank."""
    score, rank = STAGE_COLUMNS[method]
    return ranking.filter(pl.col("rank") <= depth).select(
        "qid", "unit_id", pl.col("score").alias(score), pl.col("rank").alias(rank)
    )


def candidates(arm: Mapping[str, Any], rankings: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """The arm's top-`candidates` units per query with every first-stage column (before any rerank)."""
    depth = first_stage_depth(arm)
    parts = [stage_columns(rankings[method], method, depth) for method in first_stages(arm)]
    if arm["first_stage"] == "hybrid":
        merged = parts[0]
        for part in parts[1:]:
            merged = merged.join(part, on=["qid", "unit_id"], how="full", coalesce=True)
        lists = [part.select("qid", "unit_id", pl.col(STAGE_COLUMNS[method][1]).alias("rank"))
                 for method, part in zip(first_stages(arm), parts)]
        fused = rrf(lists, arm["rrf_k"])
        table = rank_by(merged.join(fused, on=["qid", "unit_id"], how="left"), "fused_score")
    else:
        _, rank = STAGE_COLUMNS[arm["first_stage"]]
        table = parts[0].with_columns(pl.col(rank).alias("rank"))
    return table.filter(pl.col("rank") <= arm["candidates"])


def candidates_from(arm: Mapping[str, Any], rankings: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """`candidates` from the shared first-stage rankings keyed by `vocabulary.ranking_name` (as a rerank or cost
    job receives them)."""
    return candidates(arm, {method: rankings[ranking_name(method, stage_scope(arm, method))]
                            for method in first_stages(arm)})


def final_run(arm: Mapping[str, Any], pool: pl.DataFrame, rerank_scores: pl.DataFrame | None) -> pl.DataFrame:
    """Rerank the candidate pool if the arm asks for it, keep the top `keep`, fill the RUNS contract."""
    if arm.get("rerank"):
        pool = pool.join(rerank_scores, on=["qid", "unit_id"], how="left")
        missing = pool.filter(pl.col("rerank_score").is_null()).height
        if missing:
            raise ValueError(f"{missing} candidate pairs have no rerank score (the rerank stage is stale)")
        pool = rank_by(pool.drop("rank"), "rerank_score").with_columns(pl.col("rerank_score").alias("score"))
    else:
        order = "fused_score" if arm["first_stage"] == "hybrid" else STAGE_COLUMNS[arm["first_stage"]][0]
        pool = pool.with_columns(pl.col(order).alias("score"))
    pool = pool.filter(pl.col("rank") <= arm["keep"])
    missing_columns = [name for name in RUNS.columns if name not in pool.columns]
    pool = pool.with_columns(pl.lit(None).alias(name) for name in missing_columns)
    return conform(pool.select(list(RUNS.columns)).sort(["qid", "rank"]), RUNS)


def write_trec(run: pl.DataFrame, path: str | Path, tag: str) -> None:
    """Write a run in TREC format (qid Q0 docid rank score tag), atomically, with a score column that encodes the
    evaluated order: (rows of the query) − rank + 1, distinct and decreasing with rank.

    trec_eval ignores the rank column and re-sorts by score (ties by docno, descending), so the model's scores —
    tied, or equal once printed — would let it evaluate another order than `metrics/` did; with these scores
    `trec_eval` on the file reproduces `metrics/summary.*`. The model's scores stay in the Parquet run."""
    ordered = run.sort(["qid", "rank"]).with_columns((pl.len().over("qid") - pl.col("rank") + 1).alias("order_score"))
    rows = ordered.select("qid", "unit_id", "rank", "order_score").iter_rows()
    write_text_atomic("".join(f"{q} Q0 {u} {r} {s} {tag}\n" for q, u, r, s in rows), path)
