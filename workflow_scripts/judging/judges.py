"""Judging answers: the two studies' LLM judges (Study B's deterministic scorers are `metrics.py`).

In:  answers to judge as a table (item_id, question, answer; Study A also references and evidence lists), a
     judge `llm.Engine`, the LLM cache folder and the templates (`rendering.load_templates`).
Out: one row per item: JUDGMENTS_QUALITY (Study C: is_answer, accuracy, completeness, faithfulness, relevance,
     clarity, overall) or JUDGMENTS_GROUNDED (Study A: abstained, correctness, faithfulness), with status "ok",
     "parse_failed" (no usable reply after the re-asks) or "error" (the judge call itself failed; not cached,
     so the next run retries it).

Study C's judge sees the question and the answer only. It first decides is_answer; when false every score is 0
(whatever the reply says, as in the study), otherwise each of the six scores must be an integer 1–5.
Study A's judge sees the question, the reference answers, the evidence units shown to the answerer and the
answer: correctness 0/1/2 against the references (wrong, unsupported or an unjustified abstention 0; partial
1; correct 2) and faithfulness 0/1/2 against the units shown; an abstention gets no faithfulness score (null).

Both judges are decoded under their reply schema (`templates.JUDGE_QUALITY_REPLY`, `templates.JUDGE_GROUNDED_REPLY`)
when the
judge's backend has structured outputs on (the default), so a reply is valid JSON with every score in range by
construction; `obtained` records how each accepted reply came about (constrained, parsed, repaired, reasked).
Parsing each reply: strict JSON, then repair (`parsing.parse_json`), then validation. A reply cut by its token
budget is status "length" (never re-asked: the same budget would cut it again). A reply that fails otherwise —
no JSON, a missing key, a non-integer, or a score out of range (a failure, never clamped) — is re-asked up to
`max_reasks` times: the conversation so far grows by the judge's reply and a turn giving the reason, and
the judge is asked again (each re-ask is a new prompt, so a new cache key, and a greedy judge is not simply
asked the same thing twice). What still fails is `parse_failed`; counts and shares are logged (`summary`).
"""

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import JUDGMENTS_GROUNDED, JUDGMENTS_QUALITY
from workflow_scripts.core.tables import Contract, frame
from workflow_scripts.core.vocabulary import JUDGE_SCORINGS, OBTAINED, STUDY_C_METRICS, TOKEN_COLUMNS
from workflow_scripts.core.errors import InputError
from workflow_scripts.judging import scores
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.backends import steps_of
from workflow_scripts.llm.constraints import Constraint
from workflow_scripts.llm.parsing import read_reply
from workflow_scripts.llm.rendering import render
from workflow_scripts.llm.templates import JUDGE_GROUNDED_REPLY, JUDGE_QUALITY_ANSWERED, JUDGE_QUALITY_REPLY, Template

log = logging.getLogger(__name__)

Validated = tuple[dict[str, Any] | None, str | None]


def _integer(reply: Mapping[str, Any], name: str, low: int, high: int) -> tuple[int | None, str | None]:
    value = reply.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        return None, f'"{name}" must be an integer from {low} to {high}, got {value!r}'
    if not low <= value <= high:
        return None, f'"{name}" = {int(value)} is outside {low}–{high}'
    return int(value), None


def validate_quality(reply: Mapping[str, Any]) -> Validated:
    """Scores from a quality-judge reply, or the reason it is unusable."""
    is_answer = reply.get("is_answer")
    if not isinstance(is_answer, bool):
        return None, f'"is_answer" must be true or false, got {is_answer!r}'
    if not is_answer:
        return {"is_answer": False, **dict.fromkeys(STUDY_C_METRICS, 0)}, None
    scores: dict[str, Any] = {"is_answer": True}
    for metric in STUDY_C_METRICS:
        scores[metric], failure = _integer(reply, metric, 1, 5)
        if failure:
            return None, failure
    return scores, None


def validate_grounded(reply: Mapping[str, Any]) -> Validated:
    """Scores from a grounded-judge reply (faithfulness null for abstentions), or the reason it is unusable."""
    abstained = reply.get("abstained")
    if not isinstance(abstained, bool):
        return None, f'"abstained" must be true or false, got {abstained!r}'
    correctness, failure = _integer(reply, "correctness", 0, 2)
    if failure:
        return None, failure
    if abstained:
        return {"abstained": True, "correctness": correctness, "faithfulness": None}, None
    faithfulness, failure = _integer(reply, "faithfulness", 0, 2)
    if failure:
        return None, failure
    return {"abstained": False, "correctness": correctness, "faithfulness": faithfulness}, None


@dataclass(frozen=True)
class Gate:
    """A judge field that gates the scores (Study C: is_answer false forces every score to 0): the value under
    which the scores are conditional, and the reply constraint fixing it, for the re-score of a reply that chose
    the other value."""

    field: str
    value: Any
    given: Constraint


