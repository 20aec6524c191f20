"""Measured cost: one per-query ledger of what every stage spent, and what each routing policy really costs.

Rule `cost_ledger` (per dataset)
  In:  the questions, and for every stage instance that works per query (a first-stage ranking per method and
       scope, a reranker's scores, an arm's run, a routing pair's features, an answered policy's generations
       and judgments) its output table and its Snakemake benchmark file (`results/benchmarks/<rule>/...tsv`);
       `params.sources` lists them (stage, component, tables, benchmarks, device); a sharded stage's seconds are its
       shard jobs' and gather's, summed.
  Out: results/<dataset>/cost/ledger.parquet (COST_LEDGER): one row per (query, stage, component) with measured
       wall seconds, the device, tokens in / out and the number of retrieval calls, LLM calls and reranked pairs.
       `basis` says how the seconds were measured: "item" — the stage's own per-item measurement (LLM generation:
       each request's latency, batch time apportioned by tokens in llm/engine.py); "job_even" — the job's benchmark
       seconds divided evenly over its items (queries, reranked pairs, judge calls). Job seconds include start-up
       (imports, model loading), so a job_even share is an upper bound of the marginal cost; a job served from a
       content cache measures the cache hit, not the original computation.

Rule `route_costs` (per dataset and routing pair base → alternative)
  In:  the ledger, routed.parquet, frontiers.parquet, the frozen routers, the first-stage rankings of both arms
       (to count each arm's reranker candidates), `costs.prices` and `costs.reuse`, the budget grid.
  Out (results/<dataset>/cost/<pair>/):
  - policy_costs.parquet / .csv  per router on held-out: pre-decision cost of its trigger family (query-only:
    the feature job; uncertainty: the no-retrieval answer; retrieval-score: the BM25 probe; base_arm: the base
    arm's retrieval), the base answer when it does not fire, and when it fires the alternative's retrieval and
    its generation with evidence — mean seconds and token-equivalents per query;
  - cost_frontiers.parquet  every frontier point (exact / deployable / conservative, per budget) with the mean
    cost of the same triggers, so frontiers can be drawn against cost as well as usage;
  - reuse.csv  (arm pairs only) the per-query cost of triggering the alternative arm when it reuses the base
    arm's first-stage rankings and rerank scores versus recomputing them.
Token-equivalents = prompt tokens × prompt_token + generated tokens × completion_token + retrieval calls ×
retrieval_call + reranked pairs × rerank_pair (the prices in `costs.prices`).
"""

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.core.contracts import (
    COST_FRONTIERS,
    COST_LEDGER,
    FEATURE_FAMILY,
    GENERATIONS,
    POLICY_COSTS,
    QUESTIONS,
    RANKING,
    REUSE_COSTS,
    conform,
    read_table,
    write_table,
)
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.runtime import run_job
from workflow_scripts.retrieval.arms import candidates_from, first_stages
from workflow_scripts.routing.frontiers import frontier_table
from workflow_scripts.routing.routers import read_artifact

log = logging.getLogger("ragfrontier.cost")

COUNTS = ("retrieval_calls", "llm_calls", "rerank_pairs")


# --- The ledger


def benchmark_seconds(paths: Sequence[str | Path]) -> float:
    """Wall seconds of one stage instance: the mean `s` of each of its Snakemake benchmark files (one job, or a
    sharded stage's shards and gather), summed."""
    total = 0.0
    for path in map(Path, paths):
        if not path.is_file():
            raise InputError(f"cost ledger: benchmark file {path} does not exist; rerun the rule that writes it")
        table = pl.read_csv(path, separator="\t")
        if "s" not in table.columns or table.height == 0:
            raise InputError(f"cost ledger: benchmark file {path} has no 's' (seconds) row")
        total += float(table["s"].mean())
    return total


def job_even(items: pl.DataFrame, job_seconds: float, **fixed: Any) -> pl.DataFrame:
    """Ledger rows from per-query item counts (qid, items): the job's seconds split evenly over all items."""
    total = int(items["items"].sum())
    if total == 0:
        raise InputError("cost ledger: a job processed no items; nothing to attribute its seconds to")
    return items.with_columns(
        (pl.col("items") * job_seconds / total).alias("seconds"), pl.lit("job_even").alias("basis"),
        pl.lit(job_seconds).alias("job_seconds"), pl.lit(total, dtype=pl.Int64).alias("job_items"),
        *(pl.lit(value).alias(name) for name, value in fixed.items()),
    )


