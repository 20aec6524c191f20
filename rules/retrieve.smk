# Stage 2 — indexes and retrieval arms: Lucene BM25 and FAISS/exact dense first stages (computed once per
# dataset and scope, shared by every arm) and imported TREC runs, reranker scores for the union of the arms'
# candidates, then each arm's run (Parquet + TREC) and its ir-measures evaluation.


rule index_bm25:
    input:
        units=rules.ingest.output.units,
    output:
        index=directory("results/{dataset}/index/bm25"),
    log:
        "results/logs/index_bm25/{dataset}.log",
    benchmark:
        "results/benchmarks/index_bm25/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    threads: config["retrieval"]["bm25"]["threads"]
    params:
        title=config["retrieval"]["title"],
    script:
        "../workflow_scripts/retrieval/jobs/index_bm25.py"


# Units and questions are embedded in one job, the only one that loads the embedding model.
rule embed_units:
    input:
        units=rules.ingest.output.units,
        questions=rules.ingest.output.questions,
    output:
        vectors=sharded(
            "embed_units",
            "results/{dataset}/dense/unit_vectors.parquet",
            InOrderOf(contracts.UNIT_VECTORS, "units", "unit_id"),
        ),
        questions=sharded(
            "embed_units",
            "results/{dataset}/dense/question_vectors.parquet",
            InOrderOf(contracts.QUESTION_VECTORS, "questions", "qid"),
        ),
    log:
        sharded("embed_units", "results/logs/embed_units/{dataset}.log"),
    benchmark:
        sharded("embed_units", "results/benchmarks/embed_units/{dataset}.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: MODEL_THREADS
    params:
        embedder=config["models"]["embedder"],
        title=config["retrieval"]["title"],
        cache=EMBEDDING_CACHE,
    script:
        "../workflow_scripts/retrieval/jobs/embed_units.py"


rule index_dense:
    input:
        vectors=unsharded(rules.embed_units.output.vectors),
    output:
        index="results/{dataset}/index/dense.faiss",
    log:
        "results/logs/index_dense/{dataset}.log",
    benchmark:
        "results/benchmarks/index_dense/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    threads: MODEL_THREADS
    params:
        index=config["retrieval"]["dense_index"],
    script:
        "../workflow_scripts/retrieval/jobs/index_dense.py"


rule retrieve_bm25:
    input:
        index=rules.index_bm25.output.index,
        questions=rules.ingest.output.questions,
    output:
        ranking="results/{dataset}/first_stage/bm25_{scope}.parquet",
    log:
        "results/logs/retrieve_bm25/{dataset}_{scope}.log",
    benchmark:
        "results/benchmarks/retrieve_bm25/{dataset}_{scope}.tsv"
    conda:
        "../envs/cpu.yaml"
    threads: config["retrieval"]["bm25"]["threads"]
    params:
        bm25=config["retrieval"]["bm25"],
        depth=lambda wildcards: first_stage_depth(wildcards.dataset, "bm25", wildcards.scope),
    script:
        "../workflow_scripts/retrieval/jobs/retrieve_bm25.py"


rule retrieve_dense:
    input:
        unpack(dense_search_inputs),
    output:
        ranking="results/{dataset}/first_stage/dense_{scope}.parquet",
    log:
        "results/logs/retrieve_dense/{dataset}_{scope}.log",
    benchmark:
        "results/benchmarks/retrieve_dense/{dataset}_{scope}.tsv"
    conda:
        "../envs/cpu.yaml"
    threads: MODEL_THREADS
    params:
        depth=lambda wildcards: first_stage_depth(wildcards.dataset, "dense", wildcards.scope),
    script:
        "../workflow_scripts/retrieval/jobs/retrieve_dense.py"


# A TREC run made elsewhere (config retrieval.runs), checked against the dataset and read as a first stage.
rule import_run:
    input:
        run=lambda wildcards: imported_run_file(wildcards),
        questions=rules.ingest.output.questions,
        units=rules.ingest.output.units,
    output:
        ranking="results/{dataset}/first_stage/run_{run}.parquet",
    log:
        "results/logs/import_run/{dataset}_{run}.log",
    benchmark:
        "results/benchmarks/import_run/{dataset}_{run}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/retrieval/jobs/import_run.py"


rule rerank:
    input:
        unpack(rerank_inputs),
    output:
        scores=sharded("rerank", "results/{dataset}/rerank/{reranker}.parquet", contracts.RERANK_SCORES),
    log:
        sharded("rerank", "results/logs/rerank/{dataset}_{reranker}.log"),
    benchmark:
        sharded("rerank", "results/benchmarks/rerank/{dataset}_{reranker}.tsv")
    conda:
        "../envs/cpu.yaml"
    threads: MODEL_THREADS
    params:
        reranker=lambda wildcards: config["models"]["rerankers"][wildcards.reranker],
        arms=lambda wildcards: arms_reranked_by(wildcards.dataset, wildcards.reranker),
        title=config["retrieval"]["title"],
        cache=RERANK_CACHE,
        model_cache=MODEL_CACHE,
    script:
        "../workflow_scripts/retrieval/jobs/rerank.py"


rule run_arm:
    input:
        unpack(arm_inputs),
    output:
        run="results/{dataset}/runs/{arm}.parquet",
        trec="results/{dataset}/runs/{arm}.trec",
    log:
        "results/logs/run_arm/{dataset}_{arm}.log",
    benchmark:
        "results/benchmarks/run_arm/{dataset}_{arm}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        arm=lambda wildcards: config["arms"][wildcards.arm],
    script:
        "../workflow_scripts/retrieval/jobs/run_arm.py"


rule evaluate_arm:
    input:
        run=rules.run_arm.output.run,
        qrels=rules.ingest.output.qrels,
        splits=rules.splits.output.splits,
    output:
        metrics="results/{dataset}/metrics/{arm}.parquet",
        summary="results/{dataset}/metrics/{arm}_summary.parquet",
    log:
        "results/logs/evaluate_arm/{dataset}_{arm}.log",
    benchmark:
        "results/benchmarks/evaluate_arm/{dataset}_{arm}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        measures=config["evaluation"]["measures"],
    script:
        "../workflow_scripts/retrieval/jobs/evaluate_arm.py"


rule retrieval_summary:
    input:
        lambda wildcards: [
            output_of("evaluate_arm", "summary", dataset=wildcards.dataset, arm=arm)
            for arm in arms_for(wildcards.dataset)
        ],
    output:
        csv="results/{dataset}/metrics/summary.csv",
        markdown="results/{dataset}/metrics/summary.md",
    log:
        "results/logs/retrieval_summary/{dataset}.log",
    benchmark:
        "results/benchmarks/retrieval_summary/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        by_split=lambda wildcards: splits_matter(wildcards.dataset),
    script:
        "../workflow_scripts/retrieval/jobs/retrieval_summary.py"


rule compare_arms:
    input:
        metrics=lambda wildcards: [
            output_of("evaluate_arm", "metrics", dataset=wildcards.dataset, arm=arm)
            for arm in arms_for(wildcards.dataset)
        ],
        splits=rules.splits.output.splits,
    output:
        csv="results/{dataset}/metrics/paired.csv",
    log:
        "results/logs/compare_arms/{dataset}.log",
    benchmark:
        "results/benchmarks/compare_arms/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        arms=lambda wildcards: list(arms_for(wildcards.dataset)),
        pairs=lambda wildcards: arm_pairs(wildcards.dataset),
        bootstrap=config["routing"]["bootstrap"],
        seed=config["routing"]["seed"],
    script:
        "../workflow_scripts/retrieval/jobs/compare_arms.py"
