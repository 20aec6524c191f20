"""Report figures and summary.md from small tables shaped like the stages' outputs (no workflow run)."""

import json

import polars as pl

from workflow_scripts.report import stage as report

STRATEGIES = ["classic", "rephrased", "fusion"]
METRICS = report.STUDY_C_METRICS


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
    for name, draw, table in (("metrics", report.study_c_metrics_figure, quality_table()),
                              ("paired", report.study_c_paired_figure, paired),
                              ("cost", report.study_c_cost_figure, cost)):
        path = tmp_path / f"{name}.png"
        draw(table, str(path))
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
        assert not list(tmp_path.glob(".*partial*"))


def test_summary_quotes_csv_parquet_json_and_markdown_tables(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    routing = tmp_path / "results" / "demo" / "routing" / "p"
    routing.mkdir(parents=True)
    pl.DataFrame({"router": ["ridge"], "note": ["<img src=x onerror=alert(1)>"]}).write_csv(routing / "policies.csv")
    pl.DataFrame({"budget": [0.5], "rule": ["deployable"], "violation_share": [0.25]}).write_parquet(routing / "audit.parquet")
    tables = tmp_path / "results" / "demo" / "study_c" / "tables"
    tables.mkdir(parents=True)
    (tables / "report.md").write_text("### Cost\n\n| strategy |\n|---|\n| classic |\n")
    (tmp_path / "results" / "demo" / "generated_questions_report.json").write_text(json.dumps(
        {"questions": 187, "papers_without_candidates_ids": ["2212.11739", "2301.1"], "failures": {"copies_text": 1}}))
    paths = ["results/demo/generated_questions_report.json", "results/demo/routing/p/policies.csv",
             "results/demo/routing/p/audit.parquet", "results/demo/study_c/tables/report.md"]
    text = report.summary_text(paths, ["demo", "absent"], "study_x")
    assert "### Generated questions: units sampled, questions kept, failures by cause" in text
    assert "| questions | 187 |" in text and "| papers_without_candidates_ids | 2212.11739, 2301.1 |" in text
    assert "| failures.copies_text | 1 |" in text
    assert text.startswith("# ragfrontier results: study_x\n")
    assert "### Routing: held-out policies — p" in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "<img" not in text
    assert "| 0.5 | deployable | 0.25 |" in text
    assert "### Study C: strategies" in text and "| classic |" in text
    assert "## absent" not in text
