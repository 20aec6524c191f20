# Config validation (before any job), the wildcards, and the few helpers every stage file uses. Each stage's own
# input functions sit in rules/inputs/<stage>.smk, included just before its rules. A path is written once, in the
# `output:` of the rule that makes it, and read elsewhere as `rules.<rule>.output.<key>` (in a rule) or
# `output_of("<rule>", "<key>", ...)` (in a function).
import os
import sys

from snakemake.logging import logger

from workflow_scripts.config.validate import environment_warnings, validate_config
from workflow_scripts.core.errors import InputError
from workflow_scripts.core import vocabulary
from workflow_scripts.core.vocabulary import is_closed_book_pair
from workflow_scripts.core import contracts
from workflow_scripts.core.shards import GATHER_RULE_SUFFIX, InOrderOf, shard_names

try:
    validate_config(config)
except InputError as error:
    sys.exit(f"ragfrontier: ERROR: {error}")
for warning in environment_warnings(config):
    logger.warning(f"ragfrontier: WARNING: {warning}")

DATASETS = sorted(config["datasets"])
POLICIES = config["generation"]["policies"]
SYSTEMS = config["systems"]  # imported systems (rules/systems.smk): each a policy and an arm of its dataset
ROUTERS = sorted(config["routing"]["routers"])
LLM_CACHE = "results/cache/llm"
MODEL_CACHE = "results/cache/models"
EMBEDDING_CACHE = "results/cache/embeddings"
RERANK_CACHE = "results/cache/rerank"
# Threads of a job that runs a model, an LLM or FAISS (Snakemake lowers it to --cores; the SLURM profile asks for
# that many CPUs per task). Torch, OpenMP and BLAS get it through jobs/runtime.limit_threads.
MODEL_THREADS = 2


def remove_partial_files():
    """Delete what writes interrupted by a killed run left behind under results/ (the atomic writers' hidden
    partial files and folders, outside the shared caches); the jobs that own them are rerun. Runs once before any
    job (the Snakefile's onstart)."""
    from workflow_scripts.core.atomic import remove_partials

    remove_partials("results")


def record_run_provenance():
    """Write which commit and config this invocation runs, and how many jobs, to results/logs/runs/ (the Snakefile's
    onstart; a dry run writes nothing): workflow_scripts/core/provenance.py."""
    from datetime import datetime, timezone

    import snakemake
    from workflow_scripts.core.provenance import run_record, write_run_record

    jobs = len(list(workflow.dag.needrun_jobs()))
    record = run_record(
        workflow.basedir, config, workflow.configfiles, jobs, datetime.now(timezone.utc), snakemake.__version__
    )
    write_run_record(record)


def start_model_servers():
    """One vLLM server for each `serve: true` LLM block (a generator or judge) that a job about to run uses, shared
    by all its jobs (workflow_scripts/llm/server.py); stopped by stop_model_servers. Runs in the Snakefile's onstart,
    so a dry run or a run without LLM work starts none."""
    from workflow_scripts.llm.server import refuse_remote_jobs, start_run_servers

    blocks = {}
    for job in workflow.dag.needrun_jobs():
        for name in ("generator", "judge"):
            block = getattr(job.params, name, None)
            if isinstance(block, dict) and block.get("serve"):
                blocks[f"models.{name}"] = block
    refuse_remote_jobs(blocks, workflow.local_exec)
    if blocks:
        urls = start_run_servers(blocks, MODEL_CACHE, "results/logs/servers")
        logger.info(
            f"ragfrontier: one vLLM server for the run's LLM jobs ({', '.join(sorted(blocks))}): {', '.join(urls)}"
        )


def stop_model_servers():
    """Stop what start_model_servers started (onsuccess / onerror; a killed run: the servers' watchdog)."""
    from workflow_scripts.llm.server import stop_run_servers

    stop_run_servers()


wildcard_constraints:
    dataset="|".join(DATASETS),
    scope="|".join(vocabulary.SCOPES),
    arm="[A-Za-z0-9][A-Za-z0-9_-]*",
    reranker="[A-Za-z0-9][A-Za-z0-9_-]*",
    pair="[A-Za-z0-9][A-Za-z0-9_-]*",
    policy="[A-Za-z0-9][A-Za-z0-9_-]*",
    system="[A-Za-z0-9][A-Za-z0-9_-]*",
    shard=r"\d+-of-\d+",


