"""The cost ledger, policy costs and the report on a finished demo run: measured values per query and stage,
`snakemake --report` opened in headless Chromium (Debian package `chromium`) showing every figure, and changes of a
price or of the budget grid rerunning only report-level jobs."""

import base64
import json
import re
import shutil
import subprocess
import time

import polars as pl
import pytest
import yaml
from workflow_helpers import planned_jobs, snakemake

from workflow_scripts.core.contracts import CONTRACTS
from workflow_scripts.core.tables import read_table
from workflow_scripts.report.summary import cell, markdown_table

FIGURES = ("frontiers", "calibration", "outcomes", "utility", "cost_breakdown", "cost_frontiers")
PAIR = "keep_vs_hybrid"
REPORT_JOBS = {"route_costs": 1, "report_figures": 1, "summary": 1}
CHROMIUM = shutil.which("chromium")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


@pytest.fixture(scope="module")
def finished_run(demo_copy):
    """The session's one demo run (tests/conftest.py), copied for this module: its tests rerun with new prices."""
    return demo_copy


@pytest.mark.slow
@pytest.mark.integration
def test_ledger_has_a_measured_row_per_query_and_stage(finished_run):
    results = finished_run / "results" / "demo"
    ledger = read_table(results / "cost" / "ledger.parquet", CONTRACTS["cost_ledger"])
    questions = set(read_table(results / "questions.parquet", CONTRACTS["questions"])["qid"])
    splits = read_table(results / "splits.parquet", CONTRACTS["splits"])
    heldout = set(splits.filter(pl.col("split") == "heldout")["qid"])
    for stage, component in (("retrieve_bm25", "group"), ("retrieve_dense", "group"), ("rerank", "smollm2_yes_no"),
                             ("run_arm", "keep"), ("run_arm", "hybrid")):
        rows = ledger.filter((pl.col("stage") == stage) & (pl.col("component") == component))
        assert set(rows["qid"]) == questions, (stage, component)
        assert (rows["seconds"] > 0).all() and set(rows["basis"]) == {"job_even"}
        assert rows["seconds"].sum() == pytest.approx(rows["job_seconds"][0])
    assert ledger.filter(pl.col("stage") == "rerank")["rerank_pairs"].min() > 0
    for policy in ("keep", "hybrid"):
        answers = ledger.filter((pl.col("stage") == "generate_answers") & (pl.col("component") == policy))
        assert set(answers["qid"]) == heldout and set(answers["basis"]) == {"item"} and set(answers["device"]) == {"cpu"}
        assert (answers["seconds"] > 0).all() and answers["prompt_tokens"].min() > 0 and answers["completion_tokens"].min() > 0
        judged = ledger.filter((pl.col("stage") == "judge_answers") & (pl.col("component") == policy))
        assert set(judged["qid"]) == heldout and judged["llm_calls"].min() >= 2  # both judges
    # a pair's own stage (its features) is priced by its route_costs job, not kept in the dataset's ledger, so that
    # adding a pair changes nothing another pair is priced from
    assert ledger.filter(pl.col("stage") == "route_features").height == 0
    policies = read_table(results / "cost" / PAIR / "policy_costs.parquet", CONTRACTS["policy_costs"])
    ridge = policies.filter((pl.col("router") == "ridge") & (pl.col("component") == "pre_decision"))
    never = policies.filter((pl.col("router") == "never") & (pl.col("component") == "pre_decision"))
    assert ridge["seconds"][0] > never["seconds"][0]  # ridge reads the pair's features first: it pays their job
    stages = pl.read_csv(results / "cost" / "stages.csv")
    assert stages.filter(pl.col("stage") == "generate_answers")["seconds"].min() > 0


