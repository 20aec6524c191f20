"""The full-size study recipes (issue #16): experiments/study_a_qasper.yaml, study_b_full*.yaml (one per generator),
study_b_multistep_gpu.yaml (issue #43) and study_c_full.yaml plan their whole DAG.

Their data is downloaded by users, so each recipe is layered with a config that points its dataset paths at tiny
stand-ins in the same source formats (tests/full_recipe_stand_ins.py, tests/data/full_recipes/); nothing else is
overridden, models included: validation does not load models, so the recipes' real model names (Llama-3.1-8B,
Qwen2.5-32B, ColBERTv2, ...) pass as they are. The DAG tests are dry runs (`snakemake -n`, a few seconds each) that
read Snakemake's job table.

Sharding is checked against config `shards` (issue #16): a stage with n > 1 shards has, per stage instance, n jobs
of its own rule `<stage>` (one per shard) and one gather job of rule `<stage>_gather`; n = 1 leaves the one
`<stage>` job and no other.
`shard_rule` and `gather_rule` spell those two names in one place (test_recipe_shards_per_the_contract).
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import PROJECT_ROOT
from full_recipe_stand_ins import (
    FULL_RECIPES,
    STAND_INS,
    STUDY_B_GENERATORS,
    recipe,
    stand_in_files,
    stand_in_overrides,
    with_stand_ins,
)
from workflow_helpers import job_table, make_workdir, snakemake

from workflow_scripts.config.validate import validate_config
from workflow_scripts.ingest.adapters.registry import adapter_for

SHARDABLE = ("embed_units", "rerank", "generate_answers", "judge_answers", "study_c_queries", "study_c_strategy",
             "study_c_judge")

# recipe → rule → planned jobs (None: the rule must not be planned). A sharded stage's count here is its number of
# stage instances, which is also the number of its gather jobs.
STUDY_B_JOBS = {
    # 3 datasets; BM25 over each question's candidates (group) and over the dataset's pool (global)
    "ingest": 3, "splits": 3, "index_bm25": 3, "retrieve_bm25": 6, "run_arm": 6, "evaluate_arm": 6,
    # closed_book, bm25_candidates, bm25_global answered per dataset; nothing judged, nothing embedded
    "generate_answers": 9, "judge_answers": None, "embed_units": None, "rerank": None,
    # 4 pairs (2 pools x 2 scorers) per dataset
    "route_labels": 12, "route_features": 12, "route_fit": 12, "route_heldout": 12, "route_frontiers": 12,
    "study_c_queries": None, "summary": 1, "all": 1,
}
EXPECTED_JOBS = {
    "study_a_qasper": {
        # 2 datasets (QASPER dev and test files), 4 arms, one cross-encoder, group scope only (no FAISS index)
        "ingest": 2, "splits": 2, "index_bm25": 2, "embed_units": 2, "retrieve_bm25": 2, "retrieve_dense": 2,
        "index_dense": None, "rerank": 2, "run_arm": 8, "evaluate_arm": 8,
        # policies keep and hybrid per dataset, each answered and judged
        "generate_answers": 4, "judge_answers": 4, "answer_summary": 2, "review_export": 2,
        # one pair (keep_vs_hybrid) per dataset
        "route_labels": 2, "route_features": 2, "route_fit": 2, "route_heldout": 2, "route_frontiers": 2,
        "study_c_queries": None, "summary": 1, "all": 1,
    },
    "study_c_full": {
        # one corpus, embedded and indexed (global scope); a real ColBERTv2 checkpoint, so no checkpoint is built
        "ingest": 1, "embed_units": 1, "index_dense": 1, "study_c_colbert_checkpoint": None,
        "study_c_colbert_index": 1, "study_c_queries": 1,
        # six strategies, each run and judged
        "study_c_strategy": 6, "study_c_judge": 6, "study_c_tables": 1,
        # no retrieval arms, no answer policies, no routing
        "run_arm": None, "rerank": None, "generate_answers": None, "route_labels": None, "summary": 1, "all": 1,
    },
    "study_b_multistep_gpu": {
        # 3 datasets, BM25 over each dataset's pool; closed_book and bm25_global answered per dataset (one pair)
        "ingest": 3, "splits": 3, "index_bm25": 3, "retrieve_bm25": 3, "run_arm": 3, "generate_answers": 6,
        "route_labels": 3, "route_frontiers": 3, "judge_answers": None, "embed_units": None, "rerank": None,
        # IRCoT and Iter-RetGen per dataset: each path logged, then its effects, stop rules and frontiers
        "multistep_trajectories": 6, "multistep_effects": 6, "summary": 1, "all": 1,
    },
    **{name: STUDY_B_JOBS for name in STUDY_B_GENERATORS},
}


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    """recipe → (job table, dry-run output), each recipe dry-run once per module in its own workdir, standalone
    (--replace-workflow-config) with the stand-in layer as a second config file."""
    planned = {}

    def plan(name: str) -> tuple[dict[str, int], str]:
        if name not in planned:
            work = make_workdir(tmp_path_factory.mktemp(name))
            (work / "experiments").mkdir()
            shutil.copy(PROJECT_ROOT / "experiments" / f"{name}.yaml", work / "experiments" / f"{name}.yaml")
            (work / "stand_ins.yaml").write_text(yaml.safe_dump(stand_in_overrides(name)))
            output = snakemake(work, "--dry-run", "--configfile", f"experiments/{name}.yaml", "stand_ins.yaml",
                               "--replace-workflow-config").stdout
            planned[name] = job_table(output), output
        return planned[name]

    return plan


# --- the recipes themselves (fast) ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FULL_RECIPES))
def test_recipe_names_itself_and_shards_only_stages_it_runs(name):
    config = recipe(name)
    assert config["name"] == name
    shards = config["shards"]
    assert shards and set(shards) <= set(SHARDABLE), shards
    assert all(isinstance(n, int) and n >= 1 for n in shards.values()), shards
    # a shard count on a stage the recipe never runs would be a silent no-op
    assert all(EXPECTED_JOBS[name].get(stage) for stage in shards), shards


@pytest.mark.parametrize("name", sorted(FULL_RECIPES))
def test_recipe_validates_on_its_stand_ins_with_its_own_models(name, project_root, monkeypatch):
    monkeypatch.chdir(project_root)
    config = validate_config(with_stand_ins(name))
    written = recipe(name)
    assert set(config["datasets"]) == set(written["datasets"]) == set(FULL_RECIPES[name])
    for role in ("generator", "judge", "embedder"):
        if role in written.get("models", {}):
            assert config["models"][role]["model"] == written["models"][role]["model"]


def test_the_study_b_recipes_differ_only_in_generator_name_and_dataset_names():
    """One file per generator (a config holds one models.generator); everything else is the same study."""

    def normalized(name: str) -> dict:
        config = copy.deepcopy(recipe(name))
        model, suffix = STUDY_B_GENERATORS[name]
        assert config["models"]["generator"].pop("model") == model
        assert config.pop("name") == name
        config["datasets"] = {key.removesuffix(f"_{suffix}"): spec for key, spec in config["datasets"].items()}
        return config

    configs = [normalized(name) for name in STUDY_B_GENERATORS]
    assert configs[0] == configs[1] == configs[2]
    assert set(configs[0]["datasets"]) == {"hotpotqa", "twowiki", "musique"}
    arms = configs[0]["arms"]
    assert {arm["scope"] for arm in arms.values()} == {"group", "global"}  # candidate and global pools
    assert {pair["alternative"] for pair in configs[0]["routing"]["pairs"].values()} == set(arms)


def test_study_a_qasper_keeps_the_study_settings():
    config = recipe("study_a_qasper")
    arms = config["arms"]
    keep = {"first_stage": "dense", "candidates": 30, "rerank": "minilm_ce", "keep": 10, "scope": "group"}
    assert arms["keep"] == keep
    assert arms["hybrid"] == {**arms["keep"], "first_stage": "hybrid", "rrf_k": 60}
    assert config["models"]["rerankers"]["minilm_ce"]["model"] == "cross-encoder/ms-marco-MiniLM-L-6-v2"
    assert config["routing"]["routers"]["ridge"] == {"kind": "ridge", "alpha": 20}
    assert config["routing"]["n_splits"] == 5 and config["routing"]["cost_per_trigger"] == 0.02
    assert {spec["format"] for spec in config["datasets"].values()} == {"qasper"}


def test_study_c_full_keeps_the_study_settings():
    config = recipe("study_c_full")
    assert config["study_c"]["papers"] == 10000 and config["study_c"]["seed"] == 42
    assert config["models"]["generator"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert config["models"]["judge"]["model"] == "Qwen/Qwen2.5-32B-Instruct"
    assert {config["models"][role]["backend"] for role in ("generator", "judge")} == {"vllm"}
    assert {config["models"][role]["device"] for role in ("generator", "judge", "embedder")} == {"cuda"}
    colbert = config["study_c"]["colbert"]
    assert colbert["checkpoint"] == "colbert-ir/colbertv2.0" and colbert["untrained_from"] is None
    assert (colbert["doc_maxlen"], colbert["query_maxlen"], colbert["nbits"]) == (512, 64, 2)


def test_study_c_full_documents_a_year_filter_that_writes_the_file_it_reads(tmp_path, project_root):
    """The adapter has no year option, so the header's one-line command makes the 2024–2025 file the recipe reads:
    run it on a small snapshot (the stand-in's records between papers last updated in 2023, 2026 and never)."""
    header = (project_root / "experiments" / "study_c_full.yaml").read_text()
    command = next(line.removeprefix("#").strip() for line in header.splitlines() if line.startswith("#   python -c"))
    arguments = shlex.split(command)
    assert arguments[:2] == ["python", "-c"] and arguments[-2] == ">"
    assert arguments[-1] == recipe("study_c_full")["datasets"]["arxiv_2024_2025"]["path"]
    snapshot = tmp_path / re.search(r"open\('([^']+)'\)", arguments[2]).group(1)

    kept = (STAND_INS / "arxiv-metadata-2024-2025.jsonl").read_text()
    dates = [("2301.00009", "2023-12-31"), ("2601.00010", "2026-01-01"), ("0704.0001", None)]
    dropped = [json.dumps({"id": paper, "title": "t", "abstract": "a", "categories": "cs.LG", "update_date": date})
               + "\n" for paper, date in dates]
    snapshot.parent.mkdir(parents=True)
    snapshot.write_text(dropped[0] + kept + "".join(dropped[1:]))
    result = subprocess.run([sys.executable, "-c", arguments[2]], cwd=tmp_path, capture_output=True, text=True,
                            check=True)
    assert result.stdout == kept


def test_the_stand_ins_are_in_their_source_formats():
    """Each stand-in file ingests through the adapter its recipe names (a few invented records each)."""
    for name in FULL_RECIPES:
        for dataset, spec in with_stand_ins(name)["datasets"].items():
            bundle = adapter_for(dataset, spec["format"])[0](spec, dataset)
            assert bundle.units.height >= 5
            if spec["format"] != "arxiv_metadata":  # a corpus only: Study C writes its own queries
                assert bundle.questions.height >= 2 and bundle.qrels.height >= 2
    assert all(path.stat().st_size < 8_000 for path in stand_in_files())


# --- the planned DAG (dry runs) ------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(FULL_RECIPES))
def test_recipe_plans_every_stage_of_its_study(name, dry_runs):
    """Every rule's job count, except those of sharded stages (n > 1), which the next test checks."""
    jobs, output = dry_runs(name)
    sharded = {stage for stage, n in recipe(name)["shards"].items() if n > 1}
    expected = {rule: count for rule, count in EXPECTED_JOBS[name].items() if rule not in sharded}
    assert {rule: jobs.get(rule) for rule in expected} == expected
    assert f"results/summary_{name}.md" in output and "results/summary_demo.md" not in output
    planned_datasets = set(re.findall(r"results/([A-Za-z0-9_-]+)/units\.parquet", output))
    assert planned_datasets == set(FULL_RECIPES[name])


def shard_rule(stage: str) -> str:
    """The rule of one shard's job: the stage's own (so cluster profiles' resources reach the shards)."""
    return stage


def gather_rule(stage: str) -> str:
    """The rule of the job that gathers a sharded stage."""
    return f"{stage}_gather"


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(FULL_RECIPES))
def test_recipe_shards_per_the_contract(name, dry_runs):
    """Per stage instance, n jobs of the stage's rule and one `<stage>_gather`; a stage with n = 1 (or not named)
    keeps its one job per instance and no gather."""
    jobs, _ = dry_runs(name)
    shards = recipe(name)["shards"]
    expected = {}
    for stage in SHARDABLE:
        n, instances = shards.get(stage, 1), EXPECTED_JOBS[name].get(stage)
        if n > 1:
            expected |= {shard_rule(stage): instances * n, gather_rule(stage): instances}
        else:
            expected |= {rule: None for rule in {shard_rule(stage), gather_rule(stage)} - {stage}}
            expected[stage] = instances
    assert {rule: jobs.get(rule) for rule in expected} == expected
