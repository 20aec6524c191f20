"""What the jobs that price work read: a cost source's tables and Snakemake benchmark files, and a routing pair's
ledger, rankings and own stages (the files behind cost/ledger.py and cost/pricing.py, which take frames).

In:  a cost source as the rules declare it (`cost_source` in rules/common.smk: kind, stage, component, its tables
     and their contracts, its benchmark files), or a pair's costing settings (its arms, reuse, prices, the ledger's
     stage names, the rankings of its reranked arms and its own stages) with the dataset's ledger file.
Out: `measured` → a cost/ledger.Measured (the tables through their contracts, the columns its kind reads, and the
     job's wall seconds); `pair_costs_from_files` → cost/pricing.pair_costs's plan and costs. A missing benchmark
     file or one without a seconds row is an InputError naming it.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import COST_LEDGER, RANKING
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.tables import read_table
from workflow_scripts.cost.ledger import Measured, columns_read
from workflow_scripts.cost.pricing import Costs, PairPlan, pair_costs


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


def pair_costs_from_files(pair_name: str, settings: Mapping[str, Any], ledger: str,
                          qids: pl.Series) -> tuple[PairPlan, Costs]:
    """cost/pricing.pair_costs of the files: the ledger, the rankings of the pair's reranked arms
    (`settings["rankings"]`, '<method>_<scope>' → file) and its own stages (`settings["pair_sources"]`)."""
    rankings = {key: read_table(path, RANKING) for key, path in settings["rankings"].items()}
    sources = [measured(source) for source in settings.get("pair_sources", ())]
    return pair_costs(pair_name, settings, read_table(ledger, COST_LEDGER), rankings, sources, qids)
