"""The cost ledger (cost/ledger.py and its job's reading, cost/jobs/cost_ledger.py), pricing (cost/pricing.py) and
policy costs (routing/policy_costs.py) on small hand-made tables with known answers."""

import json

import polars as pl
import pytest

from workflow_scripts.core.contracts import COST_LEDGER, FEATURES, GENERATIONS, RANKING, RERANK_SCORES, RUNS
from workflow_scripts.core.tables import conform, frame, read_table, write_table
from workflow_scripts.core.errors import InputError
from workflow_scripts.cost import ledger as cost_ledger
from workflow_scripts.cost import pricing
from workflow_scripts.jobs import costs as job_costs
from workflow_scripts.routing import policy_costs as route_costs

QIDS = ["q1", "q2", "q3", "q4"]
ARMS = {
    "keep": {"first_stage": "dense", "candidates": 2, "rerank": "ce", "keep": 1, "scope": "group"},
    "hybrid": {"first_stage": "hybrid", "candidates": 2, "rerank": "ce", "keep": 1, "scope": "group", "rrf_k": 60, "fusion_depth": 3},
}
PRICES = {"prompt_token": 1.0, "completion_token": 4.0, "retrieval_call": 50.0, "rerank_pair": 100.0}
STAGES = {"first_stage": {"bm25": "retrieve_bm25", "dense": "retrieve_dense"}, "rerank": "rerank", "arm": "run_arm",
          "features": "route_features", "answers": "generate_answers"}  # as the rules name them (PRICED_STAGES)


def bench(path, seconds):
    path.write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:{int(seconds):02d}\t100.0\n")
    return str(path)


def generations(path, latencies, prompt_tokens=100, completion_tokens=10):
    rows = [{"request_id": qid, "key": f"k{qid}", "status": "ok", "source": "generated", "constrained": False, "text": "x",
             "finish_reason": "stop",
             "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "latency_s": latency,
             "backend": "transformers", "model": "m", "device": "cpu", "evidence_in": 0, "evidence_kept": 0,
             "evidence_truncated": False, "token_basis": "tokenizer"} for qid, latency in latencies.items()]
    write_table(frame(rows, GENERATIONS), path, GENERATIONS)
    return str(path)


def ranking(path, rows):
    pl.DataFrame(rows, schema={"qid": pl.String, "unit_id": pl.String, "rank": pl.Int32, "score": pl.Float64}, orient="row").write_parquet(path)
    return str(path)


def ledger_of(sources, questions, dataset):
    """The ledger of declared sources, each read as the cost_ledger job reads it (tables through their contracts)."""
    return cost_ledger.ledger([job_costs.measured(source) for source in sources], questions, dataset)


