"""The routing protocol (routing/routers.py): routers are fitted on dev only and frozen; held-out questions cannot
change them."""

import json
import numpy as np
import polars as pl
import pytest

from workflow_scripts.core.contracts import ROUTER_COMPARISONS, SPLITS
from workflow_scripts.core.tables import conform, write_table
from workflow_scripts.routing.routers import fit_routers, frozen_paths, heldout_tables

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
    _, _, artifacts = fit_routers(
        pl.read_parquet(folder / "labels.parquet"), pl.read_parquet(folder / "features.parquet"),
        pl.read_parquet(folder / "splits.parquet"), ROUTERS, SETTINGS, "p")
    return artifacts


def heldout(folder):
    return heldout_tables(pl.read_parquet(folder / "labels.parquet"), pl.read_parquet(folder / "features.parquet"),
                          pl.read_parquet(folder / "splits.parquet"), fit(folder), SETTINGS)


def test_heldout_labels_cannot_change_the_frozen_routers(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    write_inputs(tmp_path / "a", heldout_delta=0.0)
    write_inputs(tmp_path / "b", heldout_delta=1.0)
    assert fit(tmp_path / "a") == fit(tmp_path / "b")


def test_each_frozen_file_holds_the_router_it_is_named_after(tmp_path):
    write_inputs(tmp_path, heldout_delta=0.0)
    for name, artifact in fit(tmp_path).items():
        assert json.loads(artifact)["router"] == name
    # the rule's frozen paths come in Snakemake's expand order (sorted), not the config's
    paths = [str(tmp_path / f"{name}.json") for name in sorted(ROUTERS)]
    assert frozen_paths(ROUTERS, paths) == {name: str(tmp_path / f"{name}.json") for name in ROUTERS}
    assert list(frozen_paths(ROUTERS, paths)) == list(ROUTERS)


def test_heldout_report_follows_the_frozen_threshold(tmp_path):
    write_inputs(tmp_path, heldout_delta=1.0)
    routed, policies, comparisons = heldout(tmp_path)
    always = policies.filter(pl.col("router") == "always").row(0, named=True)
    assert always["trigger_rate"] == 1.0 and always["rescues"] == 20 and always["adaptive"] == 1.5
    assert always["utility"] == pytest.approx(1.5 - 0.02)
    assert set(routed["split"]) == {"calibration", "heldout"}
    metric = comparisons.filter((pl.col("router") == "always") & (pl.col("b") == "off"))
    assert metric.filter(pl.col("scale") == "metric")["estimate"].to_list() == [1.0]
    # on utility, the always router is always switching: it pays c = 0.02 on every question, as does always-on
    assert metric.filter(pl.col("scale") == "utility")["estimate"].to_list() == [pytest.approx(1.0 - 0.02)]
    same = comparisons.filter((pl.col("router") == "always") & (pl.col("b") == "always_on") & (pl.col("scale") == "utility"))
    assert same["estimate"].to_list() == [pytest.approx(0.0)]
    conform(comparisons, ROUTER_COMPARISONS)
