"""Imported systems: a RAG system that runs elsewhere, brought in by its output file and evaluated as a policy.

In:  `systems.<name>` of the config: `path` (JSON Lines, CSV or Parquet: one row per question), `dataset` (the
     datasets entry whose questions it answers), `contexts` (texts | ids), `columns` (a mapping from this project's
     column names to the file's) and `currency`. Column names are read in one of three conventions, the first whose
     question and answer columns the file has (`CONVENTIONS`): ragas (`user_input`, `response`,
     `retrieved_contexts`, `reference`), DeepEval (`input`, `actual_output`, `retrieval_context`,
     `expected_output`) or this project's own (`id`, `question`, `answer`, `contexts`, `reference`); `columns`
     overrides any of them. Optional everywhere: `reference` (a string or a list of strings), `latency_s`,
     `prompt_tokens`, `completion_tokens`, `money` (what answering the question cost, in `currency`) and
     `context_scores` (one score per context, in the contexts' order). Without an id column a question's id is
     derived from its text (`question_id`), so two systems' rows on the same question pair up.
Out: `read_system` → one checked frame per file (`SYSTEM_ROWS` columns); from it, for the pipeline:
     - with `contexts: texts` the dataset (format `systems`, ingest/adapters/systems.py) is built from its
       systems' files: their questions and references, and each distinct context text as a unit (`context_unit_id`);
     - `answers` (GENERATIONS: the system's answers as a policy's, source and backend `imported`) and `run` (RUNS:
       its contexts in its order as an arm's ranking) at the paths the rules give an answered policy and an arm;
     - `check_paired`: systems compared with each other answer the same questions.
Bad input is one InputError naming the file, the line or id and the key: a missing required column, a duplicate
question id, an empty question or answer, contexts that are not a list of strings, context ids the corpus does not
hold, a question the dataset does not hold, questions one compared system answers and another does not.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import GENERATIONS, RUNS
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.files import read_jsonl

# Each convention's names for the columns this project reads (its own names are the keys).
CONVENTIONS: dict[str, dict[str, str]] = {
    "ragas": {"question": "user_input", "answer": "response", "contexts": "retrieved_contexts",
              "reference": "reference"},
    "deepeval": {"question": "input", "answer": "actual_output", "contexts": "retrieval_context",
                 "reference": "expected_output"},
    "ragfrontier": {"question": "question", "answer": "answer", "contexts": "contexts", "reference": "reference"},
}
OPTIONAL = ("id", "reference", "latency_s", "prompt_tokens", "completion_tokens", "money", "context_scores")
REQUIRED = ("question", "answer", "contexts")
SYSTEM_ROWS = {  # the columns of a read system file, one row per question, in the file's order
    "qid": pl.String, "line": pl.Int64, "question": pl.String, "answer": pl.String,
    "contexts": pl.List(pl.String), "context_scores": pl.List(pl.Float64), "references": pl.List(pl.String),
    "latency_s": pl.Float64, "prompt_tokens": pl.Int32, "completion_tokens": pl.Int32, "money": pl.Float64,
}
SUFFIXES = (".jsonl", ".csv", ".parquet")


def question_id(text: str) -> str:
    """The id of a question a file gives no id for: its whitespace-normalized text, hashed."""
    return "q-" + hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:12]


def context_unit_id(text: str) -> str:
    """The unit id of a context given as text: its text, hashed (the same text is one unit in every system)."""
    return "ctx-" + hashlib.sha256(text.encode()).hexdigest()[:16]


def read_records(path: Path) -> list[dict[str, Any]]:
    """The file's rows as dicts, by its suffix (JSON Lines, CSV with a header, Parquet)."""
    if path.suffix == ".jsonl":
        rows = []
        for number, record in read_jsonl(path):
            if not isinstance(record, dict):
                raise InputError(f"{path}: line {number} is not a JSON object")
            rows.append(record)
        return rows
    if path.suffix == ".csv":
        return pl.read_csv(path, infer_schema=False).to_dicts()
    if path.suffix == ".parquet":
        return pl.read_parquet(path).to_dicts()
    raise InputError(f"{path}: an imported system's file must end in one of {list(SUFFIXES)}")


