"""Evaluation: our per-query wrapper agrees with ir-measures on trec_eval -c semantics, and keeps our order."""

import ir_measures
import polars as pl
import pytest

from workflow_scripts.core.contracts import QRELS, RUNS, SPLITS
from workflow_scripts.core.tables import frame
from workflow_scripts.core.errors import InputError
from workflow_scripts.retrieval.evaluate import level_warnings, parse_measures, per_query, summarize, summary_table

QRELS_TABLE = frame(
    [dict(qid="q1", unit_id="a", relevance=2), dict(qid="q1", unit_id="b", relevance=1),
     dict(qid="q2", unit_id="c", relevance=1), dict(qid="q3", unit_id="d", relevance=0)],
    QRELS,
)


def run(rows):
    return frame([dict(qid=q, unit_id=u, rank=r, score=s) for q, u, r, s in rows], RUNS)


def test_values_match_hand_computation_and_unretrieved_queries_score_zero():
    # q1: b at rank 1, a at rank 2 (graded: a=2, b=1). q2 has no ranking at all. q3 has no relevant unit.
    metrics = per_query(run([("q1", "b", 1, 1.0), ("q1", "a", 2, 1.0), ("q3", "d", 1, 1.0)]), QRELS_TABLE,
                        parse_measures(["Success@1", "RR@10", "nDCG@10"]))
    value = {(q, m): v for q, m, v in metrics.rows()}
    assert set(q for q, _ in value) == {"q1", "q2"}
    assert value[("q1", "Success@1")] == 1.0 and value[("q1", "RR@10")] == 1.0
    # trec_eval's nDCG uses linear gains: DCG = 1/log2(2) + 2/log2(3), ideal = 2/log2(2) + 1/log2(3).
    log2_3 = 1.5849625007211563
    assert value[("q1", "nDCG@10")] == pytest.approx((1 + 2 / log2_3) / (2 + 1 / log2_3))
    assert value[("q2", "RR@10")] == 0.0


def test_tied_scores_keep_our_rank_order():
    metrics = per_query(run([("q1", "b", 1, 0.5), ("q1", "a", 2, 0.5)]), QRELS_TABLE, parse_measures(["P@1"]))
    assert metrics.filter(pl.col("qid") == "q1")["value"].to_list() == [1.0]
    reference = ir_measures.calc_aggregate([ir_measures.parse_measure("P@1")],
                                           [ir_measures.Qrel("q1", "b", 1)], [ir_measures.ScoredDoc("q1", "b", 1.0)])
    assert list(reference.values()) == [1.0]


def test_summary_per_split_and_overall():
    metrics = pl.DataFrame({"qid": ["q1", "q2"], "measure": ["RR@10", "RR@10"], "value": [1.0, 0.0]})
    splits = frame([dict(qid="q1", group_id="g1", split="dev"), dict(qid="q2", group_id="g2", split="heldout")], SPLITS)
    summary = summarize(metrics, splits, "keep")
    rows = {(s, m): (mean, n) for _, s, m, mean, n in summary.rows()}
    assert rows[("all", "RR@10")] == (0.5, 2) and rows[("dev", "RR@10")] == (1.0, 1)


def test_unknown_measure_names_the_key():
    with pytest.raises(InputError, match="evaluation.measures: cannot parse 'Hits@10'"):
        parse_measures(["Hits@10"])


def test_relevance_level_follows_trec_eval_l():
    """AP(rel=2) is trec_eval's `-l 2` map: only grade >= 2 counts as relevant (q1: a at rank 2 → AP 1/2)."""
    metrics = per_query(run([("q1", "b", 1, 1.0), ("q1", "a", 2, 1.0)]), QRELS_TABLE, parse_measures(["AP", "AP(rel=2)"]))
    value = {(q, m): v for q, m, v in metrics.rows()}
    assert value[("q1", "AP")] == 1.0 and value[("q1", "AP(rel=2)")] == 0.5


def test_graded_measure_on_binary_qrels_warns_naming_the_measure():
    binary = QRELS_TABLE.with_columns(pl.col("relevance").clip(upper_bound=1))
    measures = parse_measures(["AP(rel=2)", "nDCG@10", "R(rel=2)@100", "AP"])
    assert [message.split(" counts")[0] for message in level_warnings(measures, binary)] == [
        "evaluation.measures: AP(rel=2)", "evaluation.measures: R(rel=2)@100"]
    assert "highest grade is 1 (binary qrels): every value is 0" in level_warnings(measures, binary)[0]
    assert level_warnings(measures, QRELS_TABLE) == []


