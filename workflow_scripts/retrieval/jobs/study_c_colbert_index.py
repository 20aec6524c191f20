"""Rule study_c_colbert_index (per dataset): the units in a ColBERT PLAID index (retrieval/colbert.py).

In:  the units and, with `untrained_from`, the built checkpoint; params: study_c.colbert.
Out: results/<dataset>/study_c/colbert_index/.
"""

from pathlib import Path
from typing import Any

from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.retrieval.colbert import checkpoint_for, index_units


def main(smk: Any) -> None:
    spec = smk.params.colbert
    index_units(smk.input.units, spec, checkpoint_for(spec, smk.input.get("checkpoint")), Path(smk.output.index))


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
