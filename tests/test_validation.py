"""Judge validation (judging/validation.py): agreement with a reference label, PPI replays of the review loop, the
generated findings, and its bad input (n larger than the answers, a dataset without reference answers)."""

import copy

import numpy as np
import polars as pl
import pytest
import yaml

from workflow_scripts.config.validate import validate_config
from workflow_scripts.core.contracts import JUDGE_AGREEMENT, JUDGE_VALIDATION_ITEMS, PPI_REPLAY
from workflow_scripts.core.tables import conform
from workflow_scripts.core.errors import InputError
from workflow_scripts.judging import validation


def _items(seed: int = 0, groups: int = 60, informative: bool = True) -> pl.DataFrame:
    """Two policies' answers to `groups` questions: a 0/1 reference label and a judge whose expected correctness
    rises with it (informative) or not."""
    rng = np.random.default_rng(seed)
    rows = []
    for policy, rate in (("closed_book", 0.2), ("bm25", 0.5)):
        for question in range(groups):
            reference = int(rng.random() < rate)
            expected = float(np.clip(1.2 + (0.6 * reference if informative else 0) + rng.normal(0, 0.3), 0, 2))
            argmax = float(round(expected))
            rows.append({"item_id": f"q{question}|{policy}", "policy": policy, "qid": f"q{question}",
                         "group_id": f"g{question // 2}", "argmax": argmax, "expected": expected,
                         "level": int(argmax), "reference": reference, "judge": expected})
    return conform(pl.DataFrame(rows), JUDGE_VALIDATION_ITEMS)


@pytest.mark.slow  # bootstrap CIs on simulated judges (~4 s)
def test_agreement_measures_rank_an_informative_judge_above_chance_with_group_cis():
    table = conform(validation.agreement_table(_items(), resamples=200, seed=1), JUDGE_AGREEMENT)
    auroc = table.filter((pl.col("reading") == "expected") & (pl.col("measure") == "auroc")).row(0, named=True)
    assert auroc["estimate"] > 0.8 and auroc["low"] < auroc["estimate"] < auroc["high"]
    assert auroc["n"] == 120 and auroc["n_groups"] == 30 and auroc["distinct_scores"] > 100
    bias = table.filter((pl.col("reading") == "expected") & (pl.col("measure") == "bias"))["estimate"].item()
    items = _items()
    assert bias == pytest.approx(items["expected"].mean() / 2 - items["reference"].mean())
    flat = conform(validation.agreement_table(_items(informative=False), resamples=200, seed=1), JUDGE_AGREEMENT)
    assert flat.filter((pl.col("reading") == "expected") & (pl.col("measure") == "auroc"))["low"].item() < 0.5


@pytest.mark.slow  # coverage simulation (~2 s)
def test_replays_cover_the_reference_mean_and_tuned_is_never_wider_than_classical():
    items = _items(seed=3, groups=100)
    replay = conform(validation.replay_table(items, [30, 80], replays=60, seed=5, judge_column="judge"), PPI_REPLAY)
    # the export's design draws per_stratum items from each policy × level stratum: at least n in all
    assert replay["n"].to_list() == [30, 80] and (replay["n_reviewed_mean"] >= replay["n"]).all()
    assert (replay["tuned_coverage"] >= 0.85).all() and (replay["classical_coverage"] >= 0.85).all()
    assert (replay["tuned_width"] <= replay["classical_width"] * 1.01).all()
    assert replay["naive_coverage"].item(0) in (0.0, 1.0) and replay["N"].item(0) == 200
    sentences = validation.findings(validation.agreement_table(items, 200, 1), replay, "contains", "expected")
    assert "AUROC" in sentences[0] and "n = 30 reviewed answers (60 replays)" in sentences[2]
    assert "PPI++ covers the reference mean" in sentences[2]


def test_more_reviews_than_answers_is_refused_naming_n_and_the_count():
    with pytest.raises(InputError, match=r"n = 500 is more than the 120 judged answers"):
        validation.replay_table(_items(), [30, 500], replays=10, seed=0, judge_column="judge")


def test_validation_on_a_dataset_without_answers_is_a_config_error_naming_it(project_root, monkeypatch):
    monkeypatch.chdir(project_root)
    config = yaml.safe_load((project_root / "experiments" / "scifact.yaml").read_text())
    config = copy.deepcopy(config)
    config["generation"] = {"policies": ["bm25"]}
    config["judging"] = {"validate": {"reference": "contains"}}
    with pytest.raises(InputError, match=r"judging.validate: dataset 'scifact' \(format beir\) has no reference answers"):
        validate_config(config)


def test_reference_comparisons_pair_the_reference_label_on_questions_judged_under_both():
    rows = []
    for index in range(12):
        qid = f"q{index}"
        rows.append({"item_id": f"{qid}|closed_book", "policy": "closed_book", "qid": qid, "group_id": f"g{index // 2}",
                     "reference": 1})
        if index < 10:  # two questions were not judged under bm25: left out of the pairing
            rows.append({"item_id": f"{qid}|bm25", "policy": "bm25", "qid": qid, "group_id": f"g{index // 2}",
                         "reference": int(index % 5 != 0)})
    items = pl.DataFrame(rows)
    boot = {"resamples": 500, "method": "percentile", "confidence": 0.95}
    (row,) = validation.reference_comparisons(items, ["closed_book", "bm25"], boot, 13).iter_rows(named=True)
    assert (row["a"], row["b"], row["n"], row["n_groups"]) == ("bm25", "closed_book", 10, 5)
    assert row["estimate"] == pytest.approx(-0.2) and row["high"] <= 0 and row["tie"] == pytest.approx(0.8)
    assert validation.reference_comparisons(items, ["closed_book"], boot, 13).height == 0


@pytest.mark.slow  # coverage simulation of the difference (~3 s)
def test_replays_of_a_policy_difference_cover_the_reference_difference():
    """Beside the means, the replays report PPI(++) for bm25 − closed_book against the reference label's own
    difference on the questions judged under both (an informative judge: PPI++ covers it, no wider than the
    reviews alone)."""
    items = _items(seed=3, groups=100)
    replay = conform(validation.replay_table(items, [30, 80], replays=60, seed=5, judge_column="judge",
                                             policies=["closed_book", "bm25"]), PPI_REPLAY)
    target = items.pivot(on="policy", index="qid", values="reference")
    assert replay["difference"].to_list() == ["bm25 − closed_book"] * 2
    assert replay["difference_target"][0] == pytest.approx((target["bm25"] - target["closed_book"]).mean())
    assert (replay["difference_replays"] == 60).all() and (replay["difference_tuned_coverage"] >= 0.85).all()
    assert (replay["difference_tuned_width"] <= replay["difference_classical_width"] * 1.01).all()
    assert (replay["difference_tuned_width"] > replay["tuned_width"]).all()  # a difference is harder than a mean
    alone = validation.replay_table(items.filter(pl.col("policy") == "bm25"), [30], 10, 5, "judge",
                                    policies=["closed_book", "bm25"])
    assert alone["difference"].to_list() == [None]
    sentences = validation.findings(validation.agreement_table(items, 200, 1), replay, "contains", "expected")
    assert "For the difference bm25 − closed_book (reference " in sentences[2] and "of 60 replays" in sentences[2]