@pytest.fixture
def study_a(tmp_path):
    """Keep (dense top 2 → rerank) and Hybrid (RRF of dense and BM25 top 3 → top 2 → rerank) on four questions.
    Dense ranks u1, u2, u3 for every question; BM25 ranks u3, u4, u1, so Hybrid's candidates are u1 and u3: one
    pair (u1) Keep already scored, one (u3) new."""
    dense = ranking(tmp_path / "dense.parquet", [(q, u, r, 1.0 / r) for q in QIDS for r, u in enumerate(["u1", "u2", "u3"], 1)])
    bm25 = ranking(tmp_path / "bm25.parquet", [(q, u, r, 10.0 / r) for q in QIDS for r, u in enumerate(["u3", "u4", "u1"], 1)])
    scores = pl.DataFrame({"qid": [q for q in QIDS for _ in range(3)], "unit_id": ["u1", "u2", "u3"] * 4, "rerank_score": [0.5] * 12})
    scores.write_parquet(tmp_path / "rerank.parquet")
    for arm in ARMS:
        pl.DataFrame({"qid": QIDS}).write_parquet(tmp_path / f"run_{arm}.parquet")
    pl.DataFrame({"qid": QIDS, "top1_cos": [0.1] * 4}).write_parquet(tmp_path / "features.parquet")
    sources = [
        {"stage": "retrieve_dense", "kind": "retrieval", "component": "group", "tables": [dense], "contracts": [RANKING],
         "benchmarks": [bench(tmp_path / "d.tsv", 8.0)]},
        {"stage": "retrieve_bm25", "kind": "retrieval", "component": "group", "tables": [bm25], "contracts": [RANKING],
         "benchmarks": [bench(tmp_path / "b.tsv", 4.0)]},
        {"stage": "rerank", "kind": "rerank", "component": "ce", "tables": [str(tmp_path / "rerank.parquet")],
         "contracts": [RERANK_SCORES], "benchmarks": [bench(tmp_path / "r.tsv", 24.0)]},
        *({"stage": "run_arm", "kind": "table", "component": arm, "tables": [str(tmp_path / f"run_{arm}.parquet")],
           "contracts": [RUNS], "benchmarks": [bench(tmp_path / f"a_{arm}.tsv", 2.0)]} for arm in ARMS),
        {"stage": "route_features", "kind": "table", "component": "keep_vs_hybrid", "tables": [str(tmp_path / "features.parquet")],
         "contracts": [FEATURES], "benchmarks": [bench(tmp_path / "f.tsv", 1.0)]},
        {"stage": "generate_answers", "kind": "generation", "component": "keep", "device": "ignored: rows say",
         "tables": [generations(tmp_path / "keep.parquet", {q: 1.0 for q in QIDS})], "contracts": [GENERATIONS],
         "benchmarks": [bench(tmp_path / "gk.tsv", 9.0)]},
        {"stage": "generate_answers", "kind": "generation", "component": "hybrid",
         "tables": [generations(tmp_path / "hybrid.parquet", {q: 3.0 for q in QIDS})], "contracts": [GENERATIONS],
         "benchmarks": [bench(tmp_path / "gh.tsv", 20.0)]},
    ]
    questions = pl.DataFrame({"qid": QIDS})
    return {"sources": sources, "questions": questions, "dense": dense, "bm25": bm25}


def test_benchmark_seconds_reads_the_mean_of_column_s_summed_over_a_stages_jobs(tmp_path):
    (tmp_path / "b.tsv").write_text("s\th:m:s\n2.0\t0:00:02\n4.0\t0:00:04\n")
    (tmp_path / "gather.tsv").write_text("s\th:m:s\n0.5\t0:00:00\n")
    assert job_costs.benchmark_seconds([tmp_path / "b.tsv"]) == 3.0
    assert job_costs.benchmark_seconds([tmp_path / "b.tsv", tmp_path / "b.tsv", tmp_path / "gather.tsv"]) == 6.5
    with pytest.raises(InputError, match="benchmark file .*missing.tsv does not exist"):
        job_costs.benchmark_seconds([tmp_path / "b.tsv", tmp_path / "missing.tsv"])


def test_ledger_has_a_measured_row_per_query_and_stage(study_a):
    table = conform(ledger_of(study_a["sources"], study_a["questions"], "demo"), COST_LEDGER)
    assert table.group_by("stage", "component").len()["len"].to_list() == [4] * 8
    dense = table.filter(pl.col("stage") == "retrieve_dense")
    assert dense["seconds"].to_list() == [2.0] * 4 and set(dense["basis"]) == {"job_even"} and dense["retrieval_calls"].sum() == 4
    rerank = table.filter(pl.col("stage") == "rerank")
    assert rerank["seconds"].to_list() == [6.0] * 4 and rerank["rerank_pairs"].to_list() == [3] * 4
    answers = table.filter((pl.col("stage") == "generate_answers") & (pl.col("component") == "hybrid"))
    assert answers["seconds"].to_list() == [3.0] * 4 and set(answers["basis"]) == {"item"}
    assert answers["job_seconds"].to_list() == [20.0] * 4 and answers["prompt_tokens"].to_list() == [100] * 4
    assert set(answers["device"]) == {"cpu"}
    # job_even shares add up to the job's measured seconds
    for (stage, component), rows in table.filter(pl.col("basis") == "job_even").group_by("stage", "component"):
        assert rows["seconds"].sum() == pytest.approx(rows["job_seconds"][0])