@pytest.mark.slow
@pytest.mark.integration
def test_policy_costs_split_by_component_and_reuse_is_cheaper(finished_run):
    cost = finished_run / "results" / "demo" / "cost" / PAIR
    policies = read_table(cost / "policy_costs.parquet", CONTRACTS["policy_costs"])
    assert policies.height == 4 * 4
    families = dict(policies.select("router", "families").unique().iter_rows())
    assert families == {"ridge": "base_arm", "random": "", "always": "", "never": ""}
    totals = policies.group_by("router").agg(pl.col("usage").first(), pl.col("seconds").sum())
    assert totals.filter(pl.col("router") == "never")["usage"][0] == 0.0 and (totals["seconds"] > 0).all()
    never = policies.filter(pl.col("router") == "never")
    assert never.filter(pl.col("component").str.starts_with("trigger"))["seconds"].sum() == 0.0
    reuse = read_table(cost / "reuse.parquet", CONTRACTS["reuse_costs"])
    by_mode = dict(reuse.group_by("mode").agg(pl.col("seconds").sum()).iter_rows())
    assert by_mode["recompute"] > by_mode["reuse"] > 0
    pairs = dict(reuse.filter(pl.col("stage") == "rerank").select("mode", "rerank_pairs").iter_rows())
    assert pairs["recompute"] == 8.0 and 0 < pairs["reuse"] < 8.0  # Hybrid's 8 candidates, some already scored for Keep
    assert set(reuse.filter(pl.col("mode") == "reuse")["stage"]) == {"retrieve_bm25", "rerank", "run_arm"}
    frontiers = pl.read_parquet(finished_run / "results" / "demo" / "routing" / PAIR / "frontiers.parquet")
    points = read_table(cost / "cost_frontiers.parquet", CONTRACTS["cost_frontiers"])
    assert points.height == frontiers.height and (points["seconds"] > 0).all()


@pytest.mark.slow
@pytest.mark.integration
def test_summary_opens_with_findings_and_links_every_table(finished_run):
    summary = (finished_run / "results" / "summary_demo.md").read_text()
    assert summary.startswith("# ragfrontier results: demo\n\n## Findings\n")
    findings = summary[:summary.index("\n## demo")]
    for pair in ("keep_vs_hybrid", "dense_vs_rrf"):
        assert f"- Pair `{pair}`: no router beats the better fixed policy on held-out utility" in findings
    assert "- Always switching rescues / harms, held-out, of the questions: `keep_vs_hybrid` 2 / 0 of 14" in findings
    assert "`keep` vs `dense` lower on" in findings  # the reranker against its own first stage (compare_arms)
    assert "Realized held-out usage vs target ρ over 2 pairs: deployable thresholds exceed ρ at" in findings
    assert "- The judge is not validated on this data" in findings and len(findings.splitlines()) < 20
    page = (finished_run / "results" / "summary_demo" / "demo.md").read_text()  # every finding in full
    assert "- Judged correctness hybrid − keep: Δ" in page and "n = 17 questions in 3 groups" in page
    assert "- Pair `dense_vs_rrf`, held-out utility (metric − c × trigger, c = 0.02), best first: never switching" in page
    for heading in ("## demo", "### Retrieval metrics", "### Routing: held-out policies — keep_vs_hybrid"):
        assert heading in summary
    assert "### Cost:" not in summary and "[summary_demo/demo.md](summary_demo/demo.md)" in summary
    page = (finished_run / "results" / "summary_demo" / "demo.md").read_text()
    for heading in ("### Routing: calibration audit — keep_vs_hybrid", "### Cost: each router's frozen policy — keep_vs_hybrid",
                    "### Cost: reuse vs recompute — keep_vs_hybrid", "### Routing: budget frontiers — dense_vs_rrf"):
        assert heading in page
    assert "| router | families | component |" in page


def test_markdown_cells_are_html_escaped():
    assert cell("<script>alert(1)</script> a|b\nc") == "&lt;script&gt;alert(1)&lt;/script&gt; a&#124;b c"
    assert markdown_table(pl.DataFrame({"x": [0.123456], "t": ["<b>"]})).splitlines()[2] == "| 0.1235 | &lt;b&gt; |"


def chromium(*args, cwd):
    profile = cwd / "chromium-profile"
    process = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], cwd=cwd, text=True,
                             capture_output=True, timeout=180, check=False)
    assert process.returncode == 0, process.stderr[-3000:]
    return process.stdout


