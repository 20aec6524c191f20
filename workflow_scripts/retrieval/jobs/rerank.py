"""Rule rerank (per dataset and reranker, or per shard of it): the reranker's score of every candidate pair of the
arms that use it, once (retrieval/rerank.py).

In:  the first-stage rankings those arms read ("<method>_<scope>"), the units and the questions; params: the
     reranker's config, the arms, retrieval.title, the score and model caches.
Out: results/<dataset>/rerank/<reranker>.parquet (RERANK_SCORES).
"""

from pathlib import Path
from typing import Any

from workflow_scripts.core.contracts import QUESTIONS, RANKING, RERANK_SCORES, UNITS
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job, shard_of
from workflow_scripts.retrieval.rerank import rerank, shard_pairs


def main(smk: Any) -> None:
    rankings = {key: read_table(path, RANKING) for key, path in smk.input.items() if key not in ("units", "questions")}
    pairs = shard_pairs(smk.params.arms, rankings, shard_of(smk))
    units = read_table(smk.input.units, UNITS, where=("unit_id", pairs["unit_id"].unique()))  # the pairs' units only
    questions = read_table(smk.input.questions, QUESTIONS)
    table = rerank(smk.wildcards.reranker, smk.params.reranker, pairs, units, questions, smk.params.title,
                   Path(smk.params.model_cache), Path(smk.params.cache))
    write_table(table, smk.output.scores, RERANK_SCORES)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
