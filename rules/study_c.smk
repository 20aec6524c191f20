# Study C — six RAG strategies over one paper corpus (config `study_c`): synthetic problem / method queries from a
# reservoir sample of papers, each strategy's run and answers with per-query cost, the quality judge, then the
# study's tables. ColBERT gets its own checkpoint (untrained_from only) and PLAID index rules.


if "study_c" in config:

    STUDY_C = config["study_c"]

    wildcard_constraints:
        strategy="|".join(STUDY_C["strategies"]),

    rule study_c_queries:
        input:
            units=rules.ingest.output.units,
            report=rules.ingest.output.report,
        output:
            queries=sharded("study_c_queries", "results/{dataset}/study_c/queries.parquet", contracts.STUDY_C_QUERIES),
            report=sharded("study_c_queries", "results/{dataset}/study_c/queries_report.json"),
        log:
            sharded("study_c_queries", "results/logs/study_c_queries/{dataset}.log"),
        benchmark:
            sharded("study_c_queries", "results/benchmarks/study_c_queries/{dataset}.tsv")
        conda:
            llm_env("generator")
        threads: MODEL_THREADS
        params:
            papers=STUDY_C["papers"],
            seed=STUDY_C["seed"],
            generator=llm_block("generator"),
            prompts=prompt_overrides(vocabulary.SYNTHETIC_TEMPLATES),
            cache=LLM_CACHE,
            model_cache=MODEL_CACHE,
        script:
            "../workflow_scripts/study_c/jobs/study_c_queries.py"

    rule study_c_colbert_checkpoint:
        output:
            checkpoint=directory("results/study_c/colbert_checkpoint"),
        log:
            "results/logs/study_c_colbert_checkpoint/checkpoint.log",
        benchmark:
            "results/benchmarks/study_c_colbert_checkpoint/checkpoint.tsv"
        conda:
            "../envs/colbert.yaml"
        params:
            colbert=STUDY_C["colbert"],
        script:
            "../workflow_scripts/retrieval/jobs/study_c_colbert_checkpoint.py"

    rule study_c_colbert_index:
        input:
            unpack(study_c_colbert_inputs),
        output:
            index=directory("results/{dataset}/study_c/colbert_index"),
        log:
            "results/logs/study_c_colbert_index/{dataset}.log",
        benchmark:
            "results/benchmarks/study_c_colbert_index/{dataset}.tsv"
        conda:
            "../envs/colbert.yaml"
        threads: MODEL_THREADS
        params:
            colbert=STUDY_C["colbert"],
        script:
            "../workflow_scripts/retrieval/jobs/study_c_colbert_index.py"

    rule study_c_strategy:
        input:
            unpack(study_c_strategy_inputs),
        output:
            run=sharded("study_c_strategy", "results/{dataset}/study_c/runs/{strategy}.parquet", contracts.STUDY_C_RUNS),
            answers=sharded(
                "study_c_strategy", "results/{dataset}/study_c/answers/{strategy}.parquet", contracts.STUDY_C_ANSWERS
            ),
        log:
            sharded("study_c_strategy", "results/logs/study_c_strategy/{dataset}_{strategy}.log"),
        benchmark:
            sharded("study_c_strategy", "results/benchmarks/study_c_strategy/{dataset}_{strategy}.tsv")
        conda:
            "../envs/colbert.yaml"
        threads: MODEL_THREADS
        params:
            settings=lambda wildcards: strategy_params(wildcards.strategy)["settings"],
            colbert=lambda wildcards: strategy_params(wildcards.strategy)["colbert"],
            embedder=lambda wildcards: strategy_params(wildcards.strategy)["embedder"],
            generator=llm_block("generator"),
            prompts=lambda wildcards: strategy_params(wildcards.strategy)["prompts"],
            cache=LLM_CACHE,
            model_cache=MODEL_CACHE,
            embedding_cache=EMBEDDING_CACHE,
        script:
            "../workflow_scripts/study_c/jobs/study_c_strategy.py"

    rule study_c_judge:
        input:
            queries=unsharded(rules.study_c_queries.output.queries),
            answers=unsharded(rules.study_c_strategy.output.answers),
        output:
            judgments=sharded(
                "study_c_judge", "results/{dataset}/study_c/judgments/{strategy}.parquet", contracts.JUDGMENTS_QUALITY
            ),
        log:
            sharded("study_c_judge", "results/logs/study_c_judge/{dataset}_{strategy}.log"),
        benchmark:
            sharded("study_c_judge", "results/benchmarks/study_c_judge/{dataset}_{strategy}.tsv")
        conda:
            llm_env("judge")
        threads: MODEL_THREADS
        params:
            judge=llm_block("judge"),
            max_reasks=STUDY_C["judge_reasks"],
            prompts=prompt_overrides(("judge_quality", vocabulary.REASK_TEMPLATE)),
            cache=LLM_CACHE,
            model_cache=MODEL_CACHE,
        script:
            "../workflow_scripts/study_c/jobs/study_c_judge.py"

    rule study_c_tables:
        input:
            queries=unsharded(rules.study_c_queries.output.queries),
            runs=lambda wildcards: study_c_outputs("study_c_strategy", "run", wildcards),
            answers=lambda wildcards: study_c_outputs("study_c_strategy", "answers", wildcards),
            judgments=lambda wildcards: study_c_outputs("study_c_judge", "judgments", wildcards),
        output:
            quality="results/{dataset}/study_c/tables/quality.csv",
            retrieval="results/{dataset}/study_c/tables/retrieval.csv",
            paired="results/{dataset}/study_c/tables/paired.csv",
            paired_retrieval="results/{dataset}/study_c/tables/paired_retrieval.csv",
            gold="results/{dataset}/study_c/tables/gold.csv",
            gap="results/{dataset}/study_c/tables/gap.csv",
            cost="results/{dataset}/study_c/tables/cost.csv",
            report="results/{dataset}/study_c/tables/report.md",
        log:
            "results/logs/study_c_tables/{dataset}.log",
        benchmark:
            "results/benchmarks/study_c_tables/{dataset}.tsv"
        conda:
            "../envs/cpu.yaml"
        params:
            strategies=STUDY_C["strategies"],
            bootstrap=STUDY_C["bootstrap"],
            scoring=config["judging"]["scoring"],
            prices=config["models"]["generator"].get("prices"),
        script:
            "../workflow_scripts/study_c/jobs/study_c_tables.py"
