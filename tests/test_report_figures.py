"""Report figures and summary.md from small tables shaped like the stages' outputs (no workflow run)."""

import polars as pl

from workflow_scripts.report import figures, summary

STRATEGIES = ["classic", "rephrased", "fusion"]
METRICS = figures.STUDY_C_METRICS


def quality_table():
    rows = []
    for index, strategy in enumerate(STRATEGIES):
        for kind in ("problem", "method", "all"):
            row = {"strategy": strategy, "query_type": kind, "queries": 4, "judged": 4, "parse_failed": 0, "answer_rate": 0.75}
            row |= {f"{m}_cond": 3.0 + index * 0.5 for m in METRICS} | {f"{m}_uncond": 2.0 + index * 0.5 for m in METRICS}
            rows.append(row)
    rows[-1]["clarity_cond"] = None  # an empty cell stays empty
    return pl.DataFrame(rows)


def test_study_c_figures_are_png_files(tmp_path):
    paired = pl.DataFrame({"strategy": ["rephrased", "rephrased", "fusion"], "query_type": ["problem", "all", "all"],
                           "queries": [2, 4, 4], "papers": [2, 2, 2], "delta": [0.5, 0.25, None], "low": [-0.5, None, None],
                           "high": [1.0, None, None], "win": [0.5, 0.5, None], "tie": [0.5, 0.5, None], "loss": [0.0, 0.0, None]})
    cost = pl.DataFrame({"strategy": STRATEGIES, "query_type": ["all"] * 3, "queries": [4] * 3,
                         "llm_calls_per_query": [1.0, 2.0, 4.0], "prompt_tokens_per_query": [300.0, 420.0, 900.0],
                         "completion_tokens_per_query": [40.0, 60.0, 120.0], "llm_seconds_per_query": [1.0, 1.6, 3.2],
                         "retrieval_seconds_per_query": [0.1, 0.1, 0.3], "seconds_per_query": [1.1, 1.7, 3.5],
                         "searched_share": [1.0] * 3, "fallbacks": ["", "", "few_subqueries: 1"]})
    for name, draw, table in (("metrics", figures.study_c_metrics_figure, quality_table()),
                              ("paired", figures.study_c_paired_figure, paired),
                              ("cost", figures.study_c_cost_figure, cost)):
        path = tmp_path / f"{name}.png"
        draw(table, str(path))
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
        assert not list(tmp_path.glob(".*partial*"))


def test_summary_pages_show_tables_and_reports_as_their_contracts_say():
    from workflow_scripts.core.contracts import AUDIT, GENERATED_QUESTIONS_REPORT, ROUTER_POLICIES, STUDY_C_REPORT

    report = summary.report_table({"questions": 187, "papers_without_candidates_ids": ["2212.11739", "2301.1"],
                                   "failures": {"copies_text": 1}})
    policies = pl.DataFrame({"router": ["ridge"], "trigger_rate": [0.5], "note": ["<img src=x onerror=alert(1)>"]})
    audit = pl.DataFrame({"budget": [0.5], "rule": ["deployable"], "violation_share": [0.25]})
    shown = {"demo": [
        summary.Shown("", "results/demo/generated_questions_report.json", GENERATED_QUESTIONS_REPORT, report),
        summary.Shown("p", "results/demo/routing/p/policies.csv", ROUTER_POLICIES, policies),
        summary.Shown("p", "results/demo/routing/p/audit.parquet", AUDIT, audit),
        summary.Shown("", "results/demo/study_c/tables/report.md", STUDY_C_REPORT,
                      "### Cost\n\n| strategy |\n|---|\n| classic |\n"),
    ], "absent": []}
    landing = summary.summary_text(shown, "study_x")
    assert landing.startswith("# ragfrontier results: study_x\n\n## Findings\n")
    assert summary.NO_FINDINGS in landing  # no table to read findings from
    assert "### Generated questions\n\nUnits sampled" in landing and "| questions | 187 |" in landing
    assert "| papers_without_candidates_ids | 2212.11739, 2301.1 |" in landing and "| failures.copies_text | 1 |" in landing
    # the landing page trims a wide table to its headline columns and leaves long ones to the dataset's page
    assert "### Routing: held-out policies — p" in landing and "| router | trigger_rate |\n" in landing
    assert "onerror" not in landing and "audit" not in landing and "| classic |" not in landing
    assert "[summary_study_x/demo.md](summary_study_x/demo.md)" in landing and "## absent" not in landing
    page = summary.dataset_text(shown["demo"], "demo", "study_x")
    assert page.startswith("# ragfrontier results: study_x — demo\n") and "(../summary_study_x.md)" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img" not in page  # cell text is HTML-escaped
    assert "### Routing: calibration audit — p" in page and "| 0.5 | deployable | 0.25 |" in page
    assert "### Study C: strategies" in page and "| classic |" in page and "n = 1 rows" in page


