"""Data contracts: the schema of every canonical Parquet table, declared once, checked on every write.

In:  a polars DataFrame (or rows as dicts) that a stage produced.
Out: the same data cast to the contract's column order and types, written atomically (temporary file in the
     same folder, then an atomic rename), so a killed job never leaves a half-written table behind.

A violation (missing or extra column, a type that does not cast, a null where none is allowed, a value outside
an enumeration, a duplicated key) raises `ContractError` naming the table, the column and a few offending rows.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

import polars as pl

from workflow_scripts.errors import InputError


class ContractError(InputError):
    """A table does not satisfy its declared contract."""


@dataclass(frozen=True)
class Column:
    dtype: pl.DataType
    nullable: bool = False
    doc: str = ""


@dataclass(frozen=True)
class Contract:
    name: str
    columns: Mapping[str, Column]
    key: tuple[str, ...]
    enums: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def schema(self) -> dict[str, pl.DataType]:
        return {name: column.dtype for name, column in self.columns.items()}


UNIT_KINDS = frozenset({"paragraph", "heading", "caption", "passage", "abstract", "document"})
SPLIT_NAMES = frozenset({"dev", "calibration", "heldout"})

UNITS = Contract(
    name="units",
    columns={
        "dataset": Column(pl.String(), doc="dataset key from the config"),
        "group_id": Column(pl.String(), doc="paper or question context the unit belongs to (group scope, splits)"),
        "unit_id": Column(pl.String(), doc="unique within the dataset; the id qrels and runs refer to"),
        "kind": Column(pl.String(), doc="paragraph | heading | caption | passage | abstract | document"),
        "section": Column(pl.String(), nullable=True, doc="section heading the unit sits under, if any"),
        "position": Column(pl.Int32(), doc="0-based order of the unit inside its group"),
        "title": Column(pl.String(), nullable=True, doc="document or paragraph title, if the source has one"),
        "text": Column(pl.String(), doc="the unit's text (never empty)"),
        "meta": Column(pl.String(), nullable=True, doc="source-specific extras as a JSON object"),
    },
    key=("unit_id",),
    enums={"kind": UNIT_KINDS},
)

QUESTIONS = Contract(
    name="questions",
    columns={
        "dataset": Column(pl.String()),
        "qid": Column(pl.String(), doc="unique within the dataset"),
        "group_id": Column(pl.String(), doc="paper or context the question is about; splits never cross it"),
        "text": Column(pl.String()),
        "query_type": Column(pl.String(), nullable=True, doc="e.g. bridge/comparison, problem/method"),
        "answers": Column(pl.List(pl.String()), doc="reference answers (possibly several annotators)"),
        "gold_unit_ids": Column(pl.List(pl.String()), doc="units annotated as evidence (relevance > 0)"),
        "unaligned_evidence": Column(
            pl.List(pl.String()), doc="evidence strings that matched no unit; the question is kept, flagged"
        ),
        "meta": Column(pl.String(), nullable=True, doc="source-specific extras as a JSON object"),
    },
    key=("qid",),
)

QRELS = Contract(
    name="qrels",
    columns={
        "qid": Column(pl.String()),
        "unit_id": Column(pl.String()),
        "relevance": Column(pl.Int32(), doc="graded relevance; > 0 is relevant"),
    },
    key=("qid", "unit_id"),
)

SPLITS = Contract(
    name="splits",
    columns={
        "qid": Column(pl.String()),
        "group_id": Column(pl.String()),
        "split": Column(pl.String(), doc="dev | calibration | heldout"),
    },
    key=("qid",),
    enums={"split": SPLIT_NAMES},
)

RANKING = Contract(
    name="ranking",
    columns={
        "qid": Column(pl.String()),
        "unit_id": Column(pl.String()),
        "rank": Column(pl.Int32(), doc="1-based rank within the query"),
        "score": Column(pl.Float64(), doc="the first-stage retriever's score (higher is better)"),
    },
    key=("qid", "unit_id"),
)

RUNS = Contract(
    name="runs",
    columns={
        "qid": Column(pl.String()),
        "rank": Column(pl.Int32(), doc="1-based final rank of the arm"),
        "unit_id": Column(pl.String()),
        "score": Column(pl.Float64(), doc="the score the final order follows (rerank, fused or first-stage)"),
        "dense_score": Column(pl.Float64(), nullable=True),
        "dense_rank": Column(pl.Int32(), nullable=True, doc="rank in the dense first stage (null: not retrieved)"),
        "bm25_score": Column(pl.Float64(), nullable=True),
        "bm25_rank": Column(pl.Int32(), nullable=True, doc="rank in the BM25 first stage (null: not retrieved)"),
        "fused_score": Column(pl.Float64(), nullable=True, doc="reciprocal rank fusion score (hybrid arms)"),
        "rerank_score": Column(pl.Float64(), nullable=True, doc="reranker score (arms with a rerank step)"),
    },
    key=("qid", "unit_id"),
)

EMBEDDING_CACHE = Contract(
    name="embedding_cache",
    columns={
        "key": Column(pl.String(), doc="sha256 of (model fingerprint, text): content-addressed"),
        "vector": Column(pl.List(pl.Float32()), doc="the embedding as the model returned it"),
    },
    key=("key",),
)

UNIT_VECTORS = Contract(
    name="unit_vectors",
    columns={
        "unit_id": Column(pl.String(), doc="row i is row i of the dense index"),
        "group_id": Column(pl.String()),
        "vector": Column(pl.List(pl.Float32()), doc="L2-normalized embedding (cosine = inner product)"),
    },
    key=("unit_id",),
)

RERANK_SCORES = Contract(
    name="rerank_scores",
    columns={
        "qid": Column(pl.String()),
        "unit_id": Column(pl.String()),
        "rerank_score": Column(pl.Float64()),
    },
    key=("qid", "unit_id"),
)

SCORE_CACHE = Contract(
    name="score_cache",
    columns={
        "key": Column(pl.String(), doc="sha256 of (model fingerprint, query text, unit text)"),
        "score": Column(pl.Float64(), doc="pairwise relevance score (cross-encoder or LLM pointwise)"),
    },
    key=("key",),
)

CONTRACTS = {
    contract.name: contract
    for contract in (UNITS, QUESTIONS, QRELS, SPLITS, RANKING, RUNS, UNIT_VECTORS, RERANK_SCORES, EMBEDDING_CACHE, SCORE_CACHE)
}


def frame(rows: Iterable[Mapping], contract: Contract) -> pl.DataFrame:
    """Build a DataFrame with the contract's schema from row dicts (missing nullable keys become null)."""
    rows = list(rows)
    data = {name: [row.get(name) for row in rows] for name in contract.columns}
    return conform(pl.DataFrame(data, schema=contract.schema, strict=False), contract)


