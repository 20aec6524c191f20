# Input functions, params and targets of the rules in rules/answer.smk (kept apart from the rules, as
# Snakemake's linter asks).


def answer_inputs(wildcards):
    """Questions, splits and units, plus the arm's run for a retrieval policy (closed_book reads none)."""
    dataset = wildcards.dataset
    inputs = {
        "questions": output_of("ingest", "questions", dataset=dataset),
        "splits": output_of("splits", "splits", dataset=dataset),
        "units": output_of("ingest", "units", dataset=dataset),
    }
    if wildcards.policy != vocabulary.CLOSED_BOOK:
        inputs["run"] = run_of(dataset, wildcards.policy)
    return inputs


def answer_splits(wildcards):
    """The splits a policy is answered on: generation.splits, and every split when a Study B pair labels it
    (its routers are fitted on dev, calibrated on calibration and scored on held-out)."""
    labelled = {
        side
        for pair in config["routing"]["pairs"].values()
        if is_closed_book_pair(pair)
        for side in (pair["base"], pair["alternative"])
    }
    if wildcards.policy in labelled:
        return list(vocabulary.SPLIT_ORDER)
    return config["generation"]["splits"]


def answer_templates(wildcards):
    """The overrides of the one answer template the policy renders."""
    kind = vocabulary.CLOSED_BOOK if wildcards.policy == vocabulary.CLOSED_BOOK else "retrieval"
    return prompt_overrides(vocabulary.ANSWER_TEMPLATES[kind])


def judged(dataset, judge):
    """Every policy's judgments by `judge` (vocabulary.JUDGES) on `dataset`."""
    return [output_of("judge_answers", judge, dataset=dataset, policy=policy) for policy in POLICIES]


def answer_targets(dataset):
    if not POLICIES or not set(POLICIES) - {vocabulary.CLOSED_BOOK} <= policies_for(dataset):
        return []
    return [
        output_of("answer_summary", "summary", dataset=dataset),
        output_of("answer_summary", "comparisons", dataset=dataset),
    ]


def answer_cost_sources(dataset):
    """What the cost ledger prices of answering: each answered policy's generations (their own latencies and
    tokens, at models.generator's prices) and each judged policy's judgments (at models.judge's)."""
    sources = []
    for policy in [name for name in answered_policies(dataset) if name not in SYSTEMS]:  # systems: their own costs
        answers = {"answers": contracts.GENERATIONS}
        source = cost_source("generate_answers", "generation", policy, answers, dataset=dataset, policy=policy)
        sources.append(source | {"prices": config["models"]["generator"].get("prices")})
    judge = config["models"]["judge"]
    judgments = {"grounded": contracts.JUDGMENTS_GROUNDED, "quality": contracts.JUDGMENTS_QUALITY}
    assert tuple(judgments) == vocabulary.JUDGES
    for policy in POLICIES if answer_targets(dataset) else []:
        source = cost_source("judge_answers", "judge", policy, judgments, dataset=dataset, policy=policy)
        sources.append(
            source | {"prices": judge.get("prices"), "device": judge.get("base_url") or judge.get("device", "cpu")}
        )
    return sources
