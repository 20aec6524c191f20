"""Served throughput: the 64 grounded-judge prompts through vLLM's OpenAI-compatible server at several client
concurrencies, against the offline vllm backend, in one run.

Prompts: those of bench_structured.py (HotpotQA distractor questions, half grading the reference answer, half
another question's), SmolLM2-135M, greedy, structured outputs on, vLLM's CPU build. The server is the one a run
would start (`llm/server.py`, the offline backend's engine arguments); the client is the openai backend
(`openai.AsyncOpenAI`, `concurrency` requests in flight). Each side generates the 64 replies into an empty cache
folder, after a warm-up request that starts the engine and compiles the grammar; sides alternate in order over
`--rounds` rounds so load from other processes hits all alike. Also checked: every served reply equals the offline
one. Target (issue #27): the best concurrency at least 0.8x the offline backend's prompts per second.

Run it (about 8 minutes on 2 cores; needs ./setup.sh --vllm):
    .venv/bin/python benchmarks/bench_served.py [--concurrency 1 4 16 64] [--rounds 2]
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

from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.server import serve

TARGET = 0.8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 4, 16, 64])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    requests = judge_requests(SHARED_DATA)
    spec = {**DEFAULT_ENGINE, "backend": "vllm", "vllm": {"kv_cache_gib": 1}}
    model_cache = PROJECT / "results" / "cache" / "models"
    work = Path(tempfile.mkdtemp(prefix="bench-served-"))
    warm = [llm.Request("warm", requests[0].template, requests[0].fields, requests[0].evidence)]
    offline = llm.load_engine(spec, model_cache, "bench")
    with serve(spec, model_cache, "bench") as block:
        engines = {"offline": offline, **{f"served_c{n}": llm.load_engine({**block, "concurrency": n}, model_cache,
                                                                           "bench") for n in args.concurrency}}
        for engine in engines.values():
            llm.generate(warm, engine, Path(tempfile.mkdtemp(dir=work)))
        seconds, texts = dict.fromkeys(engines, 0.0), {}
        for round_ in range(args.rounds):
            for side in list(engines) if round_ % 2 == 0 else list(engines)[::-1]:
                started = time.perf_counter()
                table = llm.generate(requests, engines[side], Path(tempfile.mkdtemp(dir=work)))
                seconds[side] += time.perf_counter() - started
                texts[side] = table["text"].to_list()
        offline.backend.close()
    rate = {side: args.rounds * len(requests) / seconds[side] for side in engines}
    print(f"# served throughput, {date.today()}, {platform.node()}, {len(requests)} Study A judge prompts, "
          f"SmolLM2-135M on vLLM CPU, {args.rounds} rounds")
    print("side             seconds  prompts/s  vs offline  replies = offline")
    for side in engines:
        same = sum(a == b for a, b in zip(texts[side], texts["offline"]))
        print(f"{side:<15} {seconds[side]:8.1f}  {rate[side]:9.2f}  {rate[side] / rate['offline']:10.2f}  "
              f"{same:>4d}/{len(requests)}")
    best = max((side for side in engines if side != "offline"), key=rate.get)
    result = {"prompts": len(requests), "rounds": args.rounds, "seconds": {k: round(v, 2) for k, v in seconds.items()},
              "best": best, "best_vs_offline": round(rate[best] / rate["offline"], 3), "target": TARGET,
              "identical_replies": {side: sum(a == b for a, b in zip(texts[side], texts["offline"])) for side in engines}}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
