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
Trigger strategy (the path depends on its threshold, so its budget is a grid of thresholds, one policy each):
- flare (FLARE, Jiang et al. 2023, the masked-query form): step 1 searches with the question and writes the first
  sentence as ircot does; each later step first writes a look-ahead sentence from the evidence so far, with its
  tokens' probabilities (`Request.tokens`). When every token has probability ≥ θ the look-ahead is the step's
  sentence and nothing is searched; otherwise the step searches with the look-ahead, its tokens below β masked
  (the question when nothing is left), and writes the sentence again from the grown evidence. A step is one sentence
  and `calls` counts the searches made so far; the chain ends at the answer marker or at step K.

Batching: each step retrieves for every unfinished question in one `retrieve` call and generates every unfinished
question's thought and forced answer in one `generate` call (vLLM batches them; the cache makes a rerun free), so a
step costs one engine call whatever the number of questions (flare: two, the look-aheads first). Request ids:
"<qid>|<step>|thought", "<qid>|<step>|answer" and flare's "<qid>|<step>|lookahead". Evidence: a step's first
`per_step` retrieved units; those not already held join the evidence until it holds `total` units (first come, first
kept).
"""

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import TRAJECTORIES
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.tables import frame
from workflow_scripts.core.vocabulary import MULTISTEP_STRATEGIES, TRIGGER_STRATEGIES
from workflow_scripts.llm.engine import Request
from workflow_scripts.llm.templates import Template

log = logging.getLogger("ragfrontier.multistep")

ANSWER_MARKER = "so the answer is:"  # IRCoT's; matched case-insensitively


@dataclass(frozen=True)
class Settings:
    """One multi-step policy: its strategy, the step cap, the evidence kept per step and in total, and for flare the
    look-ahead threshold θ (a token below it makes the step search) and β (tokens below it are masked in the query;
    θ when not set)."""

    strategy: str
    k: int
    per_step: int
    total: int
    threshold: float | None = None
    mask_below: float | None = None

    def __post_init__(self) -> None:
        if self.strategy not in MULTISTEP_STRATEGIES:
            raise InputError(f"multistep strategy {self.strategy!r} is unknown; use one of {MULTISTEP_STRATEGIES}")
        if self.k < 1 or self.per_step < 1 or self.total < self.per_step:
            raise InputError(f"multistep: need k >= 1, per_step >= 1 and total >= per_step (got k = {self.k}, "
                             f"per_step = {self.per_step}, total = {self.total})")
        triggered = self.strategy in TRIGGER_STRATEGIES
        if triggered != (self.threshold is not None) or (self.mask_below is not None and not triggered):
            raise InputError(f"multistep: a threshold (and mask_below) is what a {TRIGGER_STRATEGIES} policy needs and "
                             f"only it (strategy {self.strategy!r}, threshold {self.threshold})")
        for name, value in (("threshold", self.threshold), ("mask_below", self.mask_below)):
            if value is not None and not 0.0 < value <= 1.0:
                raise InputError(f"multistep: {name} = {value} must lie in (0, 1]")


def answered_in(thought: str) -> str | None:
    """The answer a chain-of-thought sentence gives after the marker, or None when it gives none."""
    at = thought.lower().find(ANSWER_MARKER)
    return thought[at + len(ANSWER_MARKER):].strip() if at >= 0 else None


def next_query(strategy: str, question: str, thought: str) -> str | None:
    """The query of the step after one that wrote `thought` (flare: decided by that step's look-ahead)."""
    if strategy == "flare":
        return None
    return thought if strategy == "ircot" else f"{question} {thought}".strip()


@dataclass
class _Path:
    """A question's state between steps."""

    qid: str
    group_id: str
    question: str
    query: str | None
    evidence: list[str]
    chain: list[str]
    calls: int = 0
    lookahead: Mapping[str, Any] | None = None  # flare: this step's look-ahead row (GENERATIONS)


def _thought(path: _Path, step: int, texts: Mapping[str, str], templates: Mapping[str, Template],
             kind: str = "thought") -> Request:
    """The request for the step's chain-of-thought sentence (flare's look-ahead asks for its tokens)."""
    return Request(f"{path.qid}|{step}|{kind}", templates["multistep_thought"],
                   {"question": path.question, "chain": " ".join(path.chain)},
                   tuple(texts[unit] for unit in path.evidence), tokens=kind == "lookahead")


def _writes_thought(strategy: str, step: int, path: _Path) -> bool:
    """Whether the step generates its sentence after searching: ircot always, flare at step 1 and when it searched."""
    return strategy == "ircot" or (strategy == "flare" and (step == 1 or path.query is not None))


def masked_query(lookahead: Mapping[str, Any], below: float, question: str) -> str:
    """FLARE's masked query: the look-ahead's tokens whose probability is at least `below` (its token_steps), the
    question when none is left or the look-ahead failed."""
    if lookahead["status"] != "ok" or not lookahead["token_steps"]:
        return question
    kept = "".join(step["token"] for step in lookahead["token_steps"]
                   if math.exp(step["alternatives"][0]["logprob"]) >= below)
    return " ".join(kept.split()) or question


def _unsure(lookahead: Mapping[str, Any], threshold: float) -> bool:
    """A look-ahead that failed or holds a token below the threshold makes the step search."""
    return lookahead["status"] != "ok" or lookahead["min_token_prob"] is None or lookahead["min_token_prob"] < threshold


def _requests(paths: Sequence[_Path], step: int, strategy: str, texts: Mapping[str, str],
              templates: Mapping[str, Template]) -> list[Request]:
    requests = []
    for path in paths:
        shown = tuple(texts[unit] for unit in path.evidence)
        if _writes_thought(strategy, step, path):
            requests.append(_thought(path, step, texts, templates))
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
        if settings.strategy in TRIGGER_STRATEGIES and step > 1:
            _look_ahead(active, step, settings, known, templates, generate)
        searching = [path for path in active if path.query is not None]
        retrieved = _search(searching, settings.per_step, retrieve)
        added = {}
        for path in searching:
            held = set(path.evidence)
            new = [unit for unit in retrieved.get(path.qid, ([], []))[0] if unit not in held]
            added[path.qid] = (len(new), new[: max(settings.total - len(path.evidence), 0)])
            path.evidence.extend(added[path.qid][1])
            path.calls += 1
        known.update(texts(sorted({unit for path in active for unit in path.evidence} - known.keys())))
        generated = generate(_requests(active, step, settings.strategy, known, templates))
        by_id = {row["request_id"]: row for row in generated.iter_rows(named=True)}
        still = []
        for path in active:
            units, scores = retrieved.get(path.qid, ([], []))
            answer = by_id[f"{path.qid}|{step}|answer"]
            wrote = by_id.get(f"{path.qid}|{step}|thought") or path.lookahead or answer
            spent = [row for row in (answer, by_id.get(f"{path.qid}|{step}|thought"), path.lookahead) if row]
            thought = (wrote["text"] or "").strip() if wrote["status"] == "ok" else ""
            look = path.lookahead
            row = {
                "qid": path.qid, "group_id": path.group_id, "step": step, "calls": path.calls, "query": path.query,
                "unit_ids": units, "scores": scores, "new_units": added.get(path.qid, (0, []))[0],
                "added_units": len(added.get(path.qid, (0, []))[1]), "evidence_ids": list(path.evidence),
                "thought": thought, "lookahead": None if look is None else (look["text"] or "").strip(),
                "lookahead_min_prob": None if look is None else look["min_token_prob"],
                "answer": answer["text"] if answer["status"] == "ok" else None, "answer_status": answer["status"],
                "answer_entropy": answer["mean_entropy"], "answer_min_prob": answer["min_token_prob"],
                **_usage(spent),
            }
            path.chain.append(thought)
            answered = settings.strategy != "iter_retgen" and answered_in(thought) is not None
            ruled = stop is not None and stop(row)
            row["stop"] = "answered" if answered else "rule" if ruled else "cap" if step == settings.k else None
            rows.append(row)
            if row["stop"] is None:
                path.query = next_query(settings.strategy, path.question, thought)
                still.append(path)
        log.info("step %d: %d questions, %d searched, %d go on", step, len(active), len(searching), len(still))
        active = still
    return frame(rows, TRAJECTORIES)


def _search(paths: Sequence[_Path], per_step: int,
            retrieve: Callable[[pl.DataFrame], pl.DataFrame]) -> dict[str, tuple[list[str], list[float]]]:
    """One batched search for the paths' queries: qid → (its first `per_step` unit ids, their scores)."""
    if not paths:
        return {}
    queries = pl.DataFrame({"qid": [path.qid for path in paths], "group_id": [path.group_id for path in paths],
                            "text": [path.query for path in paths]},
                           schema={"qid": pl.String, "group_id": pl.String, "text": pl.String})
    ranked = retrieve(queries).sort(["qid", "rank"])
    return {qid: (group["unit_id"].to_list()[:per_step], group["score"].cast(pl.Float64).to_list()[:per_step])
            for (qid,), group in ranked.group_by("qid", maintain_order=True)}


def _look_ahead(paths: Sequence[_Path], step: int, settings: Settings, texts: Mapping[str, str],
                templates: Mapping[str, Template], generate: Callable[[Sequence[Request]], pl.DataFrame]) -> None:
    """flare: every path's look-ahead in one call; an unsure one gets its masked query, a sure one none."""
    looked = generate([_thought(path, step, texts, templates, "lookahead") for path in paths])
    by_id = {row["request_id"]: row for row in looked.iter_rows(named=True)}
    below = settings.mask_below if settings.mask_below is not None else settings.threshold
    for path in paths:
        path.lookahead = by_id[f"{path.qid}|{step}|lookahead"]
        path.query = (masked_query(path.lookahead, below, path.question)
                      if _unsure(path.lookahead, settings.threshold) else None)