def routing_tables(signal: bool = True):
    utility = pl.DataFrame({"split": ["all", "heldout"], "measure": ["Success@5"] * 2, "n": [65, 20],
                            "gains": [4, 1 if signal else 0], "harms": [9, 3 if signal else 0],
                            "ties": [52, 16 if signal else 20], "mean_off": [0.8, 0.85], "mean_on": [0.72, 0.75],
                            "mean_delta": [-0.08, -0.1], "signal_absent": [False, not signal]})
    routers = ["ridge", "random", "gbm", "always"]
    policies = pl.DataFrame({"router": routers, "questions": [20] * 4, "off": [0.85] * 4, "always_on": [0.75] * 4,
                             "adaptive": [0.8, 0.7, 0.9, 0.75], "trigger_rate": [0.25, 0.5, 0.1, 1.0],
                             "rescues": [1, 0, 1, 1], "harms": [1, 2, 0, 3], "cost_per_trigger": [0.02] * 4,
                             "utility": [0.795, 0.69, 0.898, 0.73]})
    comparisons = pl.DataFrame({"router": [name for name in routers for _ in (0, 1)], "a": ["adaptive"] * 8,
                                "b": ["always_on", "off"] * 4, "estimate": [0.05, -0.05, -0.05, -0.15, 0.15, 0.05, 0.0, -0.1],
                                "low": [0.0125, -0.15, -0.1, -0.3, 0.05, 0.01, 0.0, -0.2],
                                "high": [0.1, 0.05, 0.01, -0.05, 0.25, 0.1, 0.0, -0.01],
                                "p_permutation": [0.031, 0.62, 0.2, 0.01, 0.004, 0.04, 1.0, 0.03],
                                "confidence": [0.95] * 8, "n": [20] * 8, "n_groups": [4] * 8})
    frontiers = pl.DataFrame({"router": ["ridge"] * 4 + ["gbm"] * 2,
                              "frontier": ["deployable", "deployable", "conservative", "conservative", "deployable",
                                           "conservative"],
                              "budget": [0.25, 0.5, 0.25, 0.5, 0.5, 0.5], "usage": [0.3, 0.45, 0.1, 0.4, 0.62, 0.3],
                              "accuracy": [0.8, 0.78, 0.84, 0.8, 0.8, 0.8]})
    return utility, policies, comparisons, frontiers


def test_routing_findings_say_what_switching_and_the_best_router_did():
    switching, best, others, usage = summary.routing_findings("keep_vs_hybrid", *routing_tables())
    assert switching == ("Pair `keep_vs_hybrid` (Success@5): on 20 held-out questions, always switching rescues 1, "
                         "harms 3 and ties 16; mean 0.850 off → 0.750 always on.")
    assert best.startswith("Best held-out utility (metric − c × trigger, c = 0.02): router `gbm`, 0.898 vs 0.730 always "
                           "switching and 0.850 never, firing on 10% of 20 questions (1 rescues, 0 harms); its metric "
                           "0.900 vs always-on 0.750 and off 0.850")
    assert "(vs always-on Δ +0.150 (95% CI +0.050 to +0.250, p = 0.004); vs off Δ +0.050" in best  # no flag: CI > 0
    assert best.endswith("n = 20 in 4 groups).")
    # ridge beats always-on (CI above 0) and ties off; random ties always-on and loses to off; `always` never chooses
    assert others == ("Of the 2 other routers that choose, with the CI excluding 0: 1 above and 0 below always-on; "
                      "0 above and 1 below off.")
    assert usage == ("Realized held-out usage vs target ρ ∈ [0.25, 0.5]: deployable thresholds exceed ρ at 2 of 3 "
                     "router × budget points (largest usage − ρ +0.12, `gbm` at ρ = 0.5); conservative thresholds "
                     "exceed ρ at 0 of 3 router × budget points (largest usage − ρ -0.10, `ridge` at ρ = 0.5).")
    flat = summary.routing_findings("p", *routing_tables(signal=False))
    assert flat[0].endswith("Every question has the same label: there is nothing for a router to learn.")
    tie = summary.interval({"estimate": 0.0, "low": -0.1, "high": 0.1, "p_permutation": 1.0, "confidence": 0.9})
    assert tie == "Δ +0.000 (90% CI -0.100 to +0.100, p = 1), the CI includes 0"