def column_names(name: str, path: Path, header: Sequence[str], mapping: Mapping[str, str]) -> dict[str, str]:
    """This project's column name → the file's: the first convention whose question column the file has (else this
    project's names), then `mapping`."""
    fits = [convention for convention, names in CONVENTIONS.items() if names["question"] in header]
    names = {key: key for key in OPTIONAL} | (CONVENTIONS[fits[0]] if fits else CONVENTIONS["ragfrontier"])
    names |= dict(mapping)
    missing = [key for key in REQUIRED if names[key] not in header]
    if missing:
        raise InputError(
            f"{path}: no column for {missing} (looked for "
            f"{[names[key] for key in missing]}; its columns: {sorted(header)}); name them under "
            f"systems.{name}.columns, e.g. {{{missing[0]}: <your column>}}, or use the ragas or DeepEval names")
    return names


def text_list(value: Any, where: str) -> list:
    """A list cell: a list, or in a CSV a JSON or Python list literal (ragas writes the latter)."""
    if isinstance(value, str):
        for parse in (json.loads, ast.literal_eval):
            try:
                value = parse(value)
                break
            except (ValueError, SyntaxError):
                continue
    if not isinstance(value, list):
        raise InputError(f"{where}: expected a list, found {type(value).__name__} {str(value)[:60]!r}")
    return value


def strings(value: Any, where: str) -> list[str]:
    items = text_list(value, where)
    if not all(isinstance(item, str) for item in items):
        raise InputError(f"{where}: every entry must be a string")
    return items


def number(value: Any, where: str, kind: type) -> Any:
    if value is None or value == "":
        return None
    try:
        result = kind(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: {value!r} is not a number") from None
    if result < 0:
        raise InputError(f"{where}: {value!r} is negative")
    return result


def references(value: Any, where: str) -> list[str]:
    """The reference answers: none, one string or a list of strings."""
    if value is None or value == "":
        return []
    if isinstance(value, str) and not value.lstrip().startswith("["):
        return [value]
    return strings(value, where)


def system_row(record: Mapping[str, Any], names: Mapping[str, str], where: str) -> dict[str, Any]:
    """One file row as a SYSTEM_ROWS row (`where`: file and line, for messages)."""
    def cell(key: str) -> Any:
        return record.get(names[key])

    row: dict[str, Any] = {}
    for key in ("question", "answer"):
        value = cell(key)
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"{where}: column {names[key]!r} ({key}) is empty or not a string")
        row[key] = value.strip()
    qid = cell("id")
    row["qid"] = question_id(row["question"]) if qid is None or qid == "" else str(qid)
    row["contexts"] = strings(cell("contexts"), f"{where}: column {names['contexts']!r} (contexts)")
    scores = cell("context_scores")
    row["context_scores"] = [None] * len(row["contexts"]) if scores is None else [
        float(number(score, f"{where}: column {names['context_scores']!r}", float))
        for score in text_list(scores, f"{where}: column {names['context_scores']!r}")]
    if len(row["context_scores"]) != len(row["contexts"]):
        raise InputError(f"{where}: {len(row['context_scores'])} context scores for {len(row['contexts'])} contexts")
    row["references"] = references(cell("reference"), f"{where}: column {names['reference']!r} (reference)")
    for key, kind in (("latency_s", float), ("prompt_tokens", int), ("completion_tokens", int), ("money", float)):
        row[key] = number(cell(key), f"{where}: column {names[key]!r} ({key})", kind)
    return row


def read_system(name: str, spec: Mapping[str, Any]) -> pl.DataFrame:
    """`systems.<name>`'s file as SYSTEM_ROWS, checked (see the module docstring); its ids unique."""
    path = Path(spec["path"])
    if not path.is_file():
        raise InputError(f"systems.{name}.path: file {str(path)!r} does not exist (paths are relative to the project "
                         f"root)")
    records = read_records(path)
    if not records:
        raise InputError(f"{path}: no rows (systems.{name})")
    header = sorted({key for record in records for key in record})
    names = column_names(name, path, header, spec.get("columns", {}))
    line = 2 if path.suffix == ".csv" else 1  # a CSV's first line is its header
    rows = [system_row(record, names, f"{path}: {'row' if path.suffix == '.parquet' else 'line'} {at}") | {"line": at}
            for at, record in enumerate(records, start=line)]
    table = pl.DataFrame(rows, schema=SYSTEM_ROWS)
    repeated = table.filter(pl.col("qid").is_duplicated())
    if repeated.height:
        first = repeated.row(0, named=True)
        key = names["id"] if first["qid"] != question_id(first["question"]) else names["question"]
        raise InputError(f"{path}: question id {first['qid']!r} appears on lines {repeated['line'].to_list()[:5]} "
                         f"(column {key!r}); each question must appear once (systems.{name})")
    return table


