"""The cluster profile on a real SLURM: a single-node cluster (munged, slurmctld, slurmd from Debian's packages
`slurm-wlm munge`) is started in a temporary directory, the tiny demo DAG with its heavy stages split in two
shards each (config `shards`) is submitted through `--profile profiles/slurm` (snakemake-executor-plugin-slurm,
the `slurm` extra): shards of one stage must run side by side, and every table must equal a local unsharded
run's. The node advertises two GPUs (gres entries on /dev/null and /dev/zero) and eight CPUs, so the profile's
GPU requests are scheduled for real and two shards fit at once; the jobs still compute on the machine's CPUs (the
tiny config names device cpu).

Needs root (slurmd launches the jobs) and the packages above; without them the cluster test is skipped with
the exact reason. No accounting daemon is needed: the plugin's status command is `squeue` (MinJobAge keeps
finished jobs visible), and jobs run without an account (`--slurm-no-account`).

One workaround, for this single-node test only: the plugin's job step removes every SLURM_* variable before
it calls `srun` inside the allocation, SLURM_CONF included, so `srun` would look for /etc/slurm/slurm.conf.
Instead of writing into /etc, the test puts an `srun` wrapper that sets SLURM_CONF first on the jobs' PATH.
A real cluster has its slurm.conf in the default place (or configless) and needs no wrapper.
"""

from __future__ import annotations

import getpass
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from conftest import PROJECT_ROOT
from tiny_demo import SHARDS, UNBATCHED, differences, offline_env, partial_files, reference_run, shard, tiny_workdir
from workflow_helpers import SNAKEMAKE

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol", "srun")
GPU_RULES = {"generate_answers", "judge_answers", "rerank", "embed_units", "index_dense", "study_c_colbert_index",
             "study_c_queries", "study_c_strategy", "study_c_judge"}


# The node's "GPUs": character devices every Linux has (slurmd counts a gpu gres by its device files), two so
# that two GPU shard jobs fit side by side.
FAKE_GPUS = ("/dev/null", "/dev/zero")


def rule_names() -> set[str]:
    return {
        match for path in (PROJECT_ROOT / "rules").glob("*.smk")
        for match in re.findall(r"^\s*rule (\w+):", path.read_text(), flags=re.MULTILINE)
    }


def profile(name: str) -> dict:
    return yaml.safe_load((PROJECT_ROOT / "profiles" / name / "config.yaml").read_text())


@pytest.mark.parametrize("name", ["slurm", "gpu-workstation"])
def test_profiles_request_gpus_for_gpu_rules_only(name):
    config = profile(name)
    requested = {rule for rule, resources in config["set-resources"].items() if resources.get("gpu")}
    assert requested == GPU_RULES
    assert requested <= rule_names(), f"profiles/{name} names rules the workflow does not have"
    assert "gpu" not in str(config.get("default-resources", "")), "CPU rules must not request a GPU"
    text = (PROJECT_ROOT / "profiles" / name / "config.yaml").read_text()
    bare = [line for line in text.splitlines() if line.strip() and ":" in line and "#" not in line
            and not line.strip().endswith(":")]
    assert not bare, f"every entry of profiles/{name} is commented; uncommented: {bare}"


def test_slurm_profile_submits_through_the_plugin():
    config = profile("slurm")
    assert config["executor"] == "slurm" and config["rerun-incomplete"] is True
    assert {"runtime", "mem_mb"} <= set(config["default-resources"])
    assert profile("gpu-workstation")["resources"] == ["gpu=1"]


def missing_for_cluster() -> str | None:
    """Why a single-node SLURM cannot be started here, or None."""
    absent = [tool for tool in DAEMONS if shutil.which(tool) is None]
    if absent:
        return (f"SLURM tools not installed: {absent} (apt-get install -y slurm-wlm munge); "
                "the cluster test needs a real slurmctld/slurmd/munged")
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm is not installed (pip install -e '.[slurm]')"
    if os.geteuid() != 0:
        return f"slurmd must run as root to launch jobs; this test runs as {getpass.getuser()}"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


