# Stage 4 — answers: each configured policy (an arm's top-K units, or closed_book) is answered by the generator
# and judged by both judges in batches through the cached LLM engine; a summary compares the policies. The two
# policies of a Study B routing pair are answered on every split (its labels need dev, calibration and held-out);
# judging stays on generation.splits.


rule generate_answers:
    input:
        unpack(answer_inputs),
    output:
        answers=sharded("generate_answers", "results/{dataset}/answers/{policy}.parquet", contracts.GENERATIONS),
    log:
        sharded("generate_answers", "results/logs/generate_answers/{dataset}_{policy}.log"),
    benchmark:
        sharded("generate_answers", "results/benchmarks/generate_answers/{dataset}_{policy}.tsv")
    conda:
        llm_env("generator")
    threads: MODEL_THREADS
    params:
        generator=llm_block("generator"),
        prompts=answer_templates,
        splits=answer_splits,
        cache=LLM_CACHE,
        model_cache=MODEL_CACHE,
    script:
        "../workflow_scripts/answers/jobs/generate_answers.py"


rule judge_answers:
    input:
        unpack(answer_inputs),
        answers=lambda wildcards: answers_of(wildcards.dataset, wildcards.policy),
    output:
        grounded=sharded(
            "judge_answers", "results/{dataset}/judgments/{policy}_grounded.parquet", contracts.JUDGMENTS_GROUNDED
        ),
        quality=sharded(
            "judge_answers", "results/{dataset}/judgments/{policy}_quality.parquet", contracts.JUDGMENTS_QUALITY
        ),
    log:
        sharded("judge_answers", "results/logs/judge_answers/{dataset}_{policy}.log"),
    benchmark:
        sharded("judge_answers", "results/benchmarks/judge_answers/{dataset}_{policy}.tsv")
    conda:
        llm_env("judge")
    threads: MODEL_THREADS
    params:
        judge=llm_block("judge"),
        max_reasks=config["generation"]["judge_reasks"],
        prompts=prompt_overrides(vocabulary.JUDGE_TEMPLATES),
        splits=config["generation"]["splits"],
        cache=LLM_CACHE,
        model_cache=MODEL_CACHE,
    script:
        "../workflow_scripts/answers/jobs/judge_answers.py"


rule answer_summary:
    input:
        grounded=lambda wildcards: judged(wildcards.dataset, "grounded"),
        quality=lambda wildcards: judged(wildcards.dataset, "quality"),
        answers=lambda wildcards: [answers_of(wildcards.dataset, policy) for policy in POLICIES],
        splits=rules.splits.output.splits,
    output:
        summary="results/{dataset}/answers/summary.csv",
        comparisons="results/{dataset}/answers/comparisons.csv",
    log:
        "results/logs/answer_summary/{dataset}.log",
    benchmark:
        "results/benchmarks/answer_summary/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        policies=POLICIES,
        scoring=config["judging"]["scoring"],
        bootstrap=config["routing"]["bootstrap"],
        seed=config["routing"]["seed"],
    script:
        "../workflow_scripts/answers/jobs/answer_summary.py"
