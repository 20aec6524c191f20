"""Rule embed_units (per dataset, or per shard of it): the units' and questions' vectors (retrieval/dense.py).

In:  the units and questions; params: models.embedder, retrieval.title, the embedding cache.
Out: results/<dataset>/dense/unit_vectors.parquet (UNIT_VECTORS) and question_vectors.parquet (QUESTION_VECTORS).
"""

from pathlib import Path
from typing import Any

from workflow_scripts.jobs.runtime import run_job, shard_of
from workflow_scripts.retrieval.dense import embed_units


def main(smk: Any) -> None:
    embed_units(smk.input.units, smk.input.questions, smk.output.vectors, smk.output.questions, smk.params.embedder,
                smk.params.title, Path(smk.params.cache), shard_of(smk))


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
