"""Multi-step retrieval: the batched loop that retrieves again, one step at a time, for every unfinished question.

In:  the questions (qid, group_id, text), a strategy (vocabulary.MULTISTEP_STRATEGIES), the step cap K, the
     evidence kept per step and in total, and three callables: `retrieve(queries)` — a frame (qid, group_id, text)
     of the step's queries → ranked rows (qid, unit_id, rank, score), best first; `texts(unit_ids)` → unit_id →
     text; and `generate(requests)` → GENERATIONS rows in request order (llm/engine.generate bound to an engine and
     its cache).
     Optionally an online stop rule (`stops.Rule`) checked after each step.
Out: the TRAJECTORIES rows: one per question × step taken — the step's query, the units it retrieved with their
     scores, how many were new and how many joined the evidence, the text the step wrote (its `thought`), the answer
     forced from the evidence so far with its token uncertainty, tokens and seconds, and for a question's last step
     why it stopped.

Strategies (query chaining: the path up to a step does not depend on when a question stops, so any stop rule can be
replayed on the logged trajectory, stops.py):
- ircot (IRCoT): the step writes the next sentence of a chain of thought from the question, the evidence so far and
  the chain; that sentence is the next step's query; the chain ends when a sentence carries the answer marker
  ("So the answer is:"), or at K — a forced stop, counted, never dropped.
- iter_retgen (Iter-RetGen): the step's forced answer is its thought; the next query is the question followed by
  that answer; it runs K steps.

Batching: each step retrieves for every unfinished question in one `retrieve` call and generates every unfinished
question's thought and forced answer in one `generate` call (vLLM batches them; the cache makes a rerun free), so a
step costs one engine call whatever the number of questions. Request ids: "<qid>|<step>|thought" and
"<qid>|<step>|answer". Evidence: a step's first `per_step` retrieved units; those not already held join the
evidence until it holds `total` units (first come, first kept).
"""

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import TRAJECTORIES
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.tables import frame
from workflow_scripts.core.vocabulary import MULTISTEP_STRATEGIES
from workflow_scripts.llm.engine import Request
from workflow_scripts.llm.templates import Template

log = logging.getLogger("ragfrontier.multistep")

ANSWER_MARKER = "so the answer is:"  # IRCoT's; matched case-insensitively


@dataclass(frozen=True)
class Settings:
    """One multi-step policy: its strategy, the step cap and the evidence kept per step and in total."""

    strategy: str
    k: int
    per_step: int
    total: int

    def __post_init__(self) -> None:
        if self.strategy not in MULTISTEP_STRATEGIES:
            raise InputError(f"multistep strategy {self.strategy!r} is unknown; use one of {MULTISTEP_STRATEGIES}")
        if self.k < 1 or self.per_step < 1 or self.total < self.per_step:
            raise InputError(f"multistep: need k >= 1, per_step >= 1 and total >= per_step (got k = {self.k}, "
                             f"per_step = {self.per_step}, total = {self.total})")


def answered_in(thought: str) -> str | None:
    """The answer a chain-of-thought sentence gives after the marker, or None when it gives none."""
    at = thought.lower().find(ANSWER_MARKER)
    return thought[at + len(ANSWER_MARKER):].strip() if at >= 0 else None


def next_query(strategy: str, question: str, thought: str) -> str:
    """The query of the step after one that wrote `thought`."""
    return thought if strategy == "ircot" else f"{question} {thought}".strip()


@dataclass
class _Path:
    """A question's state between steps."""

    qid: str
    group_id: str
    question: str
    query: str
    evidence: list[str]
    chain: list[str]


def _requests(paths: Sequence[_Path], step: int, strategy: str, texts: Mapping[str, str],
              templates: Mapping[str, Template]) -> list[Request]:
    requests = []
    for path in paths:
        shown = tuple(texts[unit] for unit in path.evidence)
        if strategy == "ircot":
            requests.append(Request(f"{path.qid}|{step}|thought", templates["multistep_thought"],
                                    {"question": path.question, "chain": " ".join(path.chain)}, shown))
        requests.append(Request(f"{path.qid}|{step}|answer", templates["answer_rag"], {"question": path.question},
                                shown))
    return requests


