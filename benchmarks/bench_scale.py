"""Scale benchmark: how each retrieval stage's wall time and peak memory grow with the corpus, 10k → 100k → 1M units.

In:  the shared collections under ../shared/data (or --data); --sizes (default 10k,100k,1M), --threads (2),
     --slice (2,000: units really embedded per size), --queries (1,000), --work (scratch, default
     benchmarks/.scale/, git-ignored), --out (file prefix of the results, default benchmarks/bench_scale when all
     three default sizes run, else <work>/bench_scale_<sizes>), --code (head: the stages run a copy of
     workflow_scripts exported by `git archive HEAD` into <work>/code/<commit>, so that edits others make in the
     shared working tree during a run never reach the measured stages; worktree: the working tree as it is).
Out: a table on stdout; <out>.json (everything measured, the fits, recall, quality, machine), <out>.csv (one row per
     stage and size) and <out>.png (log-log plot of seconds against units, one line per stage).

Corpora (built once, cached under <work>/corpus/, nested: the 10k corpus is the first 10,000 units of the 100k one,
which is the first 100,000 units of the 1M one):
1. Real pool, in this order, every passage with a new id, its text's whitespace runs collapsed to one space (unit
   text = title + " " + text, the project's "prepend"; a passage whose unit text repeats an earlier one is dropped):
   - BEIR SciFact: the 5,183 abstracts (`scifact-<doc id>`), title and text;
   - 2WikiMultiHopQA: the 6,119 passages of hipporag_2wiki_corpus_6119.json.gz (`2wiki-<list index>`), title, text;
   - TREC DL19: the 4,297 distinct MS MARCO passages of BERGEN's candidate file (`dl19-<passage id>`), no title;
   - HotpotQA: the distinct paragraphs of ircot_format_dev_500.jsonl.gz (`hotpotqa-<first-occurrence index>`), title
     and text.
2. Queries (--queries, 1,000): SciFact's 300 test queries, 2Wiki's 354 covered dev questions, DL19's 43 topics, then
   HotpotQA IRCoT questions in file order (the first 303) until 1,000. Qrels: SciFact test qrels, 2Wiki's
   qrels_covered_354.tsv, DL19's graded qrels restricted to passages in the pool, HotpotQA's supporting paragraphs
   (relevance 1). Queries and qrels are the same files for every size; ids are prefixed like the units'.
3. Stream order: first every passage judged relevant (> 0) for a selected query, in pool order (so every corpus
   holds all relevant units), then the other real passages in a seeded permutation (numpy default_rng(SEED)).
4. Perturbed copies fill the stream beyond the real pool: copy j (j = 0, 1, ...) has the id `p<j>-<source id>`,
   the source's title, and the text of source S[j mod |S|], where S = the real passages of at least MIN_WORDS
   words in stream order, perturbed with random.Random(f"{SEED}:{j}:{attempt}"): every word (str.split) is dropped
   with probability DROPOUT (at least one kept), then one left-to-right pass swaps word i with word i+1 with
   probability SWAP. A result whose unit text equals any earlier unit text is redrawn with the next attempt.
5. The corpus of size N is the first N units of the stream, written as a BEIR folder (corpus.jsonl, queries.jsonl,
   qrels/test.tsv) and ingested through the project's `beir` adapter.

Vectors: every real passage and every query is really embedded once (all-MiniLM-L6-v2 through `dense.embed_texts`,
cached under <work>/cache/, untimed preparation). A copy's vector is derived, not embedded: normalize(v_source +
SIGMA * g / sqrt(384)), g ~ N(0, I) from numpy default_rng([SEED, j // 4096]) (row j mod 4096 of that block), so its
cosine to the source is about 1 / sqrt(1 + SIGMA^2). SIGMA is calibrated so that this matches the mean cosine between
a really embedded copy and its source (the benchmark re-measures it on the embedded slice at every size that holds
copies and prints both).

Stages, each in its own child process (peak RSS = that process's VmHWM, read from /proc/self/status at its end: the
JVM and torch live in it, so Java heap and native memory count), each calling the pipeline rule's own function on
Parquet files, through `jobs.runtime.run_job` as Snakemake's script directive does, with OMP/BLAS threads = --threads
in the environment as Snakemake sets them. "seconds" = that function's wall time (imports and interpreter start
excluded); "CPU" = its CPU seconds (time.process_time: user + system over all the process's threads, the JVM's and
OpenMP's included), fitted too, as a check that load from other processes on a shared machine moves far less than
wall time; "core" = the stage's central library call (in brackets below):
(each rule's job module `<stage>/jobs/<rule>.py`, or in an older tree the stage module's `main`: `rule_main`)
- ingest:        the `ingest` job (beir adapter → units/questions/qrels parquet + report) [build];
- splits:        the `splits` job (needed by evaluation);
- bm25_index:    the `index_bm25` job, --threads [bm25.build_index];
- bm25_search:   the `retrieve_bm25` job, global scope, all queries, depth k = 1000 [bm25.search];
- embed:         the `embed_units` job at full N with the encoder replaced by a lookup of the prepared vectors (so its
                 hashing, cache shards, stacking and Parquet writing are measured at N), plus the real model on a
                 seeded slice of --slice units (`dense.embed_texts`, empty cache, model loaded and warmed first);
                 reported seconds = embed_units at N without the lookup's own time + slice seconds × N / slice:
                 EXTRAPOLATED (marked "*"); peak RSS is the process's (model loaded + full-N bookkeeping);
- faiss_build_<flat|ivf|hnsw>:  the `index_dense` job with the config schema's defaults (ivf nlist 1024, nprobe 16;
                 hnsw M 32, efSearch 128, efConstruction 80 in dense.build_index) [dense.build_index];
- faiss_search_<kind>: the `retrieve_dense` job, global scope, depth 1000 [dense.search; "faiss" = index.search];
- arms:          the `run_arm` job for three arms: bm25, dense (flat) and hybrid (RRF k 60), candidates = keep = 1000;
- evaluate:      the `evaluate_arm` job (ir-measures nDCG@10, R@100, R@1000) for the three arms.
IVF and HNSW recall is measured against the flat ranking of the same run (recall@10 and recall@1000 of the top-k
unit sets). The exponent is the least-squares slope of log(seconds) on log(units) over the sizes run.
Targets: exponent <= 1.1 for every stage but flat search; peak RSS <= 8 GiB at 1M.

Usage: nice -n 10 .venv/bin/python benchmarks/bench_scale.py [--sizes 10k,100k,1M] [--threads 2] [--slice 2000]
       [--keep] [--code head|worktree]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import math
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))
SHARED_DATA = PROJECT.parent / "shared" / "data"
DEFAULT_WORK = PROJECT / "benchmarks" / ".scale"
DEFAULT_SIZES = "10k,100k,1M"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384
K = 1000
SEED = 20261202
DROPOUT = 0.10
SWAP = 0.10
MIN_WORDS = 20
SIGMA = 0.24  # calibrated: mean cos(embedded copy, source) 0.971 on 400 copies → sqrt(1/0.971² − 1) ≈ 0.24
NOISE_BLOCK = 4096
CORPUS_VERSION = 1
MEASURES = ["nDCG@10", "R@100", "R@1000"]
EXPONENT_TARGET = 1.1
MEMORY_TARGET_MIB = 8 * 1024
FAISS_KINDS = ("flat", "ivf", "hnsw")
ARMS = {
    "bm25": {"first_stage": "bm25", "candidates": K, "keep": K, "scope": "global", "rerank": None, "rrf_k": 60},
    "dense": {"first_stage": "dense", "candidates": K, "keep": K, "scope": "global", "rerank": None, "rrf_k": 60},
    "hybrid": {"first_stage": "hybrid", "candidates": K, "keep": K, "scope": "global", "rerank": None, "rrf_k": 60},
}
STAGES = (
    "ingest", "splits", "bm25_index", "bm25_search", "embed",
    *(f"faiss_build_{kind}" for kind in FAISS_KINDS), *(f"faiss_search_{kind}" for kind in FAISS_KINDS),
    "arms", "evaluate",
)
DATASET = "scale"


# ---- sizes and paths ----------------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    text = text.strip()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    return int(float(text[:-1] if factor > 1 else text) * factor)


def label(size: int) -> str:
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}M"
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def corpus_dir(work: Path, size: int) -> Path:
    return work / "corpus" / label(size)


def run_dir(work: Path, size: int) -> Path:
    return work / "runs" / label(size)


# ---- the real pool ------------------------------------------------------------------------------------------------


def _jsonl(path: Path) -> Iterator[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def unit_text(title: str, text: str) -> str:
    """What BM25 and the embedder read for a unit (`unit_text.unit_texts`, title "prepend")."""
    return f"{title} {text}" if title else text


def real_pool(data: Path, queries_wanted: int) -> tuple[list[dict], list[dict], list[tuple[str, str, int]]]:
    """(passages {unit_id, title, text} in pool order, queries {qid, text}, qrels (qid, unit_id, relevance))."""
    passages: list[dict] = []
    queries: list[dict] = []
    qrels: list[tuple[str, str, int]] = []

    def add(unit_id: str, title: str | None, text: str) -> None:
        passages.append({"unit_id": unit_id, "title": (title or "").strip(), "text": " ".join(text.split())})

    scifact = data / "beir-scifact"
    for record in _jsonl(scifact / "corpus.jsonl.gz"):
        add(f"scifact-{record['_id']}", record.get("title"), record["text"])
    queries += [{"qid": f"scifact-{r['_id']}", "text": r["text"]} for r in _jsonl(scifact / "queries.test.jsonl")]
    with open(scifact / "qrels" / "test.tsv", encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            qid, doc, score = line.split("\t")[:3]
            qrels.append((f"scifact-{qid}", f"scifact-{doc}", int(score)))

    two = data / "2wikimultihopqa"
    with gzip.open(two / "hipporag_2wiki_corpus_6119.json.gz", "rt", encoding="utf-8") as handle:
        for index, record in enumerate(json.load(handle)):
            add(f"2wiki-{index}", record["title"], record["text"])
    with open(two / "lag_dev_questions_covered_354.json", encoding="utf-8") as handle:
        queries += [{"qid": f"2wiki-{r['_id']}", "text": r["question"]} for r in json.load(handle)]
    with open(two / "qrels_covered_354.tsv", encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            qid, index, _, score = line.rstrip("\n").split("\t")
            qrels.append((f"2wiki-{qid}", f"2wiki-{index}", int(score)))

    dl19 = data / "trec-dl19-passage"
    seen_dl19: set[str] = set()
    with open(dl19 / "bergen-provence" / "rerank_file.trecdl19.spladev3.top50.txt", encoding="utf-8") as handle:
        for line in handle:
            _, pid, _, text = line.rstrip("\n").split("\t")
            if pid not in seen_dl19:
                seen_dl19.add(pid)
                add(f"dl19-{pid}", None, text)
    with open(dl19 / "topics.dl19-passage.txt", encoding="utf-8") as handle:
        queries += [{"qid": f"dl19-{q}", "text": t} for q, t in (line.rstrip("\n").split("\t") for line in handle)]
    with open(dl19 / "qrels.dl19-passage.txt", encoding="utf-8") as handle:
        for line in handle:
            qid, _, pid, grade = line.split()
            if pid in seen_dl19:
                qrels.append((f"dl19-{qid}", f"dl19-{pid}", int(grade)))

    paragraphs: dict[tuple[str, str], str] = {}
    hotpot_questions = []
    for record in _jsonl(data / "hotpotqa" / "ircot_format_dev_500.jsonl.gz"):
        qid = f"hotpotqa-{record['question_id']}"
        hotpot_questions.append({"qid": qid, "text": record["question_text"]})
        for context in record["contexts"]:
            key = (context["title"], context["paragraph_text"])
            if key not in paragraphs:
                paragraphs[key] = f"hotpotqa-{len(paragraphs)}"
                add(paragraphs[key], context["title"], context["paragraph_text"])
            if context["is_supporting"]:
                qrels.append((qid, paragraphs[key], 1))
    queries += hotpot_questions
    queries = queries[:queries_wanted]

    kept: list[dict] = []
    seen_text: set[str] = set()
    renamed: dict[str, str] = {}
    by_text: dict[str, str] = {}
    for passage in passages:
        content = unit_text(passage["title"], passage["text"])
        if not passage["text"]:
            continue
        if content in seen_text:
            renamed[passage["unit_id"]] = by_text[content]
            continue
        seen_text.add(content)
        by_text[content] = passage["unit_id"]
        kept.append(passage)
    wanted = {query["qid"] for query in queries}
    judged: dict[tuple[str, str], int] = {}
    for qid, unit_id, relevance in qrels:
        if qid in wanted:
            key = (qid, renamed.get(unit_id, unit_id))
            judged[key] = max(relevance, judged.get(key, relevance))
    return kept, queries, [(qid, unit_id, relevance) for (qid, unit_id), relevance in judged.items()]


def stream_order(passages: list[dict], qrels: list[tuple[str, str, int]]) -> list[dict]:
    """Relevant passages first (pool order), then the rest in a seeded permutation."""
    import numpy as np

    relevant = {unit_id for _, unit_id, relevance in qrels if relevance > 0}
    first = [passage for passage in passages if passage["unit_id"] in relevant]
    rest = [passage for passage in passages if passage["unit_id"] not in relevant]
    order = np.random.default_rng(SEED).permutation(len(rest))
    return first + [rest[index] for index in order]


def perturb(words: list[str], rng: random.Random) -> list[str]:
    """Word dropout (DROPOUT, at least one word kept), then one left-to-right pass of adjacent swaps (SWAP)."""
    kept = [word for word in words if rng.random() >= DROPOUT] or [words[rng.randrange(len(words))]]
    for index in range(len(kept) - 1):
        if rng.random() < SWAP:
            kept[index], kept[index + 1] = kept[index + 1], kept[index]
    return kept


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def copy_sources(real: list[dict]) -> list[int]:
    """Stream indices of the real passages that perturbed copies are made from (MIN_WORDS words or more)."""
    return [index for index, passage in enumerate(real) if len(passage["text"].split()) >= MIN_WORDS]


def unit_stream(real: list[dict], sources: list[int], size: int) -> Iterator[dict]:
    """The first `size` units of the stream (module docstring, items 3–4)."""
    seen = {_digest(unit_text(p["title"], p["text"])) for p in real}
    yield from real[:size]
    split_words = {}
    for j in range(max(0, size - len(real))):
        source = real[sources[j % len(sources)]]
        words = split_words.get(source["unit_id"])
        if words is None:
            words = split_words[source["unit_id"]] = source["text"].split()
        for attempt in range(100):
            text = " ".join(perturb(words, random.Random(f"{SEED}:{j}:{attempt}")))
            digest = _digest(unit_text(source["title"], text))
            if digest not in seen:
                break
        else:
            raise RuntimeError(f"copy {j} of {source['unit_id']}: 100 perturbations all repeat an earlier unit")
        seen.add(digest)
        yield {"unit_id": f"p{j}-{source['unit_id']}", "title": source["title"], "text": text}


def corpus_params(size: int, queries: int) -> dict[str, Any]:
    return {"version": CORPUS_VERSION, "seed": SEED, "dropout": DROPOUT, "swap": SWAP, "min_words": MIN_WORDS,
            "size": size, "queries": queries}


def build_corpora(sizes: list[int], work: Path, data: Path, queries_wanted: int) -> dict[str, Any]:
    """Write the BEIR folder of every size not built yet (one pass over the stream) and the prepared real pool."""
    real_path = work / "corpus" / "real.jsonl"
    info_path = work / "corpus" / "pool.json"
    missing = [s for s in sizes if not _fresh(corpus_dir(work, s) / "DONE", corpus_params(s, queries_wanted))]
    if not missing and real_path.is_file() and info_path.is_file():
        return json.loads(info_path.read_text())
    began = time.perf_counter()
    passages, queries, qrels = real_pool(data, queries_wanted)
    real = stream_order(passages, qrels)
    sources = copy_sources(real)
    (work / "corpus").mkdir(parents=True, exist_ok=True)
    with open(real_path, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(passage, ensure_ascii=False) + "\n" for passage in real)
    with open(work / "corpus" / "queries.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(query, ensure_ascii=False) + "\n" for query in queries)
    with ExitStack() as stack:
        handles = {}
        for size in missing:
            folder = corpus_dir(work, size)
            shutil.rmtree(folder, ignore_errors=True)
            (folder / "qrels").mkdir(parents=True)
            with open(folder / "queries.jsonl", "w", encoding="utf-8") as handle:
                handle.writelines(json.dumps({"_id": q["qid"], "text": q["text"]}, ensure_ascii=False) + "\n"
                                  for q in queries)
            with open(folder / "qrels" / "test.tsv", "w", encoding="utf-8") as handle:
                handle.write("query-id\tcorpus-id\tscore\n")
                handle.writelines(f"{qid}\t{unit_id}\t{relevance}\n" for qid, unit_id, relevance in qrels)
            handles[size] = stack.enter_context(open(folder / "corpus.jsonl", "w", encoding="utf-8"))
        for index, unit in enumerate(unit_stream(real, sources, max(missing, default=0))):
            line = json.dumps({"_id": unit["unit_id"], "title": unit["title"], "text": unit["text"]},
                              ensure_ascii=False)
            for size, handle in handles.items():
                if index < size:
                    handle.write(line + "\n")
    for size in missing:
        (corpus_dir(work, size) / "DONE").write_text(json.dumps(corpus_params(size, queries_wanted)))
    info = {
        "real_passages": len(real),
        "copy_sources": len(sources),
        "queries": len(queries),
        "qrels": len(qrels),
        "relevant_units": len({u for _, u, r in qrels if r > 0}),
        "queries_by_source": {name: sum(q["qid"].startswith(name + "-") for q in queries)
                              for name in ("scifact", "2wiki", "dl19", "hotpotqa")},
        "passages_by_source": {name: sum(p["unit_id"].startswith(name + "-") for p in real)
                               for name in ("scifact", "2wiki", "dl19", "hotpotqa")},
        "build_seconds": round(time.perf_counter() - began, 1),
    }
    info_path.write_text(json.dumps(info, indent=1))
    np_save_sources(work, sources)
    return info


def np_save_sources(work: Path, sources: list[int]) -> None:
    import numpy as np

    np.save(work / "corpus" / "copy_sources.npy", np.asarray(sources, dtype=np.int64))


def _fresh(marker: Path, params: dict[str, Any]) -> bool:
    return marker.is_file() and json.loads(marker.read_text()) == params


# ---- prepared vectors ---------------------------------------------------------------------------------------------


class Prepared:
    """The vector of every stream position: real embeddings for real passages, derived ones for copies."""

    def __init__(self, work: Path):
        import numpy as np

        self.np = np
        self.real = np.load(work / "corpus" / "real_vectors.npy")
        self.queries = np.load(work / "corpus" / "query_vectors.npy")
        self.sources = np.load(work / "corpus" / "copy_sources.npy")
        self._block: tuple[int, Any] | None = None

    def noise(self, block: int) -> Any:
        if self._block is None or self._block[0] != block:
            rng = self.np.random.default_rng([SEED, block])
            self._block = (block, rng.standard_normal((NOISE_BLOCK, DIM), dtype=self.np.float32))
        return self._block[1]

    def units(self, start: int, stop: int) -> Any:
        """Vectors of stream positions start..stop-1 (normalized float32)."""
        np = self.np
        out = np.empty((stop - start, DIM), dtype=np.float32)
        real = len(self.real)
        split = min(max(start, real), stop)
        if split > start:
            out[: split - start] = self.real[start:split]
        position = split
        while position < stop:
            j = position - real
            block, offset = divmod(j, NOISE_BLOCK)
            take = min(stop - position, NOISE_BLOCK - offset)
            js = np.arange(j, j + take)
            vectors = self.real[self.sources[js % len(self.sources)]] + SIGMA / math.sqrt(DIM) * self.noise(block)[
                offset : offset + take
            ]
            out[position - start : position - start + take] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
            position += take
        return out

    def rows(self, positions: Any) -> Any:
        return self.np.concatenate([self.units(int(p), int(p) + 1) for p in positions]) if len(positions) else None


class PreparedEncoder:
    """Stands in for the SentenceTransformer inside `dense.embed_units` at full N: answers each `encode` call with the
    prepared vectors of the next stream positions (units first, then questions, as embed_units asks for them; every
    unit text is unique, so embed_texts asks for every unit once, in table order)."""

    def __init__(self, prepared: Prepared, units: int, fingerprint: str):
        from workflow_scripts.core.models import FINGERPRINT_ATTRIBUTE

        self.prepared, self.units, self.position, self.seconds, self.cpu = prepared, units, 0, 0.0, 0.0
        setattr(self, FINGERPRINT_ATTRIBUTE, fingerprint)

    def get_embedding_dimension(self) -> int:
        return DIM

    def encode(self, texts: list[str], **_: Any) -> Any:
        began, cpu = time.perf_counter(), time.process_time()
        start, stop = self.position, self.position + len(texts)
        self.position = stop
        if stop <= self.units:
            vectors = self.prepared.units(start, stop)
        elif start >= self.units:
            vectors = self.prepared.queries[start - self.units : stop - self.units]
        else:
            raise RuntimeError("one encode call mixed units and questions")
        self.seconds += time.perf_counter() - began
        self.cpu += time.process_time() - cpu
        return vectors


# ---- child-process plumbing ---------------------------------------------------------------------------------------


class Named(dict):
    """A dict whose keys read as attributes too, like Snakemake's input/output/params objects."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def job(rule: str, threads: int, input: dict | None = None, output: dict | None = None, params: dict | None = None,
        wildcards: dict | None = None) -> Any:
    """The parts of Snakemake's `snakemake` object that the stage functions read."""
    return SimpleNamespace(
        rule=rule, threads=threads, log=[], input=Named({k: str(v) for k, v in (input or {}).items()}),
        output=Named({k: str(v) for k, v in (output or {}).items()}), params=Named(params or {}),
        wildcards=Named({"dataset": DATASET, **(wildcards or {})}),
    )


