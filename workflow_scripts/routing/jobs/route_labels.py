"""Rule route_labels: the pair's labels and utility distribution (routing/protocol.py `pair_labels`).

In:  the two sides' per-query metrics (Study A) or answers and the questions (Study B), the splits; params: the pair.
Out: results/<dataset>/routing/<pair>/labels.parquet (LABELS) and utility.csv.
"""

from typing import Any

from workflow_scripts.core.contracts import LABELS, SPLITS, UTILITY_REPORT
from workflow_scripts.core.tables import read_table, write_report, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.routing import protocol


def main(smk: Any) -> None:
    pair = smk.params.pair
    labels, model, unscorable = protocol.pair_labels(pair, smk.input.base, smk.input.alternative,
                                                     smk.input.get("questions"))
    write_table(labels, smk.output.labels, LABELS)
    utility = protocol.utility_table(labels, read_table(smk.input.splits, SPLITS), smk.wildcards.dataset,
                                     smk.wildcards.pair, pair["measure"], model, unscorable)
    utility = write_report(utility, smk.output.utility, UTILITY_REPORT, float_precision=6)
    protocol.log_labels(labels, utility, unscorable)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
