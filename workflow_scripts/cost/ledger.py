"""The measured cost ledger: one row per (question, stage, component) of what every stage spent.

In:  the questions, and for every stage instance that works per query (a first-stage ranking per method and scope,
     a reranker's scores, an arm's run, a routing pair's features, an answered policy's generations and judgments,
     a multi-step policy's trajectories)
     its output tables (the columns its kind reads, `columns_read`) and the wall seconds of its Snakemake benchmark
     files, as `Measured` sources, each declared in the rules next to the stage's outputs: its `kind`
     (vocabulary.COST_KINDS: how its rows are priced), the `stage` and `component` it is recorded as, its tables
     and their contracts, benchmarks, device and, for an LLM kind, the model's prices. A sharded stage's seconds are
     its shard jobs' and gather's, summed. A new stage enters the ledger by declaring a source of an existing kind;
     nothing here names a rule.
Out: COST_LEDGER rows with measured wall seconds, the device, tokens in / out and the number of retrieval calls, LLM
     calls and reranked pairs, and the totals per stage. `basis` says how the seconds were measured: "item" — the
     stage's own per-item measurement (LLM generation: each request's latency, batch time apportioned by tokens in
     llm/engine.py); "job_even" — the job's benchmark seconds divided evenly over its items (queries, reranked pairs,
     judge calls, a multi-step policy's steps). Job seconds include start-up (imports, model loading), so a job_even
     share is an upper bound of the marginal cost; a job served from a content cache measures the cache hit, not the
     original computation.
     `money`: what the LLM calls' tokens cost at the model block's `prices` (tokens in × input_per_mtok + tokens out
     × output_per_mtok, per million; a served model's tokens are its server's `usage`); 0 for stages without an LLM,
     null for an LLM stage whose model has no prices or whose token counts a server did not give.

Plain functions of frames and values; the `cost_ledger` rule's job (cost/jobs/cost_ledger.py) reads the sources'
tables through their contracts and their benchmark files, and writes the tables.
"""

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import polars as pl

from workflow_scripts.core.contracts import COST_LEDGER
from workflow_scripts.core.vocabulary import COST_KINDS, IMPORTED, LLM_COST_KINDS, TOKEN_COLUMNS
from workflow_scripts.core.errors import InputError

COUNTS = ("retrieval_calls", "llm_calls", "rerank_pairs")


class Measured(NamedTuple):
    """One source as the ledger prices it: its declaration (`kind`, `stage`, `component`, `device`, `prices`), its
    tables (the columns `columns_read` names, in the order the source lists them) and its job's wall seconds (its
    benchmark files' mean `s`, summed over a sharded stage's jobs)."""

    source: Mapping[str, Any]
    tables: Sequence[pl.DataFrame]
    seconds: float


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


def retrieval_rows(tables: Sequence[pl.DataFrame], seconds: float, questions: pl.DataFrame) -> pl.DataFrame:
    """One search per question (questions that found nothing were searched too)."""
    return job_even(per_query(questions["qid"]), seconds, retrieval_calls=1)


def rerank_rows(tables: Sequence[pl.DataFrame], seconds: float, questions: pl.DataFrame) -> pl.DataFrame:
    """The reranker job's seconds split evenly over the (query, unit) pairs it scored."""
    items = tables[0].group_by("qid").len().select("qid", pl.col("len").cast(pl.Int64).alias("items")).sort("qid")
    return job_even(items, seconds).with_columns(pl.col("items").alias("rerank_pairs"))


def table_rows(tables: Sequence[pl.DataFrame], seconds: float, questions: pl.DataFrame) -> pl.DataFrame:
    """A per-query job (an arm's fusion and cut, a pair's features): its seconds split evenly over its queries."""
    return job_even(per_query(tables[0]["qid"]), seconds)


