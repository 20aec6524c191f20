# Stage 4' — imported systems (docs/your-system.md): a RAG system that runs elsewhere enters by its output file as
# a policy (its answers, judged and compared like generated ones) and an arm (its contexts, the evidence its answers
# are judged against). Its answers and run sit where the answer and retrieval stages read a policy's and an arm's
# (`answers_of`, `run_of` in rules/common.smk).


rule import_system:
    input:
        unpack(system_inputs),
    output:
        answers="results/{dataset}/systems/{system}/answers.parquet",
        run="results/{dataset}/systems/{system}/run.parquet",
        costs="results/{dataset}/systems/{system}/costs.parquet",
    log:
        "results/logs/import_system/{dataset}_{system}.log",
    benchmark:
        "results/benchmarks/import_system/{dataset}_{system}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        systems=lambda wildcards: {
            name: subset(SYSTEMS[name], ("path", "columns", "contexts", "currency"))
            for name in [wildcards.system, *compared_with(wildcards)]
        },
    script:
        "../workflow_scripts/ingest/jobs/import_system.py"