def test_a_ci_and_a_p_that_disagree_say_so_and_few_groups_state_their_smallest_p():
    row = {"estimate": -0.089, "low": -0.179, "high": -0.018, "p_permutation": 0.14, "confidence": 0.95,
           "n_groups": 25, "p_floor": 2 / 2001}
    assert summary.interval(row) == ("Δ -0.089 (95% CI -0.179 to -0.018, p = 0.14), the CI excludes 0 but p ≥ 0.05: "
                                     "the two tests disagree")
    assert summary.interval(row | {"low": -0.2, "high": 0.01, "p_permutation": 0.02}).endswith(
        "the CI includes 0 but p < 0.05: the two tests disagree")
    assert summary.interval(row | {"p_permutation": 0.001}) == "Δ -0.089 (95% CI -0.179 to -0.018, p = 0.001)"
    few = row | {"low": -0.3, "high": 0.1, "p_permutation": 0.5, "n_groups": 3, "p_floor": 0.25}
    assert summary.interval(few) == ("Δ -0.089 (95% CI -0.300 to +0.100, p = 0.5), the CI includes 0; with 3 groups p "
                                     "cannot fall below 0.25")
    study_c = {"delta": 0.1, "low": 0.02, "high": 0.2, "p_permutation": 0.25, "papers": 3, "p_floor": 0.25}
    assert summary.interval(study_c, "delta").endswith("the two tests disagree; with 3 groups p cannot fall below 0.25")


def test_judged_and_study_c_findings_flag_a_constant_judge():
    answers = pl.DataFrame({"policy": ["keep", "hybrid"], "distinct_correctness": [1, 1]})
    comparisons = pl.DataFrame({"a": ["hybrid"], "b": ["keep"], "estimate": [0.0], "low": [0.0], "high": [0.0],
                                "p_permutation": [1.0], "confidence": [0.95], "n": [20], "n_groups": [4]})
    sentence, unvalidated = summary.judged_findings(answers, comparisons)
    assert unvalidated.startswith("The judge is not validated on this data")
    assert sentence == ("Judged correctness hybrid − keep: Δ +0.000 (95% CI +0.000 to +0.000, p = 1), the CI includes 0, "
                        "n = 20 questions in 4 groups. The judge gave every answer the same correctness score, so this "
                        "difference carries no information.")
    varied = summary.judged_findings(answers.with_columns(pl.Series("distinct_correctness", [3, 2])), comparisons)
    assert "same correctness score" not in varied[0]
    retrieval = pl.DataFrame({"strategy": ["fusion", "fusion"], "query_type": ["problem", "all"], "queries": [50, 100],
                              "papers": [50, 50], "delta": [-0.1, -0.25], "low": [-0.3, -0.4], "high": [0.1, -0.1],
                              "p_permutation": [0.4, 0.002]})
    judged = retrieval.with_columns(pl.Series("queries", [48, 96]), pl.Series("delta", [0.0, 0.0]),
                                    pl.Series("low", [0.0, 0.0]), pl.Series("high", [0.0, 0.0]),
                                    pl.Series("p_permutation", [1.0, 1.0]))
    quality = pl.DataFrame({"strategy": ["classic", "fusion"], "query_type": ["all", "all"], "distinct_overall": [1, 1]})
    fusion, constant = summary.study_c_findings(retrieval, judged, quality)
    varied_quality = quality.with_columns(pl.Series("distinct_overall", [3, 4]))
    assert summary.study_c_findings(retrieval, judged, varied_quality)[-1].startswith(
        "The quality judge is not validated on this data")
    assert fusion == ("Study C `fusion` vs classic: Hit@3 over 100 queries of 50 papers Δ -0.250 (95% CI -0.400 to "
                      "-0.100, p = 0.002); judged overall (1–5) over 96 judged queries Δ +0.000 (95% CI +0.000 to "
                      "+0.000, p = 1), the CI includes 0.")
    assert constant.startswith("The quality judge gave every Study C answer the same overall score")


def test_the_summary_job_reads_each_table_through_its_contract(tmp_path):
    """CSV reports and Parquet tables are checked against their contracts as the summary reads them (a stale or
    foreign file fails naming the table); the retrieval metrics' contract has one column per measure measured."""
    import json

    import pytest

    from workflow_scripts.core.contracts import GENERATED_QUESTIONS_REPORT, ROUTER_POLICIES, metrics_summary_report
    from workflow_scripts.core.tables import ContractError, write_report
    from workflow_scripts.report.jobs import summary as job

    metrics = pl.DataFrame({"arm": ["keep"], "split": ["all"], "R@5": [0.5], "Success@5": [1.0], "questions": [3]})
    write_report(metrics, tmp_path / "summary.csv", metrics_summary_report(["R@5", "Success@5"]))
    read = job.content(str(tmp_path / "summary.csv"), metrics_summary_report(()))
    assert read.columns == ["arm", "split", "R@5", "Success@5", "questions"] and read["questions"].dtype == pl.UInt32
    (tmp_path / "report.json").write_text(json.dumps({"kept": 3, "failures": {"empty": 1}}))
    assert job.content(str(tmp_path / "report.json"), GENERATED_QUESTIONS_REPORT).rows() == [
        ("kept", "3"), ("failures.empty", "1")]
    pl.DataFrame({"router": ["ridge"], "trigger_rate": [0.5]}).write_csv(tmp_path / "policies.csv")
    with pytest.raises(ContractError, match=r"table 'router_policies': missing columns \['questions'"):
        job.content(str(tmp_path / "policies.csv"), ROUTER_POLICIES)


