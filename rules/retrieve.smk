# Stage 2 — indexes and retrieval arms: Lucene BM25 and FAISS/exact dense first stages (computed once per
# dataset and scope, shared by every arm), reranker scores for the union of the arms' candidates, then each
# arm's run (Parquet + TREC) and its ir-measures evaluation.


def first_stage_depth(dataset, method, scope):
    """How deep the shared first-stage ranking (method, scope) must go: the deepest any arm reads it."""
    from workflow_scripts.retrieval.arms import first_stage_depth as depth_of, first_stages

    return max(
        depth_of(arm)
        for arm in arms_for(dataset).values()
        if arm["scope"] == scope and method in first_stages(arm)
    )


def first_stage_files(dataset, arm):
    """first-stage method → the shared ranking file an arm reads."""
    from workflow_scripts.retrieval.arms import first_stages

    return {
        method: output_of(f"retrieve_{method}", "ranking", dataset=dataset, scope=arm["scope"])
        for method in first_stages(arm)
    }


def ranking_files(dataset, arms):
    """'<method>_<scope>' (vocabulary.ranking_name) → ranking file, for every first stage of `arms`."""
    return {
        vocabulary.ranking_name(method, arm["scope"]): path
        for arm in arms
        for method, path in first_stage_files(dataset, arm).items()
    }


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


def retrieval_targets(dataset):
    arms = arms_for(dataset)
    targets = [output_of("run_arm", "trec", dataset=dataset, arm=arm) for arm in arms]
    return targets + ([output_of("retrieval_summary", "markdown", dataset=dataset)] if arms else [])


rule index_bm25:
    input:
        units=rules.ingest.output.units,
    output:
        index=directory("results/{dataset}/index/bm25"),
    params:
        title=config["retrieval"]["title"],
    threads: config["retrieval"]["bm25"]["threads"]
    log:
        "results/logs/index_bm25/{dataset}.log",
    benchmark:
        "results/benchmarks/index_bm25/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/retrieval/bm25.py"


# Units and questions are embedded in one job, the only one that loads the embedding model.
rule embed_units:
    input:
        units=rules.ingest.output.units,
        questions=rules.ingest.output.questions,
    output:
        vectors="results/{dataset}/dense/unit_vectors.parquet",
        questions="results/{dataset}/dense/question_vectors.parquet",
    params:
        embedder=config["models"]["embedder"],
        title=config["retrieval"]["title"],
        cache=EMBEDDING_CACHE,
    log:
        "results/logs/embed_units/{dataset}.log",
    benchmark:
        "results/benchmarks/embed_units/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/retrieval/dense.py"


rule index_dense:
    input:
        vectors=rules.embed_units.output.vectors,
    output:
        index="results/{dataset}/index/dense.faiss",
    params:
        index=config["retrieval"]["dense_index"],
    log:
        "results/logs/index_dense/{dataset}.log",
    benchmark:
        "results/benchmarks/index_dense/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/retrieval/dense.py"


rule retrieve_bm25:
    input:
        index=rules.index_bm25.output.index,
        questions=rules.ingest.output.questions,
    output:
        ranking="results/{dataset}/first_stage/bm25_{scope}.parquet",
    params:
        bm25=config["retrieval"]["bm25"],
        depth=lambda wildcards: first_stage_depth(wildcards.dataset, "bm25", wildcards.scope),
    threads: config["retrieval"]["bm25"]["threads"]
    log:
        "results/logs/retrieve_bm25/{dataset}_{scope}.log",
    benchmark:
        "results/benchmarks/retrieve_bm25/{dataset}_{scope}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/retrieval/bm25.py"


rule retrieve_dense:
    input:
        unpack(dense_search_inputs),
    output:
        ranking="results/{dataset}/first_stage/dense_{scope}.parquet",
    params:
        depth=lambda wildcards: first_stage_depth(wildcards.dataset, "dense", wildcards.scope),
    log:
        "results/logs/retrieve_dense/{dataset}_{scope}.log",
    benchmark:
        "results/benchmarks/retrieve_dense/{dataset}_{scope}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/retrieval/dense.py"


rule rerank:
    input:
        unpack(rerank_inputs),
    output:
        scores="results/{dataset}/rerank/{reranker}.parquet",
    params:
        reranker=lambda wildcards: config["models"]["rerankers"][wildcards.reranker],
        arms=lambda wildcards: arms_reranked_by(wildcards.dataset, wildcards.reranker),
        title=config["retrieval"]["title"],
        cache=RERANK_CACHE,
        model_cache=MODEL_CACHE,
    log:
        "results/logs/rerank/{dataset}_{reranker}.log",
    benchmark:
        "results/benchmarks/rerank/{dataset}_{reranker}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/retrieval/rerank.py"


rule run_arm:
    input:
        unpack(arm_inputs),
    output:
        run="results/{dataset}/runs/{arm}.parquet",
        trec="results/{dataset}/runs/{arm}.trec",
    params:
        arm=lambda wildcards: config["arms"][wildcards.arm],
    log:
        "results/logs/run_arm/{dataset}_{arm}.log",
    benchmark:
        "results/benchmarks/run_arm/{dataset}_{arm}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/retrieval/arms.py"


rule evaluate_arm:
    input:
        run=rules.run_arm.output.run,
        qrels=rules.ingest.output.qrels,
        splits=rules.splits.output.splits,
    output:
        metrics="results/{dataset}/metrics/{arm}.parquet",
        summary="results/{dataset}/metrics/{arm}_summary.parquet",
    params:
        measures=config["evaluation"]["measures"],
    log:
        "results/logs/evaluate_arm/{dataset}_{arm}.log",
    benchmark:
        "results/benchmarks/evaluate_arm/{dataset}_{arm}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/retrieval/evaluate.py"


rule retrieval_summary:
    input:
        lambda wildcards: [
            output_of("evaluate_arm", "summary", dataset=wildcards.dataset, arm=arm) for arm in arms_for(wildcards.dataset)
        ],
    output:
        csv="results/{dataset}/metrics/summary.csv",
        markdown="results/{dataset}/metrics/summary.md",
    params:
        by_split=lambda wildcards: splits_matter(wildcards.dataset),
    log:
        "results/logs/retrieval_summary/{dataset}.log",
    benchmark:
        "results/benchmarks/retrieval_summary/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/retrieval/evaluate.py"
