# Study C — six RAG strategies over one paper corpus (config `study_c`): synthetic problem / method queries from a
# reservoir sample of papers, each strategy's run and answers with per-query cost, the Study C judge, then the
# study's tables. ColBERT gets its own checkpoint (untrained_from only) and PLAID index rules.

if "study_c" in config:

    STUDY_C = config["study_c"]

    wildcard_constraints:
        strategy="|".join(STUDY_C["strategies"]),

    rule study_c_queries:
        input:
            units="results/{dataset}/units.parquet",
            report="results/{dataset}/ingest_report.json",
        output:
            queries="results/{dataset}/study_c/queries.parquet",
            report="results/{dataset}/study_c/queries_report.json",
        params:
            papers=STUDY_C["papers"],
            seed=STUDY_C["seed"],
            generator=config["models"]["generator"],
            prompts=config["prompts"],
            cache="results/cache/llm",
            model_cache="results/cache/models",
        threads: 2
        log:
            "results/logs/study_c_queries/{dataset}.log",
        benchmark:
            "results/benchmarks/study_c_queries/{dataset}.tsv"
        conda:
            llm_env("generator")
        script:
            "../workflow_scripts/study_c/synthetic.py"

    rule study_c_colbert_checkpoint:
        output:
            checkpoint=directory("results/study_c/colbert_checkpoint"),
        params:
            colbert=STUDY_C["colbert"],
        log:
            "results/logs/study_c_colbert_checkpoint/checkpoint.log",
        benchmark:
            "results/benchmarks/study_c_colbert_checkpoint/checkpoint.tsv"
        conda:
            "../envs/colbert.yaml"
        script:
            "../workflow_scripts/retrieval/colbert.py"

    rule study_c_colbert_index:
        input:
            unpack(study_c_colbert_inputs),
        output:
            index=directory("results/{dataset}/study_c/colbert_index"),
        params:
            colbert=STUDY_C["colbert"],
        threads: 2
        log:
            "results/logs/study_c_colbert_index/{dataset}.log",
        benchmark:
            "results/benchmarks/study_c_colbert_index/{dataset}.tsv"
        conda:
            "../envs/colbert.yaml"
        script:
            "../workflow_scripts/retrieval/colbert.py"

    rule study_c_strategy:
        input:
            unpack(study_c_strategy_inputs),
        output:
            run="results/{dataset}/study_c/runs/{strategy}.parquet",
            answers="results/{dataset}/study_c/answers/{strategy}.parquet",
        params:
            settings=STUDY_C,
            colbert=STUDY_C["colbert"],
            embedder=config["models"]["embedder"],
            generator=config["models"]["generator"],
            prompts=config["prompts"],
            cache="results/cache/llm",
            model_cache="results/cache/models",
            embedding_cache="results/cache/embeddings",
        threads: 2
        log:
            "results/logs/study_c_strategy/{dataset}_{strategy}.log",
        benchmark:
            "results/benchmarks/study_c_strategy/{dataset}_{strategy}.tsv"
        conda:
            "../envs/colbert.yaml"
        script:
            "../workflow_scripts/study_c/strategies.py"

    rule study_c_judge:
        input:
            queries="results/{dataset}/study_c/queries.parquet",
            answers="results/{dataset}/study_c/answers/{strategy}.parquet",
        output:
            judgments="results/{dataset}/study_c/judgments/{strategy}.parquet",
        params:
            judge=config["models"]["judge"],
            max_reasks=STUDY_C["judge_reasks"],
            prompts=config["prompts"],
            cache="results/cache/llm",
            model_cache="results/cache/models",
        threads: 2
        log:
            "results/logs/study_c_judge/{dataset}_{strategy}.log",
        benchmark:
            "results/benchmarks/study_c_judge/{dataset}_{strategy}.tsv"
        conda:
            llm_env("judge")
        script:
            "../workflow_scripts/study_c/tables.py"

    rule study_c_tables:
        input:
            queries="results/{dataset}/study_c/queries.parquet",
            runs=expand("results/{{dataset}}/study_c/runs/{strategy}.parquet", strategy=STUDY_C["strategies"]),
            answers=expand("results/{{dataset}}/study_c/answers/{strategy}.parquet", strategy=STUDY_C["strategies"]),
            judgments=expand("results/{{dataset}}/study_c/judgments/{strategy}.parquet", strategy=STUDY_C["strategies"]),
        output:
            quality="results/{dataset}/study_c/tables/quality.csv",
            retrieval="results/{dataset}/study_c/tables/retrieval.csv",
            paired="results/{dataset}/study_c/tables/paired.csv",
            gold="results/{dataset}/study_c/tables/gold.csv",
            gap="results/{dataset}/study_c/tables/gap.csv",
            cost="results/{dataset}/study_c/tables/cost.csv",
            report="results/{dataset}/study_c/tables/report.md",
        params:
            strategies=STUDY_C["strategies"],
            bootstrap=STUDY_C["bootstrap"],
        log:
            "results/logs/study_c_tables/{dataset}.log",
        benchmark:
            "results/benchmarks/study_c_tables/{dataset}.tsv"
        conda:
            "../envs/cpu.yaml"
        script:
            "../workflow_scripts/study_c/tables.py"
