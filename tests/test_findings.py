"""Findings from small synthetic tables shaped like the stages' outputs: a CI and a p read together, routers against
the fixed policies, a judge gated by its validation, failed requests counted, and a landing page of about a dozen
lines however many pairs a run has (no workflow run)."""

import polars as pl

from workflow_scripts.report import findings

KINDS = {"ridge": "ridge", "random": "random", "gbm": "bur_gbm", "always": "always", "never": "never"}


def paired(**row):
    return {"estimate": 0.0, "low": -0.1, "high": 0.1, "p_permutation": 1.0, "confidence": 0.95, "n": 20,
            "n_groups": 20, "p_floor": 0.001} | row


def utility_table(gains=1, harms=3, absent=False):
    ties = 20 - gains - harms
    return pl.DataFrame({"split": ["all", "heldout"], "measure": ["Success@5"] * 2, "n": [65, 20],
                         "gains": [4, gains], "harms": [9, harms], "ties": [52, ties], "mean_off": [0.8, 0.85],
                         "mean_on": [0.72, 0.75], "mean_delta": [-0.08, -0.1], "signal_absent": [False, absent]})


def policies_table(utilities):
    routers = list(utilities)
    return pl.DataFrame({"router": routers, "questions": [20] * len(routers), "off": [0.85] * len(routers),
                         "always_on": [0.75] * len(routers), "adaptive": [0.8] * len(routers),
                         "trigger_rate": [0.5] * len(routers), "rescues": [1] * len(routers),
                         "harms": [1] * len(routers), "cost_per_trigger": [0.02] * len(routers),
                         "utility": list(utilities.values())})


def comparisons_table(rows):
    """rows: (router, scale, b, estimate, low, high, p)."""
    return pl.DataFrame([paired(router=router, scale=scale, a="adaptive", b=b, estimate=estimate, low=low, high=high,
                                p_permutation=p) for router, scale, b, estimate, low, high, p in rows])


FRONTIERS = pl.DataFrame({"router": ["ridge"] * 4 + ["gbm"] * 2,
                          "frontier": ["deployable", "deployable", "conservative", "conservative", "deployable",
                                       "conservative"],
                          "budget": [0.25, 0.5, 0.25, 0.5, 0.5, 0.5], "usage": [0.3, 0.45, 0.1, 0.4, 0.62, 0.3],
                          "accuracy": [0.8, 0.78, 0.84, 0.8, 0.8, 0.8]})


def test_a_router_that_beats_the_better_fixed_policy_is_an_effect_and_every_policy_is_ranked():
    policies = policies_table({"ridge": 0.86, "random": 0.95, "gbm": 0.898, "always": 0.73})
    comparisons = comparisons_table([("gbm", "utility", "off", 0.048, 0.01, 0.09, 0.004),
                                     ("ridge", "utility", "off", 0.01, -0.05, 0.07, 0.7),
                                     ("random", "utility", "off", 0.1, 0.05, 0.15, 0.001)])
    found = findings.routing_findings("p", utility_table(), policies, comparisons, FRONTIERS, KINDS)
    switching, beats, ranking, usage = found
    assert switching.kind == findings.HEADROOM and switching.text == (
        "Pair `p` (Success@5): on 20 held-out questions, always switching rescues 1, harms 3 and ties 16; mean 0.850 "
        "off → 0.750 always on.")
    assert beats.kind == findings.EFFECT and beats.text.startswith(
        "Pair `p`: router `gbm` beats the better fixed policy (never switching) on held-out utility: 0.898 vs 0.850, "
        "Δ +0.048 (95% CI +0.010 to +0.090, p = 0.004)")
    # random has the highest utility and a CI above 0, but it is a baseline: never the best, never "beats"
    assert "random" not in beats.text and ranking.kind == findings.RANKING
    assert ranking.text == ("Pair `p`, held-out utility (metric − c × trigger, c = 0.02), best first: `random` 0.950, "
                            "`gbm` 0.898, `ridge` 0.860, never switching 0.850, always switching 0.730 (`random` is a "
                            "baseline, never the best).")
    assert usage.kind == findings.USAGE and usage.text == (
        "Pair `p`: realized held-out usage vs target ρ ∈ [0.25, 0.5]: deployable thresholds exceed ρ at 2 of 3 router "
        "× budget points (largest usage − ρ +0.12, `gbm` at ρ = 0.5); conservative thresholds exceed ρ at 0 of 3 "
        "router × budget points (largest usage − ρ -0.10, `ridge` at ρ = 0.5).")


