# Stage 5 — cost and report: the per-query cost ledger (every stage's measured seconds, tokens and calls), what
# each routing policy costs by trigger family and budget, the report's figures (captions in report/) and
# results/summary_<name>.md. Prices and the budget grid only reach the jobs of this file and route_frontiers, so changing
# them reruns in seconds. `snakemake --report report.html` collects every figure flagged with report().


rule cost_ledger:
    input:
        cost_source_files,
        questions=rules.ingest.output.questions,
    output:
        ledger="results/{dataset}/cost/ledger.parquet",
        stages="results/{dataset}/cost/stages.csv",
    log:
        "results/logs/cost_ledger/{dataset}.log",
    benchmark:
        "results/benchmarks/cost_ledger/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        sources=cost_sources,
    script:
        "../workflow_scripts/cost/jobs/cost_ledger.py"


rule route_costs:
    input:
        unpack(pair_rankings),
        unpack(pair_source_files),
        ledger=rules.cost_ledger.output.ledger,
        routed=rules.route_heldout.output.routed,
        frontiers=rules.route_frontiers.output.frontiers,
        frozen=rules.route_fit.output.frozen,
    output:
        policies="results/{dataset}/cost/{pair}/policy_costs.parquet",
        policies_csv="results/{dataset}/cost/{pair}/policy_costs.csv",
        frontiers="results/{dataset}/cost/{pair}/cost_frontiers.parquet",
        reuse="results/{dataset}/cost/{pair}/reuse.parquet",
        reuse_csv="results/{dataset}/cost/{pair}/reuse.csv",
    log:
        "results/logs/route_costs/{dataset}_{pair}.log",
    benchmark:
        "results/benchmarks/route_costs/{dataset}_{pair}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        pair=route_pair,
        costing=pair_costing,
        budgets=config["budgets"],
    script:
        "../workflow_scripts/routing/jobs/route_costs.py"


rule report_figures:
    input:
        routed=rules.route_heldout.output.routed,
        frontiers=rules.route_frontiers.output.frontiers,
        audit=rules.route_frontiers.output.audit,
        policies=rules.route_costs.output.policies,
        cost_frontiers=rules.route_costs.output.frontiers,
    output:
        frontiers=report(
            "results/{dataset}/report/{pair}/frontiers.png",
            caption="../report/frontiers.rst",
            category="{dataset}",
            subcategory="{pair}",
            labels={"figure": "frontiers"},
        ),
        calibration=report(
            "results/{dataset}/report/{pair}/calibration.png",
            caption="../report/calibration.rst",
            category="{dataset}",
            subcategory="{pair}",
            labels={"figure": "calibration"},
        ),
        outcomes=report(
            "results/{dataset}/report/{pair}/outcomes.png",
            caption="../report/outcomes.rst",
            category="{dataset}",
            subcategory="{pair}",
            labels={"figure": "outcomes"},
        ),
        utility=report(
            "results/{dataset}/report/{pair}/utility.png",
            caption="../report/utility.rst",
            category="{dataset}",
            subcategory="{pair}",
            labels={"figure": "utility"},
        ),
        cost_breakdown=report(
            "results/{dataset}/report/{pair}/cost_breakdown.png",
            caption="../report/cost_breakdown.rst",
            category="{dataset}",
            subcategory="{pair}",
            labels={"figure": "cost_breakdown"},
        ),
        cost_frontiers=report(
            "results/{dataset}/report/{pair}/cost_frontiers.png",
            caption="../report/cost_frontiers.rst",
            category="{dataset}",
            subcategory="{pair}",
            labels={"figure": "cost_frontiers"},
        ),
    log:
        "results/logs/report_figures/{dataset}_{pair}.log",
    benchmark:
        "results/benchmarks/report_figures/{dataset}_{pair}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/report/jobs/report_figures.py"


rule summary:
    input:
        summary_inputs,
    output:
        summary=report(f"results/summary_{config['name']}.md", caption="../report/summary.rst", category="Tables"),
        pages=[f"results/summary_{config['name']}/{dataset}.md" for dataset in DATASETS],
        findings=f"results/summary_{config['name']}/findings.rst",  # the report's landing page includes it
    log:
        "results/logs/summary/summary.log",
    benchmark:
        "results/benchmarks/summary/summary.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        tables=summary_specs,
        partial_error_share=config["generation"]["partial_error_share"],
        routers=config["routing"]["routers"],
        references=config["evaluation"]["references"],
        datasets=DATASETS,
        name=config["name"],
    script:
        "../workflow_scripts/report/jobs/summary.py"


# Study C (only when configured): per-metric bars, the paired-delta forest plot and cost per strategy.
rule study_c_figures:
    input:
        quality=lambda wildcards: output_of("study_c_tables", "quality", dataset=wildcards.dataset),
        paired=lambda wildcards: output_of("study_c_tables", "paired", dataset=wildcards.dataset),
        cost=lambda wildcards: output_of("study_c_tables", "cost", dataset=wildcards.dataset),
    output:
        metrics=report(
            "results/{dataset}/report/study_c/metrics.png",
            caption="../report/study_c_metrics.rst",
            category="{dataset}",
            subcategory="study_c",
            labels={"figure": "metrics"},
        ),
        paired=report(
            "results/{dataset}/report/study_c/paired.png",
            caption="../report/study_c_paired.rst",
            category="{dataset}",
            subcategory="study_c",
            labels={"figure": "paired"},
        ),
        cost=report(
            "results/{dataset}/report/study_c/cost.png",
            caption="../report/study_c_cost.rst",
            category="{dataset}",
            subcategory="study_c",
            labels={"figure": "cost"},
        ),
    log:
        "results/logs/study_c_figures/{dataset}.log",
    benchmark:
        "results/benchmarks/study_c_figures/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/report/jobs/study_c_figures.py"
