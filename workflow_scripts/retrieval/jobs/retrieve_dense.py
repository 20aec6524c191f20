"""Rule retrieve_dense (per dataset and scope): the questions' vectors against the units' → the first-stage
RANKING at the depth the arms need (retrieval/dense.py).

In:  the questions, their vectors, the unit vectors and, for global scope, the FAISS index; params: the depth.
Out: results/<dataset>/first_stage/dense_<scope>.parquet (RANKING).
"""

from pathlib import Path
from typing import Any

from workflow_scripts.core.contracts import QUESTION_VECTORS, QUESTIONS, RANKING, UNIT_VECTORS
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.retrieval.dense import load_index, read_vectors, retrieve_dense


def main(smk: Any) -> None:
    scope = smk.wildcards.scope
    if scope == "global":  # the ids and the index: no second copy of the vectors
        units = read_table(smk.input.vectors, UNIT_VECTORS, columns=["unit_id"])
        vectors, index = None, load_index(Path(smk.input.index))
    else:
        units = read_table(smk.input.vectors, UNIT_VECTORS, columns=["unit_id", "group_id"])
        vectors, index = read_vectors(smk.input.vectors), None
    ranking, _ = retrieve_dense(read_table(smk.input.questions, QUESTIONS),
                                read_table(smk.input.question_vectors, QUESTION_VECTORS), units, vectors, index, scope,
                                smk.params.depth, (smk.input.question_vectors, smk.input.questions))
    write_table(ranking, smk.output.ranking, RANKING)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
