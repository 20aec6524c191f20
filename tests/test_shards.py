"""Scale-out (config `shards`, core/shards.py): items go to shards by a stable hash of their id, the gather joins the
shards in the unsharded order and refuses a missing shard, too many shards is an error naming the stage, the DAG
gets one job of the stage's rule per shard and one `<stage>_gather`, concurrent shards share the LLM cache without
a torn or doubled entry, and the sharded tiny demo gives byte for byte the tables of the unsharded one (both
computing one item per batch, so that only the sharding could make a difference; why: tiny_demo.SHARDS)."""

from __future__ import annotations

import multiprocessing
import random
import time
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest
from llm_fakes import WordTokenBackend
from tiny_demo import DATASET, UNBATCHED, differences, reference_run, shard, tiny_workdir
from workflow_helpers import make_workdir, planned_jobs, snakemake

from workflow_scripts.core import shards, tables
from workflow_scripts.core.cache import read_cache
from workflow_scripts.core.contracts import GENERATIONS, LLM_CACHE, STUDY_C_QUERIES, UNIT_VECTORS
from workflow_scripts.core.tables import frame, read_table, write_table
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm import engine as llm
from workflow_scripts.jobs import gather, runtime
from workflow_scripts.study_c import synthetic


def job(rule, shard=None, **params):
    wildcards = {"dataset": "demo"} | ({"shard": shard} if shard else {})
    return SimpleNamespace(rule=rule, wildcards=SimpleNamespace(items=lambda: wildcards.items()),
                           params=SimpleNamespace(items=lambda: params.items(), **params))


def test_items_go_to_shards_by_a_stable_hash_of_their_id():
    ids = [f"q{i:03d}" for i in range(300)]
    buckets = [shards.bucket(item, 4) for item in ids]
    assert buckets == [shards.bucket(item, 4) for item in reversed(ids)][::-1]  # independent of order and company
    assert shards.bucket("q000", 4) == int.from_bytes(__import__("hashlib").blake2b(b"q000", digest_size=8).digest(), "big") % 4
    assert all(40 < buckets.count(index) < 110 for index in range(4))
    masks = [shards.owned(ids, shards.Shard("generate_answers", index, 4), "questions") for index in range(4)]
    assert [sum(column) for column in zip(*masks)] == [1] * len(ids)  # every item in exactly one shard
    assert shards.owned(ids, None, "questions") == [True] * len(ids)


def test_the_shard_wildcard_names_the_stage_and_the_shard():
    assert runtime.shard_of(job("rerank", "2-of-5")) == shards.Shard("rerank", 2, 5)
    assert runtime.shard_of(job("rerank")) is None
    assert shards.parse_shard("rerank", "2-of-5") == shards.Shard("rerank", 2, 5)
    assert shards.shard_names(3) == ["0-of-3", "1-of-3", "2-of-3"]


def test_more_shards_than_items_is_an_error_naming_the_stage():
    with pytest.raises(InputError, match=r"shards.generate_answers = 4 is more than the 3 questions .* at most 3"):
        shards.owned(["a", "b", "c", "a"], shards.Shard("generate_answers", 0, 4), "questions")
    assert sum(shards.owned(["a", "b"], shards.Shard("embed_units", 0, 4), None)) <= 2  # questions beside units


def test_a_shard_reads_its_rows_a_batch_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "GROUP_ROWS", 8)
    rows = [{"qid": f"p{i}:problem", "paper_id": f"p{i}", "query_type": "problem", "text": f"text {i}"} for i in range(40)]
    path = tmp_path / "queries.parquet"
    with tables.TableWriter(path, STUDY_C_QUERIES) as writer:  # five row groups
        writer.write(frame(rows, STUDY_C_QUERIES))
    batches = {index: list(shards.owned_batches(path, STUDY_C_QUERIES, "qid", shards.Shard("study_c_strategy", index, 3),
                                                "queries")) for index in range(3)}
    parts = [pl.concat(found) for found in batches.values()]
    assert all(len(found) > 1 for found in batches.values())  # read in batches, never whole
    assert [qid for part in parts for qid in part["qid"]] != [row["qid"] for row in rows]
    assert sorted(qid for part in parts for qid in part["qid"]) == sorted(row["qid"] for row in rows)
    assert all(shards.bucket(qid, 3) == index for index, part in enumerate(parts) for qid in part["qid"])
    assert all(part["qid"].to_list() == sorted(part["qid"], key=[row["qid"] for row in rows].index) for part in parts)
    with pytest.raises(InputError, match=r"shards.embed_units = 41 is more than the 40 units the stage has"):
        next(shards.owned_batches(path, STUDY_C_QUERIES, "qid", shards.Shard("embed_units", 0, 41), "units"))


def generations(ids):
    return frame([{"request_id": qid, "key": qid, "status": "ok", "source": "generated", "constrained": False,
                   "text": f"answer {qid}", "finish_reason": "stop", "latency_s": 0.5, "backend": "transformers",
                   "model": "m", "device": "cpu", "evidence_in": 0, "evidence_kept": 0, "evidence_truncated": False, "token_basis": "tokenizer"}
                  for qid in ids], GENERATIONS)


