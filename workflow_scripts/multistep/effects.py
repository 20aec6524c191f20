"""What each extra retrieval step does: per-step correctness, fixed-K curves, paired effects and the oracle stop.

In:  TRAJECTORIES rows, the questions' reference answers (QUESTIONS: qid, answers), the scorer (vocabulary.SCORERS:
     contains, em, or f1 ≥ a threshold; judging/metrics.py, equal to the official HotpotQA script) and optionally
     the closed-book answers (GENERATIONS, request_id = qid) of the same questions; routing.bootstrap settings.
Out: `step_correctness` → (qid, group_id, step, correct; null where the forced answer failed) per logged step;
     `fixed_k` → per question its correctness under "k=1" … "k=K" (a question whose chain stopped before K keeps its
     last answer) and "oracle" (its best step: the headroom a perfect stop rule could reach, an upper bound), with
     the retrieval calls each spends; `curve` → per policy the mean with its bootstrap CI over groups and the mean
     calls; `comparisons` → COMPARISONS rows: each k=s against k=s−1 (what the extra step rescues, win, and harms,
     loss), each k=s against k=1 (single-step retrieval) and, given closed-book answers, against closed_book;
     `stop_table` → per stop rule replayed on the trajectories (stops.py; "chain": each path's own end) its mean
     correctness with CI, what it spends (calls, sequences, tokens, seconds), how many questions it leaves at K
     without an answer, and its paired difference against the fixed K whose mean calls are nearest (matched calls);
     `policy_tables` → the four tables the rule writes, the fourth the stop routers' budget frontiers over retrieval
     calls (budgets.py, on the questions' grouped splits).

Questions whose forced answer failed at a step it needs are left out of that policy's rows and counted (`failed`);
questions without reference answers cannot be scored and are counted too.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import MULTISTEP_COMPARISONS, MULTISTEP_CURVE, MULTISTEP_FRONTIERS, MULTISTEP_STOPS
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.tables import conform
from workflow_scripts.core.vocabulary import CLOSED_BOOK, SCORERS
from workflow_scripts.judging.metrics import score_answers
from workflow_scripts.multistep import budgets, stops
from workflow_scripts.stats.paired import compare_policies, group_bootstrap

ORACLE = "oracle"


def scored(answers: Sequence[str], references: Sequence[Sequence[str]], scorer: str, f1_threshold: float) -> list:
    """0/1 correctness of each answer by `scorer` (null for a missing answer)."""
    if scorer not in SCORERS:
        raise InputError(f"multistep: scorer {scorer!r} is unknown; use one of {list(SCORERS)}")
    present = [at for at, answer in enumerate(answers) if answer is not None]
    table = score_answers([answers[at] for at in present], [references[at] for at in present])
    hits = (table["f1"] >= f1_threshold) if scorer == "f1" else table[scorer].cast(pl.Boolean)
    values: list[float | None] = [None] * len(answers)
    for at, hit in zip(present, hits.to_list()):
        values[at] = float(hit)
    return values


def step_correctness(trajectories: pl.DataFrame, questions: pl.DataFrame, scorer: str,
                     f1_threshold: float = 0.5) -> pl.DataFrame:
    """(qid, group_id, step, calls, correct) for every logged step of a question that has reference answers."""
    rows = trajectories.join(questions.select("qid", "answers"), on="qid", how="left")
    rows = rows.filter(pl.col("answers").list.len() > 0).sort(["qid", "step"])
    correct = scored(rows["answer"].to_list(), rows["answers"].to_list(), scorer, f1_threshold)
    return rows.select("qid", "group_id", "step", "calls").with_columns(
        pl.Series("correct", correct, dtype=pl.Float64))


def fixed_k(correctness: pl.DataFrame, k: int) -> pl.DataFrame:
    """One row per question: its correctness under k=1 … k=K and the oracle, and the calls each spends."""
    last = correctness.group_by("qid").agg(pl.col("step").max().alias("last"))
    rows = []
    for (qid,), path in correctness.join(last, on="qid").sort(["qid", "step"]).group_by("qid", maintain_order=True):
        by_step = dict(zip(path["step"].to_list(), path["correct"].to_list()))
        calls = dict(zip(path["step"].to_list(), path["calls"].to_list()))
        final = path["last"][0]
        row: dict[str, Any] = {"qid": qid, "group_id": path["group_id"][0]}
        for s in range(1, k + 1):
            row[f"k={s}"], row[f"calls_k={s}"] = by_step[min(s, final)], calls[min(s, final)]
        known = [(value, step) for step, value in by_step.items() if value is not None]
        value, best = max(known, key=lambda item: (item[0], -item[1])) if known else (None, final)
        row[ORACLE], row[f"calls_{ORACLE}"] = value, calls[best]
        rows.append(row)
    return pl.DataFrame(rows)


def policies(k: int) -> list[str]:
    return [f"k={s}" for s in range(1, k + 1)] + [ORACLE]


def curve(table: pl.DataFrame, k: int, bootstrap: Mapping[str, Any], seed: int) -> pl.DataFrame:
    """Per policy: questions scored, failed, the mean correctness with its group-bootstrap CI, the mean calls."""
    return pl.DataFrame([{"policy": policy, **interval_of(table, policy, bootstrap, seed),
                          "calls": float(table.filter(pl.col(policy).is_not_null())[f"calls_{policy}"].mean())}
                         for policy in policies(k)])


def comparisons(table: pl.DataFrame, k: int, bootstrap: Mapping[str, Any], seed: int,
                closed_book: pl.DataFrame | None = None) -> pl.DataFrame:
    """COMPARISONS rows: each extra step against the one before, each K against single-step retrieval and, given
    closed-book correctness (qid, correct), against closed book; on the questions scored under both."""
    pairs = [(f"k={s}", f"k={s - 1}") for s in range(2, k + 1)] + [(f"k={s}", "k=1") for s in range(3, k + 1)]
    wide = table
    if closed_book is not None:
        wide = wide.join(closed_book.select("qid", pl.col("correct").alias(CLOSED_BOOK)), on="qid", how="left")
        pairs += [(f"k={s}", CLOSED_BOOK) for s in range(1, k + 1)]
    frames = []
    for a, b in pairs:
        both = wide.select("qid", "group_id", a, b).drop_nulls()
        if both.height:
            frames.append(compare_policies(both, [(a, b)], B=bootstrap["resamples"], seed=seed,
                                           method=bootstrap["method"], confidence=bootstrap["confidence"]))
    return pl.concat(frames) if frames else pl.DataFrame(schema=MULTISTEP_COMPARISONS.schema)


def rule_grid(settings: Mapping[str, Sequence[float]]) -> list[stops.Rule]:
    """The stop rules multistep.stop_rules names, in order: confident, calm, stale thresholds."""
    return (
        [stops.confident(p) for p in settings.get("confident", [])]
        + [stops.calm(h) for h in settings.get("calm", [])]
        + [stops.stale(n) for n in settings.get("stale", [])]
    )


def interval_of(values: pl.DataFrame, column: str, bootstrap: Mapping[str, Any], seed: int) -> dict[str, Any]:
    ok = values.filter(pl.col(column).is_not_null())
    found = group_bootstrap(ok[column].to_numpy(), ok["group_id"].to_numpy(), B=bootstrap["resamples"], seed=seed,
                            method=bootstrap["method"], confidence=bootstrap["confidence"])
    return {"n": ok.height, "failed": values.height - ok.height, "n_groups": found.n_groups, "mean": found.estimate,
            "low": found.low, "high": found.high}


def stop_table(trajectories: pl.DataFrame, correctness: pl.DataFrame, table: pl.DataFrame, k: int,
               rules: Sequence[stops.Rule], bootstrap: Mapping[str, Any], seed: int) -> pl.DataFrame:
    """Each stop rule replayed (module docstring), on the questions with reference answers."""
    scored_paths = trajectories.filter(pl.col("qid").is_in(correctness["qid"].unique().implode()))
    correct_at = {(qid, step): value for qid, step, value in correctness.select("qid", "step", "correct").iter_rows()}
    capped = {qid for qid, stop in scored_paths.select("qid", "stop").iter_rows() if stop == "cap"}
    curve_calls = {f"k={s}": float(table[f"calls_k={s}"].mean()) for s in range(1, k + 1)}
    rows = []
    for rule in [stops.Rule("chain", lambda row: False), *rules]:
        replayed = stops.replay(scored_paths, rule)
        replayed = replayed.with_columns(
            pl.Series("correct", [correct_at[(qid, step)] for qid, step in replayed.select("qid", "step").iter_rows()],
                      dtype=pl.Float64))
        calls = float(replayed["calls"].mean())
        matched = min(curve_calls, key=lambda name: (abs(curve_calls[name] - calls), curve_calls[name]))
        both = replayed.select("qid", "group_id", pl.col("correct").alias(rule.name)).join(
            table.select("qid", matched), on="qid").drop_nulls()
        paired = compare_policies(both, [(rule.name, matched)], B=bootstrap["resamples"], seed=seed,
                                  method=bootstrap["method"], confidence=bootstrap["confidence"]).row(0, named=True)
        at_cap = sum(qid in capped and step == k for qid, step in replayed.select("qid", "step").iter_rows())
        rows.append({
            "rule": rule.name, **interval_of(replayed, "correct", bootstrap, seed), "calls": calls,
            **{cost: float(replayed[cost].mean()) for cost in stops.COSTS}, "at_cap": at_cap,
            "matched": matched, "matched_calls": curve_calls[matched],
            **{f"delta_{key}" if key in ("estimate", "low", "high") else key: paired[key]
               for key in ("estimate", "low", "high", "p_permutation", "p_floor", "confidence")},
        })
    return pl.DataFrame(rows)


def closed_book_correctness(answers: pl.DataFrame, questions: pl.DataFrame, scorer: str,
                            f1_threshold: float) -> pl.DataFrame:
    """(qid, correct) of the closed-book answers (GENERATIONS, request_id = qid) of questions with references."""
    rows = answers.select(pl.col("request_id").alias("qid"),
                          pl.when(pl.col("status") == "ok").then(pl.col("text")).alias("answer"))
    rows = rows.join(questions.select("qid", "answers"), on="qid").filter(pl.col("answers").list.len() > 0)
    return rows.select("qid").with_columns(
        pl.Series("correct", scored(rows["answer"].to_list(), rows["answers"].to_list(), scorer, f1_threshold),
                  dtype=pl.Float64))


def policy_tables(trajectories: pl.DataFrame, questions: pl.DataFrame, closed_book: pl.DataFrame | None,
                  splits: pl.DataFrame, k: int, settings: Mapping[str, Any], routing: Mapping[str, Any],
                  budget_settings: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """curve, comparisons, stops and frontiers of one policy (module docstring; budgets.py) and what the frontiers
    fitted; an InputError when no question has references: a step's correctness needs them. `settings` is the
    multistep config block, `routing` the routing block (bootstrap, n_splits), `budget_settings` the budgets block."""
    correctness = step_correctness(trajectories, questions, settings["scorer"], settings["f1_threshold"])
    if not correctness.height:
        raise InputError("multistep: no question of this dataset has reference answers; a step's answer cannot be "
                         "scored (multistep.scorer needs them)")
    bootstrap = routing["bootstrap"]
    table = fixed_k(correctness, k)
    closed = (closed_book_correctness(closed_book, questions, settings["scorer"], settings["f1_threshold"])
              if closed_book is not None else None)
    frontiers, fitted = budgets.frontier_table(trajectories, correctness, splits, k, settings["stop_routers"],
                                               settings["ridge_alphas"], budget_settings, routing["n_splits"],
                                               bootstrap, seed)
    return {
        "curve": conform(curve(table, k, bootstrap, seed), MULTISTEP_CURVE),
        "comparisons": conform(comparisons(table, k, bootstrap, seed, closed), MULTISTEP_COMPARISONS),
        "stops": conform(stop_table(trajectories, correctness, table, k, rule_grid(settings["stop_rules"]),
                                    bootstrap, seed), MULTISTEP_STOPS),
        "frontiers": conform(frontiers, MULTISTEP_FRONTIERS) if frontiers.height else
        pl.DataFrame(schema=MULTISTEP_FRONTIERS.schema),
        "fitted": fitted,
    }
