"""Run the real Snakefile on a throw-away copy of the project (tests never write into the checkout's results/)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import PROJECT_ROOT

COPIED = ("Snakefile", "rules", "envs", "config.yaml", "data", "profiles", "report")
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# Model conversions, embeddings and reranker scores are content-addressed, so every test workdir may share them:
# the first run pays for them once per machine, later runs reuse them (a changed input is still recomputed).
SHARED_CACHE = PROJECT_ROOT / ".pytest_cache" / "d" / "ragfrontier-results-cache"


def make_workdir(tmp_path: Path, config_overrides: dict | None = None) -> Path:
    """A copy of the workflow files in tmp_path/work; `workflow_scripts` is linked, not copied."""
    work = tmp_path / "work"
    work.mkdir()
    for name in COPIED:
        source = PROJECT_ROOT / name
        if source.is_dir():
            shutil.copytree(source, work / name)
        else:
            shutil.copy(source, work / name)
    (work / "workflow_scripts").symlink_to(PROJECT_ROOT / "workflow_scripts")
    SHARED_CACHE.mkdir(parents=True, exist_ok=True)
    (work / "results").mkdir()
    (work / "results" / "cache").symlink_to(SHARED_CACHE)
    if config_overrides:
        config = yaml.safe_load((work / "config.yaml").read_text())
        config.update(config_overrides)
        (work / "config.yaml").write_text(yaml.safe_dump(config))
    return work


def finished_demo(tmp_path: Path) -> Path:
    """A workdir in tmp_path where the default experiment (the demo) has run to the end. Tests take the session's
    one run instead (conftest's `demo_run`, or `demo_copy` for a module that edits or reruns it)."""
    work = make_workdir(tmp_path)
    snakemake(work)
    return work


def snakemake(work: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run snakemake in `work` with the default profile; return the finished process (stdout+stderr merged)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = subprocess.run(
        [*SNAKEMAKE, "--cores", "2", *args], cwd=work, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1800,
    )
    if check and process.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({process.returncode}):\n{process.stdout[-6000:]}")
    return process


def planned_jobs(work: Path, *args: str) -> dict[str, int]:
    """Rule name → job count of what a dry run would execute (empty when there is nothing to do)."""
    output = snakemake(work, "--dry-run", *args).stdout
    return {} if "Nothing to be done" in output else job_table(output)


def job_table(output: str) -> dict[str, int]:
    """Rule → job count from a dry run's "Job stats" table."""
    table = output.split("Job stats:", 1)[1]
    jobs = {}
    for line in table.splitlines()[3:]:
        match = re.fullmatch(r"(\S+)\s+(\d+)", line.strip())
        if not match:
            break
        if match.group(1) != "total":
            jobs[match.group(1)] = int(match.group(2))
    return jobs
