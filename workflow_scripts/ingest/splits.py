"""Splits stage: assign every question to dev / calibration / heldout, grouped so no group crosses splits.

In:  `questions.parquet` of one dataset; the split fractions and seed from the config.
Out: `splits.parquet` (contract `SPLITS`: qid, group_id, split).

Groups (papers, question contexts) are shuffled by a seeded permutation of their sorted ids, then each group goes
to the split whose question count is furthest below its target share (ties in the order dev, calibration,
heldout). The result depends only on the group ids, their question counts, the fractions and the seed. Plain
functions; the rule's job is ingest/jobs/splits.py.
"""


from collections.abc import Mapping

import numpy as np
import polars as pl

from workflow_scripts.core.errors import InputError
from workflow_scripts.core.vocabulary import SPLIT_ORDER



def check_fractions(fractions: Mapping[str, float]) -> None:
    total = sum(fractions.values())
    if set(fractions) - set(SPLIT_ORDER) or abs(total - 1.0) > 1e-9:
        raise InputError(
            f"splits.fractions: {dict(fractions)} must name only {list(SPLIT_ORDER)} and sum to 1 (sums to {total})"
        )


def assign_groups(group_sizes: Mapping[str, int], fractions: Mapping[str, float], seed: int) -> dict[str, str]:
    """Map each group id to a split name, balancing question counts against the target fractions."""
    check_fractions(fractions)
    groups = sorted(group_sizes)
    order = np.random.default_rng(seed).permutation(len(groups))
    total = sum(group_sizes.values())
    filled = {name: 0 for name in SPLIT_ORDER}
    assignment: dict[str, str] = {}
    for index in order:
        group = groups[index]
        deficit = {name: fractions.get(name, 0.0) * total - filled[name] for name in SPLIT_ORDER}
        target = max((name for name in SPLIT_ORDER if fractions.get(name, 0.0) > 0), key=deficit.__getitem__)
        assignment[group] = target
        filled[target] += group_sizes[group]
    return assignment


def make_splits(questions: pl.DataFrame, fractions: Mapping[str, float], seed: int) -> pl.DataFrame:
    """One row per question with its split; every question of a group gets the group's split."""
    sizes = questions.group_by("group_id").len()
    assignment = assign_groups(dict(zip(sizes["group_id"], sizes["len"])), fractions, seed)
    return questions.select("qid", "group_id").with_columns(
        pl.col("group_id").replace_strict(assignment, return_dtype=pl.String()).alias("split")
    ).sort("qid")