class Files(dict):
    """Snakemake's named input / output lists: keys(), [name] and .name."""

    __getattr__ = dict.__getitem__


def test_the_gather_restores_the_contracts_row_order_and_refuses_a_missing_shard(tmp_path):
    ids = [f"q{i:02d}" for i in range(20)]
    whole = tmp_path / "whole.parquet"
    write_table(generations(ids), whole, GENERATIONS)
    inputs = Files()
    for index in range(3):
        mine = [qid for qid in ids if shards.bucket(qid, 3) == index]
        inputs[f"answers__{index}"] = str(tmp_path / f"{index}-of-3.parquet")
        write_table(generations(mine[::-1]), inputs[f"answers__{index}"], GENERATIONS)  # any order within a shard
    gathered = tmp_path / "gathered.parquet"
    smk = SimpleNamespace(rule="generate_answers_gather", input=inputs, output=Files(answers=str(gathered)))
    gather.gather_tables(smk, {"answers": GENERATIONS})
    assert gathered.read_bytes() == whole.read_bytes()
    Path(inputs["answers__1"]).unlink()
    gathered.unlink()
    with pytest.raises(InputError, match=r"shard output\(s\) \[.*1-of-3.parquet'\] missing; rerun the `generate_answers` job"):
        gather.gather_tables(smk, {"answers": GENERATIONS})
    assert not gathered.exists()


def test_a_contracts_row_order_is_its_key_unless_it_names_another():
    from workflow_scripts.core.contracts import STUDY_C_RUNS

    assert GENERATIONS.row_order == GENERATIONS.key == ("request_id",)
    assert STUDY_C_RUNS.row_order == ("qid", "rank") != STUDY_C_RUNS.key
    # a gather's params hold contracts and Snakemake compares params by their repr: no set order may show in it
    assert "frozenset" not in repr(GENERATIONS) and GENERATIONS.enums


@pytest.mark.parametrize("group_rows", [7, 20_000])
def test_the_gather_streams_rows_in_an_input_tables_order(tmp_path, monkeypatch, group_rows):
    monkeypatch.setattr(tables, "GROUP_ROWS", group_rows)  # several row groups and merge batches, or one
    monkeypatch.setattr(shards, "GROUP_ROWS", group_rows)
    order = [f"u{i}" for i in (3, 1, 4, 15, 9, 2, 6, 5, 35, 8, 97, 93, 23, 84, 62, 64, 33, 83, 27, 95, 0, 28, 88, 41)]
    vectors = lambda ids: frame([{"unit_id": unit, "group_id": "g", "vector": [float(unit[1:])]} for unit in ids], UNIT_VECTORS)
    reference = tmp_path / "units.parquet"
    pl.DataFrame({"unit_id": order}).write_parquet(reference)
    whole = tmp_path / "whole.parquet"
    with tables.TableWriter(whole, UNIT_VECTORS) as writer:
        writer.write(vectors(order))
    parts = [tmp_path / f"{index}-of-3.parquet" for index in range(3)]
    for index, part in enumerate(parts):
        write_table(vectors([unit for unit in order if shards.bucket(unit, 3) == index]), part, UNIT_VECTORS)
    gathered = tmp_path / "gathered.parquet"
    shards.gather_in_order(parts, UNIT_VECTORS, "unit_id", reference, gathered)
    assert gathered.read_bytes() == whole.read_bytes()
    assert read_table(gathered, UNIT_VECTORS).equals(vectors(order))
    gathered.unlink()
    # a stale shard (its rows in another order, one missing, or one too many) never gives a table
    first = [unit for unit in order if shards.bucket(unit, 3) == 0]
    for stale, message in ((first[::-1], "expected"), (first[:-1], "fewer rows"), (first + ["u999"], "not in")):
        write_table(vectors(stale), parts[0], UNIT_VECTORS)
        with pytest.raises(InputError, match=message):
            shards.gather_in_order(parts, UNIT_VECTORS, "unit_id", reference, gathered)
        assert not gathered.exists() and not list(tmp_path.glob("*.partial"))


def test_query_reports_of_the_shards_merge_into_the_unsharded_report():
    def report(sampled, succeeded, failures, replies):
        return {"papers_in_corpus": 200, "papers_without_abstract_in_source": 3, "papers_sampled": sampled,
                "papers_succeeded": succeeded, "queries": 2 * succeeded,
                "failures": {cause: failures.get(cause, 0) for cause in synthetic.CAUSES},
                "replies_used": replies, "seed": 42}
    merged = synthetic.merged_reports([report(6, 5, {"length": 1}, {"constrained": 5}),
                                       report(4, 3, {"no_json": 1}, {"constrained": 2, "parsed": 1})])
    assert merged == report(10, 8, {"length": 1, "no_json": 1}, {"constrained": 7, "parsed": 1})
    assert list(merged) == list(report(0, 0, {}, {}))
    with pytest.raises(ValueError, match="disagree on seed"):
        synthetic.merged_reports([report(1, 1, {}, {}), report(1, 1, {}, {}) | {"seed": 7}])


# --- Concurrent shards share the LLM cache


