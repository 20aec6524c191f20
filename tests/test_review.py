"""Human review: a seeded stratified export blind to the judge, a validated import with errors naming file and
line (and the ids outside the exported sample), quadratic-weighted kappa on a hand-computed case,
design-weighted / confusion-corrected means, and prediction-powered estimates per policy and per policy pair."""

import math
from types import SimpleNamespace

import polars as pl
import pytest

from workflow_scripts.core.contracts import REVIEW_AGREEMENT, REVIEW_SHEETS
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.tables import conform, write_report
from workflow_scripts.jobs.review import judged_items_of
from workflow_scripts.judging import review

LABELS = {"correctness": (0, 2), "faithfulness": (0, 2)}


def _judgments(levels_by_policy: dict[str, list[int]]) -> pl.DataFrame:
    rows = [
        {"item_id": f"q{i}|{policy}", "policy": policy, "correctness": level, "faithfulness": 1,
         "question": f"Question {i}?", "answer": f"Answer {i}", "references": [f"ref {i}", "other"]}
        for policy, levels in levels_by_policy.items() for i, level in enumerate(levels)
    ]
    return pl.DataFrame(rows)


def test_export_is_stratified_seeded_and_blind(tmp_path):
    judgments = _judgments({"keep": [0] * 5 + [1] * 2 + [2] * 8, "hybrid": [2] * 6 + [None]})
    sheet, sample = review.export_review(judgments, LABELS, ["policy", "correctness"], 3, 7,
                                         show=["question", "answer", "references"])
    sizes = dict(sample.group_by("policy", "correctness").len().select(
        pl.concat_str("policy", pl.col("correctness").cast(pl.String), separator=":"), "len").iter_rows())
    assert sizes == {"keep:0": 3, "keep:1": 2, "keep:2": 3, "hybrid:2": 3}
    assert sheet.columns == ["item_id", "question", "answer", "references", "human_correctness",
                             "human_faithfulness", "notes"]
    assert sheet["references"][0].startswith("- ref ") and sheet["human_correctness"].null_count() == 11
    _, again = review.export_review(judgments, LABELS, ["policy", "correctness"], 3, 7, show=["question"])
    assert again["item_id"].to_list() == sample["item_id"].to_list()
    other_seed = review.review_sample(judgments, ["policy", "correctness"], 3, 8)
    assert set(other_seed["item_id"]) != set(sample["item_id"])
    shuffled = review.review_sample(judgments.reverse(), ["policy", "correctness"], 3, 7)
    assert set(shuffled["item_id"]) == set(sample["item_id"])


def test_import_round_trip_and_clear_errors(tmp_path):
    judgments = _judgments({"keep": [0, 1, 2]})
    path = tmp_path / "reviewed.csv"
    path.write_text("item_id,question,human_correctness,human_faithfulness,notes\n"
                    "q0|keep,Q?,0,,\nq2|keep,Q?, 2 ,1,looks right\n")
    reviewed = review.import_review(path, judgments, LABELS)
    assert reviewed.to_dict(as_series=False) == {
        "item_id": ["q0|keep", "q2|keep"], "human_correctness": [0, 2], "human_faithfulness": [None, 1],
    }
    path.write_text("item_id,human_correctness,human_faithfulness\n"
                    "q0|keep,3,\nq9|keep,1,1\nq0|keep,1,1\nq1|keep,good,x\n")
    with pytest.raises(InputError) as error:
        review.import_review(path, judgments, LABELS)
    message = str(error.value)
    assert str(path) in message and "1 item_ids are not in the exported review sample" in message
    assert "['q9|keep']" in message
    assert "line 2: human_correctness = '3' is not an integer from 0 to 2" in message
    assert "line 3: item_id 'q9|keep' is not in the exported sample" in message
    assert "line 4: item_id 'q0|keep' repeats" in message
    assert "line 5: human_faithfulness = 'x'" in message
    path.write_text("item_id,human_correctness,human_faithfulness\nq0|keep,3,\nq0|keep,1,1\n")
    with pytest.raises(InputError, match="2 problems"):
        review.import_review(path, judgments, LABELS)
    path.write_text("item_id,human_correctness\nq0|keep,1\n")
    with pytest.raises(InputError, match=r"missing columns \['human_faithfulness'\]"):
        review.import_review(path, judgments, LABELS)
    with pytest.raises(InputError, match="does not exist"):
        review.import_review(tmp_path / "none.csv", judgments, LABELS)