def output_of(rule, key, **wildcards):
    """The path rule `rule` writes under output `key`, with `wildcards` filled in (the one place paths are
    spelled is the rules' `output:`); for a sharded stage, the path its gather writes (`unsharded`)."""
    return unsharded(getattr(getattr(rules, rule).output, key)).format(**wildcards)


def benchmark_of(rule, **wildcards):
    """The file Snakemake writes a job's measured time and memory to (the rule's `benchmark:`)."""
    return str(getattr(rules, rule).benchmark).format(**wildcards)


def benchmarks_of(stage, **wildcards):
    """Every benchmark file of one instance of `stage`: its job's, or its shards' and then its gather's."""
    if shard_count(stage) == 1:
        return [benchmark_of(stage, **wildcards)]
    shards = [benchmark_of(stage, shard=shard, **wildcards) for shard in shard_names(shard_count(stage))]
    return shards + [benchmark_of(stage + GATHER_RULE_SUFFIX, **wildcards)]


# --- Scale-out (config `shards`, core/shards.py): a sharded stage's rule runs one job per shard (wildcard
# `shard`), each writing its files under `<path>.shards/`; rules/gather.smk then defines `<stage>_gather`, which
# joins them at the paths the unsharded job writes. Other rules read those paths: `output_of(...)` in functions,
# `unsharded(rules.<stage>.output.<key>)` in a rule. Cluster profiles keep keying resources by the stage's rule.


def shard_count(stage):
    """How many jobs config `shards` splits `stage` into (1: one job, today's DAG)."""
    return config["shards"].get(stage, 1)


GATHERED = {}  # stage → {output path: the contract its gather joins the shards through}, filled by `sharded`


def sharded(stage, path, table=None):
    """Where a job of `stage` writes `path` (an output, log or benchmark): `path` itself, or, sharded, the file
    `<path without suffix>.shards/{shard}<suffix>` of each shard. `table`: an output table's contract, whose row
    order its gather restores, or `InOrderOf(contract, input, column)` for rows in an input table's order."""
    if table is not None:
        GATHERED.setdefault(stage, {})[path] = table
    if shard_count(stage) == 1:
        return path
    stem, suffix = os.path.splitext(path)
    return f"{stem}.shards/{{shard}}{suffix}"


def unsharded(path):
    """The inverse of `sharded`: a shard's file pattern → the stage's own path."""
    return str(path).replace(".shards/{shard}", "")


def gathered_tables(stage):
    """Output key → contract (or InOrderOf) of each table `<stage>_gather` joins (workflow_scripts/jobs/gather.py)."""
    tables = GATHERED.get(stage, {})
    outputs = getattr(rules, stage).output.items()
    return {key: tables[unsharded(path)] for key, path in outputs if unsharded(path) in tables}


def gather_script(stage):
    """The job module of `<stage>_gather`: `<stage>_gather.py` beside the stage's own job module when the stage's
    gather does more than join tables, else the generic gather job."""
    own = os.path.join(os.path.dirname(str(getattr(rules, stage).rule.script)), f"{stage}{GATHER_RULE_SUFFIX}.py")
    return own if os.path.exists(os.path.join(workflow.basedir, "rules", own)) else "../workflow_scripts/jobs/gather.py"


def gather_inputs(stage):
    """The input function of `<stage>_gather`: every shard's outputs (named `<key>__<i>`) and the input tables
    whose order an output follows."""
    work = getattr(rules, stage)
    names = shard_names(shard_count(stage))
    outputs = dict(work.output.items())
    references = {
        spec.input: work.input[spec.input] for spec in gathered_tables(stage).values() if isinstance(spec, InOrderOf)
    }

    def shard_inputs(wildcards):
        paths = {
            f"{key}__{i}": expand(path, shard=shard, **wildcards)[0]
            for key, path in outputs.items()
            for i, shard in enumerate(names)
        }
        return paths | {key: expand(path, **wildcards)[0] for key, path in references.items()}

    return shard_inputs