SLURM_CONF = """\
ClusterName=ragfrontier-test
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.sock
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
MinJobAge=3600
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
GresTypes=gpu
NodeName={host} CPUs={cpus} RealMemory=65536 Gres=gpu:{gpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    """A single-node SLURM in `root`: munged, slurmctld and slurmd run as children of the test."""

    def __init__(self, root: Path):
        self.root = root
        self.processes: list[subprocess.Popen] = []
        host = socket.gethostname().split(".")[0]
        for folder in ("munge", "state", "spool", "log", "bin"):
            (root / folder).mkdir(mode=0o700)
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf = root / "slurm.conf"
        self.conf.write_text(SLURM_CONF.format(
            host=host, root=root, ctld_port=free_port(), slurmd_port=free_port(), cpus=max(8, os.cpu_count()),
            gpus=len(FAKE_GPUS),
        ))
        (root / "gres.conf").write_text("".join(f"NodeName={host} Name=gpu File={device}\n" for device in FAKE_GPUS))
        wrapper = root / "bin" / "srun"
        wrapper.write_text(f'#!/bin/sh\nSLURM_CONF={self.conf} exec {shutil.which("srun")} "$@"\n')
        wrapper.chmod(0o755)
        self.env = dict(offline_env(), SLURM_CONF=str(self.conf), PATH=f"{root / 'bin'}:{os.environ['PATH']}")

    def start(self) -> None:
        munge = self.root / "munge"
        self.processes.append(self._spawn(
            "munged", "--foreground", "--force", f"--key-file={munge / 'munge.key'}",
            f"--socket={munge / 'munge.sock'}", f"--pid-file={munge / 'munged.pid'}",
            f"--log-file={munge / 'munged.log'}", f"--seed-file={munge / 'seed'}",
        ))
        self._wait(lambda: (munge / "munge.sock").exists(), "munged to create its socket")
        self.processes.append(self._spawn("slurmctld", "-D", "-i", "-f", str(self.conf)))
        self.processes.append(self._spawn("slurmd", "-D", "-f", str(self.conf)))
        self._wait(lambda: self.command("sinfo", "-h", "-o", "%T").stdout.strip() == "idle", "the node to be idle")

    def _spawn(self, *command: str) -> subprocess.Popen:
        log = open(self.root / "log" / f"{command[0]}.out", "w")
        return subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _wait(self, ready, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [process.args[0] for process in self.processes if process.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise AssertionError(f"SLURM did not start ({what}; exited: {dead}):\n{self.logs()}")
            time.sleep(0.5)

    def command(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, env=self.env, text=True, capture_output=True, timeout=60)

    def logs(self) -> str:
        return "\n".join(f"== {path.name}\n{path.read_text()[-2000:]}" for path in sorted((self.root / "log").iterdir()))

    def jobs(self) -> list[dict[str, str]]:
        """Every job the controller remembers (MinJobAge keeps finished ones), as key → value."""
        lines = self.command("scontrol", "show", "job", "-o").stdout.splitlines()
        return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in lines if line.startswith("JobId=")]

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = missing_for_cluster()
    if reason:
        pytest.skip(reason)
    root = Path(tmp_path_factory.mktemp("slurm"))
    root.chmod(0o700)
    running = Cluster(root)
    try:
        running.start()
        yield running
    finally:
        running.stop()


def overlapping(jobs: list[dict[str, str]]) -> bool:
    """Whether at least two of the jobs ran at the same time (by the controller's start and end times)."""
    spans = sorted((job["StartTime"], job["EndTime"]) for job in jobs)
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))


@pytest.mark.slow
@pytest.mark.integration
def test_sharded_demo_through_slurm_profile_runs_shards_side_by_side_and_matches_local_run(cluster, tmp_path, tmp_path_factory):
    local = reference_run(tmp_path_factory, unbatched=True)  # unsharded, local (why unbatched: tiny_demo.SHARDS)
    work = shard(tiny_workdir(tmp_path, UNBATCHED))
    process = subprocess.run(
        [*SNAKEMAKE, "--profile", "profiles/slurm", "--slurm-status-command", "squeue", "--slurm-no-account",
         "--slurm-init-seconds-before-status-checks", "1"],
        cwd=work, env=cluster.env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1500,
    )
    assert process.returncode == 0, f"{process.stdout[-6000:]}\n{cluster.logs()}"
    jobs = cluster.jobs()
    by_rule = {}
    for job in jobs:
        assert job["JobState"] == "COMPLETED", job
        by_rule.setdefault(job["Comment"].split("_wildcards_")[0].removeprefix("rule_"), []).append(job)
    assert {"ingest", "index_bm25", "embed_units", "rerank", "generate_answers", "judge_answers"} <= set(by_rule)
    for rule, submitted in by_rule.items():
        gpus = {"gres/gpu=1" in job.get("TRES", "") or "gpu" in job.get("TresPerJob", "") for job in submitted}
        assert gpus == {rule in GPU_RULES}, f"{rule}: GPU request {gpus}, expected {rule in GPU_RULES}"
    for stage, count in SHARDS.items():  # each shard its own job, the gather another (on CPU)
        assert len(by_rule[stage]) == count * (len(by_rule[f"{stage}_gather"])), stage
    assert any(overlapping(by_rule[stage]) for stage in SHARDS), {
        stage: sorted((job["StartTime"], job["EndTime"]) for job in by_rule[stage]) for stage in SHARDS}
    assert differences(local, work) == []
    assert partial_files(work) == []
