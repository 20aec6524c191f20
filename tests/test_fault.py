"""Killed runs resume: the tiny demo DAG is SIGKILLed (the whole snakemake process group, jobs included) while
it embeds, builds the Lucene index, generates and judges, and rerun after each kill (`--unlock`, then a plain
run, as a user would). Each time: the jobs that had finished are not planned again, the killed job is; no
result file is half-written (every table present reads back); the LLM calls that finished before a kill are
served from the cache afterwards. The final tables equal an uninterrupted run's (tests/tiny_demo.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from tiny_demo import DATASET, differences, offline_env, partial_files, reference_run, result_files, tiny_workdir
from workflow_helpers import SNAKEMAKE, planned_jobs, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.integration]

# Each kill point: the rule whose job is killed, and when (a predicate on the workdir once the job has started):
# embedding and indexing once the job's script runs (its log exists), generation after its first cache shard,
# judging after the grounded judge has finished and before the quality judge does.
KILL_POINTS = {
    "embed_units": lambda work: (work / "results" / "logs" / "embed_units" / f"{DATASET}.log").exists(),
    "index_bm25": lambda work: (work / "results" / "logs" / "index_bm25" / f"{DATASET}.log").exists(),
    "generate_answers": lambda work: llm_shards(work) > LLM_SHARDS_BEFORE.get(work, 0),
    "judge_answers": lambda work: "judge judge_grounded:" in log_text(work, "judge_answers"),
}
LLM_SHARDS_BEFORE: dict[Path, int] = {}
# What makes a job due here: missing or older outputs, changed params or inputs. Not "code": workflow_scripts is
# linked into the workdir, so an edit to the checkout during the test would otherwise count as unfinished work.
TRIGGERS = ("--rerun-triggers", "mtime", "params", "input")


def llm_shards(work: Path) -> int:
    return len(list((work / "results" / "cache" / "llm").glob("*.parquet")))


def log_text(work: Path, rule: str) -> str:
    path = work / "results" / "logs" / rule / f"{DATASET}_keep.log"
    return path.read_text() if path.exists() else ""


def finished_rules(output: str) -> Counter:
    return Counter(re.findall(r"Finished jobid: \d+ \(Rule: (\w+)\)", output))


def run_until_killed(work: Path, pending: set[str]) -> tuple[str, str]:
    """Start the workflow; SIGKILL its process group once the first pending kill point is reached. Return (the
    rule killed, the run's output). Two cores, like the reference run: torch's thread count changes the last
    bits of the token log-probabilities, and the tables must be identical."""
    log = work / "run.out"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [*SNAKEMAKE, "--cores", "2", *TRIGGERS], cwd=work, env=offline_env(), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    started = None
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        output = log.read_text()
        if started is None:
            running = re.findall(r"^(?:local)?rule (\w+):", output, flags=re.MULTILINE)
            started = next((rule for rule in running if rule in pending), None)
        if started and KILL_POINTS[started](work):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return started, log.read_text()
        if process.poll() is not None:
            raise AssertionError(f"the run ended before a kill point {sorted(pending)}:\n{output[-4000:]}")
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    raise AssertionError(f"no kill point {sorted(pending)} reached in 15 minutes")


def assert_tables_readable(work: Path) -> None:
    """Every Parquet result present after a kill is a whole file (a torn write would not read back)."""
    for path in result_files(work).values():
        if path.suffix == ".parquet" and not path.name.endswith(".partial"):
            pl.read_parquet(path)


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory):
    work = tiny_workdir(tmp_path_factory.mktemp("fault"))
    total = Counter(planned_jobs(work, *TRIGGERS))
    done: Counter = Counter()
    killed = []
    pending = set(KILL_POINTS)
    while pending:
        LLM_SHARDS_BEFORE[work] = llm_shards(work)
        rule, output = run_until_killed(work, pending)
        pending.discard(rule)
        done += finished_rules(output)
        killed.append(rule)
        assert rule not in finished_rules(output), f"{rule} finished before the kill"
        assert_tables_readable(work)
        snakemake(work, "--unlock")
        planned = Counter(planned_jobs(work, *TRIGGERS))
        assert planned == total - done, f"after killing {rule}: planned {dict(planned)}, finished {dict(done)}"
    # leftovers of interrupted atomic writes (as a kill inside a write leaves them) are removed by the next run
    (work / "results" / DATASET / ".units.parquet.killed.partial").write_bytes(b"PAR1 half")
    (work / "results" / DATASET / "index" / ".bm25.killed.partial").mkdir(parents=True)
    (work / "results" / DATASET / "index" / ".bm25.killed.partial" / "_0.cfs").write_bytes(b"half")
    final = snakemake(work, *TRIGGERS).stdout
    done += finished_rules(final)
    assert done == total, f"jobs finished over all runs {dict(done)}; planned at the start {dict(total)}"
    return work, killed


def test_every_kill_point_was_hit(killed_and_resumed):
    _, killed = killed_and_resumed
    assert sorted(killed) == sorted(KILL_POINTS)


def test_resumed_run_equals_uninterrupted_run(killed_and_resumed, tmp_path_factory):
    work, _ = killed_and_resumed
    assert differences(reference_run(tmp_path_factory), work) == []
    assert planned_jobs(work, *TRIGGERS) == {}


def test_llm_calls_finished_before_a_kill_are_not_redone(killed_and_resumed):
    work, _ = killed_and_resumed
    generated = log_text(work, "generate_answers")
    # the killed generation had finished at least one shard (2 requests): the rerun reads them from the cache
    served = re.search(r"llm: 3 requests, (\d+) generated, (\d+) from cache", generated)
    assert served and int(served.group(2)) >= 2, generated
    judged = log_text(work, "judge_answers")
    # the judge was killed after the grounded judge had finished: all of its calls come from the cache
    first = re.search(r"llm: 3 requests, (\d+) generated, (\d+) from cache", judged)
    assert first and first.groups() == ("0", "3"), judged


def test_no_temporary_file_survives_the_resumed_run(killed_and_resumed):
    work, _ = killed_and_resumed
    assert partial_files(work) == []
