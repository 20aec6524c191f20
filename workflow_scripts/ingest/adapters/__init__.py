"""Dataset adapters: one module per source format, each turning raw files into the canonical tables.

In:  a dataset's config entry (`format` plus the format's file keys; paths relative to the project root).
Out: an `Ingested` bundle — `units`, `questions` and `qrels` frames that satisfy `contracts`, plus named counts
     of everything the adapter skipped, repaired or flagged, and notes that explain a count the format makes
     expected (both go to the ingest log and report).

`ADAPTERS` maps each config `format` value to its loader; `ingest.py` applies the shared clean-up and checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import polars as pl


@dataclass
class Ingested:
    units: pl.DataFrame
    questions: pl.DataFrame
    qrels: pl.DataFrame
    counts: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # count name → why this format makes that count expected


Loader = Callable[[Mapping, str], Ingested]
