"""Table I/O: a contract (the columns, types, nullability, enumerations and key of one Parquet table or CSV report)
and the reader and writers that check it. The contracts themselves are declared in `contracts.py`.

In:  a polars DataFrame (or rows as dicts) that a stage produced, and its contract.
Out: the same data cast to the contract's column order and types, written atomically (`core/atomic.py`), so a
     killed job never leaves a half-written table behind; a table too large to hold is written batch by batch
     (`TableWriter`) and read back batch by batch (`table_batches`).

A violation (missing or extra column, a type that does not cast, a null where none is allowed, a value outside
an enumeration, a duplicated key) raises `ContractError` naming the table, the column and a few offending rows.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.atomic import atomic_file, write_parquet_atomic
from workflow_scripts.core.errors import InputError


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
    file: str = ""  # a CSV report's path pattern (results/<dataset>/...); "" for a Parquet table
    order: tuple[str, ...] = ()  # the columns its writer sorts its rows by, when not its key
    # how a run's summary shows the table (report/summary.py): its title, one line saying what it is, and the
    # columns its landing page keeps (None: every column; (): the table is on the dataset's page only)
    title: str = ""
    about: str = ""
    landing: tuple[str, ...] | None = None

    @property
    def schema(self) -> dict[str, pl.DataType]:
        return {name: column.dtype for name, column in self.columns.items()}

    @property
    def row_order(self) -> tuple[str, ...]:
        """The columns the table's rows are sorted by: `order`, else the key (a sharded stage's gather restores it)."""
        return self.order or self.key

    def select(self, *names: str) -> Contract:
        """The contract of some of the columns (the key checked when all its columns are among them)."""
        unknown = [name for name in names if name not in self.columns]
        if unknown:
            raise ValueError(f"table '{self.name}' has no columns {unknown}")
        return Contract(self.name, {name: self.columns[name] for name in names},
                        self.key if set(self.key) <= set(names) else (),
                        {name: allowed for name, allowed in self.enums.items() if name in names}, self.file,
                        self.order if set(self.order) <= set(names) else (), self.title, self.about, self.landing)

    def __repr__(self) -> str:
        """Stable across processes (a rule's params are compared by their repr; a frozenset's order is not)."""
        shown = f", title={self.title!r}, landing={self.landing}" if self.title else ""
        return f"Contract({self.name!r}, columns={list(self.columns)}, key={self.key}, order={self.row_order}{shown})"


@dataclass(frozen=True)
class Document:
    """A stage's report that is no table (JSON or Markdown), as a run's summary shows it: like a Contract's `title`,
    `about` and `landing` (None: on the landing page; (): on the dataset's page only)."""

    name: str
    file: str
    title: str
    about: str
    landing: tuple[str, ...] | None = None


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
    if not contract.key:  # a part of a table without its key columns (`Contract.select`)
        return table
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


def write_report(table: pl.DataFrame, path: str | os.PathLike, contract: Contract,
                 float_precision: int | None = None) -> pl.DataFrame:
    """Conform `table` and write it as a CSV report at `path` atomically; return the conformed table."""
    table = conform(table, contract)
    with atomic_file(path) as temporary:
        table.write_csv(temporary, float_precision=float_precision)
    return table


def read_table(
    path: str | os.PathLike, contract: Contract, where: tuple[str, Iterable[Any]] | None = None,
    columns: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Read a canonical table and check it against its contract (a stale or foreign file fails loudly);
    `where=(column, values)` reads only the rows whose column is one of the values (the rest never loaded);
    `columns` reads only those columns (checked against their part of the contract)."""
    path = Path(path)
    if not path.exists():
        raise ContractError(f"table '{contract.name}': file {path} does not exist")
    if columns is not None:
        contract = contract.select(*columns)
        _check_stored(path, contract)
    if where is None:
        return conform(pl.read_parquet(path, columns=list(contract.columns) if columns is not None else None), contract)
    column, values = where
    wanted = pl.Series(values, dtype=contract.columns[column].dtype)
    scan = pl.scan_parquet(path).filter(pl.col(column).is_in(wanted.implode()))
    return conform((scan.select(list(contract.columns)) if columns is not None else scan).collect(), contract)


def read_report(path: str | os.PathLike, contract: Contract) -> pl.DataFrame:
    """Read a CSV report and check it against its contract (a stale or foreign file fails loudly)."""
    path = Path(path)
    if not path.exists():
        raise ContractError(f"table '{contract.name}': file {path} does not exist")
    return conform(pl.read_csv(path, schema_overrides=contract.schema), contract)


GROUP_ROWS = 20_000  # rows per Parquet row group of a table written in batches (`TableWriter`)


class TableWriter:
    """A contract table written batch by batch, so a job holds one batch of rows, not the table (used as a context
    manager; the file appears atomically when the block ends without error).

    Every batch is conformed. Rows are cut into row groups of exactly `GROUP_ROWS` (the last one shorter) whatever
    batch sizes the caller writes, so any two writers given the same rows in the same order write the same bytes;
    a table of at most one row group is written by polars at the end, the very file `write_table` writes. With
    `batch_groups`, each batch written is one row group instead, an empty one included (the caller sizes them: the
    ingest stage cuts the units by count and text size); a table written in one batch is written by polars. The key
    is checked over the whole table when the block ends: a 64-bit hash per row is kept, and when two collide the
    keys themselves are read back and checked, which raises the duplicates message `write_table` would.

    `finish()` completes the file before the block ends and returns it lazily, to be read back (as the temporary
    file, which moves into place when the block ends)."""

    def __init__(self, path: str | os.PathLike, contract: Contract, batch_groups: bool = False) -> None:
        self.path, self.contract, self.batch_groups = Path(path), contract, batch_groups
        self.pending: list[pl.DataFrame] = []
        self.pending_rows = 0
        self.hashes: list[pl.Series] = []
        self.writer: Any = None
        self.arrow_schema: Any = None
        self.finished = False

    def __enter__(self) -> TableWriter:
        self.atomic = atomic_file(self.path)
        self.temporary = self.atomic.__enter__()
        return self

    def write(self, batch: pl.DataFrame) -> None:
        """Append rows (any number, zero included)."""
        batch = conform(batch, self.contract)
        if batch.height == 0 and not self.batch_groups:
            return
        self.hashes.append(batch.select(pl.struct(self.contract.key).hash())[:, 0])
        self.pending.append(batch)
        self.pending_rows += batch.height
        if self.batch_groups:
            if self.writer is not None or len(self.pending) > 1:  # not the only batch
                for group in self.pending:
                    self._write_group(group)
                self.pending, self.pending_rows = [], 0
            return
        while self.pending_rows > GROUP_ROWS:  # a full group and at least one row after it: not the only group
            self._flush(GROUP_ROWS)

    def _flush(self, rows: int) -> None:
        pending = pl.concat(self.pending, rechunk=False)
        group, rest = pending.head(rows), pending.slice(rows)
        self._write_group(group)
        self.pending, self.pending_rows = ([rest] if rest.height else []), rest.height

    def _write_group(self, group: pl.DataFrame) -> None:
        """One row group of `group`'s rows, through pyarrow's writer (opened, and pyarrow imported, at the first)."""
        if self.writer is None:
            import pyarrow.parquet as pq

            self.arrow_schema = conform(pl.DataFrame(schema=self.contract.schema), self.contract).to_arrow().schema
            self.writer = pq.ParquetWriter(self.temporary, self.arrow_schema, compression="zstd",
                                           write_statistics=True)
        self.writer.write_table(group.to_arrow().cast(self.arrow_schema), row_group_size=max(group.height, 1))

    def _check_keys(self) -> None:
        hashes = pl.concat(self.hashes, rechunk=False) if self.hashes else pl.Series([], dtype=pl.UInt64)
        self.hashes = []
        if hashes.n_unique() == hashes.len():
            return
        del hashes
        key = self.contract.select(*self.contract.key)
        conform(pl.read_parquet(self.temporary, columns=list(key.columns)), key)

    def finish(self) -> pl.LazyFrame:
        """Write the rows still pending and close the file; the written table, lazily (no more `write` after)."""
        if not self.finished:
            if self.writer is None:
                table = pl.concat(self.pending) if self.pending else pl.DataFrame(schema=self.contract.schema)
                conform(table, self.contract).write_parquet(self.temporary, compression="zstd", statistics=True)
            else:
                while self.pending_rows:
                    self._flush(min(self.pending_rows, GROUP_ROWS))
                self._close()
            self.pending, self.pending_rows, self.finished = [], 0, True
        return pl.scan_parquet(self.temporary)

    def _close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def __exit__(self, kind: Any, error: Any, trace: Any) -> bool:
        try:
            if kind is None:
                self.finish()
                self._check_keys()
        except BaseException:
            self._close()
            self.atomic.__exit__(*sys.exc_info())  # deletes the partial file
            raise
        self._close()
        return bool(self.atomic.__exit__(kind, error, trace))


def table_batches(path: str | os.PathLike, contract: Contract, rows: int | None = None,
                  columns: Sequence[str] | None = None) -> Iterator[pl.DataFrame]:
    """A contract table read `rows` (default GROUP_ROWS) at a time, all its columns or the named ones, each batch
    checked against its part of the contract, never whole; a missing file fails like `read_table`."""
    path = Path(path)
    if not path.exists():
        raise ContractError(f"table '{contract.name}': file {path} does not exist")
    part = contract.select(*(contract.columns if columns is None else columns))
    stored = _check_stored(path, part)
    for batch in stored.iter_batches(batch_size=rows or GROUP_ROWS, columns=list(part.columns)):
        yield conform(pl.from_arrow(batch), part)


def table_rows(path: str | os.PathLike) -> int:
    """The number of rows of a Parquet table (from its footer)."""
    return open_parquet(path).metadata.num_rows


def open_parquet(path: str | os.PathLike) -> Any:
    """A pyarrow ParquetFile to read a batch at a time. Buffered reads without pre-buffering: pyarrow's default
    pre-buffers every column chunk it iterates over, so `iter_batches` held the whole file (1.4 GB for 800k vectors)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, buffer_size=1 << 20, pre_buffer=False)


def _check_stored(path: Path, contract: Contract) -> Any:
    """The opened Parquet file at `path`; a ContractError when it lacks one of the contract's columns."""
    stored = open_parquet(path)
    missing = [name for name in contract.columns if name not in stored.schema_arrow.names]
    if missing:
        raise ContractError(f"table '{contract.name}': file {path} has no columns {missing}")
    return stored
