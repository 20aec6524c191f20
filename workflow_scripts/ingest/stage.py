"""Ingest stage: one dataset's raw files → the canonical `units`, `questions` and `qrels` tables.

In:  a dataset's config entry (`format` and the format's file keys), read by the adapter for that format; for a
     dataset with `generate_questions`, the questions the generator wrote from its units (ingest/questions.py),
     which become its questions and qrels.
Out: `units.parquet`, `questions.parquet`, `qrels.parquet` (schemas in `contracts`) and `ingest_report.json`
     (what was read, dropped, flagged, and the adapter's `notes` on counts its format makes expected), all
     written atomically.

Bounded memory: the adapter's stream (`adapters.registry.STREAMS`) yields the units one by one while it reads
the corpus; they are checked and written in batches of `BATCH_UNITS` rows (fewer when their texts reach
`BATCH_TEXT` characters), one Parquet row group each, by the units table's `tables.TableWriter` (into the
atomic temporary file of `units.parquet`), so the job holds one batch of units, never the corpus. Kept across
batches: a hash of every unit id (the uniqueness check over a stream needs every id) — the report's and the checks'
other figures are read back from the written file, a column at a time. Questions and qrels are built in memory
(small next to a corpus). `build` takes any sink with `write(batch)` and `finish() -> LazyFrame`, as
`TableWriter` has them (the tests keep the batches in memory).

Shared clean-up after every adapter:
- unit text is stripped; units with empty text are dropped and counted (`units_empty_dropped`);
- duplicate unit ids or question ids stop the run with an error listing a few of them (unit ids over the whole
  stream, once it is read, the empty units' too, before the writer checks the key of the written ones: the
  message is the one `tables.conform` gives for the whole table);
- an empty corpus, or an empty question set of a format that has questions (not the corpus-only formats
  `registry.CORPUS_ONLY`), stops the run, and so does an id that is empty or contains whitespace or
  control characters (tab, newline: run files and TREC files separate their fields by whitespace);
- qrels naming unknown units or questions are kept (they are real judgments: recall counts them) and counted
  as warnings (`qrels_unknown_units`, `qrels_unknown_questions`).
Every batch is checked with `tables.conform` as the adapter gave it and again by the writer; a batch that breaks
the units contract in another way than a repeated id (a null, a kind outside the enumeration: adapter bugs, not
input) stops the run at that batch, and the message counts that batch's rows.
"""


import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from workflow_scripts.core.atomic import write_json_atomic
from workflow_scripts.core.contracts import GENERATED_QUESTIONS, QRELS, QUESTIONS, UNITS
from workflow_scripts.core.tables import ContractError, TableWriter, conform, frame, read_table, write_table
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested, Units
from workflow_scripts.ingest.adapters.registry import CORPUS_ONLY, adapter_for, stream_for

log = logging.getLogger("ragfrontier.ingest")

BATCH_UNITS = 10_000  # unit rows per written batch (one Parquet row group)
BATCH_TEXT = 32 * 2**20  # … or fewer, once their texts reach this many characters
UNIT_IDS = replace(UNITS, columns={"unit_id": UNITS.columns["unit_id"]}, enums={})  # the units table's key alone


@dataclass
class Tables:
    """One dataset's checked tables; `units` is lazy: the written file, or the batches held in memory."""

    units: pl.LazyFrame
    questions: pl.DataFrame
    qrels: pl.DataFrame
    counts: dict[str, int]
    notes: dict[str, str]


