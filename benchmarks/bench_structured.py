"""Structured outputs benchmark: the same 64 judge prompts decoded under the judge's schema vs unconstrained.

Prompts: the first 64 HotpotQA distractor questions of ../shared/data/hotpotqa/hotpot_dev_distractor_100.json,
each graded with Study A's judge template (`judge_grounded`): its first three context paragraphs are the evidence
shown, its reference answer the reference, and the answer to grade is its own reference for even positions and
the next question's reference for odd ones (a wrong answer), so the judge sees both cases.

Sides, in one process, each with an empty cache folder of its own and the same engine settings (SmolLM2-135M,
batch 8, greedy): "constrained" (`structured_outputs: true`: xgrammar logits processor, the schema's token
budget) and "unconstrained" (`structured_outputs: false`, the same token budget as max_new_tokens, so both may
write equally long replies). The prompts, in the prompt-length order a stage batches them in, are split into
slices that the two sides answer in turns (the first side alternating), so load from other processes hits both
alike. Printed per side: wall seconds, completion tokens, seconds per completion token, and the share of replies
a judge can use (strict JSON that passes `judges.validate_grounded`; repaired JSON counted apart).
Targets (issue #13): time ratio constrained / unconstrained <= 1.25; valid share 100% constrained.

Run it (about 5 minutes on 2 cores): .venv/bin/python benchmarks/bench_structured.py [--slices 4]
"""

import argparse
import json
import platform
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from bench_llm import DEFAULT_ENGINE, EVIDENCE, PROJECT, PROMPTS, SHARED_DATA

from workflow_scripts.core import models
from workflow_scripts.ingest.adapters.hotpotqa import load_hotpotqa
from workflow_scripts.judging import judges
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.parsing import parse_json
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.llm.templates import JUDGE_GROUNDED_REPLY

TIME_TARGET = 1.25
VALID_TARGET = 1.0
SIDES = ("constrained", "unconstrained")


def judge_requests(data: Path) -> list[llm.Request]:
    """64 Study A judge requests over HotpotQA: half grade the reference answer, half another question's."""
    ingested = load_hotpotqa({"path": str(data / "hotpotqa" / "hotpot_dev_distractor_100.json")}, "hotpotqa")
    units = ingested.units.sort(["group_id", "position"])
    paragraphs = {group: texts for group, texts in units.group_by("group_id").agg("text").iter_rows()}
    template = load_templates()["judge_grounded"]
    questions = ingested.questions.sort("qid").head(PROMPTS + 1).rows(named=True)
    requests = []
    for at, question in enumerate(questions[:PROMPTS]):
        graded = question if at % 2 == 0 else questions[at + 1]
        fields = {"question": question["text"], "answer": graded["answers"][0],
                  "references": "\n".join(f"- {reference}" for reference in question["answers"])}
        requests.append(llm.Request(question["qid"], template, fields, tuple(paragraphs[question["qid"]][:EVIDENCE])))
    return requests


def usable(table) -> tuple[int, int]:
    """(replies a judge accepts as strict JSON, replies accepted only after repair)."""
    strict = repaired = 0
    for row in table.iter_rows(named=True):
        reply = parse_json(row["text"], dict)
        if reply.value is not None and judges.validate_grounded(reply.value)[0] is not None:
            repaired += reply.repaired
            strict += not reply.repaired
    return strict, repaired


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=4)
    args = parser.parse_args()
    model_cache = PROJECT / "results" / "cache" / "models"
    budget = JUDGE_GROUNDED_REPLY.token_budget
    spec = {**DEFAULT_ENGINE, "sampling": {"max_new_tokens": budget}}
    engines = {side: llm.load_engine({**spec, "structured_outputs": side == "constrained"}, model_cache, "bench")
               for side in SIDES}
    requests = judge_requests(SHARED_DATA)
    lengths = {request.request_id: engines["unconstrained"].backend.count_tokens(
        llm.fit(request, engines["unconstrained"].backend, spec["max_prompt_tokens"]).prompt.text) for request in requests}
    ordered = sorted(requests, key=lambda request: lengths[request.request_id])
    size = -(-len(ordered) // args.slices)
    slices = [ordered[start : start + size] for start in range(0, len(ordered), size)]
    warm = [llm.Request("warm", requests[0].template, requests[0].fields, requests[0].evidence)]
    work = Path(tempfile.mkdtemp(prefix="bench-structured-"))
    for side in SIDES:  # load weights and compile the grammar outside the timed runs
        llm.generate(warm, engines[side], Path(tempfile.mkdtemp(dir=work)))
    seconds, tables = dict.fromkeys(SIDES, 0.0), {side: [] for side in SIDES}
    for at, part in enumerate(slices):
        for side in SIDES if at % 2 == 0 else SIDES[::-1]:
            started = time.perf_counter()
            table = llm.generate(part, engines[side], Path(tempfile.mkdtemp(dir=work)))
            seconds[side] += time.perf_counter() - started
            if (table["status"] != "ok").any() or (table["source"] != "generated").any():
                sys.exit("benchmark prompts must all be generated without error; check the engine")
            tables[side].append(table)
    print(f"# structured outputs, {date.today()}, {platform.node()}, {len(requests)} Study A judge prompts, "
          f"SmolLM2-135M ({models.resolve(spec['model']).name}), batch {spec['batch_size']}, token budget {budget}, "
          f"{args.slices} interleaved slices")
    print("side           seconds  completion_tokens  s/token  strict_valid  repaired_valid  finish_length")
    results = {}
    for side in SIDES:
        tokens = sum(int(table["completion_tokens"].sum()) for table in tables[side])
        strict, repaired = map(sum, zip(*(usable(table) for table in tables[side])))
        cut = sum(int((table["finish_reason"] == "length").sum()) for table in tables[side])
        results[side] = {"seconds": seconds[side], "tokens": tokens, "strict": strict, "repaired": repaired}
        print(f"{side:<14} {seconds[side]:7.1f}  {tokens:17d}  {seconds[side] / tokens:7.4f}  "
              f"{strict:>5d}/{len(requests)}  {repaired:>11d}/{len(requests)}  {cut:>10d}")
    ratio = results["constrained"]["seconds"] / results["unconstrained"]["seconds"]
    per_token = (results["constrained"]["seconds"] / results["constrained"]["tokens"]) / (
        results["unconstrained"]["seconds"] / results["unconstrained"]["tokens"])
    valid = results["constrained"]["strict"] / len(requests)
    print(f"time ratio constrained / unconstrained: {ratio:.2f} (target <= {TIME_TARGET}); per completion token "
          f"{per_token:.2f}")
    print(f"valid replies constrained: {valid:.0%} (target {VALID_TARGET:.0%}); unconstrained "
          f"{(results['unconstrained']['strict'] + results['unconstrained']['repaired']) / len(requests):.0%} "
          f"(strict or repaired)")
    print(json.dumps({"ratio": round(ratio, 3), "per_token_ratio": round(per_token, 3), "valid_constrained": valid}))


if __name__ == "__main__":
    main()
