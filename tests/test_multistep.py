"""Multi-step retrieval with a scripted generator and a word-overlap retriever (no model): steps, the answer marker
and the K cap, evidence dedupe, one batched call per step over a shrinking active set, and a stop rule replayed on the
logged trajectories equal to the same rule run online."""

import math

import numpy as np
import polars as pl
import pytest
from llm_fakes import WordTokenBackend

from workflow_scripts.core.contracts import TRAJECTORIES
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.tables import conform
from workflow_scripts.llm.templates import DEFAULTS
from workflow_scripts.multistep import effects, stops
from workflow_scripts.multistep.loop import Settings, answered_in, run_loop

UNITS = {"u1": "alpha beta", "u2": "beta gamma", "u3": "gamma delta", "u4": "delta epsilon", "u5": "alpha"}
QUESTIONS = pl.DataFrame({"qid": ["q1", "q2"], "group_id": ["g1", "g2"], "text": ["alpha", "gamma"],
                          "answers": [["epsilon"], ["beta"]]})
# q1 reasons from alpha to delta and answers at step 3; q2 never writes the marker: a forced stop at K
THOUGHTS = {"q1": ["beta then", "delta next", "So the answer is: epsilon."], "q2": ["gamma again"] * 9}
SPLITS = pl.DataFrame({"qid": ["q1", "q2"], "group_id": ["g1", "g2"], "split": ["dev", "heldout"]})
BUDGETS = {"grid": [0.25, 0.5, 0.75], "delta": 0.05}
ANSWERS = {("q1", 1): ("beta", 0.2), ("q1", 2): ("delta", 0.5), ("q1", 3): ("epsilon", 0.95),
           ("q2", 1): ("beta", 0.9), ("q2", 2): ("gamma", 0.4), ("q2", 3): ("delta", 0.3), ("q2", 4): ("zeta", 0.3)}


def retrieve(queries):
    """Units sharing a word with the query, by overlap then unit_id."""
    rows = []
    for qid, _, text in queries.iter_rows():
        words = set(text.lower().replace(".", "").split())
        hits = sorted((-len(words & set(unit.split())), unit_id) for unit_id, unit in UNITS.items()
                      if words & set(unit.split()))
        rows += [{"qid": qid, "unit_id": unit_id, "rank": rank, "score": float(-overlap)}
                 for rank, (overlap, unit_id) in enumerate(hits, 1)]
    return pl.DataFrame(rows, schema={"qid": pl.String, "unit_id": pl.String, "rank": pl.Int32, "score": pl.Float64})


class Generator:
    """Scripted replies, GENERATIONS-shaped; records each call's request ids."""

    def __init__(self):
        self.calls = []

    def __call__(self, requests):
        self.calls.append([request.request_id for request in requests])
        rows = []
        for request in requests:
            qid, step, kind = request.request_id.split("|")
            text, probability = ((THOUGHTS[qid][int(step) - 1], None) if kind == "thought"
                                 else ANSWERS[(qid, int(step))])
            rows.append({"request_id": request.request_id, "status": "ok", "text": text,
                         "mean_entropy": 1 - (probability or 0), "min_token_prob": probability,
                         "prompt_tokens": 10 * len(request.evidence), "completion_tokens": 3, "latency_s": 0.5})
        return pl.DataFrame(rows)


def run(strategy="ircot", k=4, per_step=2, total=3, stop=None, generator=None):
    return run_loop(QUESTIONS, Settings(strategy, k, per_step, total), DEFAULTS, retrieve,
                    lambda ids: {unit: UNITS[unit] for unit in ids}, generator or Generator(), stop)


