"""Config validation: a wrong key, type or value stops the run with one message naming key, value and what is allowed."""

import copy

import pytest
import yaml

from workflow_scripts.config.validate import validate_config
from workflow_scripts.core.errors import InputError


@pytest.fixture()
def config(project_root, monkeypatch):
    monkeypatch.chdir(project_root)
    return yaml.safe_load((project_root / "config.yaml").read_text())


def test_default_config_is_valid_and_defaults_are_filled(config):
    del config["splits"]
    validated = validate_config(copy.deepcopy(config))
    assert validated["splits"] == {"fractions": {"dev": 0.5, "calibration": 0.25, "heldout": 0.25}, "seed": 13}


def test_unknown_top_level_key(config):
    config["datsets"] = {}
    with pytest.raises(InputError, match=r"\(top level\): unknown key\(s\) \['datsets'\]; allowed keys: \['arms', 'budgets', ") as error:
        validate_config(config)
    assert "'datasets'" in str(error.value).split("allowed keys:")[1]


def test_unknown_format_names_dataset_key_and_allowed_values(config):
    config["datasets"]["demo"]["format"] = "qaspr"
    with pytest.raises(InputError, match=r"datasets.demo.format = 'qaspr' is not allowed; expected one of \['qasper', "):
        validate_config(config)


def test_wrong_type(config):
    config["splits"]["seed"] = "thirteen"
    with pytest.raises(InputError, match=r"splits.seed = 'thirteen' is not allowed; expected a value of type integer"):
        validate_config(config)


def test_format_specific_keys(config):
    config["datasets"]["demo"]["corpus"] = "x.jsonl"
    with pytest.raises(InputError, match=r"datasets.demo: unknown key\(s\) \['corpus'\]; allowed keys: \['format', 'path'\]"):
        validate_config(config)


def test_missing_required_key(config):
    config["datasets"]["sf"] = {"format": "beir", "corpus": "c.jsonl", "queries": "q.jsonl"}
    with pytest.raises(InputError, match=r"datasets.sf: 'qrels' is a required property"):
        validate_config(config)


def test_fraction_out_of_range_and_bad_sum(config):
    config["splits"]["fractions"]["dev"] = 1.5
    with pytest.raises(InputError, match=r"splits.fractions.dev = 1.5 is not allowed; expected a number <= 1"):
        validate_config(copy.deepcopy(config))
    config["splits"]["fractions"]["dev"] = 0.6
    with pytest.raises(InputError, match=r"splits.fractions: .* must name only .* and sum to 1 \(sums to 1.1"):
        validate_config(config)


def test_missing_file_names_the_dataset_key(config):
    config["datasets"]["demo"]["path"] = "data/demo/nope.json"
    with pytest.raises(InputError, match=r"datasets.demo.path: file 'data/demo/nope.json' does not exist"):
        validate_config(config)


def test_bad_dataset_name(config):
    config["datasets"]["my data"] = config["datasets"]["demo"]
    with pytest.raises(InputError, match=r"datasets"):
        validate_config(config)


def test_every_problem_reported_at_once(config):
    config["splits"]["seed"] = 1.5
    config["datasets"]["demo"]["format"] = "nope"
    with pytest.raises(InputError) as caught:
        validate_config(config)
    assert "splits.seed" in str(caught.value) and "datasets.demo.format" in str(caught.value)


def test_arm_consistency_checks(config):
    config["models"] = {"rerankers": {"ce": {"kind": "cross_encoder", "model": "some/model"}}}
    config["arms"] = {
        "wide": {"first_stage": "dense", "candidates": 5, "keep": 10, "scope": "group"},
        "fused": {"first_stage": "hybrid", "candidates": 50, "keep": 10, "scope": "group", "fusion_depth": 20},
        "ranked": {"first_stage": "bm25", "candidates": 30, "keep": 10, "scope": "global", "rerank": "cross"},
        "elsewhere": {"first_stage": "bm25", "candidates": 3, "keep": 3, "scope": "global", "datasets": ["nope"]},
    }
    with pytest.raises(InputError) as caught:
        validate_config(config)
    message = str(caught.value)
    assert "arms.wide.keep = 10 is larger than candidates = 5" in message
    assert "arms.fused.fusion_depth = 20 is smaller than candidates = 50" in message
    assert "arms.ranked.rerank = 'cross' names no models.rerankers entry; defined: ['ce']" in message
    assert "arms.elsewhere.datasets: ['nope'] are not configured datasets" in message


def test_unknown_arm_stage_value(config):
    config["arms"] = {"a": {"first_stage": "splade", "candidates": 5, "keep": 5, "scope": "group"}}
    with pytest.raises(InputError, match=r"arms.a.first_stage = 'splade' is not allowed; expected one of \['bm25', 'dense', 'hybrid', 'run'\]"):
        validate_config(config)


def test_fusion_depth_default_follows_candidates(config):
    """Issue 18: a hybrid arm without fusion_depth fuses at max(100, candidates); with candidates 1000 the run is
    valid (the old constant default 100 stopped it with an error about a value the user never wrote)."""
    config["arms"].update({
        "deep": {"first_stage": "hybrid", "candidates": 1000, "keep": 10, "scope": "global"},
        "shallow": {"first_stage": "hybrid", "candidates": 8, "keep": 5, "scope": "group"},
        "set": {"first_stage": "hybrid", "candidates": 8, "keep": 5, "scope": "group", "fusion_depth": 30},
    })
    arms = validate_config(config)["arms"]
    assert {name: arms[name]["fusion_depth"] for name in ("deep", "shallow", "set")} == {"deep": 1000, "shallow": 100, "set": 30}


