"""Every study config in experiments/ is a complete, valid config on its own (run with --replace-workflow-config)."""

import copy

import pytest
import yaml

from workflow_scripts.config_check import validate_config
from workflow_helpers import make_workdir, planned_jobs


@pytest.fixture()
def experiments(project_root):
    return sorted((project_root / "experiments").glob("*.yaml"))


def test_experiment_configs_validate_standalone(project_root, experiments, monkeypatch):
    monkeypatch.chdir(project_root)
    assert experiments, "experiments/ should hold at least one study config"
    for path in experiments:
        validate_config(copy.deepcopy(yaml.safe_load(path.read_text())))


def test_scifact_experiment_plans_only_its_own_dataset(tmp_path, project_root):
    work = make_workdir(tmp_path)
    (work / "experiments").mkdir()
    config = yaml.safe_load((project_root / "experiments" / "scifact.yaml").read_text())
    for key in ("corpus", "queries", "qrels"):
        config["datasets"]["scifact"][key] = str((project_root / config["datasets"]["scifact"][key]).resolve())
    (work / "experiments" / "scifact.yaml").write_text(yaml.safe_dump(config))
    jobs = planned_jobs(work, "--configfile", "experiments/scifact.yaml", "--replace-workflow-config")
    assert jobs == {"all": 1, "ingest": 1, "splits": 1, "index_bm25": 1, "embed_units": 1, "index_dense": 1,
                    "retrieve_bm25": 1, "retrieve_dense": 1, "run_arm": 3, "evaluate_arm": 3, "retrieval_summary": 1}
