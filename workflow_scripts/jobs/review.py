"""What the review jobs read (review_export, review_agreement): one judge's judged items across the policies,
through their contracts.

In:  the Snakemake job (inputs questions, units, answers (one per policy, in params.policies order) and the judge's
     judgments (input named after the judge, same order); params.policies and params.runs, each policy's arm's run
     or None for closed_book).
Out: `judged_items_of` → judging/review.py judged_items' table. Only the units the runs show are read (a filtered
     pass over units.parquet).
"""

from typing import Any

from workflow_scripts.core.contracts import GENERATIONS, QUESTIONS, RUNS, UNITS
from workflow_scripts.core.tables import read_table
from workflow_scripts.judging import review


def judged_items_of(smk: Any, judge: str) -> Any:
    contract = review.JUDGES[judge][0]
    policies = list(smk.params.policies)
    judged = {policy: read_table(path, contract) for policy, path in zip(policies, smk.input[judge])}
    answers = {policy: read_table(path, GENERATIONS) for policy, path in zip(policies, smk.input.answers)}
    shown = {}
    for policy in policies:
        run_path = smk.params.runs[policy]
        if run_path is None:
            shown[policy] = {}
            continue
        run = read_table(run_path, RUNS)
        units = read_table(smk.input.units, UNITS, where=("unit_id", run["unit_id"].unique()),
                           columns=["unit_id", "text"])
        shown[policy] = review.shown_evidence(run, units)
    return review.judged_items(judge, read_table(smk.input.questions, QUESTIONS), judged, answers, shown)