def per_query(qids: pl.Series) -> pl.DataFrame:
    return pl.DataFrame({"qid": qids.unique().sort()}).with_columns(pl.lit(1, dtype=pl.Int64).alias("items"))


def retrieval_rows(source: Mapping[str, Any], questions: pl.DataFrame) -> pl.DataFrame:
    """One search per question (questions that found nothing were searched too)."""
    return job_even(per_query(questions["qid"]), benchmark_seconds(source["benchmarks"]), retrieval_calls=1)


def rerank_rows(source: Mapping[str, Any]) -> pl.DataFrame:
    """The reranker job's seconds split evenly over the (query, unit) pairs it scored."""
    scores = pl.read_parquet(source["tables"][0], columns=["qid"])
    items = scores.group_by("qid").len().select("qid", pl.col("len").cast(pl.Int64).alias("items")).sort("qid")
    return job_even(items, benchmark_seconds(source["benchmarks"])).with_columns(pl.col("items").alias("rerank_pairs"))


def table_rows(source: Mapping[str, Any]) -> pl.DataFrame:
    """A per-query job (an arm's fusion and cut, a pair's features): its seconds split evenly over its queries."""
    return job_even(per_query(pl.read_parquet(source["tables"][0], columns=["qid"])["qid"]), benchmark_seconds(source["benchmarks"]))


def generation_rows(source: Mapping[str, Any]) -> pl.DataFrame:
    """Each answer's own measured latency and tokens (llm/engine.py apportions a batch's wall time by tokens)."""
    answers = read_table(source["tables"][0], GENERATIONS)
    return answers.select(
        pl.col("request_id").alias("qid"), pl.col("latency_s").alias("seconds"), pl.lit("item").alias("basis"),
        pl.lit(benchmark_seconds(source["benchmarks"])).alias("job_seconds"),
        pl.lit(answers.height, dtype=pl.Int64).alias("job_items"), pl.lit(1, dtype=pl.Int64).alias("items"),
        "device", "prompt_tokens", "completion_tokens", pl.lit(1, dtype=pl.Int64).alias("llm_calls"),
    )


def judge_rows(source: Mapping[str, Any]) -> pl.DataFrame:
    """The judge job's seconds split evenly over its calls (both judges, re-asks included)."""
    calls = pl.concat([pl.read_parquet(path, columns=["item_id", "attempts"]) for path in source["tables"]])
    items = calls.group_by("item_id").agg(pl.col("attempts").sum().cast(pl.Int64).alias("items")).rename({"item_id": "qid"})
    return job_even(items.sort("qid"), benchmark_seconds(source["benchmarks"])).with_columns(pl.col("items").alias("llm_calls"))


def stage_rows(source: Mapping[str, Any], questions: pl.DataFrame) -> pl.DataFrame:
    stage = source["stage"]
    if stage in ("retrieve_bm25", "retrieve_dense"):
        rows = retrieval_rows(source, questions)
    elif stage == "rerank":
        rows = rerank_rows(source)
    elif stage in ("run_arm", "route_features"):
        rows = table_rows(source)
    elif stage == "generate_answers":
        rows = generation_rows(source)
    elif stage == "judge_answers":
        rows = judge_rows(source)
    else:
        raise InputError(f"cost ledger: stage '{stage}' is not one the ledger knows; known: {sorted(COST_LEDGER.enums['stage'])}")
    defaults = {"device": source.get("device", "cpu"), "prompt_tokens": None, "completion_tokens": None,
                **{name: 0 for name in COUNTS}}
    rows = rows.with_columns(pl.lit(value).alias(name) for name, value in defaults.items() if name not in rows.columns)
    return rows.with_columns(pl.lit(stage).alias("stage"), pl.lit(source["component"]).alias("component"))