def rule_main(module: Any, rule: str) -> Callable[[Any], None]:
    """The job of `rule`: its thin module workflow_scripts/<stage>/jobs/<rule>.py (imported here, so after any Timer
    wrapped the library function it imports by name), or, in a tree from before the rules had job modules
    (`--code <commit>`), the stage module's `main`, which chose the rule's function by `smk.rule`."""
    import importlib

    package = module.__name__.rsplit(".", 1)[0]
    name = f"{package}.jobs.{rule}"
    try:
        return importlib.import_module(name).main
    except ModuleNotFoundError as missing:
        if missing.name not in (name, f"{package}.jobs"):  # the job module exists but an import of its own failed
            raise
        return module.main


class Timer:
    """Wraps module.name so that every call adds its wall seconds; `seconds` is None while it was never called."""

    def __init__(self, module: Any, name: str):
        self.total, self.calls = 0.0, 0
        original = getattr(module, name)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.total += time.perf_counter() - began
                self.calls += 1

        setattr(module, name, wrapped)

    @property
    def seconds(self) -> float | None:
        return self.total if self.calls else None


CPU_SECONDS = [0.0]  # CPU seconds (user + system, all threads: the JVM's and OpenMP's too) spent inside run_rule


def run_rule(function: Callable[[Any], None], smk: Any) -> float:
    """Run a stage function as Snakemake's script directive does (`run_job`); return its wall seconds (its CPU
    seconds are added to CPU_SECONDS)."""
    from workflow_scripts.jobs.runtime import run_job

    began, cpu = time.perf_counter(), time.process_time()
    run_job(function, smk)
    CPU_SECONDS[0] += time.process_time() - cpu
    return time.perf_counter() - began


