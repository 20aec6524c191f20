"""Rule cost_ledger (per dataset): the per-query ledger of what every stage spent (cost/ledger.py).

In:  the questions; params: `sources` (per stage instance: kind, stage, component, its tables and their contracts,
     its benchmark files, device, prices), each table read through its contract (the columns its kind reads) and
     each benchmark file as Snakemake writes it.
Out: results/<dataset>/cost/ledger.parquet (COST_LEDGER) and cost/stages.csv (rows and seconds per stage).
"""

import logging
from typing import Any

from workflow_scripts.core.contracts import COST_LEDGER, COST_STAGE_TOTALS, QUESTIONS
from workflow_scripts.core.tables import read_table, write_report, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.cost.ledger import ledger, stage_totals
from workflow_scripts.jobs.costs import measured

log = logging.getLogger("ragfrontier.cost")


def main(smk: Any) -> None:
    questions = read_table(smk.input.questions, QUESTIONS)
    sources = [measured(source) for source in smk.params.sources]
    table = write_table(ledger(sources, questions, smk.wildcards.dataset), smk.output.ledger, COST_LEDGER)
    totals = stage_totals(table)
    totals = write_report(totals, smk.output.stages, COST_STAGE_TOTALS, float_precision=4)
    log.info("ledger: %d rows; seconds by stage: %s", table.height,
             totals.select("stage", "component", "seconds").rows())


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
