"""The full-size study recipes in experiments/ and the tiny stand-ins that replace their data in tests.

The recipes read data a user downloads (data/arxiv/, data/qasper/, data/hotpotqa/, ...), which neither the checkout
nor ../shared/data holds. tests/data/full_recipes/ has a few invented records per dataset in each source format
(written for these tests; nothing is copied from the real datasets). `stand_in_overrides(name)` is the config layer
that points each dataset path of a recipe at its stand-in and changes nothing else: no model name is overridden,
because config validation never loads a model (a model that is not available offline stops only the job that
loads it).
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from conftest import PROJECT_ROOT

STAND_INS = PROJECT_ROOT / "tests" / "data" / "full_recipes"
STUDY_B_GENERATORS = {  # recipe → (generator, dataset-name suffix)
    "study_b_full": ("Qwen/Qwen2.5-1.5B-Instruct", "qwen25"),
    "study_b_full_smollm2": ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "smollm2"),
    "study_b_full_granite": ("ibm-granite/granite-3.1-2b-instruct", "granite31"),
}
# recipe → dataset name → stand-in file for its `path`
FULL_RECIPES: dict[str, dict[str, str]] = {
    "study_a_qasper": {"qasper_dev": "qasper-dev-v0.3.json", "qasper_test": "qasper-test-v0.3.json"},
    "study_c_full": {"arxiv_2024_2025": "arxiv-metadata-2024-2025.jsonl"},
    "study_b_multistep_gpu": {f"{dataset}_adarague": "ircot_test_subsampled.jsonl"
                              for dataset in ("hotpotqa", "twowiki", "musique")},
    **{
        recipe: {f"hotpotqa_{suffix}": "hotpot_dev_distractor_v1.json", f"twowiki_{suffix}": "2wikimultihopqa_dev.json",
                 f"musique_{suffix}": "musique_ans_v1.0_dev.jsonl"}
        for recipe, (_, suffix) in STUDY_B_GENERATORS.items()
    },
}


def recipe(name: str) -> dict:
    """experiments/<name>.yaml as written."""
    return yaml.safe_load((PROJECT_ROOT / "experiments" / f"{name}.yaml").read_text())


def stand_in_overrides(name: str) -> dict:
    """The config layer (for a second --configfile) that points every dataset of recipe `name` at its stand-in."""
    return {"datasets": {dataset: {"path": str(STAND_INS / file)} for dataset, file in FULL_RECIPES[name].items()}}


def with_stand_ins(name: str) -> dict:
    """Recipe `name` with its dataset paths on the stand-ins (what Snakemake merges from the two config files)."""
    config = copy.deepcopy(recipe(name))
    for dataset, file in FULL_RECIPES[name].items():
        config["datasets"][dataset]["path"] = str(STAND_INS / file)
    return config


def stand_in_files() -> list[Path]:
    return sorted({STAND_INS / file for datasets in FULL_RECIPES.values() for file in datasets.values()})
