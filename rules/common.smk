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
    scope="global|group",
    arm="[A-Za-z0-9][A-Za-z0-9_-]*",
    reranker="[A-Za-z0-9][A-Za-z0-9_-]*",
    pair="[A-Za-z0-9][A-Za-z0-9_-]*",
    policy="[A-Za-z0-9][A-Za-z0-9_-]*",


def dataset_files(wildcards):
    """The raw files of one dataset (its format's file keys), so editing a source file reruns ingest."""
    from workflow_scripts.adapters.registry import adapter_for

    spec = config["datasets"][wildcards.dataset]
    return {key: spec[key] for key in adapter_for(wildcards.dataset, spec["format"])[1]}


def final_targets():
    """Everything `snakemake` builds by default for the configured datasets."""
    targets = expand(
        "results/{dataset}/{table}",
        dataset=DATASETS,
        table=["units.parquet", "questions.parquet", "qrels.parquet", "splits.parquet", "ingest_report.json"],
    )
    for dataset in DATASETS:
        arms = arms_for(dataset)
        targets += expand("results/{dataset}/runs/{arm}.trec", dataset=dataset, arm=arms)
        if arms:
            targets.append(f"results/{dataset}/metrics/summary.md")
        targets += routing_targets(dataset)
        targets += answer_targets(dataset)
    return targets


def arms_for(dataset):
    """Arm name → arm config of the arms that run on `dataset`."""
    return {
        name: arm
        for name, arm in config["arms"].items()
        if dataset in arm.get("datasets", DATASETS)
    }


def first_stage_depth(dataset, method, scope):
    """How deep the shared first-stage ranking (method, scope) must go: the deepest any arm reads it."""
    from workflow_scripts.arms import first_stage_depth as depth_of, first_stages

    return max(
        depth_of(arm)
        for arm in arms_for(dataset).values()
        if arm["scope"] == scope and method in first_stages(arm)
    )


def first_stage_files(dataset, arm):
    from workflow_scripts.arms import first_stages

    return {
        method: f"results/{dataset}/first_stage/{method}_{arm['scope']}.parquet"
        for method in first_stages(arm)
    }


def dense_search_inputs(wildcards):
    inputs = {
        "vectors": f"results/{wildcards.dataset}/dense/unit_vectors.parquet",
        "questions": f"results/{wildcards.dataset}/questions.parquet",
        "units": f"results/{wildcards.dataset}/units.parquet",
    }
    if wildcards.scope == "global":
        inputs["index"] = f"results/{wildcards.dataset}/index/dense.faiss"
    return inputs


def arms_reranked_by(dataset, reranker):
    return {
        name: arm for name, arm in arms_for(dataset).items() if arm.get("rerank") == reranker
    }


def rerank_inputs(wildcards):
    """The first-stage rankings of every arm reranked by this reranker, plus the texts to score."""
    inputs = {
        "units": f"results/{wildcards.dataset}/units.parquet",
        "questions": f"results/{wildcards.dataset}/questions.parquet",
    }
    for arm in arms_reranked_by(wildcards.dataset, wildcards.reranker).values():
        for method, path in first_stage_files(wildcards.dataset, arm).items():
            inputs[f"{method}_{arm['scope']}"] = path
    return inputs


def arm_inputs(wildcards):
    arm = config["arms"][wildcards.arm]
    inputs = first_stage_files(wildcards.dataset, arm)
    if arm.get("rerank"):
        inputs["rerank"] = f"results/{wildcards.dataset}/rerank/{arm['rerank']}.parquet"
    return inputs


ROUTERS = sorted(config["routing"]["routers"])


def route_pair(wildcards):
    return config["routing"]["pairs"][wildcards.pair]


def route_feature_inputs(wildcards):
    """What the pair's feature families read: the base arm's run and dense ranking, questions, the BM25 probe."""
    pair = route_pair(wildcards)
    scope = config["arms"][pair["base"]]["scope"]
    base = f"results/{wildcards.dataset}"
    inputs = {"labels": f"{base}/routing/{wildcards.pair}/labels.parquet", "questions": f"{base}/questions.parquet"}
    if "base_arm" in pair["features"]:
        inputs |= {
            "base_run": f"{base}/runs/{pair['base']}.parquet",
            "dense": f"{base}/first_stage/dense_{scope}.parquet",
            "units": f"{base}/units.parquet",
        }
    if "retrieval_score" in pair["features"]:
        inputs["probe"] = f"{base}/first_stage/bm25_{scope}.parquet"
    return inputs


def routing_targets(dataset):
    pairs = [
        name
        for name, pair in config["routing"]["pairs"].items()
        if {pair["base"], pair["alternative"]} <= set(arms_for(dataset))
    ]
    return expand(
        "results/{dataset}/routing/{pair}/{table}",
        dataset=dataset,
        pair=pairs,
        table=["policies.csv", "comparisons.csv", "frontiers.parquet", "audit.parquet"],
    )


POLICIES = config["generation"]["policies"]


def answer_inputs(wildcards):
    """Questions, splits and units, plus the arm's run for a retrieval policy (closed_book reads none)."""
    base = f"results/{wildcards.dataset}"
    inputs = {
        "questions": f"{base}/questions.parquet",
        "splits": f"{base}/splits.parquet",
        "units": f"{base}/units.parquet",
    }
    if wildcards.policy != "closed_book":
        inputs["run"] = f"{base}/runs/{wildcards.policy}.parquet"
    return inputs


def answer_targets(dataset):
    if not POLICIES or not set(POLICIES) - {"closed_book"} <= set(arms_for(dataset)):
        return []
    return [f"results/{dataset}/answers/summary.csv", f"results/{dataset}/answers/comparisons.csv"]