def test_a_router_below_never_switching_is_not_reported_better():
    """The demo's dense_vs_rrf: never switching scores 1.000, ridge 0.994 — the finding says no router beats it."""
    policies = policies_table({"ridge": 0.994, "random": 0.99}).with_columns(pl.lit(1.0).alias("off"),
                                                                            pl.lit(0.929).alias("always_on"))
    comparisons = comparisons_table([("ridge", "utility", "off", -0.006, -0.02, 0.0, 1.0),
                                     ("ridge", "metric", "off", 0.0, 0.0, 0.0, 1.0)])
    routers, ranking = findings.router_verdicts("dense_vs_rrf", policies, comparisons, KINDS)
    assert routers.kind == findings.ROUTERS and routers.text.startswith(
        "Pair `dense_vs_rrf`: no router beats the better fixed policy on held-out utility (always switching 0.909, "
        "never switching 1.000); the closest, `ridge`, 0.994, Δ -0.006")
    assert routers.data["best_fixed"] == "never switching" and "random" not in routers.text
    assert ranking.text.index("never switching 1.000") < ranking.text.index("`ridge` 0.994")


def test_a_pair_whose_held_out_labels_do_not_vary_is_one_flat_finding():
    """HotpotQA's F1 pairs: no held-out label varies though `signal_absent` (over all splits) is false."""
    (flat,) = findings.routing_findings("f1_pair", utility_table(gains=0, harms=0), policies_table({"ridge": 0.8}),
                                        comparisons_table([]), None, KINDS)
    assert flat.kind == findings.FLAT and flat.text.endswith("No held-out label varies: there is nothing for a router "
                                                             "to learn or show here.")


def test_a_ci_and_a_p_that_disagree_say_so_and_few_groups_state_their_smallest_p():
    row = paired(estimate=-0.089, low=-0.179, high=-0.018, p_permutation=0.14, n_groups=25, p_floor=2 / 2001)
    assert findings.interval(row) == ("Δ -0.089 (95% CI -0.179 to -0.018, p = 0.14), the CI excludes 0 but p ≥ 0.05: "
                                      "the two tests disagree")
    assert findings.verdict_of(row) == findings.DISAGREE
    assert findings.interval(row | {"low": -0.2, "high": 0.01, "p_permutation": 0.02}).endswith(
        "the CI includes 0 but p < 0.05: the two tests disagree")
    assert findings.interval(row | {"p_permutation": 0.001}) == "Δ -0.089 (95% CI -0.179 to -0.018, p = 0.001)"
    few = row | {"low": -0.3, "high": 0.1, "p_permutation": 0.5, "n_groups": 3, "p_floor": 0.25}
    assert findings.interval(few) == ("Δ -0.089 (95% CI -0.300 to +0.100, p = 0.5), the CI includes 0; with 3 groups "
                                      "p cannot fall below 0.25")
    tie = findings.interval({"estimate": 0.0, "low": -0.1, "high": 0.1, "p_permutation": 1.0, "confidence": 0.9})
    assert tie == "Δ +0.000 (90% CI -0.100 to +0.100, p = 1), the CI includes 0"


def answers_table(**columns):
    return pl.DataFrame({"policy": ["closed_book", "rag"], "distinct_correctness": [300, 300], "answers": [17, 17],
                         "answer_errors": [0, 0], "judge_errors": [0, 0], "error_cause": [None, None]} | columns)


def verdict(validated, auroc):
    return pl.DataFrame([{"reference": "contains", "reading": "expected", "measure": "auroc", "estimate": auroc[0],
                          "low": auroc[1], "high": auroc[2], "n": 354, "n_groups": 354, "above": 0.5,
                          "validated": validated}])


JUDGED = pl.DataFrame([paired(a="rag", b="closed_book", estimate=0.101, low=0.095, high=0.107, p_permutation=0.001,
                              n=354, n_groups=354)])


def test_an_anti_correlated_judge_is_gated_and_the_reference_difference_stands_in():
    """2Wiki as study_b_judge measured it: AUROC 0.433 (CI 0.391–0.474), while the reference label says retrieval
    hurts; the judged +0.101 must not be a finding."""
    reference = JUDGED.with_columns(pl.Series("estimate", [-0.034]), pl.Series("low", [-0.07]),
                                    pl.Series("high", [0.0]), pl.Series("p_permutation", [0.09]))
    failed, instead = findings.judged_findings(answers_table(), JUDGED, verdict(False, (0.433, 0.391, 0.474)),
                                               reference)
    assert failed.kind == findings.FAILURE and failed.text == (
        "The judge failed validation here: AUROC 0.433 (CI 0.391 to 0.474) against the `contains` label; validated "
        "when the CI's lower end is above 0.5. Its judged differences are not findings; the reference label's stand "
        "in their place.")
    assert instead.text.startswith("Reference label (`contains`) rag − closed_book: Δ -0.034 (95% CI -0.070 to +0.000, "
                                   "p = 0.09), the CI includes 0, n = 354 questions in 354 groups")
    assert instead.text.endswith("(the failed judge's Δ +0.101 is not a finding).")
    assert instead.kind == findings.REFERENCE  # no difference, yet it stands in for the judged one: on the landing page
    assert findings.landing({"2wiki": [failed, instead]}) == [failed.text, instead.text]
    validated = findings.judged_findings(answers_table(), JUDGED, verdict(True, (0.71, 0.66, 0.76)), reference)
    assert validated[0].kind == findings.EFFECT and validated[0].text.startswith("Judged correctness rag − closed_book")
    assert validated[1].text.startswith("The judge is validated here: AUROC 0.710")
    unvalidated = findings.judged_findings(answers_table(), JUDGED)
    assert unvalidated[1].text.startswith("The judge is not validated on this data")


