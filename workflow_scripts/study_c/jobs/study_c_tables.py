"""Rule study_c_tables (per dataset): every strategy's retrieval, judged quality, paired differences and cost.

In:  the synthetic queries and per strategy its run, answers and judgments; params: the strategies in order (classic
     first), study_c.bootstrap, judging.scoring, models.generator.prices.
Out: results/<dataset>/study_c/tables/*.csv and report.md (study_c/comparisons.py).
"""

from typing import Any

from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.core.contracts import (
    JUDGMENTS_QUALITY,
    STUDY_C_ANSWERS,
    STUDY_C_COST,
    STUDY_C_GAP,
    STUDY_C_GOLD,
    STUDY_C_PAIRED,
    STUDY_C_PAIRED_RETRIEVAL,
    STUDY_C_QUALITY,
    STUDY_C_QUERIES,
    STUDY_C_RETRIEVAL,
    STUDY_C_RUNS,
)
from workflow_scripts.core.tables import read_table, write_report
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.study_c import comparisons


CSV = {"quality": STUDY_C_QUALITY, "retrieval": STUDY_C_RETRIEVAL, "paired": STUDY_C_PAIRED,
       "paired_retrieval": STUDY_C_PAIRED_RETRIEVAL, "gold": STUDY_C_GOLD, "gap": STUDY_C_GAP, "cost": STUDY_C_COST}


def main(smk: Any) -> None:
    strategies = list(smk.params.strategies)
    queries = read_table(smk.input.queries, STUDY_C_QUERIES)
    results = comparisons.study_tables(
        queries, strategies, [read_table(path, STUDY_C_RUNS) for path in smk.input.runs],
        [read_table(path, STUDY_C_ANSWERS) for path in smk.input.answers],
        [read_table(path, JUDGMENTS_QUALITY) for path in smk.input.judgments], smk.params.scoring, smk.params.bootstrap,
        smk.params.prices,
    )
    for name, result in results.items():
        write_report(result, smk.output[name], CSV[name], float_precision=4)
    write_text_atomic(comparisons.report(queries, strategies, results), smk.output.report)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
