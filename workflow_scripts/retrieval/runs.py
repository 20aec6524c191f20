"""Imported runs: a TREC run file from a retriever that runs elsewhere, as a first-stage ranking an arm can read.

In:  the run file (`qid Q0 docid rank score tag` per line, read by ir-measures' TREC run reader), the dataset's
     questions (QUESTIONS: qid) and units (UNITS: unit_id); config `retrieval.runs.<name>.path` names the file, with
     `{dataset}` replaced by the dataset's name.
Out: `import_run` → a RANKING table (qid, unit_id, rank, score): per question the run's documents by score
     descending, ties by unit_id ascending (the order every arm breaks ties in), rank from 1. An arm with
     `first_stage: run` reads it as its first stage, and a hybrid arm can fuse it with BM25 or dense by RRF
     (`fuse: [bm25, run]`, retrieval/arms.py); it is evaluated with the same measures as every arm.

Like trec_eval, the rank column of the file is ignored and the score decides the order (ties, which trec_eval
breaks by docid descending, here by unit_id ascending, as every arm). The run is taken as given: an arm's `scope`
does not restrict it, and the cost ledger sees only the import's seconds, not what the run cost where it was
made. A line whose question or document the dataset does not hold, a (question, document) pair listed twice, a
score that is not a finite number, or a file with no line at all is an
InputError naming the file, the line (blank lines are skipped and not counted) and the id; questions the run
leaves out get an empty ranking (they score 0 where they have relevant units, as trec_eval -c), counted in the log.
"""

import logging
import math
from pathlib import Path

import ir_measures
import polars as pl

from workflow_scripts.core.errors import InputError
from workflow_scripts.retrieval.arms import rank_by

log = logging.getLogger("ragfrontier.runs")


def run_path(template: str, dataset: str) -> Path:
    """The run file of `dataset`: retrieval.runs.<name>.path with {dataset} replaced."""
    return Path(template.replace("{dataset}", dataset))


def read_run(path: Path) -> pl.DataFrame:
    """(line, qid, unit_id, score) of every line of a TREC run file; an unreadable line is an InputError."""
    if not path.is_file():
        raise InputError(f"imported run {path}: no such file (config retrieval.runs: its path, with {{dataset}} "
                         f"replaced by the dataset's name)")
    rows: list[tuple[int, str, str, float]] = []
    try:
        for doc in ir_measures.read_trec_run(str(path)):
            rows.append((len(rows) + 1, doc.query_id, doc.doc_id, float(doc.score)))
    except (ValueError, OSError, UnicodeDecodeError) as error:
        raise InputError(f"imported run {path}, line {len(rows) + 1}: not a TREC run line (qid Q0 docid rank score "
                         f"tag): {error}") from error
    bad = next((row for row in rows if not math.isfinite(row[3])), None)
    if bad is not None:
        raise InputError(f"imported run {path}, line {bad[0]}: score {bad[3]} of question {bad[1]!r} is not a finite "
                         f"number")
    if not rows:
        raise InputError(f"imported run {path}: the file holds no line")
    return pl.DataFrame(rows, schema={"line": pl.Int64, "qid": pl.String, "unit_id": pl.String, "score": pl.Float64},
                        orient="row")


def _first_unknown(rows: pl.DataFrame, column: str, known: pl.Series) -> dict | None:
    unknown = rows.filter(~pl.col(column).is_in(known.implode()))
    return unknown.row(0, named=True) | {"count": unknown.height} if unknown.height else None


def import_run(path: Path, questions: pl.DataFrame, units: pl.DataFrame) -> pl.DataFrame:
    """The run as a RANKING table (module docstring)."""
    rows = read_run(path)
    for column, known, what in (("qid", questions["qid"], "question"), ("unit_id", units["unit_id"], "unit")):
        unknown = _first_unknown(rows, column, known)
        if unknown is not None:
            raise InputError(f"imported run {path}, line {unknown['line']}: {what} {unknown[column]!r} is not in "
                             f"the dataset ({unknown['count']} lines name unknown {what}s); check that the run was "
                             f"made for this dataset's {what} ids")
    repeated = rows.sort("line").filter(~pl.struct("qid", "unit_id").is_first_distinct())
    if repeated.height:
        first = repeated.row(0, named=True)
        raise InputError(f"imported run {path}, line {first['line']}: question {first['qid']!r} lists unit "
                         f"{first['unit_id']!r} twice")
    missing = questions.height - rows["qid"].n_unique()
    if missing:
        log.warning("imported run %s: %d of %d questions have no line (an empty ranking each)", path, missing,
                    questions.height)
    return rank_by(rows.drop("line"), "score").select("qid", "unit_id", "rank", "score")