def test_quadratic_kappa_on_a_hand_computed_case():
    # judge 0,1,2,2 vs human 0,2,2,1. Observed off-diagonal cells (1,2) and (2,1), weight (i-j)^2 = 1 each: 2.
    # Marginals judge = human = (1,1,2)/4, expected counts E_ij = r_i c_j / 4; sum of (i-j)^2 E_ij = 5.5.
    # kappa = 1 - 2 / 5.5 = 7/11.
    judgments = pl.DataFrame({"item_id": ["a", "b", "c", "d"], "policy": ["p"] * 4, "correctness": [0, 1, 2, 2]})
    reviewed = pl.DataFrame({"item_id": ["a", "b", "c", "d"], "human_correctness": [0, 2, 2, 1]})
    table = review.agreement(judgments, reviewed, "correctness", (0, 2), ["policy", "correctness"])
    overall = table.filter(pl.col("group") == "all").row(0, named=True)
    assert math.isclose(overall["kappa_quadratic"], 7 / 11)
    assert overall["exact_agreement"] == 0.5 and overall["n_reviewed"] == 4


def test_stratified_and_confusion_corrected_means():
    # Policy p: judge says 2 for 6 items (2 reviewed: human 2 and 1) and 0 for 2 items (both reviewed: 0 and 1).
    # Design weights: 6/2 = 3 in stratum (p, 2), 2/2 = 1 in stratum (p, 0).
    #   stratified human mean = (3*(2+1) + 1*(0+1)) / (3*2 + 1*2) = 10/8 = 1.25; raw reviewed mean = 4/4 = 1.0
    #   E[human | judge 2] = 1.5, E[human | judge 0] = 0.5 → corrected = 6/8*1.5 + 2/8*0.5 = 1.25
    # Policy q: judge 2 for 2 items and 0 for 2 items, none reviewed → corrected = (1.5 + 0.5) / 2 = 1.0.
    judgments = _judgments({"p": [2] * 6 + [0] * 2, "q": [2, 2, 0, 0]})
    reviewed = pl.DataFrame({"item_id": ["q0|p", "q1|p", "q6|p", "q7|p"], "human_correctness": [2, 1, 0, 1]})
    table = review.agreement(judgments, reviewed, "correctness", (0, 2), ["policy", "correctness"])
    p = table.filter(pl.col("group") == "p").row(0, named=True)
    assert (p["n_population"], p["n_reviewed"], p["judge_mean"]) == (8, 4, 1.5)
    assert p["human_mean_reviewed"] == 1.0 and math.isclose(p["human_mean_stratified"], 1.25)
    assert math.isclose(p["corrected_mean"], 1.25) and p["covered_share"] == 1.0
    q = table.filter(pl.col("group") == "q").row(0, named=True)
    assert q["n_reviewed"] == 0 and q["human_mean_stratified"] is None and q["covered_share"] == 0.0
    assert math.isclose(q["corrected_mean"], 1.0) and q["kappa_quadratic"] is None
    assert table["group"].to_list() == ["all", "p", "q"]
    # PPI for p: judge mean 1.5 + 6/8 × mean(2−2, 1−2) + 2/8 × mean(0−0, 1−0) = 1.5 − 0.375 + 0.125 = 1.25;
    # 4 reviews are fewer than the default minimum of 30, so no interval; q has no review at all.
    assert math.isclose(p["ppi_mean"], 1.25) and p["ppi_low"] is None and p["ppi_status"] == "too_few_reviews: 4 < 30"
    assert q["ppi_mean"] is None and q["ppi_status"] == "unreviewed_strata: 4 of 4 items"
    assert table.filter(pl.col("group") == "all")["ppi_status"].item() == "unreviewed_strata: 4 of 12 items"
    enough = review.agreement(judgments, reviewed, "correctness", (0, 2), ["policy", "correctness"], min_reviewed=4)
    p = enough.filter(pl.col("group") == "p").row(0, named=True)
    assert p["ppi_status"] == "ok" and p["ppi_low"] < 1.25 < p["ppi_high"]


