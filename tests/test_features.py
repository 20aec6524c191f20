"""Router features: Study A's six Keep-arm features on a hand-made run, query-only, uncertainty, probe scores."""

import polars as pl
import pytest

from workflow_scripts.core.contracts import FEATURES
from workflow_scripts.core.tables import ContractError, conform
from workflow_scripts.core.vocabulary import (
    FEATURE_FAMILY,
    KEEP_FEATURE_NAMES,
    PROBE_FEATURE_NAMES,
    QUERY_FEATURE_NAMES,
    UNCERTAINTY_FEATURE_NAMES,
)
from workflow_scripts.core.errors import InputError
from workflow_scripts.routing.features import (
    combine,
    family_columns,
    keep_features,
    probe_features,
    query_features,
    uncertainty_features,
)

# q1: 12 units, vector cosines 0.90, 0.80, 0.75, 0.70, 0.65, then 0.60 down by 0.05. The reranker puts u12
# (vector rank 12) first, then u1..u8, then u11. q2: three units, the first two tied at cosine 0.5.
Q1_COSINES = [0.90, 0.80, 0.75, 0.70, 0.65, 0.60, 0.55, 0.50, 0.45, 0.40, 0.35, 0.30]
DENSE = pl.DataFrame({
    "qid": ["q1"] * 12 + ["q2"] * 3,
    "unit_id": [f"u{i}" for i in range(1, 13)] + ["v1", "v2", "v3"],
    "rank": list(range(1, 13)) + [1, 2, 3],
    "score": Q1_COSINES + [0.5, 0.5, 0.2],
})
Q1_FINAL = ["u12", "u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u11"]
RUN = pl.DataFrame({
    "qid": ["q1"] * 10 + ["q2"] * 3,
    "rank": list(range(1, 11)) + [1, 2, 3],
    "unit_id": Q1_FINAL + ["v2", "v3", "v1"],
})
CAPTIONS = {"u12", "u3", "v3"}
UNITS = pl.DataFrame({
    "unit_id": DENSE["unit_id"],
    "kind": ["caption" if unit in CAPTIONS else "paragraph" for unit in DENSE["unit_id"]],
})


def test_keep_features_match_hand_computation():
    features = conform(keep_features(RUN, DENSE, UNITS), FEATURES.select("qid", *KEEP_FEATURE_NAMES))
    q1, q2 = features.rows(named=True)
    assert q1["top1_cos"] == 0.90
    assert q1["gap12_cos"] == pytest.approx(0.10)
    assert q1["mean_top5_cos"] == pytest.approx((0.90 + 0.80 + 0.75 + 0.70 + 0.65) / 5)
    assert q1["overlap_top10"] == 8  # u1..u8; u12 and u11 are outside the vector top-10
    assert q1["rerank_top1_vector_rank"] == 11  # u12 sits at vector rank 12
    assert q1["caption_share"] == pytest.approx(0.2)  # u12 and u3 of 10
    assert (q2["top1_cos"], q2["gap12_cos"]) == (0.5, 0.0)
    assert q2["mean_top5_cos"] == pytest.approx(0.4)  # only three units
    assert (q2["overlap_top10"], q2["rerank_top1_vector_rank"]) == (3, 2)
    assert q2["caption_share"] == pytest.approx(1 / 3)


def test_run_dense_rank_must_agree_with_the_dense_ranking():
    agreeing = RUN.join(DENSE.select("qid", "unit_id", pl.col("rank").alias("dense_rank")), on=["qid", "unit_id"])
    assert keep_features(agreeing, DENSE, UNITS).equals(keep_features(RUN, DENSE, UNITS))
    wrong = agreeing.with_columns(pl.when(pl.col("unit_id") == "u1").then(5).otherwise(pl.col("dense_rank"))
                                  .alias("dense_rank"))
    with pytest.raises(InputError, match="disagrees with the dense ranking"):
        keep_features(wrong, DENSE, UNITS)


def test_missing_dense_ranking_or_unit_kind_is_refused():
    with pytest.raises(InputError, match=r"queries \['q2'\]"):
        keep_features(RUN, DENSE.filter(pl.col("qid") == "q1"), UNITS)
    with pytest.raises(InputError, match="not in the units table"):
        keep_features(RUN, DENSE, UNITS.filter(pl.col("unit_id") != "v1"))


def test_query_features():
    questions = pl.DataFrame({"qid": ["a", "b", "c", "d"], "text": [
        "How many layers does BERT-Large have in 2019?",
        "Is the Eiffel Tower in Paris?",
        "The director of Jaws was born in which city?",
        "Name the author.",
    ]})
    rows = {row["qid"]: row for row in conform(query_features(questions), FEATURES.select("qid", *QUERY_FEATURE_NAMES)).iter_rows(named=True)}
    assert (rows["a"]["q_tokens"], rows["a"]["q_has_digits"], rows["a"]["q_capitalized"]) == (9, 1, 2)
    assert rows["a"]["qword_how"] == 1 and sum(v for k, v in rows["a"].items() if k.startswith("qword_")) == 1
    assert (rows["b"]["q_tokens"], rows["b"]["q_capitalized"], rows["b"]["qword_yesno"]) == (6, 3, 1)
    assert rows["c"]["qword_which"] == 1 and rows["c"]["q_capitalized"] == 1  # "Jaws"; "The" starts the question
    assert rows["d"]["qword_other"] == 1 and rows["d"]["q_has_digits"] == 0


