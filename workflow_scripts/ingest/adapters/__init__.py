"""Dataset adapters: one module per source format, each turning raw files into the canonical tables.

In:  a dataset's config entry (`format` plus the format's file keys; paths relative to the project root).
Out: per format, two entry points over the same code:
     - `stream(spec, dataset)`, a `UnitStream`: a generator that yields the unit rows one by one while it reads
       the corpus, then returns a `Rest` — the question and qrels rows, named counts of everything the adapter
       skipped, repaired or flagged, and notes that explain a count the format makes expected (both go to the
       ingest log and report). The ingest job writes the units as they come (`ingest/stage.py`), so its memory
       holds a batch of units, never the corpus;
     - `load(spec, dataset)`: the same stream collected into an `Ingested` bundle — `units`, `questions` and
       `qrels` frames that satisfy `contracts` (tests, benchmarks, small datasets).

`registry.ADAPTERS` maps each config `format` value to its loader, `registry.STREAMS` to its stream; the ingest
stage applies the shared clean-up and checks.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field

import polars as pl


@dataclass
class Ingested:
    units: pl.DataFrame
    questions: pl.DataFrame
    qrels: pl.DataFrame
    counts: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # count name → why this format makes that count expected


@dataclass
class Rest:
    """What an adapter's stream returns after its last unit: rows without the dataset column, counts and notes."""

    questions: list[dict] = field(default_factory=list)
    qrels: list[dict] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)


UnitStream = Generator[dict, None, Rest]  # yields unit rows (without the dataset column), returns the Rest
Loader = Callable[[Mapping, str], Ingested]
Streamer = Callable[[Mapping, str], UnitStream]


class Units:
    """Iterate the unit rows of a `UnitStream`; once they are exhausted, `rest` holds what the stream returned."""

    def __init__(self, stream: UnitStream) -> None:
        self.stream = stream
        self.rest: Rest | None = None

    def __iter__(self) -> Iterator[dict]:
        self.rest = yield from self.stream
