"""Rule retrieve_dense (per dataset and scope): the questions' vectors against the units' → the first-stage
RANKING at the depth the arms need (retrieval/dense.py).

In:  the questions, their vectors, the unit vectors and, for global scope, the FAISS index; params: the depth.
Out: results/<dataset>/first_stage/dense_<scope>.parquet (RANKING).
"""

from typing import Any

from workflow_scripts.core.contracts import RANKING
from workflow_scripts.core.tables import write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.retrieval.dense import retrieve_dense


def main(smk: Any) -> None:
    ranking, _ = retrieve_dense(smk.input.questions, smk.input.question_vectors, smk.input.vectors,
                                smk.input.get("index"), smk.wildcards.scope, smk.params.depth)
    write_table(ranking, smk.output.ranking, RANKING)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
