"""The real Snakefile on the demo config: it completes, reruns nothing twice, reruns only what a change touches,
and stops bad input with one clear message and no partial outputs."""

import json

import polars as pl
import pytest
import yaml
from workflow_helpers import make_workdir, planned_jobs, snakemake

from workflow_scripts.core import provenance
from workflow_scripts.core.contracts import CONTRACTS
from workflow_scripts.core.tables import read_table

TABLES = ("units", "questions", "qrels", "splits")
PAIRS = 2  # keep_vs_hybrid, dense_vs_rrf (config.yaml)
ROUTING_JOBS = {"route_labels": PAIRS, "route_features": PAIRS, "route_fit": PAIRS, "route_heldout": PAIRS,
                "route_frontiers": PAIRS}
ANSWER_JOBS = {"generate_answers": 2, "judge_answers": 2, "answer_summary": 1, "review_export": 1}
# rules/report.smk: the cost ledger reads every stage's outputs and benchmarks; the rest reads routing and prices
REPORT_JOBS = {"cost_ledger": 1, "route_costs": 1, "report_figures": 1, "summary": 1}


pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.fixture(scope="module")
def finished_run(demo_copy):
    """The session's one demo run (tests/conftest.py), copied for this module: its tests edit sources and configs."""
    return demo_copy


def test_demo_produces_every_canonical_table(finished_run):
    results = finished_run / "results" / "demo"
    tables = {name: read_table(results / f"{name}.parquet", CONTRACTS[name]) for name in TABLES}
    report = json.loads((results / "ingest_report.json").read_text())
    assert report["units"] == tables["units"].height and report["questions"] == tables["questions"].height
    assert set(tables["units"]["kind"]) == {"abstract", "heading", "paragraph", "caption"}
    assert tables["splits"]["qid"].sort().to_list() == tables["questions"]["qid"].sort().to_list()
    assert set(tables["splits"]["split"]) == {"dev", "calibration", "heldout"}
    for rule in ("ingest", "splits", "index_bm25", "embed_units"):
        assert (finished_run / "results" / "logs" / rule / "demo.log").exists()
        assert (finished_run / "results" / "benchmarks" / rule / "demo.tsv").exists()


def test_demo_produces_runs_and_metrics_for_every_arm(finished_run):
    results = finished_run / "results" / "demo"
    questions = read_table(results / "questions.parquet", CONTRACTS["questions"])
    for arm, keep in {"bm25": 5, "dense": 5, "rrf": 5, "keep": 5, "hybrid": 5}.items():
        run = read_table(results / "runs" / f"{arm}.parquet", CONTRACTS["runs"])
        assert run.group_by("qid").len()["len"].max() == keep
        assert set(run["qid"]) <= set(questions["qid"])
        trec_lines = (results / "runs" / f"{arm}.trec").read_text().splitlines()
        assert len(trec_lines) == run.height and trec_lines[0].split()[1] == "Q0"
    keep_run = read_table(results / "runs" / "keep.parquet", CONTRACTS["runs"])
    assert keep_run["rerank_score"].null_count() == 0 and keep_run["dense_rank"].null_count() == 0
    summary = (results / "metrics" / "summary.csv").read_text().splitlines()
    assert summary[0].startswith("arm,split,")
    assert len(summary) == 1 + 5 * 4  # 5 arms × (dev, calibration, heldout, all)


@pytest.mark.parametrize("pair, features", [
    ("keep_vs_hybrid", ["top1_cos", "caption_share"]),  # Study A's six Keep features
    ("dense_vs_rrf", ["q_tokens", "bm25_top1"]),  # the question's words and a BM25 probe (every question scored)
])
def test_demo_routes_each_pair_end_to_end(finished_run, pair, features):
    routing = finished_run / "results" / "demo" / "routing" / pair
    for router in ("ridge", "random", "always", "never"):
        assert (routing / "frozen" / f"{router}.json").read_text().startswith("{")
    table = pl.read_parquet(routing / "features.parquet")
    assert set(features) <= set(table.columns) and table.height == pl.read_parquet(routing / "labels.parquet").height
    policies = pl.read_csv(routing / "policies.csv")
    assert policies["router"].to_list() == ["ridge", "random", "always", "never"]
    frontiers = pl.read_parquet(routing / "frontiers.parquet")
    assert set(frontiers["frontier"]) == {"exact", "deployable", "conservative"}
    assert set(frontiers["router"]) == {"ridge", "random"}  # always / never have no budget knob
    audit = pl.read_parquet(routing / "audit.parquet")
    assert audit.height == 2 * 9 and audit["combinations"].unique().to_list() == [2 * 20]


