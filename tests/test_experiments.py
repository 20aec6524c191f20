"""Every study config in experiments/ is a complete, valid config on its own (run with --replace-workflow-config)."""

import copy
import json

import polars as pl
import pytest
import yaml
from full_recipe_stand_ins import FULL_RECIPES, with_stand_ins
from workflow_helpers import make_workdir, planned_jobs, snakemake

from workflow_scripts.config.validate import validate_config
from workflow_scripts.ingest.adapters.registry import adapter_for


@pytest.fixture()
def experiments(project_root):
    return sorted((project_root / "experiments").glob("*.yaml"))


@pytest.mark.needs_data
def test_experiment_configs_validate_standalone(project_root, experiments, monkeypatch):
    """Each config with its own data; the full-size recipes, whose data users download, with their stand-ins
    (tests/full_recipe_stand_ins.py; their own tests are in tests/test_full_recipes.py)."""
    monkeypatch.chdir(project_root)
    assert experiments, "experiments/ should hold at least one study config"
    for path in experiments:
        config = with_stand_ins(path.stem) if path.stem in FULL_RECIPES else yaml.safe_load(path.read_text())
        validate_config(copy.deepcopy(config))


def test_every_study_config_names_its_own_summary(experiments, project_root):
    """One run no longer overwrites another's summary: each config's `name` is its own, and not the demo's."""
    names = [yaml.safe_load(path.read_text()).get("name") for path in experiments]
    assert None not in names and len(set(names)) == len(names) and "demo" not in names
    assert yaml.safe_load((project_root / "config.yaml").read_text()).get("name", "demo") == "demo"


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_data
def test_scifact_experiment_plans_only_its_own_dataset(tmp_path, project_root):
    work = make_workdir(tmp_path)
    (work / "experiments").mkdir()
    config = yaml.safe_load((project_root / "experiments" / "scifact.yaml").read_text())
    for key in ("corpus", "queries", "qrels"):
        config["datasets"]["scifact"][key] = str((project_root / config["datasets"]["scifact"][key]).resolve())
    (work / "experiments" / "scifact.yaml").write_text(yaml.safe_dump(config))
    jobs = planned_jobs(work, "--configfile", "experiments/scifact.yaml", "--replace-workflow-config")
    retrieval = {"all": 1, "ingest": 1, "splits": 1, "index_bm25": 1, "embed_units": 1, "index_dense": 1,
                 "retrieve_bm25": 1, "retrieve_dense": 1, "run_arm": 3, "evaluate_arm": 3, "retrieval_summary": 1,
                 "compare_arms": 1}
    assert {rule: jobs.get(rule) for rule in retrieval} == retrieval
    assert not {rule for rule in jobs if rule.startswith(("route_", "generate_", "judge_", "rerank"))}
    planned = snakemake(work, "--dry-run", "--configfile", "experiments/scifact.yaml", "--replace-workflow-config").stdout
    assert "results/summary_scifact.md" in planned and "results/summary_demo.md" not in planned


def study_workdir(tmp_path, project_root, name):
    """A workdir whose config is experiments/<name>.yaml with its dataset paths made absolute."""
    work = make_workdir(tmp_path)
    config = yaml.safe_load((project_root / "experiments" / f"{name}.yaml").read_text())
    for name, spec in config["datasets"].items():
        for key in adapter_for(name, spec["format"])[1]:
            if key in spec:
                spec[key] = str((project_root / spec[key]).resolve())
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    return work


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_data
def test_study_b_answers_every_policy_per_dataset_and_routes_each_pool(tmp_path, project_root):
    """HotpotQA and MuSiQue: closed book, candidates and global pool (3 answer tables, 4 pairs each); 2Wiki has only
    its open corpus: closed book and global pool (2 tables, 2 pairs)."""
    jobs = planned_jobs(study_workdir(tmp_path, project_root, "study_b"))
    assert {rule: jobs.get(rule) for rule in ("ingest", "generate_answers", "judge_answers", "route_labels",
                                              "route_features", "route_fit", "route_heldout", "route_frontiers")} == {
        "ingest": 3, "generate_answers": 8, "judge_answers": None, "route_labels": 10, "route_features": 10,
        "route_fit": 10, "route_heldout": 10, "route_frontiers": 10}


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_data
def test_study_b_multistep_logs_every_policys_path_per_dataset_beside_the_closed_book_answers(tmp_path, project_root):
    """Two multi-step policies on HotpotQA and MuSiQue: a trajectory and its effects each, reading the closed-book
    answers of the one Study B pair."""
    jobs = planned_jobs(study_workdir(tmp_path, project_root, "study_b_multistep"))
    assert {rule: jobs.get(rule) for rule in ("ingest", "index_bm25", "generate_answers", "multistep_trajectories",
                                              "multistep_effects", "route_labels")} == {
        "ingest": 2, "index_bm25": 2, "generate_answers": 4, "multistep_trajectories": 4, "multistep_effects": 4,
        "route_labels": 2}


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_data
def test_study_b_judge_answers_judges_and_validates_every_dataset(tmp_path, project_root):
    """Closed book and the global pool on HotpotQA, MuSiQue and 2Wiki: every answer judged and validated."""
    jobs = planned_jobs(study_workdir(tmp_path, project_root, "study_b_judge"))
    assert {rule: jobs.get(rule) for rule in ("ingest", "generate_answers", "judge_answers", "judge_validation",
                                              "route_labels")} == {
        "ingest": 3, "generate_answers": 6, "judge_answers": 6, "judge_validation": 3, "route_labels": None}


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_data
def test_study_a_hotpotqa_routes_keep_versus_hybrid_without_generation(tmp_path, project_root):
    jobs = planned_jobs(study_workdir(tmp_path, project_root, "study_a_hotpotqa"))
    assert {rule: jobs.get(rule) for rule in ("ingest", "rerank", "run_arm", "generate_answers", "route_labels",
                                              "route_frontiers")} == {
        "ingest": 1, "rerank": 1, "run_arm": 4, "generate_answers": None, "route_labels": 1, "route_frontiers": 1}


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_data
def test_study_a_unarxive_generates_its_questions_before_ingest_and_routes_both_pairs(tmp_path, project_root):
    jobs = planned_jobs(study_workdir(tmp_path, project_root, "study_a_unarxive"))
    assert {rule: jobs.get(rule) for rule in ("generate_questions", "ingest", "rerank", "run_arm", "generate_answers",
                                              "judge_answers", "route_labels", "route_frontiers")} == {
        "generate_questions": 1, "ingest": 1, "rerank": 1, "run_arm": 5, "generate_answers": 2, "judge_answers": 2,
        "route_labels": 2, "route_frontiers": 2}


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_data
def test_study_c_unarxive_runs_the_six_strategies_over_the_abstracts(tmp_path, project_root):
    jobs = planned_jobs(study_workdir(tmp_path, project_root, "study_c_unarxive"))
    assert {rule: jobs.get(rule) for rule in ("ingest", "study_c_queries", "study_c_strategy", "study_c_judge",
                                              "study_c_tables", "generate_questions")} == {
        "ingest": 1, "study_c_queries": 1, "study_c_strategy": 6, "study_c_judge": 6, "study_c_tables": 1,
        "generate_questions": None}