def test_ledger_refuses_rows_for_unknown_questions(study_a):
    with pytest.raises(InputError, match="not in the questions table"):
        ledger_of(study_a["sources"], pl.DataFrame({"qid": QIDS[:2]}), "demo")


def routed(triggered):
    rows = [{"qid": q, "router": router, "score": float(i), "triggered": fired, "metric_on": 1.0, "metric_off": 0.0,
             "delta": 1.0, "split": "heldout"} for router, fires in triggered.items() for i, (q, fired) in enumerate(zip(QIDS, fires))]
    return pl.DataFrame(rows)


def costs_for(study_a):
    table = pricing.priced(ledger_of(study_a["sources"], study_a["questions"], "demo"), PRICES)
    rankings = {"dense_group": read_table(study_a["dense"], RANKING), "bm25_group": read_table(study_a["bm25"], RANKING)}
    sets = pricing.candidate_sets(ARMS, ["keep", "hybrid"], rankings)
    return pricing.Costs(table, pl.Series(QIDS), sets, STAGES["rerank"])


def test_hybrid_trigger_reusing_keep_pays_bm25_new_pairs_and_fusion_only(study_a):
    plan = pricing.PairPlan("keep_vs_hybrid", {"base": "keep", "alternative": "hybrid"}, ARMS, reuse=True, stages=STAGES)
    reuse = route_costs.reuse_costs(plan, costs_for(study_a))
    by_mode = reuse.group_by("mode").agg(pl.col("seconds").sum(), pl.col("rerank_pairs").sum()).sort("mode")
    # reuse: bm25 1 s + 1 new pair × 2 s + fusion 0.5 s; recompute: bm25 1 + dense 2 + 2 pairs × 2 + fusion 0.5
    assert by_mode.rows() == [("recompute", 7.5, 2.0), ("reuse", 3.5, 1.0)]
    assert set(reuse.filter(pl.col("mode") == "reuse")["stage"]) == {"retrieve_bm25", "rerank", "run_arm"}


def test_policy_cost_splits_pre_decision_and_trigger_cost(study_a):
    plan = pricing.PairPlan("keep_vs_hybrid", {"base": "keep", "alternative": "hybrid"}, ARMS, reuse=True, stages=STAGES)
    families = {"ridge": frozenset({"base_arm"}), "never": frozenset()}
    table = route_costs.policy_costs(plan, costs_for(study_a), routed({"ridge": [True, True, False, False], "never": [False] * 4}), families)
    seconds = {(row["router"], row["component"]): row["seconds"] for row in table.iter_rows(named=True)}
    keep_retrieval = 2.0 + 2 * 2.0 + 0.5  # dense share, Keep's 2 candidate pairs, fusion share
    assert seconds[("never", "pre_decision")] == pytest.approx(keep_retrieval)
    assert seconds[("ridge", "pre_decision")] == pytest.approx(keep_retrieval + 0.25)  # + the feature job share
    assert seconds[("ridge", "base_answer")] == pytest.approx(0.5 * 1.0)
    assert seconds[("ridge", "trigger_retrieval")] == pytest.approx(0.5 * 3.5)
    assert seconds[("ridge", "trigger_generation")] == pytest.approx(0.5 * 3.0)
    assert seconds[("never", "trigger_generation")] == 0.0


