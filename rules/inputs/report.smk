# Input functions, params and targets of the rules in rules/report.smk (kept apart from the rules, as
# Snakemake's linter asks).


def answered_policies(dataset):
    """Policies with an answers table: generation.policies (when answered) and both sides of Study B pairs."""
    policies = list(POLICIES) if answer_targets(dataset) else []
    for name in routed_pairs(dataset):
        pair = config["routing"]["pairs"][name]
        policies += [side for side in (pair["base"], pair["alternative"]) if is_closed_book_pair(pair)]
    return sorted(set(policies))


def cost_sources(wildcards):
    """Every per-query stage instance of the dataset the ledger prices, as each stage's inputs file declares it
    (rules/inputs/retrieve.smk, rules/inputs/answer.smk). A routing pair's own stage (its features) is not among
    them: route_costs adds it (`pair_sources`)."""
    return retrieval_cost_sources(wildcards.dataset) + answer_cost_sources(wildcards.dataset)


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
        if is_closed_book_pair(pairs[name]) or {pairs[name]["base"], pairs[name]["alternative"]} <= answered
    )


def report_targets(dataset):
    """The dataset's ledger, and per costed pair its cost tables and figures (every output of report_figures and
    study_c_figures: the rules' `output:` names them once)."""
    targets = [output_of("cost_ledger", "ledger", dataset=dataset)] if arms_for(dataset) else []
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


def summary_inputs(wildcards):
    """Every table the summary reads, per dataset: generated questions, retrieval metrics, answers, routing,
    cost, Study C and the judge validation (report/summary.py recognizes each by its path's end)."""
    inputs = []
    for dataset in DATASETS:
        if "generate_questions" in config["datasets"][dataset]:
            inputs.append(output_of("generate_questions", "report", dataset=dataset))
        if arms_for(dataset):
            inputs += [
                output_of("retrieval_summary", "csv", dataset=dataset),
                output_of("cost_ledger", "stages", dataset=dataset),
            ]
        inputs += [path for path in answer_targets(dataset) if path.endswith(".csv")]
        inputs += [
            path for path in routing_targets(dataset) if path.endswith((".csv", "frontiers.parquet", "audit.parquet"))
        ]
        for pair in cost_pairs(dataset):
            inputs += [
                output_of("route_costs", key, dataset=dataset, pair=pair)
                for key in ("policies_csv", "reuse_csv", "frontiers")
            ]
        if study_c_targets(dataset):  # the tables its findings read, and all of them in Markdown
            inputs += [
                output_of("study_c_tables", key, dataset=dataset)
                for key in ("retrieval", "paired_retrieval", "paired", "quality", "report")
            ]
        if answer_targets(dataset) and config["judging"].get("validate"):  # findings and tables in Markdown
            inputs.append(output_of("judge_validation", "report", dataset=dataset))
    return inputs