# Appended to a copy of report.html: draws every embedded result as an <img> and records its decoded size, so a
# DOM dump shows whether the browser can display each figure.
FIGURE_PROBE = """<script>
window.addEventListener("load", () => {
  const probe = document.createElement("div");
  probe.id = "figure-probe";
  document.body.prepend(probe);
  for (const [path, entry] of Object.entries(results)) {
    if (!entry.mime_type.startsWith("image/")) continue;
    const image = new Image();
    image.onload = () => { image.dataset.width = image.naturalWidth; image.dataset.height = image.naturalHeight; };
    image.dataset.path = path;
    image.src = entry.data_uri;
    probe.appendChild(image);
  }
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package (apt-get install chromium)")
@pytest.mark.slow
@pytest.mark.integration
def test_report_opens_in_chromium_with_every_figure(finished_run):
    snakemake(finished_run, "--report", "report.html")
    html = (finished_run / "report.html").read_text()
    assert "Always switching rescues" in html and "no router beats the better fixed policy" in html  # its findings
    results, _ = json.JSONDecoder().raw_decode(html[html.index("var results = {") + len("var results = "):])
    dom = chromium("--virtual-time-budget=10000", "--dump-dom", "report.html", cwd=finished_run)
    menu = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", "", dom, flags=re.DOTALL)))
    assert "Results" in menu and "demo" in menu and "Tables" in menu  # the rendered navigation lists both categories
    probe = finished_run / "probe.html"
    probe.write_text(html.replace("</body>", FIGURE_PROBE + "</body>"))
    dom = chromium("--virtual-time-budget=10000", "--dump-dom", "probe.html", cwd=finished_run)
    for figure in FIGURES:
        path = f"results/demo/report/{PAIR}/{figure}.png"
        match = re.search(rf'<img data-path="{re.escape(path)}"[^>]*data-width="(\d+)" data-height="(\d+)"', dom)
        assert match, f"{figure} is not displayed by the browser"
        assert int(match.group(1)) > 300 and int(match.group(2)) > 200
        entry = results[path]
        assert len(entry["caption"]) > 100, f"{figure} has no caption"
        header, data = entry["data_uri"].split(",", 1)
        assert header.startswith("data:image/png;") and header.endswith(";base64")
        assert base64.b64decode(data) == (finished_run / path).read_bytes()
    assert "results/summary_demo.md" in results
    chromium("--screenshot=report.png", "--window-size=1400,1000", "--virtual-time-budget=10000", "report.html", cwd=finished_run)
    assert (finished_run / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (finished_run / "report.png").stat().st_size > 10_000


@pytest.mark.slow
@pytest.mark.integration
def test_changing_a_price_reruns_only_cost_and_report_jobs(finished_run):
    (finished_run / "prices.yaml").write_text(yaml.safe_dump({"costs": {"prices": {"rerank_pair": 10.0}}}))
    assert planned_jobs(finished_run, "--configfile", "prices.yaml") == {"all": 1, **REPORT_JOBS}


@pytest.mark.slow
@pytest.mark.integration
def test_changing_the_budget_grid_reruns_only_frontier_and_report_jobs(finished_run):
    (finished_run / "grid.yaml").write_text(yaml.safe_dump({"budgets": {"grid": [0.25, 0.5]}}))
    assert planned_jobs(finished_run, "--configfile", "grid.yaml") == {"all": 1, "route_frontiers": 2, **REPORT_JOBS}


@pytest.mark.slow
@pytest.mark.integration
def test_a_price_change_reruns_in_seconds(finished_run):
    before = read_table(finished_run / "results" / "demo" / "cost" / PAIR / "policy_costs.parquet", CONTRACTS["policy_costs"])
    started = time.monotonic()
    snakemake(finished_run, "--configfile", "prices.yaml")
    elapsed = time.monotonic() - started
    after = read_table(finished_run / "results" / "demo" / "cost" / PAIR / "policy_costs.parquet", CONTRACTS["policy_costs"])
    assert after["seconds"].to_list() == before["seconds"].to_list()
    assert after["token_equivalents"].sum() < before["token_equivalents"].sum()  # reranked pairs got cheaper
    assert elapsed < 90, f"a price change took {elapsed:.0f} s"