def test_equal_usage_different_cost_across_trigger_families(tmp_path):
    """Study B: an uncertainty router pays the closed-book answer first; a query-only router does not."""
    arms = {"bm25": {"first_stage": "bm25", "candidates": 2, "keep": 2, "scope": "group"}}
    pl.DataFrame({"qid": QIDS}).write_parquet(tmp_path / "run.parquet")
    pl.DataFrame({"qid": QIDS}).write_parquet(tmp_path / "features.parquet")
    sources = [
        {"stage": "retrieve_bm25", "kind": "retrieval", "component": "group", "tables": [str(tmp_path / "run.parquet")],
         "contracts": [RANKING], "benchmarks": [bench(tmp_path / "b.tsv", 4.0)]},
        {"stage": "run_arm", "kind": "table", "component": "bm25", "tables": [str(tmp_path / "run.parquet")],
         "contracts": [RUNS], "benchmarks": [bench(tmp_path / "a.tsv", 0.0)]},
        {"stage": "route_features", "kind": "table", "component": "b", "tables": [str(tmp_path / "features.parquet")],
         "contracts": [FEATURES], "benchmarks": [bench(tmp_path / "f.tsv", 0.4)]},
        {"stage": "generate_answers", "kind": "generation", "component": "closed_book",
         "tables": [generations(tmp_path / "cb.parquet", {q: 2.0 for q in QIDS}, 50, 10)], "contracts": [GENERATIONS],
         "benchmarks": [bench(tmp_path / "g1.tsv", 9.0)]},
        {"stage": "generate_answers", "kind": "generation", "component": "bm25",
         "tables": [generations(tmp_path / "rag.parquet", {q: 5.0 for q in QIDS}, 400, 10)], "contracts": [GENERATIONS],
         "benchmarks": [bench(tmp_path / "g2.tsv", 9.0)]},
    ]
    table = pricing.priced(ledger_of(sources, pl.DataFrame({"qid": QIDS}), "d"), PRICES)
    plan = pricing.PairPlan("b", {"base": "closed_book", "alternative": "bm25"}, arms, reuse=True, stages=STAGES)
    families = {"entropy": frozenset({"uncertainty"}), "query": frozenset({"query_only"})}
    fires = [True, False, True, False]
    policies = route_costs.policy_costs(plan, pricing.Costs(table, pl.Series(QIDS), {}, STAGES["rerank"]), routed({"entropy": fires, "query": fires}), families)
    totals = policies.group_by("router").agg(pl.col("usage").first(), pl.col("seconds").sum(), pl.col("token_equivalents").sum()).sort("router")
    assert totals["usage"].to_list() == [0.5, 0.5]
    # entropy: closed-book answer always (2) + half × (retrieval 1 + answer 5) + features 0.1 = 5.1
    # query: features 0.1 + half × closed-book 2 + half × (1 + 5) = 4.1
    assert totals["seconds"].to_list() == pytest.approx([5.1, 4.1])
    assert totals["token_equivalents"][0] > totals["token_equivalents"][1]


def test_route_costs_name_the_fix_when_a_policy_was_not_answered(study_a):
    sources = [source for source in study_a["sources"] if source["component"] != "hybrid" or source["stage"] != "generate_answers"]
    table = pricing.priced(ledger_of(sources, study_a["questions"], "demo"), PRICES)
    costs = pricing.Costs(table, pl.Series(QIDS), {}, STAGES["rerank"])
    with pytest.raises(InputError, match="no measured 'generate_answers' cost for 'hybrid'.*generation.policies"):
        costs.total(pricing.PairPlan("p", {"base": "keep", "alternative": "hybrid"}, ARMS, True, STAGES).trigger_generation())


def test_cost_frontiers_reach_the_all_on_cost_at_full_usage(study_a):
    plan = pricing.PairPlan("keep_vs_hybrid", {"base": "keep", "alternative": "hybrid"}, ARMS, reuse=True, stages=STAGES)
    table = routed({"ridge": [True, True, False, False]})
    scored = pl.concat([table, table.with_columns(pl.lit("calibration").alias("split"), (pl.col("qid") + "c").alias("qid"))])
    frontiers = pl.DataFrame({"router": ["ridge"] * 2, "frontier": ["exact"] * 2, "budget": [0.5, 0.99], "usage": [0.5, 0.75],
                              "accuracy": [0.5, 0.75]})
    points = route_costs.cost_frontiers(plan, costs_for(study_a), scored, frontiers, {"ridge": frozenset({"base_arm"})},
                                 {"grid": [0.5, 0.99], "delta": 0.05}).sort("budget")
    off = 6.5 + 0.25 + 1.0
    on = 6.5 + 0.25 + 3.5 + 3.0
    # exact at 0.5 fires on 2 of 4, at 0.99 on 3 of 4 (⌊0.99 × 4⌋)
    assert points["seconds"].to_list() == pytest.approx([(2 * on + 2 * off) / 4, (3 * on + off) / 4])
    assert points["usage"].to_list() == [0.5, 0.75]