def config_defaults() -> dict[str, Any]:
    """The config schema's defaults (what a config that sets nothing gets)."""
    from jsonschema import Draft202012Validator

    from workflow_scripts.core.schema import load_schema, with_defaults

    config: dict[str, Any] = {}
    for _ in with_defaults(Draft202012Validator)(load_schema()).iter_errors(config):
        pass
    return config


def arm_spec(name: str) -> dict[str, Any]:
    from workflow_scripts.config.validate import fill_arm_defaults

    config = {"arms": {name: dict(ARMS[name])}}
    fill_arm_defaults(config)
    return config["arms"][name]


class Paths:
    def __init__(self, work: Path, size: int):
        self.corpus = corpus_dir(work, size)
        self.run = run_dir(work, size)
        self.units = self.run / "units.parquet"
        self.questions = self.run / "questions.parquet"
        self.qrels = self.run / "qrels.parquet"
        self.splits = self.run / "splits.parquet"
        self.bm25_index = self.run / "index" / "bm25"
        self.bm25_ranking = self.run / "first_stage" / "bm25_global.parquet"
        self.vectors = self.run / "dense" / "unit_vectors.parquet"
        self.question_vectors = self.run / "dense" / "question_vectors.parquet"

    def faiss(self, kind: str) -> Path:
        return self.run / "index" / f"dense_{kind}.faiss"

    def dense_ranking(self, kind: str) -> Path:
        return self.run / "first_stage" / f"dense_global_{kind}.parquet"

    def arm_run(self, arm: str) -> Path:
        return self.run / "runs" / f"{arm}.parquet"

    def metrics(self, arm: str) -> Path:
        return self.run / "metrics" / f"{arm}.parquet"

    def summary(self, arm: str) -> Path:
        return self.run / "metrics" / f"{arm}.summary.parquet"


