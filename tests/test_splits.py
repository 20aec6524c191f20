"""Splits: grouped (no group crosses), seeded, balanced by question counts, validated fractions."""

import polars as pl
import pytest

from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.splits import assign_groups, make_splits

FRACTIONS = {"dev": 0.5, "calibration": 0.25, "heldout": 0.25}


def questions(group_sizes: dict[str, int]) -> pl.DataFrame:
    rows = [(f"{group}-q{i}", group) for group, size in group_sizes.items() for i in range(size)]
    return pl.DataFrame(rows, schema=["qid", "group_id"], orient="row")


def test_no_group_crosses_splits_and_every_question_is_assigned():
    sizes = {f"paper{i}": 1 + i % 7 for i in range(40)}
    splits = make_splits(questions(sizes), FRACTIONS, seed=3)
    assert splits.height == sum(sizes.values())
    assert splits.group_by("group_id").agg(pl.col("split").n_unique())["split"].max() == 1


def test_question_shares_follow_the_fractions():
    sizes = {f"paper{i}": 1 + i % 7 for i in range(200)}
    splits = make_splits(questions(sizes), FRACTIONS, seed=3)
    shares = splits["split"].value_counts(normalize=True)
    share = dict(zip(shares["split"], shares["proportion"]))
    for name, target in FRACTIONS.items():
        assert abs(share[name] - target) < 0.02, (name, share[name])


def test_same_seed_same_assignment_other_seed_differs():
    sizes = {f"paper{i}": 3 for i in range(30)}
    first = assign_groups(sizes, FRACTIONS, seed=7)
    assert first == assign_groups(dict(reversed(list(sizes.items()))), FRACTIONS, seed=7)
    assert first != assign_groups(sizes, FRACTIONS, seed=8)


def test_zero_fraction_split_stays_empty():
    sizes = {f"paper{i}": 2 for i in range(10)}
    assignment = assign_groups(sizes, {"dev": 0.6, "calibration": 0.0, "heldout": 0.4}, seed=1)
    assert set(assignment.values()) == {"dev", "heldout"}


@pytest.mark.parametrize("fractions", [{"dev": 0.5, "heldout": 0.4}, {"dev": 0.5, "test": 0.5}])
def test_bad_fractions_are_rejected(fractions):
    with pytest.raises(InputError, match="splits.fractions"):
        assign_groups({"a": 1}, fractions, seed=1)