def test_router_families_come_from_the_artifact():
    from workflow_scripts.routing.routers import ARTIFACT_FORMAT

    def artifact(router, features):
        return json.dumps({"format": ARTIFACT_FORMAT, "router": router, "features": features}).encode()

    families = route_costs.router_families([artifact("ridge", ["top1_cos", "q_tokens"]), artifact("never", [])])
    assert families == {"ridge": frozenset({"base_arm", "query_only"}), "never": frozenset()}
    with pytest.raises(InputError, match="router 'odd' reads features \\['mystery'\\]"):
        route_costs.router_families([artifact("odd", ["mystery"])])


def test_cost_frontiers_refuse_a_stale_frontier_table(study_a):
    plan = pricing.PairPlan("keep_vs_hybrid", {"base": "keep", "alternative": "hybrid"}, ARMS, reuse=True, stages=STAGES)
    table = routed({"ridge": [True, True, False, False]})
    stale = pl.DataFrame({"router": ["ridge"], "frontier": ["exact"], "budget": [0.5], "usage": [0.25], "accuracy": [0.5]})
    with pytest.raises(InputError, match="frontiers.parquet does not match.*rerun route_frontiers"):
        route_costs.cost_frontiers(plan, costs_for(study_a), table.vstack(table.with_columns(pl.lit("calibration").alias("split"))),
                            stale, {"ridge": frozenset({"base_arm"})}, {"grid": [0.5], "delta": 0.05})


def test_pair_costs_from_files_reads_the_ledger_rankings_and_the_pairs_own_stage_through_their_contracts(study_a, tmp_path):
    """The pair's features job is priced from its table's `qid` (whatever feature columns it holds) and its
    benchmark file, beside the dataset ledger: the same rows as if the ledger had priced it."""
    features = study_a["sources"][5]
    dataset_sources = [source for source in study_a["sources"] if source is not features]
    write_table(ledger_of(dataset_sources, study_a["questions"], "demo"), tmp_path / "ledger.parquet", COST_LEDGER)
    settings = {"pair": {"base": "keep", "alternative": "hybrid"}, "arms": ARMS, "reuse": True, "prices": PRICES,
                "rankings": {"dense_group": study_a["dense"], "bm25_group": study_a["bm25"]},
                "pair_sources": [features], "stages": STAGES}
    _, costs = job_costs.pair_costs_from_files("keep_vs_hybrid", settings, str(tmp_path / "ledger.parquet"), pl.Series(QIDS))
    expected = costs_for(study_a)

    def rows(table):
        return conform(table.drop("token_equivalents"), COST_LEDGER).with_columns(table["token_equivalents"]).sort(
            "qid", "stage", "component")

    assert rows(costs.table).equals(rows(expected.table))
    assert {arm: pool.sort("qid", "unit_id").rows() for arm, pool in costs.candidate_sets.items()} == {
        arm: pool.sort("qid", "unit_id").rows() for arm, pool in expected.candidate_sets.items()}


