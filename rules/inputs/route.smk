# Input functions, params and targets of the rules in rules/route.smk (kept apart from the rules, as
# Snakemake's linter asks).


def route_pair(wildcards):
    return config["routing"]["pairs"][wildcards.pair]


def pair_scope(pair):
    """The scope of the pair's retrieval arm: the base arm (Study A) or the alternative (Study B); none for two
    imported systems."""
    if is_system_pair(pair):
        return None
    return config["arms"][pair["alternative"] if is_closed_book_pair(pair) else pair["base"]]["scope"]


def labels_from_answers(pair):
    """Study B's pairs and two imported systems' are labelled from their answers; Study A's from arm metrics."""
    return is_closed_book_pair(pair) or is_system_pair(pair)


def route_label_inputs(wildcards):
    """Study A: the two arms' per-query metrics. Study B: both policies' answers, the questions' references."""
    pair, dataset = route_pair(wildcards), wildcards.dataset
    inputs = {"splits": output_of("splits", "splits", dataset=dataset)}
    if labels_from_answers(pair):
        return inputs | {
            "base": answers_of(dataset, pair["base"]),
            "alternative": answers_of(dataset, pair["alternative"]),
            "questions": output_of("ingest", "questions", dataset=dataset),
        }
    return inputs | {
        "base": output_of("evaluate_arm", "metrics", dataset=dataset, arm=pair["base"]),
        "alternative": output_of("evaluate_arm", "metrics", dataset=dataset, arm=pair["alternative"]),
    }


def route_feature_inputs(wildcards):
    """What the pair's feature families read: the base arm's run and dense ranking, questions, the closed-book
    answers' token uncertainty, the BM25 probe."""
    pair, dataset = route_pair(wildcards), wildcards.dataset
    scope = pair_scope(pair)
    inputs = {
        "labels": output_of("route_labels", "labels", dataset=dataset, pair=wildcards.pair),
        "questions": output_of("ingest", "questions", dataset=dataset),
    }
    if "uncertainty" in pair["features"]:
        inputs["closed_book"] = output_of("generate_answers", "answers", dataset=dataset, policy=vocabulary.CLOSED_BOOK)
    if "base_arm" in pair["features"]:
        inputs |= {
            "base_run": output_of("run_arm", "run", dataset=dataset, arm=pair["base"]),
            "dense": output_of("retrieve_dense", "ranking", dataset=dataset, scope=scope),
            "units": output_of("ingest", "units", dataset=dataset),
        }
    if "retrieval_score" in pair["features"]:
        inputs["probe"] = output_of("retrieve_bm25", "ranking", dataset=dataset, scope=scope)
    return inputs


def pair_rankings(wildcards):
    """'<method>_<scope>' → first-stage ranking file, for the pair's reranked arms (their candidate pools)."""
    pair = route_pair(wildcards)
    arms = [config["arms"][side] for side in (pair["base"], pair["alternative"]) if side in config["arms"]]
    return ranking_files(wildcards.dataset, [arm for arm in arms if arm.get("rerank")])


def measured_cost_inputs(wildcards):
    """route_fit's extra inputs when routing.measured_cost prices a trigger: the cost ledger and the rankings
    that give each reranked arm its candidates (none with the abstract routing.cost_per_trigger)."""
    if not config["routing"].get("measured_cost"):
        return {}
    return {
        "ledger": output_of("cost_ledger", "ledger", dataset=wildcards.dataset),
        **pair_rankings(wildcards),
        **pair_source_files(wildcards),
    }


def measured_cost_settings(wildcards):
    """What cost.measured_costs reads besides the ledger, or None with the abstract cost (so that prices stay
    out of route_fit's parameters, and changing one reruns only report-level jobs)."""
    if not config["routing"].get("measured_cost"):
        return None
    return {"pair": route_pair(wildcards), **pair_costing(wildcards)}


def pair_sources(wildcards):
    """The pair's own measured stage (its features job), priced with the dataset's ledger (cost/pricing.py); its
    table's columns are the pair's feature families', and the ledger reads only `qid` (FEATURES' part)."""
    dataset, pair = wildcards.dataset, wildcards.pair
    features = {"features": contracts.FEATURES}
    return [cost_source("route_features", "table", pair, features, dataset=dataset, pair=pair)]


def pair_source_files(wildcards):
    return {
        f"pair_{source['stage']}_{index}": path
        for source in pair_sources(wildcards)
        for index, path in enumerate((*source["tables"], *source["benchmarks"]))
    }


def pair_costing(wildcards):
    """What pricing a pair's trigger reads: its two arms (only), reuse, prices, the rankings of its pools and
    its own stages."""
    pair = route_pair(wildcards)
    return {
        "arms": subset(config["arms"], [pair["base"], pair["alternative"]]),
        "reuse": config["costs"]["reuse"],
        "prices": config["costs"]["prices"],
        "rankings": pair_rankings(wildcards),
        "pair_sources": pair_sources(wildcards),
        "stages": PRICED_STAGES,
    }


def routed_pairs(dataset):
    """The routing pairs that run on `dataset`: both policies are its arms or systems (or closed_book)."""
    return [
        name
        for name, pair in config["routing"]["pairs"].items()
        if {pair["base"], pair["alternative"]} - {vocabulary.CLOSED_BOOK} <= policies_for(dataset)
    ]


def routing_targets(dataset):
    return [
        output_of(rule, key, dataset=dataset, pair=pair)
        for pair in routed_pairs(dataset)
        for rule, key in [
            ("route_labels", "utility"),
            ("route_heldout", "policies"),
            ("route_heldout", "comparisons"),
            ("route_frontiers", "frontiers"),
            ("route_frontiers", "audit"),
        ]
    ]