def _usage(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a step's generated sequences cost: tokens and apportioned seconds summed."""
    return {
        "sequences": len(rows),
        "prompt_tokens": sum(int(row["prompt_tokens"] or 0) for row in rows),
        "completion_tokens": sum(int(row["completion_tokens"] or 0) for row in rows),
        "seconds": sum(float(row["latency_s"]) for row in rows),
    }


def run_loop(questions: pl.DataFrame, settings: Settings, templates: Mapping[str, Template],
             retrieve: Callable[[pl.DataFrame], pl.DataFrame], texts: Callable[[Sequence[str]], Mapping[str, str]],
             generate: Callable[[Sequence[Request]], pl.DataFrame],
             stop: Callable[[Mapping[str, Any]], bool] | None = None) -> pl.DataFrame:
    """Every question's trajectory (module docstring); `stop` ends a question after a step it accepts."""
    active = [_Path(qid, group, text, text, [], []) for qid, group, text in
              questions.select("qid", "group_id", "text").iter_rows()]
    rows: list[dict[str, Any]] = []
    known: dict[str, str] = {}
    for step in range(1, settings.k + 1):
        if not active:
            break
        queries = pl.DataFrame({"qid": [path.qid for path in active], "group_id": [path.group_id for path in active],
                                "text": [path.query for path in active]},
                               schema={"qid": pl.String, "group_id": pl.String, "text": pl.String})
        ranked = retrieve(queries).sort(["qid", "rank"])
        retrieved = {qid: (group["unit_id"].to_list()[: settings.per_step],
                           group["score"].cast(pl.Float64).to_list()[: settings.per_step])
                     for (qid,), group in ranked.group_by("qid", maintain_order=True)}
        added = {}
        for path in active:
            held = set(path.evidence)
            new = [unit for unit in retrieved.get(path.qid, ([], []))[0] if unit not in held]
            added[path.qid] = (len(new), new[: max(settings.total - len(path.evidence), 0)])
            path.evidence.extend(added[path.qid][1])
        known.update(texts(sorted({unit for path in active for unit in path.evidence} - known.keys())))
        generated = generate(_requests(active, step, settings.strategy, known, templates))
        by_id = {row["request_id"]: row for row in generated.iter_rows(named=True)}
        still = []
        for path in active:
            units, scores = retrieved.get(path.qid, ([], []))
            answer = by_id[f"{path.qid}|{step}|answer"]
            spent = [answer] + ([by_id[f"{path.qid}|{step}|thought"]] if settings.strategy == "ircot" else [])
            wrote = spent[-1]
            thought = (wrote["text"] or "").strip() if wrote["status"] == "ok" else ""
            row = {
                "qid": path.qid, "group_id": path.group_id, "step": step, "query": path.query, "unit_ids": units,
                "scores": scores, "new_units": added[path.qid][0], "added_units": len(added[path.qid][1]),
                "evidence_ids": list(path.evidence), "thought": thought,
                "answer": answer["text"] if answer["status"] == "ok" else None, "answer_status": answer["status"],
                "answer_entropy": answer["mean_entropy"], "answer_min_prob": answer["min_token_prob"],
                **_usage(spent),
            }
            path.chain.append(thought)
            answered = settings.strategy == "ircot" and answered_in(thought) is not None
            ruled = stop is not None and stop(row)
            row["stop"] = "answered" if answered else "rule" if ruled else "cap" if step == settings.k else None
            rows.append(row)
            if row["stop"] is None:
                path.query = next_query(settings.strategy, path.question, thought)
                still.append(path)
        log.info("step %d: %d questions, %d go on", step, len(active), len(still))
        active = still
    return frame(rows, TRAJECTORIES)
