"""Rule study_c_colbert_checkpoint: an untrained ColBERT checkpoint from a packaged encoder, when study_c.colbert
names `untrained_from` (retrieval/colbert.py).

In:  params: study_c.colbert (untrained_from, dim, seed, extensions_dir).
Out: results/study_c/colbert_checkpoint/.
"""

from pathlib import Path
from typing import Any

from workflow_scripts.core import models
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.retrieval.colbert import build_untrained_checkpoint


def main(smk: Any) -> None:
    spec = smk.params.colbert
    build_untrained_checkpoint(models.resolve(spec["untrained_from"]), Path(smk.output.checkpoint), spec["dim"],
                               spec["seed"], Path(spec["extensions_dir"]))


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
