"""Prefix sharing in the multi-step loop: what its prompts share, and what vLLM's prefix cache saves on them.

The batched IRCoT loop of `experiments/study_b_multistep.yaml` (bench_multistep.py's setup: its policy, generator,
BM25 settings and prompts, the first N HotpotQA questions over their pool) runs twice on the same questions, once
on a vLLM engine with `enable_prefix_caching: true` and once with it false, each with an empty LLM cache of its own;
the questions are split into slices both sides run in turns (the first side alternating), so load from other
processes hits both alike. Engine start-up is measured apart.

Report: seconds per side and their ratio, whether both sides wrote the same trajectories, and what the prompts
share, counted in the model's tokens over every request the loop sent: a step's chain-of-thought prompt against
its forced answer's prompt (two templates: their system messages differ, so they share only the chat template's
opening), and each prompt against the same question's prompt of the same kind one step earlier (the evidence grows
at its end, so a step repeats the earlier prompt up to where the new units come in) — the prefix a cache can reuse.

Run it (about 10 minutes on 2 cores with vLLM's CPU build, ./setup.sh --vllm):
    .venv/bin/python benchmarks/bench_prefix.py [--questions 24] [--slices 2]
"""

import os
import platform
import sys
import tempfile
import time
from datetime import date
from functools import partial
from pathlib import Path

import polars as pl

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "benchmarks"))

from bench_multistep import Bench, Counted, offline_parser, warm_up  # noqa: E402
from workflow_scripts.llm import engine as llm  # noqa: E402
from workflow_scripts.multistep.loop import run_loop  # noqa: E402
from workflow_scripts.retrieval.bm25 import SearchProcess  # noqa: E402

SIDES = {"prefix cache on": True, "prefix cache off": False}


def shared_prefix(a: list[int], b: list[int]) -> int:
    """Tokens two prompts share from their start."""
    count = 0
    for x, y in zip(a, b):
        if x != y:
            break
        count += 1
    return count


def prefix_report(engine: llm.Engine, calls: list[list[llm.Request]]) -> tuple[str, str]:
    """What the loop's prompts share (module docstring): thought vs answer at a step, each kind vs its step before."""
    tokens = {}
    for requests in calls:
        for request in requests:
            text = llm.fit(request, engine.backend, engine.config.max_prompt_tokens).prompt.text
            tokens[request.request_id] = engine.backend.chat.encode(text)
    pairs = {"same step": [], "step before": []}
    for request_id, ids in tokens.items():
        qid, step, kind = request_id.split("|")
        if kind == "thought" and f"{qid}|{step}|answer" in tokens:
            pairs["same step"].append((shared_prefix(ids, tokens[f"{qid}|{step}|answer"]), len(ids)))
        earlier = f"{qid}|{int(step) - 1}|{kind}"
        if earlier in tokens:
            pairs["step before"].append((shared_prefix(ids, tokens[earlier]), len(ids)))
    lines = []
    for name, found in pairs.items():
        shared, total = sum(s for s, _ in found), sum(t for _, t in found)
        lines.append(f"{name}: {len(found)} prompt pairs, {shared} of {total} prompt tokens shared "
                     f"({100 * shared / max(total, 1):.1f}%), mean {shared / max(len(found), 1):.1f} per pair")
    return lines[0], lines[1]


def main() -> None:
    args = offline_parser(__doc__).parse_args()
    bench = Bench("ircot", args.questions, {})
    if bench.generator["backend"] != "vllm":
        sys.exit("bench_prefix.py measures vLLM's prefix cache: the experiment's generator must run on vllm")
    print(f"multi-step prefix benchmark, {date.today()}, {os.cpu_count()} CPU cores "
          f"({platform.processor() or platform.machine()})")
    print(f"policy ircot: {bench.policy}; generator {bench.generator}")
    with tempfile.TemporaryDirectory(prefix="bench_prefix.") as folder:
        work = Path(folder)
        bench.index(work / "bm25")
        engines, startup = {}, {}
        for side, caching in SIDES.items():
            started = time.perf_counter()
            spec = bench.generator | {"vllm": {**bench.generator.get("vllm", {}), "enable_prefix_caching": caching}}
            engines[side] = llm.load_engine(spec, PROJECT / "results" / "cache" / "models", "models.generator")
            Counted(engines[side], work / f"warm_{caching}")(warm_up(bench.questions.head(2), bench.templates))
            startup[side] = time.perf_counter() - started
        counted = {side: Counted(engine, work / side.replace(" ", "_")) for side, engine in engines.items()}
        seconds = dict.fromkeys(SIDES, 0.0)
        tables: dict[str, list[pl.DataFrame]] = {side: [] for side in SIDES}
        with SearchProcess(work / "bm25", bench.bm25["k1"], bench.bm25["b"], bench.bm25["threads"]) as searcher:
            loop = partial(run_loop, settings=bench.settings, templates=bench.templates,
                           retrieve=lambda queries: searcher.search(queries, bench.settings.per_step, bench.scope)[0],
                           texts=lambda ids: {unit: bench.texts[unit] for unit in ids})
            size = -(-bench.questions.height // args.slices)
            for turn in range(args.slices):
                part = bench.questions.slice(turn * size, size)
                for side in list(SIDES) if turn % 2 == 0 else list(reversed(SIDES)):
                    started = time.perf_counter()
                    tables[side].append(loop(part, generate=counted[side]))
                    seconds[side] += time.perf_counter() - started
        same_step, step_before = prefix_report(engines["prefix cache on"], counted["prefix cache on"].requests)
        for engine in engines.values():
            close = getattr(engine.backend, "close", None)
            if close is not None:
                close()
    on, off = (pl.concat(tables[side]).sort(["qid", "step"]) for side in SIDES)
    differing = [column for column in on.columns if column != "seconds" and not on[column].equals(off[column])]
    print(f"\n{bench.questions.height} questions, {on.height} steps, {args.slices} interleaved slices; engine start-up "
          f"and first call: " + ", ".join(f"{side} {value:.1f} s" for side, value in startup.items()))
    print(f"{'side':<18} {'seconds':>8} {'engine calls':>13} {'sequences':>10}")
    for side in SIDES:
        print(f"{side:<18} {seconds[side]:8.2f} {counted[side].calls:13d} {counted[side].sequences:10d}")
    print(f"speed-up off / on: {seconds['prefix cache off'] / seconds['prefix cache on']:.2f}")
    print(f"trajectories identical (every column but seconds): {'yes' if not differing else 'no, ' + str(differing)}"
          + "".join(f"; largest {column} difference {(on[column] - off[column]).abs().max():.2g}"
                    for column in ("answer_entropy", "answer_min_prob") if column in differing))
    print(f"prompt tokens shared from the start, a thought's prompt against its step's forced answer's, {same_step}")
    print(f"prompt tokens shared from the start, each prompt against its kind's one step earlier, {step_before}")


if __name__ == "__main__":
    main()
