"""Rule multistep_effects (per dataset and multi-step policy): what each extra step rescues and harms, fixed-K
curves with the oracle stop, the stop rules replayed and the stop routers' budget frontiers over retrieval calls
(multistep/effects.py, multistep/stops.py, multistep/budgets.py).

In:  the policy's trajectories, the questions (reference answers), their grouped splits and, when the dataset
     answers closed_book, those answers; params: the policy's k, the multistep block, the routing block (bootstrap,
     n_splits), the budgets block and the seed.
Out: results/<dataset>/multistep/<policy>/curve.csv (MULTISTEP_CURVE), comparisons.csv (MULTISTEP_COMPARISONS),
     stops.csv (MULTISTEP_STOPS) and frontiers.csv (MULTISTEP_FRONTIERS); the log names the ridge alpha chosen and
     the questions left out of the frontiers.
"""

import logging
from typing import Any

from workflow_scripts.core.contracts import (
    GENERATIONS,
    MULTISTEP_COMPARISONS,
    MULTISTEP_CURVE,
    MULTISTEP_FRONTIERS,
    MULTISTEP_STOPS,
    QUESTIONS,
    SPLITS,
    TRAJECTORIES,
)
from workflow_scripts.core.tables import read_table, write_report
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.multistep import effects

log = logging.getLogger("ragfrontier.multistep")


def main(smk: Any) -> None:
    trajectories = read_table(smk.input.trajectories, TRAJECTORIES)
    questions = read_table(smk.input.questions, QUESTIONS)
    closed = read_table(smk.input.closed_book, GENERATIONS) if "closed_book" in smk.input.keys() else None
    splits = read_table(smk.input.splits, SPLITS)
    tables = effects.policy_tables(trajectories, questions, closed, splits, smk.params.k, smk.params.settings,
                                   smk.params.routing, smk.params.budgets, smk.params.seed)
    log.info("multistep frontiers: %s", tables["fitted"])
    for key, contract in (("curve", MULTISTEP_CURVE), ("comparisons", MULTISTEP_COMPARISONS),
                          ("stops", MULTISTEP_STOPS), ("frontiers", MULTISTEP_FRONTIERS)):
        write_report(tables[key], smk.output[key], contract, float_precision=6)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
