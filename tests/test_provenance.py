"""Provenance of a run (workflow_scripts/core/provenance.py): the commit and its uncommitted changes, the config's
hash, one file per invocation, read back oldest first. The Snakefile writing it: tests/test_workflow.py."""

import subprocess
from datetime import datetime, timezone

from workflow_scripts.core import provenance


def git(folder, *arguments):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *arguments], cwd=folder, check=True,
                   capture_output=True)


def test_a_run_records_its_commit_changes_and_config(tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    git(checkout, "init", "-q")
    (checkout / "config.yaml").write_text("name: demo\n")
    (checkout / "Snakefile").write_text("# the workflow\n")
    git(checkout, "add", ".")
    git(checkout, "commit", "-q", "-m", "first")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True).stdout.strip()
    assert provenance.git_state(checkout) == (head, [])
    (checkout / "Snakefile").write_text("# edited\n")
    (checkout / "untracked.txt").write_text("not the workflow's\n")
    started = datetime(2026, 12, 5, 13, 0, 7, tzinfo=timezone.utc)
    record = provenance.run_record(checkout, {"name": "demo", "seed": 1}, [str(checkout / "config.yaml")], 39,
                                   started, "9.27.1")
    assert record["commit"] == head and record["uncommitted"] == {"count": 1, "files": ["Snakefile"]}
    assert record["started"] == "2026-12-05T13:00:07+00:00" and record["jobs"] == 39
    assert record["config_name"] == "demo" and len(record["config_sha256"]) == 64
    assert record["config_files"][0]["path"].endswith("config.yaml")
    same = provenance.run_record(checkout, {"seed": 1, "name": "demo"}, [], 39, started, "9.27.1")
    other = provenance.run_record(checkout, {"name": "demo", "seed": 2}, [], 39, started, "9.27.1")
    assert same["config_sha256"] == record["config_sha256"] != other["config_sha256"]

    runs = tmp_path / "results" / "logs" / "runs"
    first = provenance.write_run_record(record, runs)
    second = provenance.write_run_record(record | {"jobs": 3}, runs)  # resumed within the same second
    assert (first.name, second.name) == ("20261205T130007Z.json", "20261205T130007Z-2.json")
    assert [run["jobs"] for run in provenance.read_run_records(tmp_path / "results")] == [39, 3]


def test_outside_a_git_checkout_the_commit_is_unknown(tmp_path):
    assert provenance.git_state(tmp_path) == (None, [])
    record = provenance.run_record(tmp_path, {}, [], 0, datetime.now(timezone.utc), "9")
    assert record["commit"] is None and record["config_name"] is None
