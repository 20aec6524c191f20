# Config validation (before any job) and the path helpers every rule file uses.
import sys

from workflow_scripts.config_check import validate_config
from workflow_scripts.errors import InputError

try:
    validate_config(config)
except InputError as error:
    sys.exit(f"ragfrontier: ERROR: {error}")

DATASETS = sorted(config["datasets"])


def remove_partial_files():
    """Delete what writes interrupted by a killed run left behind: the hidden `*.partial` files and folders of
    the atomic writers under results/ (outside the shared caches). They are never read; the jobs that own them
    are rerun. Runs once before any job (the Snakefile's onstart)."""
    import shutil
    from pathlib import Path

    tops = [top for top in Path("results").glob("*") if top.is_dir() and not top.is_symlink() and top.name != "cache"]
    for path in [path for top in tops for path in top.rglob(".*.partial")]:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


wildcard_constraints:
    dataset="|".join(DATASETS),
    scope="global|group",
    arm="[A-Za-z0-9][A-Za-z0-9_-]*",
    reranker="[A-Za-z0-9][A-Za-z0-9_-]*",
    pair="[A-Za-z0-9][A-Za-z0-9_-]*",
    policy="[A-Za-z0-9][A-Za-z0-9_-]*",


def llm_env(role):
    """The conda env for models.<role>'s rules: vLLM's GPU env when that model runs on vllm with CUDA, else the CPU
    env (vllm on CPU starts its engine in the Python named by models.<role>.vllm.python, envs/vllm-cpu.yaml)."""
    model = config["models"][role]
    return "../envs/gpu.yaml" if model["backend"] == "vllm" and model["device"] == "cuda" else "../envs/cpu.yaml"


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
        targets += review_targets(dataset)  # rules/review.smk
        targets += report_targets(dataset)  # rules/report.smk
        targets += study_c_targets(dataset)  # rules/study_c.smk
    return targets + ["results/summary.md"]


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
        "question_vectors": f"results/{wildcards.dataset}/dense/question_vectors.parquet",
        "questions": f"results/{wildcards.dataset}/questions.parquet",
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


def is_retrieval_pair(pair):
    """Study B's pair (base closed_book: retrieve or not) rather than Study A's (switch arms)."""
    from workflow_scripts.labels import is_retrieval_pair as retrieval_pair

    return retrieval_pair(pair)


def pair_scope(pair):
    """The scope of the pair's retrieval arm: the base arm (Study A) or the alternative (Study B)."""
    return config["arms"][pair["alternative"] if is_retrieval_pair(pair) else pair["base"]]["scope"]


def route_label_inputs(wildcards):
    """Study A: the two arms' per-query metrics. Study B: both policies' answers, the questions' references."""
    pair = route_pair(wildcards)
    base = f"results/{wildcards.dataset}"
    inputs = {"splits": f"{base}/splits.parquet"}
    if is_retrieval_pair(pair):
        return inputs | {
            "base": f"{base}/answers/{pair['base']}.parquet",
            "alternative": f"{base}/answers/{pair['alternative']}.parquet",
            "questions": f"{base}/questions.parquet",
        }
    return inputs | {
        "base": f"{base}/metrics/{pair['base']}.parquet",
        "alternative": f"{base}/metrics/{pair['alternative']}.parquet",
    }


