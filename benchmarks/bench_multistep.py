"""Multi-step loop benchmark: the batched loop against a one-question-at-a-time loop on the same engine.

The batched loop (multistep/loop.py, as the multistep_trajectories rule runs it) makes one engine call and one
BM25 search per step over every unfinished question. The one-question-at-a-time loop runs the same function for
each question alone — how FlashRAG runs FLARE and Self-Ask — so every step of every question is its own engine
call (the step's thought and forced answer still share it) and its own search. Both sides use the policy, the
generator, the BM25 settings and the prompts of `experiments/study_b_multistep.yaml` (policy `ircot` unless
--policy), on the first N questions of its HotpotQA file, their pool indexed globally with BM25 (Lucene through
retrieval/bm25.py, searched in a child process as in the pipeline). Each side answers with an empty LLM cache of
its own; the questions are split into slices that both sides run in turns (the first side alternating), so load
from other processes hits both alike; the engine starts once before the timing (its start-up is measured apart).
vLLM's prefix cache is emptied before each side's turn: both sides send the same prompts, so the side that ran second
would otherwise find the first side's prompts computed and skip their prefill. Within a turn it works as in the
pipeline (a step's prompts reuse what the previous step computed of the same passages).

Report: seconds per side and their ratio (target ≥ 5 on vLLM's CPU build, issue #43), engine calls, sequences
generated, whether the two sides' trajectories are identical (every column but the apportioned seconds), and the
bound batching cannot pass: the one-at-a-time side's engine calls sent again with max_new_tokens 1 (its prompts'
forward passes alone, untimed above; with the LLM cache and vLLM's prefix cache empty), as bench_llm.py's "prefill
only". On a CPU a prompt's forward pass is compute-bound, so it costs the same per prompt at any batch size
(bench_llm.py); only the decoding steps, one token per sequence each, get cheaper per sequence in a batch.

Run it (a few minutes on 2 cores with vLLM's CPU build, ./setup.sh --vllm; its record gives the time):
    .venv/bin/python benchmarks/bench_multistep.py [--questions 24] [--slices 2] [--policy ircot]
"""

import argparse
import json
import multiprocessing
import os
import platform
import sys
import tempfile
import time
from datetime import date
from functools import partial
from pathlib import Path

import polars as pl
import yaml

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from workflow_scripts.config.validate import validate_config
from workflow_scripts.ingest.adapters.hotpotqa import load_hotpotqa
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.multistep.loop import Settings, run_loop
from workflow_scripts.retrieval.bm25 import SearchProcess, build_index

EXPERIMENT = PROJECT / "experiments" / "study_b_multistep.yaml"
DATASET = "hotpotqa"
RATIO_TARGET = 5.0


class Counted:
    """`llm.generate` bound to an engine and a cache folder, counting its calls and the sequences it generated."""

    def __init__(self, engine: llm.Engine, cache: Path):
        self.generate = partial(llm.generate, engine=engine, cache_dir=cache)
        self.calls = self.sequences = 0
        self.requests: list[list[llm.Request]] = []

    def __call__(self, requests: list[llm.Request]) -> pl.DataFrame:
        table = self.generate(requests)
        self.calls += 1
        self.requests.append(list(requests))
        self.sequences += int((table["source"] == "generated").sum())
        return table


def empty_prefix_cache(engine: llm.Engine) -> None:
    """Empty the engine's prefix cache (vLLM's; the other backends keep none across calls)."""
    reset = getattr(engine.backend, "reset_prefix_cache", None)
    if reset is not None:
        reset()


