"""Report figures and summary.md from small tables shaped like the stages' outputs (no workflow run)."""

import polars as pl

from workflow_scripts.report import figures, summary

STRATEGIES = ["classic", "rephrased", "fusion"]
NO_SETTINGS = {"kinds": {}, "partial_share": 0.0, "references": {}}  # no routers, failures or references
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
    landing = summary.summary_text(shown, "study_x", NO_SETTINGS)
    assert landing.startswith("# ragfrontier results: study_x\n\n## Findings\n")
    assert summary.NO_FINDINGS in landing  # no table to read findings from
    assert "### Generated questions\n\nUnits sampled" in landing and "| questions | 187 |" in landing
    assert "| papers_without_candidates_ids | 2212.11739, 2301.1 |" in landing and "| failures.copies_text | 1 |" in landing
    # the landing page trims a wide table to its headline columns and leaves long ones to the dataset's page
    assert "### Routing: held-out policies — p" in landing and "| router | trigger_rate |\n" in landing
    assert "onerror" not in landing and "audit" not in landing and "| classic |" not in landing
    assert "[summary_study_x/demo.md](summary_study_x/demo.md)" in landing and "## absent" not in landing
    page = summary.dataset_text(shown["demo"], "demo", "study_x", NO_SETTINGS)
    assert page.startswith("# ragfrontier results: study_x — demo\n") and "(../summary_study_x.md)" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img" not in page  # cell text is HTML-escaped
    assert "### Routing: calibration audit — p" in page and "| 0.5 | deployable | 0.25 |" in page
    assert "### Study C: strategies" in page and "| classic |" in page and "n = 1 rows" in page


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
