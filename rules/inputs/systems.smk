# Input functions and targets of the rules in rules/systems.smk (kept apart from the rules, as Snakemake's linter
# asks).


def systems_of(dataset):
    """Name → systems block of the imported systems that answer `dataset`'s questions."""
    return {name: system for name, system in SYSTEMS.items() if system["dataset"] == dataset}


def compared_systems(dataset):
    """The dataset's systems that generation.policies compares with each other (they must answer the same
    questions)."""
    return sorted(name for name in systems_of(dataset) if name in POLICIES)


def system_inputs(wildcards):
    """The system's file, the dataset's questions (and units, for contexts given as ids) and the files of the
    systems it is compared with."""
    dataset, system = wildcards.dataset, wildcards.system
    inputs = {"file": SYSTEMS[system]["path"], "questions": output_of("ingest", "questions", dataset=dataset)}
    if SYSTEMS[system]["contexts"] == "ids":
        inputs["units"] = output_of("ingest", "units", dataset=dataset)
    return inputs | {f"compared__{name}": SYSTEMS[name]["path"] for name in compared_with(wildcards)}


def compared_with(wildcards):
    """The other systems of the dataset this one is compared with (none when it is not in generation.policies)."""
    if wildcards.system not in POLICIES:
        return []
    return [name for name in compared_systems(wildcards.dataset) if name != wildcards.system]


def system_targets(dataset):
    return [
        output_of("import_system", key, dataset=dataset, system=name)
        for name in systems_of(dataset)
        for key in ("answers", "run")
    ]


def system_cost_sources(dataset):
    """What the cost ledger records of an imported system: the latency, tokens and money its file reports."""
    return [
        cost_source("import_system", "imported", name, {"costs": contracts.SYSTEM_COSTS}, dataset=dataset, system=name)
        for name in systems_of(dataset)
    ]
