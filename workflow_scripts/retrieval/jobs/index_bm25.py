"""Rule index_bm25 (per dataset): the units → a Lucene index folder with its manifest (retrieval/bm25.py).

In:  results/<dataset>/units.parquet; params: retrieval.title.
Out: results/<dataset>/index/bm25/ (Lucene files + manifest.json).
"""

import logging
from pathlib import Path
from typing import Any

from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.retrieval.bm25 import build_index

log = logging.getLogger("ragfrontier.bm25")


def main(smk: Any) -> None:
    manifest = build_index(Path(smk.input.units), Path(smk.output.index), smk.threads, smk.params.title)
    log.info("bm25 index: %d units in %s s", manifest["units"], manifest["build"]["seconds"])


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
