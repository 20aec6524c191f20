"""Memory benchmark: does a job's peak RSS grow with the corpus beyond the index it builds? (issue #16, deliverable 3)

In:  --sizes (default 100k,800k units), --queries (1,000), --code (comma-separated commits whose `workflow_scripts`
     to measure, each exported with `git archive`, or "worktree"; default: the working tree), --stages (default:
     all below), --work (scratch, default benchmarks/.memory/, git-ignored), --threads (2).
Out: a table on stdout and <work>/bench_memory_<stages>.json: per code version, stage and size, the job's peak RSS (VmHWM of
     a fresh child process), the size of the index it builds or loads (FAISS file bytes), and per stage the growth
     from the smaller to the larger corpus of RSS beyond that index, and of RSS minus an idle child's.

Corpus (seeded, synthetic: memory depends on sizes, not on meaning): unit i has id `u<i>`, its own group, a title
of 3 and a text of 40 words drawn from a 20,000-word vocabulary (numpy default_rng(SEED)); questions are 12-word
strings. Unit vectors: 384 floats per unit from default_rng([SEED, i // 4096]) (row i mod 4096), normalized; an
encoder stand-in hands them to the `embed_units` job in the order it asks (so the measured job is the rule's own code
around the model, and the model's constant memory is left out).

Stages (each its own child process, calling the rule's function through `jobs.runtime.run_job` like Snakemake's
script directive, on Parquet files written by an untimed preparation child):
- embed_units:         the `embed_units` job, unsharded, empty embedding cache;
- embed_units_gather:  the gather of unit and question vectors from 4 shards (the shard files are the unsharded
                       table's rows split by `shards.bucket`, in table order, as the shard jobs write them);
- index_dense_flat:    the `index_dense` job, kind flat (index = N × 384 × 4 bytes);
- retrieve_dense_flat: the `retrieve_dense` job, global scope, depth 100, --queries questions;
- index_bm25:          the `index_bm25` job (Lucene through Pyserini, --threads; index = the Lucene folder's bytes);
- retrieve_bm25:       the `retrieve_bm25` job, global scope, depth 1000 (k = 1000 as the scale benchmark), --queries
                       questions (the index is read through memory-mapped files, counted in RSS as they are touched).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench_scale import DIM, PROJECT, SEED, Named, label, parse_size, peak_rss_mib, rule_main  # (one definition of each)

BLOCK = 4096
VOCABULARY = 20_000
SHARDS = 4
STAGES = ("idle", "embed_units", "embed_units_gather", "index_dense_flat", "retrieve_dense_flat", "index_bm25",
          "retrieve_bm25")


def vectors(start: int, stop: int) -> Any:
    """The stand-in vectors of units start … stop-1 (normalized float32)."""
    import numpy as np

    rows = []
    for block in range(start // BLOCK, (stop - 1) // BLOCK + 1):
        values = np.random.default_rng([SEED, block]).standard_normal((BLOCK, DIM), dtype=np.float32)
        low, high = max(start, block * BLOCK) - block * BLOCK, min(stop, (block + 1) * BLOCK) - block * BLOCK
        rows.append(values[low:high])
    matrix = np.concatenate(rows) if rows else np.zeros((0, DIM), np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


class Encoder:
    """Stands in for the SentenceTransformer in `dense.embed_units`: the next stream positions' vectors (units, then
    questions, in the order embed_units asks; every unit text is distinct, so each is asked for once)."""

    def __init__(self, fingerprint: str):
        from workflow_scripts.core.models import FINGERPRINT_ATTRIBUTE

        self.position = 0
        setattr(self, FINGERPRINT_ATTRIBUTE, fingerprint)

    def get_embedding_dimension(self) -> int:
        return DIM

    def encode(self, texts: list[str], **_: Any) -> Any:
        start, self.position = self.position, self.position + len(texts)
        return vectors(start, self.position)


def job(rule: str, threads: int, input: dict, output: dict, params: dict | None = None,
        wildcards: dict | None = None) -> Any:
    return SimpleNamespace(rule=rule, threads=threads, log=[], input=Named({k: str(v) for k, v in input.items()}),
                           output=Named({k: str(v) for k, v in output.items()}), params=Named(params or {}),
                           wildcards=Named({"dataset": "memory", **(wildcards or {})}))


def paths(work: Path, size: int) -> dict[str, Path]:
    base = work / "corpus" / label(size)
    return {name: base / f"{name}.parquet" for name in ("units", "questions", "unit_vectors", "question_vectors")} | {
        "shards": base / "shards", "index": base / "flat.faiss", "out": base / "out"}


def prepare(work: Path, size: int, queries: int) -> None:
    """Units, questions and their vectors (the unsharded embed_units' tables) and the shard files, once per size."""
    import numpy as np
    import polars as pl

    from workflow_scripts.core import shards
    from workflow_scripts.core.contracts import QUESTIONS, QUESTION_VECTORS, UNITS, UNIT_VECTORS
    from workflow_scripts.core.tables import TableWriter, frame

    files = paths(work, size)
    marker = files["units"].parent / "prepared.json"
    if marker.exists() and json.loads(marker.read_text()) == {"size": size, "queries": queries, "seed": SEED}:
        return
    shutil.rmtree(files["units"].parent, ignore_errors=True)
    files["shards"].mkdir(parents=True)
    rng = np.random.default_rng(SEED)
    words = np.array([f"w{i}" for i in range(VOCABULARY)])
    with TableWriter(files["units"], UNITS) as units, TableWriter(files["unit_vectors"], UNIT_VECTORS) as unit_vectors:
        for start in range(0, size, 50_000):
            stop = min(size, start + 50_000)
            drawn = words[rng.integers(0, VOCABULARY, size=(stop - start, 43))]
            ids = [f"u{i}" for i in range(start, stop)]
            units.write(pl.DataFrame({
                "dataset": "memory", "group_id": ids, "unit_id": ids, "kind": "passage", "section": None,
                "position": 0, "title": [" ".join(row[:3]) for row in drawn],
                "text": [f"{i} " + " ".join(row[3:]) for i, row in zip(range(start, stop), drawn)], "meta": None,
            }, schema_overrides={"section": pl.String, "meta": pl.String}))
            unit_vectors.write(pl.DataFrame({"unit_id": ids, "group_id": ids,
                                             "vector": list(vectors(start, stop))}))
    qids = [f"q{i}" for i in range(queries)]
    asked = words[rng.integers(0, VOCABULARY, size=(queries, 12))]
    with TableWriter(files["questions"], QUESTIONS) as writer:
        writer.write(frame([{"dataset": "memory", "qid": qid, "group_id": qid, "text": " ".join(row), "answers": [],
                             "gold_unit_ids": [], "unaligned_evidence": []}
                            for qid, row in zip(qids, asked)], QUESTIONS))
    with TableWriter(files["question_vectors"], QUESTION_VECTORS) as writer:
        writer.write(pl.DataFrame({"qid": qids, "vector": list(vectors(size, size + queries))}))
    for name, contract, column in (("unit_vectors", UNIT_VECTORS, "unit_id"),
                                   ("question_vectors", QUESTION_VECTORS, "qid")):
        table = pl.read_parquet(files[name])
        owner = pl.Series([shards.bucket(item, SHARDS) for item in table[column]])
        for index in range(SHARDS):
            with TableWriter(files["shards"] / f"{name}__{index}.parquet", contract) as writer:
                writer.write(table.filter(owner == index))
        del table
    marker.write_text(json.dumps({"size": size, "queries": queries, "seed": SEED}))


def run_stage(stage: str, work: Path, size: int, threads: int) -> dict[str, Any]:
    """Run one stage in this (child) process."""
    from workflow_scripts.jobs.runtime import run_job

    files = paths(work, size)
    out = files["out"] / stage
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    result: dict[str, Any] = {}
    began = time.perf_counter()
    if stage == "idle":
        from workflow_scripts.retrieval import dense  # noqa: F401 — what every stage imports
    elif stage == "embed_units":
        from workflow_scripts.retrieval import dense

        encoder = Encoder(f"bench-memory-{SEED}")
        dense.models.sentence_transformer = lambda *args, **kwargs: encoder  # the rule's own code around it
        run_job(rule_main(dense, "embed_units"),
                job("embed_units", threads, {"units": files["units"], "questions": files["questions"]},
                    {"vectors": out / "unit_vectors.parquet", "questions": out / "question_vectors.parquet"},
                    {"embedder": {"model": "stand-in", "device": "cpu", "batch_size": 64}, "title": "prepend",
                     "cache": out / "cache"}))
    elif stage == "embed_units_gather":
        from workflow_scripts.core import shards

        inputs = {f"{name}__{index}": files["shards"] / f"{table}__{index}.parquet"
                  for name, table in (("vectors", "unit_vectors"), ("questions", "question_vectors"))
                  for index in range(SHARDS)} | {"units": files["units"], "questions_table": files["questions"]}
        tables = {"vectors": {"contract": "unit_vectors", "as_in": "units", "column": "unit_id"},
                  "questions": {"contract": "question_vectors", "as_in": "questions_table", "column": "qid"}}
        smk = job("embed_units_gather", threads, inputs,
                  {"vectors": out / "unit_vectors.parquet", "questions": out / "question_vectors.parquet"},
                  {"tables": tables})
        run_job(lambda smk: None, smk)
    elif stage == "index_dense_flat":
        from workflow_scripts.retrieval import dense

        spec = {"kind": "flat", "nlist": None, "nprobe": None, "hnsw_m": None, "ef_search": None}
        run_job(rule_main(dense, "index_dense"), job("index_dense", threads, {"vectors": files["unit_vectors"]},
                                {"index": files["index"]}, {"index": spec}))
        result["index_mib"] = files["index"].stat().st_size / 2**20
    elif stage == "retrieve_dense_flat":
        from workflow_scripts.retrieval import dense

        run_job(rule_main(dense, "retrieve_dense"), job("retrieve_dense", threads,
                                {"questions": files["questions"], "question_vectors": files["question_vectors"],
                                 "vectors": files["unit_vectors"], "index": files["index"]},
                                {"ranking": out / "ranking.parquet"}, {"depth": 100}, {"scope": "global"}))
        result["index_mib"] = files["index"].stat().st_size / 2**20
    elif stage in ("index_bm25", "retrieve_bm25"):
        from workflow_scripts.retrieval import bm25

        index = files["units"].parent / "bm25"
        if stage == "index_bm25":
            shutil.rmtree(index, ignore_errors=True)
            run_job(rule_main(bm25, "index_bm25"), job("index_bm25", threads, {"units": files["units"]}, {"index": index},
                                   {"title": "prepend"}))
        else:
            run_job(rule_main(bm25, "retrieve_bm25"), job("retrieve_bm25", threads, {"index": index, "questions": files["questions"]},
                                   {"ranking": out / "ranking.parquet"},
                                   {"bm25": {"k1": 0.9, "b": 0.4, "remove_query": False}, "depth": 1000},
                                   {"scope": "global"}))
        result["index_mib"] = sum(path.stat().st_size for path in index.iterdir()) / 2**20
    result["seconds"] = time.perf_counter() - began
    return result


def check_embedded(work: Path, size: int) -> None:
    """embed_units (run by `run_stage`, in another process: its peak RSS is not this check's) wrote the stand-in's
    vectors in the units' order: the ids all, the vectors of the first 1,000 rows."""
    import numpy as np
    import pyarrow.parquet as pq

    files = paths(work, size)
    for name in ("unit_vectors", "question_vectors"):
        written, expected = (pq.ParquetFile(path) for path in (files["out"] / "embed_units" / f"{name}.parquet", files[name]))
        column = expected.schema_arrow.names[0]
        same_ids = written.read(columns=[column]).column(0).equals(expected.read(columns=[column]).column(0))
        first = [np.stack(table.read_row_group(0, columns=["vector"]).column(0).to_pylist()[:1000])
                 for table in (written, expected)]
        if not same_ids or not np.allclose(*first, atol=1e-6):
            sys.exit(f"embed_units wrote other {name} than the stand-in's ({size} units)")


def snapshot(work: Path, commit: str) -> Path:
    """`workflow_scripts` of `commit` exported under <work>/code/<commit> ("worktree": the working tree)."""
    if commit == "worktree":
        return PROJECT
    resolved = subprocess.run(["git", "rev-parse", "--short", commit], cwd=PROJECT, check=True, capture_output=True,
                              text=True).stdout.strip()
    folder = work / "code" / resolved
    if not (folder / "workflow_scripts").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", resolved, "workflow_scripts"], cwd=PROJECT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def child(args: argparse.Namespace, code: Path, phase: str, size: int) -> dict[str, Any]:
    result = args.work / "result.json"
    result.unlink(missing_ok=True)
    threads = str(args.threads)
    env = {**os.environ, **{name: threads for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
    process = subprocess.run([sys.executable, __file__, "--child", phase, "--size", str(size), "--work", str(args.work),
                              "--queries", str(args.queries), "--threads", threads, "--code-dir", str(code),
                              "--result", str(result)], cwd=PROJECT, env=env, capture_output=True, text=True)
    if process.returncode != 0:
        sys.exit(f"{phase} ({label(size)}, {code}) failed:\n{(process.stdout + process.stderr)[-3000:]}")
    return json.loads(result.read_text())


def child_main(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(args.code_dir))
    import workflow_scripts

    if Path(workflow_scripts.__file__).resolve().parent.parent != Path(args.code_dir).resolve():
        raise RuntimeError(f"workflow_scripts imported from {workflow_scripts.__file__}, not {args.code_dir}")
    if args.child == "prepare":
        prepare(args.work, args.size, args.queries)
        result: dict[str, Any] = {}
    else:
        result = run_stage(args.child, args.work, args.size, args.threads)
    Path(args.result).write_text(json.dumps({**result, "peak_mib": peak_rss_mib()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100k,800k")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--code", default="worktree", help="comma-separated commits (or 'worktree') to measure")
    parser.add_argument("--stages", default=",".join(STAGES[1:]), help="comma-separated stages (idle always runs)")
    parser.add_argument("--work", type=Path, default=PROJECT / "benchmarks" / ".memory")
    parser.add_argument("--child"), parser.add_argument("--size", type=int), parser.add_argument("--code-dir")
    parser.add_argument("--result")
    args = parser.parse_args()
    if args.child:
        return child_main(args)
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    sizes = [parse_size(text) for text in args.sizes.split(",")]
    codes = {commit: snapshot(args.work, commit) for commit in args.code.split(",")}
    for size in sizes:
        child(args, PROJECT, "prepare", size)
    measured: dict[str, dict[str, dict[str, Any]]] = {}
    for commit, code in codes.items():
        for stage in ("idle", *args.stages.split(",")):
            for size in sizes:
                result = child(args, code, stage, size)
                if stage == "embed_units":
                    check_embedded(args.work, size)
                measured.setdefault(commit, {}).setdefault(stage, {})[label(size)] = result
                print(f"{commit:>10} {stage:<20} {label(size):>5} peak {result['peak_mib']:8.0f} MiB"
                      f"  {result['seconds']:7.1f} s", flush=True)
    small, large = label(sizes[0]), label(sizes[-1])
    print(f"\n| code | stage | peak RSS {small} MiB | peak RSS {large} MiB | growth MiB | index {large} MiB | growth "
          f"beyond the index MiB | (RSS − idle − index) {large} / {small} |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    rows = []
    for commit, stages in measured.items():
        for stage, by_size in stages.items():
            if stage == "idle":
                continue
            idle = {size: stages["idle"][size]["peak_mib"] for size in (small, large)}
            index = {size: by_size[size].get("index_mib", 0.0) for size in (small, large)}
            beyond = {size: by_size[size]["peak_mib"] - idle[size] - index[size] for size in (small, large)}
            growth = beyond[large] - beyond[small]
            ratio = beyond[large] / beyond[small] if beyond[small] > 0 else float("nan")
            rows.append({"code": commit, "stage": stage, **{f"peak_{size}": by_size[size]["peak_mib"]
                                                            for size in (small, large)},
                         f"index_{large}": index[large], "growth_beyond_index": growth, "ratio": ratio})
            print(f"| {commit} | {stage} | {by_size[small]['peak_mib']:,.0f} | {by_size[large]['peak_mib']:,.0f} | "
                  f"{by_size[large]['peak_mib'] - by_size[small]['peak_mib']:,.0f} | {index[large]:,.0f} | "
                  f"{growth:,.0f} | {ratio:.2f} |")
    (args.work / f"bench_memory_{args.stages.replace(',', '+')}.json").write_text(json.dumps(
        {"sizes": sizes, "queries": args.queries, "threads": args.threads, "measured": measured, "rows": rows,
         "commits": {commit: "worktree" if code == PROJECT else code.name for commit, code in codes.items()},
         "load": os.getloadavg()}, indent=2))


if __name__ == "__main__":
    main()