def test_summary_table_keeps_split_rows_only_when_splits_matter():
    metrics = pl.DataFrame({"qid": ["q1", "q2"], "measure": ["RR@10", "RR@10"], "value": [1.0, 0.0]})
    splits = frame([{"qid": "q1", "group_id": "g1", "split": "dev"}, {"qid": "q2", "group_id": "g2", "split": "heldout"}],
                   SPLITS)
    summary = summarize(metrics, splits, "bm25")
    assert summary_table([summary])["split"].to_list() == ["all", "dev", "heldout"]
    assert summary_table([summary], by_split=False).rows() == [("bm25", "all", 0.5, 2)]


def test_summary_means_do_not_depend_on_the_order_of_the_rows():
    """A float sum depends on its order; the summary sorts each group's values first, so however the rows (or a
    parallel group_by's partitions) arrive, the means are the same to the last bit."""
    import random

    rng = random.Random(7)
    qids = [f"q{i}" for i in range(500)]
    metrics = pl.DataFrame({"qid": qids, "measure": ["nDCG@10"] * 500, "value": [rng.random() / 3 for _ in qids]})
    splits = pl.DataFrame({"qid": qids, "split": [("dev", "heldout")[i % 2] for i in range(500)]})
    means = {tuple(summarize(metrics.sample(fraction=1.0, shuffle=True, seed=seed), splits, "arm")
                   .sort("split")["mean"]) for seed in range(6)}
    assert len(means) == 1


def test_each_arm_is_paired_with_the_first_on_the_queries_both_score():
    """compare_arms: per measure and pair, arm − baseline over the shared judged queries, bootstrapped over the splits'
    groups; a measure only one arm has is skipped, and one arm alone gives an empty table with the contract's
    columns."""
    from workflow_scripts.core.contracts import ARM_COMPARISONS
    from workflow_scripts.retrieval.evaluate import arm_comparisons

    qids = [f"q{i}" for i in range(6)]
    first = pl.DataFrame({"qid": qids, "measure": ["nDCG@5"] * 6, "value": [0.0, 0.5, 0.2, 0.0, 1.0, 0.3]})
    better = first.with_columns(pl.col("value") + 0.25)
    extra = pl.DataFrame({"qid": qids[:1], "measure": ["R@5"], "value": [1.0]})
    splits = pl.DataFrame({"qid": qids, "group_id": ["g1", "g1", "g2", "g2", "g3", "g3"], "split": ["dev"] * 6})
    bootstrap = {"resamples": 200, "method": "percentile", "confidence": 0.95}
    table = arm_comparisons({"bm25": first, "hybrid": pl.concat([better, extra])}, [("hybrid", "bm25")], splits,
                            bootstrap, seed=1)
    assert table.columns == list(ARM_COMPARISONS.columns)
    (row,) = table.iter_rows(named=True)
    assert (row["measure"], row["a"], row["b"], row["n"], row["n_groups"]) == ("nDCG@5", "hybrid", "bm25", 6, 3)
    assert row["estimate"] == pytest.approx(0.25) and row["low"] == pytest.approx(0.25) and row["win"] == 1.0
    assert row["p_floor"] == 0.25  # three groups: an exact sign-flip test cannot go lower
    assert arm_comparisons({"bm25": first}, [], splits, bootstrap, seed=1).columns == list(ARM_COMPARISONS.columns)


def test_a_reranking_arm_is_compared_with_its_own_first_stage_and_any_other_arm_with_the_first():
    """The demo's arms: keep reranks dense, hybrid reranks RRF; an arm reranking a first stage no arm ranks alone,
    or in another scope, falls back to the first arm."""
    from workflow_scripts.retrieval.arms import comparison_baselines

    arms = {"bm25": {"first_stage": "bm25", "scope": "group"}, "dense": {"first_stage": "dense", "scope": "group"},
            "rrf": {"first_stage": "hybrid", "scope": "group"},
            "keep": {"first_stage": "dense", "rerank": "ce", "scope": "group"},
            "hybrid": {"first_stage": "hybrid", "rerank": "ce", "scope": "group"},
            "global_keep": {"first_stage": "dense", "rerank": "ce", "scope": "global"}}
    assert comparison_baselines(arms) == [("dense", "bm25"), ("rrf", "bm25"), ("keep", "dense"), ("hybrid", "rrf"),
                                          ("global_keep", "bm25")]
