# Input functions, params and targets of the rules in rules/report.smk (kept apart from the rules, as
# Snakemake's linter asks).


def answered_policies(dataset):
    """Policies with an answers table: generation.policies (when answered) and both sides of Study B pairs."""
    policies = list(POLICIES) if answer_targets(dataset) else []
    for name in routed_pairs(dataset):
        pair = config["routing"]["pairs"][name]
        policies += [side for side in (pair["base"], pair["alternative"]) if labels_from_answers(pair)]
    return sorted(set(policies))


def cost_sources(wildcards):
    """Every per-query stage instance of the dataset the ledger prices, as each stage's inputs file declares it
    (rules/inputs/retrieve.smk, rules/inputs/answer.smk, rules/inputs/multistep.smk). A routing pair's own stage
    (its features) is not among them: route_costs adds it (`pair_sources`)."""
    return (
        retrieval_cost_sources(wildcards.dataset)
        + answer_cost_sources(wildcards.dataset)
        + multistep_cost_sources(wildcards.dataset)
        + system_cost_sources(wildcards.dataset)
    )


def cost_source_files(wildcards):
    return [path for source in cost_sources(wildcards) for path in (*source["tables"], *source["benchmarks"])]


def cost_pairs(dataset):
    """The routing pairs of the dataset a policy can be costed for: Study B's, and Study A's whose two policies
    are answered on held-out."""
    answered = set(POLICIES) if answer_targets(dataset) and "heldout" in config["generation"]["splits"] else set()
    pairs = config["routing"]["pairs"]
    return sorted(
        name
        for name in routed_pairs(dataset)
        if not is_system_pair(pairs[name])  # a system's costs are its own report, not the arms' stages
        if is_closed_book_pair(pairs[name]) or {pairs[name]["base"], pairs[name]["alternative"]} <= answered
    )


def report_targets(dataset):
    """The dataset's ledger, and per costed pair its cost tables and figures (every output of report_figures and
    study_c_figures: the rules' `output:` names them once)."""
    targets = [output_of("cost_ledger", "ledger", dataset=dataset)] if policies_for(dataset) else []
    for pair in cost_pairs(dataset):
        targets += [
            output_of("report_figures", figure, dataset=dataset, pair=pair)
            for figure in rules.report_figures.output.keys()
        ]
    if study_c_targets(dataset):
        targets += [
            output_of("study_c_figures", figure, dataset=dataset) for figure in rules.study_c_figures.output.keys()
        ]
    return targets


def summary_tables():
    """Every table and stage report the summary shows, in the order it shows them: per dataset, generated
    questions, retrieval metrics, cost per stage, answers, routing and cost per pair, multi-step policies, Study C
    and the judge validation. Each entry: its dataset, routing pair or multi-step policy ("" for a dataset-wide
    one), path, and contract (or Document), which says how the summary shows it (workflow_scripts/core/contracts.py)."""
    entries = []

    def show(dataset, rule, key, spec, pair="", wildcard="pair"):
        wildcards = {"dataset": dataset} | ({wildcard: pair} if pair else {})
        entries.append({"dataset": dataset, "pair": pair, "path": output_of(rule, key, **wildcards), "spec": spec})

    for dataset in DATASETS:
        if "generate_questions" in config["datasets"][dataset]:
            show(dataset, "generate_questions", "report", contracts.GENERATED_QUESTIONS_REPORT)
        if arms_for(dataset):
            show(dataset, "retrieval_summary", "csv", contracts.metrics_summary_report(()))
            if arms_compared(dataset):
                show(dataset, "compare_arms", "csv", contracts.ARM_COMPARISONS)
        if policies_for(dataset):
            show(dataset, "cost_ledger", "stages", contracts.COST_STAGE_TOTALS)
        if answer_targets(dataset):
            show(dataset, "answer_summary", "summary", contracts.ANSWER_SUMMARY)
            show(dataset, "answer_summary", "comparisons", contracts.COMPARISONS)
        for pair in routed_pairs(dataset):
            show(dataset, "route_labels", "utility", contracts.UTILITY_REPORT, pair)
            show(dataset, "route_heldout", "policies", contracts.ROUTER_POLICIES, pair)
            show(dataset, "route_heldout", "comparisons", contracts.ROUTER_COMPARISONS, pair)
            show(dataset, "route_frontiers", "frontiers", contracts.FRONTIERS, pair)
            show(dataset, "route_frontiers", "audit", contracts.AUDIT, pair)
        for pair in cost_pairs(dataset):
            show(dataset, "route_costs", "policies_csv", contracts.POLICY_COSTS, pair)
            show(dataset, "route_costs", "reuse_csv", contracts.REUSE_COSTS, pair)
            show(dataset, "route_costs", "frontiers", contracts.COST_FRONTIERS, pair)
        for policy in multistep_policies(dataset):
            show(dataset, "multistep_effects", "curve", contracts.MULTISTEP_CURVE, policy, "policy")
            show(dataset, "multistep_effects", "comparisons", contracts.MULTISTEP_COMPARISONS, policy, "policy")
            show(dataset, "multistep_effects", "stops", contracts.MULTISTEP_STOPS, policy, "policy")
            show(dataset, "multistep_effects", "frontiers", contracts.MULTISTEP_FRONTIERS, policy, "policy")
        if study_c_targets(dataset):  # the tables its findings read, and all of them in Markdown
            show(dataset, "study_c_tables", "retrieval", contracts.STUDY_C_RETRIEVAL)
            show(dataset, "study_c_tables", "paired_retrieval", contracts.STUDY_C_PAIRED_RETRIEVAL)
            show(dataset, "study_c_tables", "paired", contracts.STUDY_C_PAIRED)
            show(dataset, "study_c_tables", "quality", contracts.STUDY_C_QUALITY)
            show(dataset, "study_c_tables", "report", contracts.STUDY_C_REPORT)
        if answer_targets(dataset) and config["judging"].get("validate"):  # the gate of judged findings
            show(dataset, "judge_validation", "verdict", contracts.JUDGE_VERDICT)
            show(dataset, "judge_validation", "reference", contracts.REFERENCE_COMPARISONS)
            show(dataset, "judge_validation", "report", contracts.JUDGE_VALIDATION_REPORT)
    return entries


def summary_inputs(wildcards):
    return [entry["path"] for entry in summary_tables()]


def summary_specs(wildcards):
    """What the summary job knows of each input, in the same order: its dataset, routing pair and contract."""
    return [{key: entry[key] for key in ("dataset", "pair", "spec")} for entry in summary_tables()]
