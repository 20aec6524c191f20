# Stage 1 — ingest: raw dataset files → canonical units / questions / qrels, then grouped splits.


def dataset_files(wildcards):
    """The raw files of one dataset (its format's file keys), so editing a source file reruns ingest."""
    from workflow_scripts.ingest.adapters.registry import adapter_for

    spec = config["datasets"][wildcards.dataset]
    return {key: spec[key] for key in adapter_for(wildcards.dataset, spec["format"])[1]}


def ingest_targets(dataset):
    return [output_of("ingest", key, dataset=dataset) for key in ("units", "questions", "qrels", "report")] + [
        output_of("splits", "splits", dataset=dataset)
    ]


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
