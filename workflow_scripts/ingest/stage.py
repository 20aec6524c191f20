"""Ingest stage: one dataset's raw files → the canonical `units`, `questions` and `qrels` tables.

In:  a dataset's config entry (`format` and the format's file keys), read by the adapter for that format.
Out: `units.parquet`, `questions.parquet`, `qrels.parquet` (schemas in `contracts`) and `ingest_report.json`
     (what was read, dropped, flagged, and the adapter's `notes` on counts its format makes expected), all
     written atomically.

Shared clean-up after every adapter:
- unit text is stripped; units with empty text are dropped and counted (`units_empty_dropped`);
- duplicate unit ids or question ids stop the run with an error listing a few of them;
- an empty corpus, or an empty question set of a format that has questions (not the corpus-only formats
  `registry.CORPUS_ONLY`), stops the run, and so does an id that is empty or contains whitespace or
  control characters (tab, newline: run files and TREC files separate their fields by whitespace);
- qrels naming unknown units or questions are kept (they are real judgments: recall counts them) and counted
  as warnings (`qrels_unknown_units`, `qrels_unknown_questions`).
"""


import json
import logging
from collections.abc import Mapping
from typing import Any

import polars as pl

from workflow_scripts.core.atomic import write_json_atomic
from workflow_scripts.core.contracts import QRELS, QUESTIONS, UNITS, ContractError, conform, write_table
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.runtime import run_job
from workflow_scripts.ingest.adapters import Ingested
from workflow_scripts.ingest.adapters.registry import CORPUS_ONLY, adapter_for

log = logging.getLogger("ragfrontier.ingest")


def load_dataset(dataset: str, spec: Mapping[str, Any]) -> Ingested:
    """Read `dataset` with its format's adapter and apply the shared clean-up and contract checks."""
    loader, _ = adapter_for(dataset, spec.get("format", ""))
    try:
        ingested = clean(loader(spec, dataset))
    except ContractError as error:
        raise InputError(f"datasets.{dataset} ({spec['format']}): {error}") from None
    check_usable(dataset, spec, ingested)
    return ingested


def bad_ids(values: pl.Series) -> list[str]:
    """Ids that are empty or hold whitespace / control characters (a few, in their escaped form)."""
    bad = values.filter((values == "") | values.str.contains(r"[\s\x00-\x1f\x7f]"))
    return [repr(value) for value in bad.unique(maintain_order=True).head(3).to_list()]


def check_usable(dataset: str, spec: Mapping[str, Any], ingested: Ingested) -> None:
    """An InputError naming the dataset and its files when the tables cannot be retrieved over or evaluated."""
    files = ", ".join(str(spec[key]) for key in adapter_for(dataset, spec["format"])[1])
    where = f"datasets.{dataset} ({spec['format']}: {files})"
    if ingested.units.is_empty():
        raise InputError(f"{where}: no units with text: the corpus is empty (or every document's text is blank)")
    if ingested.questions.is_empty() and spec["format"] not in CORPUS_ONLY:
        raise InputError(f"{where}: no questions: the question / query file holds no records")
    problems = [
        f"{column} {', '.join(examples)}"
        for table, column in ((ingested.units, "unit_id"), (ingested.questions, "qid"), (ingested.qrels, "qid"),
                              (ingested.qrels, "unit_id"))
        if (examples := bad_ids(table[column]))
    ]
    if problems:
        raise InputError(
            f"{where}: ids must be non-empty and free of whitespace and control characters (run and TREC files "
            f"separate fields by whitespace); offending {'; '.join(dict.fromkeys(problems))}. Fix the ids in the source"
        )


def clean(ingested: Ingested) -> Ingested:
    """Drop empty units, check every contract, count qrels that point outside the tables."""
    counts = dict(ingested.counts)
    units = ingested.units.with_columns(pl.col("text").str.strip_chars())
    empty = units.filter(pl.col("text") == "")
    counts["units_empty_dropped"] = empty.height
    units = conform(units.filter(pl.col("text") != ""), UNITS)
    questions = conform(ingested.questions, QUESTIONS)
    qrels = conform(ingested.qrels, QRELS)
    counts["qrels_unknown_units"] = qrels.filter(~pl.col("unit_id").is_in(units["unit_id"].implode())).height
    counts["qrels_unknown_questions"] = qrels.filter(~pl.col("qid").is_in(questions["qid"].implode())).height
    counts["questions_empty_text"] = questions.filter(pl.col("text").str.strip_chars() == "").height
    return Ingested(units=units, questions=questions, qrels=qrels, counts=counts, notes=dict(ingested.notes))


def report(ingested: Ingested) -> dict[str, Any]:
    """Table sizes, units by kind and the adapter's and clean-up's counts, as one JSON-ready dict."""
    kinds = ingested.units.group_by("kind").len().sort("kind")
    return {
        "units": ingested.units.height,
        "questions": ingested.questions.height,
        "qrels": ingested.qrels.height,
        "groups": ingested.units["group_id"].n_unique(),
        "units_by_kind": dict(zip(kinds["kind"].to_list(), kinds["len"].to_list())),
        "counts": dict(sorted(ingested.counts.items())),
        **({"notes": dict(sorted(ingested.notes.items()))} if ingested.notes else {}),
    }


def log_warnings(dataset: str, counts: Mapping[str, int], notes: Mapping[str, str] | None = None) -> None:
    """Log each non-zero warning count; one the adapter's notes explain is logged as information, with its note."""
    notes = notes or {}
    for key in ("units_empty_dropped", "qrels_unknown_units", "qrels_unknown_questions", "questions_empty_text"):
        if counts.get(key) and key in notes:
            log.info("%s: %s = %d (%s)", dataset, key, counts[key], notes[key])
        elif counts.get(key):
            log.warning("%s: %s = %d", dataset, key, counts[key])


def write_outputs(ingested: Ingested, outputs: Mapping[str, str]) -> None:
    """Write the three tables and the report to the paths named in `outputs` (keys units/questions/qrels/report)."""
    write_table(ingested.units, outputs["units"], UNITS)
    write_table(ingested.questions, outputs["questions"], QUESTIONS)
    write_table(ingested.qrels, outputs["qrels"], QRELS)
    write_json_atomic(report(ingested), outputs["report"])


def main(smk: Any) -> None:
    dataset = smk.wildcards.dataset
    ingested = load_dataset(dataset, smk.params.spec)
    log_warnings(dataset, ingested.counts, ingested.notes)
    write_outputs(ingested, dict(smk.output.items()))
    log.info("%s: %s", dataset, json.dumps(report(ingested)))


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