def test_trigger_cost_is_what_firing_adds(study_a):
    costs = costs_for(study_a)
    arm_pair = pricing.PairPlan("keep_vs_hybrid", {"base": "keep", "alternative": "hybrid"}, ARMS, reuse=True, stages=STAGES)
    # Study A: Hybrid's retrieval beyond Keep's (bm25 1 s + 1 new pair × 2 s + fusion 0.5 s); answers cancel out
    assert pricing.trigger_cost(arm_pair, costs, frozenset({"base_arm"}))["seconds"].to_list() == [3.5] * 4
    # Study B: the fixture's "keep" answers stand in for the closed-book ones (base closed_book is no arm)
    table = costs.table.with_columns(
        pl.when((pl.col("stage") == "generate_answers") & (pl.col("component") == "keep"))
        .then(pl.lit("closed_book")).otherwise(pl.col("component")).alias("component"))
    closed_book = pricing.Costs(table, pl.Series(QIDS), costs.candidate_sets, STAGES["rerank"])
    retrieval_pair = pricing.PairPlan("retrieve", {"base": "closed_book", "alternative": "hybrid"}, ARMS, reuse=True, stages=STAGES)
    added = pricing.trigger_cost(retrieval_pair, closed_book, frozenset({"query_only"}))["seconds"].to_list()
    assert added == [pytest.approx(7.5 + 3.0 - 1.0)] * 4  # Hybrid's whole retrieval + its answer − the closed-book one
    uncertain = pricing.trigger_cost(retrieval_pair, closed_book, frozenset({"uncertainty"}))["seconds"].to_list()
    assert uncertain == [pytest.approx(7.5 + 3.0)] * 4  # the closed-book answer is paid before deciding anyway


def test_route_fit_prices_each_router_by_its_measured_trigger_cost(study_a, tmp_path):
    from workflow_scripts.core.contracts import SPLITS
    from workflow_scripts.routing.routers import dev_labels, fit_routers, read_artifact

    table = ledger_of(study_a["sources"], study_a["questions"], "demo")
    table.write_parquet(tmp_path / "ledger.parquet")
    write_table(pl.DataFrame({"qid": QIDS, "group_id": ["p1", "p1", "p2", "p3"], "split": "dev"}),
                tmp_path / "splits.parquet", SPLITS)
    pl.DataFrame({"qid": QIDS, "metric_off": 0.0, "metric_on": [1.0, 0.0, 1.0, 0.0], "delta": [1.0, 0.0, 1.0, 0.0],
                  "outcome": ["rescue", "tie", "rescue", "tie"]}).write_parquet(tmp_path / "labels.parquet")
    routers = {"ridge": {"kind": "ridge", "alpha": 20}, "always": {"kind": "always"}}
    settings = {"n_splits": 2, "seed": 1, "cost_per_trigger": 0.02, "measured_cost": {"unit": "seconds", "per_unit": 0.1}}
    measured = {"pair": {"base": "keep", "alternative": "hybrid"}, "arms": ARMS, "reuse": True, "prices": PRICES,
                "rankings": {"dense_group": study_a["dense"], "bm25_group": study_a["bm25"]}, "stages": STAGES}
    splits, labels = pl.read_parquet(tmp_path / "splits.parquet"), pl.read_parquet(tmp_path / "labels.parquet")
    priced = job_costs.pair_costs_from_files("keep_vs_hybrid", measured, str(tmp_path / "ledger.parquet"),
                                    dev_labels(labels, splits)["qid"])
    _, thresholds, artifacts = fit_routers(labels, pl.read_parquet(study_a["sources"][5]["tables"][0]), splits,
                                           routers, settings, "keep_vs_hybrid", priced)
    for name in routers:
        metadata = read_artifact(artifacts[name])["metadata"]
        assert metadata["cost_per_trigger"] == pytest.approx(0.1 * 3.5), name
        assert metadata["cost_basis"] == "measured: 3.5 seconds per trigger on dev"
    assert thresholds["cost_per_trigger"].to_list() == [pytest.approx(0.35)] * 2


USD = {"input_per_mtok": 2.0, "output_per_mtok": 10.0, "currency": "USD"}
ANSWER_MONEY = (100 * 2.0 + 10 * 10.0) / 1e6  # generations() writes 100 prompt and 10 completion tokens per answer


def priced_sources(study_a, keep=USD, hybrid=USD):
    prices = {"keep": keep, "hybrid": hybrid}
    return [{**source, "prices": prices[source["component"]]} if source["stage"] == "generate_answers" else source
            for source in study_a["sources"]]