def check_paired(systems: Mapping[str, pl.DataFrame], paths: Mapping[str, str]) -> None:
    """Systems compared with each other answer the same questions: an id only some of them have is an error."""
    names = list(systems)
    for name in names[1:]:
        for one, other in ((name, names[0]), (names[0], name)):
            alone = systems[one].filter(~pl.col("qid").is_in(systems[other]["qid"].implode()))
            if alone.height:
                row = alone.row(0, named=True)
                raise InputError(
                    f"{paths[one]}: line {row['line']} answers question {row['qid']!r}, which systems.{other} "
                    f"({paths[other]}) does not ({alone.height} such); systems compared with each other "
                    f"(generation.policies) must answer the same questions")


def check_questions(name: str, path: str, table: pl.DataFrame, known: pl.Series, dataset: str) -> None:
    """Every question the system answers is one of the dataset's."""
    unknown = table.filter(~pl.col("qid").is_in(known.implode()))
    if unknown.height:
        row = unknown.row(0, named=True)
        raise InputError(f"{path}: line {row['line']} answers question {row['qid']!r}, which datasets.{dataset} does "
                         f"not hold ({unknown.height} such; systems.{name})")


def unit_ids(table: pl.DataFrame, contexts: str) -> pl.DataFrame:
    """qid, rank, unit_id, score of each context, in the system's order (the same unit twice: its first rank)."""
    ranked = table.select("qid", "contexts", "context_scores").explode("contexts", "context_scores")
    ranked = ranked.filter(pl.col("contexts").str.strip_chars() != "").with_columns(
        rank=pl.int_range(1, pl.len() + 1).over("qid").cast(pl.Int32))
    ids = ranked["contexts"].map_elements(context_unit_id, return_dtype=pl.String) if contexts == "texts" \
        else ranked["contexts"]
    ranked = ranked.with_columns(unit_id=ids).unique(["qid", "unit_id"], keep="first", maintain_order=True)
    return ranked.select("qid", "rank", "unit_id", pl.col("context_scores").cast(pl.Float64).alias("score"))


def check_context_ids(name: str, path: str, ranked: pl.DataFrame, known: pl.Series, dataset: str) -> None:
    """Contexts given as ids name units of the dataset's corpus."""
    unknown = ranked.filter(~pl.col("unit_id").is_in(known.implode()))
    if unknown.height:
        row = unknown.row(0, named=True)
        raise InputError(f"{path}: question {row['qid']!r} lists context id {row['unit_id']!r}, which the corpus of "
                         f"datasets.{dataset} does not hold ({unknown.height} such; systems.{name}.contexts is "
                         f"'ids': give the texts instead with contexts: texts)")


def run(ranked: pl.DataFrame) -> pl.DataFrame:
    """The system's contexts as an arm's ranking (RUNS): its order; its scores, or 1/rank without them."""
    table = ranked.with_columns(pl.col("score").fill_null(1.0 / pl.col("rank")))
    extra = [pl.lit(None, dtype=RUNS.columns[column].dtype).alias(column) for column in RUNS.columns
             if column not in table.columns]
    return table.with_columns(extra).select(list(RUNS.columns)).sort("qid", "rank")


def answers(name: str, path: str, table: pl.DataFrame) -> pl.DataFrame:
    """The system's answers as a policy's (GENERATIONS, request_id = qid, source and backend `imported`): its own
    tokens and latency where the file has them, no token uncertainty."""
    keys = [hashlib.sha256(json.dumps([name, qid, text]).encode()).hexdigest()
            for qid, text in table.select("qid", "answer").iter_rows()]
    rows = table.select(
        pl.col("qid").alias("request_id"), pl.Series("key", keys), pl.lit("ok").alias("status"),
        pl.lit(False).alias("constrained"), pl.col("answer").alias("text"), "prompt_tokens", "completion_tokens",
        "latency_s", pl.col("contexts").list.len().cast(pl.Int32).alias("evidence_in"),
    ).with_columns(
        pl.lit("imported").alias("source"), pl.lit("imported").alias("backend"), pl.lit(name).alias("model"),
        pl.lit(path).alias("device"), pl.col("evidence_in").alias("evidence_kept"),
        pl.lit(False).alias("evidence_truncated"), pl.lit("imported").alias("token_basis"),
    )
    extra = [pl.lit(None, dtype=GENERATIONS.columns[column].dtype).alias(column) for column in GENERATIONS.columns
             if column not in rows.columns]
    return rows.with_columns(extra).select(list(GENERATIONS.columns)).sort("request_id")