def sides(questions: pl.DataFrame, loop: partial, batched: Counted, sequential: Counted, slices: int,
          engine: llm.Engine) -> dict:
    """Seconds and trajectories of each side, slice by slice in turns, each turn from an empty prefix cache."""
    totals = {"batched": 0.0, "one at a time": 0.0}
    tables = {side: [] for side in totals}
    size = -(-questions.height // slices)
    for turn in range(slices):
        part = questions.slice(turn * size, size)
        order = list(totals) if turn % 2 == 0 else list(reversed(totals))
        for side in order:
            empty_prefix_cache(engine)
            started = time.perf_counter()
            if side == "batched":
                tables[side].append(loop(part, generate=batched))
            else:
                tables[side] += [loop(part.slice(row, 1), generate=sequential) for row in range(part.height)]
            totals[side] += time.perf_counter() - started
    return {side: (totals[side], pl.concat(tables[side]).sort(["qid", "step"])) for side in totals}


def quiet_index(units: pl.DataFrame, folder: Path, threads: int, title: str) -> None:
    """build_index in a child process whose stdout is /dev/null: Lucene's indexer logs there, not into the report."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    build_index(units, folder, threads=threads, title=title)


def prefill_only(engine: llm.Engine, calls: list[list[llm.Request]], cache: Path) -> float:
    """Seconds to send the same engine calls again with max_new_tokens 1 into an empty cache: the forward pass
    over each prompt, which no batching removes (on a CPU it is compute-bound at any batch size), from an empty
    prefix cache as each timed turn began."""
    empty_prefix_cache(engine)
    started = time.perf_counter()
    for requests in calls:
        llm.generate(requests, engine, cache, {"max_new_tokens": 1})
    return time.perf_counter() - started


class Bench:
    """What both multi-step benchmarks read of `experiments/study_b_multistep.yaml`: the policy's settings, its arm's
    scope, BM25's settings, the generator block (with `engine` overrides), the prompts, the first `questions`
    HotpotQA questions and every unit's text."""

    def __init__(self, policy: str, questions: int, engine: dict) -> None:
        os.chdir(PROJECT)  # the experiment's dataset paths are relative to the project
        config = validate_config(yaml.safe_load(EXPERIMENT.read_text(encoding="utf-8")))
        self.policy = config["multistep"]["policies"][policy]
        self.settings = Settings(self.policy["strategy"], self.policy["k"], self.policy["per_step"],
                                 self.policy["total"], self.policy.get("threshold"), self.policy.get("mask_below"))
        self.scope = config["arms"][self.policy["arm"]]["scope"]
        self.bm25, self.title = config["retrieval"]["bm25"], config["retrieval"]["title"]
        self.generator = {key: value for key, value in config["models"]["generator"].items() if key != "prices"}
        self.generator |= engine
        if self.generator["backend"] != "vllm":
            self.generator.pop("vllm", None)
        self.templates = load_templates(config["prompts"])
        self.ingested = load_hotpotqa(config["datasets"][DATASET], DATASET)
        self.questions = self.ingested.questions.sort("qid").head(questions)
        self.texts = dict(self.ingested.units.select("unit_id", "text").iter_rows())

    def index(self, folder: Path) -> None:
        """The questions' pool indexed with BM25, in a child process (Lucene's JVM never beside the engine)."""
        indexing = multiprocessing.get_context("spawn").Process(
            target=quiet_index, args=(self.ingested.units, folder, self.bm25["threads"], self.title))
        indexing.start()
        indexing.join()
        if indexing.exitcode != 0:
            sys.exit(f"building the BM25 index failed (exit code {indexing.exitcode})")


def offline_parser(doc: str) -> argparse.ArgumentParser:
    """Offline model loading, and the arguments both multi-step benchmarks take: questions and interleaved slices."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--questions", type=int, default=24)
    parser.add_argument("--slices", type=int, default=2)
    return parser


def main() -> None:
    parser = offline_parser(__doc__)
    parser.add_argument("--policy", default="ircot", help="a multistep.policies entry of the experiment")
    parser.add_argument("--engine", type=json.loads, default={},
                        help='overrides of the experiment\'s generator block (JSON), e.g. \'{"backend": "transformers"}\'')
    args = parser.parse_args()
    bench = Bench(args.policy, args.questions, args.engine)
    settings, scope, bm25, generator, templates, questions, texts = (
        bench.settings, bench.scope, bench.bm25, bench.generator, bench.templates, bench.questions, bench.texts)
    print(f"multi-step loop benchmark, {date.today()}, {os.cpu_count()} CPU cores "
          f"({platform.processor() or platform.machine()})")
    print(f"policy {args.policy}: {bench.policy}; arm scope {scope}; generator {generator}")
    with tempfile.TemporaryDirectory(prefix="bench_multistep.") as folder:
        work = Path(folder)
        bench.index(work / "bm25")
        started = time.perf_counter()
        engine = llm.load_engine(generator, PROJECT / "results" / "cache" / "models", "models.generator")
        warm = Counted(engine, work / "warm")
        warm(warm_up(questions.head(2), templates))
        startup = time.perf_counter() - started
        with SearchProcess(work / "bm25", bm25["k1"], bm25["b"], bm25["threads"]) as searcher:
            def retrieve(queries: pl.DataFrame) -> pl.DataFrame:
                return searcher.search(queries, settings.per_step, scope)[0]

            loop = partial(run_loop, settings=settings, templates=templates, retrieve=retrieve,
                           texts=lambda ids: {unit: texts[unit] for unit in ids})
            batched, sequential = Counted(engine, work / "batched"), Counted(engine, work / "sequential")
            found = sides(questions, loop, batched, sequential, args.slices, engine)
        floors = {side: prefill_only(engine, counted.requests, work / f"prefill_{side}")
                  for side, counted in (("one at a time", sequential), ("batched", batched))}
        close = getattr(engine.backend, "close", None)
        if close is not None:
            close()
    (batched_s, batched_table), (sequential_s, sequential_table) = found["batched"], found["one at a time"]
    differing = [column for column in batched_table.columns if column != "seconds"
                 and not batched_table[column].equals(sequential_table[column])]
    texts = ("query", "unit_ids", "thought", "answer", "stop")
    if batched_table.select("qid", "step").equals(sequential_table.select("qid", "step")):
        same_row = pl.DataFrame([batched_table[column].eq_missing(sequential_table[column]) for column in texts])
        steps_differing = str(same_row.height - int(same_row.select(pl.all_horizontal(pl.all())).to_series().sum()))
    else:
        steps_differing = "the paths differ in length; all"
    drift = {column: float((batched_table[column] - sequential_table[column]).abs().max())
             for column in ("answer_entropy", "answer_min_prob") if column in differing
             and batched_table.height == sequential_table.height}
    ratio = sequential_s / batched_s
    print(f"\n{questions.height} questions, {batched_table.height} steps, {args.slices} interleaved slices; engine "
          f"start-up and first call {startup:.1f} s (not timed below)")
    print(f"{'side':<16} {'seconds':>8} {'engine calls':>13} {'sequences':>10}")
    for side, seconds, counted in (("one at a time", sequential_s, sequential), ("batched", batched_s, batched)):
        print(f"{side:<16} {seconds:8.2f} {counted.calls:13d} {counted.sequences:10d}")
    print(f"speed-up one at a time / batched: {ratio:.2f} (target >= {RATIO_TARGET})")
    print(f"the same engine calls with max_new_tokens 1 (prompts only): one at a time {floors['one at a time']:.2f} s,"
          f" batched {floors['batched']:.2f} s; largest speed-up batching could reach, one at a time / its prompts "
          f"only: {sequential_s / floors['one at a time']:.2f}")
    decoding = {side: seconds - floors[side] for side, seconds in (("one at a time", sequential_s),
                                                                    ("batched", batched_s))}
    print(f"the rest, decoding (each side less its prompts only): one at a time {decoding['one at a time']:.2f} s, "
          f"batched {decoding['batched']:.2f} s; speed-up {decoding['one at a time'] / decoding['batched']:.2f}")
    print(f"trajectories identical (every column but seconds): {'yes' if not differing else 'no, ' + str(differing)}")
    print(f"steps whose query, retrieved units, thought, answer or stop differ: {steps_differing} of "
          f"{batched_table.height}" + "".join(f"; largest {column} difference {value:.2g}"
                                                for column, value in drift.items()))


def warm_up(questions: pl.DataFrame, templates: dict) -> list[llm.Request]:
    """A warm-up call's requests (weights loaded, first-call allocations done): each question answered closed-book."""
    return [llm.Request(f"{qid}|warm", templates["answer_rag"], {"question": text}, ())
            for qid, text in questions.select("qid", "text").iter_rows()]


if __name__ == "__main__":
    main()
