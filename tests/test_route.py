"""Routing stage protocol: routers are fitted on dev only and frozen; held-out questions cannot change them."""

import json
from types import SimpleNamespace

import numpy as np
import polars as pl

from workflow_scripts.core.contracts import SPLITS, write_table
from workflow_scripts.routing.stage import fit_rule, heldout_rule

ROUTERS = {"ridge": {"kind": "ridge", "alpha": 20}, "random": {"kind": "random"}, "always": {"kind": "always"}}
SETTINGS = {"n_splits": 3, "seed": 5, "cost_per_trigger": 0.02,
            "bootstrap": {"resamples": 200, "method": "percentile", "confidence": 0.95}}


def write_inputs(folder, heldout_delta: float):
    rng = np.random.default_rng(0)
    qids = [f"q{i:03d}" for i in range(90)]
    groups = [f"paper{i // 5}" for i in range(90)]
    split = ["dev" if i < 50 else "calibration" if i < 70 else "heldout" for i in range(90)]
    signal = rng.normal(size=90)
    delta = np.where(signal > 0.8, 1.0, 0.0)
    delta[70:] = heldout_delta
    write_table(pl.DataFrame({"qid": qids, "group_id": groups, "split": split}), folder / "splits.parquet", SPLITS)
    pl.DataFrame({"qid": qids, "metric_off": 0.5, "metric_on": 0.5 + delta, "delta": delta,
                  "outcome": ["rescue" if d > 0 else "tie" for d in delta]}).write_parquet(folder / "labels.parquet")
    pl.DataFrame({"qid": qids, "top1_cos": signal, "gap12_cos": rng.normal(size=90)}).write_parquet(folder / "features.parquet")


def fit(folder):
    frozen = [str(folder / f"{name}.json") for name in sorted(ROUTERS)]  # Snakemake's expand order, not the config's
    smk = SimpleNamespace(
        input=SimpleNamespace(labels=folder / "labels.parquet", features=folder / "features.parquet",
                              splits=folder / "splits.parquet", frozen=frozen),
        output=SimpleNamespace(oof=folder / "oof.parquet", thresholds=folder / "thresholds.csv", frozen=frozen,
                               routed=folder / "routed.parquet", policies=folder / "policies.csv",
                               comparisons=folder / "comparisons.csv"),
        params=SimpleNamespace(routing=SETTINGS, routers=ROUTERS),
        wildcards=SimpleNamespace(pair="p"),
    )
    fit_rule(smk)
    return smk, {name: (folder / f"{name}.json").read_bytes() for name in ROUTERS}


def test_heldout_labels_cannot_change_the_frozen_routers(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    write_inputs(tmp_path / "a", heldout_delta=0.0)
    write_inputs(tmp_path / "b", heldout_delta=1.0)
    assert fit(tmp_path / "a")[1] == fit(tmp_path / "b")[1]


def test_each_frozen_file_holds_the_router_it_is_named_after(tmp_path):
    write_inputs(tmp_path, heldout_delta=0.0)
    for name, artifact in fit(tmp_path)[1].items():
        assert json.loads(artifact)["router"] == name


def test_heldout_report_follows_the_frozen_threshold(tmp_path):
    write_inputs(tmp_path, heldout_delta=1.0)
    smk, _ = fit(tmp_path)
    heldout_rule(smk)
    policies = pl.read_csv(tmp_path / "policies.csv")
    always = policies.filter(pl.col("router") == "always").row(0, named=True)
    assert always["trigger_rate"] == 1.0 and always["rescues"] == 20 and always["adaptive"] == 1.5
    assert always["utility"] == 1.5 - 0.02
    routed = pl.read_parquet(tmp_path / "routed.parquet")
    assert set(routed["split"]) == {"calibration", "heldout"}
    comparisons = pl.read_csv(tmp_path / "comparisons.csv")
    assert comparisons.filter((pl.col("router") == "always") & (pl.col("b") == "off"))["estimate"].to_list() == [1.0]
