"""Pricing a routing pair's policies from the ledger: what a router pays before deciding, when it does not fire and
when it fires, per held-out question, in seconds, token-equivalents and money (`COST_MEASURES`).

In:  the dataset's ledger (COST_LEDGER, cost/ledger.py) plus the rows of the pair's own stages (`Measured`),
     `costs.prices`, `costs.reuse`, the pair's config and arms, the first-stage rankings (RANKING) of its reranked
     arms (to count reranker candidates), and `stages`: the ledger's name of each stage a policy consists of
     (PRICED_STAGES in the rules: `first_stage` per method, `rerank`, `arm`, `features`, `answers`), so nothing here
     names a rule.
Out: `pair_costs` → a PairPlan (which units of work each component of a policy consists of) and the Costs of
     those units per question; `trigger_cost` → what firing adds over not firing. Token-equivalents = prompt tokens ×
     prompt_token + generated tokens × completion_token + retrieval calls × retrieval_call + reranked pairs ×
     rerank_pair (the prices in `costs.prices`). Money is the ledger's (the LLM blocks' `prices`); a sum with an
     unpriced part is null (unknown), never a smaller number.

A library below routing: routing/routers.py prices a trigger for cost-aware thresholds with it, and
routing/policy_costs.py prices each frozen policy (rule `route_costs`).
"""

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import COST_LEDGER
from workflow_scripts.core.tables import conform
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.vocabulary import COST_MEASURES
from workflow_scripts.cost.ledger import Measured, stage_rows
from workflow_scripts.retrieval.arms import candidates_from, first_stages, stage_scope


def priced(ledger_table: pl.DataFrame, prices: Mapping[str, float]) -> pl.DataFrame:
    """The ledger with a token_equivalents column (see the module docstring)."""
    return ledger_table.with_columns(
        (pl.col("prompt_tokens").fill_null(0) * prices["prompt_token"]
         + pl.col("completion_tokens").fill_null(0) * prices["completion_token"]
         + pl.col("retrieval_calls") * prices["retrieval_call"]
         + pl.col("rerank_pairs") * prices["rerank_pair"]).cast(pl.Float64).alias("token_equivalents")
    )


class Costs:
    """Per-query cost (`COST_MEASURES`) of named units of work on a fixed set of queries.

    A unit is ("stage", stage, component[, what to do when it is missing]) — a ledger entry — or ("pairs", arm,
    reranker, base_arm_or_None): the arm's reranker candidates, all of them or only those the base arm did not
    already score.
    """

    def __init__(self, table: pl.DataFrame, qids: pl.Series, candidate_sets: Mapping[str, pl.DataFrame],
                 rerank_stage: str):
        self.table, self.qids, self.candidate_sets = table, qids.sort(), candidate_sets
        self.rerank_stage = rerank_stage
        currencies = table["currency"].drop_nulls().unique().sort().to_list()
        if len(currencies) > 1:
            raise InputError(f"route costs: the ledger prices LLM calls in {currencies}; price every model block in "
                             f"one currency and rerun cost_ledger")
        self.currency: str | None = currencies[0] if currencies else None

    def stage(self, stage: str, component: str, fix: str) -> pl.DataFrame:
        rows = self.table.filter((pl.col("stage") == stage) & (pl.col("component") == component))
        found = pl.DataFrame({"qid": self.qids}).join(rows, on="qid", how="left")
        missing = found.filter(pl.col("seconds").is_null())
        if missing.height:
            raise InputError(f"route costs: no measured '{stage}' cost for '{component}' on {missing.height} of the "
                             f"questions costed (e.g. {missing['qid'][0]!r}); {fix}")
        return found.select("qid", *COST_MEASURES, pl.col("rerank_pairs").cast(pl.Float64))

    def pairs(self, arm: str, reranker: str, reused_from: str | None) -> pl.DataFrame:
        """The arm's candidate pairs × the reranker's measured cost per pair (new pairs only when reusing)."""
        rate = self.stage(self.rerank_stage, reranker, "the arm's reranker job has no ledger row").with_columns(
            pl.col(measure) / pl.col("rerank_pairs") for measure in COST_MEASURES)
        pool = self.candidate_sets[arm]
        if reused_from is not None:
            pool = pool.join(self.candidate_sets[reused_from], on=["qid", "unit_id"], how="anti")
        counts = pool.group_by("qid").len().select("qid", pl.col("len").cast(pl.Float64).alias("count"))
        return rate.join(counts, on="qid", how="left").select(
            "qid", *(pl.col(measure) * pl.col("count").fill_null(0) for measure in COST_MEASURES),
            pl.col("count").fill_null(0).alias("rerank_pairs"))

    def unit(self, unit: tuple) -> pl.DataFrame:
        if unit[0] == "pairs":
            return self.pairs(*unit[1:])
        return self.stage(unit[1], unit[2], unit[3] if len(unit) > 3 else "the stage did not run for these questions")

    def total(self, units: Sequence[tuple]) -> pl.DataFrame:
        """qid and `COST_MEASURES` summed over `units` (zero for none; null where a part is)."""
        frame = pl.DataFrame({"qid": self.qids, **{measure: 0.0 for measure in COST_MEASURES}})
        for unit in units:
            part = self.unit(unit).select("qid", *COST_MEASURES)
            frame = frame.join(part, on="qid", suffix="_part").select(
                "qid", *((pl.col(measure) + pl.col(f"{measure}_part")).alias(measure) for measure in COST_MEASURES))
        return frame