def cost_source(stage, kind, component, outputs, **wildcards):
    """A stage instance the cost ledger prices (workflow_scripts/cost/ledger.py), as the stage's inputs file declares
    it: its kind (vocabulary.COST_KINDS: how its rows are priced), the stage (its rule's name) and component it is
    recorded under, the output tables the ledger reads (`outputs`: output key → the table's contract, which the
    job reads it through) and its benchmark files (a sharded stage's shards and gather)."""
    return {
        "stage": stage,
        "kind": kind,
        "component": component,
        "tables": [output_of(stage, key, **wildcards) for key in outputs],
        "contracts": list(outputs.values()),
        "benchmarks": benchmarks_of(stage, **wildcards),
    }


# The ledger's name of each stage a routing policy consists of (workflow_scripts/cost/pricing.py prices a policy
# from these entries of the ledger): a first-stage search per method, reranking, an arm's run, a pair's features
# and a policy's answers.
PRICED_STAGES = {
    "first_stage": {"bm25": "retrieve_bm25", "dense": "retrieve_dense", "run": "import_run"},
    "rerank": "rerank",
    "arm": "run_arm",
    "features": "route_features",
    "answers": "generate_answers",
}


def subset(block, keys):
    """The entries of a config block a job reads (a rule's params get only these, so editing any other key of
    the block does not rerun it)."""
    return {key: block[key] for key in keys if key in block}


def prompt_overrides(templates):
    """The `prompts` overrides of the templates a job renders (all of them default when not overridden)."""
    return subset(config["prompts"], templates)


def llm_block(role):
    """models.<role> as its LLM jobs read it: without its prices (those go to the cost ledger only)."""
    from workflow_scripts.llm.settings import engine_spec

    return engine_spec(config["models"][role])


def llm_env(role):
    """The conda env for models.<role>'s rules: vLLM's GPU env when that model runs on vllm with CUDA, else the CPU
    env (vllm on CPU starts its engine in the Python named by models.<role>.vllm.python, envs/vllm-cpu.yaml)."""
    model = config["models"][role]
    return "../envs/gpu.yaml" if model["backend"] == "vllm" and model["device"] == "cuda" else "../envs/cpu.yaml"


def arms_for(dataset):
    """Arm name → arm config of the arms that run on `dataset`."""
    return {name: arm for name, arm in config["arms"].items() if dataset in arm.get("datasets", DATASETS)}


def policies_for(dataset):
    """The policies `dataset` can answer with besides closed_book: its arms and its imported systems."""
    return set(arms_for(dataset)) | {name for name, system in SYSTEMS.items() if system["dataset"] == dataset}


def answers_of(dataset, policy):
    """A policy's answers: generated (generate_answers), or an imported system's (import_system)."""
    if policy in SYSTEMS:
        return output_of("import_system", "answers", dataset=dataset, system=policy)
    return output_of("generate_answers", "answers", dataset=dataset, policy=policy)


def run_of(dataset, arm):
    """An arm's run: its retrieval (run_arm), or an imported system's contexts (import_system)."""
    if arm in SYSTEMS:
        return output_of("import_system", "run", dataset=dataset, system=arm)
    return output_of("run_arm", "run", dataset=dataset, arm=arm)


def is_system_pair(pair):
    """A routing pair between two imported systems: its labels come from their answers, like Study B's."""
    return {pair["base"], pair["alternative"]} <= set(SYSTEMS)


def final_targets():
    """Everything `snakemake` builds by default for the configured datasets."""
    targets = []
    for dataset in DATASETS:
        targets += ingest_targets(dataset)  # rules/ingest.smk
        targets += system_targets(dataset)  # rules/systems.smk
        targets += retrieval_targets(dataset)  # rules/retrieve.smk
        targets += routing_targets(dataset)  # rules/route.smk
        targets += answer_targets(dataset)  # rules/answer.smk
        targets += review_targets(dataset)  # rules/review.smk
        targets += multistep_targets(dataset)  # rules/multistep.smk
        targets += report_targets(dataset)  # rules/report.smk
        targets += study_c_targets(dataset)  # rules/study_c.smk
    return targets + [output_of("summary", "summary")]
