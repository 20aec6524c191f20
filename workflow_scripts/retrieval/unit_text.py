"""The text a retriever or reranker sees for each unit: its text, optionally prefixed by its title.

In:  a `units` table and the config's `retrieval.title` choice ("prepend" or "ignore").
Out: one string per unit, in table order. "prepend" is the BEIR/Anserini "flat" convention (title + " " +
     text) and suits corpora whose title belongs to the unit (arXiv papers, Wikipedia passages); "ignore" suits
     units that are parts of one paper, where every unit would carry the same paper title.
"""

import polars as pl

from workflow_scripts.core.vocabulary import TITLE_MODES


def unit_texts(units: pl.DataFrame, title: str) -> list[str]:
    if title not in TITLE_MODES:
        raise ValueError(f"title mode {title!r}; expected one of {TITLE_MODES}")
    if title == "ignore":
        return units["text"].to_list()
    return [f"{head} {text}" if head else text for head, text in units.select("title", "text").iter_rows()]