def route_feature_inputs(wildcards):
    """What the pair's feature families read: the base arm's run and dense ranking, questions, the closed-book
    answers' token uncertainty, the BM25 probe."""
    pair = route_pair(wildcards)
    scope = pair_scope(pair)
    base = f"results/{wildcards.dataset}"
    inputs = {"labels": f"{base}/routing/{wildcards.pair}/labels.parquet", "questions": f"{base}/questions.parquet"}
    if "uncertainty" in pair["features"]:
        inputs["closed_book"] = f"{base}/answers/closed_book.parquet"
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
        if {pair["base"], pair["alternative"]} - {"closed_book"} <= set(arms_for(dataset))
    ]
    return expand(
        "results/{dataset}/routing/{pair}/{table}",
        dataset=dataset,
        pair=pairs,
        table=["utility.csv", "policies.csv", "comparisons.csv", "frontiers.parquet", "audit.parquet"],
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


def answer_splits(wildcards):
    """The splits a policy is answered on: generation.splits, and every split when a Study B pair labels it
    (its routers are fitted on dev, calibrated on calibration and scored on held-out)."""
    labelled = {
        side
        for pair in config["routing"]["pairs"].values()
        if is_retrieval_pair(pair)
        for side in (pair["base"], pair["alternative"])
    }
    if wildcards.policy in labelled:
        return ["dev", "calibration", "heldout"]
    return config["generation"]["splits"]


def splits_matter(dataset):
    """Whether the dataset's dev / calibration / held-out splits mean anything to this run: a routing pair or
    answered policies use them; a pure retrieval run reports only the `all` rows."""
    return bool(routing_targets(dataset) or answer_targets(dataset))


def answer_targets(dataset):
    if not POLICIES or not set(POLICIES) - {"closed_book"} <= set(arms_for(dataset)):
        return []
    return [f"results/{dataset}/answers/summary.csv", f"results/{dataset}/answers/comparisons.csv"]


def study_c_targets(dataset):
    """Study C's tables when `study_c` runs on this dataset (rules/study_c.smk)."""
    if config.get("study_c", {}).get("dataset") != dataset:
        return []
    return [f"results/{dataset}/study_c/tables/report.md"]


def study_c_colbert_inputs(wildcards):
    """The corpus, plus the locally built checkpoint when ColBERT is `untrained_from` an encoder."""
    inputs = {"units": f"results/{wildcards.dataset}/units.parquet"}
    if config["study_c"]["colbert"]["untrained_from"]:
        inputs["checkpoint"] = "results/study_c/colbert_checkpoint"
    return inputs


def study_c_strategy_inputs(wildcards):
    """Queries and corpus; the PLAID index (and built checkpoint) for colbert, the dense stage's files otherwise."""
    base = f"results/{wildcards.dataset}"
    inputs = {"queries": f"{base}/study_c/queries.parquet", "units": f"{base}/units.parquet"}
    if wildcards.strategy == "colbert":
        inputs |= {key: path for key, path in study_c_colbert_inputs(wildcards).items() if key == "checkpoint"}
        inputs["colbert_index"] = f"{base}/study_c/colbert_index"
    else:
        inputs |= {"vectors": f"{base}/dense/unit_vectors.parquet", "index": f"{base}/index/dense.faiss"}
    return inputs


# --- Cost and report (rules/report.smk)


def answered_policies(dataset):
    """Policies with an answers table: generation.policies (when answered) and both sides of Study B pairs."""
    policies = list(POLICIES) if answer_targets(dataset) else []
    for name in cost_pairs(dataset, answered_only=False):
        pair = config["routing"]["pairs"][name]
        policies += [side for side in (pair["base"], pair["alternative"]) if is_retrieval_pair(pair)]
    return sorted(set(policies))


def cost_sources(wildcards):
    """Every per-query stage instance of the dataset: its table(s), benchmark file and device (see cost.py)."""
    from workflow_scripts.arms import first_stages

    dataset = wildcards.dataset
    results, benchmarks = f"results/{dataset}", "results/benchmarks"
    arms = arms_for(dataset)
    sources = []
    methods = sorted({(method, arm["scope"]) for arm in arms.values() for method in first_stages(arm)})
    for method, scope in methods:
        device = config["models"]["embedder"]["device"] if method == "dense" else "cpu"
        sources.append({"stage": f"retrieve_{method}", "component": scope, "device": device,
                        "tables": [f"{results}/first_stage/{method}_{scope}.parquet"],
                        "benchmark": f"{benchmarks}/retrieve_{method}/{dataset}_{scope}.tsv"})
    for reranker in sorted({arm["rerank"] for arm in arms.values() if arm.get("rerank")}):
        sources.append({"stage": "rerank", "component": reranker, "device": config["models"]["rerankers"][reranker]["device"],
                        "tables": [f"{results}/rerank/{reranker}.parquet"],
                        "benchmark": f"{benchmarks}/rerank/{dataset}_{reranker}.tsv"})
    for arm in sorted(arms):
        sources.append({"stage": "run_arm", "component": arm, "tables": [f"{results}/runs/{arm}.parquet"],
                        "benchmark": f"{benchmarks}/run_arm/{dataset}_{arm}.tsv"})
    for pair in cost_pairs(dataset, answered_only=False):
        sources.append({"stage": "route_features", "component": pair,
                        "tables": [f"{results}/routing/{pair}/features.parquet"],
                        "benchmark": f"{benchmarks}/route_features/{dataset}_{pair}.tsv"})
    for policy in answered_policies(dataset):
        sources.append({"stage": "generate_answers", "component": policy, "tables": [f"{results}/answers/{policy}.parquet"],
                        "benchmark": f"{benchmarks}/generate_answers/{dataset}_{policy}.tsv"})
    judge = config["models"]["judge"]
    for policy in POLICIES if answer_targets(dataset) else []:
        sources.append({"stage": "judge_answers", "component": policy,
                        "device": judge.get("base_url") or judge.get("device", "cpu"),
                        "tables": [f"{results}/answers/{policy}_study_a.parquet", f"{results}/answers/{policy}_study_c.parquet"],
                        "benchmark": f"{benchmarks}/judge_answers/{dataset}_{policy}.tsv"})
    return sources


def cost_source_files(wildcards):
    return [path for source in cost_sources(wildcards) for path in (*source["tables"], source["benchmark"])]


def cost_pairs(dataset, answered_only=True):
    """Routing pairs of the dataset; answered_only: those whose two policies are answered on held-out (the ones
    a policy can be costed for)."""
    from pathlib import PurePosixPath

    routed = {PurePosixPath(path).parts[3] for path in routing_targets(dataset)}  # results/<dataset>/routing/<pair>/...
    if not answered_only:
        return sorted(routed)
    answered = set(POLICIES) if answer_targets(dataset) and "heldout" in config["generation"]["splits"] else set()
    return sorted(
        name
        for name in routed
        if is_retrieval_pair(config["routing"]["pairs"][name])
        or {config["routing"]["pairs"][name]["base"], config["routing"]["pairs"][name]["alternative"]} <= answered
    )


def route_cost_rankings(wildcards):
    """'<method>_<scope>' → first-stage ranking file, for the pair's reranked arms (their candidate pools)."""
    from workflow_scripts.arms import first_stages

    pair = route_pair(wildcards)
    rankings = {}
    for side in (pair["base"], pair["alternative"]):
        arm = config["arms"].get(side)
        if arm and arm.get("rerank"):
            for method in first_stages(arm):
                rankings[f"{method}_{arm['scope']}"] = f"results/{wildcards.dataset}/first_stage/{method}_{arm['scope']}.parquet"
    return rankings


def measured_cost_inputs(wildcards):
    """route_fit's extra inputs when routing.measured_cost prices a trigger: the cost ledger and the rankings
    that give each reranked arm its candidates (none with the abstract routing.cost_per_trigger)."""
    if not config["routing"].get("measured_cost"):
        return {}
    return {"ledger": f"results/{wildcards.dataset}/cost/ledger.parquet", **route_cost_rankings(wildcards)}


def measured_cost_settings(wildcards):
    """What cost.measured_costs reads besides the ledger, or None with the abstract cost (so that prices stay
    out of route_fit's parameters, and changing one reruns only report-level jobs)."""
    if not config["routing"].get("measured_cost"):
        return None
    return {"pair": route_pair(wildcards), "arms": config["arms"], "reuse": config["costs"]["reuse"],
            "prices": config["costs"]["prices"], "rankings": route_cost_rankings(wildcards)}


def report_targets(dataset):
    """The dataset's ledger, and per costed pair its cost tables and figures."""
    pairs = cost_pairs(dataset)
    targets = [f"results/{dataset}/cost/ledger.parquet"] if arms_for(dataset) else []
    for pair in pairs:
        targets += expand(
            "results/{dataset}/report/{pair}/{figure}.png", dataset=dataset, pair=pair, figure=FIGURES
        )
    if study_c_targets(dataset):
        targets += expand("results/{dataset}/report/study_c/{figure}.png", dataset=dataset, figure=["metrics", "paired", "cost"])
    return targets


FIGURES = ["frontiers", "calibration", "outcomes", "utility", "cost_breakdown", "cost_frontiers"]


def summary_inputs(wildcards):
    """Every table summary.md quotes, per dataset: retrieval metrics, answers, routing and cost."""
    inputs = []
    for dataset in DATASETS:
        if arms_for(dataset):
            inputs += [f"results/{dataset}/metrics/summary.csv", f"results/{dataset}/cost/stages.csv"]
        inputs += [path for path in answer_targets(dataset) if path.endswith(".csv")]
        inputs += [path for path in routing_targets(dataset) if path.endswith((".csv", "audit.parquet"))]
        for pair in cost_pairs(dataset):
            inputs += [f"results/{dataset}/cost/{pair}/policy_costs.csv", f"results/{dataset}/cost/{pair}/reuse.csv",
                       f"results/{dataset}/cost/{pair}/cost_frontiers.parquet"]
        inputs += study_c_targets(dataset)  # its tables in Markdown, quoted as they are
    return inputs


# --- rules/review.smk

JUDGES = ["study_a", "study_c"]


def review_inputs(wildcards):
    """Both judges' judgments and the answers of every policy, the runs shown as evidence, questions and units."""
    base = f"results/{wildcards.dataset}"
    return {
        "study_a": expand(f"{base}/answers/{{policy}}_study_a.parquet", policy=POLICIES),
        "study_c": expand(f"{base}/answers/{{policy}}_study_c.parquet", policy=POLICIES),
        "answers": expand(f"{base}/answers/{{policy}}.parquet", policy=POLICIES),
        "runs": [f"{base}/runs/{policy}.parquet" for policy in POLICIES if policy != "closed_book"],
        "questions": f"{base}/questions.parquet",
        "units": f"{base}/units.parquet",
    }


def shown_runs(wildcards):
    """policy → the run whose units the answer saw (None for closed_book)."""
    return {
        policy: None if policy == "closed_book" else f"results/{wildcards.dataset}/runs/{policy}.parquet"
        for policy in POLICIES
    }


def reviewed_sheet(wildcards):
    return config["review"]["reviewed"][wildcards.dataset][wildcards.judge]


def review_targets(dataset):
    """The review sheets wherever answers are judged, and the agreement of every sheet the config names."""
    if not answer_targets(dataset):
        return []
    reviewed = config["review"]["reviewed"].get(dataset, {})
    return [f"results/{dataset}/review/{judge}_sample.csv" for judge in JUDGES] + [
        f"results/{dataset}/review/{judge}_agreement.csv" for judge in JUDGES if judge in reviewed
    ]