def closed_book_answers(**overrides):
    """A GENERATIONS-shaped slice: the columns uncertainty_features reads from the closed-book answers."""
    columns = {"request_id": ["b", "a"], "status": ["ok", "ok"], "mean_entropy": [0.1, 0.7],
               "min_token_prob": [0.9, 0.2], "sequence_logprob": [-0.3, -4.0]}
    return pl.DataFrame(columns | overrides)


def test_uncertainty_features_come_from_the_closed_book_generations():
    uncertainty = conform(uncertainty_features(closed_book_answers()), FEATURES.select("qid", *UNCERTAINTY_FEATURE_NAMES))
    assert uncertainty.rows() == [("a", 0.7, 0.2, -4.0), ("b", 0.1, 0.9, -0.3)]
    with pytest.raises(InputError, match="outside"):
        uncertainty_features(closed_book_answers(min_token_prob=[1.5, 0.2]))
    with pytest.raises(InputError, match="positive log-probability"):
        uncertainty_features(closed_book_answers(sequence_logprob=[0.5, -1.0]))
    with pytest.raises(InputError, match=r"1 closed-book answers failed.*rerun"):
        uncertainty_features(closed_book_answers(status=["ok", "error"]))
    with pytest.raises(InputError, match=r"no \['mean_entropy'\].*top_logprobs"):
        uncertainty_features(closed_book_answers(mean_entropy=[None, 0.7]))
    with pytest.raises(InputError, match="sequence_logprob"):
        uncertainty_features(closed_book_answers().drop("sequence_logprob"))


def test_uncertainty_and_probe_features():
    uncertainty = conform(uncertainty_features(closed_book_answers()), FEATURES.select("qid", *UNCERTAINTY_FEATURE_NAMES))
    probe = pl.DataFrame({"qid": ["a"] * 6 + ["b"], "unit_id": list("uvwxyz") + ["p"], "rank": [2, 1, 3, 4, 5, 6, 1],
                          "score": [9.0, 12.0, 8.0, 7.0, 4.0, 1.0, 3.0]})
    scores = conform(probe_features(probe), FEATURES.select("qid", *PROBE_FEATURE_NAMES))
    assert scores.rows() == [("a", 12.0, 3.0, 8.0), ("b", 3.0, 0.0, 3.0)]
    full = combine([uncertainty, scores])
    assert full.columns == ["qid", "unc_entropy", "unc_min_prob", "unc_seq_logprob", "bm25_top1", "bm25_gap12",
                            "bm25_mean_top5"]
    with pytest.raises(InputError, match="different queries"):
        combine([uncertainty, scores.head(1)])
    # a query the probe found nothing for (no ranking rows) scores zero, as BM25 scores a unit matching no term
    every = conform(probe_features(probe, ["b", "c", "a"]), FEATURES.select("qid", *PROBE_FEATURE_NAMES))
    assert every.rows() == [("a", 12.0, 3.0, 8.0), ("b", 3.0, 0.0, 3.0), ("c", 0.0, 0.0, 0.0)]


def test_every_feature_has_a_cost_family():
    assert set(FEATURE_FAMILY.values()) == {"base_arm", "query_only", "uncertainty", "retrieval_score"}


def test_a_pairs_features_table_holds_exactly_its_families_columns():
    """route_features writes under the contract of the configured families' columns (catalogue order, whatever
    the configured order), so a feature missing from the table or one of another family is a contract error."""
    assert family_columns(["uncertainty", "query_only"]) == (*QUERY_FEATURE_NAMES, *UNCERTAINTY_FEATURE_NAMES)
    assert family_columns(["retrieval_score", "base_arm"]) == (*KEEP_FEATURE_NAMES, *PROBE_FEATURE_NAMES)
    contract = FEATURES.select("qid", *family_columns(["uncertainty"]))
    uncertainty = uncertainty_features(closed_book_answers())
    assert conform(uncertainty, contract).columns == ["qid", *UNCERTAINTY_FEATURE_NAMES]
    with pytest.raises(ContractError, match=r"missing columns \['unc_seq_logprob'\]"):
        conform(uncertainty.drop("unc_seq_logprob"), contract)
    with pytest.raises(ContractError, match=r"unexpected columns \['bm25_top1'\]"):
        conform(uncertainty.with_columns(bm25_top1=pl.lit(1.0)), contract)
