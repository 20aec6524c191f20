"""Which loader reads which `format`, and which of a format's config keys name input files.

In:  a dataset's `format` value from the config.
Out: its loader (`Loader`) and its file keys (the ingest rule declares those files as inputs, so editing a
     source file reruns ingest, and a missing file is reported before any job runs).
"""

from __future__ import annotations

from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import (
    Loader,
    arxiv,
    beir,
    hotpotqa,
    musique,
    pool,
    qasper,
    trec,
    twowiki,
    unarxive,
)

ADAPTERS: dict[str, tuple[Loader, tuple[str, ...]]] = {
    "qasper": (qasper.load, ("path",)),
    "beir": (beir.load, ("corpus", "queries", "qrels")),
    "trec": (trec.load, ("collection", "topics", "qrels")),
    "pool_tsv": (pool.load, ("pool", "qrels")),
    "hotpotqa": (hotpotqa.load_hotpotqa, ("path",)),
    "ircot": (hotpotqa.load_ircot, ("path",)),
    "musique": (musique.load, ("path",)),
    "twowiki": (twowiki.load, ("corpus", "questions", "qrels")),
    "unarxive": (unarxive.load, ("path",)),
    "arxiv_metadata": (arxiv.load, ("path",)),
}


# Formats that carry a corpus only: their questions come from a later stage (Study C's synthetic queries).
CORPUS_ONLY = frozenset({"unarxive", "arxiv_metadata"})


def adapter_for(dataset: str, format_name: str) -> tuple[Loader, tuple[str, ...]]:
    """The (loader, file keys) pair for `format_name`, or an InputError naming the dataset key."""
    try:
        return ADAPTERS[format_name]
    except KeyError:
        raise InputError(
            f"datasets.{dataset}.format: unknown format {format_name!r}; known formats: {sorted(ADAPTERS)}"
        ) from None