def test_the_chain_stops_at_its_answer_or_at_k_and_each_step_is_one_batched_call_over_the_unfinished():
    generator = Generator()
    table = run(generator=generator)
    conform(table, TRAJECTORIES)
    steps = dict(table.group_by("qid").agg(pl.col("step").max()).iter_rows())
    assert steps == {"q1": 3, "q2": 4}
    last = {row["qid"]: row["stop"] for row in table.filter(pl.col("stop").is_not_null()).iter_rows(named=True)}
    assert last == {"q1": "answered", "q2": "cap"}  # q2 hit K without an answer: a forced stop, kept
    assert [len(call) for call in generator.calls] == [4, 4, 4, 2]  # thought + answer per unfinished question
    q1 = table.filter(pl.col("qid") == "q1").sort("step")
    assert q1["query"].to_list() == ["alpha", "beta then", "delta next"]  # ircot: the last sentence is the query
    assert answered_in(q1["thought"][-1]) == "epsilon."


def test_evidence_is_deduplicated_and_capped():
    q1 = run().filter(pl.col("qid") == "q1").sort("step")
    assert q1["unit_ids"].to_list() == [["u1", "u5"], ["u1", "u2"], ["u3", "u4"]]  # ties broken by unit_id
    assert q1["new_units"].to_list() == [2, 1, 2] and q1["added_units"].to_list() == [2, 1, 0]
    assert q1["evidence_ids"].to_list()[-1] == ["u1", "u5", "u2"]  # total = 3: first come, first kept


def test_iter_retgen_queries_the_question_with_the_last_answer_for_k_steps():
    table = run(strategy="iter_retgen", k=2)
    q2 = table.filter(pl.col("qid") == "q2").sort("step")
    assert q2["query"].to_list() == ["gamma", "gamma beta"] and q2["stop"].to_list() == [None, "cap"]
    assert (table["sequences"] == 1).all()  # the forced answer is the step's text


def test_a_stop_rule_replayed_on_the_trajectories_equals_the_rule_run_online():
    rule = stops.confident(0.9)
    online_generator = Generator()
    online = run(stop=rule, generator=online_generator)
    replayed = stops.replay(run(), rule)
    finals = online.filter(pl.col("stop").is_not_null()).sort("qid")
    assert replayed["answer"].to_list() == finals["answer"].to_list() == ["epsilon", "beta"]
    assert replayed["calls"].to_list() == finals["step"].to_list() == [3, 1]
    assert replayed["sequences"].sum() == sum(len(call) for call in online_generator.calls)
    with pytest.raises(InputError, match="cut by an online stop rule"):
        stops.replay(online, stops.fixed_k(4))


# flare: q1's look-ahead at step 2 is sure (nothing searched), at step 3 unsure in "zeta" (searched without it);
# q2's look-aheads are always unsure and name "delta" — every step searches
LOOKAHEADS = {("q1", 2): [("delta", 0.9), (" next", 0.8)], ("q1", 3): [("So the answer is:", 0.9), (" zeta", 0.1)],
              ("q2", 2): [("delta", 0.95), (" maybe", 0.2)], ("q2", 3): [("delta", 0.95), (" maybe", 0.2)]}
REWRITTEN = {("q1", 3): "So the answer is: epsilon.", ("q2", 2): "delta seen", ("q2", 3): "delta seen"}


class FlareGenerator(Generator):
    """Generator plus look-aheads with their tokens (Request.tokens) and rewritten sentences after a search."""

    def __call__(self, requests):
        self.calls.append([request.request_id for request in requests])
        rows = []
        for request in requests:
            qid, step, kind = request.request_id.split("|")
            tokens, steps = LOOKAHEADS.get((qid, int(step))), None
            if kind == "lookahead":
                assert request.tokens
                text, probability = "".join(token for token, _ in tokens), min(p for _, p in tokens)
                steps = [{"token": token, "alternatives": [{"text": token, "logprob": math.log(p)}], "complete": False,
                          "mass": None} for token, p in tokens]
            elif kind == "thought":
                text, probability = REWRITTEN.get((qid, int(step)), THOUGHTS[qid][int(step) - 1]), None
            else:
                text, probability = ANSWERS[(qid, int(step))]
            rows.append({"request_id": request.request_id, "status": "ok", "text": text, "token_steps": steps,
                         "mean_entropy": 0.5, "min_token_prob": probability, "prompt_tokens": 10,
                         "completion_tokens": 3, "latency_s": 0.5})
        return pl.DataFrame(rows)