# ---- stages (each runs in its own child process) ------------------------------------------------------------------


def stage_ingest(args: argparse.Namespace, paths: Paths) -> dict[str, Any]:
    from workflow_scripts.ingest import stage as ingest

    spec = {"format": "beir", "corpus": paths.corpus / "corpus.jsonl", "queries": paths.corpus / "queries.jsonl",
            "qrels": paths.corpus / "qrels" / "test.tsv"}
    core = Timer(ingest, "build" if hasattr(ingest, "build") else "load_dataset")
    smk = job("ingest", args.threads, params={"spec": {k: str(v) for k, v in spec.items()}},
              output={"units": paths.units, "questions": paths.questions, "qrels": paths.qrels,
                      "report": paths.run / "ingest_report.json"})
    seconds = run_rule(rule_main(ingest, "ingest"), smk)
    report = json.loads((paths.run / "ingest_report.json").read_text())
    return {"seconds": seconds, "core": core.seconds, "units": report["units"], "questions": report["questions"],
            "corpus_mib": (paths.corpus / "corpus.jsonl").stat().st_size / 2**20}


def stage_splits(args: argparse.Namespace, paths: Paths) -> dict[str, Any]:
    from workflow_scripts.ingest import splits

    defaults = config_defaults()["splits"]
    smk = job("splits", 1, input={"questions": paths.questions}, output={"splits": paths.splits},
              params={"fractions": defaults["fractions"], "seed": defaults["seed"]})
    return {"seconds": run_rule(rule_main(splits, "splits"), smk)}