def test_fusion_depth_below_candidates_says_how_to_fix(config):
    config["arms"]["fused"] = {"first_stage": "hybrid", "candidates": 50, "keep": 10, "scope": "group", "fusion_depth": 20}
    with pytest.raises(InputError, match=r"set fusion_depth >= 50 or leave it out \(default max\(100, candidates\)\)"):
        validate_config(config)


def test_llm_prices_are_checked_and_share_one_currency(config):
    config["models"]["generator"]["prices"] = {"input_per_mtok": 0.15, "output_per_mtok": 0.6, "currency": "usd"}
    with pytest.raises(InputError, match=r"models.generator.prices.currency = 'usd' is not allowed; expected a string matching"):
        validate_config(copy.deepcopy(config))
    config["models"]["generator"]["prices"]["currency"] = "USD"
    config["models"]["judge"]["prices"] = {"input_per_mtok": 1.0, "output_per_mtok": 2.0, "currency": "EUR"}
    with pytest.raises(InputError, match=r"models.generator.prices.currency = USD and models.judge.prices.currency = "
                                         r"EUR: the cost tables add the money of every priced model; price them in one currency"):
        validate_config(copy.deepcopy(config))
    config["models"]["judge"]["prices"]["currency"] = "USD"
    validate_config(config)


def test_a_vllm_block_without_vllm_is_said_when_the_config_is_read(config, monkeypatch, tmp_path):
    """models.generator.backend: vllm where no interpreter has vLLM: a warning naming the key and `./setup.sh --vllm`
    (the job would fail later with the same words); none for transformers or a named vllm.python."""
    import importlib.util

    from workflow_scripts.config.validate import environment_warnings
    from workflow_scripts.llm.backends import vllm

    monkeypatch.setattr(vllm, "VLLM_ENV", tmp_path / ".venv-vllm")  # not built
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "vllm" else real_find_spec(name, *rest))
    validate_config(config)
    assert environment_warnings(config) == []  # the demo's models run on transformers
    config["models"]["generator"] = {"backend": "vllm", "model": "HuggingFaceTB/SmolLM2-135M-Instruct"}
    validate_config(config)
    (warning,) = environment_warnings(config)
    assert warning.startswith("backend 'vllm' needs vLLM") and "./setup.sh --vllm" in warning
    assert "models.generator.vllm.python" in warning


def test_a_flare_policy_runs_its_threshold_grid_as_one_policy_per_threshold(config):
    config["multistep"] = {"policies": {"flare": {"strategy": "flare", "arm": "bm25", "thresholds": [0.4, 0.125]},
                                        "chain": {"strategy": "ircot", "arm": "bm25"}}}
    policies = validate_config(copy.deepcopy(config))["multistep"]["policies"]
    assert list(policies) == ["flare_t40", "flare_t12p5", "chain"]
    assert policies["flare_t12p5"]["threshold"] == 0.125 and "thresholds" not in policies["flare_t40"]
    validate_config(copy.deepcopy(config) | {"multistep": {"policies": policies}})  # an expanded config validates
    for policy, message in (({"strategy": "ircot", "threshold": 0.5}, r"chain.threshold: only a \['flare'\] policy"),
                            ({"strategy": "flare"}, r"chain: strategy 'flare' needs thresholds"),
                            ({"strategy": "flare", "thresholds": [1.5]}, r"chain.thresholds.0")):
        config["multistep"] = {"policies": {"chain": {"arm": "bm25", **policy}}}
        with pytest.raises(InputError, match=message):
            validate_config(copy.deepcopy(config))


def test_a_multistep_policy_names_a_bm25_arm_a_known_strategy_and_k_at_least_one(config):
    config["multistep"] = {"policies": {"chain": {"strategy": "ircot", "arm": "keep"}}}
    with pytest.raises(InputError, match=r"multistep.policies.chain.arm = 'keep' is not a bm25 arm without a reranker"):
        validate_config(copy.deepcopy(config))
    config["multistep"] = {"policies": {"chain": {"strategy": "ircot", "arm": "nope"}}}
    with pytest.raises(InputError, match=r"multistep.policies.chain.arm = 'nope' names no arms entry"):
        validate_config(copy.deepcopy(config))
    config["multistep"] = {"policies": {"chain": {"strategy": "flair", "arm": "bm25", "k": 0}}}
    with pytest.raises(InputError) as raised:
        validate_config(copy.deepcopy(config))
    assert "multistep.policies.chain.strategy" in str(raised.value) and "multistep.policies.chain.k" in str(raised.value)
    config["multistep"] = {"policies": {"chain": {"strategy": "ircot", "arm": "bm25", "per_step": 4, "total": 2}}}
    with pytest.raises(InputError, match="total = 2 is smaller than per_step = 4"):
        validate_config(copy.deepcopy(config))
    config["multistep"] = {"policies": {}, "stop_routers": ["oracle"], "ridge_alphas": [0]}
    with pytest.raises(InputError) as raised:
        validate_config(copy.deepcopy(config))
    assert "multistep.stop_routers" in str(raised.value) and "multistep.ridge_alphas" in str(raised.value)