def run_flare(threshold=0.5, k=3, stop=None, generator=None):
    return run_loop(QUESTIONS, Settings("flare", k, 2, 6, threshold), DEFAULTS, retrieve,
                    lambda ids: {unit: UNITS[unit] for unit in ids}, generator or FlareGenerator(), stop)


def test_flare_searches_only_when_its_look_ahead_is_unsure_with_the_unsure_tokens_masked():
    generator = FlareGenerator()
    table = conform(run_flare(generator=generator), TRAJECTORIES)
    q1 = table.filter(pl.col("qid") == "q1").sort("step")
    assert q1["query"].to_list() == ["alpha", None, "So the answer is:"]  # step 2 sure; step 3 without " zeta"
    assert q1["calls"].to_list() == [1, 1, 2] and q1["unit_ids"][1].to_list() == []
    assert q1["thought"].to_list() == ["beta then", "delta next", "So the answer is: epsilon."]  # sure: kept as is
    assert q1["lookahead"].to_list()[1:] == ["delta next", "So the answer is: zeta"] and q1["stop"][-1] == "answered"
    q2 = table.filter(pl.col("qid") == "q2").sort("step")
    assert q2["query"].to_list() == ["gamma", "delta", "delta"] and q2["calls"].to_list() == [1, 2, 3]
    assert q2["stop"].to_list() == [None, None, "cap"]
    # step 1: thought + answer each; steps 2-3: the look-aheads in one call, then rewrites and answers in one
    assert [len(call) for call in generator.calls] == [4, 2, 3, 2, 4]
    assert q1["sequences"].to_list() == [2, 2, 3]  # a sure step: look-ahead + answer; an unsure one rewrites too
    everything = conform(run_flare(threshold=0.05), TRAJECTORIES)  # no token below 0.05: never searches again
    assert everything.group_by("qid").agg(pl.col("calls").max())["calls"].to_list() == [1, 1]


def test_a_stop_rule_replayed_on_flare_equals_running_it_online_and_counts_its_calls():
    rule = stops.confident(0.9)
    online = run_flare(stop=rule)
    replayed = stops.replay(run_flare(), rule)
    finals = online.filter(pl.col("stop").is_not_null()).sort("qid")
    assert replayed["answer"].to_list() == finals["answer"].to_list()
    assert replayed["calls"].to_list() == finals["calls"].to_list() == [2, 1]
    wide = effects.fixed_k(effects.step_correctness(run_flare(), QUESTIONS, "em"), 3)
    assert wide.sort("qid")["calls_k=3"].to_list() == [2, 3]  # the curve's calls are searches, not steps


def test_fixed_k_curves_the_oracle_and_what_each_extra_step_rescues_and_harms():
    table = run()
    correct = effects.step_correctness(table, QUESTIONS, "em")
    wide = effects.fixed_k(correct, 4)
    q1 = wide.filter(pl.col("qid") == "q1").row(0, named=True)
    assert (q1["k=1"], q1["k=3"], q1["k=4"], q1["calls_k=4"], q1["oracle"]) == (0.0, 1.0, 1.0, 3, 1.0)
    q2 = wide.filter(pl.col("qid") == "q2").row(0, named=True)
    assert (q2["k=1"], q2["k=2"], q2["oracle"], q2["calls_oracle"]) == (1.0, 0.0, 1.0, 1)  # step 2 harmed it
    bootstrap = {"resamples": 200, "method": "percentile", "confidence": 0.95}
    curve = effects.curve(wide, 4, bootstrap, seed=1)
    assert curve["policy"].to_list() == ["k=1", "k=2", "k=3", "k=4", "oracle"]
    assert curve.filter(pl.col("policy") == "oracle")["mean"][0] == 1.0
    closed = pl.DataFrame({"qid": ["q1", "q2"], "correct": [0.0, 0.0]})
    paired = effects.comparisons(wide, 4, bootstrap, seed=1, closed_book=closed)
    step2 = paired.filter((pl.col("a") == "k=2") & (pl.col("b") == "k=1")).row(0, named=True)
    assert (step2["win"], step2["loss"]) == (0.0, 0.5)  # the second step harms q2, rescues nobody
    assert {"closed_book"} <= set(paired["b"])


