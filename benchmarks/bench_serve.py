"""One engine per run vs one per job: the same experiment through vLLM's CPU build twice, from empty LLM caches.

In:  a config (default: config.yaml, the demo) and an output folder; vLLM's CPU build (.venv-vllm, `./setup.sh
     --vllm`). Each mode runs in its own copy of the workflow (as the tests' workdirs: rules, config, data copied,
     workflow_scripts linked) whose results/cache/models links this checkout's (a GGUF is converted once), every
     other cache empty:
     - per_job: `--configfile experiments/overlays/vllm_cpu.yaml`, an engine started by every LLM job;
     - per_run: `--configfile experiments/overlays/vllm_served.yaml`, one server for the run (llm/server.py).
Out: <out>/bench_serve.json: per mode the run's wall time, the LLM jobs, and the engine starts counted in the run's
     job logs (WEIGHTS_LOADED lines for per_job, the server's start for per_run); then compare_results.py's verdict
     on the two result trees, exact or with float columns within `--rtol` (the server batches what is in flight,
     the offline engine a shard, and vLLM's CPU kernels sum in an order that depends on the batch's shape: the
     texts, token counts and judgments must be the same, the probabilities may move in the 6th digit).

Run it (about twice the demo's time with vLLM, on 2 cores):
    .venv/bin/python benchmarks/bench_serve.py --out results/benchmarks/serve
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("Snakefile", "rules", "envs", "config.yaml", "data", "profiles", "report", "experiments")
MODES = {"per_run": "experiments/overlays/vllm_served.yaml", "per_job": "experiments/overlays/vllm_cpu.yaml"}
LLM_RULES = re.compile(r"^(generate_answers|judge_answers|generate_questions|study_c_queries|study_c_strategy|"
                       r"study_c_judge)")


def workdir(folder: Path, config: Path) -> Path:
    work = folder / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in COPIED:
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, work / name)
    shutil.copy(config, work / "config.yaml")
    (work / "workflow_scripts").symlink_to(ROOT / "workflow_scripts")
    shared = folder / "shared"  # the study configs name their data ../shared/data, relative to the working directory
    if (ROOT.parent / "shared").is_dir() and not shared.exists():
        shared.symlink_to(ROOT.parent / "shared")
    (work / "results" / "cache").mkdir(parents=True)
    (work / "results" / "cache" / "models").symlink_to(ROOT / "results" / "cache" / "models")
    return work


def own_overlay(work: Path, overlay: str) -> str:
    """The overlay restricted to the LLM roles the config names (a config without a judge, such as Study B's, would
    otherwise get a judge block without a model); written into the working copy."""
    roles = yaml.safe_load((work / "config.yaml").read_text()).get("models", {})
    settings = yaml.safe_load((ROOT / overlay).read_text())
    settings["models"] = {role: block for role, block in settings["models"].items() if role in roles}
    (work / "overlay.yaml").write_text(yaml.safe_dump(settings))
    return "overlay.yaml"


def run(work: Path, overlay: str) -> dict:
    started = time.perf_counter()
    process = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "config.yaml", own_overlay(work, overlay)],
        cwd=work, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    wall = time.perf_counter() - started
    (work.parent / "snakemake.log").write_text(process.stdout)
    if process.returncode:
        raise SystemExit(f"snakemake failed in {work} ({process.returncode}); see {work.parent / 'snakemake.log'}")
    jobs = re.findall(r"^(?:local)?rule (\w+):", process.stdout, flags=re.MULTILINE)
    logs = "\n".join(path.read_text(errors="replace") for path in (work / "results" / "logs").rglob("*.log"))
    return {
        "wall_s": round(wall, 1), "jobs": len(jobs), "llm_jobs": sum(bool(LLM_RULES.match(job)) for job in jobs),
        "engine_starts": logs.count("llm: loading model weights") + process.stdout.count("one vLLM server for the run"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "serve")
    parser.add_argument("--rtol", type=float, default=0.0, help="passed to compare_results.py (0: exact)")
    args = parser.parse_args()
    config = args.config.resolve()
    report = {"config": str(config.relative_to(ROOT) if config.is_relative_to(ROOT) else config)}
    for mode, overlay in MODES.items():
        work = workdir(args.out / mode, args.config.resolve())
        report[mode] = run(work, overlay)
        print(mode, report[mode], flush=True)
    compared = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "compare_results.py"),
         str(args.out / "per_job" / "work" / "results"), str(args.out / "per_run" / "work" / "results"),
         "--rtol", str(args.rtol)],
        text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    report["tables_equal"] = compared.returncode == 0
    report["rtol"] = args.rtol
    report["comparison"] = compared.stdout.strip().splitlines()[-20:]
    (args.out / "bench_serve.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