@dataclass(frozen=True)
class JudgeSpec:
    """A judge: its template, how an item becomes template fields and evidence, how a reply is validated, its reply
    constraint (whose score fields get probability-weighted scores) and its gate, if any."""

    template: str
    contract: Contract
    request_parts: Callable[[Mapping[str, Any]], tuple[dict[str, str], tuple[str, ...]]]
    validate: Callable[[Mapping[str, Any]], Validated]
    constraint: Constraint
    gate: Gate | None = None

    @property
    def fields(self) -> tuple[str, ...]:
        """The reply's score fields (`scores.score_fields`)."""
        return scores.score_fields(self.constraint.schema, self.template)

    @property
    def gated(self) -> tuple[str, ...]:
        return tuple(name for name in self.fields if self.gate and name != self.gate.field)


QUALITY = JudgeSpec(
    "judge_quality", JUDGMENTS_QUALITY,
    lambda item: ({"question": item["question"], "answer": item["answer"]}, ()),
    validate_quality, JUDGE_QUALITY_REPLY, Gate("is_answer", True, JUDGE_QUALITY_ANSWERED),
)
GROUNDED = JudgeSpec(
    "judge_grounded", JUDGMENTS_GROUNDED,
    lambda item: (
        {
            "question": item["question"], "answer": item["answer"],
            "references": "\n".join(f"- {reference}" for reference in item["references"]),
        },
        tuple(item["evidence"]),
    ),
    validate_grounded, JUDGE_GROUNDED_REPLY,
)


def expected_column(name: str, boolean: bool = False) -> str:
    """The column of a field's probability-weighted score: <field>_prob for a boolean, else <field>_expected."""
    return f"{name}_prob" if boolean else f"{name}_expected"


def _score_columns(spec: JudgeSpec, reply: Mapping[str, Any], steps: Any) -> dict[str, Any]:
    """The probability-weighted columns of one accepted reply (see judging/scores.py) and its score_basis."""
    found = scores.field_scores(spec.constraint.schema, spec.fields, reply, steps)
    columns: dict[str, Any] = {}
    for name, score in found.items():
        columns[expected_column(name, isinstance(reply[name], bool))] = score.expected
        columns[f"{name}_mass"] = score.mass
    columns["score_basis"] = scores.weakest([score.basis for score in found.values()])
    return columns


def _gated(spec: JudgeSpec, results: dict[str, dict[str, Any]], originals: Mapping[str, llm.Request],
           engine: llm.Engine, cache_dir: Path, sampling: Mapping[str, Any] | None) -> None:
    """Conditional and unconditional expected scores under the gate: E[score | gate] from the reply itself when it
    chose the gate's value, else from a re-score of the same prompt decoded under the gate's branch alone; the
    unconditional one is P(gate) × E[score | gate]."""
    gate = spec.gate
    probability = expected_column(gate.field, isinstance(gate.value, bool))
    chose_other = [
        item_id for item_id, row in results.items() if row["status"] == "ok" and row[gate.field] != gate.value
    ]
    given: dict[str, dict[str, Any]] = {}
    if chose_other:
        requests = [replace(originals[item_id], request_id=f"{item_id}#given",
                            template=replace(originals[item_id].template, constraint=lambda fields: gate.given))
                    for item_id in chose_other]
        for item_id, row in zip(chose_other, llm.generate(requests, engine, cache_dir, sampling).iter_rows(named=True)):
            spend(results[item_id], row)
            parsed, _ = read_reply(row, dict) if row["status"] == "ok" else (None, None)
            if parsed is not None and parsed.value is not None:
                found = scores.field_scores(gate.given.schema, spec.gated, parsed.value, steps_of(row["token_steps"]))
                given[item_id] = {name: score.expected for name, score in found.items()}
    for item_id, row in results.items():
        if row["status"] != "ok":
            continue
        conditional = given.get(item_id, {}) if item_id in chose_other else {
            name: row.get(expected_column(name)) for name in spec.gated}
        for name in spec.gated:
            value = conditional.get(name)
            row[f"{name}_given_{gate.field}"] = value
            p = row.get(probability)
            # P(gate) = 0 (e.g. argmax_only on a reply that chose the other value): 0 whatever the scores given it
            row[expected_column(name)] = 0.0 if p == 0 else None if value is None or p is None else p * value


def spend(result: dict[str, Any], call: Mapping[str, Any]) -> None:
    """Add one call's prompt and completion tokens to a judgment row's (None once any call's count is unknown)."""
    for name in TOKEN_COLUMNS:
        spent, value = result.get(name, 0), call[name]
        result[name] = None if spent is None or value is None else spent + value