def test_bad_settings_and_thresholds_name_what_is_wrong():
    with pytest.raises(InputError, match="strategy 'flare2' is unknown"):
        Settings("flare2", 3, 2, 4)
    with pytest.raises(InputError, match="need k >= 1"):
        Settings("ircot", 0, 2, 4)
    with pytest.raises(InputError, match=r"must lie in \[0, 1\]"):
        stops.confident(1.5)
    with pytest.raises(InputError, match="a threshold .* is what a .*flare.* policy needs and only it"):
        Settings("flare", 3, 2, 4)
    with pytest.raises(InputError, match="a threshold .* is what a .*flare.* policy needs and only it"):
        Settings("ircot", 3, 2, 4, 0.5)
    with pytest.raises(InputError, match=r"threshold = 1.5 must lie in \(0, 1\]"):
        Settings("flare", 3, 2, 4, 1.5)
    with pytest.raises(InputError, match="scorer 'bleu' is unknown"):
        effects.step_correctness(run(), QUESTIONS, "bleu")


def test_the_findings_give_the_curve_the_oracle_and_the_stop_rules_against_matched_calls():
    from workflow_scripts.report import findings

    bootstrap = {"resamples": 200, "method": "percentile", "confidence": 0.95}
    settings = {"scorer": "em", "f1_threshold": 0.5, "stop_rules": {"confident": [0.9], "stale": [1]},
                "stop_routers": [], "ridge_alphas": [1.0]}
    tables = effects.policy_tables(run(), QUESTIONS, None, SPLITS, 4, settings,
                                   {"bootstrap": bootstrap, "n_splits": 2}, BUDGETS, seed=1)
    assert tables["frontiers"].is_empty()  # no stop router asked for
    assert tables["stops"]["rule"].to_list() == ["chain", "confident@0.9", "stale@1"]
    found = findings.multistep_findings("ircot", tables["curve"], tables["comparisons"], tables["stops"])
    landing = findings.landing({"hotpotqa": found})
    assert landing[0] == ("Multi-step `ircot`, 2 questions: correct 0.500 with one retrieval, 0.500 at K = 4 (3.50 "
                          "calls per question); the best fixed K, k=1, 0.500; stopping each question at its best step "
                          "(the oracle, an upper bound) 1.000, headroom +0.500; 1 question reached K without an answer.")
    assert landing[1].startswith("`ircot`: no stop rule beats the fixed K at matched calls (2 replayed)")
    assert any("k=2 against k=1: rescues 0% and harms 50% of 2 questions" in finding.text for finding in found)


class CountingBackend(WordTokenBackend):
    """An engine backend that replies "beta <n>" to every prompt, counts its batches and can be killed mid-run."""

    fingerprint = "fake"
    uncertainty_basis = "full_vocabulary"

    def __init__(self, kill_on_batch=None):
        self.batches, self.kill_on_batch = [], kill_on_batch

    def complete(self, batch, sampling):
        from workflow_scripts.llm import engine as llm

        self.batches.append(len(batch))
        if len(self.batches) == self.kill_on_batch:
            raise KeyboardInterrupt("killed")
        return [llm.Outcome(text=f"beta {len(prompt.text.split())}", finish_reason="stop", prompt_tokens=9,
                            completion_tokens=2, mean_entropy=0.5, min_token_prob=0.4, sequence_logprob=-1.0,
                            latency_s=0.01) for prompt in batch]


