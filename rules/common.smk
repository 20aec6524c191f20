# Config validation (before any job) and the path helpers every rule file uses.
import sys

from workflow_scripts.config_check import validate_config
from workflow_scripts.errors import InputError

try:
    validate_config(config)
except InputError as error:
    sys.exit(f"ragfrontier: ERROR: {error}")

DATASETS = sorted(config["datasets"])


wildcard_constraints:
    dataset="|".join(DATASETS),


def dataset_files(wildcards):
    """The raw files of one dataset (its format's file keys), so editing a source file reruns ingest."""
    from workflow_scripts.adapters.registry import adapter_for

    spec = config["datasets"][wildcards.dataset]
    return {key: spec[key] for key in adapter_for(wildcards.dataset, spec["format"])[1]}


def final_targets():
    """Everything `snakemake` builds by default for the configured datasets."""
    return expand(
        "results/{dataset}/{table}",
        dataset=DATASETS,
        table=["units.parquet", "questions.parquet", "qrels.parquet", "splits.parquet", "ingest_report.json"],
    )
