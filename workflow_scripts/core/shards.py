"""Shards: which items a job of a sharded stage owns, and how its shards' tables join into one.

In:  config `shards` (stage → count) through the `shard` wildcard of a sharded stage's job ("<i>-of-<n>");
     the ids of the stage's items (units and questions, questions, sampled papers or queries); for the gather
     (jobs/gather.py), every shard's table of one output and its contract, whose row order the unsharded job writes
     (`gathered`), or the input table whose order it follows (`gather_in_order`).
Out: the items a shard owns: those whose id hashes to it (blake2b of the UTF-8 id, so every machine and Python
     agree, and an item stays in its shard whatever else the corpus holds), read a batch at a time
     (`owned_batches`) where the table is the corpus; the gathered tables, rows in the unsharded job's order and
     written through the same contract (and the same `TableWriter` row groups), so they are byte-identical to the
     unsharded run's when the rows are. A table in an input table's order (vectors) is merged from its shards a
     batch at a time (`gather_in_order`), never held whole. A shard count above the number of items stops every shard
     job naming the stage and
     the count to use; a shard output missing at gather time stops the gather naming the shard (never a partial
     table).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from workflow_scripts.core.tables import (
    Contract,
    GROUP_ROWS,
    TableWriter,
    frame,
    open_parquet,
    table_batches,
    table_rows,
)
from workflow_scripts.core.errors import InputError

GATHER_RULE_SUFFIX = "_gather"  # a sharded stage's jobs keep the stage's rule name; `<stage>_gather` joins them


@dataclass(frozen=True)
class Shard:
    """Shard `index` (0-based) of `count` of stage `stage`."""

    stage: str
    index: int
    count: int


@dataclass(frozen=True)
class InOrderOf:
    """A sharded output whose rows follow the order of `column` in the job's input table `input` (not a sort).
    Defined here, not in the gather's job module: the rules pickle it into the job's params, and a class of the job
    script itself would not be the one unpickled."""

    contract: Contract
    input: str
    column: str


def shard_names(count: int) -> list[str]:
    """The `shard` wildcard values of a stage split `count` ways."""
    return [f"{index}-of-{count}" for index in range(count)]


def parse_shard(stage: str, spec: str | None) -> Shard | None:
    """The shard named by a `shard` wildcard value ("<i>-of-<n>") of `stage`, or None (an unsharded job)."""
    if spec is None:
        return None
    index, _, count = spec.partition("-of-")
    return Shard(stage, int(index), int(count))


def bucket(item_id: str, count: int) -> int:
    """The shard (0 … count-1) an item id belongs to."""
    digest = hashlib.blake2b(item_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


def too_many(shard: Shard, items: int, what: str) -> InputError:
    """The error for a shard count above the number of the stage's items."""
    return InputError(f"shards.{shard.stage} = {shard.count} is more than the {items} {what} the stage has; set "
                      f"shards.{shard.stage} to at most {items}")


def owned(ids: Sequence[str], shard: Shard | None, what: str | None) -> list[bool]:
    """Per id, whether `shard` owns it (every id when unsharded). `what` names the stage's items in the error
    raised when there are fewer distinct ones than shards (None: ids that need not fill every shard)."""
    if shard is None:
        return [True] * len(ids)
    items = len(set(ids))
    if what is not None and shard.count > items:
        raise too_many(shard, items, what)
    return [bucket(item_id, shard.count) == shard.index for item_id in ids]


def own_rows(table: pl.DataFrame, column: str, shard: Shard | None, what: str | None) -> pl.DataFrame:
    """The rows of `table` whose `column` id the shard owns (all rows unsharded)."""
    if shard is None:
        return table
    return table.filter(pl.Series(owned(table[column].to_list(), shard, what), dtype=pl.Boolean))


def owned_batches(
    path: str | os.PathLike, contract: Contract, column: str, shard: Shard | None, what: str | None
) -> Iterator[pl.DataFrame]:
    """A contract table's rows the shard owns (all rows unsharded), in file order, a batch at a time: the job never
    holds the table. `column` is the table's key (its ids are distinct, so its row count is the item count)."""
    if shard is not None and what is not None and shard.count > (items := table_rows(path)):
        raise too_many(shard, items, what)
    for batch in table_batches(path, contract):
        yield (
            batch
            if shard is None
            else batch.filter(pl.Series(owned(batch[column].to_list(), shard, None), dtype=pl.Boolean))
        )


def checked_parts(paths: Sequence[Path], rule: str) -> list[Path]:
    """The gather job's shard files of one output, in shard order; a missing one stops it, naming the shard."""
    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        stage = rule.removesuffix(GATHER_RULE_SUFFIX)
        raise InputError(f"{rule}: shard output(s) {missing} missing; rerun the `{stage}` job(s) that write them "
                         f"(no partial table is written)")
    return list(paths)


def gathered(parts: Sequence[pl.DataFrame], contract: Contract) -> pl.DataFrame:
    """The shards' rows as one table in the unsharded job's order (the contract's `row_order`)."""
    return pl.concat(parts, how="vertical").sort(list(contract.row_order), maintain_order=True)


def gather_in_order(parts: Sequence[Path], contract: Contract, column: str, reference: Path, output: Path) -> None:
    """Write the shards' rows in the order of the ids in `reference`'s `column` (an input table, read a batch at a
    time), streaming: each shard file is read in its own order, which is the reference's order restricted to the
    shard (a shard job writes its items in input order), and the rows are merged by the shard each reference id
    hashes to, one batch at a time, so the job holds a batch of rows whatever the table's size. Shards that do not
    hold exactly the reference's ids in its order (a stale shard) stop the gather, naming the first mismatch."""
    readers = [table_batches(path, contract) for path in parts]
    buffers = [frame([], contract) for _ in parts]

    def take(shard: int, rows: int) -> pl.DataFrame:
        while buffers[shard].height < rows:
            batch = next(readers[shard], None)
            if batch is None:
                raise InputError(f"{parts[shard]} holds fewer rows than the ids of {reference} it owns; rerun its "
                                 f"shard job")
            buffers[shard] = pl.concat([buffers[shard], batch], rechunk=False)
        taken, buffers[shard] = buffers[shard].head(rows), buffers[shard].slice(rows)
        return taken

    with TableWriter(output, contract) as writer:
        for batch in open_parquet(reference).iter_batches(batch_size=GROUP_ROWS, columns=[column]):
            ids = batch.column(0).to_pylist()
            owners = np.fromiter((bucket(item, len(parts)) for item in ids), dtype=np.int64, count=len(ids))
            pieces = [take(shard, int((owners == shard).sum())) for shard in range(len(parts))]
            by_shard = np.argsort(owners, kind="stable")  # row k of the pieces in shard order is id by_shard[k]
            rows = pl.concat(pieces, rechunk=False)[np.argsort(by_shard)]
            if rows[column].to_list() != ids:
                first = next(i for i, (got, want) in enumerate(zip(rows[column].to_list(), ids)) if got != want)
                raise InputError(f"the shards of {output} do not follow {reference}: {column} {ids[first]!r} expected, "
                                 f"{rows[column][first]!r} found; rerun the shard jobs")
            writer.write(rows)
        extra = [str(path) for shard, path in enumerate(parts)
                 if buffers[shard].height or next(readers[shard], None) is not None]
        if extra:  # (raised inside the writer's block: no table is written)
            raise InputError(f"{extra} hold rows whose ids are not in {reference}; rerun their shard jobs")
