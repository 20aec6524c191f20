"""Study B end to end on the real Snakefile: 16 HotpotQA questions answered by SmolLM2 without retrieval, from their
own candidate paragraphs' BM25 top 5 and from the global pool's, on every split; labels from the token-F1 scorer
for both pools, every router, the three frontiers and the audit."""

import json

import polars as pl
import pytest
import yaml
from workflow_helpers import make_workdir, planned_jobs, snakemake

from workflow_scripts.core.contracts import (
    AUDIT,
    FRONTIERS,
    GENERATIONS,
    LABELS,
    OOF_SCORES,
    QUESTIONS as QUESTIONS_TABLE,
    RUNS,
    SPLITS,
    UNITS,
)
from workflow_scripts.core.tables import read_table

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.needs_data]

QUESTIONS = 16
ROUTERS = ("ridge", "bur_linear", "bur_gbm", "entropy", "min_confidence", "bm25_top", "random", "always", "never")
KNOBBED = set(ROUTERS) - {"always", "never"}
PAIRS = ("closed_vs_candidates_f1", "closed_vs_global_f1")  # one per pool; the "contains" pairs reuse their answers
PAIR = PAIRS[0]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, project_root, shared_data):
    """The Study B experiment config, cut to 16 HotpotQA questions and short answers, run to the end."""
    folder = tmp_path_factory.mktemp("study_b")
    records = json.loads((shared_data / "hotpotqa" / "hotpot_dev_distractor_100.json").read_text())[:QUESTIONS]
    sample = folder / "hotpot_16.json"
    sample.write_text(json.dumps(records))
    config = yaml.safe_load((project_root / "experiments" / "study_b.yaml").read_text())
    config["datasets"] = {"hotpotqa": {"format": "hotpotqa", "path": str(sample)}}
    config["arms"]["bm25_candidates"].pop("datasets")  # the experiment's [hotpotqa, musique]: only hotpotqa here
    config["routing"]["pairs"] = {name: pair for name, pair in config["routing"]["pairs"].items() if name in PAIRS}
    config["models"]["generator"] = {**config["models"]["generator"], "backend": "transformers", "batch_size": 8,
                                     "sampling": {"max_new_tokens": 8}}  # 16 prompts a job: below vLLM's break-even
    config["models"]["generator"].pop("vllm")
    config["routing"]["n_splits"] = 2
    config["routing"]["routers"]["bur_gbm"] = {"kind": "bur_gbm", "min_samples_leaf": 2, "max_iter": 20}
    config["routing"]["bootstrap"] = {"resamples": 200}
    config["budgets"]["audit_splits"] = 5
    work = make_workdir(folder)
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake(work)
    return work / "results" / "hotpotqa"


def test_every_policy_is_answered_on_every_split(finished_run):
    splits = read_table(finished_run / "splits.parquet", SPLITS)
    assert set(splits["split"]) == {"dev", "calibration", "heldout"}
    for policy in ("closed_book", "bm25_candidates", "bm25_global"):
        answers = read_table(finished_run / "answers" / f"{policy}.parquet", GENERATIONS)
        assert sorted(answers["request_id"]) == sorted(splits["qid"]) and set(answers["status"]) == {"ok"}
        assert answers["min_token_prob"].is_between(0, 1).all() and (answers["sequence_logprob"] <= 0).all()
        assert (answers["evidence_in"] == (0 if policy == "closed_book" else 5)).all()


def test_each_pool_has_its_run_and_its_own_labels(finished_run):
    """bm25_candidates stays inside each question's paragraphs; bm25_global searches every question's (on these 16
    questions its top 5 happen to stay in the question's own paragraphs too, so only the candidates' bound is
    checked)."""
    units = read_table(finished_run / "units.parquet", UNITS).select("unit_id", "group_id")
    questions = read_table(finished_run / "questions.parquet", QUESTIONS_TABLE).select("qid", "group_id")
    for arm in ("bm25_candidates", "bm25_global"):
        run = read_table(finished_run / "runs" / f"{arm}.parquet", RUNS).join(units, on="unit_id")
        own = run.join(questions, on="qid", suffix="_question")
        assert arm == "bm25_global" or (own["group_id"] == own["group_id_question"]).all(), arm
        assert run.group_by("qid").len()["len"].max() == 5 and run["qid"].n_unique() == QUESTIONS
    utility = pl.read_csv(finished_run / "routing" / PAIRS[1] / "utility.csv")
    overall = utility.filter(pl.col("split") == "all").row(0, named=True)
    assert (overall["pair"], overall["n"]) == (PAIRS[1], QUESTIONS)


