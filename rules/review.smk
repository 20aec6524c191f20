# Human review of the judges: a blind, stratified sample of every answered policy's judgments to label by hand
# (review_export), and, once a filled-in sheet is named in the config (review.reviewed), the judge–human
# agreement and judge-corrected means (review_agreement). Its input functions: rules/inputs/review.smk.


rule review_export:
    input:
        unpack(review_inputs),
    output:
        grounded="results/{dataset}/review/grounded_sample.csv",
        quality="results/{dataset}/review/quality_sample.csv",
    log:
        "results/logs/review_export/{dataset}.log",
    benchmark:
        "results/benchmarks/review_export/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        policies=POLICIES,
        runs=shown_runs,
        per_stratum=config["review"]["per_stratum"],
        seed=config["review"]["seed"],
    script:
        "../workflow_scripts/judging/jobs/review_export.py"


rule review_agreement:
    input:
        unpack(review_inputs),
        reviewed=reviewed_sheet,
    output:
        agreement="results/{dataset}/review/{judge}_agreement.csv",
    log:
        "results/logs/review_agreement/{dataset}_{judge}.log",
    benchmark:
        "results/benchmarks/review_agreement/{dataset}_{judge}.tsv"
    wildcard_constraints:
        judge="|".join(vocabulary.JUDGES),
    conda:
        "../envs/cpu.yaml"
    params:
        policies=POLICIES,
        runs=shown_runs,
        per_stratum=config["review"]["per_stratum"],
        seed=config["review"]["seed"],
        ppi_min_reviewed=config["review"]["ppi_min_reviewed"],
        scoring=config["judging"]["scoring"],
    script:
        "../workflow_scripts/judging/jobs/review_agreement.py"


rule judge_validation:
    input:
        unpack(validation_inputs),
    output:
        agreement="results/{dataset}/judging/agreement.csv",
        replay="results/{dataset}/judging/ppi_replay.csv",
        judged="results/{dataset}/judging/items.parquet",
        report="results/{dataset}/judging/report.md",
        figure="results/{dataset}/judging/validation.png",
        verdict="results/{dataset}/judging/verdict.csv",
        reference="results/{dataset}/judging/reference_comparisons.csv",
    log:
        "results/logs/judge_validation/{dataset}.log",
    benchmark:
        "results/benchmarks/judge_validation/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        policies=POLICIES,
        validate=config["judging"].get("validate"),
        scoring=config["judging"]["scoring"],
        bootstrap=config["routing"]["bootstrap"],
    script:
        "../workflow_scripts/judging/jobs/judge_validation.py"