class UnitBatches:
    """Unit rows → checked, stripped batches without empty units, written to a sink. Kept for the uniqueness
    check over the whole stream (`check_ids`): a 64-bit hash of every unit id read, and the ids of the units read
    but not written (empty text, or a repeat inside its batch)."""

    def __init__(self, dataset: str, sink: Any) -> None:
        self.dataset, self.sink = dataset, sink
        self.hashes: list[pl.Series] = []
        self.unwritten: list[pl.Series] = []
        self.empty = 0

    def write(self, rows: list[dict]) -> None:
        if not rows:
            return
        data = {name: [row.get(name) for row in rows] for name in UNITS.columns}  # as `tables.frame` builds it
        data["dataset"] = [self.dataset] * len(rows)
        batch = pl.DataFrame(data, schema=UNITS.schema, strict=False)
        self.hashes.append(batch["unit_id"].hash())
        first = batch["unit_id"].is_first_distinct()
        if not first.all():  # a repeated id: reported over the whole stream by `check_ids`, not per batch
            self.unwritten.append(batch.filter(~first)["unit_id"])
            batch = batch.filter(first)
        batch = conform(batch, UNITS).with_columns(pl.col("text").str.strip_chars())
        empty = batch.filter(pl.col("text") == "")
        self.empty += empty.height
        if empty.height:
            self.unwritten.append(empty["unit_id"])
        self.sink.write(batch.filter(pl.col("text") != ""))

    def check_ids(self, written: pl.LazyFrame) -> None:
        """Every unit id read (empty units' too) checked against the units key. Distinct hashes prove the ids
        distinct; otherwise (a repeat, or a hash collision) the ids themselves — the written ones, read back, and
        the unwritten ones — go through `conform`, which raises the duplicates message of the whole table."""
        hashes = pl.concat(self.hashes, rechunk=False) if self.hashes else pl.Series([], dtype=pl.UInt64)
        self.hashes = []
        if hashes.n_unique() == hashes.len():
            return
        del hashes
        ids = pl.concat([written.select("unit_id").collect()["unit_id"], *self.unwritten], rechunk=False)
        conform(ids.to_frame(), UNIT_IDS)