def test_a_run_killed_mid_loop_resumes_from_the_cache_and_writes_the_same_table(tmp_path):
    """The engine's cache keeps every finished step: a rerun after a kill at step 2 generates only what was not
    finished, and its trajectories equal an uninterrupted run's."""
    from functools import partial

    from workflow_scripts.llm import engine as llm

    def loop(backend, cache):
        engine = llm.Engine(llm.engine_config({"backend": "transformers", "model": "fake"}), backend)
        return run_loop(QUESTIONS, Settings("ircot", 3, 2, 4), DEFAULTS, retrieve,
                        lambda ids: {unit: UNITS[unit] for unit in ids}, partial(llm.generate, engine=engine,
                                                                                 cache_dir=cache))

    clean_backend = CountingBackend()
    clean = loop(clean_backend, tmp_path / "clean")
    killed = CountingBackend(kill_on_batch=2)
    with pytest.raises(KeyboardInterrupt):
        loop(killed, tmp_path / "resumed")
    resumed_backend = CountingBackend()
    resumed = loop(resumed_backend, tmp_path / "resumed")
    assert resumed.drop("seconds").equals(clean.drop("seconds"))
    assert resumed_backend.batches == clean_backend.batches[1:]  # step 1 came from the cache: steps 2 and 3 only


def synthetic_paths(n=80):
    """n questions of K = 3 steps, one per group, of three kinds by i % 3: "rescued" (wrong after one retrieval,
    right after two; its first answer unsure), "harmed" (right at steps 1–2, wrong at 3; sure throughout) and
    "lost" (always wrong, half sure). Splits by i % 4: dev, dev, calibration, heldout."""
    kinds = {0: ([0, 1, 1], [0.1, 0.9, 0.9]), 1: ([1, 1, 0], [0.9, 0.95, 0.9]), 2: ([0, 0, 0], [0.5, 0.5, 0.5])}
    rows, correct = [], []
    for i in range(n):
        right, probability = kinds[i % 3]
        for step in (1, 2, 3):
            rows.append({"qid": f"q{i:03d}", "group_id": f"g{i:03d}", "step": step, "calls": step, "query": "",
                         "unit_ids": ["u"], "lookahead": None, "lookahead_min_prob": None,
                         "scores": [1.0], "new_units": 1, "added_units": 1, "evidence_ids": ["u"], "thought": "a b",
                         "answer": "x", "answer_status": "ok", "answer_entropy": 1 - probability[step - 1],
                         "answer_min_prob": probability[step - 1], "sequences": 2, "prompt_tokens": 100 * step,
                         "completion_tokens": 5, "seconds": 1.0, "stop": "cap" if step == 3 else None})
            correct.append({"qid": f"q{i:03d}", "group_id": f"g{i:03d}", "step": step,
                            "correct": float(right[step - 1])})
    splits = pl.DataFrame({"qid": [f"q{i:03d}" for i in range(n)], "group_id": [f"g{i:03d}" for i in range(n)],
                           "split": [("dev", "dev", "calibration", "heldout")[i % 4] for i in range(n)]})
    return conform(pl.DataFrame(rows), TRAJECTORIES), pl.DataFrame(correct), splits


def test_a_stop_router_spends_its_budget_of_calls_and_beats_spending_them_blindly():
    from workflow_scripts.multistep import budgets

    trajectories, correct, splits = synthetic_paths()
    bootstrap = {"resamples": 300, "method": "percentile", "confidence": 0.95}
    table, fitted = budgets.frontier_table(trajectories, correct, splits, 3, ["uncertainty", "ridge"], [0.1, 10.0],
                                           {"grid": [0.2, 0.5], "delta": 0.1}, 2, bootstrap, seed=3)
    assert fitted["ridge_alpha"] in (0.1, 10.0) and fitted["left_out"] == 0
    row = {(r["router"], r["frontier"], r["budget"]): r for r in table.iter_rows(named=True)}
    # the unsure third of the questions retrieve again once (1 + 1/3 calls): within a target of 1.4 calls
    sure = row[("uncertainty", "deployable", 0.2)]
    assert sure["target_calls"] == pytest.approx(1.4) and sure["calls"] == pytest.approx(4 / 3, abs=0.05)
    assert sure["accuracy"] == pytest.approx(2 / 3, abs=0.05) and sure["harmed"] == 0.0
    assert sure["vs_blind"] > 0 and sure["vs_blind_low"] > 0  # blind: a sixth of everyone's second step
    assert row[("ridge", "deployable", 0.2)]["accuracy"] == pytest.approx(sure["accuracy"])  # it learns the same
    exact = table.filter(pl.col("frontier") == "exact")
    assert (exact["calls"] <= exact["target_calls"] + 1e-9).all()  # tuned on held-out: never over it
    conservative, deployable = (table.filter((pl.col("frontier") == name) & (pl.col("router") == "uncertainty"))
                                for name in ("conservative", "deployable"))
    assert (conservative["calls"] <= deployable["calls"]).all()
    # K − 1 = 2 indicators share δ: the union bound's slack on 20 calibration questions
    assert conservative["epsilon"][0] == pytest.approx(math.sqrt(math.log(2 / 0.1) / (2 * 20)))