def generation_rows(tables: Sequence[pl.DataFrame], seconds: float, questions: pl.DataFrame) -> pl.DataFrame:
    """Each answer's own measured latency and tokens (llm/engine.py apportions a batch's wall time by tokens)."""
    answers = tables[0]
    return answers.select(
        pl.col("request_id").alias("qid"), pl.col("latency_s").alias("seconds"), pl.lit("item").alias("basis"),
        pl.lit(seconds).alias("job_seconds"),
        pl.lit(answers.height, dtype=pl.Int64).alias("job_items"), pl.lit(1, dtype=pl.Int64).alias("items"),
        "device", "prompt_tokens", "completion_tokens", pl.lit(1, dtype=pl.Int64).alias("llm_calls"),
    )


def judge_rows(tables: Sequence[pl.DataFrame], seconds: float, questions: pl.DataFrame) -> pl.DataFrame:
    """The judge job's seconds split evenly over its calls (both judges, re-asks included), with their tokens."""
    items = pl.concat(tables).group_by("item_id").agg(
        pl.col("attempts").sum().cast(pl.Int64).alias("items"),
        *(summed(name) for name in TOKEN_COLUMNS),
    ).rename({"item_id": "qid"})
    return job_even(items.sort("qid"), seconds).with_columns(pl.col("items").alias("llm_calls"))


def multistep_rows(tables: Sequence[pl.DataFrame], seconds: float, questions: pl.DataFrame) -> pl.DataFrame:
    """A multi-step policy (TRAJECTORIES): the job's seconds split evenly over its steps (each its generations and,
    but for a flare step that was sure, one search), with each question's retrieval calls (its last step's `calls`),
    generated sequences and tokens."""
    steps = tables[0].group_by("qid").agg(
        pl.len().cast(pl.Int64).alias("items"), pl.col("sequences").sum().cast(pl.Int64).alias("llm_calls"),
        pl.col("calls").max().cast(pl.Int64).alias("retrieval_calls"), *(summed(name) for name in TOKEN_COLUMNS),
    )
    return job_even(steps.sort("qid"), seconds)


def imported_rows(tables: Sequence[pl.DataFrame], seconds: float, questions: pl.DataFrame) -> pl.DataFrame:
    """An imported system's own report (SYSTEM_COSTS): its latency as the question's seconds (null: not reported),
    its tokens and money; counted as one search and one LLM call per question (what the pipeline can know)."""
    costs = tables[0]
    return costs.select(
        "qid", pl.col("latency_s").alias("seconds"), pl.lit(IMPORTED).alias("basis"),
        pl.lit(seconds).alias("job_seconds"), pl.lit(costs.height, dtype=pl.Int64).alias("job_items"),
        pl.lit(1, dtype=pl.Int64).alias("items"), pl.lit(IMPORTED).alias("device"),
        pl.col("prompt_tokens").cast(pl.Int64), pl.col("completion_tokens").cast(pl.Int64),
        pl.lit(1, dtype=pl.Int64).alias("retrieval_calls"), pl.lit(1, dtype=pl.Int64).alias("llm_calls"), "money",
        "currency",
    )


def money_of(prices: Mapping[str, Any]) -> pl.Expr:
    """What a row's prompt_tokens and completion_tokens cost at an LLM block's `prices` (per million tokens)."""
    return ((pl.col("prompt_tokens") * prices["input_per_mtok"]
             + pl.col("completion_tokens") * prices["output_per_mtok"]) / 1e6).cast(pl.Float64)


def money(rows: pl.DataFrame, kind: str, prices: Mapping[str, Any] | None) -> pl.DataFrame:
    """The rows with `money` and `currency` (see the module docstring)."""
    if kind == IMPORTED:  # the system's own money column
        return rows
    if kind not in LLM_COST_KINDS:
        return rows.with_columns(pl.lit(0.0).alias("money"), pl.lit(None, dtype=pl.String).alias("currency"))
    if prices is None:
        return rows.with_columns(pl.lit(None, dtype=pl.Float64).alias("money"),
                                 pl.lit(None, dtype=pl.String).alias("currency"))
    return rows.with_columns(money_of(prices).alias("money"), pl.lit(prices["currency"]).alias("currency"))


