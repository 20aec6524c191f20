"""The gather job of every sharded stage (rules/gather.smk, `<stage>_gather`): joins the stage's shard tables into
the tables its unsharded job writes, through their contracts.

In:  per output key `<key>`, every shard's file as inputs `<key>__<i>`; `params.tables`: output key → the output's
     Contract (rows in its `row_order`, as the unsharded job writes them) or an `InOrderOf` (rows in the order of an
     input table's column, merged a batch at a time: unit vectors follow the units).
Out: the stage's outputs at the unsharded paths, byte-identical to an unsharded run's when the rows are; a missing
     shard stops the gather naming it, with no partial table written. A stage whose gather does more than join
     tables has its own `<stage>_gather.py` beside its job module, which calls `gather_tables` for its tables.
"""

from pathlib import Path
from typing import Any

from workflow_scripts.core.shards import InOrderOf, checked_parts, gather_in_order, gathered
from workflow_scripts.core.tables import Contract, read_table, write_table
from workflow_scripts.jobs.runtime import run_job


def shard_paths(smk: Any, key: str) -> list[Path]:
    """The gather job's shard files of output `key` (inputs `<key>__<i>`), in shard order, all present."""
    names = sorted((name for name in smk.input.keys() if name.startswith(f"{key}__")),
                   key=lambda name: int(name.rsplit("__", 1)[1]))
    return checked_parts([Path(smk.input[name]) for name in names], smk.rule)


def gather_tables(smk: Any, tables: dict[str, Contract | InOrderOf]) -> None:
    """Write each output in `tables` from its shards (see the module docstring)."""
    for key, spec in tables.items():
        parts = shard_paths(smk, key)
        if isinstance(spec, InOrderOf):
            gather_in_order(parts, spec.contract, spec.column, Path(smk.input[spec.input]), Path(smk.output[key]))
        else:
            write_table(gathered([read_table(path, spec) for path in parts], spec), smk.output[key], spec)


def main(smk: Any) -> None:
    gather_tables(smk, smk.params.tables)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
