"""Rule run_arm (per dataset and arm): the arm's final top-K run and its TREC file (retrieval/arms.py).

In:  the first-stage rankings the arm reads (RANKING) and, for a reranked arm, its reranker's scores (RERANK_SCORES);
     params: the arm.
Out: results/<dataset>/runs/<arm>.parquet (RUNS) and <arm>.trec.
"""

import logging
from typing import Any

from workflow_scripts.core.contracts import RANKING, RERANK_SCORES, RUNS
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.retrieval.arms import candidates, final_run, first_stages, write_trec

log = logging.getLogger("ragfrontier.arms")


def main(smk: Any) -> None:
    arm = smk.params.arm
    rankings = {method: read_table(smk.input[method], RANKING) for method in first_stages(arm)}
    rerank_scores = read_table(smk.input.rerank, RERANK_SCORES) if arm.get("rerank") else None
    run = final_run(arm, candidates(arm, rankings), rerank_scores)
    write_table(run, smk.output.run, RUNS)
    write_trec(run, smk.output.trec, tag=smk.wildcards.arm)
    log.info("%s/%s: %d rows for %d queries", smk.wildcards.dataset, smk.wildcards.arm, run.height,
             run["qid"].n_unique())


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
