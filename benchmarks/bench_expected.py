"""Expected (probability-weighted) judge scores benchmark: the time they add to judging, per backend.

Prompts: the 64 grounded-judge prompts of bench_structured.py (HotpotQA distractor questions, half grading the
reference answer, half another question's). Sides, per backend, each with an empty cache folder of its own and the
same engine (SmolLM2-135M, greedy, structured outputs on): "argmax" (the backend records no token steps: vLLM asks
for the configured top_logprobs only, transformers keeps no alternatives and no unmasked mass) and "expected"
(every step's alternatives recorded — vLLM's top 20, transformers' masked distribution and the unmasked mass — then
`judging/scores.py` reads the expected value of each score). The time of a side is generating the 64 replies plus,
for expected, reading the scores. Slices alternate the side that goes first, so load from other processes hits
both alike. Target (issue #26): expected / argmax <= 1.10 per backend.

Run it (about 6 minutes on 2 cores; vLLM needs ./setup.sh --vllm):
    .venv/bin/python benchmarks/bench_expected.py [--backends transformers vllm] [--slices 4]
"""

import argparse
import json
import platform
import tempfile
import time
from datetime import date
from pathlib import Path

from bench_llm import DEFAULT_ENGINE, PROJECT, SHARED_DATA
from bench_structured import judge_requests

from workflow_scripts.judging import judges, scores
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.backends import steps_of
from workflow_scripts.llm.parsing import parse_json
from workflow_scripts.llm.templates import JUDGE_GROUNDED_REPLY

TARGET = 1.10
SIDES = ("argmax", "expected")


def read_scores(table) -> int:
    """Expected scores of every reply (what judges.judge adds); the number of replies with a masked_exact basis."""
    exact = 0
    for row in table.iter_rows(named=True):
        reply = parse_json(row["text"], dict).value
        found = scores.field_scores(JUDGE_GROUNDED_REPLY.schema, judges.GROUNDED.fields, reply, steps_of(row["token_steps"]))
        exact += scores.weakest([score.basis for score in found.values()]) == scores.MASKED_EXACT
    return exact


def run(backend: str, slices: int, requests) -> dict:
    spec = {**DEFAULT_ENGINE, "backend": backend, **({"vllm": {"kv_cache_gib": 1}} if backend == "vllm" else {})}
    model_cache = PROJECT / "results" / "cache" / "models"
    engines = {side: llm.load_engine(spec, model_cache, "bench") for side in SIDES}
    engines["argmax"].backend.record_steps = False
    work = Path(tempfile.mkdtemp(prefix=f"bench-expected-{backend}-"))
    warm = [llm.Request("warm", requests[0].template, requests[0].fields, requests[0].evidence)]
    for side in SIDES:  # start engines, load weights and compile the grammar outside the timed runs
        llm.generate(warm, engines[side], Path(tempfile.mkdtemp(dir=work)))
    size = -(-len(requests) // slices)
    parts = [requests[start : start + size] for start in range(0, len(requests), size)]
    seconds, exact = dict.fromkeys(SIDES, 0.0), 0
    for at, part in enumerate(parts):
        for side in SIDES if at % 2 == 0 else SIDES[::-1]:
            started = time.perf_counter()
            table = llm.generate(part, engines[side], Path(tempfile.mkdtemp(dir=work)))
            if side == "expected":
                exact += read_scores(table)
            seconds[side] += time.perf_counter() - started
    for engine in engines.values():
        getattr(engine.backend, "close", lambda: None)()
    return {"backend": backend, **{f"{side}_s": round(seconds[side], 2) for side in SIDES},
            "ratio": round(seconds["expected"] / seconds["argmax"], 3), "masked_exact": exact, "prompts": len(requests)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["transformers", "vllm"])
    parser.add_argument("--slices", type=int, default=4)
    args = parser.parse_args()
    requests = judge_requests(SHARED_DATA)
    print(f"# expected scores, {date.today()}, {platform.node()}, {len(requests)} Study A judge prompts, "
          f"SmolLM2-135M, {args.slices} interleaved slices")
    print("backend        argmax_s  expected_s  ratio  masked_exact")
    for backend in args.backends:
        result = run(backend, args.slices, requests)
        print(f"{backend:<14} {result['argmax_s']:8.1f}  {result['expected_s']:10.1f}  {result['ratio']:5.2f}  "
              f"{result['masked_exact']:>5d}/{result['prompts']}   (target <= {TARGET})")
        print(json.dumps(result))


if __name__ == "__main__":
    main()
