# Stage 5 — cost and report: the per-query cost ledger (every stage's measured seconds, tokens and calls), what
# each routing policy costs by trigger family and budget, the report's figures (captions in report/) and
# results/summary.md. Prices and the budget grid only reach the jobs of this file and route_frontiers, so changing
# them reruns in seconds. `snakemake --report report.html` collects every figure flagged with report().

FIGURES = ["frontiers", "calibration", "outcomes", "utility", "cost_breakdown", "cost_frontiers"]
STUDY_C_FIGURES = ["metrics", "paired", "cost"]


def answered_policies(dataset):
    """Policies with an answers table: generation.policies (when answered) and both sides of Study B pairs."""
    policies = list(POLICIES) if answer_targets(dataset) else []
    for name in routed_pairs(dataset):
        pair = config["routing"]["pairs"][name]
        policies += [side for side in (pair["base"], pair["alternative"]) if is_retrieval_pair(pair)]
    return sorted(set(policies))


def cost_sources(wildcards):
    """Every per-query stage instance of the dataset: its table(s), benchmark file and device (see cost/stage.py).
    A routing pair's own stage (its features) is not among them: route_costs adds it (`pair_sources`)."""
    from workflow_scripts.retrieval.arms import first_stages

    dataset = wildcards.dataset
    arms = arms_for(dataset)
    sources = []
    methods = sorted({(method, arm["scope"]) for arm in arms.values() for method in first_stages(arm)})
    for method, scope in methods:
        device = config["models"]["embedder"]["device"] if method == "dense" else "cpu"
        sources.append({"stage": f"retrieve_{method}", "component": scope, "device": device,
                        "tables": [output_of(f"retrieve_{method}", "ranking", dataset=dataset, scope=scope)],
                        "benchmark": benchmark_of(f"retrieve_{method}", dataset=dataset, scope=scope)})
    for reranker in sorted({arm["rerank"] for arm in arms.values() if arm.get("rerank")}):
        sources.append({"stage": "rerank", "component": reranker, "device": config["models"]["rerankers"][reranker]["device"],
                        "tables": [output_of("rerank", "scores", dataset=dataset, reranker=reranker)],
                        "benchmark": benchmark_of("rerank", dataset=dataset, reranker=reranker)})
    for arm in sorted(arms):
        sources.append({"stage": "run_arm", "component": arm, "tables": [output_of("run_arm", "run", dataset=dataset, arm=arm)],
                        "benchmark": benchmark_of("run_arm", dataset=dataset, arm=arm)})
    for policy in answered_policies(dataset):
        sources.append({"stage": "generate_answers", "component": policy,
                        "tables": [output_of("generate_answers", "answers", dataset=dataset, policy=policy)],
                        "benchmark": benchmark_of("generate_answers", dataset=dataset, policy=policy)})
    judge = config["models"]["judge"]
    for policy in POLICIES if answer_targets(dataset) else []:
        sources.append({"stage": "judge_answers", "component": policy,
                        "device": judge.get("base_url") or judge.get("device", "cpu"),
                        "tables": [output_of("judge_answers", name, dataset=dataset, policy=policy) for name in vocabulary.JUDGES],
                        "benchmark": benchmark_of("judge_answers", dataset=dataset, policy=policy)})
    return sources


def cost_source_files(wildcards):
    return [path for source in cost_sources(wildcards) for path in (*source["tables"], source["benchmark"])]


def cost_pairs(dataset):
    """The routing pairs of the dataset a policy can be costed for: Study B's, and Study A's whose two policies
    are answered on held-out."""
    answered = set(POLICIES) if answer_targets(dataset) and "heldout" in config["generation"]["splits"] else set()
    pairs = config["routing"]["pairs"]
    return sorted(
        name
        for name in routed_pairs(dataset)
        if is_retrieval_pair(pairs[name]) or {pairs[name]["base"], pairs[name]["alternative"]} <= answered
    )


def report_targets(dataset):
    """The dataset's ledger, and per costed pair its cost tables and figures."""
    targets = [output_of("cost_ledger", "ledger", dataset=dataset)] if arms_for(dataset) else []
    for pair in cost_pairs(dataset):
        targets += [output_of("report_figures", figure, dataset=dataset, pair=pair) for figure in FIGURES]
    if study_c_targets(dataset):
        targets += [output_of("study_c_figures", figure, dataset=dataset) for figure in STUDY_C_FIGURES]
    return targets


