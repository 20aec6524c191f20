"""A tiny demo DAG for the reliability suites (fault, determinism, SLURM): three QASPER papers, eight questions,
Keep / Hybrid / dense arms, one answered policy on the three calibration questions with a few generated tokens.
Every stage family runs (ingest, Lucene and dense indexing, LLM reranking, generation, judging, summaries); on
two idle cores it takes about a minute, most of it SmolLM2.

Each run gets its own empty results cache (embeddings, reranker scores, LLM calls), so nothing is served from
an earlier run; only the model-format conversion cache (results/cache/models: SmolLM2's GGUF weights turned
into a transformers checkpoint, content-addressed, no results in it) is shared with the other workflow tests.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import polars as pl
import yaml
from conftest import PROJECT_ROOT
from workflow_helpers import SHARED_CACHE, make_workdir, snakemake

DATASET = "mini"
TINY_CONFIG = {
    "datasets": {DATASET: {"format": "qasper", "path": "data/qasper_mini.json"}},
    "arms": {
        "dense": {"first_stage": "dense", "candidates": 3, "keep": 3, "scope": "group"},
        "keep": {"first_stage": "dense", "candidates": 3, "rerank": "smollm2_yes_no", "keep": 2, "scope": "group"},
        "hybrid": {
            "first_stage": "hybrid", "candidates": 3, "rerank": "smollm2_yes_no", "keep": 2, "scope": "group",
            "fusion_depth": 10,
        },
    },
    "evaluation": {"measures": ["Success@3", "nDCG@3"]},
    "routing": {"pairs": {}, "bootstrap": {"resamples": 200}},
    "generation": {"policies": ["keep"], "splits": ["calibration"], "judge_reasks": 0},
}
# Columns that measure time (or say whether a row came from the cache), so they legitimately differ between
# two runs; every other value of every table must be identical.
VOLATILE_COLUMNS = {
    "answers/keep.parquet": ("latency_s", "source"),
    "cost/ledger.parquet": ("seconds", "job_seconds"),
    "cost/stages.csv": ("seconds",),
}


def tiny_config(model_overrides: dict | None = None) -> dict:
    """The tiny config: the default models with small generation settings (and `model_overrides` merged in)."""
    models = yaml.safe_load((PROJECT_ROOT / "config.yaml").read_text())["models"]
    models["rerankers"]["smollm2_yes_no"]["max_passage_tokens"] = 64
    for role in ("generator", "judge"):
        models[role] |= {"max_prompt_tokens": 384, "shard_size": 2, "sampling": {"max_new_tokens": 4}}
    for role, override in (model_overrides or {}).items():
        if role == "rerankers":  # the same settings for every reranker
            models[role] = {name: spec | override for name, spec in models[role].items()}
        else:
            models[role] = models[role] | override
    return TINY_CONFIG | {"models": models}


def tiny_workdir(tmp_path: Path, model_overrides: dict | None = None) -> Path:
    """A workdir with the tiny config, the mini dataset and a private results cache (models conversion shared)."""
    work = make_workdir(tmp_path, tiny_config(model_overrides))
    shutil.copy(PROJECT_ROOT / "tests" / "data" / "qasper_mini.json", work / "data" / "qasper_mini.json")
    cache = work / "results" / "cache"
    cache.unlink()
    cache.mkdir()
    (SHARED_CACHE / "models").mkdir(parents=True, exist_ok=True)
    (cache / "models").symlink_to(SHARED_CACHE / "models")
    return work


# A sharded run (config `shards`) runs these stages as two jobs each, joined by their gathers. Sharding changes
# which items share a batch, and on CPU a float32 row's result moves with its batch's shape (embeddings by ~1e-7,
# reranker scores by ~2e-6, token entropies by ~1e-6 on this DAG: same rankings and answer texts), so runs whose
# tables are compared across sharding compute one item at a time (UNBATCHED): then only sharding could differ.
SHARDS = {"embed_units": 2, "rerank": 2, "generate_answers": 2, "judge_answers": 2}
UNBATCHED = {"embedder": {"batch_size": 1}, "generator": {"batch_size": 1}, "judge": {"batch_size": 1},
             "rerankers": {"batch_size": 1}}


def shard(work: Path, shards: dict[str, int] = SHARDS) -> Path:
    """Set config `shards` in a workdir made by `tiny_workdir`."""
    config = work / "config.yaml"
    config.write_text(yaml.safe_dump(yaml.safe_load(config.read_text()) | {"shards": shards}))
    return work


def result_files(work: Path) -> dict[str, Path]:
    """Relative path → file of every result of the dataset (tables, runs, reports), hidden files included, except
    the Lucene index: its segment files carry their own ids and timestamps and its manifest the build time (the
    rankings read from it are compared instead), and a sharded run's per-shard files (`<table>.shards/`), which
    only it has: its gathered tables are compared."""
    root = work / "results" / DATASET
    return {
        str(path.relative_to(root)): path
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.relative_to(root).parts[:2] != ("index", "bm25")
        and not any(part.endswith(".shards") for part in path.relative_to(root).parts)
    }


def differences(work_a: Path, work_b: Path) -> list[str]:
    """Every result file that differs between two workdirs: byte for byte, except VOLATILE_COLUMNS, which are
    dropped before the remaining columns are compared value for value."""
    files_a, files_b = result_files(work_a), result_files(work_b)
    problems = [f"only in one run: {name}" for name in sorted(set(files_a) ^ set(files_b))]
    for name in sorted(set(files_a) & set(files_b)):
        if name in VOLATILE_COLUMNS:
            read = pl.read_parquet if name.endswith(".parquet") else pl.read_csv
            frames = [read(files[name]).drop(VOLATILE_COLUMNS[name]) for files in (files_a, files_b)]
            if not frames[0].equals(frames[1]):
                problems.append(f"{name}: values differ outside {VOLATILE_COLUMNS[name]}")
        elif digest(files_a[name]) != digest(files_b[name]):
            problems.append(f"{name}: bytes differ")
    return problems


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def partial_files(work: Path) -> list[str]:
    """Leftovers of interrupted writes under results/ (temporary files and folders of the atomic writers),
    outside the caches (a cache shard's temporary file is never read and may belong to a concurrent run)."""
    results = work / "results"
    return sorted(str(path.relative_to(work)) for path in results.rglob("*.partial") if "cache" not in path.parts)


_REFERENCE: dict[bool, Path] = {}


def reference_run(tmp_path_factory, unbatched: bool = False) -> Path:
    """One uninterrupted local unsharded run of the tiny DAG (one item per batch when `unbatched`), shared by every
    test of the session that compares to it."""
    if unbatched not in _REFERENCE:
        work = tiny_workdir(tmp_path_factory.mktemp("tiny_reference"), UNBATCHED if unbatched else None)
        snakemake(work)
        _REFERENCE[unbatched] = work
    return _REFERENCE[unbatched]


def offline_env() -> dict[str, str]:
    return dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
