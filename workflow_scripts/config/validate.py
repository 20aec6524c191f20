"""Config validation: the JSON schema that documents every key, applied before any job runs.

In:  the merged config dict (config.yaml plus any --configfile / --config layers).
Out: the same dict with the schema's defaults filled in, or an `InputError` whose message names each wrong key
     (as a dotted path), the value found and what is allowed.

The schema is applied by `schema.py` (the mechanism of `snakemake.utils.validate`, Draft 2020-12, defaults filled
in, with messages a user can act on); checks a schema cannot express (files that must exist, the rules across an
LLM block's keys, which `llm.settings.engine_config` owns) follow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from workflow_scripts.core.errors import InputError
from workflow_scripts.core.schema import load_schema, problem_lines, with_defaults
from workflow_scripts.core.vocabulary import (
    CLOSED_BOOK,
    FEATURE_FAMILY,
    SCORE_ROUTERS,
    SCORERS,
    TRIGGER_STRATEGIES,
    is_closed_book_pair,
)
from workflow_scripts.ingest.adapters.registry import adapter_for
from workflow_scripts.ingest.splits import check_fractions
from workflow_scripts.retrieval.arms import first_stages
from workflow_scripts.ingest.systems import SUFFIXES as SYSTEM_SUFFIXES


def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """Validate (and fill defaults into) `config` in place; raise one InputError listing every problem."""
    schema = load_schema()
    validator = with_defaults(Draft202012Validator)(schema)
    lines = problem_lines(validator, config)
    if lines:
        raise InputError("invalid config:\n  " + "\n  ".join(lines))
    check_fractions(config["splits"]["fractions"])
    check_dataset_files(config)
    check_measures(config)
    check_models(config)
    check_arms(config)
    check_systems(config)
    check_routing(config)
    check_generation(config)
    check_study_c(config)
    check_review(config)
    check_judging(config)
    check_multistep(config)
    return config


def check_dataset_files(config: dict[str, Any]) -> None:
    """Every file a dataset names must exist (checked here so the run stops before any job)."""
    missing = [
        f"datasets.{name}.{key}: {spec[key]!r} is a folder; name the file inside it"
        if Path(spec[key]).is_dir() else f"datasets.{name}.{key}: file {spec[key]!r} does not exist"
        for name, spec in config["datasets"].items()
        for key in adapter_for(name, spec["format"])[1]
        if not Path(spec[key]).is_file()
    ]
    if missing:
        raise InputError("invalid config:\n  " + "\n  ".join(missing) + "\n  (paths are relative to the project root)")


def check_measures(config: dict[str, Any]) -> None:
    """Every evaluation measure is a name ir-measures can compute (a typo would fail only after retrieval)."""
    import ir_measures

    bad = []
    for measure in config["evaluation"]["measures"]:
        try:
            ir_measures.parse_measure(measure)
        except (NameError, ValueError) as error:
            bad.append(f"evaluation.measures: {measure!r} is not an ir-measures measure ({error})")
    if bad:
        raise InputError("invalid config:\n  " + "\n  ".join(bad) + "\n  (e.g. Success@10, RR@10, nDCG@10, R@100, AP)")
    names = {measure_name(measure) for measure in config["evaluation"]["measures"]}
    for name, reference in config["evaluation"]["references"].items():
        unknown = [measure for measure in reference["measures"] if measure_name(measure) not in names]
        if unknown:
            bad.append(f"evaluation.references.{name}.measures: {unknown} are not among evaluation.measures "
                       f"{config['evaluation']['measures']}")
        arms = [arm for arm in reference.get("arms", []) if arm not in config["arms"]]
        if arms:
            bad.append(f"evaluation.references.{name}.arms: {arms} name no arm; arms: {sorted(config['arms'])}")
    if bad:
        raise InputError("invalid config:\n  " + "\n  ".join(bad))


def measure_name(measure: str) -> str | None:
    """The measure's name as ir-measures writes it (the metrics tables' columns), None when it does not parse."""
    import ir_measures

    try:
        return str(ir_measures.parse_measure(measure))
    except (NameError, ValueError):
        return None


def check_models(config: dict[str, Any]) -> None:
    """The LLM blocks pass the engine's own validation (`engine_config`: the rules across keys, such as a server
    address for openai and a set API key variable), priced blocks share one currency, and the prompt overrides are
    well-formed templates."""
    from workflow_scripts.llm.rendering import load_templates
    from workflow_scripts.llm.settings import engine_config

    problems = []
    for role in ("generator", "judge"):
        try:
            engine_config(config["models"][role], f"models.{role}")
        except InputError as error:
            problems += str(error).splitlines()
    currencies = {f"models.{role}.prices.currency": config["models"][role]["prices"]["currency"]
                  for role in ("generator", "judge") if "prices" in config["models"][role]}
    if len(set(currencies.values())) > 1:
        problems.append(" and ".join(f"{key} = {value}" for key, value in currencies.items())
                        + ": the cost tables add the money of every priced model; price them in one currency")
    if problems:
        raise InputError("invalid config:\n  " + "\n  ".join(problems))
    load_templates(config["prompts"])


def environment_warnings(config: dict[str, Any]) -> list[str]:
    """What this environment lacks for the config, said when the config is read (rules/common.smk prints each as a
    warning; the job that needs it fails with the same words): an LLM block with backend vllm where no interpreter
    has vLLM (`./setup.sh --vllm` builds .venv-vllm). A warning, not an error: with `--software-deployment-method
    conda` the jobs run in envs/gpu.yaml, which has vLLM while the process reading the config may not."""
    from workflow_scripts.llm.backends.vllm import vllm_python
    from workflow_scripts.llm.settings import engine_config

    warnings = []
    for role in ("generator", "judge"):
        where = f"models.{role}"
        if config["models"][role]["backend"] == "vllm":
            try:
                vllm_python(engine_config(config["models"][role], where), where)
            except InputError as error:
                warnings.append(str(error))
    return warnings


def arm_problems(name: str, arm: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """What is inconsistent in one arm: sizes, its reranker, its datasets."""
    problems = []
    if arm["keep"] > arm["candidates"]:
        problems.append(f"arms.{name}.keep = {arm['keep']} is larger than candidates = {arm['candidates']}")
    if arm["first_stage"] == "hybrid" and arm["fusion_depth"] < arm["candidates"]:
        problems.append(
            f"arms.{name}.fusion_depth = {arm['fusion_depth']} is smaller than candidates = {arm['candidates']}; "
            f"fusion cannot pass on more units than it reads: set fusion_depth >= {arm['candidates']} or leave it "
            f"out (default max(100, candidates))"
        )
    rerankers = config["models"]["rerankers"]
    if arm["rerank"] is not None and arm["rerank"] not in rerankers:
        problems.append(
            f"arms.{name}.rerank = {arm['rerank']!r} names no models.rerankers entry; defined: {sorted(rerankers)}"
        )
    unknown = sorted(set(arm.get("datasets", [])) - set(config["datasets"]))
    if unknown:
        problems.append(
            f"arms.{name}.datasets: {unknown} are not configured datasets; configured: {sorted(config['datasets'])}"
        )
    return problems + run_problems(name, arm, config)


def run_problems(name: str, arm: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """An arm's imported run: named exactly when it reads one, a retrieval.runs entry, one file per dataset; `fuse`
    only on hybrid arms."""
    where = f"arms.{name}"
    if "fuse" in arm and arm["first_stage"] != "hybrid":
        return [f"{where}.fuse is set but first_stage is {arm['first_stage']!r}; only a hybrid arm fuses"]
    reads = "run" in first_stages(arm)
    if reads != ("run" in arm):
        return [f"{where}: first_stage run (or run in fuse) and a `run:` entry go together; name the retrieval.runs "
                f"entry it reads" if reads else f"{where}.run is set but the arm reads no run (first_stage run, or "
                f"run in fuse)"]
    if not reads:
        return []
    runs = config["retrieval"]["runs"]
    if arm["run"] not in runs:
        return [f"{where}.run = {arm['run']!r} names no retrieval.runs entry; defined: {sorted(runs)}"]
    datasets = arm.get("datasets", list(config["datasets"]))
    if len(datasets) > 1 and "{dataset}" not in runs[arm["run"]]["path"]:
        return [f"retrieval.runs.{arm['run']}.path has no {{dataset}} but arms.{name} runs on {len(datasets)} datasets "
                f"({sorted(datasets)}); put {{dataset}} in the path (one run file per dataset) or set "
                f"arms.{name}.datasets"]
    return []


FUSION_DEPTH_FLOOR = 100


def fill_arm_defaults(config: dict[str, Any]) -> None:
    """Defaults that depend on other keys of the same arm (a schema `default` is a constant): fusion_depth =
    max(100, candidates), so an arm with more candidates than 100 fuses at its own depth."""
    for arm in config["arms"].values():
        arm.setdefault("fusion_depth", max(FUSION_DEPTH_FLOOR, arm["candidates"]))


def check_arms(config: dict[str, Any]) -> None:
    fill_arm_defaults(config)
    problems = [problem for name, arm in config["arms"].items() for problem in arm_problems(name, arm, config)]
    if problems:
        raise InputError("invalid config:\n  " + "\n  ".join(problems))




def check_systems(config: dict[str, Any]) -> None:
    """Each imported system names a dataset that can hold its contexts, an existing file and a name no arm has; a
    `systems` dataset has at least one system."""
    problems = []
    for name, system in config["systems"].items():
        where = f"systems.{name}"
        dataset = config["datasets"].get(system["dataset"])
        if name in config["arms"] or name == CLOSED_BOOK:
            problems.append(f"{where}: the name is taken by {'an arm' if name in config['arms'] else 'closed_book'}; "
                            f"a system is a policy and an arm of its own, so rename it")
        if dataset is None:
            problems.append(f"{where}.dataset = {system['dataset']!r} names no datasets entry; datasets: "
                            f"{sorted(config['datasets'])}")
        elif (dataset["format"] == "systems") != (system["contexts"] == "texts"):
            problems.append(
                f"{where}.contexts = {system['contexts']!r} but datasets.{system['dataset']} has format "
                f"{dataset['format']!r}: contexts given as texts make a dataset of format systems; contexts given "
                f"as ids name units of a corpus dataset (any other format)")
        if not Path(system["path"]).is_file():
            problems.append(f"{where}.path: file {system['path']!r} does not exist (paths are relative to the project "
                            f"root)")
        elif Path(system["path"]).suffix not in SYSTEM_SUFFIXES:
            problems.append(f"{where}.path: {system['path']!r} must end in one of {list(SYSTEM_SUFFIXES)}")
    for name, dataset in config["datasets"].items():
        if dataset["format"] == "systems" and not any(s["dataset"] == name for s in config["systems"].values()):
            problems.append(f"datasets.{name}: format systems is made of the systems that name it, and none does "
                            f"(add systems.<name>: {{dataset: {name}, path: <its output file>}})")
    if problems:
        raise InputError("invalid config:\n  " + "\n  ".join(problems))


def system_pair_problems(name: str, pair: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """A pair between two imported systems: the same dataset, an answer scorer, features the systems have (their
    questions; an imported system reports no token uncertainty and has no BM25 probe), the abstract trigger cost."""
    where = f"routing.pairs.{name}"
    systems = config["systems"]
    problems = []
    if systems[pair["base"]]["dataset"] != systems[pair["alternative"]]["dataset"]:
        problems.append(f"{where}: systems {pair['base']!r} and {pair['alternative']!r} answer different datasets")
    if pair["measure"] not in SCORERS:
        problems.append(f"{where}.measure = {pair['measure']!r} is not an answer scorer; a pair of imported systems "
                        f"scores their answers with one of {list(SCORERS)}")
    other = [family for family in pair["features"] if family != "query_only"]
    if other:
        problems.append(f"{where}.features: {other} need the project's own retrieval or closed-book answers; a pair "
                        f"of imported systems reads query_only")
    if config["routing"].get("measured_cost"):
        problems.append(f"routing.measured_cost: pair {name!r} is between imported systems, whose cost is their own "
                        f"report (cost ledger), not stages a trigger can be priced from; use routing.cost_per_trigger")
    return problems


def study_b_problems(name: str, pair: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """A closed_book → retrieval-arm pair: a real arm, an answer scorer, no Keep-arm features (its answers come
    from models.generator, which always has a value: the schema's default is the offline SmolLM2)."""
    where = f"routing.pairs.{name}"
    problems = []
    if pair["alternative"] not in config["arms"]:
        problems.append(f"{where}.alternative = {pair['alternative']!r} names no arm (a pair with base closed_book "
                        f"needs a retrieval arm to answer from); arms: {sorted(config['arms'])}")
    if pair["measure"] not in SCORERS:
        problems.append(f"{where}.measure = {pair['measure']!r} is not an answer scorer; a pair with base closed_book "
                        f"scores answers with one of {list(SCORERS)}")
    if "base_arm" in pair["features"]:
        problems.append(f"{where}.features: 'base_arm' reads the base arm's run, but closed_book retrieves nothing "
                        f"(use query_only, uncertainty, retrieval_score)")
    return problems


def pair_problems(name: str, pair: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """What a routing pair refers to that is not configured: arms, the measure, the stages its features need."""
    if pair["base"] == pair["alternative"]:
        same = f"routing.pairs.{name}: base and alternative are the same arm {pair['base']!r}"
        return [f"{same}; a router chooses between two different policies"]
    if {pair["base"], pair["alternative"]} <= set(config["systems"]):
        return system_pair_problems(name, pair, config)
    if is_closed_book_pair(pair):
        problems = study_b_problems(name, pair, config)
    else:
        problems = [
            f"routing.pairs.{name}.{side} = {pair[side]!r} names no arm; arms: {sorted(config['arms'])}"
            for side in ("base", "alternative")
            if pair[side] not in config["arms"]
        ]
        if pair["measure"] not in config["evaluation"]["measures"]:
            problems.append(
                f"routing.pairs.{name}.measure = {pair['measure']!r} is not computed; evaluation.measures: "
                f"{config['evaluation']['measures']}"
            )
    if problems:
        return problems
    retrieval_arm = pair["alternative"] if is_closed_book_pair(pair) else pair["base"]
    scope = config["arms"][retrieval_arm]["scope"]
    families = pair["features"]
    if "uncertainty" in families and not is_closed_book_pair(pair):
        problems.append(
            f"routing.pairs.{name}.features: 'uncertainty' needs the closed-book answers (generate_answers for "
            f"policy closed_book), which only a pair with base closed_book (Study B) configures"
        )
    if "base_arm" in families and not is_closed_book_pair(pair):
        base = config["arms"][pair["base"]]
        if "dense" not in first_stages(base) or not base["rerank"]:
            problems.append(
                f"routing.pairs.{name}.features: 'base_arm' (Study A's Keep features) needs the base arm "
                f"'{pair['base']}' to rerank a dense or hybrid first stage"
            )
    bm25_scopes = {arm["scope"] for arm in config["arms"].values() if "bm25" in first_stages(arm)}
    if "retrieval_score" in families and scope not in bm25_scopes:
        problems.append(
            f"routing.pairs.{name}.features: 'retrieval_score' needs the BM25 probe, a BM25 first stage in scope "
            f"'{scope}' (add an arm that uses bm25 or hybrid there)"
        )
    return problems


ROUTER_FAMILIES = {kind: FEATURE_FAMILY[feature] for kind, (feature, _) in SCORE_ROUTERS.items()}  # what each reads
FAMILY_STAGES = {"uncertainty": "closed-book generation", "retrieval_score": "BM25 probe"}


def check_routing(config: dict[str, Any]) -> None:
    routing = config["routing"]
    problems = [problem for name, pair in routing["pairs"].items() for problem in pair_problems(name, pair, config)]
    for router, spec in routing["routers"].items():
        family = ROUTER_FAMILIES.get(spec.get("kind", router))
        lacking = [name for name, pair in routing["pairs"].items() if family and family not in pair["features"]]
        if lacking:
            problems.append(
                f"routing.routers.{router}: reads a '{family}' feature from the {FAMILY_STAGES[family]} stage, "
                f"which pairs {lacking} do not configure (add '{family}' to their features)"
            )
    if problems:
        raise InputError("invalid config:\n  " + "\n  ".join(problems))


def check_generation(config: dict[str, Any]) -> None:
    known = {CLOSED_BOOK, *config["arms"], *config["systems"]}
    unknown = [policy for policy in config["generation"]["policies"] if policy not in known]
    if unknown:
        raise InputError(
            f"invalid config:\n  generation.policies: {unknown} are neither arms, imported systems nor closed_book; "
            f"arms: {sorted(config['arms'])}, systems: {sorted(config['systems'])}"
        )


def check_review(config: dict[str, Any]) -> None:
    """Reviewed sheets name configured datasets and existing files, and answers are judged to compare them with."""
    problems = []
    for dataset, sheets in config["review"]["reviewed"].items():
        if dataset not in config["datasets"]:
            problems.append(f"review.reviewed.{dataset}: not a configured dataset ({sorted(config['datasets'])})")
        if not config["generation"]["policies"]:
            problems.append(f"review.reviewed.{dataset}: no answers are judged (generation.policies is empty)")
        problems += [
            f"review.reviewed.{dataset}.{judge}: file {path} does not exist; export the sample first "
            f"(results/{dataset}/review/{judge}_sample.csv), fill in its human_* columns and name the copy here"
            for judge, path in sheets.items()
            if not Path(path).is_file()
        ]
    if problems:
        raise InputError("invalid config:\n  " + "\n  ".join(problems))


ANSWERLESS_FORMATS = frozenset({"beir", "trec", "pool_tsv", "arxiv_metadata"})  # no reference answers to score


def check_judging(config: dict[str, Any]) -> None:
    """Judge validation needs judged answers and reference answers on every dataset it runs on."""
    if not config["judging"].get("validate"):
        return
    problems = []
    if not config["generation"]["policies"]:
        problems.append("judging.validate: no answers are judged (generation.policies is empty)")
    for name, dataset in config["datasets"].items():
        answerless = dataset["format"] in ANSWERLESS_FORMATS or (
            dataset["format"] == "unarxive" and not dataset.get("generate_questions"))
        if answerless:
            problems.append(f"judging.validate: dataset '{name}' (format {dataset['format']}) has no reference answers "
                            f"to validate the judge against; validate on a dataset with answers (qasper, hotpotqa, "
                            f"musique, twowiki, or generated questions) or remove judging.validate")
    if problems:
        raise InputError("invalid config:\n  " + "\n  ".join(problems))


def check_study_c(config: dict[str, Any]) -> None:
    """Study C: its dataset is configured, classic (the paired baseline) runs, top_k fits the rerank candidates."""
    study = config.get("study_c")
    if study is None:
        return
    problems = []
    if study["dataset"] not in config["datasets"]:
        problems.append(f"study_c.dataset: '{study['dataset']}' is not in datasets ({sorted(config['datasets'])})")
    if "classic" not in study["strategies"]:
        problems.append(f"study_c.strategies: {study['strategies']} must include classic, the paired baseline")
    if study["top_k"] > study["rerank_candidates"]:
        problems.append(
            f"study_c.top_k ({study['top_k']}) must be <= study_c.rerank_candidates ({study['rerank_candidates']})"
        )
    if problems:
        raise InputError("invalid config:\n  " + "\n  ".join(problems))


def check_multistep(config: dict[str, Any]) -> None:
    """Each multi-step policy names an existing BM25 arm without a reranker (a step searches its first stage in its
    scope), holds at least a step's units in its evidence, and runs on configured datasets."""
    problems = []
    for name, policy in config["multistep"]["policies"].items():
        where = f"multistep.policies.{name}"
        arm = config["arms"].get(policy["arm"])
        if arm is None:
            problems.append(f"{where}.arm = {policy['arm']!r} names no arms entry; defined: {sorted(config['arms'])}")
        elif arm["first_stage"] != "bm25" or arm["rerank"] is not None:
            problems.append(f"{where}.arm = {policy['arm']!r} is not a bm25 arm without a reranker (first_stage "
                            f"{arm['first_stage']}, rerank {arm['rerank']}): a step searches BM25 in the arm's scope")
        if policy["total"] < policy["per_step"]:
            problems.append(f"{where}.total = {policy['total']} is smaller than per_step = {policy['per_step']}")
        unknown = sorted(set(policy.get("datasets", [])) - set(config["datasets"]))
        if unknown:
            problems.append(f"{where}.datasets: {unknown} are not configured datasets")
        if name == CLOSED_BOOK:
            problems.append(f"{where}: {CLOSED_BOOK!r} is reserved for answering without retrieval")
        problems += trigger_problems(where, policy)
    if problems:
        raise InputError("invalid config:\n  " + "\n  ".join(problems))
    config["multistep"]["policies"] = {
        grid_name: grid_policy for name, policy in config["multistep"]["policies"].items()
        for grid_name, grid_policy in threshold_grid(name, policy).items()
    }


def trigger_problems(where: str, policy: dict[str, Any]) -> list[str]:
    """A trigger strategy (flare) needs its threshold grid (or one threshold); no other strategy takes one."""
    given = [key for key in ("thresholds", "threshold", "mask_below") if key in policy]
    if policy["strategy"] not in TRIGGER_STRATEGIES:
        return [f"{where}.{key}: only a {list(TRIGGER_STRATEGIES)} policy has a look-ahead threshold (strategy "
                f"{policy['strategy']!r})" for key in given]
    if ("thresholds" in policy) == ("threshold" in policy):
        return [f"{where}: strategy {policy['strategy']!r} needs thresholds (its grid: one policy per θ) or one "
                f"threshold"]
    return []


def threshold_grid(name: str, policy: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A flare policy with `thresholds` becomes one policy per θ, named <name>_t<100θ> (0.4 → _t40, 0.125 →
    _t12p5), each with its `threshold`: a threshold changes the path, so each is run and scored on its own."""
    if "thresholds" not in policy:
        return {name: policy}
    rest = {key: value for key, value in policy.items() if key != "thresholds"}
    return {f"{name}_t{theta * 100:g}".replace(".", "p"): rest | {"threshold": theta}
            for theta in policy["thresholds"]}