def ledger(sources: Sequence[Mapping[str, Any]], questions: pl.DataFrame, dataset: str) -> pl.DataFrame:
    """The COST_LEDGER rows of every source stage, for the dataset's questions."""
    tables = [stage_rows(source, questions) for source in sources]
    known = questions["qid"].implode()
    table = pl.concat([table.select(column for column in COST_LEDGER.columns if column != "dataset") for table in tables],
                      how="vertical_relaxed")
    unknown = table.filter(~pl.col("qid").is_in(known))
    if unknown.height:
        raise InputError(f"cost ledger: {unknown.height} rows name questions that are not in the questions table "
                         f"(e.g. {unknown['qid'][0]!r} in stage {unknown['stage'][0]}); rerun the stale stage")
    return table.with_columns(pl.lit(dataset).alias("dataset")).sort("qid", "stage", "component")


def ledger_rule(smk: Any) -> None:
    questions = read_table(smk.input.questions, QUESTIONS)
    table = write_table(ledger(smk.params.sources, questions, smk.wildcards.dataset), smk.output.ledger, COST_LEDGER)
    totals = table.group_by("stage", "component", "basis").agg(pl.len().alias("rows"), pl.col("seconds").sum()).sort("stage", "component")
    write_text_atomic(totals.write_csv(float_precision=4), smk.output.stages)
    log.info("ledger: %d rows; seconds by stage: %s", table.height, totals.select("stage", "component", "seconds").rows())


# --- What a policy costs


def priced(ledger_table: pl.DataFrame, prices: Mapping[str, float]) -> pl.DataFrame:
    """The ledger with a token_equivalents column (see the module docstring)."""
    return ledger_table.with_columns(
        (pl.col("prompt_tokens").fill_null(0) * prices["prompt_token"]
         + pl.col("completion_tokens").fill_null(0) * prices["completion_token"]
         + pl.col("retrieval_calls") * prices["retrieval_call"]
         + pl.col("rerank_pairs") * prices["rerank_pair"]).cast(pl.Float64).alias("token_equivalents")
    )


def router_families(frozen: Sequence[str]) -> dict[str, frozenset[str]]:
    """Router → the feature families its frozen artifact reads (empty for random / always / never); the router's
    name is the one recorded inside the artifact."""
    families = {}
    for path in frozen:
        artifact = read_artifact(Path(path).read_bytes())
        router, names = artifact["router"], artifact["features"]
        unknown = [name for name in names if name not in FEATURE_FAMILY]
        if unknown:
            raise InputError(f"route costs: router '{router}' reads features {unknown} that belong to no cost family "
                             f"(contracts.FEATURE_FAMILY)")
        families[router] = frozenset(FEATURE_FAMILY[name] for name in names)
    return families


