# Input functions, params and targets of the rules in rules/study_c.smk (kept apart from the rules, as
# Snakemake's linter asks).


def study_c_targets(dataset):
    """Study C's tables when `study_c` runs on this dataset."""
    if config.get("study_c", {}).get("dataset") != dataset:
        return []
    return [output_of("study_c_tables", "report", dataset=dataset)]


def study_c_colbert_inputs(wildcards):
    """The corpus, plus the locally built checkpoint when ColBERT is `untrained_from` an encoder."""
    inputs = {"units": output_of("ingest", "units", dataset=wildcards.dataset)}
    if config["study_c"]["colbert"]["untrained_from"]:
        inputs["checkpoint"] = output_of("study_c_colbert_checkpoint", "checkpoint")
    return inputs


def study_c_strategy_inputs(wildcards):
    """Queries and corpus; the PLAID index (and built checkpoint) for colbert, the dense stage's files otherwise."""
    dataset = wildcards.dataset
    inputs = {
        "queries": output_of("study_c_queries", "queries", dataset=dataset),
        "units": output_of("ingest", "units", dataset=dataset),
    }
    if wildcards.strategy == "colbert":
        inputs |= {key: path for key, path in study_c_colbert_inputs(wildcards).items() if key == "checkpoint"}
        inputs["colbert_index"] = output_of("study_c_colbert_index", "index", dataset=dataset)
    else:
        inputs |= {
            "vectors": output_of("embed_units", "vectors", dataset=dataset),
            "index": output_of("index_dense", "index", dataset=dataset),
        }
    return inputs


def strategy_params(strategy):
    """What one strategy's job reads of the config: its `study_c` settings, its templates, its retriever's model."""
    colbert = strategy == "colbert"
    return {
        "settings": subset(config["study_c"], vocabulary.STRATEGY_SETTINGS[strategy]),
        "prompts": prompt_overrides(vocabulary.STRATEGY_TEMPLATES[strategy]),
        "colbert": config["study_c"]["colbert"] if colbert else None,
        "embedder": None if colbert else config["models"]["embedder"],
    }


def study_c_outputs(rule, key, wildcards):
    return [
        output_of(rule, key, dataset=wildcards.dataset, strategy=strategy)
        for strategy in config["study_c"]["strategies"]
    ]