ROWS_OF_KIND = {  # how each kind of source becomes ledger rows (vocabulary.COST_KINDS): (tables, seconds, questions)
    "retrieval": retrieval_rows, "rerank": rerank_rows, "table": table_rows, "generation": generation_rows,
    "judge": judge_rows, "multistep": multistep_rows, IMPORTED: imported_rows,
}
COLUMNS_OF_KIND = {  # the columns of a source's tables its kind's rows are made of (None: the whole table)
    "retrieval": [], "rerank": ["qid"], "table": ["qid"], "generation": None,
    "judge": ["item_id", "attempts", *TOKEN_COLUMNS], "multistep": ["qid", "calls", "sequences", *TOKEN_COLUMNS],
    IMPORTED: None,
}
assert tuple(ROWS_OF_KIND) == tuple(COLUMNS_OF_KIND) == COST_KINDS


def kind_of(source: Mapping[str, Any]) -> str:
    """The source's declared kind, checked against vocabulary.COST_KINDS."""
    kind = source.get("kind")
    if kind not in ROWS_OF_KIND:
        raise InputError(f"cost ledger: source '{source.get('stage')}' / '{source.get('component')}' declares kind "
                         f"{kind!r}; known kinds: {list(COST_KINDS)}")
    return kind


def columns_read(source: Mapping[str, Any]) -> list[str] | None:
    """The columns of each of the source's tables that its rows are made of (None: all), for the job to read."""
    return COLUMNS_OF_KIND[kind_of(source)]


def stage_rows(measured: Measured, questions: pl.DataFrame) -> pl.DataFrame:
    """The ledger rows of one source, priced by its declared kind and recorded under its stage and component."""
    source = measured.source
    kind = kind_of(source)
    rows = ROWS_OF_KIND[kind](measured.tables, measured.seconds, questions)
    defaults = {"device": source.get("device", "cpu"), "prompt_tokens": None, "completion_tokens": None,
                **{name: 0 for name in COUNTS}}
    rows = rows.with_columns(pl.lit(value).alias(name) for name, value in defaults.items() if name not in rows.columns)
    rows = money(rows, kind, source.get("prices"))
    return rows.with_columns(pl.lit(source["stage"]).alias("stage"), pl.lit(source["component"]).alias("component"))


def ledger(sources: Sequence[Measured], questions: pl.DataFrame, dataset: str) -> pl.DataFrame:
    """The COST_LEDGER rows of every source stage, for the dataset's questions."""
    tables = [stage_rows(measured, questions) for measured in sources]
    known = questions["qid"].implode()
    columns = [column for column in COST_LEDGER.columns if column != "dataset"]
    table = pl.concat([table.select(columns) for table in tables], how="vertical_relaxed")
    unknown = table.filter(~pl.col("qid").is_in(known))
    if unknown.height:
        raise InputError(f"cost ledger: {unknown.height} rows name questions that are not in the questions table "
                         f"(e.g. {unknown['qid'][0]!r} in stage {unknown['stage'][0]}); rerun the stale stage")
    return table.with_columns(pl.lit(dataset).alias("dataset")).sort("qid", "stage", "component")


def summed(column: str) -> pl.Expr:
    """The column's sum, null when any value is (money of an unpriced model is unknown, not 0)."""
    return pl.when(pl.col(column).null_count() == 0).then(pl.col(column).sum()).alias(column)


def stage_totals(table: pl.DataFrame) -> pl.DataFrame:
    """Rows, seconds and money per (stage, component, basis): results/<dataset>/cost/stages.csv."""
    return table.group_by("stage", "component", "basis").agg(
        pl.len().alias("rows"), summed("seconds"), summed("money"), pl.col("currency").drop_nulls().first(),
    ).sort("stage", "component", "basis")
