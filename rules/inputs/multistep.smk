# Input functions, params and targets of the rules in rules/multistep.smk (kept apart from the rules, as
# Snakemake's linter asks).


def multistep_policies(dataset):
    """Multi-step policy name → its block, for the policies that run on `dataset`."""
    policies = config["multistep"]["policies"]
    return {name: policy for name, policy in policies.items() if dataset in policy.get("datasets", DATASETS)}


def multistep_policy(wildcards):
    return config["multistep"]["policies"][wildcards.policy]


def effects_settings(wildcards):
    """The multistep keys multistep_effects reads; a trigger policy (flare) has no stop routers: its threshold grid
    is its budget (each θ a policy), and its steps are not one call each."""
    settings = subset(config["multistep"], ["scorer", "f1_threshold", "stop_rules", "stop_routers", "ridge_alphas"])
    if multistep_policy(wildcards)["strategy"] in vocabulary.TRIGGER_STRATEGIES:
        return settings | {"stop_routers": []}
    return settings


def multistep_scope(wildcards):
    """The scope a step searches: its arm's (global, or the question's group)."""
    return config["arms"][multistep_policy(wildcards)["arm"]]["scope"]


def multistep_effects_inputs(wildcards):
    """The policy's trajectories, the questions' references and grouped splits (the stop routers' frozen-threshold
    protocol) and, when the dataset answers closed_book, those answers (the extra steps are compared with answering
    without retrieval)."""
    dataset = wildcards.dataset
    inputs = {
        "trajectories": output_of("multistep_trajectories", "trajectories", dataset=dataset, policy=wildcards.policy),
        "questions": output_of("ingest", "questions", dataset=dataset),
        "splits": output_of("splits", "splits", dataset=dataset),
    }
    if vocabulary.CLOSED_BOOK in answered_policies(dataset):
        inputs["closed_book"] = output_of("generate_answers", "answers", dataset=dataset, policy=vocabulary.CLOSED_BOOK)
    return inputs


def multistep_targets(dataset):
    """Every output of multistep_effects for each multi-step policy of the dataset."""
    return [
        output_of("multistep_effects", key, dataset=dataset, policy=policy)
        for policy in multistep_policies(dataset)
        for key in rules.multistep_effects.output.keys()
    ]


def multistep_cost_sources(dataset):
    """What the cost ledger prices of retrieving again: each multi-step policy's steps (their searches, generated
    sequences and tokens, at models.generator's prices; rules/common.smk `cost_source`)."""
    generator = config["models"]["generator"]
    trajectories = {"trajectories": contracts.TRAJECTORIES}
    return [
        cost_source("multistep_trajectories", "multistep", policy, trajectories, dataset=dataset, policy=policy)
        | {"prices": generator.get("prices"), "device": generator.get("base_url") or generator.get("device", "cpu")}
        for policy in multistep_policies(dataset)
    ]