class Costs:
    """Per-query cost (seconds, token-equivalents) of named units of work on a fixed set of queries.

    A unit is ("stage", stage, component) — a ledger entry — or ("pairs", arm, base_arm_or_None): the arm's
    reranker candidates, all of them or only those the base arm did not already score.
    """

    def __init__(self, table: pl.DataFrame, qids: pl.Series, candidate_sets: Mapping[str, pl.DataFrame]):
        self.table, self.qids, self.candidate_sets = table, qids.sort(), candidate_sets

    def stage(self, stage: str, component: str, fix: str) -> pl.DataFrame:
        rows = self.table.filter((pl.col("stage") == stage) & (pl.col("component") == component))
        found = pl.DataFrame({"qid": self.qids}).join(rows, on="qid", how="left")
        missing = found.filter(pl.col("seconds").is_null())
        if missing.height:
            raise InputError(f"route costs: no measured '{stage}' cost for '{component}' on {missing.height} of the "
                             f"questions costed (e.g. {missing['qid'][0]!r}); {fix}")
        return found.select("qid", "seconds", "token_equivalents", pl.col("rerank_pairs").cast(pl.Float64))

    def pairs(self, arm: str, reranker: str, reused_from: str | None) -> pl.DataFrame:
        """The arm's candidate pairs × the reranker's measured cost per pair (new pairs only when reusing)."""
        rate = self.stage("rerank", reranker, "the arm's reranker job has no ledger row").with_columns(
            (pl.col("seconds") / pl.col("rerank_pairs")).alias("per_pair_s"),
            (pl.col("token_equivalents") / pl.col("rerank_pairs")).alias("per_pair_te"))
        pool = self.candidate_sets[arm]
        if reused_from is not None:
            pool = pool.join(self.candidate_sets[reused_from], on=["qid", "unit_id"], how="anti")
        counts = pool.group_by("qid").len().select("qid", pl.col("len").cast(pl.Float64).alias("count"))
        return rate.join(counts, on="qid", how="left").select(
            "qid", (pl.col("per_pair_s") * pl.col("count").fill_null(0)).alias("seconds"),
            (pl.col("per_pair_te") * pl.col("count").fill_null(0)).alias("token_equivalents"),
            pl.col("count").fill_null(0).alias("rerank_pairs"))

    def unit(self, unit: tuple) -> pl.DataFrame:
        if unit[0] == "pairs":
            return self.pairs(*unit[1:])
        fix = {"generate_answers": "answer this policy on held-out (generation.policies, generation.splits)"}.get(
            unit[1], "the stage did not run for these questions")
        return self.stage(unit[1], unit[2], fix)

    def total(self, units: Sequence[tuple]) -> pl.DataFrame:
        """qid, seconds, token_equivalents summed over `units` (zero for none)."""
        frame = pl.DataFrame({"qid": self.qids, "seconds": 0.0, "token_equivalents": 0.0})
        for unit in units:
            part = self.unit(unit).select("qid", pl.col("seconds").alias("s"), pl.col("token_equivalents").alias("t"))
            frame = frame.join(part, on="qid").select(
                "qid", (pl.col("seconds") + pl.col("s")).alias("seconds"),
                (pl.col("token_equivalents") + pl.col("t")).alias("token_equivalents"))
        return frame


def arm_units(name: str, arm: Mapping[str, Any], reused: Sequence[tuple] = (), base: str | None = None) -> list[tuple]:
    """The units of running arm `name`, minus `reused` ones; rerank pairs the base arm scored are skipped too."""
    units = [("stage", f"retrieve_{method}", arm["scope"]) for method in first_stages(arm)]
    units = [unit for unit in units if unit not in reused]
    if arm.get("rerank"):
        units.append(("pairs", name, arm["rerank"], base))
    return units + [("stage", "run_arm", name)]


class PairPlan:
    """Which units each router pays before deciding, when it does not fire and when it fires."""

    def __init__(self, pair_name: str, pair: Mapping[str, Any], arms: Mapping[str, Any], reuse: bool):
        self.pair_name, self.base, self.alternative = pair_name, pair["base"], pair["alternative"]
        self.arms, self.reuse = arms, reuse
        self.base_is_arm = self.base in arms
        self.scope = arms[self.base if self.base_is_arm else self.alternative]["scope"]

    def pre_decision(self, families: frozenset[str]) -> list[tuple]:
        units = [("stage", "route_features", self.pair_name)] if families else []
        if self.base_is_arm:
            units += arm_units(self.base, self.arms[self.base])
        if "retrieval_score" in families and ("stage", "retrieve_bm25", self.scope) not in units:
            units.append(("stage", "retrieve_bm25", self.scope))
        if "uncertainty" in families:
            units.append(("stage", "generate_answers", self.base))
        return units

    def base_answer(self, families: frozenset[str]) -> list[tuple]:
        return [] if "uncertainty" in families else [("stage", "generate_answers", self.base)]

    def trigger_retrieval(self, families: frozenset[str], reuse: bool | None = None) -> list[tuple]:
        reuse = self.reuse if reuse is None else reuse
        alternative = self.arms[self.alternative]
        paid = self.pre_decision(families) if reuse else []
        same_reranker = self.base_is_arm and alternative.get("rerank") and alternative.get("rerank") == self.arms[self.base].get("rerank")
        return arm_units(self.alternative, alternative, paid, self.base if reuse and same_reranker else None)

    def trigger_generation(self) -> list[tuple]:
        return [("stage", "generate_answers", self.alternative)]