def test_a_constant_judge_carries_no_information():
    constant = answers_table(distinct_correctness=[1, 1])
    (line, _) = findings.judged_findings(constant, JUDGED.with_columns(pl.lit(0.0).alias("estimate")))
    assert line.kind == findings.NULL and line.text.endswith("The judge gave every answer the same correctness score, "
                                                             "so this difference carries no information.")


def test_failed_requests_mark_a_judged_finding_partial():
    """A served model that refused 5 of 17 answers (HTTP 400) and 2 judgments: the finding counts them and is a
    failure-class line; a share under generation.partial_error_share leaves it as it was."""
    refused = answers_table(answer_errors=[0, 5], judge_errors=[0, 2], error_cause=[None, "6× Error code: 400"])
    comparison = JUDGED.with_columns(pl.lit(10).alias("n"), pl.lit(10).alias("n_groups"))
    line = findings.judged_findings(refused, comparison)[0]
    assert line.kind == findings.FAILURE and line.text.endswith(
        "n = 10 questions in 10 groups; partial: 7 requests of 34 answers failed (answers never judged, or judgments "
        "that errored; most common: 6× Error code: 400) and are not in n.")
    assert "partial" not in findings.judged_findings(refused, comparison, partial_share=0.25)[0].text


def test_study_c_lines_read_the_ci_and_p_together_and_say_the_judge_is_not_validated():
    retrieval = pl.DataFrame({"strategy": ["rephrased", "rephrased"], "query_type": ["problem", "all"],
                              "queries": [50, 100], "papers": [25, 25], "delta": [-0.1, -0.089], "low": [-0.3, -0.179],
                              "high": [0.1, -0.018], "p_permutation": [0.4, 0.14], "p_floor": [0.001, 0.001]})
    judged = retrieval.with_columns(pl.Series("queries", [48, 96]), pl.Series("delta", [0.0, 0.0]),
                                    pl.Series("low", [-0.2, -0.2]), pl.Series("high", [0.2, 0.2]),
                                    pl.Series("p_permutation", [1.0, 1.0]))
    quality = pl.DataFrame({"strategy": ["classic", "rephrased"], "query_type": ["all", "all"],
                            "distinct_overall": [4, 5]})
    strategy, note = findings.study_c_findings(retrieval, judged, quality)
    assert strategy.kind == findings.DISAGREE and "the CI excludes 0 but p ≥ 0.05: the two tests disagree" in strategy.text
    assert note.kind == findings.NOTE and note.text.startswith("The quality judge is not validated on this data")
    constant = quality.with_columns(pl.lit(1).alias("distinct_overall"))
    assert findings.study_c_findings(retrieval, judged, constant)[-1].text.startswith(
        "The quality judge gave every Study C answer the same overall score")


def test_a_run_of_many_pairs_lands_in_about_a_dozen_lines():
    """Study B's shape: 3 datasets, 10 pairs, most with nothing to route and no router beating the fixed policies."""
    found = {}
    for dataset, pairs in (("hotpotqa", 4), ("musique", 4), ("twowiki", 2)):
        lines = []
        for index in range(pairs):
            flat = index % 2 == 0 and dataset != "twowiki"
            lines += findings.routing_findings(
                f"pair{index}", utility_table(gains=0 if flat else 2, harms=0 if flat else 1),
                policies_table({"ridge": 0.8, "random": 0.9}),
                comparisons_table([("ridge", "utility", "off", -0.05, -0.2, 0.1, 0.6)]), FRONTIERS, KINDS)
        lines += findings.judged_findings(answers_table(), JUDGED, verdict(dataset != "twowiki", (0.6, 0.52, 0.7)),
                                          JUDGED.with_columns(pl.lit(-0.03).alias("estimate"), pl.lit(-0.1).alias("low"),
                                                              pl.lit(0.02).alias("high"), pl.lit(0.3).alias("p_permutation")))
        lines += findings.arm_findings(pl.DataFrame([
            paired(measure=measure, a="bm25_global", b="bm25_candidates", estimate=-0.2, low=-0.3, high=-0.1,
                   p_permutation=0.001) for measure in ("Success@5", "R@5", "nDCG@5")]))
        found[dataset] = lines
    landing = findings.landing(found)
    assert len(landing) <= 12, landing
    assert ("hotpotqa `bm25_global` vs `bm25_candidates` 0 / 3 / 0 / 0; musique `bm25_global` vs `bm25_candidates` "
            "0 / 3 / 0 / 0;") in "".join(landing)
    assert landing[0].startswith("twowiki: The judge failed validation here: AUROC 0.600 (CI 0.520 to 0.700)")
    assert landing[1].startswith("twowiki: Reference label (`contains`) rag − closed_book: Δ -0.030")  # stands in
    assert any(line.startswith("No router beats the better fixed policy on held-out utility in 6 pairs") for line in landing)
    assert any(line.startswith("No held-out label varies (nothing to route) in 4 pairs") for line in landing)
    assert not any("Judged correctness" in line and "twowiki" in line for line in landing)


