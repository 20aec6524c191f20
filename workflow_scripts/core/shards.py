"""Shards: which items a job of a sharded stage owns, and the gather that joins the stage's shards into one table.

In:  config `shards` (stage → count) through the `shard` wildcard of a sharded stage's job ("<i>-of-<n>");
     the ids of the stage's items (units and questions, questions, sampled papers or queries); for the gather
     job, every shard's tables and, per output, the order the unsharded job writes its rows in (`params.tables`).
Out: the items a shard owns: those whose id hashes to it (blake2b of the UTF-8 id, so every machine and Python
     agree, and an item stays in its shard whatever else the corpus holds); the gathered tables, rows in the
     unsharded job's order and written through the same contract, so they are byte-identical to the unsharded
     run's when the rows are. A shard count above the number of items stops every shard job naming the stage and
     the count to use; a shard output missing at gather time stops the gather naming the shard (never a partial
     table).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import CONTRACTS, Contract, read_table, write_table
from workflow_scripts.core.errors import InputError

GATHER_RULE_SUFFIX = "_gather"  # a sharded stage's jobs keep the stage's rule name; `<stage>_gather` joins them


@dataclass(frozen=True)
class Shard:
    """Shard `index` (0-based) of `count` of stage `stage`."""

    stage: str
    index: int
    count: int


def shard_names(count: int) -> list[str]:
    """The `shard` wildcard values of a stage split `count` ways."""
    return [f"{index}-of-{count}" for index in range(count)]


def shard_of(smk: Any) -> Shard | None:
    """The shard a Snakemake job works on, or None for an unsharded job (no `shard` wildcard)."""
    spec = dict(smk.wildcards.items()).get("shard")
    if spec is None:
        return None
    index, _, count = spec.partition("-of-")
    return Shard(smk.rule, int(index), int(count))


def is_gather(smk: Any) -> bool:
    """Whether the job is a sharded stage's gather (it alone gets `params.tables`)."""
    return "tables" in dict(smk.params.items())


def bucket(item_id: str, count: int) -> int:
    """The shard (0 … count-1) an item id belongs to."""
    digest = hashlib.blake2b(item_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


def owned(ids: Sequence[str], shard: Shard | None, what: str | None) -> list[bool]:
    """Per id, whether `shard` owns it (every id when unsharded). `what` names the stage's items in the error
    raised when there are fewer distinct ones than shards (None: ids that need not fill every shard)."""
    if shard is None:
        return [True] * len(ids)
    items = len(set(ids))
    if what is not None and shard.count > items:
        raise InputError(
            f"shards.{shard.stage} = {shard.count} is more than the {items} {what} the stage has; set "
            f"shards.{shard.stage} to at most {items}"
        )
    return [bucket(item_id, shard.count) == shard.index for item_id in ids]


def own_rows(table: pl.DataFrame, column: str, shard: Shard | None, what: str | None) -> pl.DataFrame:
    """The rows of `table` whose `column` id the shard owns (all rows unsharded)."""
    if shard is None:
        return table
    return table.filter(pl.Series(owned(table[column].to_list(), shard, what), dtype=pl.Boolean))


def read_owned(
    path: str | os.PathLike, contract: Contract, column: str, shard: Shard | None, what: str | None
) -> pl.DataFrame:
    """A contract table's rows the shard owns, read without holding the other shards' rows: only the id column
    is read whole, then the owned rows are scanned out of the file."""
    if shard is None or not Path(path).exists():
        return read_table(path, contract)  # (a missing file fails there, naming it)
    ids = pl.read_parquet(path, columns=[column])[column]
    mine = ids.filter(pl.Series(owned(ids.to_list(), shard, what), dtype=pl.Boolean))
    return read_table(path, contract, where=(column, mine))


def shard_paths(smk: Any, key: str) -> list[Path]:
    """The gather job's shard files of output `key`, in shard order; a missing one stops it, naming the shard."""
    paths = [Path(smk.input[name]) for name in sorted(
        (name for name in smk.input.keys() if name.startswith(f"{key}__")), key=lambda name: int(name.rsplit("__", 1)[1]))]
    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        stage = smk.rule.removesuffix(GATHER_RULE_SUFFIX)
        raise InputError(f"{smk.rule}: shard output(s) {missing} missing; rerun the `{stage}` job(s) that write them "
                         f"(no partial table is written)")
    return paths


def gathered(parts: Sequence[Path], contract: Contract, order: Mapping[str, Any], reference: pl.Series | None) -> pl.DataFrame:
    """The shards' rows as one table in the unsharded job's order: sorted by `order["by"]`, or by the position of
    `order["column"]` in `reference` (the ids of an input table, in its order)."""
    table = pl.concat([read_table(path, contract) for path in parts], how="vertical")
    if "by" in order:
        return table.sort(order["by"], maintain_order=True)
    column = order["column"]
    position = pl.DataFrame({column: reference, "__position": range(len(reference))})
    return table.join(position, on=column, how="left").sort("__position", maintain_order=True).drop("__position")


def gather(smk: Any) -> None:
    """The gather job of a sharded stage: each output in `params.tables` ({contract, by | as_in + column}) is its
    shards' rows concatenated in the unsharded order and written through its contract."""
    for key, order in smk.params.tables.items():
        contract = CONTRACTS[order["contract"]]
        reference = None
        if "as_in" in order:
            reference = pl.read_parquet(smk.input[order["as_in"]], columns=[order["column"]])[order["column"]]
        write_table(gathered(shard_paths(smk, key), contract, order, reference), smk.output[key], contract)
