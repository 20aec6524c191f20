"""Leaf-level params: a rule receives only the config values it reads, so an edit reruns only the jobs that read
the edited value (and what consumes their outputs). Dry runs on a copy of the session's finished demo."""

import pytest
import yaml
from workflow_helpers import planned_jobs

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PAIR = "keep_vs_hybrid"


def overlay(work, name, settings):
    (work / f"{name}.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))  # as a user edits: keys keep their order
    return ("--configfile", f"{name}.yaml")


def test_editing_one_judge_prompt_reruns_only_the_judge_jobs_and_their_readers(demo_copy):
    # before: every job given the whole `prompts` block replanned, the generator's included (11 jobs)
    edit = overlay(demo_copy, "judge_prompt", {"prompts": {"judge_grounded": {"evidence_item": "(unit {index}) {text}"}}})
    assert planned_jobs(demo_copy, *edit) == {
        "all": 1, "judge_answers": 2, "answer_summary": 1, "review_export": 1,
        "cost_ledger": 1, "route_costs": 1, "report_figures": 1, "summary": 1,  # the ledger counts judge calls
    }


def test_editing_the_answer_prompt_does_not_touch_the_judges_params_or_retrieval(demo_copy):
    edit = overlay(demo_copy, "answer_prompt", {"prompts": {"answer_rag": {"evidence_item": "<{index}> {text}"}}})
    planned = planned_jobs(demo_copy, *edit)
    assert planned["generate_answers"] == 2
    assert not {"rerank", "run_arm", "route_labels", "route_features", "route_fit"} & set(planned)


def test_adding_a_routing_pair_reruns_nothing_of_the_other_pairs(demo_copy):
    config = yaml.safe_load((demo_copy / "config.yaml").read_text())
    pairs = dict(config["routing"]["pairs"])
    pairs["keep_vs_rrf"] = {**pairs[PAIR], "alternative": "rrf"}
    edit = overlay(demo_copy, "new_pair", {"routing": {"pairs": pairs}})
    # only the new pair's five routing jobs and the summary that lists every pair; rrf is not answered, so the
    # new pair is not costed, and the ledger (which holds no pair's own stage) stays as it is
    assert planned_jobs(demo_copy, *edit) == {
        "all": 1, "route_labels": 1, "route_features": 1, "route_fit": 1, "route_heldout": 1, "route_frontiers": 1,
        "summary": 1,
    }


def test_changing_a_price_reruns_only_cost_and_report_jobs(demo_copy):
    config = yaml.safe_load((demo_copy / "config.yaml").read_text())
    prices = {**config["costs"]["prices"], "prompt_token": config["costs"]["prices"]["prompt_token"] * 2}
    edit = overlay(demo_copy, "price", {"costs": {"prices": prices}})
    assert planned_jobs(demo_copy, *edit) == {"all": 1, "route_costs": 1, "report_figures": 1, "summary": 1}


def test_pricing_the_llms_reruns_the_cost_jobs_and_no_llm_job(demo_copy):
    usd = {"input_per_mtok": 0.15, "output_per_mtok": 0.6, "currency": "USD"}
    edit = overlay(demo_copy, "llm_prices", {"models": {"generator": {"prices": usd}, "judge": {"prices": usd}}})
    assert planned_jobs(demo_copy, *edit) == {
        "all": 1, "cost_ledger": 1, "route_costs": 1, "report_figures": 1, "summary": 1,
    }
