"""Which loader and which stream read which `format`, and which of a format's config keys name input files.

In:  a dataset's `format` value from the config.
Out: its loader (`Loader`: the whole bundle in memory) and its file keys (the ingest rule declares those files as
     inputs, so editing a source file reruns ingest, and a missing file is reported before any job runs); its
     stream (`Streamer`: units one by one, what the ingest job reads).
"""

from __future__ import annotations

from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import (
    Loader,
    Streamer,
    arxiv,
    beir,
    hotpotqa,
    musique,
    pool,
    qasper,
    systems,
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
    "systems": (systems.load, ()),  # its files are its systems' (rules/inputs/ingest.smk)
}

STREAMS: dict[str, Streamer] = {
    "qasper": qasper.stream,
    "beir": beir.stream,
    "trec": trec.stream,
    "pool_tsv": pool.stream,
    "hotpotqa": hotpotqa.stream_hotpotqa,
    "ircot": hotpotqa.stream_ircot,
    "musique": musique.stream,
    "twowiki": twowiki.stream,
    "unarxive": unarxive.stream,
    "arxiv_metadata": arxiv.stream,
    "systems": systems.stream,
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


def stream_for(dataset: str, format_name: str) -> Streamer:
    """The stream of `format_name`, or the InputError of `adapter_for`."""
    adapter_for(dataset, format_name)
    return STREAMS[format_name]
