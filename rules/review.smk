# Human review of the judges: a blind, stratified sample of every answered policy's judgments to label by hand
# (review_export), and, once a filled-in sheet is named in the config (review.reviewed), the judge–human
# agreement and judge-corrected means (review_agreement). Its input functions come first.


def review_inputs(wildcards):
    """Both judges' judgments and the answers of every policy, the runs shown as evidence, questions and units."""
    dataset = wildcards.dataset
    return {
        **{judge: judged(dataset, judge) for judge in vocabulary.JUDGES},
        "answers": [output_of("generate_answers", "answers", dataset=dataset, policy=policy) for policy in POLICIES],
        "runs": [shown for shown in shown_runs(wildcards).values() if shown],
        "questions": output_of("ingest", "questions", dataset=dataset),
        "units": output_of("ingest", "units", dataset=dataset),
    }


def shown_runs(wildcards):
    """policy → the run whose units the answer saw (None for closed_book)."""
    return {
        policy: None if policy == vocabulary.CLOSED_BOOK else output_of("run_arm", "run", dataset=wildcards.dataset, arm=policy)
        for policy in POLICIES
    }


def reviewed_sheet(wildcards):
    return config["review"]["reviewed"][wildcards.dataset][wildcards.judge]


def review_targets(dataset):
    """The review sheets wherever answers are judged, and the agreement of every sheet the config names."""
    if not answer_targets(dataset):
        return []
    reviewed = config["review"]["reviewed"].get(dataset, {})
    return [output_of("review_export", judge, dataset=dataset) for judge in vocabulary.JUDGES] + [
        output_of("review_agreement", "agreement", dataset=dataset, judge=judge) for judge in vocabulary.JUDGES if judge in reviewed
    ]


rule review_export:
    input:
        unpack(review_inputs),
    output:
        study_a="results/{dataset}/review/study_a_sample.csv",
        study_c="results/{dataset}/review/study_c_sample.csv",
    params:
        policies=POLICIES,
        runs=shown_runs,
        per_stratum=config["review"]["per_stratum"],
        seed=config["review"]["seed"],
    log:
        "results/logs/review_export/{dataset}.log",
    benchmark:
        "results/benchmarks/review_export/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/judging/review.py"


rule review_agreement:
    input:
        unpack(review_inputs),
        reviewed=reviewed_sheet,
    output:
        agreement="results/{dataset}/review/{judge}_agreement.csv",
    params:
        policies=POLICIES,
        runs=shown_runs,
    wildcard_constraints:
        judge="|".join(vocabulary.JUDGES),
    log:
        "results/logs/review_agreement/{dataset}_{judge}.log",
    benchmark:
        "results/benchmarks/review_agreement/{dataset}_{judge}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/judging/review.py"
