"""Rule cost_ledger (per dataset): the per-query ledger of what every stage spent (cost/ledger.py).

In:  the questions; params: `sources` (per stage instance: kind, stage, component, its tables and their contracts,
     its benchmark files, device, prices), each table read through its contract (the columns its kind reads) and
     each benchmark file as Snakemake writes it.
Out: results/<dataset>/cost/ledger.parquet (COST_LEDGER) and cost/stages.csv (rows and seconds per stage).
"""

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import COST_LEDGER, COST_STAGE_TOTALS, QUESTIONS
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.tables import read_table, write_report, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.cost.ledger import Measured, columns_read, ledger, stage_totals

log = logging.getLogger("ragfrontier.cost")


def benchmark_seconds(paths: Sequence[str | Path]) -> float:
    """Wall seconds of one stage instance: the mean `s` of each of its Snakemake benchmark files (one job, or a
    sharded stage's shards and gather), summed. A benchmark file is Snakemake's TSV, not a contract table."""
    total = 0.0
    for path in map(Path, paths):
        if not path.is_file():
            raise InputError(f"cost ledger: benchmark file {path} does not exist; rerun the rule that writes it")
        table = pl.read_csv(path, separator="\t")
        if "s" not in table.columns or table.height == 0:
            raise InputError(f"cost ledger: benchmark file {path} has no 's' (seconds) row")
        total += float(table["s"].mean())
    return total


def measured(source: Mapping[str, Any]) -> Measured:
    """A declared source with its tables (through their contracts, the columns its kind reads) and its seconds."""
    columns = columns_read(source)
    tables = [read_table(path, contract, columns=columns)
              for path, contract in zip(source["tables"], source["contracts"], strict=True)]
    return Measured(source, tables, benchmark_seconds(source["benchmarks"]))


def main(smk: Any) -> None:
    questions = read_table(smk.input.questions, QUESTIONS)
    sources = [measured(source) for source in smk.params.sources]
    table = write_table(ledger(sources, questions, smk.wildcards.dataset), smk.output.ledger, COST_LEDGER)
    totals = stage_totals(table)
    totals = write_report(totals, smk.output.stages, COST_STAGE_TOTALS, float_precision=4)
    log.info("ledger: %d rows; seconds by stage: %s", table.height,
             totals.select("stage", "component", "seconds").rows())


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