def judge(
    spec: JudgeSpec,
    items: pl.DataFrame,
    engine: llm.Engine,
    cache_dir: Path,
    templates: Mapping[str, Template],
    max_reasks: int = 2,
    sampling: Mapping[str, Any] | None = None,
) -> pl.DataFrame:
    """Judge every item (see the module docstring); one row per item, in item order."""
    template, reask = templates[spec.template], templates["reask"]
    originals: dict[str, llm.Request] = {}
    for item in items.iter_rows(named=True):
        fields, evidence = spec.request_parts(item)
        originals[item["item_id"]] = llm.Request(item["item_id"], template, fields, evidence)
    results: dict[str, dict[str, Any]] = {}
    spent: dict[str, dict[str, Any]] = {item_id: {} for item_id in originals}
    pending = dict(originals)
    for attempt in range(1, max_reasks + 2):
        if not pending:
            break
        table = llm.generate(list(pending.values()), engine, cache_dir, sampling)
        retry: dict[str, llm.Request] = {}
        for item_id, row in zip(pending, table.iter_rows(named=True)):
            spend(spent[item_id], row)
            base = {"item_id": item_id, "attempts": attempt, "judge_model": engine.config.model, "reply": row["text"],
                    **spent[item_id]}
            if row["status"] == "error":
                results[item_id] = {**base, "status": "error", "obtained": "error", "failure": row["error"]}
                continue
            parsed, obtained = read_reply(row, dict)
            verdict, failure = spec.validate(parsed.value) if parsed.value is not None else (None, parsed.failure)
            if verdict is not None:
                steps = steps_of(row["token_steps"]) if obtained == "constrained" else None
                results[item_id] = {
                    **base,
                    **verdict,
                    **_score_columns(spec, {**parsed.value, **verdict}, steps),
                    "status": "ok",
                    "obtained": "reasked" if attempt > 1 else obtained,
                }
                continue
            if obtained == "length":
                results[item_id] = {**base, "status": "length", "obtained": "length",
                                    "failure": f"the reply was cut at {row['completion_tokens']} tokens"}
                continue
            results[item_id] = {**base, "status": "parse_failed", "obtained": "parse_failed", "failure": failure}
            turns = render(reask, {"reason": failure})
            asked = pending[item_id]
            retry[item_id] = replace(
                asked,
                request_id=f"{item_id}#reask{attempt}",
                followup=(
                    *asked.followup,
                    ("assistant", row["text"]),
                    *((turn["role"], turn["content"]) for turn in turns),
                ),
            )
        pending = retry
    if spec.gate is not None:
        _gated(spec, results, originals, engine, cache_dir, sampling)
    table = frame([results[item_id] for item_id in originals], spec.contract)
    bare = table.filter((pl.col("status") == "ok") & (pl.col("score_basis") == scores.ARGMAX_ONLY)).height
    if bare:
        log.warning(
            "judge %s (%s): %d of %d judgments have no token log-probabilities at their scores (score_basis "
            "argmax_only: the expected scores are the written values); give the judge top_logprobs (openai, vllm) "
            "and structured outputs, or set judging.scoring: argmax", spec.template, engine.config.model, bare,
            table.filter(pl.col("status") == "ok").height,
        )
    counts = summary(table)
    log.info(
        "judge %s: %d items, %d ok (%d constrained, %d parsed, %d repaired, %d reasked), %d cut by length, "
        "%d parse_failed (%.1f%%), %d errors (%.1f%%)", spec.template, counts["items"], counts["ok"],
        counts["constrained"], counts["parsed"], counts["repaired"], counts["reasked"], counts["length"],
        counts["parse_failed"], 100 * counts["parse_failed_share"], counts["error"], 100 * counts["error_share"],
    )
    return table


def summary(judgments: pl.DataFrame) -> dict[str, float]:
    """Counts of judgments by how they were obtained (OBTAINED) and of ok ones, and the parse_failed and error
    shares."""
    obtained = Counter(judgments["obtained"].to_list())
    items = judgments.height
    return {
        "items": items, "ok": judgments.filter(pl.col("status") == "ok").height,
        **{how: obtained[how] for how in OBTAINED},
        "parse_failed_share": obtained["parse_failed"] / items if items else 0.0,
        "error_share": obtained["error"] / items if items else 0.0,
    }


def obtained_counts(obtained: Sequence[str | None], order: Sequence[str] = OBTAINED) -> str:
    """How a set of judgments came about, as "constrained: 15; length: 2" (`order`, non-zero counts); also the
    score bases, as "masked_exact: 17"."""
    counts = Counter(obtained)
    return "; ".join(f"{how}: {counts[how]}" for how in order if counts[how])




def reading(scoring: str) -> dict[str, str]:
    """The judgments columns a summary reads under `judging.scoring`: label → column (expected: the probability-
    weighted scores; argmax: the values the judge wrote). overall_given is the Study C overall score given
    is_answer (argmax: the written score, which the summary keeps only where is_answer is true)."""
    if scoring not in JUDGE_SCORINGS:
        raise InputError(f"judging.scoring: '{scoring}' is not one of {list(JUDGE_SCORINGS)}")
    if scoring == "argmax":
        return {"correctness": "correctness", "faithfulness": "faithfulness", "is_answer": "is_answer",
                "overall": "overall", "overall_given": "overall"}
    return {"correctness": "correctness_expected", "faithfulness": "faithfulness_expected",
            "is_answer": "is_answer_prob", "overall": "overall_expected", "overall_given": "overall_given_is_answer"}
