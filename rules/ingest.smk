# Stage 1 — ingest: raw dataset files → canonical units / questions / qrels, then grouped splits.


rule ingest:
    input:
        unpack(dataset_files),
    output:
        units="results/{dataset}/units.parquet",
        questions="results/{dataset}/questions.parquet",
        qrels="results/{dataset}/qrels.parquet",
        report="results/{dataset}/ingest_report.json",
    params:
        spec=lambda wildcards: config["datasets"][wildcards.dataset],
    log:
        "results/logs/ingest/{dataset}.log",
    benchmark:
        "results/benchmarks/ingest/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/ingest/stage.py"


rule splits:
    input:
        questions=rules.ingest.output.questions,
    output:
        splits="results/{dataset}/splits.parquet",
    params:
        fractions=config["splits"]["fractions"],
        seed=config["splits"]["seed"],
    log:
        "results/logs/splits/{dataset}.log",
    benchmark:
        "results/benchmarks/splits/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/ingest/splits.py"
