# Input functions, params and targets of the rules in rules/retrieve.smk (kept apart from the rules, as
# Snakemake's linter asks).


def first_stage_depth(dataset, method, scope):
    """How deep the shared first-stage ranking (method, scope) must go: the deepest any arm reads it."""
    from workflow_scripts.retrieval.arms import first_stage_depth as depth_of, first_stages

    return max(
        depth_of(arm) for arm in arms_for(dataset).values() if arm["scope"] == scope and method in first_stages(arm)
    )


def first_stage_file(dataset, arm, method):
    """The shared ranking file of one of an arm's first stages: a search over its scope, or its imported run."""
    if method == "run":
        return output_of("import_run", "ranking", dataset=dataset, run=arm["run"])
    return output_of(f"retrieve_{method}", "ranking", dataset=dataset, scope=arm["scope"])


def first_stage_files(dataset, arm):
    """first-stage method → the shared ranking file an arm reads."""
    from workflow_scripts.retrieval.arms import first_stages

    return {method: first_stage_file(dataset, arm, method) for method in first_stages(arm)}


def ranking_files(dataset, arms):
    """'<method>_<scope>' (vocabulary.ranking_name) → ranking file, for every first stage of `arms`."""
    from workflow_scripts.retrieval.arms import first_stages, stage_scope

    return {
        vocabulary.ranking_name(method, stage_scope(arm, method)): first_stage_file(dataset, arm, method)
        for arm in arms
        for method in first_stages(arm)
    }


def imported_run_file(wildcards):
    """The TREC file of a retrieval.runs entry for the dataset (retrieval/runs.py run_path)."""
    from workflow_scripts.retrieval.runs import run_path

    return str(run_path(config["retrieval"]["runs"][wildcards.run]["path"], wildcards.dataset))


def dense_search_inputs(wildcards):
    inputs = {
        "vectors": output_of("embed_units", "vectors", dataset=wildcards.dataset),
        "question_vectors": output_of("embed_units", "questions", dataset=wildcards.dataset),
        "questions": output_of("ingest", "questions", dataset=wildcards.dataset),
    }
    if wildcards.scope == "global":
        inputs["index"] = output_of("index_dense", "index", dataset=wildcards.dataset)
    return inputs


def arms_reranked_by(dataset, reranker):
    return {name: arm for name, arm in arms_for(dataset).items() if arm.get("rerank") == reranker}


def rerank_inputs(wildcards):
    """The first-stage rankings of every arm reranked by this reranker, plus the texts to score."""
    return {
        "units": output_of("ingest", "units", dataset=wildcards.dataset),
        "questions": output_of("ingest", "questions", dataset=wildcards.dataset),
        **ranking_files(wildcards.dataset, arms_reranked_by(wildcards.dataset, wildcards.reranker).values()),
    }


def arm_inputs(wildcards):
    arm = config["arms"][wildcards.arm]
    inputs = first_stage_files(wildcards.dataset, arm)
    if arm.get("rerank"):
        inputs["rerank"] = output_of("rerank", "scores", dataset=wildcards.dataset, reranker=arm["rerank"])
    return inputs


def splits_matter(dataset):
    """Whether the dataset's dev / calibration / held-out splits mean anything to this run: a routing pair or
    answered policies use them; a pure retrieval run reports only the `all` rows."""
    return bool(routing_targets(dataset) or answer_targets(dataset))


def arms_compared(dataset):
    """Whether the dataset has arms to compare with its first (compare_arms)."""
    return len(arms_for(dataset)) > 1


def arm_pairs(dataset):
    """(arm, baseline) pairs compare_arms reports (retrieval/arms.py comparison_baselines)."""
    from workflow_scripts.retrieval.arms import comparison_baselines

    return comparison_baselines(arms_for(dataset))


def retrieval_targets(dataset):
    arms = arms_for(dataset)
    targets = [output_of("run_arm", "trec", dataset=dataset, arm=arm) for arm in arms]
    targets += [output_of("compare_arms", "csv", dataset=dataset)] if arms_compared(dataset) else []
    return targets + ([output_of("retrieval_summary", "markdown", dataset=dataset)] if arms else [])


def retrieval_cost_sources(dataset):
    """What the cost ledger prices of retrieval: each shared first-stage search (per method and scope) or imported
    run, each reranker's scoring and each arm's fusion and cut (rules/common.smk `cost_source`)."""
    from workflow_scripts.retrieval.arms import first_stages, stage_scope

    arms = arms_for(dataset)
    sources = []
    stages = {(method, stage_scope(arm, method)) for arm in arms.values() for method in first_stages(arm)}
    for method, scope in sorted(stages):
        stage = PRICED_STAGES["first_stage"][method]
        where = {"run": scope} if method == "run" else {"scope": scope}  # an imported run: the import's time only
        source = cost_source(stage, "retrieval", scope, {"ranking": contracts.RANKING}, dataset=dataset, **where)
        sources.append(source | {"device": config["models"]["embedder"]["device"] if method == "dense" else "cpu"})
    for reranker in sorted({arm["rerank"] for arm in arms.values() if arm.get("rerank")}):
        source = cost_source(
            "rerank", "rerank", reranker, {"scores": contracts.RERANK_SCORES}, dataset=dataset, reranker=reranker
        )
        sources.append(source | {"device": config["models"]["rerankers"][reranker]["device"]})
    for arm in sorted(arms):
        sources.append(cost_source("run_arm", "table", arm, {"run": contracts.RUNS}, dataset=dataset, arm=arm))
    return sources
