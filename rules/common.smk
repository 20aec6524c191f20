# Config validation (before any job), the wildcards, and the few helpers every stage file uses. Each stage's own
# input functions sit in rules/inputs/<stage>.smk, included just before its rules. A path is written once, in the
# `output:` of the rule that makes it, and read elsewhere as `rules.<rule>.output.<key>` (in a rule) or
# `output_of("<rule>", "<key>", ...)` (in a function).
import sys

from workflow_scripts.config.validate import validate_config
from workflow_scripts.core.errors import InputError
from workflow_scripts.core import vocabulary
from workflow_scripts.core.vocabulary import is_retrieval_pair

try:
    validate_config(config)
except InputError as error:
    sys.exit(f"ragfrontier: ERROR: {error}")

DATASETS = sorted(config["datasets"])
POLICIES = config["generation"]["policies"]
ROUTERS = sorted(config["routing"]["routers"])
LLM_CACHE = "results/cache/llm"
MODEL_CACHE = "results/cache/models"
EMBEDDING_CACHE = "results/cache/embeddings"
RERANK_CACHE = "results/cache/rerank"


def remove_partial_files():
    """Delete what writes interrupted by a killed run left behind under results/ (the atomic writers' hidden
    partial files and folders, outside the shared caches); the jobs that own them are rerun. Runs once before any
    job (the Snakefile's onstart)."""
    from workflow_scripts.core.atomic import remove_partials

    remove_partials("results")


wildcard_constraints:
    dataset="|".join(DATASETS),
    scope="|".join(vocabulary.SCOPES),
    arm="[A-Za-z0-9][A-Za-z0-9_-]*",
    reranker="[A-Za-z0-9][A-Za-z0-9_-]*",
    pair="[A-Za-z0-9][A-Za-z0-9_-]*",
    policy="[A-Za-z0-9][A-Za-z0-9_-]*",


def output_of(rule, key, **wildcards):
    """The path rule `rule` writes under output `key`, with `wildcards` filled in (the one place paths are
    spelled is the rules' `output:`)."""
    return str(getattr(getattr(rules, rule).output, key)).format(**wildcards)


def benchmark_of(rule, **wildcards):
    """The file Snakemake writes a job's measured time and memory to (the rule's `benchmark:`)."""
    return str(getattr(rules, rule).benchmark).format(**wildcards)


def subset(block, keys):
    """The entries of a config block a job reads (a rule's params get only these, so editing any other key of
    the block does not rerun it)."""
    return {key: block[key] for key in keys if key in block}


def prompt_overrides(templates):
    """The `prompts` overrides of the templates a job renders (all of them default when not overridden)."""
    return subset(config["prompts"], templates)


def llm_env(role):
    """The conda env for models.<role>'s rules: vLLM's GPU env when that model runs on vllm with CUDA, else the CPU
    env (vllm on CPU starts its engine in the Python named by models.<role>.vllm.python, envs/vllm-cpu.yaml)."""
    model = config["models"][role]
    return "../envs/gpu.yaml" if model["backend"] == "vllm" and model["device"] == "cuda" else "../envs/cpu.yaml"


def arms_for(dataset):
    """Arm name → arm config of the arms that run on `dataset`."""
    return {name: arm for name, arm in config["arms"].items() if dataset in arm.get("datasets", DATASETS)}


def final_targets():
    """Everything `snakemake` builds by default for the configured datasets."""
    targets = []
    for dataset in DATASETS:
        targets += ingest_targets(dataset)  # rules/ingest.smk
        targets += retrieval_targets(dataset)  # rules/retrieve.smk
        targets += routing_targets(dataset)  # rules/route.smk
        targets += answer_targets(dataset)  # rules/answer.smk
        targets += review_targets(dataset)  # rules/review.smk
        targets += report_targets(dataset)  # rules/report.smk
        targets += study_c_targets(dataset)  # rules/study_c.smk
    return targets + [output_of("summary", "summary")]
