# Stage 1 — ingest: raw dataset files → canonical units / questions / qrels, then grouped splits. A corpus without
# questions (unarXive) can have them written by the generator from its units first (`generate_questions`).


rule generate_questions:
    input:
        unpack(dataset_files),
    output:
        questions="results/{dataset}/generated_questions.parquet",
        report="results/{dataset}/generated_questions_report.json",
    log:
        "results/logs/generate_questions/{dataset}.log",
    benchmark:
        "results/benchmarks/generate_questions/{dataset}.tsv"
    conda:
        llm_env("generator")
    threads: MODEL_THREADS
    params:
        spec=lambda wildcards: config["datasets"][wildcards.dataset],
        generator=llm_block("generator"),
        prompts=prompt_overrides(vocabulary.QUESTION_TEMPLATES),
        cache=LLM_CACHE,
        model_cache=MODEL_CACHE,
    script:
        "../workflow_scripts/ingest/jobs/generate_questions.py"


rule ingest:
    input:
        unpack(ingest_inputs),
    output:
        units="results/{dataset}/units.parquet",
        questions="results/{dataset}/questions.parquet",
        qrels="results/{dataset}/qrels.parquet",
        report="results/{dataset}/ingest_report.json",
    log:
        "results/logs/ingest/{dataset}.log",
    benchmark:
        "results/benchmarks/ingest/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        spec=dataset_spec,
    script:
        "../workflow_scripts/ingest/jobs/ingest.py"


rule splits:
    input:
        questions=rules.ingest.output.questions,
    output:
        splits="results/{dataset}/splits.parquet",
    log:
        "results/logs/splits/{dataset}.log",
    benchmark:
        "results/benchmarks/splits/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        fractions=config["splits"]["fractions"],
        seed=config["splits"]["seed"],
    script:
        "../workflow_scripts/ingest/jobs/splits.py"
