"""Rule index_dense (per dataset): the unit vectors → a FAISS index (retrieval/dense.py).

In:  results/<dataset>/dense/unit_vectors.parquet; params: retrieval.dense_index.
Out: results/<dataset>/index/dense.faiss.
"""

from pathlib import Path
from typing import Any

from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.retrieval.dense import index_dense


def main(smk: Any) -> None:
    index_dense(smk.input.vectors, smk.params.index, Path(smk.output.index))


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
