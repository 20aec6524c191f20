"""Study B config checks: a closed_book pair must name a retrieval arm, an answer scorer and features whose stages
exist; routers reading a family their pairs lack and budgets outside (0, 1) stop the run before any job."""

import copy

import pytest
import yaml

from workflow_scripts.config.validate import validate_config
from workflow_scripts.core.errors import InputError


@pytest.fixture()
def config(project_root, stand_in_checkout):
    """The Study B experiment config, its dataset files empty stand-ins (validation checks only that they exist;
    test_experiments.py validates the config against the real ../shared/data)."""
    return stand_in_checkout(yaml.safe_load((project_root / "experiments" / "study_b.yaml").read_text()))


def pair(config):
    return config["routing"]["pairs"]["closed_vs_candidates_f1"]


def test_study_b_config_validates_with_the_uncertainty_family(config):
    validated = validate_config(copy.deepcopy(config))
    assert "uncertainty" in pair(validated)["features"] and pair(validated)["f1_threshold"] == 0.5


@pytest.mark.parametrize("change, message", [
    (lambda c: pair(c).update(alternative="nope"),
     r"routing.pairs.closed_vs_candidates_f1.alternative = 'nope' names no arm \(a pair with base closed_book needs a retrieval arm"),
    (lambda c: pair(c).update(measure="Success@5"),
     r"routing.pairs.closed_vs_candidates_f1.measure = 'Success@5' is not an answer scorer; .* \['contains', 'em', 'f1'\]"),
    (lambda c: pair(c).update(features=["base_arm"]),
     r"routing.pairs.closed_vs_candidates_f1.features: 'base_arm' reads the base arm's run, but closed_book retrieves nothing"),
    (lambda c: pair(c).update(f1_threshold=0),
     r"routing.pairs.closed_vs_candidates_f1.f1_threshold = 0 is not allowed; expected a number > 0"),
    (lambda c: c["budgets"].update(grid=[0.5, 1.0]),
     r"budgets.grid.1 = 1.0 is not allowed; expected a number < 1"),
    (lambda c: c["budgets"].update(grid=[0.0]),
     r"budgets.grid.0 = 0.0 is not allowed; expected a number > 0"),
])
def test_bad_study_b_settings_name_the_key(config, change, message):
    change(config)
    with pytest.raises(InputError, match=message):
        validate_config(config)


def test_a_router_whose_feature_stage_is_not_configured_names_the_stage(config):
    pair(config)["features"] = ["query_only", "retrieval_score"]
    with pytest.raises(InputError, match=r"routing.routers.entropy: reads a 'uncertainty' feature from the "
                                         r"closed-book generation stage, which pairs \['closed_vs_candidates_f1'\] do not"):
        validate_config(config)
    pair(config)["features"] = ["query_only", "uncertainty"]
    with pytest.raises(InputError, match=r"routing.routers.bm25_top: reads a 'retrieval_score' feature from the "
                                         r"BM25 probe stage"):
        validate_config(config)


def test_uncertainty_on_a_study_a_pair_names_the_missing_closed_book_stage(project_root, monkeypatch):
    monkeypatch.chdir(project_root)
    config = yaml.safe_load((project_root / "config.yaml").read_text())
    config["routing"]["pairs"]["keep_vs_hybrid"]["features"] = ["base_arm", "uncertainty"]
    with pytest.raises(InputError, match=r"'uncertainty' needs the closed-book answers \(generate_answers for policy "
                                         r"closed_book\), which only a pair with base closed_book"):
        validate_config(config)


def test_the_probe_needs_a_bm25_first_stage_in_the_retrieval_arms_scope(config):
    config["arms"]["bm25_candidates"]["scope"] = "global"
    config["arms"]["dense"] = {"first_stage": "dense", "candidates": 5, "keep": 5, "scope": "group"}
    pair(config)["alternative"] = "dense"
    with pytest.raises(InputError, match=r"'retrieval_score' needs the BM25 probe, a BM25 first stage in scope 'group'"):
        validate_config(config)