def trigger_cost(plan: PairPlan, costs: Costs, families: frozenset[str]) -> pl.DataFrame:
    """qid, seconds, token_equivalents that firing adds over not firing, for a router reading `families`.

    Arm pairs (Study A): the alternative arm's retrieval (minus what the base arm already paid, with costs.reuse);
    both sides are answered, so generation cancels out. Study B: retrieval plus the answer with evidence, minus the
    closed-book answer (which uncertainty routers pay before deciding anyway)."""
    fired = plan.trigger_retrieval(families)
    saved: list[tuple] = []
    if not plan.base_is_arm:
        fired, saved = fired + plan.trigger_generation(), plan.base_answer(families)
    on, off = costs.total(fired), costs.total(saved)
    return on.join(off, on="qid", suffix="_off").select(
        "qid", (pl.col("seconds") - pl.col("seconds_off")).alias("seconds"),
        (pl.col("token_equivalents") - pl.col("token_equivalents_off")).alias("token_equivalents"))


def with_pair_rows(table: pl.DataFrame, sources: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """The dataset's ledger plus the rows of the pair's own stages (its features job). The dataset ledger leaves
    them out, so that adding a routing pair changes nothing another pair is priced from."""
    if not sources:
        return table
    dataset = table["dataset"][0] if table.height else ""
    rows = [stage_rows(source, table.select("qid").unique()).with_columns(pl.lit(dataset).alias("dataset")).select(list(COST_LEDGER.columns))
            for source in sources]
    return conform(pl.concat([table, *rows], how="vertical_relaxed"), COST_LEDGER)


def measured_costs(pair_name: str, settings: Mapping[str, Any], ledger: str, qids: pl.Series) -> tuple[PairPlan, Costs]:
    """The pair's cost plan and the priced ledger on `qids`; `settings` holds the pair's config, its arms,
    costs.reuse, costs.prices, the rankings of its reranked arms ('<method>_<scope>' → file) and the sources of
    the pair's own stages (`pair_sources`, as the ledger's)."""
    pair, arms = settings["pair"], settings["arms"]
    plan = PairPlan(pair_name, pair, arms, settings["reuse"])
    table = priced(with_pair_rows(pl.read_parquet(ledger), settings.get("pair_sources", ())), settings["prices"])
    pools = candidate_sets(arms, [pair["base"], pair["alternative"]], settings["rankings"])
    return plan, Costs(table, qids.unique(), pools)


def policy_costs(plan: PairPlan, costs: Costs, heldout: pl.DataFrame, families: Mapping[str, frozenset[str]]) -> pl.DataFrame:
    """POLICY_COSTS rows: each router's frozen policy on held-out, cost by component (mean per query)."""
    rows = []
    for router, fams in families.items():
        table = heldout.filter(pl.col("router") == router).sort("qid")
        fired = table["triggered"].cast(pl.Float64).to_numpy()
        adaptive = (table["metric_on"] * table["triggered"] + table["metric_off"] * ~table["triggered"]).mean()
        parts = {
            "pre_decision": (costs.total(plan.pre_decision(fams)), None),
            "base_answer": (costs.total(plan.base_answer(fams)), 1.0 - fired),
            "trigger_retrieval": (costs.total(plan.trigger_retrieval(fams)), fired),
            "trigger_generation": (costs.total(plan.trigger_generation()), fired),
        }
        for component, (cost, weight) in parts.items():
            seconds, tokens = cost["seconds"].to_numpy(), cost["token_equivalents"].to_numpy()
            if weight is not None:
                seconds, tokens = seconds * weight, tokens * weight
            rows.append({"router": router, "families": "+".join(sorted(fams)), "component": component,
                         "usage": float(fired.mean()), "accuracy": float(adaptive), "seconds": float(seconds.mean()),
                         "token_equivalents": float(tokens.mean())})
    return pl.DataFrame(rows)


def cost_frontiers(plan: PairPlan, costs: Costs, routed: pl.DataFrame, frontiers: pl.DataFrame,
                   families: Mapping[str, frozenset[str]], budgets: Mapping[str, Any]) -> pl.DataFrame:
    """Every frontier point with the mean cost of the same triggers (frontiers.frontier_table on cost as metric)."""
    tables = []
    for router in frontiers["router"].unique(maintain_order=True):
        fams = families[router]
        off = costs.total(plan.pre_decision(fams) + plan.base_answer(fams))
        on = costs.total(plan.pre_decision(fams) + plan.trigger_retrieval(fams) + plan.trigger_generation())
        scored = routed.filter(pl.col("router") == router)
        heldout = scored.filter(pl.col("split") == "heldout").select("qid", "score")
        calibration = scored.filter(pl.col("split") == "calibration").select("score")
        measured = {}
        for column in ("seconds", "token_equivalents"):
            held = heldout.join(off.select("qid", pl.col(column).alias("metric_off")), on="qid").join(
                on.select("qid", pl.col(column).alias("metric_on")), on="qid")
            table = frontier_table(calibration, held, budgets["grid"], budgets["delta"])
            measured[column] = table.select("frontier", "budget", pl.col("usage").alias("recomputed"), pl.col("accuracy").alias(column))
        points = frontiers.filter(pl.col("router") == router).select("router", "frontier", "budget", "usage", "accuracy")
        joined = points.join(measured["seconds"], on=["frontier", "budget"]).join(
            measured["token_equivalents"].drop("recomputed"), on=["frontier", "budget"])
        if joined.height != points.height or (joined["usage"] - joined["recomputed"]).abs().max() > 1e-9:
            raise InputError(f"route costs: router '{router}': frontiers.parquet does not match the triggers recomputed "
                             f"from routed.parquet with budgets {list(budgets['grid'])}; rerun route_frontiers")
        tables.append(joined.drop("recomputed"))
    return pl.concat(tables)


def reuse_costs(plan: PairPlan, costs: Costs) -> pl.DataFrame:
    """REUSE_COSTS rows: the alternative arm's trigger cost per stage, reusing the base arm's work or not."""
    rows = []
    for mode, reuse in (("reuse", True), ("recompute", False)):
        for unit in plan.trigger_retrieval(frozenset({"base_arm"}), reuse):
            cost = costs.unit(unit)
            stage, component = ("rerank", unit[2]) if unit[0] == "pairs" else (unit[1], unit[2])
            rows.append({"mode": mode, "stage": stage, "component": component, "seconds": cost["seconds"].mean(),
                         "token_equivalents": cost["token_equivalents"].mean(),
                         "rerank_pairs": cost["rerank_pairs"].fill_null(0).mean()})
    return pl.DataFrame(rows)


def candidate_sets(arms: Mapping[str, Mapping[str, Any]], names: Sequence[str], rankings: Mapping[str, str]) -> dict[str, pl.DataFrame]:
    """Arm → its reranker candidate pairs (qid, unit_id); `rankings` maps '<method>_<scope>' to a ranking file."""
    loaded = {key: read_table(path, RANKING) for key, path in rankings.items()}
    return {
        name: candidates_from(arms[name], loaded).select("qid", "unit_id")
        for name in names if name in arms and arms[name].get("rerank")
    }


def route_costs_rule(smk: Any) -> None:
    routed = pl.read_parquet(smk.input.routed)
    heldout = routed.filter(pl.col("split") == "heldout")
    settings = {"pair": smk.params.pair, **smk.params.costing}
    plan, costs = measured_costs(smk.wildcards.pair, settings, smk.input.ledger, heldout["qid"])
    families = router_families(list(smk.input.frozen))
    policies = write_table(policy_costs(plan, costs, heldout, families), smk.output.policies, POLICY_COSTS)
    write_text_atomic(policies.write_csv(float_precision=6), smk.output.policies_csv)
    frontiers = cost_frontiers(plan, costs, routed, pl.read_parquet(smk.input.frontiers), families, smk.params.budgets)
    write_table(frontiers, smk.output.frontiers, COST_FRONTIERS)
    reuse = reuse_costs(plan, costs) if plan.base_is_arm else pl.DataFrame(schema=REUSE_COSTS.schema)
    write_text_atomic(write_table(reuse, smk.output.reuse, REUSE_COSTS).write_csv(float_precision=6), smk.output.reuse_csv)
    totals = policies.group_by("router", maintain_order=True).agg(pl.col("usage").first(), pl.col("seconds").sum())
    log.info("%s: mean seconds per held-out query by router: %s", smk.wildcards.pair, totals.rows())


def main(smk: Any) -> None:
    {"cost_ledger": ledger_rule, "route_costs": route_costs_rule}[smk.rule](smk)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