def stage_bm25_index(args: argparse.Namespace, paths: Paths) -> dict[str, Any]:
    from workflow_scripts.retrieval import bm25

    core = Timer(bm25, "build_index")
    smk = job("index_bm25", args.threads, input={"units": paths.units}, output={"index": paths.bm25_index},
              params={"title": config_defaults()["retrieval"]["title"]})
    seconds = run_rule(rule_main(bm25, "index_bm25"), smk)
    size = sum(f.stat().st_size for f in paths.bm25_index.iterdir())
    return {"seconds": seconds, "core": core.seconds, "java_heap_mib": java_heap_mib(), "index_mib": size / 2**20}


def java_heap_mib() -> float:
    from pyserini.pyclass import autoclass

    runtime = autoclass("java.lang.Runtime").getRuntime()
    return runtime.totalMemory() / 2**20


def stage_bm25_search(args: argparse.Namespace, paths: Paths) -> dict[str, Any]:
    from workflow_scripts.retrieval import bm25

    core = Timer(bm25, "search")
    smk = job("retrieve_bm25", args.threads, input={"index": paths.bm25_index, "questions": paths.questions},
              output={"ranking": paths.bm25_ranking}, wildcards={"scope": "global"},
              params={"bm25": config_defaults()["retrieval"]["bm25"], "depth": K})
    seconds = run_rule(rule_main(bm25, "retrieve_bm25"), smk)
    return {"seconds": seconds, "core": core.seconds, "java_heap_mib": java_heap_mib()}


def stage_embed(args: argparse.Namespace, paths: Paths) -> dict[str, Any]:
    import numpy as np

    from workflow_scripts.core import models
    from workflow_scripts.core.contracts import UNITS
    from workflow_scripts.core.tables import read_table
    from workflow_scripts.jobs.runtime import limit_threads
    from workflow_scripts.retrieval import dense
    from workflow_scripts.retrieval.unit_text import unit_texts

    limit_threads(args.threads)
    embedder = config_defaults()["models"]["embedder"]
    prepared = Prepared(args.work)
    units = read_table(paths.units, UNITS)
    count = units.height
    rows = np.sort(np.random.default_rng(SEED).choice(count, size=min(args.slice, count), replace=False))
    texts = unit_texts(units[rows.tolist()], "prepend")
    ids = units["unit_id"].to_list()
    stream_ids = [ids[int(row)] for row in rows]
    del units
    began = time.perf_counter()
    model = models.sentence_transformer(embedder["model"], device=embedder["device"])
    load = time.perf_counter() - began
    model.encode(texts[:32], batch_size=embedder["batch_size"])
    cache = paths.run / "dense" / "slice_cache"
    shutil.rmtree(cache, ignore_errors=True)
    began, cpu = time.perf_counter(), time.process_time()
    encoded = dense.embed_texts(texts, model, cache, embedder["batch_size"])
    slice_seconds, slice_cpu = time.perf_counter() - began, time.process_time() - cpu
    shutil.rmtree(cache, ignore_errors=True)
    check = calibration_check(prepared, rows, stream_ids, encoded)
    del texts, encoded

    stub = PreparedEncoder(prepared, count, "bench-scale-prepared-" + json.dumps(corpus_params(count, 0)))
    load_model = dense.models.sentence_transformer
    dense.models.sentence_transformer = lambda *args, **kwargs: stub  # the rest of embed_units runs unchanged, at full N
    cache = paths.run / "dense" / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    smk = job("embed_units", args.threads, input={"units": paths.units, "questions": paths.questions},
              output={"vectors": paths.vectors, "questions": paths.question_vectors},
              params={"embedder": embedder, "title": "prepend", "cache": cache})
    try:
        bookkeeping = run_rule(rule_main(dense, "embed_units"), smk) - stub.seconds
    finally:
        dense.models.sentence_transformer = load_model
    bookkeeping_cpu = CPU_SECONDS[0] - stub.cpu
    shutil.rmtree(cache, ignore_errors=True)
    questions = len(prepared.queries)
    if stub.position != count + questions:
        raise RuntimeError(f"embed_units asked for {stub.position} vectors, expected {count} units + {questions}")
    encode = slice_seconds * count / len(rows)
    return {"seconds": bookkeeping + encode, "cpu": bookkeeping_cpu + slice_cpu * count / len(rows),
            "extrapolated": True, "slice_units": len(rows), "slice_seconds": slice_seconds, "slice_cpu": slice_cpu,
            "encode_extrapolated": encode, "bookkeeping": bookkeeping, "bookkeeping_cpu": bookkeeping_cpu,
            "lookup_seconds": stub.seconds, "model_load": load, "calibration": check}


def calibration_check(prepared: Prepared, rows: Any, ids: list[str], encoded: Any) -> dict[str, Any]:
    """On the slice's copies: mean cosine to the source of the real embedding and of the derived vector."""
    import numpy as np

    real = len(prepared.real)
    copies = [i for i, row in enumerate(rows) if row >= real]
    if not copies:
        return {"copies": 0}
    derived = prepared.rows(rows[copies])
    sources = prepared.real[prepared.sources[(rows[copies] - real) % len(prepared.sources)]]
    actual = encoded[copies]
    if not all(ids[i].startswith("p") for i in copies):
        raise RuntimeError("the slice's copy rows do not match the stream order")
    return {
        "copies": len(copies),
        "cos_real_embedding_to_source": float(np.mean(np.sum(actual * sources, axis=1))),
        "cos_derived_to_source": float(np.mean(np.sum(derived * sources, axis=1))),
        "cos_real_embedding_to_derived": float(np.mean(np.sum(actual * derived, axis=1))),
    }


def faiss_params(kind: str) -> dict[str, Any]:
    return {**config_defaults()["retrieval"]["dense_index"], "kind": kind}


def stage_faiss_build(args: argparse.Namespace, paths: Paths, kind: str) -> dict[str, Any]:
    from workflow_scripts.retrieval import dense

    core = Timer(dense, "build_index")
    smk = job("index_dense", args.threads, input={"vectors": paths.vectors}, output={"index": paths.faiss(kind)},
              params={"index": faiss_params(kind)})
    seconds = run_rule(rule_main(dense, "index_dense"), smk)
    return {"seconds": seconds, "core": core.seconds, "index_mib": paths.faiss(kind).stat().st_size / 2**20,
            "params": faiss_params(kind)}


