# Input functions, params and targets of the rules in rules/ingest.smk (kept apart from the rules, as
# Snakemake's linter asks).


def dataset_files(wildcards):
    """The raw files of one dataset (its format's file keys), so editing a source file reruns ingest."""
    from workflow_scripts.ingest.adapters.registry import adapter_for

    spec = dataset_spec(wildcards)
    files = {key: spec[key] for key in adapter_for(wildcards.dataset, spec["format"])[1]}
    return files | {f"system__{name}": system["path"] for name, system in spec.get("systems", {}).items()}


def dataset_spec(wildcards):
    """The dataset's config entry as its adapter reads it; a `systems` dataset with its systems' blocks (the
    systems whose contexts are texts make it: ingest/adapters/systems.py)."""
    spec = config["datasets"][wildcards.dataset]
    if spec["format"] != "systems":
        return spec
    return spec | {
        "systems": {name: subset(system, ("path", "columns")) for name, system in systems_of(wildcards.dataset).items()}
    }


def ingest_inputs(wildcards):
    """The raw files, and the generated questions of a dataset with `generate_questions`."""
    inputs = dataset_files(wildcards)
    if "generate_questions" in config["datasets"][wildcards.dataset]:
        inputs["generated_questions"] = output_of("generate_questions", "questions", dataset=wildcards.dataset)
    return inputs


def ingest_targets(dataset):
    return [output_of("ingest", key, dataset=dataset) for key in ("units", "questions", "qrels", "report")] + [
        output_of("splits", "splits", dataset=dataset)
    ]
