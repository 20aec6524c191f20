# Input functions, params and targets of the rules in rules/review.smk (kept apart from the rules, as
# Snakemake's linter asks).


def review_inputs(wildcards):
    """Both judges' judgments and the answers of every policy, the runs shown as evidence, questions and units."""
    dataset = wildcards.dataset
    return {
        **{judge: judged(dataset, judge) for judge in vocabulary.JUDGES},
        "answers": [answers_of(dataset, policy) for policy in POLICIES],
        "runs": [shown for shown in shown_runs(wildcards).values() if shown],
        "questions": output_of("ingest", "questions", dataset=dataset),
        "units": output_of("ingest", "units", dataset=dataset),
    }


def shown_runs(wildcards):
    """policy → the run whose units the answer saw (None for closed_book)."""
    return {
        policy: (None if policy == vocabulary.CLOSED_BOOK else run_of(wildcards.dataset, policy)) for policy in POLICIES
    }


def reviewed_sheet(wildcards):
    return config["review"]["reviewed"][wildcards.dataset][wildcards.judge]


def validation_inputs(wildcards):
    """The grounded judge's judgments and the answers of every policy, the questions (references) and splits."""
    dataset = wildcards.dataset
    return {
        "grounded": judged(dataset, "grounded"),
        "answers": [answers_of(dataset, policy) for policy in POLICIES],
        "questions": output_of("ingest", "questions", dataset=dataset),
        "splits": output_of("splits", "splits", dataset=dataset),
    }


def review_targets(dataset):
    """The review sheets wherever answers are judged, the agreement of every sheet the config names, and the judge
    validation when `judging.validate` is set."""
    if not answer_targets(dataset):
        return []
    reviewed = config["review"]["reviewed"].get(dataset, {})
    validation = [output_of("judge_validation", name, dataset=dataset) for name in ("report", "figure")]
    return (
        [output_of("review_export", judge, dataset=dataset) for judge in vocabulary.JUDGES]
        + [
            output_of("review_agreement", "agreement", dataset=dataset, judge=judge)
            for judge in vocabulary.JUDGES
            if judge in reviewed
        ]
        + (validation if config["judging"].get("validate") else [])
    )