class TimedIndex:
    """A loaded FAISS index whose `search` calls are timed (dense.search reads only ntotal and search)."""

    def __init__(self, index: Any):
        self.index, self.ntotal, self.seconds = index, index.ntotal, 0.0

    def search(self, *args: Any) -> Any:
        began = time.perf_counter()
        try:
            return self.index.search(*args)
        finally:
            self.seconds += time.perf_counter() - began


def stage_faiss_search(args: argparse.Namespace, paths: Paths, kind: str) -> dict[str, Any]:
    from workflow_scripts.retrieval import dense

    loaded: list[TimedIndex] = []
    load_index = dense.load_index

    def timed_load(path: Path) -> TimedIndex:
        loaded.append(TimedIndex(load_index(path)))
        return loaded[-1]

    dense.load_index = timed_load
    core = Timer(dense, "search")
    smk = job("retrieve_dense", args.threads,
              input={"questions": paths.questions, "vectors": paths.vectors,
                     "question_vectors": paths.question_vectors, "index": paths.faiss(kind)},
              output={"ranking": paths.dense_ranking(kind)}, params={"depth": K}, wildcards={"scope": "global"})
    seconds = run_rule(rule_main(dense, "retrieve_dense"), smk)
    return {"seconds": seconds, "core": core.seconds, "faiss": loaded[0].seconds}


def stage_arms(args: argparse.Namespace, paths: Paths) -> dict[str, Any]:
    from workflow_scripts.retrieval import arms

    seconds = 0.0
    for name in ARMS:
        smk = job("run_arm", 1, input={"bm25": paths.bm25_ranking, "dense": paths.dense_ranking("flat")},
                  output={"run": paths.arm_run(name), "trec": paths.arm_run(name).with_suffix(".trec")},
                  params={"arm": arm_spec(name)}, wildcards={"arm": name})
        seconds += run_rule(rule_main(arms, "run_arm"), smk)
    return {"seconds": seconds}


def stage_evaluate(args: argparse.Namespace, paths: Paths) -> dict[str, Any]:
    from workflow_scripts.retrieval import evaluate

    seconds = 0.0
    for name in ARMS:
        smk = job("evaluate_arm", 1, input={"run": paths.arm_run(name), "qrels": paths.qrels, "splits": paths.splits},
                  output={"metrics": paths.metrics(name), "summary": paths.summary(name)},
                  params={"measures": MEASURES}, wildcards={"arm": name})
        seconds += run_rule(rule_main(evaluate, "evaluate_arm"), smk)
    return {"seconds": seconds}


def run_stage(args: argparse.Namespace) -> dict[str, Any]:
    paths = Paths(args.work, args.size)
    stage = args.phase
    if stage.startswith("faiss_build_"):
        return stage_faiss_build(args, paths, stage.removeprefix("faiss_build_"))
    if stage.startswith("faiss_search_"):
        return stage_faiss_search(args, paths, stage.removeprefix("faiss_search_"))
    return globals()[f"stage_{stage}"](args, paths)


def prepare_vectors(args: argparse.Namespace) -> dict[str, Any]:
    """Child: really embed the real pool and the queries (cached by content), saved in stream order."""
    import numpy as np

    from workflow_scripts.core import models
    from workflow_scripts.core.cache import content_key, read_cache
    from workflow_scripts.core.contracts import EMBEDDING_CACHE
    from workflow_scripts.jobs.runtime import limit_threads
    from workflow_scripts.retrieval import dense

    limit_threads(args.threads)
    embedder = config_defaults()["models"]["embedder"]
    texts = [unit_text(p["title"], p["text"]) for p in _jsonl(args.work / "corpus" / "real.jsonl")]
    queries = [q["text"] for q in _jsonl(args.work / "corpus" / "queries.jsonl")]
    model = models.sentence_transformer(embedder["model"], device=embedder["device"])
    cache = args.work / "cache" / "embeddings"
    keys = {content_key(models.model_fingerprint(model), text) for text in texts}
    missing = len(keys) - read_cache(cache, keys, EMBEDDING_CACHE).height
    began = time.perf_counter()
    vectors = dense.embed_texts(texts, model, cache, embedder["batch_size"])
    seconds = time.perf_counter() - began
    query_vectors = dense.embed_texts(queries, model, cache, embedder["batch_size"])
    np.save(args.work / "corpus" / "real_vectors.npy", vectors)
    np.save(args.work / "corpus" / "query_vectors.npy", query_vectors)
    return {"units": len(texts), "encoded": missing, "seconds": seconds}


def peak_rss_mib() -> float:
    """This process's peak resident set since its exec (VmHWM). Not ru_maxrss: that also counts the parent's pages
    the child held between fork and exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def child_main(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(args.code_dir))  # the pinned copy of workflow_scripts, ahead of the working tree
    import workflow_scripts

    where = Path(workflow_scripts.__file__).resolve().parent.parent
    if where != Path(args.code_dir).resolve():
        raise RuntimeError(f"workflow_scripts imported from {where}, not from the pinned {args.code_dir}")
    result = prepare_vectors(args) if args.phase == "prepare_vectors" else run_stage(args)
    result.setdefault("cpu", CPU_SECONDS[0])
    Path(args.result).write_text(json.dumps({**result, "peak_mib": peak_rss_mib()}))


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=PROJECT, check=True, capture_output=True, text=True).stdout


def code_snapshot(args: argparse.Namespace) -> dict[str, Any]:
    """Pin the stage code: `git archive HEAD workflow_scripts` into <work>/code/<commit> (--code head), so edits
    other people make in the working tree during a run never reach the measured stages; or the working tree."""
    commit = git("rev-parse", "HEAD").strip()
    uncommitted = git("status", "--porcelain", "--", "workflow_scripts").splitlines()
    if args.code == "worktree":
        args.code_dir = PROJECT
        return {"code": "working tree", "commit": commit, "uncommitted_measured": uncommitted}
    folder = args.work / "code" / commit
    if not (folder / "workflow_scripts").is_dir():
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", commit, "workflow_scripts"], cwd=PROJECT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
        partial.rename(folder)
    args.code_dir = folder
    return {"code": "HEAD", "commit": commit, "uncommitted_not_measured": uncommitted}


# ---- parent: running, fitting, reporting --------------------------------------------------------------------------


def child(args: argparse.Namespace, phase: str, size: int, log_dir: Path) -> dict[str, Any]:
    """Run one phase in a fresh interpreter; return its result with the process's peak RSS and wall seconds."""
    log_dir.mkdir(parents=True, exist_ok=True)
    result_path = log_dir / f"{phase}.json"
    result_path.unlink(missing_ok=True)
    command = [sys.executable, __file__, "--phase", phase, "--size", str(size), "--work", str(args.work),
               "--threads", str(args.threads), "--slice", str(args.slice), "--result", str(result_path),
               "--code-dir", str(args.code_dir)]
    threads = str(args.threads)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           **{name: threads for name in ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                         "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")}}
    began, load = time.perf_counter(), os.getloadavg()[0]
    with open(log_dir / f"{phase}.log", "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=PROJECT)
        process.wait()
    wall = time.perf_counter() - began
    if process.returncode != 0:
        tail = (log_dir / f"{phase}.log").read_text(errors="replace")[-3000:]
        sys.exit(f"{phase} ({label(size)}) failed with exit status {process.returncode}:\n{tail}")
    return {**json.loads(result_path.read_text()), "process_seconds": wall,
            "load_before": load, "load_after": os.getloadavg()[0]}


def fit(sizes: list[int], seconds: list[float]) -> float | None:
    """Least-squares slope of log(seconds) on log(units)."""
    points = [(math.log(s), math.log(t)) for s, t in zip(sizes, seconds) if t and t > 0]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)


