"""Content-addressed caches of model outputs (embeddings, pair scores): folders of Parquet shards.

In:  a model fingerprint plus the texts a result depends on (→ `content_key`), and tables of (key, value) rows.
Out: cached rows looked up by key; new rows appended as a new shard named by the hash of its keys, written
     atomically. Each job writes its own shards, so jobs running at the same time never write the same file,
     an interrupted job keeps the shards it finished, and a rerun computes only the keys still missing.
"""

import hashlib
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from workflow_scripts.core.tables import Contract, conform, write_table
from workflow_scripts.core.errors import InputError


def content_key(fingerprint: str, *parts: str) -> str:
    """sha256 of the fingerprint and the texts joined by NUL: the key of one cached model output."""
    return hashlib.sha256("\0".join((fingerprint, *parts)).encode("utf-8")).hexdigest()


def read_cache(cache_dir: Path, keys: Iterable[str], contract: Contract) -> pl.DataFrame:
    """The cached rows whose key is in `keys`, from every shard in `cache_dir` (one row per key: the first shard's,
    in name order). Only the key column of every shard is read whole; the values are read from the shards that
    hold a wanted key, only for those keys, so a lookup never loads the whole cache."""
    shards = sorted(Path(cache_dir).glob("*.parquet"))
    if not shards:
        return pl.DataFrame(schema=contract.schema)
    wanted = pl.Series("key", list(keys), dtype=pl.String).implode()
    try:
        holding = set(
            pl.scan_parquet(shards, include_file_paths="shard").select("key", "shard")
            .filter(pl.col("key").is_in(wanted)).select(pl.col("shard").unique()).collect()["shard"].to_list()
        )
        holding_shards = [shard for shard in shards if str(shard) in holding]
        table = (
            pl.scan_parquet(holding_shards, missing_columns="insert").filter(pl.col("key").is_in(wanted))
            .unique("key", keep="first", maintain_order=True).collect()
            if holding_shards else pl.DataFrame(schema=contract.schema)
        )
    except (pl.exceptions.PolarsError, OSError) as error:
        raise InputError(
            f"cache {cache_dir}: a shard cannot be read ({error}); delete the folder to rebuild the cache"
        ) from None
    return conform(table, contract)


def append_cache(cache_dir: Path, table: pl.DataFrame, contract: Contract) -> Path | None:
    """Write `table` as a new shard named by the hash of its keys (atomically); None when it is empty."""
    if table.is_empty():
        return None
    name = hashlib.sha256("\n".join(sorted(table["key"].to_list())).encode("utf-8")).hexdigest()[:32]
    path = Path(cache_dir) / f"{name}.parquet"
    write_table(table, path, contract)
    return path
