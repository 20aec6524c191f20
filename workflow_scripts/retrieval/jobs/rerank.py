"""Rule rerank (per dataset and reranker, or per shard of it): the reranker's score of every candidate pair of the
arms that use it, once (retrieval/rerank.py).

In:  the first-stage rankings those arms read ("<method>_<scope>"), the units and the questions; params: the
     reranker's config, the arms, retrieval.title, the score and model caches.
Out: results/<dataset>/rerank/<reranker>.parquet (RERANK_SCORES).
"""

from pathlib import Path
from typing import Any

from workflow_scripts.core.contracts import RANKING, RERANK_SCORES
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job, shard_of
from workflow_scripts.retrieval.rerank import rerank


def main(smk: Any) -> None:
    rankings = {key: read_table(path, RANKING) for key, path in smk.input.items() if key not in ("units", "questions")}
    table = rerank(smk.wildcards.reranker, smk.params.reranker, smk.params.arms, rankings, shard_of(smk),
                   smk.input.units, smk.input.questions, smk.params.title, Path(smk.params.model_cache),
                   Path(smk.params.cache))
    write_table(table, smk.output.scores, RERANK_SCORES)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
