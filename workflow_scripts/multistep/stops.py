"""Stop rules for multi-step retrieval, scored by replaying them on the logged trajectories (no rerun).

In:  TRAJECTORIES rows (multistep/loop.py) logged without an online rule, and a `Rule`: it reads one step's row and
     says whether the question stops after that step. `fixed_k(K)` stops at step K; `confident(p)` once the forced
     answer's lowest token probability reaches p; `calm(h)` once its mean token entropy is at most h nats;
     `stale(n)` once a step brings fewer than n units not already in the evidence.
Out: `replay` → one row per question: the step it stops at (the first the rule accepts, else where the chain ended
     itself: its answer marker or step K), that step's forced answer, and what the path cost up to there —
     retrieval calls (the step's `calls`: one per step, but for flare), generated sequences, prompt and completion
     tokens, seconds.

For query-chaining strategies (ircot, iter_retgen) a question's path up to any step does not depend on when it
stops, so replaying a rule equals running the loop online with it: the same answers and the same calls
(tests/test_multistep.py runs both). So does flare's at a fixed threshold (its steps decide from the path so far);
its threshold changes the path, so each threshold of its grid is a policy of its own. A trajectory that an online
rule already cut cannot be replayed past its cut: replaying it is an error naming the question.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from workflow_scripts.core.errors import InputError

COSTS = ("sequences", "prompt_tokens", "completion_tokens", "seconds")


@dataclass(frozen=True)
class Rule:
    """A named stop rule: `accepts(row)` is True when the question stops after that step."""

    name: str
    accepts: Callable[[Mapping[str, Any]], bool]

    def __call__(self, row: Mapping[str, Any]) -> bool:
        return self.accepts(row)


def fixed_k(k: int) -> Rule:
    if k < 1:
        raise InputError(f"stop rule fixed K: K = {k} must be at least 1")
    return Rule(f"k={k}", lambda row: row["step"] >= k)


def confident(probability: float) -> Rule:
    if not 0.0 <= probability <= 1.0:
        raise InputError(f"stop rule confident: the probability {probability} must lie in [0, 1]")
    return Rule(f"confident@{probability:g}",
                lambda row: row["answer_min_prob"] is not None and row["answer_min_prob"] >= probability)


def calm(entropy: float) -> Rule:
    if entropy < 0:
        raise InputError(f"stop rule calm: the entropy {entropy} must be at least 0 nats")
    return Rule(f"calm@{entropy:g}",
                lambda row: row["answer_entropy"] is not None and row["answer_entropy"] <= entropy)


def stale(new_units: int) -> Rule:
    if new_units < 1:
        raise InputError(f"stop rule stale: {new_units} new units must be at least 1")
    return Rule(f"stale@{new_units}", lambda row: row["new_units"] < new_units)


def replay(trajectories: pl.DataFrame, rule: Rule) -> pl.DataFrame:
    """Where `rule` stops each question and what its path cost up to there (module docstring)."""
    rows = []
    for (qid,), path in trajectories.sort(["qid", "step"]).group_by("qid", maintain_order=True):
        spent = dict.fromkeys(COSTS, 0)
        for row in path.iter_rows(named=True):
            for cost in COSTS:
                spent[cost] += row[cost]
            if rule(row) or row["stop"] in ("answered", "cap"):
                break
            if row["stop"] == "rule":
                raise InputError(f"trajectory of {qid} was cut by an online stop rule at step {row['step']}; replay "
                                 f"needs trajectories logged without one")
        rows.append({"qid": qid, "group_id": row["group_id"], "step": row["step"], "answer": row["answer"],
                     "calls": row["calls"], **spent})
    schema = {"qid": pl.String, "group_id": pl.String, "step": pl.Int32, "answer": pl.String, "calls": pl.Int32,
              "sequences": pl.Int64, "prompt_tokens": pl.Int64, "completion_tokens": pl.Int64, "seconds": pl.Float64}
    return pl.DataFrame(rows, schema=schema)