def test_the_vllm_overlay_switches_only_the_backends(project_root, monkeypatch):
    """experiments/overlays/vllm_cpu.yaml layered on config.yaml (Snakemake merges dictionaries key by key)."""
    from snakemake.utils import update_config

    monkeypatch.chdir(project_root)
    config = yaml.safe_load((project_root / "config.yaml").read_text())
    base = copy.deepcopy(config)
    update_config(config, yaml.safe_load((project_root / "experiments" / "overlays" / "vllm_cpu.yaml").read_text()))
    validate_config(config)
    for role in ("generator", "judge"):
        assert config["models"][role]["backend"] == "vllm" and config["models"][role]["vllm"]["kv_cache_gib"] == 2
        assert config["models"][role]["model"] == base["models"][role]["model"]
        assert config["models"][role]["sampling"] == base["models"][role]["sampling"]


@pytest.mark.slow  # runs Snakemake (~20 s)
@pytest.mark.integration
@pytest.mark.needs_data
def test_dl19_pool_runs_from_its_shipped_tsv(tmp_path, project_root):
    """Issue 18: one pool_tsv dataset entry ingests BERGEN's DL19 pool; a pure retrieval run's summary reports
    AP(rel=2) and nDCG@10 on the `all` rows only (its splits mean nothing), and the ingest report explains the
    judged passages outside the pool. BM25 only here (seconds); docs/study-a.md quotes every arm's numbers."""
    work = make_workdir(tmp_path)
    config = yaml.safe_load((project_root / "experiments" / "dl19_pool.yaml").read_text())
    spec = config["datasets"]["dl19"]
    for key in ("pool", "qrels"):
        spec[key] = str((project_root / spec[key]).resolve())
    config["arms"] = {"bm25": config["arms"]["bm25"]}
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake(work)
    results = work / "results" / "dl19"
    summary = pl.read_csv(results / "metrics" / "summary.csv")
    assert summary["split"].to_list() == ["all"] and summary["questions"].to_list() == [43]
    assert {"AP(rel=2)", "nDCG@10"} <= set(summary.columns)
    assert 0.3 < summary["nDCG@10"][0] < 0.7 and 0 < summary["AP(rel=2)"][0] < summary["R(rel=2)@100"][0]
    assert "| bm25 | all |" in (results / "metrics" / "summary.md").read_text()
    report = json.loads((results / "ingest_report.json").read_text())
    assert report["counts"]["qrels_unknown_units"] == 6988
    assert report["notes"]["qrels_unknown_units"].startswith("expected for a re-ranking pool")


@pytest.mark.slow
@pytest.mark.integration
def test_the_your_data_walkthrough_plans_three_arms_two_answer_tables_and_one_pair(tmp_path, project_root):
    """docs/your-data.md's walkthrough on the shipped example: BM25, dense and RRF over one corpus, answers without
    and with BM25's evidence, one retrieve-or-not pair (nothing judged)."""
    jobs = planned_jobs(study_workdir(tmp_path, project_root, "your_data"))
    assert {rule: jobs.get(rule) for rule in ("ingest", "embed_units", "run_arm", "evaluate_arm", "generate_answers",
                                              "judge_answers", "route_labels", "route_frontiers", "summary")} == {
        "ingest": 1, "embed_units": 1, "run_arm": 3, "evaluate_arm": 3, "generate_answers": 2, "judge_answers": None,
        "route_labels": 1, "route_frontiers": 1, "summary": 1}


def test_the_your_system_quickstart_imports_two_systems_judges_and_routes_them(tmp_path, project_root):
    """docs/your-system.md's quickstart on the shipped example: two imported systems (ragas and DeepEval files),
    nothing generated, both judged and validated, one pair between them."""
    jobs = planned_jobs(study_workdir(tmp_path, project_root, "your_system"))
    assert {rule: jobs.get(rule) for rule in ("ingest", "import_system", "run_arm", "generate_answers",
                                              "judge_answers", "judge_validation", "route_labels", "route_frontiers",
                                              "cost_ledger", "summary")} == {
        "ingest": 1, "import_system": 2, "run_arm": None, "generate_answers": None, "judge_answers": 2,
        "judge_validation": 1, "route_labels": 1, "route_frontiers": 1, "cost_ledger": 1, "summary": 1}