def _examples(values: Iterable, limit: int = 5) -> str:
    values = [repr(value) for value in values]
    shown = ", ".join(values[:limit])
    return shown + (f" (and {len(values) - limit} more)" if len(values) > limit else "")


def conform(table: pl.DataFrame, contract: Contract) -> pl.DataFrame:
    """Check `table` against `contract`; return it cast to the declared order and types."""
    missing = [name for name in contract.columns if name not in table.columns]
    extra = [name for name in table.columns if name not in contract.columns]
    if missing or extra:
        raise ContractError(
            f"table '{contract.name}': missing columns {missing}, unexpected columns {extra}; "
            f"the contract is {list(contract.columns)}"
        )
    try:
        table = table.select(
            pl.col(name).cast(column.dtype, strict=True) for name, column in contract.columns.items()
        )
    except (pl.exceptions.InvalidOperationError, pl.exceptions.ComputeError) as error:
        raise ContractError(f"table '{contract.name}': a column does not cast to its declared type: {error}")
    for name, column in contract.columns.items():
        if not column.nullable and table[name].null_count():
            raise ContractError(
                f"table '{contract.name}': column '{name}' has {table[name].null_count()} null values "
                f"and allows none"
            )
    for name, allowed in contract.enums.items():
        bad = set(table[name].drop_nulls().unique().to_list()) - allowed
        if bad:
            raise ContractError(
                f"table '{contract.name}': column '{name}' has values {_examples(sorted(bad))}; "
                f"allowed: {sorted(allowed)}"
            )
    duplicated = table.filter(pl.struct(contract.key).is_duplicated()).select(contract.key).unique()
    if duplicated.height:
        keys = [tuple(row) if len(row) > 1 else row[0] for row in duplicated.sort(contract.key).rows()]
        raise ContractError(
            f"table '{contract.name}': {duplicated.height} duplicated {'/'.join(contract.key)} values: "
            f"{_examples(keys)}"
        )
    return table


def write_table(table: pl.DataFrame, path: str | os.PathLike, contract: Contract) -> pl.DataFrame:
    """Conform `table` and write it as Parquet at `path` atomically; return the conformed table."""
    table = conform(table, contract)
    write_parquet_atomic(table, path)
    return table


def write_parquet_atomic(table: pl.DataFrame, path: str | os.PathLike) -> None:
    """Write Parquet to a temporary file beside `path`, fsync it, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(handle)
    try:
        table.write_parquet(temporary, compression="zstd", statistics=True)
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_text_atomic(text: str, path: str | os.PathLike) -> None:
    """Write UTF-8 `text` at `path` via a temporary file beside it and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def write_json_atomic(data: object, path: str | os.PathLike) -> None:
    """Write `data` as indented JSON at `path` atomically."""
    write_text_atomic(json.dumps(data, indent=2) + "\n", path)


def read_table(path: str | os.PathLike, contract: Contract) -> pl.DataFrame:
    """Read a canonical table and check it against its contract (a stale or foreign file fails loudly)."""
    path = Path(path)
    if not path.exists():
        raise ContractError(f"table '{contract.name}': file {path} does not exist")
    return conform(pl.read_parquet(path), contract)