def recall(paths: Paths, kind: str, depth: int) -> float:
    """Mean over queries of |top-depth of `kind` ∩ top-depth of flat| / |top-depth of flat|."""
    import polars as pl

    def top(path: Path) -> pl.DataFrame:
        return pl.read_parquet(path).filter(pl.col("rank") <= depth).select("qid", "unit_id")

    truth = top(paths.dense_ranking("flat"))
    found = top(paths.dense_ranking(kind)).with_columns(pl.lit(1).alias("hit"))
    joined = truth.join(found, on=["qid", "unit_id"], how="left")
    per_query = joined.group_by("qid").agg((pl.col("hit").fill_null(0).sum() / pl.len()).alias("recall"))
    return float(per_query["recall"].mean())


def quality(paths: Paths) -> dict[str, dict[str, float]]:
    import polars as pl

    return {name: {row["measure"]: row["mean"] for row in pl.read_parquet(paths.summary(name))
                   .filter(pl.col("split") == "all").iter_rows(named=True)} for name in ARMS}


NAMES = {
    "ingest": "ingest (beir adapter → units.parquet)",
    "splits": "splits",
    "bm25_index": "BM25 index (Lucene, 2 threads)",
    "bm25_search": f"BM25 search (1,000 queries, k={K})",
    "embed": "embedding* (MiniLM, extrapolated)",
    "faiss_build_flat": "FAISS flat build",
    "faiss_build_ivf": "FAISS IVF build (nlist 1024)",
    "faiss_build_hnsw": "FAISS HNSW build (M 32)",
    "faiss_search_flat": f"FAISS flat search (k={K})",
    "faiss_search_ivf": f"FAISS IVF search (nprobe 16, k={K})",
    "faiss_search_hnsw": f"FAISS HNSW search (ef 128, k={K})",
    "arms": "arm assembly (bm25, dense, hybrid)",
    "evaluate": "evaluation (ir-measures, 3 arms)",
}


def report_rows(sizes: list[int], results: dict[int, dict[str, dict]]) -> list[dict[str, Any]]:
    rows = []
    for stage in STAGES:
        seconds = [results[size][stage]["seconds"] for size in sizes]
        cpus = [results[size][stage]["cpu"] for size in sizes]
        cores = [results[size][stage].get("core") for size in sizes]
        segments = [fit(sizes[i : i + 2], seconds[i : i + 2]) for i in range(len(sizes) - 1)]
        exponent = fit(sizes, seconds)
        largest = results[sizes[-1]][stage]
        rows.append({
            "stage": stage, "name": NAMES[stage], "seconds": seconds, "cpu": cpus, "core": cores, "exponent": exponent,
            "segments": segments, "cpu_exponent": fit(sizes, cpus),
            "core_exponent": fit(sizes, cores) if all(cores) else None,
            "peak_mib": [results[size][stage]["peak_mib"] for size in sizes], "peak_mib_largest": largest["peak_mib"],
            "extrapolated": bool(largest.get("extrapolated")),
            "exponent_target_met": None if exponent is None or stage == "faiss_search_flat"
            else exponent <= EXPONENT_TARGET,
            "cpu_exponent_target_met": None if exponent is None or stage == "faiss_search_flat"
            else fit(sizes, cpus) <= EXPONENT_TARGET,
            "memory_target_met": largest["peak_mib"] <= MEMORY_TARGET_MIB,
        })
    return rows


def print_table(sizes: list[int], rows: list[dict[str, Any]]) -> None:
    def number(value: float | None, width: int) -> str:
        return f"{value:{width}.2f}" if value is not None else f"{'-':>{width}}"

    head = "".join(f"{label(s) + ' s':>10}" for s in sizes)
    segs = " ".join(f"{label(a)}→{label(b)}" for a, b in pairwise(sizes))
    print(f"\n{'stage (wall seconds)':<40}{head}{'exp':>6}{'exp CPU':>8}  (wall {segs})"
          f"{'peak MiB ' + label(sizes[-1]):>15}  target (exp on wall, CPU; memory)")
    for row in rows:
        cells = "".join(f"{value:10.2f}" for value in row["seconds"])
        segments = " ".join(f"{value:.2f}" if value is not None else "-" for value in row["segments"])
        verdict = []
        if row["exponent_target_met"] is not None:
            verdict.append(("ok" if row["exponent_target_met"] else "MISSED") + ", "
                           + ("ok" if row["cpu_exponent_target_met"] else "MISSED"))
        verdict.append("mem ok" if row["memory_target_met"] else "MEM MISSED")
        print(f"{row['name']:<40}{cells}{number(row['exponent'], 6)}{number(row['cpu_exponent'], 8)}  ({segments})"
              f"{row['peak_mib_largest']:15.0f}  {'; '.join(verdict)}")
    print("* embedding: the encoder's time is measured on a seeded slice and extrapolated linearly to N; the rest of "
          "embed_units (hashing, cache shards, stacking, Parquet) is measured at N")


