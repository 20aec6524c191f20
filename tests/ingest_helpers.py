"""Ingest a dataset in memory: the ingest stage's own `build` (adapter, shared clean-up, contract checks) with a
sink that keeps the unit batches instead of streaming them to Parquet, for tests that want the whole bundle."""

from collections.abc import Mapping
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import UNITS
from workflow_scripts.ingest.adapters import Ingested
from workflow_scripts.ingest.stage import build


class MemorySink:
    """Keeps the written unit batches in memory."""

    def __init__(self) -> None:
        self.batches: list[pl.DataFrame] = []

    def write(self, batch: pl.DataFrame) -> None:
        self.batches.append(batch)

    def finish(self) -> pl.LazyFrame:
        return (pl.concat(self.batches) if self.batches else pl.DataFrame(schema=UNITS.schema)).lazy()


def load_dataset(dataset: str, spec: Mapping[str, Any]) -> Ingested:
    """Read `dataset` with its format's adapter and the ingest stage's clean-up and checks, all units in memory."""
    tables = build(dataset, spec, MemorySink())
    return Ingested(units=tables.units.collect(), questions=tables.questions, qrels=tables.qrels,
                    counts=tables.counts, notes=tables.notes)