def test_budget_thresholds_stop_ties_and_k2_is_study_bs_dkw_rule():
    from workflow_scripts.multistep import budgets
    from workflow_scripts.routing.frontiers import dkw_epsilon

    pooled = np.array([0.1, 0.5, 0.5, 0.9])  # four questions, one possible extra step each
    assert budgets.threshold_for(pooled, 4, 0.5) == 0.5  # the two tied at 0.5 stop with it: 1 extra call of 2 allowed
    assert budgets.threshold_for(pooled, 4, 1.0) == -math.inf and budgets.threshold_for(pooled, 4, -0.1) == math.inf
    assert budgets.epsilon(2, 50, 10, 0.05, False) == pytest.approx(dkw_epsilon(50, 0.05))


def test_stop_router_frontiers_refuse_a_missing_split_and_a_budget_outside_its_range():
    from workflow_scripts.multistep import budgets

    trajectories, correct, splits = synthetic_paths(12)
    bootstrap = {"resamples": 50, "method": "percentile", "confidence": 0.95}
    no_heldout = splits.with_columns(pl.col("split").replace("heldout", "dev"))
    with pytest.raises(InputError, match="no scored question is in the heldout split"):
        budgets.frontier_table(trajectories, correct, no_heldout, 3, ["uncertainty"], [1.0],
                               {"grid": [0.5], "delta": 0.1}, 2, bootstrap, seed=0)
    with pytest.raises(InputError, match="budget 1.5 is outside"):
        budgets.frontier_table(trajectories, correct, splits, 3, ["uncertainty"], [1.0],
                               {"grid": [1.5], "delta": 0.1}, 2, bootstrap, seed=0)
    empty, _ = budgets.frontier_table(trajectories, correct, splits, 1, ["uncertainty"], [1.0],
                                      {"grid": [0.5], "delta": 0.1}, 2, bootstrap, seed=0)
    assert empty.is_empty()  # K = 1: no step to stop before


def test_the_findings_say_whether_a_stop_router_beats_spending_the_same_calls_blindly():
    from workflow_scripts.multistep import budgets
    from workflow_scripts.report import findings

    trajectories, correct, splits = synthetic_paths(160)  # 40 held-out: enough to pass the adjustment over 4 cells
    bootstrap = {"resamples": 300, "method": "percentile", "confidence": 0.95}
    table, _ = budgets.frontier_table(trajectories, correct, splits, 3, ["novelty", "uncertainty"], [1.0],
                                      {"grid": [0.2, 0.5], "delta": 0.1}, 2, bootstrap, seed=3)
    text = findings.frontier_finding("ircot", table).text
    assert text.startswith("`ircot`: stop router `uncertainty` at 1.40 calls per question (realized 1.3")
    assert ("against spending the same calls blindly (the best of 4 router × budget cells, p adjusted over them); "
            "held-out calls exceeded the target in 0 of 4 deployable") in text
    flat = table.filter(pl.col("router") == "novelty")  # every step brings one new unit: a score that cannot rank
    assert findings.frontier_finding("ircot", flat).text.startswith(
        "`ircot`: no stop router's frozen threshold beats spending the same calls blindly (2 router × budget cells, "
        "40 held-out questions, p adjusted over them); the closest, `novelty`")
