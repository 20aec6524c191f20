"""Rule retrieve_bm25 (per dataset and scope): the index and questions → the first-stage RANKING at the depth the
arms need (retrieval/bm25.py).

In:  the BM25 index and the questions; params: retrieval.bm25 (k1, b, remove_query) and the depth.
Out: results/<dataset>/first_stage/bm25_<scope>.parquet (RANKING).
"""

import logging
from pathlib import Path
from typing import Any

from workflow_scripts.core.contracts import QUESTIONS, RANKING
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.retrieval.bm25 import check_index, engine_settings, search

log = logging.getLogger("ragfrontier.bm25")


def main(smk: Any) -> None:
    check_index(Path(smk.input.index), engine_settings())
    settings, scope = smk.params.bm25, smk.wildcards.scope
    ranking, empty = search(
        Path(smk.input.index), read_table(smk.input.questions, QUESTIONS), smk.params.depth, scope,
        k1=settings["k1"], b=settings["b"], threads=smk.threads, remove_query=settings["remove_query"],
    )
    write_table(ranking, smk.output.ranking, RANKING)
    log.info(
        "bm25 %s: %d questions ranked, %d with no ranking %s", scope, ranking["qid"].n_unique(), len(empty), empty[:5]
    )


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