def test_money_is_the_tokens_at_the_model_prices(study_a):
    table = conform(ledger_of(priced_sources(study_a), study_a["questions"], "demo"), COST_LEDGER)
    answers = table.filter(pl.col("stage") == "generate_answers")
    assert answers["money"].to_list() == pytest.approx([ANSWER_MONEY] * 8) and set(answers["currency"]) == {"USD"}
    others = table.filter(pl.col("stage") != "generate_answers")
    assert set(others["money"]) == {0.0} and others["currency"].null_count() == others.height  # no LLM, no money
    study_a["sources"] = priced_sources(study_a)
    plan = pricing.PairPlan("keep_vs_hybrid", {"base": "keep", "alternative": "hybrid"}, ARMS, reuse=True, stages=STAGES)
    policies = route_costs.policy_costs(plan, costs_for(study_a), routed({"ridge": [True, True, False, False]}),
                                        {"ridge": frozenset({"base_arm"})})
    money = {row["component"]: row["money"] for row in policies.iter_rows(named=True)}
    assert money == pytest.approx({"pre_decision": 0.0, "base_answer": 0.5 * ANSWER_MONEY, "trigger_retrieval": 0.0,
                                   "trigger_generation": 0.5 * ANSWER_MONEY})
    assert set(policies["currency"]) == {"USD"}
    totals = cost_ledger.stage_totals(table).filter(pl.col("stage") == "generate_answers")
    assert totals["money"].to_list() == pytest.approx([4 * ANSWER_MONEY] * 2) and set(totals["currency"]) == {"USD"}


def test_money_of_an_unpriced_model_is_unknown_not_zero(study_a):
    study_a["sources"] = priced_sources(study_a, hybrid=None)
    plan = pricing.PairPlan("keep_vs_hybrid", {"base": "keep", "alternative": "hybrid"}, ARMS, reuse=True, stages=STAGES)
    costs = costs_for(study_a)
    policies = route_costs.policy_costs(plan, costs, routed({"ridge": [True, True, False, False]}), {"ridge": frozenset({"base_arm"})})
    money = {row["component"]: row["money"] for row in policies.iter_rows(named=True)}
    assert money["trigger_generation"] is None and money["base_answer"] == pytest.approx(0.5 * ANSWER_MONEY)
    table = routed({"ridge": [True, True, False, False]})
    scored = pl.concat([table, table.with_columns(pl.lit("calibration").alias("split"), (pl.col("qid") + "c").alias("qid"))])
    frontiers = pl.DataFrame({"router": ["ridge"], "frontier": ["exact"], "budget": [0.5], "usage": [0.5], "accuracy": [0.5]})
    points = route_costs.cost_frontiers(plan, costs, scored, frontiers, {"ridge": frozenset({"base_arm"})},
                                        {"grid": [0.5], "delta": 0.05})
    assert points["money"].to_list() == [None] and points["seconds"].null_count() == 0
    study_a["sources"] = priced_sources(study_a, hybrid={**USD, "currency": "EUR"})
    with pytest.raises(InputError, match=r"prices LLM calls in \['EUR', 'USD'\]; price every model block in one currency"):
        costs_for(study_a)


def test_a_judges_calls_and_tokens_are_summed_over_both_judges(tmp_path, study_a):
    from workflow_scripts.core.contracts import JUDGMENTS_GROUNDED, JUDGMENTS_QUALITY
    from workflow_scripts.core.tables import frame

    tables = []
    for contract, tokens in ((JUDGMENTS_GROUNDED, 100), (JUDGMENTS_QUALITY, None)):
        rows = [{"item_id": q, "status": "ok", "attempts": 2, "obtained": "reasked", "judge_model": "j",
                 "prompt_tokens": tokens, "completion_tokens": 5} for q in QIDS]
        path = tmp_path / f"{contract.name}.parquet"
        frame(rows, contract).write_parquet(path)
        tables.append(str(path))
    source = {"stage": "judge_answers", "kind": "judge", "component": "keep", "tables": tables, "prices": USD,
              "contracts": [JUDGMENTS_GROUNDED, JUDGMENTS_QUALITY], "benchmarks": [bench(tmp_path / "j.tsv", 8.0)]}
    rows = cost_ledger.stage_rows(job_costs.measured(source), study_a["questions"])
    assert rows["llm_calls"].to_list() == [4] * 4 and rows["completion_tokens"].to_list() == [10] * 4
    # the quality judge's server gave no prompt-token counts: the money of these calls is unknown
    assert rows["prompt_tokens"].to_list() == [None] * 4 and rows["money"].to_list() == [None] * 4


