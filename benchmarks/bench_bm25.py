"""Benchmark of the BM25 stage on BEIR SciFact: our `bm25.search` against plain Pyserini, time and peak memory.

In:  the SciFact files under ../shared/data/beir-scifact (or --data), --threads (2), --reps (5).
Out: a table on stdout. Every phase runs in its own child process, so each peak (max RSS: the JVM lives inside the
     Python process, so this counts Java heap and native memory too, unlike tracemalloc) is that phase's own:
     - build:   ingest + `bm25.build_index` (5,183 units);
     - search:  one `bm25.search` (global, k=1000, all 300 queries, --threads) → RANKING table;
     - compare: ours and plain Pyserini in one JVM after one warm-up each, --reps rounds, each round in the other
                order than the last, a full Java GC before every timed run; plain is
                `LuceneSearcher(index)` + `set_bm25(0.9, 0.4)` + `batch_search(texts, qids, 1000, threads)`, i.e.
                Java hits in a dict, not yet a table. The ratio is median(ours) / median(plain); target ≤ 1.15.
     "base" is the RSS after the imports and the JVM start, before any work; "java heap" is the JVM's committed
     heap at the end of the phase (the JVM grows it lazily up to a quarter of the machine's memory, so most of the
     peak RSS is heap not yet collected, not live data).

Usage: .venv/bin/python benchmarks/bench_bm25.py [--threads 2] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
K = 1000


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
    from workflow_scripts.adapters import beir

    folder = data / "beir-scifact"
    spec = {
        "corpus": folder / "corpus.jsonl.gz",
        "queries": folder / "queries.test.jsonl",
        "qrels": folder / "qrels/test.tsv",
    }
    return beir.load(spec, "scifact")


def started() -> float:
    """Start the JVM and import Pyserini's searcher (outside every timing); return the base RSS."""
    from workflow_scripts.lucene import pyserini_ready

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


def ours(index: Path, questions: Any, threads: int) -> tuple[float, int]:
    from workflow_scripts import bm25

    begin = time.perf_counter()
    ranking, _ = bm25.search(index, questions, k=K, scope="global", threads=threads)
    return time.perf_counter() - begin, ranking.height


def phase_build(args: argparse.Namespace) -> dict[str, Any]:
    from workflow_scripts import bm25

    base = started()
    ingested = load_scifact(args.data)
    begin = time.perf_counter()
    bm25.build_index(ingested.units, args.index, args.threads)
    return {"base": base, "seconds": time.perf_counter() - begin, "units": ingested.units.height}


def phase_search(args: argparse.Namespace) -> dict[str, Any]:
    base = started()
    questions = load_scifact(args.data).questions
    seconds, rows = ours(args.index, questions, args.threads)
    return {"base": base, "seconds": seconds, "rows": rows, "queries": questions.height}


def collect_garbage() -> None:
    """A full Java GC before each timed run, so neither side pays for the other's garbage."""
    from pyserini.pyclass import autoclass

    autoclass("java.lang.System").gc()


def phase_compare(args: argparse.Namespace) -> dict[str, Any]:
    base = started()
    questions = load_scifact(args.data).questions
    texts, qids = questions["text"].to_list(), questions["qid"].to_list()
    runs = {
        "ours": lambda: ours(args.index, questions, args.threads)[0],
        "plain": lambda: plain_pyserini(args.index, texts, qids, args.threads),
    }
    for run in runs.values():
        run()
    timings: dict[str, list[float]] = {"ours": [], "plain": []}
    for rep in range(args.reps):
        for name in sorted(runs, reverse=rep % 2 == 1):
            collect_garbage()
            timings[name].append(runs[name]())
    return {"base": base, **timings}


PHASES = {"build": phase_build, "search": phase_search, "compare": phase_compare}


def run_child(phase: str, index: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--phase", phase, "--index", str(index), "--data", str(args.data)]
    command += ["--threads", str(args.threads), "--reps", str(args.reps)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"phase {phase} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(build: dict[str, Any], search: dict[str, Any], compare: dict[str, Any], args: argparse.Namespace) -> None:
    ours_median, plain_median = statistics.median(compare["ours"]), statistics.median(compare["plain"])
    rows = [
        (f"build_index ({build['units']} units, {args.threads} threads)", build),
        (f"bm25.search (global, {search['queries']} queries, k={K}, {search['rows']} rows)", search),
        (f"compare: bm25.search, median of {args.reps}", {**compare, "seconds": ours_median}),
        (f"compare: plain batch_search, median of {args.reps}", {"seconds": plain_median}),
    ]
    print(f"{'phase':<62} {'seconds':>8} {'base MiB':>9} {'peak MiB':>9} {'java heap MiB':>14}")
    for name, row in rows:
        memory = [
            f"{row[key]:{width}.0f}" if key in row else " " * width
            for key, width in (("base", 9), ("peak", 9), ("heap", 14))
        ]
        print(f"{name:<62} {row['seconds']:8.2f} {' '.join(memory)}")
    for name in ("ours", "plain"):
        print(f"{name:>5}: " + ", ".join(f"{seconds:.2f}" for seconds in compare[name]) + " s")
    print(
        f"time ratio ours / plain Pyserini: median {ours_median / plain_median:.3f}, "
        f"best {min(compare['ours']) / min(compare['plain']):.3f} (target <= 1.15)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--index", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        result = PHASES[args.phase](args)
        print(json.dumps({**result, "peak": peak_mib(), "heap": java_heap_mib()}))
        return
    with tempfile.TemporaryDirectory(prefix="bench_bm25.") as folder:
        index = Path(folder) / "index"
        build = run_child("build", index, args)
        search = run_child("search", index, args)
        compare = run_child("compare", index, args)
    report(build, search, compare, args)


if __name__ == "__main__":
    main()