def test_nothing_to_read_is_said_in_one_line():
    """A run with tables but no finding to draw (a retrieval-only config naming no reference) lands one line."""
    from workflow_scripts.core.contracts import COST_STAGE_TOTALS
    from workflow_scripts.report import summary

    assert findings.landing({"scifact": []}) == []
    entry = summary.Shown("", "results/scifact/cost/stages.csv", COST_STAGE_TOTALS, pl.DataFrame({"stage": ["x"]}))
    settings = {"kinds": {}, "partial_share": 0.0, "references": {}}
    assert summary.landing_lines({"scifact": [entry]}, settings) == [summary.NO_FINDINGS]


def test_an_arm_is_held_against_the_published_numbers_the_config_names():
    """SciFact's BM25 against Anserini's BEIR regression: equal to 4 decimals; an arm below a pool's own order says
    by how much."""
    metrics = pl.DataFrame({"arm": ["bm25", "dense", "bm25"], "split": ["all", "all", "dev"],
                            "nDCG@10": [0.678909, 0.645082, 0.5], "R@100": [0.925333, 0.925, 0.9], "questions": [300, 300, 10]})
    anserini = {"anserini": {"source": "Anserini's BM25 flat regression", "arms": ["bm25"],
                             "measures": {"nDCG@10": 0.6789, "R@100": 0.9253}}}
    (bm25,) = findings.reference_findings(metrics, anserini)
    assert bm25.kind == findings.REFERENCE and bm25.text == (
        "`bm25` against Anserini's BM25 flat regression (`anserini`), over 300 questions: nDCG@10 0.6789 vs 0.6789, "
        "R@100 0.9253 vs 0.9253; equal to 4 decimals.")
    pool = {"pool": {"source": "the pool's own order", "measures": {"nDCG@10": 0.7226}}}
    lines = findings.reference_findings(metrics, pool)
    assert [line.text.split(";")[-1] for line in lines] == [" largest gap -0.0437.", " largest gap -0.0775."]
    assert findings.landing({"scifact": [bm25]}) == [bm25.text]


def test_the_arms_paired_differences_are_one_landing_line_and_every_measure_on_the_dataset_page():
    """compare_arms' rows: every (arm, measure) is a finding of the dataset page with its interval; the landing page
    folds them into one line per dataset: the measures whose CI excludes 0, how many show nothing, and where the two
    tests disagree."""
    rows = pl.DataFrame([
        paired(measure="nDCG@10", a="hybrid", b="bm25", estimate=0.038, low=0.02, high=0.056, p_permutation=0.001,
               n=300, n_groups=300),
        paired(measure="R@100", a="hybrid", b="bm25", estimate=0.036, low=0.01, high=0.06, p_permutation=0.2,
               n=300, n_groups=300),
        paired(measure="nDCG@10", a="dense", b="bm25", estimate=-0.034, low=-0.06, high=-0.01, p_permutation=0.01,
               n=300, n_groups=300),
        paired(measure="R@100", a="dense", b="bm25", estimate=-0.0003, low=-0.02, high=0.02, p_permutation=0.97,
               n=300, n_groups=300),
    ])
    found = findings.arm_findings(rows)
    assert [finding.kind for finding in found] == [findings.ARMS] * 4
    assert found[0].text.startswith("`hybrid` − `bm25` nDCG@10: Δ +0.038 (95% CI +0.020 to +0.056, p = 0.001)")
    assert "the two tests disagree" in found[1].text
    assert findings.landing({"scifact": found}) == [
        "Arms against their first stage or the first arm, paired over 300 queries (95% CIs and p on the dataset page):"
        " `hybrid` vs `bm25` higher on nDCG@10 (+0.038), the two tests disagree on R@100; `dense` vs `bm25` lower on "
        "nDCG@10 (-0.034), no detectable difference on 1 measure."]