def test_a_new_stage_enters_the_ledger_by_declaring_a_kind(study_a, tmp_path):
    """The ledger prices a source by its declared kind, whatever its stage is called: a new per-query table stage
    and a second generator are priced like run_arm and generate_answers, with no edit to cost/."""
    new = [
        {"stage": "expand_queries", "kind": "table", "component": "t5", "tables": [study_a["sources"][3]["tables"][0]],
         "contracts": [RUNS], "benchmarks": [bench(tmp_path / "x.tsv", 6.0)]},
        {"stage": "answer_again", "kind": "generation", "component": "keep", "prices": USD,
         "tables": study_a["sources"][6]["tables"], "contracts": [GENERATIONS], "benchmarks": [bench(tmp_path / "y.tsv", 1.0)]},
    ]
    table = ledger_of([*study_a["sources"], *new], study_a["questions"], "d")
    table_rows = table.filter(pl.col("stage") == "expand_queries")
    assert table_rows["seconds"].to_list() == [1.5] * 4 and set(table_rows["basis"]) == {"job_even"}
    assert table_rows["money"].to_list() == [0.0] * 4  # not an LLM kind
    answers = table.filter(pl.col("stage") == "answer_again")
    assert answers["seconds"].to_list() == [1.0] * 4 and answers["llm_calls"].to_list() == [1] * 4
    assert answers["money"].is_not_null().all() and set(answers["currency"]) == {"USD"}
    with pytest.raises(InputError, match=r"source 'expand_queries' / 't5' declares kind 'fusion'; known kinds"):
        ledger_of([{**new[0], "kind": "fusion"}], study_a["questions"], "d")


def test_a_multistep_policy_costs_its_steps_searches_sequences_and_tokens(tmp_path, study_a):
    """Retrieval calls = the steps a question took, LLM calls = the sequences generated, tokens summed over its
    steps; the job's seconds split evenly over all steps; money at the generator's prices."""
    from workflow_scripts.core.contracts import TRAJECTORIES
    from workflow_scripts.core.tables import frame

    steps = {QIDS[0]: 3, QIDS[1]: 1, QIDS[2]: 2, QIDS[3]: 2}
    rows = [{"qid": qid, "group_id": "g", "step": step, "calls": step, "query": "q", "unit_ids": [], "scores": [],
             "new_units": 0, "lookahead": None, "lookahead_min_prob": None,
             "added_units": 0, "evidence_ids": [], "thought": "", "answer": "a", "answer_status": "ok",
             "answer_entropy": None, "answer_min_prob": None, "sequences": 2, "prompt_tokens": 100,
             "completion_tokens": 10, "seconds": 0.5, "stop": "cap" if step == count else None}
            for qid, count in steps.items() for step in range(1, count + 1)]
    path = tmp_path / "trajectories.parquet"
    frame(rows, TRAJECTORIES).write_parquet(path)
    source = {"stage": "multistep_trajectories", "kind": "multistep", "component": "ircot", "tables": [str(path)],
              "prices": USD, "contracts": [TRAJECTORIES], "benchmarks": [bench(tmp_path / "m.tsv", 16.0)]}
    table = cost_ledger.stage_rows(job_costs.measured(source), study_a["questions"]).sort("qid")
    assert table["retrieval_calls"].to_list() == [steps[qid] for qid in sorted(steps)]
    assert table["llm_calls"].to_list() == [2 * steps[qid] for qid in sorted(steps)]
    assert table["seconds"].to_list() == [2.0 * steps[qid] for qid in sorted(steps)]  # 16 s over 8 steps
    assert table["prompt_tokens"].to_list() == [100 * steps[qid] for qid in sorted(steps)]
    assert table["money"].is_not_null().all() and set(table["basis"]) == {"job_even"}