def plot(sizes: list[int], rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(9, 5.6))
    markers = "osD^v<>phX*P8"
    colors = plt.get_cmap("tab20").colors
    for index, row in enumerate(rows):
        exponent = f"{row['exponent']:.2f}" if row["exponent"] is not None else "-"
        color = colors[(2 * index) % 20 + (2 * index) // 20]
        axis.plot(sizes, row["seconds"], marker=markers[index % len(markers)], color=color,
                  linestyle="--" if row["extrapolated"]
                  else "-", label=f"{row['name']} (slope {exponent})")
    low = min(min(row["seconds"]) for row in rows)
    axis.plot(sizes, [low * s / sizes[0] for s in sizes], color="grey", linestyle=":", label="slope 1 (reference)")
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("corpus units")
    axis.set_ylabel("wall seconds")
    axis.set_xticks(sizes, [label(s) for s in sizes])
    axis.set_title("ragfrontier retrieval stages vs corpus size (2 CPU cores)")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    figure.tight_layout()
    figure.savefig(path, dpi=90, bbox_inches="tight")


def write_csv(sizes: list[int], results: dict[int, dict[str, dict]], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["stage", "units", "seconds", "cpu_seconds", "core_seconds", "peak_rss_mib", "extrapolated",
                         "load_before"])
        for stage in STAGES:
            for size in sizes:
                result = results[size][stage]
                core = result.get("core")
                writer.writerow([stage, size, f"{result['seconds']:.3f}", f"{result['cpu']:.3f}",
                                 "" if core is None else f"{core:.3f}", f"{result['peak_mib']:.0f}",
                                 bool(result.get("extrapolated")), f"{result['load_before']:.2f}"])


def machine() -> dict[str, Any]:
    memory = next((int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")), 0)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpus": os.cpu_count(), "cpu": cpu, "memory_gib": round(memory / 2**20, 1),
            "python": platform.python_version()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated corpus sizes (10k, 100k, 1M, ...)")
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK)
    parser.add_argument("--out", type=Path, help="results file prefix (.json/.csv/.png are added)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--slice", type=int, default=2000, help="units really embedded per size")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--keep", action="store_true", help="keep each size's indexes and tables after it is measured")
    parser.add_argument("--code", choices=["head", "worktree"], default="head",
                        help="measure workflow_scripts as committed at HEAD (a pinned copy; default) or the "
                        "working tree")
    parser.add_argument("--code-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.work = args.work.resolve()
    if args.phase:
        child_main(args)
        return
    sizes = sorted({parse_size(part) for part in args.sizes.split(",")})
    out = args.out or (PROJECT / "benchmarks" / "bench_scale" if args.sizes == DEFAULT_SIZES
                       else args.work / f"bench_scale_{'_'.join(label(s) for s in sizes)}")
    started = datetime.now()
    code = code_snapshot(args)
    print(f"scale benchmark, {started:%Y-%m-%d %H:%M}, sizes {', '.join(label(s) for s in sizes)}, "
          f"{os.cpu_count()} CPUs, threads {args.threads}, workflow_scripts at {code['commit'][:7]} ({code['code']})",
          flush=True)
    began = time.perf_counter()
    pool = build_corpora(sizes, args.work, args.data, args.queries)
    print(f"corpora ready ({time.perf_counter() - began:.0f} s): {pool['real_passages']:,} real passages, "
          f"{pool['copy_sources']:,} copy sources, {pool['queries']} queries", flush=True)
    prepared = child(args, "prepare_vectors", 0, args.work / "logs")  # encodes only texts missing from its cache
    print(f"real vectors ready: {prepared['units']:,} passages, {prepared['encoded']:,} encoded now in "
          f"{prepared['seconds']:.0f} s (peak {prepared['peak_mib']:.0f} MiB)", flush=True)
    results: dict[int, dict[str, dict]] = {}
    extra: dict[int, dict[str, Any]] = {}
    for size in sizes:
        shutil.rmtree(run_dir(args.work, size), ignore_errors=True)
        run_dir(args.work, size).mkdir(parents=True)
        results[size] = {}
        for stage in STAGES:
            result = child(args, stage, size, args.work / "logs" / label(size))
            results[size][stage] = result
            print(f"{label(size):>5} {stage:<20} {result['seconds']:9.2f} s  CPU {result['cpu']:9.2f} s  peak "
                  f"{result['peak_mib']:7.0f} MiB  (process {result['process_seconds']:.1f} s, load "
                  f"{result['load_before']:.1f}→{result['load_after']:.1f})", flush=True)
        paths = Paths(args.work, size)
        extra[size] = {
            "recall_vs_flat": {kind: {f"@{d}": recall(paths, kind, d) for d in (10, K)} for kind in ("ivf", "hnsw")},
            "quality": quality(paths),
            "load_average": os.getloadavg(),
        }
        print(f"{label(size):>5} recall vs flat: {json.dumps(extra[size]['recall_vs_flat'])}", flush=True)
        if not args.keep:
            shutil.rmtree(run_dir(args.work, size), ignore_errors=True)
    rows = report_rows(sizes, results)
    print_table(sizes, rows)
    largest = sizes[-1]
    print(f"\nFAISS at {label(largest)} ({args.queries} queries, k={K}; recall of the top-k unit sets against flat)")
    print(f"{'index':<6}{'build s':>10}{'search s':>10}{'faiss s':>10}{'recall@10':>11}{'recall@1000':>13}"
          f"{'peak MiB':>10}")
    for kind in FAISS_KINDS:
        build, search = results[largest][f"faiss_build_{kind}"], results[largest][f"faiss_search_{kind}"]
        recalls = extra[largest]["recall_vs_flat"].get(kind, {"@10": 1.0, f"@{K}": 1.0})
        print(f"{kind:<6}{build['seconds']:10.2f}{search['seconds']:10.2f}{search['faiss']:10.2f}"
              f"{recalls['@10']:11.4f}{recalls[f'@{K}']:13.4f}{max(build['peak_mib'], search['peak_mib']):10.0f}")
    print("\nretrieval quality by corpus size (all queries; distractors grow with N)")
    for size in sizes:
        cells = "  ".join(f"{arm} " + " ".join(f"{m} {v:.4f}" for m, v in sorted(q.items()))
                          for arm, q in extra[size]["quality"].items())
        print(f"{label(size):>5}  {cells}")
    for size in sizes:
        check = results[size]["embed"]["calibration"]
        if check.get("copies"):
            print(f"{label(size):>5} SIGMA check on {check['copies']} embedded copies: cos(real embedding, source) "
                  f"{check['cos_real_embedding_to_source']:.4f}, cos(derived, source) "
                  f"{check['cos_derived_to_source']:.4f}, "
                  f"cos(real embedding, derived) {check['cos_real_embedding_to_derived']:.4f}")
    total = time.perf_counter() - began
    print(f"\ntotal {total / 60:.1f} min; load average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "date": started.isoformat(timespec="minutes"), "machine": machine(), "threads": args.threads, "code": code,
        "sizes": sizes, "queries": args.queries, "k": K, "slice": args.slice, "sigma": SIGMA, "seed": SEED,
        "pool": pool, "prepare_vectors": prepared, "stages": rows, "results": {label(s): results[s] for s in sizes},
        "extra": {label(s): extra[s] for s in sizes}, "total_seconds": total,
    }
    Path(f"{out}.json").write_text(json.dumps(document, indent=1))
    write_csv(sizes, results, Path(f"{out}.csv"))
    plot(sizes, rows, Path(f"{out}.png"))
    print(f"wrote {out}.json, {out}.csv, {out}.png")


if __name__ == "__main__":
    main()
