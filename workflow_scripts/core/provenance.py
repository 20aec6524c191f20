"""Provenance: which code and which config made a results/ tree.

In:  the workflow's folder (a git checkout or not), the config files Snakemake read, the effective config, and how
     many jobs the invocation is about to run.
Out: `RUNS`/<started>.json, one per invocation that runs jobs (written by the Snakefile's onstart, which a dry run
     skips): {"started" (UTC, ISO 8601), "commit" (the checkout's HEAD; null outside a git checkout), "uncommitted"
     (tracked files changed since that commit, at most `UNCOMMITTED_LISTED`, and their count), "config_name",
     "config_sha256" (of the effective config, key order aside), "config_files" ([{"path", "sha256"}], as read),
     "jobs", "snakemake", "python"}. A run resumed after a kill adds a second file; benchmarks/record_run.py reads
     them all to name the commit(s) a recorded run used.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from workflow_scripts.core.atomic import write_json_atomic

RUNS = Path("results/logs/runs")
UNCOMMITTED_LISTED = 50


def _git(folder: Path, *arguments: str) -> str | None:
    try:
        done = subprocess.run(["git", *arguments], cwd=folder, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(folder: str | Path) -> tuple[str | None, list[str]]:
    """(HEAD's commit, the tracked files changed since it) of the git checkout holding `folder`; (None, []) when it
    is not in one or git is missing."""
    commit = _git(Path(folder), "rev-parse", "HEAD")
    if commit is None:
        return None, []
    status = _git(Path(folder), "status", "--porcelain", "--untracked-files=no") or ""
    return commit.strip(), sorted(line[3:] for line in status.splitlines() if line.strip())


def run_record(folder: str | Path, config: dict[str, Any], config_files: list[str], jobs: int,
               started: datetime, snakemake_version: str) -> dict[str, Any]:
    """The provenance of one invocation (the module docstring's fields)."""
    commit, uncommitted = git_state(folder)
    canonical = json.dumps(config, sort_keys=True, default=str).encode()
    return {
        "started": started.astimezone(timezone.utc).isoformat(timespec="seconds"),
        "commit": commit,
        "uncommitted": {"count": len(uncommitted), "files": uncommitted[:UNCOMMITTED_LISTED]},
        "config_name": config.get("name"),
        "config_sha256": hashlib.sha256(canonical).hexdigest(),
        "config_files": [{"path": str(path), "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest()}
                         for path in config_files if Path(path).is_file()],
        "jobs": jobs,
        "snakemake": snakemake_version,
        "python": platform.python_version(),
    }


def write_run_record(record: dict[str, Any], runs: str | Path = RUNS) -> Path:
    """Write `record` as `runs`/<started>.json (a second invocation within the same second gets a suffix)."""
    stem = datetime.fromisoformat(record["started"]).strftime("%Y%m%dT%H%M%SZ")
    target = Path(runs) / f"{stem}.json"
    for number in range(2, 1000):
        if not target.exists():
            break
        target = Path(runs) / f"{stem}-{number}.json"
    write_json_atomic(record, target)
    return target


def read_run_records(results: str | Path) -> list[dict[str, Any]]:
    """Every invocation's provenance under a results/ folder, oldest first."""
    def order(path: Path) -> tuple[str, int]:  # <started>.json, then <started>-2.json, ...
        stem, _, number = path.stem.partition("-")
        return stem, int(number or 1)

    folder = Path(results) / RUNS.relative_to("results")
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"), key=order)]