def summary_inputs(wildcards):
    """Every table summary.md quotes, per dataset: retrieval metrics, answers, routing and cost."""
    inputs = []
    for dataset in DATASETS:
        if arms_for(dataset):
            inputs += [output_of("retrieval_summary", "csv", dataset=dataset), output_of("cost_ledger", "stages", dataset=dataset)]
        inputs += [path for path in answer_targets(dataset) if path.endswith(".csv")]
        inputs += [path for path in routing_targets(dataset) if path.endswith((".csv", "audit.parquet"))]
        for pair in cost_pairs(dataset):
            inputs += [output_of("route_costs", key, dataset=dataset, pair=pair) for key in ("policies_csv", "reuse_csv", "frontiers")]
        inputs += study_c_targets(dataset)  # its tables in Markdown, quoted as they are
    return inputs


rule cost_ledger:
    input:
        cost_source_files,
        questions=rules.ingest.output.questions,
    output:
        ledger="results/{dataset}/cost/ledger.parquet",
        stages="results/{dataset}/cost/stages.csv",
    params:
        sources=cost_sources,
    log:
        "results/logs/cost_ledger/{dataset}.log",
    benchmark:
        "results/benchmarks/cost_ledger/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/cost/stage.py"


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
    params:
        pair=route_pair,
        costing=pair_costing,
        budgets=config["budgets"],
    log:
        "results/logs/route_costs/{dataset}_{pair}.log",
    benchmark:
        "results/benchmarks/route_costs/{dataset}_{pair}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/cost/stage.py"


rule report_figures:
    input:
        routed=rules.route_heldout.output.routed,
        frontiers=rules.route_frontiers.output.frontiers,
        audit=rules.route_frontiers.output.audit,
        policies=rules.route_costs.output.policies,
        cost_frontiers=rules.route_costs.output.frontiers,
    output:
        frontiers=report("results/{dataset}/report/{pair}/frontiers.png", caption="../report/frontiers.rst",
                         category="{dataset}", subcategory="{pair}", labels={"figure": "frontiers"}),
        calibration=report("results/{dataset}/report/{pair}/calibration.png", caption="../report/calibration.rst",
                           category="{dataset}", subcategory="{pair}", labels={"figure": "calibration"}),
        outcomes=report("results/{dataset}/report/{pair}/outcomes.png", caption="../report/outcomes.rst",
                        category="{dataset}", subcategory="{pair}", labels={"figure": "outcomes"}),
        utility=report("results/{dataset}/report/{pair}/utility.png", caption="../report/utility.rst",
                       category="{dataset}", subcategory="{pair}", labels={"figure": "utility"}),
        cost_breakdown=report("results/{dataset}/report/{pair}/cost_breakdown.png", caption="../report/cost_breakdown.rst",
                              category="{dataset}", subcategory="{pair}", labels={"figure": "cost_breakdown"}),
        cost_frontiers=report("results/{dataset}/report/{pair}/cost_frontiers.png", caption="../report/cost_frontiers.rst",
                              category="{dataset}", subcategory="{pair}", labels={"figure": "cost_frontiers"}),
    log:
        "results/logs/report_figures/{dataset}_{pair}.log",
    benchmark:
        "results/benchmarks/report_figures/{dataset}_{pair}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/report/stage.py"


rule summary:
    input:
        summary_inputs,
    output:
        summary=report("results/summary.md", caption="../report/summary.rst", category="Tables"),
    params:
        datasets=DATASETS,
    log:
        "results/logs/summary/summary.log",
    benchmark:
        "results/benchmarks/summary/summary.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/report/stage.py"


# The ledger reads `answers/<policy>_study_a.parquet`, which the policy wildcard of generate_answers also matches
# (policy = "<policy>_study_a"); the judge rule is the one that writes it.
ruleorder: judge_answers > generate_answers


# Study C (only when configured): per-metric bars, the paired-delta forest plot and cost per strategy.
rule study_c_figures:
    input:
        quality=lambda wildcards: output_of("study_c_tables", "quality", dataset=wildcards.dataset),
        paired=lambda wildcards: output_of("study_c_tables", "paired", dataset=wildcards.dataset),
        cost=lambda wildcards: output_of("study_c_tables", "cost", dataset=wildcards.dataset),
    output:
        metrics=report("results/{dataset}/report/study_c/metrics.png", caption="../report/study_c_metrics.rst",
                       category="{dataset}", subcategory="study_c", labels={"figure": "metrics"}),
        paired=report("results/{dataset}/report/study_c/paired.png", caption="../report/study_c_paired.rst",
                      category="{dataset}", subcategory="study_c", labels={"figure": "paired"}),
        cost=report("results/{dataset}/report/study_c/cost.png", caption="../report/study_c_cost.rst",
                    category="{dataset}", subcategory="study_c", labels={"figure": "cost"}),
    log:
        "results/logs/study_c_figures/{dataset}.log",
    benchmark:
        "results/benchmarks/study_c_figures/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/report/stage.py"