def arm_units(name: str, arm: Mapping[str, Any], stages: Mapping[str, Any], reused: Sequence[tuple] = (),
              base: str | None = None) -> list[tuple]:
    """The units of running arm `name`, minus `reused` ones; rerank pairs the base arm scored are skipped too."""
    units = [("stage", stages["first_stage"][method], stage_scope(arm, method)) for method in first_stages(arm)]
    units = [unit for unit in units if unit not in reused]
    if arm.get("rerank"):
        units.append(("pairs", name, arm["rerank"], base))
    return units + [("stage", stages["arm"], name)]


class PairPlan:
    """Which units each router pays before deciding, when it does not fire and when it fires."""

    def __init__(self, pair_name: str, pair: Mapping[str, Any], arms: Mapping[str, Any], reuse: bool,
                 stages: Mapping[str, Any]):
        self.pair_name, self.base, self.alternative = pair_name, pair["base"], pair["alternative"]
        self.arms, self.reuse, self.stages = arms, reuse, stages
        self.base_is_arm = self.base in arms
        self.scope = arms[self.base if self.base_is_arm else self.alternative]["scope"]

    def answers(self, policy: str) -> tuple:
        return ("stage", self.stages["answers"], policy,
                "answer this policy on held-out (generation.policies, generation.splits)")

    def pre_decision(self, families: frozenset[str]) -> list[tuple]:
        units = [("stage", self.stages["features"], self.pair_name)] if families else []
        if self.base_is_arm:
            units += arm_units(self.base, self.arms[self.base], self.stages)
        probe = ("stage", self.stages["first_stage"]["bm25"], self.scope)
        if "retrieval_score" in families and probe not in units:
            units.append(probe)
        if "uncertainty" in families:
            units.append(self.answers(self.base))
        return units

    def base_answer(self, families: frozenset[str]) -> list[tuple]:
        return [] if "uncertainty" in families else [self.answers(self.base)]

    def trigger_retrieval(self, families: frozenset[str], reuse: bool | None = None) -> list[tuple]:
        reuse = self.reuse if reuse is None else reuse
        alternative = self.arms[self.alternative]
        paid = self.pre_decision(families) if reuse else []
        reranker = alternative.get("rerank")
        same_reranker = self.base_is_arm and reranker and reranker == self.arms[self.base].get("rerank")
        return arm_units(self.alternative, alternative, self.stages, paid,
                         self.base if reuse and same_reranker else None)

    def trigger_generation(self) -> list[tuple]:
        return [self.answers(self.alternative)]


def trigger_cost(plan: PairPlan, costs: Costs, families: frozenset[str]) -> pl.DataFrame:
    """qid and the `COST_MEASURES` that firing adds over not firing, for a router reading `families`.

    Arm pairs (Study A): the alternative arm's retrieval (minus what the base arm already paid, with costs.reuse);
    both sides are answered, so generation cancels out. Study B: retrieval plus the answer with evidence, minus the
    closed-book answer (which uncertainty routers pay before deciding anyway)."""
    fired = plan.trigger_retrieval(families)
    saved: list[tuple] = []
    if not plan.base_is_arm:
        fired, saved = fired + plan.trigger_generation(), plan.base_answer(families)
    on, off = costs.total(fired), costs.total(saved)
    return on.join(off, on="qid", suffix="_off").select(
        "qid", *((pl.col(measure) - pl.col(f"{measure}_off")).alias(measure) for measure in COST_MEASURES))


def with_pair_rows(table: pl.DataFrame, sources: Sequence[Measured]) -> pl.DataFrame:
    """The dataset's ledger plus the rows of the pair's own stages (its features job). The dataset ledger leaves
    them out, so that adding a routing pair changes nothing another pair is priced from."""
    if not sources:
        return table
    dataset = table["dataset"][0] if table.height else ""
    questions, columns = table.select("qid").unique(), list(COST_LEDGER.columns)
    rows = [stage_rows(source, questions).with_columns(pl.lit(dataset).alias("dataset")).select(columns)
            for source in sources]
    return conform(pl.concat([table, *rows], how="vertical_relaxed"), COST_LEDGER)


def candidate_sets(arms: Mapping[str, Mapping[str, Any]], names: Sequence[str],
                   rankings: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Arm → its reranker candidate pairs (qid, unit_id); `rankings` maps '<method>_<scope>' to a RANKING table."""
    return {
        name: candidates_from(arms[name], rankings).select("qid", "unit_id")
        for name in names if name in arms and arms[name].get("rerank")
    }


def pair_costs(pair_name: str, settings: Mapping[str, Any], ledger: pl.DataFrame, rankings: Mapping[str, pl.DataFrame],
               pair_sources: Sequence[Measured], qids: pl.Series) -> tuple[PairPlan, Costs]:
    """The pair's cost plan and the priced ledger (COST_LEDGER) on `qids`; `settings` holds the pair's config, its
    arms, costs.reuse, costs.prices and the ledger's names of the stages (`stages`); `rankings` the RANKING tables of
    its reranked arms ('<method>_<scope>' → table) and `pair_sources` the pair's own stages, as the ledger's."""
    pair, arms = settings["pair"], settings["arms"]
    plan = PairPlan(pair_name, pair, arms, settings["reuse"], settings["stages"])
    table = priced(with_pair_rows(ledger, pair_sources), settings["prices"])
    pools = candidate_sets(arms, [pair["base"], pair["alternative"]], rankings)
    return plan, Costs(table, qids.unique(), pools, settings["stages"]["rerank"])