def test_labels_are_retrieval_utilities_and_the_distribution_adds_up(finished_run):
    routing = finished_run / "routing" / PAIR
    labels = read_table(routing / "labels.parquet", LABELS)
    assert labels.height == QUESTIONS and set(labels["delta"]) <= {-1.0, 0.0, 1.0}
    assert set(labels["outcome"]) <= {"benefit", "harm", "neutral"}
    utility = pl.read_csv(routing / "utility.csv")
    overall = utility.filter(pl.col("split") == "all").row(0, named=True)
    assert (overall["dataset"], overall["pair"], overall["measure"]) == ("hotpotqa", PAIR, "f1")
    assert overall["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and overall["without_reference"] == 0
    assert overall["n"] == QUESTIONS and overall["gains"] + overall["harms"] + overall["ties"] == QUESTIONS
    assert overall["harm_rate"] == pytest.approx((labels["delta"] < 0).mean())
    assert overall["signal_absent"] == (labels["delta"].n_unique() == 1)
    assert utility.filter(pl.col("split") != "all")["n"].sum() == QUESTIONS


def test_every_router_is_fitted_frozen_and_reported(finished_run):
    routing = finished_run / "routing" / PAIR
    features = pl.read_parquet(routing / "features.parquet")
    assert {"unc_entropy", "unc_min_prob", "unc_seq_logprob", "bm25_top1", "q_tokens"} <= set(features.columns)
    assert features.height == QUESTIONS
    oof = read_table(routing / "oof_scores.parquet", OOF_SCORES)
    assert set(oof["router"]) == set(ROUTERS)
    for _, scored in oof.group_by("router"):
        assert sorted(scored["qid"]) == sorted(read_table(finished_run / "splits.parquet", SPLITS)
                                               .filter(pl.col("split") == "dev")["qid"])
    assert {path.stem for path in (routing / "frozen").glob("*.json")} == set(ROUTERS)
    policies = pl.read_csv(routing / "policies.csv")
    assert set(policies["router"]) == set(ROUTERS)
    always = policies.filter(pl.col("router") == "always").row(0, named=True)
    never = policies.filter(pl.col("router") == "never").row(0, named=True)
    assert always["trigger_rate"] == 1.0 and never["trigger_rate"] == 0.0
    assert always["adaptive"] == always["always_on"] and never["adaptive"] == never["off"]
    comparisons = pl.read_csv(routing / "comparisons.csv")
    assert set(comparisons["router"]) == set(ROUTERS) and (comparisons["low"] <= comparisons["high"]).all()


def test_three_frontiers_and_the_audit_cover_every_budget(finished_run):
    routing = finished_run / "routing" / PAIR
    grid = yaml.safe_load((finished_run.parents[1] / "config.yaml").read_text())["budgets"]["grid"]
    frontiers = read_table(routing / "frontiers.parquet", FRONTIERS)
    assert set(frontiers["router"]) == KNOBBED
    for router in KNOBBED:
        one = frontiers.filter(pl.col("router") == router)
        assert set(one["frontier"]) == {"exact", "deployable", "conservative"}
        assert sorted(set(one["budget"])) == sorted(grid)
        exact = one.filter(pl.col("frontier") == "exact")
        assert (exact["usage"] <= exact["budget"] + 1e-12).all()
    audit = read_table(routing / "audit.parquet", AUDIT)
    assert set(audit["rule"]) == {"deployable", "conservative"} and audit.height == 2 * len(grid)
    assert (audit["combinations"] == 5 * len(KNOBBED)).all()


def test_second_run_has_nothing_to_do(finished_run):
    assert planned_jobs(finished_run.parents[1]) == {}