def verdict(validated: bool, auroc: tuple[float, float, float]) -> pl.DataFrame:
    return pl.DataFrame([{"reference": "contains", "reading": "expected", "measure": "auroc", "estimate": auroc[0],
                          "low": auroc[1], "high": auroc[2], "n": 354, "n_groups": 354, "above": 0.5,
                          "validated": validated}])


def test_a_judge_that_fails_validation_has_its_differences_replaced_by_the_reference_labels():
    """2Wiki as the study_b_judge run measured it: the judge ranks the reference label below chance (AUROC 0.433)
    and the reference label says retrieval hurts; the judged +0.101 must not be a finding."""
    answers = pl.DataFrame({"policy": ["closed_book", "bm25_global"], "distinct_correctness": [300, 300]})
    judged = pl.DataFrame({"a": ["bm25_global"], "b": ["closed_book"], "estimate": [0.101], "low": [0.095],
                           "high": [0.107], "p_permutation": [0.001], "confidence": [0.95], "n": [354],
                           "n_groups": [354], "p_floor": [0.001]})
    reference = judged.with_columns(pl.Series("estimate", [-0.034]), pl.Series("low", [-0.07]),
                                    pl.Series("high", [0.0]), pl.Series("p_permutation", [0.09]))
    failed, instead = summary.judged_findings(answers, judged, verdict(False, (0.433, 0.391, 0.474)), reference)
    assert failed == ("The judge failed validation here: AUROC 0.433 (CI 0.391 to 0.474) against the `contains` label; "
                      "validated when the CI's lower end is above 0.5. Its judged differences are not findings; the "
                      "reference label's stand in their place.")
    assert instead.startswith("Reference label (`contains`) bm25_global − closed_book: Δ -0.034 (95% CI -0.070 to "
                              "+0.000, p = 0.09), the CI includes 0, n = 354 questions in 354 groups")
    assert instead.endswith("(the failed judge's Δ +0.101 is not a finding).")
    assert not any(line.startswith("Judged correctness") for line in (failed, instead))
    ok = summary.judged_findings(answers, judged, verdict(True, (0.71, 0.66, 0.76)), reference)
    assert ok[0].startswith("Judged correctness bm25_global − closed_book: Δ +0.101")
    assert ok[1] == ("The judge is validated here: AUROC 0.710 (CI 0.660 to 0.760) against the `contains` label; "
                     "validated when the CI's lower end is above 0.5.")


def test_the_verdict_follows_the_configured_gate():
    from workflow_scripts.judging.validation import verdict_table

    agreement = pl.DataFrame({"reading": ["expected", "expected"], "measure": ["auroc", "spearman"],
                              "estimate": [0.6, 0.1], "low": [0.52, -0.02], "high": [0.68, 0.2], "n": [10, 10],
                              "n_groups": [5, 5], "distinct_scores": [9, 9]})
    assert verdict_table(agreement, "expected", {"measure": "auroc", "above": 0.5}, "em")["validated"].item()
    assert not verdict_table(agreement, "expected", {"measure": "spearman", "above": 0.0}, "em")["validated"].item()
    undefined = agreement.with_columns(pl.lit(None, dtype=pl.Float64).alias("low"))
    assert not verdict_table(undefined, "expected", {"measure": "auroc", "above": 0.5}, "em")["validated"].item()


def test_a_judged_finding_counts_the_failed_requests_and_is_marked_partial():
    """A served model that refused 5 of 17 answers (HTTP 400) and 2 judgments: the finding says so; a share below
    generation.partial_error_share leaves it unmarked."""
    answers = pl.DataFrame({"policy": ["closed_book", "rag"], "distinct_correctness": [3, 3], "answers": [17, 17],
                            "answer_errors": [0, 5], "judge_errors": [0, 2],
                            "error_cause": [None, "6× Error code: 400 - refused"]})
    comparisons = pl.DataFrame({"a": ["rag"], "b": ["closed_book"], "estimate": [0.2], "low": [-0.1], "high": [0.5],
                                "p_permutation": [0.3], "confidence": [0.95], "n": [10], "n_groups": [10],
                                "p_floor": [0.002]})
    line = summary.judged_findings(answers, comparisons)[0]
    assert line.endswith("n = 10 questions in 10 groups; partial: 7 requests of 34 answers failed (answers never "
                         "judged, or judgments that errored; most common: 6× Error code: 400 - refused) and are not "
                         "in n.")
    assert "partial" not in summary.judged_findings(answers, comparisons, partial_share=0.25)[0]