def generated_tables(dataset: str, generated: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The questions and qrels of GENERATED_QUESTIONS rows (ingest/questions.py): the question's reference answer
    is the generator's answer, its gold evidence (relevance 1) the unit it was written from."""
    questions = generated.select(
        pl.lit(dataset).alias("dataset"), "qid", "group_id", "text", pl.col("source_kind").alias("query_type"),
        pl.concat_list("answer").alias("answers"), pl.concat_list("source_unit_id").alias("gold_unit_ids"),
        pl.lit([], dtype=pl.List(pl.String())).alias("unaligned_evidence"),
        pl.lit(None, dtype=pl.String()).alias("meta"),
    )
    qrels = generated.select("qid", pl.col("source_unit_id").alias("unit_id"),
                             pl.lit(1, dtype=pl.Int32).alias("relevance"))
    return conform(questions, QUESTIONS), conform(qrels, QRELS)


def build(
    dataset: str, spec: Mapping[str, Any], sink: Any, generated: pl.DataFrame | None = None
) -> Tables:
    """Stream `dataset` through its format's adapter into `sink` in batches and apply the shared clean-up and
    contract checks; with `generated` (a dataset with `generate_questions`), its questions and qrels are those."""
    streamer = stream_for(dataset, spec.get("format", ""))
    batches = UnitBatches(dataset, sink)
    try:
        units = Units(streamer(spec, dataset))
        rows: list[dict] = []
        characters = 0
        for row in units:
            rows.append(row)
            characters += len(row["text"]) if isinstance(row.get("text"), str) else 0
            if len(rows) >= BATCH_UNITS or characters >= BATCH_TEXT:
                batches.write(rows)
                rows, characters = [], 0
        batches.write(rows)
        del rows
        rest = units.rest
        written = sink.finish()
        batches.check_ids(written)
        questions = frame(({**row, "dataset": dataset} for row in rest.questions), QUESTIONS)
        qrels = frame(rest.qrels, QRELS)
        counts = dict(rest.counts)
        if generated is not None:
            questions, qrels = generated_tables(dataset, generated)
            counts["questions_generated"] = questions.height
        counts["units_empty_dropped"] = batches.empty
        judged = qrels["unit_id"].unique().implode()
        known = written.select("unit_id").filter(pl.col("unit_id").is_in(judged)).collect(engine="streaming")
        counts["qrels_unknown_units"] = qrels.filter(~pl.col("unit_id").is_in(known["unit_id"].implode())).height
        counts["qrels_unknown_questions"] = qrels.filter(~pl.col("qid").is_in(questions["qid"].implode())).height
        counts["questions_empty_text"] = questions.filter(pl.col("text").str.strip_chars() == "").height
    except ContractError as error:
        raise InputError(f"datasets.{dataset} ({spec['format']}): {error}") from None
    tables = Tables(units=written, questions=questions, qrels=qrels, counts=counts, notes=dict(rest.notes))
    check_usable(dataset, spec, tables)
    return tables


def bad_ids(table: pl.DataFrame | pl.LazyFrame, column: str) -> list[str]:
    """Ids of `table[column]` that are empty or hold whitespace / control characters (a few, escaped)."""
    bad = (
        table.lazy()
        .select(column)
        .filter((pl.col(column) == "") | pl.col(column).str.contains(r"[\s\x00-\x1f\x7f]"))
        .unique(maintain_order=True)
        .head(3)
        .collect(engine="streaming")
    )
    return [repr(value) for value in bad[column].to_list()]


def check_usable(dataset: str, spec: Mapping[str, Any], tables: Tables | Ingested) -> None:
    """An InputError naming the dataset and its files when the tables cannot be retrieved over or evaluated."""
    files = ", ".join(str(spec[key]) for key in adapter_for(dataset, spec["format"])[1])
    where = f"datasets.{dataset} ({spec['format']}: {files})"
    if tables.units.lazy().select(pl.len()).collect(engine="streaming").item() == 0:
        raise InputError(f"{where}: no units with text: the corpus is empty (or every document's text is blank)")
    if tables.questions.is_empty() and "generate_questions" in spec:
        raise InputError(f"datasets.{dataset}.generate_questions: the generator kept no question (the failures by "
                         f"cause are in the report of its generate_questions job)")
    if tables.questions.is_empty() and spec["format"] not in CORPUS_ONLY:
        raise InputError(f"{where}: no questions: the question / query file holds no records")
    if "generate_questions" in spec and tables.counts.get("qrels_unknown_units"):
        raise InputError(f"{where}: {tables.counts['qrels_unknown_units']} generated questions name a unit ingest "
                         f"did not write: the generated questions are stale; delete them and rerun")
    problems = [
        f"{column} {', '.join(examples)}"
        for table, column in ((tables.units, "unit_id"), (tables.questions, "qid"), (tables.qrels, "qid"),
                              (tables.qrels, "unit_id"))
        if (examples := bad_ids(table, column))
    ]
    if problems:
        raise InputError(
            f"{where}: ids must be non-empty and free of whitespace and control characters (run and TREC files "
            f"separate fields by whitespace); offending {'; '.join(dict.fromkeys(problems))}. Fix the ids in the source"
        )


def report(tables: Tables | Ingested) -> dict[str, Any]:
    """Table sizes, units by kind and the adapter's and clean-up's counts, as one JSON-ready dict (the units are
    read a column at a time when they are lazy)."""
    units = tables.units.lazy()
    kinds = units.group_by("kind").len().sort("kind").collect(engine="streaming")
    own_groups = (pl.col("group_id") == pl.col("unit_id")).all()
    size, shared = units.select(pl.len(), ~own_groups).collect(engine="streaming").row(0)
    # Unit ids are unique, so a corpus whose every unit is its own group (BEIR, TREC, ...) has as many groups as
    # units: counting them needs no set of group ids.
    groups = units.select(pl.col("group_id").n_unique()).collect(engine="streaming").item() if shared else size
    return {
        "units": size,
        "questions": tables.questions.height,
        "qrels": tables.qrels.height,
        "groups": groups,
        "units_by_kind": dict(zip(kinds["kind"].to_list(), kinds["len"].to_list())),
        "counts": dict(sorted(tables.counts.items())),
        **({"notes": dict(sorted(tables.notes.items()))} if tables.notes else {}),
    }


def log_warnings(dataset: str, counts: Mapping[str, int], notes: Mapping[str, str] | None = None) -> None:
    """Log each non-zero warning count; one the adapter's notes explain is logged as information, with its note."""
    notes = notes or {}
    for key in ("units_empty_dropped", "qrels_unknown_units", "qrels_unknown_questions", "questions_empty_text"):
        if counts.get(key) and key in notes:
            log.info("%s: %s = %d (%s)", dataset, key, counts[key], notes[key])
        elif counts.get(key):
            log.warning("%s: %s = %d", dataset, key, counts[key])


def ingest_dataset(
    dataset: str, spec: Mapping[str, Any], outputs: Mapping[str, str], generated: str | None = None
) -> dict[str, Any]:
    """Stream `dataset` into the paths named in `outputs` (keys units/questions/qrels/report): the units in
    batches into the atomic temporary file of `units.parquet` (moved into place once every check passed), then
    the questions, the qrels and the report. `generated`: the dataset's GENERATED_QUESTIONS file, if it has one.
    Returns the report."""
    questions = read_table(generated, GENERATED_QUESTIONS) if generated else None
    with TableWriter(outputs["units"], UNITS, batch_groups=True) as units:
        tables = build(dataset, spec, units, questions)
        summary = report(tables)  # reads the written units before the file moves into place
    log_warnings(dataset, tables.counts, tables.notes)
    write_table(tables.questions, outputs["questions"], QUESTIONS)
    write_table(tables.qrels, outputs["qrels"], QRELS)
    write_json_atomic(summary, outputs["report"])
    return summary
