# Stage 3 — routing: for each configured pair (base arm → on arm, or Study B's closed_book → a retrieval arm, whose
# labels come from the answers stage), utility labels and features, routers fitted
# on dev with grouped cross-validation and frozen, then held-out policies with bootstrap CIs, budget frontiers
# (exact / deployable / conservative) and the calibration audit.


rule route_labels:
    input:
        unpack(route_label_inputs),
    output:
        labels="results/{dataset}/routing/{pair}/labels.parquet",
        utility="results/{dataset}/routing/{pair}/utility.csv",
    log:
        "results/logs/route_labels/{dataset}_{pair}.log",
    benchmark:
        "results/benchmarks/route_labels/{dataset}_{pair}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        pair=route_pair,
        from_answers=lambda wildcards: labels_from_answers(route_pair(wildcards)),
    script:
        "../workflow_scripts/routing/jobs/route_labels.py"


rule route_features:
    input:
        unpack(route_feature_inputs),
    output:
        features="results/{dataset}/routing/{pair}/features.parquet",
    log:
        "results/logs/route_features/{dataset}_{pair}.log",
    benchmark:
        "results/benchmarks/route_features/{dataset}_{pair}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        pair=route_pair,
    script:
        "../workflow_scripts/routing/jobs/route_features.py"


rule route_fit:
    input:
        unpack(measured_cost_inputs),
        labels=rules.route_labels.output.labels,
        features=rules.route_features.output.features,
        splits=rules.splits.output.splits,
    output:
        oof="results/{dataset}/routing/{pair}/oof_scores.parquet",
        thresholds="results/{dataset}/routing/{pair}/thresholds.csv",
        frozen=expand("results/{{dataset}}/routing/{{pair}}/frozen/{router}.json", router=ROUTERS),
    log:
        "results/logs/route_fit/{dataset}_{pair}.log",
    benchmark:
        "results/benchmarks/route_fit/{dataset}_{pair}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        pair=route_pair,
        routing=subset(config["routing"], ["measured_cost", "cost_per_trigger", "n_splits", "seed"]),
        routers=config["routing"]["routers"],
        measured=measured_cost_settings,
    script:
        "../workflow_scripts/routing/jobs/route_fit.py"


rule route_heldout:
    input:
        labels=rules.route_labels.output.labels,
        features=rules.route_features.output.features,
        splits=rules.splits.output.splits,
        frozen=rules.route_fit.output.frozen,
    output:
        routed="results/{dataset}/routing/{pair}/routed.parquet",
        policies="results/{dataset}/routing/{pair}/policies.csv",
        comparisons="results/{dataset}/routing/{pair}/comparisons.csv",
    log:
        "results/logs/route_heldout/{dataset}_{pair}.log",
    benchmark:
        "results/benchmarks/route_heldout/{dataset}_{pair}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        pair=route_pair,
        routing=subset(config["routing"], ["bootstrap", "seed"]),
        routers=config["routing"]["routers"],
    script:
        "../workflow_scripts/routing/jobs/route_heldout.py"


rule route_frontiers:
    input:
        routed=rules.route_heldout.output.routed,
    output:
        frontiers="results/{dataset}/routing/{pair}/frontiers.parquet",
        audit="results/{dataset}/routing/{pair}/audit.parquet",
    log:
        "results/logs/route_frontiers/{dataset}_{pair}.log",
    benchmark:
        "results/benchmarks/route_frontiers/{dataset}_{pair}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        routers=config["routing"]["routers"],
        budgets=config["budgets"],
        seed=config["routing"]["seed"],
    script:
        "../workflow_scripts/routing/jobs/route_frontiers.py"