def test_demo_answers_and_judges_every_policy(finished_run):
    answers = finished_run / "results" / "demo" / "answers"
    splits = read_table(finished_run / "results" / "demo" / "splits.parquet", CONTRACTS["splits"])
    heldout = set(splits.filter(pl.col("split") == "heldout")["qid"])
    for policy in ("keep", "hybrid"):
        generations = pl.read_parquet(answers / f"{policy}.parquet")
        assert set(generations["request_id"]) == heldout
        assert generations.filter(pl.col("status") == "ok")["completion_tokens"].min() > 0
        for judge in ("grounded", "quality"):
            judged = pl.read_parquet(answers.parent / "judgments" / f"{policy}_{judge}.parquet")
            assert set(judged["item_id"]) <= heldout and set(judged["status"]) <= {"ok", "parse_failed", "error"}
    summary = pl.read_csv(answers / "summary.csv")
    assert summary["policy"].to_list() == ["keep", "hybrid"]
    for judge, labels in (("grounded", ["correctness", "faithfulness"]), ("quality", ["accuracy", "completeness"])):
        sheet = pl.read_csv(finished_run / "results" / "demo" / "review" / f"{judge}_sample.csv", infer_schema=False)
        assert sheet.columns[:5] == ["item_id", "question", "answer", "references", "evidence"]
        assert [f"human_{label}" for label in labels] == sheet.columns[5:7]


def test_second_run_has_nothing_to_do(finished_run):
    assert planned_jobs(finished_run) == {}


def test_the_run_records_its_provenance_and_a_dry_run_does_not(finished_run, tmp_path):
    """One provenance file per invocation that ran jobs (core/provenance.py): the demo's run ran all its jobs on the
    config it names; the copy is not a git checkout, so its commit is unknown."""
    runs = provenance.read_run_records(finished_run / "results")
    assert len(runs) == 1, runs
    (run,) = runs
    assert run["config_name"] == "demo" and run["commit"] is None
    assert run["jobs"] == sum(planned_jobs(make_workdir(tmp_path)).values())  # a fresh demo's whole plan
    planned_jobs(finished_run)
    assert len(provenance.read_run_records(finished_run / "results")) == 1


def test_changing_the_split_seed_reruns_only_splits(finished_run):
    config = yaml.safe_load((finished_run / "config.yaml").read_text())
    config["splits"]["seed"] = config["splits"]["seed"] + 1
    (finished_run / "seed.yaml").write_text(yaml.safe_dump({"splits": config["splits"]}))
    assert planned_jobs(finished_run, "--configfile", "seed.yaml") == {
        "all": 1,
        "splits": 1,
        "evaluate_arm": 5,
        "retrieval_summary": 1,
        "compare_arms": 1,
        **ROUTING_JOBS,
        **ANSWER_JOBS,
        **REPORT_JOBS,
    }


def test_changing_bm25_k1_reruns_only_bm25_consumers(finished_run):
    # keep reads no BM25 ranking but shares the reranker job with hybrid, whose candidates do change
    (finished_run / "k1.yaml").write_text(yaml.safe_dump({"retrieval": {"bm25": {"k1": 1.2}}}))
    assert planned_jobs(finished_run, "--configfile", "k1.yaml") == {
        "all": 1,
        "retrieve_bm25": 1,
        "rerank": 1,
        "run_arm": 4,
        "evaluate_arm": 4,
        "retrieval_summary": 1,
        "compare_arms": 1,
        **ROUTING_JOBS,
        **ANSWER_JOBS,
        **REPORT_JOBS,
    }


def test_changing_the_budget_grid_reruns_only_frontiers(finished_run):
    (finished_run / "grid.yaml").write_text(yaml.safe_dump({"budgets": {"grid": [0.25, 0.5]}}))
    assert planned_jobs(finished_run, "--configfile", "grid.yaml") == {
        "all": 1, "route_frontiers": PAIRS, "route_costs": 1, "report_figures": 1, "summary": 1
    }


def test_editing_the_source_file_reruns_ingest_and_downstream(finished_run):
    source = finished_run / "data" / "demo" / "papers.json"
    source.write_text(source.read_text().replace("  ", " ", 1))
    assert planned_jobs(finished_run) == {
        "all": 1,
        "ingest": 1,
        "splits": 1,
        "index_bm25": 1,
        "embed_units": 1,
        "retrieve_bm25": 1,
        "retrieve_dense": 1,
        "rerank": 1,
        "run_arm": 5,
        "evaluate_arm": 5,
        "retrieval_summary": 1,
        "compare_arms": 1,
        **ROUTING_JOBS,
        **ANSWER_JOBS,
        **REPORT_JOBS,
    }


def test_invalid_config_stops_before_any_job(tmp_path):
    work = make_workdir(tmp_path, {"splits": {"seed": "x"}})
    process = snakemake(work, check=False)
    assert process.returncode != 0
    assert "ragfrontier: ERROR: invalid config:\n  splits.seed = 'x' is not allowed; expected a value of type integer" in process.stdout
    assert "Traceback" not in process.stdout
    assert [path.name for path in (work / "results").iterdir()] == ["cache"]  # the shared test cache only


def test_malformed_dataset_fails_with_file_and_line_and_leaves_no_output(tmp_path):
    work = make_workdir(tmp_path)
    source = work / "data" / "demo" / "papers.json"
    lines = source.read_text().splitlines()
    lines[2] = lines[2] + " oops"
    source.write_text("\n".join(lines))
    process = snakemake(work, check=False)
    assert process.returncode != 0
    assert "ragfrontier: ERROR: data/demo/papers.json: invalid JSON at line 3" in process.stdout
    assert not any((work / "results" / "demo").glob("*.parquet"))


def test_snakemake_lint_is_clean(finished_run):
    process = snakemake(finished_run, "--lint")
    assert "Congratulations, your workflow is in a good condition!" in process.stdout