def test_ppi_difference_rows_pair_policies_on_their_shared_questions():
    # Judge p: 2, 2, 0, 0 and q: 2, 0, 0, 0 on questions q0–q3 → judge difference mean 0.5.
    # Rectifiers: p's strata (2: −1, 0; 0: 0, +1) → 0.5 × −0.5 + 0.5 × 0.5 = 0;
    #             q's strata (2: one item, 0; 0: three items, reviewed +1, 0) → 0.25 × 0 + 0.75 × 0.5 = 0.375.
    # PPI of p − q = 0.5 + 0 − 0.375 = 0.125.
    judgments = pl.DataFrame({
        "item_id": [f"q{i}|{policy}" for policy in "pq" for i in range(4)], "qid": [f"q{i}" for i in range(4)] * 2,
        "policy": ["p"] * 4 + ["q"] * 4, "correctness": [2, 2, 0, 0, 2, 0, 0, 0]})
    reviewed = pl.DataFrame({"item_id": ["q0|p", "q1|p", "q2|p", "q3|p", "q0|q", "q1|q", "q2|q"],
                             "human_correctness": [1, 2, 0, 1, 2, 1, 0]})
    table = review.agreement(judgments, reviewed, "correctness", (0, 2), ["policy", "correctness"], min_reviewed=2)
    assert table["group"].to_list() == ["all", "p", "q", "p − q"]
    pair = table.filter(pl.col("group") == "p − q").row(0, named=True)
    assert (pair["n_population"], pair["n_reviewed"], pair["judge_mean"]) == (4, 7, 0.5)
    assert math.isclose(pair["ppi_mean"], 0.125) and pair["ppi_status"] == "ok"
    assert pair["ppi_low"] < 0.125 < pair["ppi_high"] and pair["kappa_quadratic"] is None
    p = table.filter(pl.col("group") == "p").row(0, named=True)
    # every p item reviewed: no review-sampling term, the classical interval of the human scores 1, 2, 0, 1
    half = 1.959963984540054 * math.sqrt(2 / 3) / 2
    assert math.isclose(p["ppi_low"], 1.0 - half) and math.isclose(p["ppi_high"], 1.0 + half)


def _stage_inputs(tmp_path):
    """Two policies' judgments, answers and runs as the review rules read them (tables built by hand)."""
    from workflow_scripts.core.contracts import GENERATIONS, JUDGMENTS_GROUNDED, JUDGMENTS_QUALITY, QUESTIONS, RUNS, UNITS
    from workflow_scripts.core.tables import frame, write_table

    qids = [f"q{i}" for i in range(6)]
    write_table(frame([{"dataset": "d", "qid": q, "group_id": "p", "text": f"What is {q}?", "answers": [f"ref {q}"],
                        "gold_unit_ids": [], "unaligned_evidence": []} for q in qids], QUESTIONS),
                tmp_path / "questions.parquet", QUESTIONS)
    write_table(frame([{"dataset": "d", "group_id": "p", "unit_id": f"u{i}", "kind": "paragraph", "position": i,
                        "text": f"unit text {i}"} for i in range(3)], UNITS), tmp_path / "units.parquet", UNITS)
    write_table(frame([{"qid": q, "rank": r, "unit_id": f"u{r}", "score": 1.0 / r} for q in qids for r in (1, 2)],
                      RUNS), tmp_path / "keep_run.parquet", RUNS)
    paths = {"grounded": [], "quality": [], "answers": []}
    for policy in ("keep", "closed_book"):
        answers = [{"request_id": q, "key": q, "status": "ok", "source": "generated", "constrained": False,
                    "text": f"{policy} says {q}",
                    "latency_s": 0.1, "backend": "transformers", "model": "m", "device": "cpu", "evidence_in": 2,
                    "evidence_kept": 2, "evidence_truncated": False, "token_basis": "tokenizer"} for q in qids]
        grounded = [{"item_id": q, "status": "ok", "attempts": 1, "obtained": "constrained", "abstained": False,
                    "correctness": i % 3, "faithfulness": 1, "judge_model": "m"} for i, q in enumerate(qids)]
        quality = [{"item_id": q, "status": "parse_failed", "attempts": 1, "obtained": "parse_failed",
                    "judge_model": "m"}
                   for q in qids]
        for name, rows, contract in (("answers", answers, GENERATIONS), ("grounded", grounded, JUDGMENTS_GROUNDED),
                                     ("quality", quality, JUDGMENTS_QUALITY)):
            path = tmp_path / f"{policy}_{name}.parquet"
            write_table(frame(rows, contract), path, contract)
            paths[name].append(str(path))
    return {"questions": str(tmp_path / "questions.parquet"), "units": str(tmp_path / "units.parquet"), **paths,
            "policies": ["keep", "closed_book"], "runs": {"keep": str(tmp_path / "keep_run.parquet"), "closed_book": None}}