class EchoBackend(WordTokenBackend):
    fingerprint = "echo"

    def complete(self, batch, sampling):
        time.sleep(0.01)  # let the writers interleave
        return [llm.Outcome(text=f"reply to {prompt.messages[-1]['content'][-12:]}", finish_reason="stop",
                            prompt_tokens=5, completion_tokens=3, latency_s=0.01) for prompt in batch]


def _generate_concurrently(cache: str, order_seed: int, start, results) -> None:
    template = llm.Template("t", (("user", "{question}"),))
    requests = [llm.Request(f"q{i:02d}", template, {"question": f"question number {i:02d}"}) for i in range(40)]
    random.Random(order_seed).shuffle(requests)
    engine = llm.Engine(llm.engine_config({"backend": "transformers", "model": "echo", "shard_size": 3}), EchoBackend())
    start.wait()
    table = llm.generate(requests, engine, Path(cache))
    results.put(sorted(zip(table["request_id"].to_list(), table["text"].to_list())))


@pytest.mark.slow  # concurrent processes (~4 s)
def test_shards_running_at_once_share_the_llm_cache_without_a_torn_or_doubled_entry(tmp_path):
    context = multiprocessing.get_context("spawn")  # (polars is not fork-safe)
    start, results = context.Barrier(4), context.Queue()
    writers = [context.Process(target=_generate_concurrently, args=(str(tmp_path), seed, start, results))
               for seed in (0, 0, 1, 2)]  # two shards send the very same batches, two others the same keys reordered
    for writer in writers:
        writer.start()
    replies = [results.get(timeout=120) for _ in writers]
    for writer in writers:
        writer.join(timeout=60)
        assert writer.exitcode == 0
    assert all(reply == replies[0] for reply in replies) and len(replies[0]) == 40
    files = sorted(tmp_path.glob("*.parquet"))
    assert all(pl.read_parquet(path).height > 0 for path in files)  # every file complete and readable
    assert not list(tmp_path.glob(".*partial"))
    cached = read_cache(tmp_path, [], LLM_CACHE)
    keys = pl.concat([pl.read_parquet(path, columns=["key"]) for path in files])["key"]
    assert keys.n_unique() == 40 and cached.is_empty()
    everything = read_cache(tmp_path, keys.unique().to_list(), LLM_CACHE)
    assert everything.height == 40 and everything["key"].n_unique() == 40  # one entry per key when read


# --- The DAG and the byte-identical sharded demo

SHARDS = {"embed_units": 2, "rerank": 2, "generate_answers": 3, "judge_answers": 2}


@pytest.mark.slow  # plans the DAG five times (~25 s)
@pytest.mark.integration
def test_shard_counts_shape_the_dag_and_bad_counts_are_config_errors(tmp_path):
    workdir = lambda name, overrides: make_workdir(Path(tmp_path / name).mkdir() or tmp_path / name, overrides)
    work = workdir("plan", {"shards": SHARDS})
    jobs = planned_jobs(work)
    policies = 2  # keep, hybrid (config.yaml)
    assert jobs["embed_units"] == 2 and jobs["embed_units_gather"] == 1
    assert jobs["rerank"] == 2 and jobs["rerank_gather"] == 1
    assert jobs["generate_answers"] == 3 * policies and jobs["generate_answers_gather"] == policies
    assert jobs["judge_answers"] == 2 * policies and jobs["judge_answers_gather"] == policies
    plain = planned_jobs(workdir("plain", {}))
    assert not any(rule.endswith("_gather") for rule in plain) and plain["generate_answers"] == policies
    for index, (bad, message) in enumerate((({"generate_answers": 0}, "shards.generate_answers"),
                                            ({"index_bm25": 2}, "shards"))):
        failed = snakemake(workdir(f"bad{index}", {"shards": bad}), "--dry-run", check=False)
        assert failed.returncode != 0 and message in failed.stdout, failed.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.integration
def test_the_sharded_tiny_demo_gives_the_unsharded_tables_byte_for_byte(tmp_path, tmp_path_factory):
    reference = reference_run(tmp_path_factory, unbatched=True)  # (why one item per batch: tiny_demo.SHARDS)
    work = shard(tiny_workdir(tmp_path, UNBATCHED))
    snakemake(work)
    results = work / "results" / DATASET
    for table in ("answers/keep", "judgments/keep_grounded", "dense/unit_vectors", "rerank/smollm2_yes_no"):
        assert sorted(path.name for path in (results / f"{table}.shards").iterdir()) == ["0-of-2.parquet", "1-of-2.parquet"]
    assert differences(reference, work) == []
    # each shard resumes on its own: a lost shard (with the table gathered from it) reruns alone, then its gather
    (results / "answers" / "keep.shards" / "1-of-2.parquet").unlink()
    (results / "answers" / "keep.parquet").unlink()
    jobs = planned_jobs(work, f"results/{DATASET}/answers/keep.parquet")  # (a missing intermediate alone reruns nothing)
    assert jobs.get("generate_answers") == 1 and jobs.get("generate_answers_gather") == 1
    assert "embed_units" not in jobs and "rerank" not in jobs
