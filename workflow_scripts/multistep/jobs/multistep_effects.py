"""Rule multistep_effects (per dataset and multi-step policy): what each extra step rescues and harms, fixed-K
curves with the oracle stop, and the stop rules replayed (multistep/effects.py, multistep/stops.py).

In:  the policy's trajectories, the questions (reference answers) and, when the dataset answers closed_book, those
     answers; params: the policy's k, multistep.scorer / f1_threshold / stop_rules, routing.bootstrap and seed.
Out: results/<dataset>/multistep/<policy>/curve.csv (MULTISTEP_CURVE), comparisons.csv (MULTISTEP_COMPARISONS) and
     stops.csv (MULTISTEP_STOPS).
"""

from typing import Any

from workflow_scripts.core.contracts import (
    GENERATIONS,
    MULTISTEP_COMPARISONS,
    MULTISTEP_CURVE,
    MULTISTEP_STOPS,
    QUESTIONS,
    TRAJECTORIES,
)
from workflow_scripts.core.tables import read_table, write_report
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.multistep import effects


def main(smk: Any) -> None:
    trajectories = read_table(smk.input.trajectories, TRAJECTORIES)
    questions = read_table(smk.input.questions, QUESTIONS)
    closed = read_table(smk.input.closed_book, GENERATIONS) if "closed_book" in smk.input.keys() else None
    tables = effects.policy_tables(trajectories, questions, closed, smk.params.k, smk.params.scoring,
                                   smk.params.stop_rules, smk.params.bootstrap, smk.params.seed)
    for key, contract in (("curve", MULTISTEP_CURVE), ("comparisons", MULTISTEP_COMPARISONS),
                          ("stops", MULTISTEP_STOPS)):
        write_report(tables[key], smk.output[key], contract, float_precision=6)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