def test_review_rules_export_every_policy_and_score_a_filled_sheet(tmp_path):
    tables = _stage_inputs(tmp_path)

    class Inputs(dict):  # Snakemake's named input list: by attribute and by key
        __getattr__ = dict.__getitem__

    job = SimpleNamespace(input=Inputs({key: tables[key] for key in ("questions", "units", "answers", *review.JUDGES)}),
                          params=SimpleNamespace(policies=tables["policies"], runs=tables["runs"]))

    def items_of(judge):
        return judged_items_of(job, judge)  # what both review jobs read (workflow_scripts/jobs/review.py)

    items = items_of("grounded")
    assert items.height == 12 and set(items["policy"]) == {"keep", "closed_book"}
    keep = items.filter(pl.col("item_id") == "q1|keep").row(0, named=True)
    assert keep["evidence"] == ["unit text 1", "unit text 2"] and keep["answer"] == "keep says q1"
    assert items.filter(pl.col("item_id") == "q1|closed_book")["evidence"].to_list() == [[]]
    for judge in review.JUDGES:
        write_report(review.export_sheet(judge, items_of(judge), per_stratum=1, seed=3), tmp_path / f"{judge}.csv",
                     REVIEW_SHEETS[judge])
    sheet = pl.read_csv(tmp_path / "grounded.csv", infer_schema=False)
    assert sheet.height == 6  # one per (policy, correctness level 0/1/2)
    assert sheet.columns == ["item_id", "question", "answer", "references", "evidence", "human_correctness",
                             "human_faithfulness", "notes"]
    assert pl.read_csv(tmp_path / "quality.csv", infer_schema=False).height == 0, "parse_failed judgments are not drawn"
    filled = sheet.with_columns(pl.lit("2").alias("human_correctness"), pl.lit("1").alias("human_faithfulness"))
    reviewed = tmp_path / "filled.csv"
    filled.write_csv(reviewed)

    def agreement():
        return review.judge_agreement("grounded", items, reviewed, per_stratum=1, seed=3, min_reviewed=2, scoring="argmax")

    table = conform(agreement(), REVIEW_AGREEMENT)
    overall = table.filter((pl.col("label") == "correctness") & (pl.col("group") == "all")).row(0, named=True)
    assert overall["n_reviewed"] == 6 and overall["corrected_mean"] == 2.0 and overall["exact_agreement"] == 2 / 6
    # one review per stratum (per_stratum = 1): the estimate, but no within-stratum variance for an interval
    assert overall["ppi_mean"] == 2.0 and overall["ppi_low"] is None
    assert overall["ppi_status"] == "too_few_reviews: no stratum has two reviews"
    pair = table.filter((pl.col("label") == "correctness") & (pl.col("group") == "closed_book − keep"))
    assert pair.height == 1 and pair["ppi_mean"].item() == 0.0
    undrawn = sorted(set(items["item_id"]) - set(sheet["item_id"]))[0]
    pl.concat([filled, filled.head(1).with_columns(pl.lit(undrawn).alias("item_id"))]).write_csv(reviewed)
    with pytest.raises(InputError, match=rf"1 item_ids are not in the exported review sample.*\['{undrawn}'\]"):
        agreement()
