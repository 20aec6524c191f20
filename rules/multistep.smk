# Multi-step retrieval (config `multistep`): each multi-step policy retrieves again, one step at a time, for every question
# (one batched generation call and one batched search per step over the unfinished questions; a forced answer at
# every step), then its effects: what each extra step rescues and harms, fixed-K curves, the oracle stop, the stop
# rules replayed on the logged trajectories and the stop routers' budget frontiers over retrieval calls. Its input
# functions: rules/inputs/multistep.smk.


rule multistep_trajectories:
    input:
        questions=rules.ingest.output.questions,
        units=rules.ingest.output.units,
        index=rules.index_bm25.output.index,
    output:
        trajectories="results/{dataset}/multistep/{policy}/trajectories.parquet",
    log:
        "results/logs/multistep_trajectories/{dataset}_{policy}.log",
    benchmark:
        "results/benchmarks/multistep_trajectories/{dataset}_{policy}.tsv"
    conda:
        llm_env("generator")
    threads: MODEL_THREADS
    params:
        policy=multistep_policy,
        scope=multistep_scope,
        bm25=config["retrieval"]["bm25"],
        generator=llm_block("generator"),
        prompts=prompt_overrides(vocabulary.MULTISTEP_TEMPLATES),
        cache=LLM_CACHE,
        model_cache=MODEL_CACHE,
    script:
        "../workflow_scripts/multistep/jobs/multistep_trajectories.py"


rule multistep_effects:
    input:
        unpack(multistep_effects_inputs),
    output:
        curve="results/{dataset}/multistep/{policy}/curve.csv",
        comparisons="results/{dataset}/multistep/{policy}/comparisons.csv",
        stops="results/{dataset}/multistep/{policy}/stops.csv",
        frontiers="results/{dataset}/multistep/{policy}/frontiers.csv",
    log:
        "results/logs/multistep_effects/{dataset}_{policy}.log",
    benchmark:
        "results/benchmarks/multistep_effects/{dataset}_{policy}.tsv"
    conda:
        "../envs/cpu.yaml"
    params:
        k=lambda wildcards: multistep_policy(wildcards)["k"],
        settings=effects_settings,
        routing=subset(config["routing"], ["bootstrap", "n_splits"]),
        budgets=subset(config["budgets"], ["grid", "delta", "heldout_term"]),
        seed=config["routing"]["seed"],
    script:
        "../workflow_scripts/multistep/jobs/multistep_effects.py"
