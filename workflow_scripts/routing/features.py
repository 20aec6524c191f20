"""Router features, one wide table per cost family: one row per qid, one Float64 column per feature.

In / out, per family (each feature's family is what a router must pay before it can decide):
- base_arm (Study A; free at decision time because the base arm runs for every query anyway):
  `keep_features(run, dense_ranking, units)` — `run` is the Keep arm's final run (qid, rank, unit_id; rank is the
  final rank after rerank), `dense_ranking` the vector ranking the arm started from (qid, unit_id, rank, score =
  cosine; contract RANKING), `units` gives each unit's kind (unit_id, kind). The final run keeps only its 10
  units, so the vector top-10 and its cosines are read from `dense_ranking`, never from the run; where the run
  also carries `dense_rank`, it must agree with `dense_ranking` (a mismatch means the inputs were mis-wired).
  → top1_cos, gap12_cos, mean_top5_cos, overlap_top10, rerank_top1_vector_rank, caption_share.
- query_only: `query_features(questions)` from (qid, text) → length, question word, digits,
  capitalized tokens.
- uncertainty (Study B; paid for by one closed-book generation): `uncertainty_features(answers)` from the
  no-retrieval answer's token-logprob summary, i.e. the closed_book GENERATIONS table (request_id = qid,
  mean_entropy, min_token_prob, sequence_logprob) → unc_entropy, unc_min_prob,
  unc_seq_logprob.
- retrieval_score: `probe_features(probe, qids)` from a probe BM25 ranking (qid, unit_id, rank, score) →
  bm25_top1, bm25_gap12, bm25_mean_top5 (zeros for a query with no hit).
"full" is every family present. `combine` joins family tables on qid (every table must cover the same qids);
`labelled_features` joins them over the labelled questions (a pair's features.parquet). The feature catalogue
(names, FEATURE_FAMILY) and the written table's contract (FEATURES, of which a pair's table holds its families'
columns: `family_columns`, `features_contract`) are declared in `vocabulary.py` and `contracts.py`.

Definitions (k = 10 unless the query has fewer units; a query with one unit has gap12 = 0):
top1_cos = cosine of vector rank 1; gap12_cos = cos(rank 1) − cos(rank 2); mean_top5_cos = mean cosine of
vector ranks 1..5; overlap_top10 = |vector top-10 ∩ final top-10|; rerank_top1_vector_rank = vector rank of the
final rank-1 unit, 11 when it is outside the vector top-10; caption_share = captions / units among final ranks
1..10. Tokens are runs of word characters (regex \\w+); the question word is the first wh-word anywhere in the
question (what, which, who/whom/whose, when, where, why, how), else "yesno" when the first token is an auxiliary
verb (is, are, was, does, can, …), else "other"; capitalized tokens exclude the sentence-initial token.
"""

import re
from collections.abc import Iterable, Sequence

import polars as pl

from workflow_scripts.core.contracts import FEATURES
from workflow_scripts.core.tables import Contract
from workflow_scripts.core.vocabulary import (
    FEATURE_FAMILY,
    KEEP_FEATURE_NAMES,
    PROBE_FEATURE_NAMES,
    QUERY_FEATURE_NAMES,
    QUESTION_WORDS,
)
from workflow_scripts.core.errors import InputError

VECTOR_DEPTH = 10
OUTSIDE_RANK = VECTOR_DEPTH + 1

WH_WORDS = {"what": "what", "which": "which", "who": "who", "whom": "who", "whose": "who", "when": "when",
            "where": "where", "why": "why", "how": "how"}
AUXILIARIES = frozenset({"is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "will", "would",
                         "should", "shall", "may", "might", "must", "has", "have", "had"})
TOKEN = re.compile(r"\w+")


def _require(table: pl.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise InputError(f"{what}: columns {missing} are missing (columns: {table.columns})")
    for column in columns:
        if table[column].null_count():
            raise InputError(f"{what}: column '{column}' has {table[column].null_count()} missing values")


def _score_summary(ranking: pl.DataFrame, names: Sequence[str]) -> pl.DataFrame:
    """Top-1 score, gap between ranks 1 and 2, mean of ranks 1..5 per qid of a (qid, rank, score) ranking."""
    top1, gap12, mean_top5 = names
    ordered = ranking.sort(["qid", "rank"])
    return ordered.group_by("qid", maintain_order=True).agg(
        pl.col("score").first().cast(pl.Float64).alias(top1),
        (pl.col("score").first() - pl.col("score").get(1, null_on_oob=True)).fill_null(0.0).cast(pl.Float64)
        .alias(gap12),
        pl.col("score").head(5).mean().cast(pl.Float64).alias(mean_top5),
    )


def keep_features(run: pl.DataFrame, dense_ranking: pl.DataFrame, units: pl.DataFrame) -> pl.DataFrame:
    """Study A's six Keep-arm features per query of `run` (see the module docstring for the definitions)."""
    _require(run, ["qid", "rank", "unit_id"], "keep features (run)")
    _require(dense_ranking, ["qid", "unit_id", "rank", "score"], "keep features (dense ranking)")
    _require(units, ["unit_id", "kind"], "keep features (units)")
    missing = sorted(set(run["qid"]) - set(dense_ranking["qid"]))
    if missing:
        raise InputError(f"keep features: queries {missing[:5]} ({len(missing)}) have no dense ranking")
    vector = dense_ranking.select("qid", "unit_id", pl.col("rank").alias("vector_rank"), "score")
    final = run.filter(pl.col("rank") <= VECTOR_DEPTH).select("qid", "unit_id", pl.col("rank").alias("final_rank"))
    final = final.join(vector.select("qid", "unit_id", "vector_rank"), on=["qid", "unit_id"], how="left")
    if "dense_rank" in run.columns:
        stored = run.select("qid", "unit_id", "dense_rank").join(final, on=["qid", "unit_id"])
        wrong = stored.filter(pl.col("dense_rank").is_not_null() & (pl.col("dense_rank") != pl.col("vector_rank")))
        if wrong.height:
            raise InputError(
                f"keep features: the run's dense_rank disagrees with the dense ranking for {wrong.height} units "
                f"(e.g. {wrong.head(3).rows()}); pass the dense ranking the Keep arm was built from"
            )
    kinds = units.select("unit_id", "kind").unique("unit_id")
    final = final.join(kinds, on="unit_id", how="left")
    if final["kind"].null_count():
        unknown = final.filter(pl.col("kind").is_null())["unit_id"].head(5).to_list()
        raise InputError(f"keep features: run units {unknown} are not in the units table")
    in_top = pl.col("vector_rank").is_not_null() & (pl.col("vector_rank") <= VECTOR_DEPTH)
    reranked = final.sort(["qid", "final_rank"]).group_by("qid", maintain_order=True).agg(
        in_top.sum().cast(pl.Float64).alias("overlap_top10"),
        pl.when(in_top).then(pl.col("vector_rank")).otherwise(OUTSIDE_RANK)
        .first().cast(pl.Float64).alias("rerank_top1_vector_rank"),
        (pl.col("kind") == "caption").mean().alias("caption_share"),
    )
    asked = dense_ranking.filter(pl.col("qid").is_in(run["qid"].unique().implode()))
    cosines = _score_summary(asked, KEEP_FEATURE_NAMES[:3])
    return cosines.join(reranked, on="qid").select("qid", *KEEP_FEATURE_NAMES).sort("qid")


def question_word(tokens: Sequence[str]) -> str:
    """The question's wh-word class (first wh-word anywhere), else yesno (auxiliary first), else other."""
    lowered = [token.lower() for token in tokens]
    for token in lowered:
        if token in WH_WORDS:
            return WH_WORDS[token]
    return "yesno" if lowered and lowered[0] in AUXILIARIES else "other"


def query_row(text: str) -> dict[str, float]:
    """The query-only features of one question text."""
    tokens = TOKEN.findall(text)
    word = question_word(tokens)
    return {
        "q_tokens": float(len(tokens)),
        "q_has_digits": float(any(character.isdigit() for character in text)),
        "q_capitalized": float(sum(token[0].isupper() for token in tokens[1:])),
        **{f"qword_{w}": float(word == w) for w in QUESTION_WORDS},
    }


def query_features(questions: pl.DataFrame) -> pl.DataFrame:
    """Query-only features per question, from columns qid, text."""
    _require(questions, ["qid", "text"], "query features")
    rows = [{"qid": qid, **query_row(text)} for qid, text in questions.select("qid", "text").iter_rows()]
    schema = {"qid": pl.String} | {name: pl.Float64 for name in QUERY_FEATURE_NAMES}
    return pl.DataFrame(rows, schema=schema).sort("qid")


def uncertainty_features(answers: pl.DataFrame) -> pl.DataFrame:
    """Uncertainty of the no-retrieval answer, from a GENERATIONS table (request_id = qid, status, mean_entropy,
    min_token_prob, sequence_logprob): every answer must have succeeded and carry all three numbers."""
    _require(answers, ["request_id", "status"], "uncertainty features")
    failed = answers.filter(pl.col("status") != "ok")
    if failed.height:
        raise InputError(f"uncertainty features: {failed.height} closed-book answers failed (e.g. "
                         f"{failed['request_id'].head(3).to_list()}); rerun to retry them (failures are not cached)")
    columns = ["mean_entropy", "min_token_prob", "sequence_logprob"]
    missing = [column for column in columns if column in answers.columns and answers[column].null_count()]
    if missing:
        raise InputError(f"uncertainty features: the closed-book answers have no {missing}; the generator must "
                         f"report token log-probabilities (models.generator.top_logprobs > 0, or backend transformers)")
    _require(answers, columns, "uncertainty features")
    bad = answers.filter((pl.col("min_token_prob") < 0) | (pl.col("min_token_prob") > 1)
                         | (pl.col("mean_entropy") < 0) | (pl.col("sequence_logprob") > 0))
    if bad.height:
        raise InputError(f"uncertainty features: probabilities outside [0, 1], negative entropy or positive "
                         f"log-probability for queries {bad['request_id'].head(5).to_list()}")
    return answers.select(
        pl.col("request_id").alias("qid"),
        pl.col("mean_entropy").cast(pl.Float64).alias("unc_entropy"),
        pl.col("min_token_prob").cast(pl.Float64).alias("unc_min_prob"),
        pl.col("sequence_logprob").cast(pl.Float64).alias("unc_seq_logprob"),
    ).sort("qid")


def probe_features(probe: pl.DataFrame, qids: Sequence[str] | None = None) -> pl.DataFrame:
    """Scores of a probe BM25 ranking per query (qid, unit_id, rank, score): top-1, gap 1–2, mean of top 5. With
    `qids`, every one of them gets a row: a query the probe found nothing for (no term of it in the searched units,
    so no ranking rows) has all three 0.0, the BM25 score of a unit that matches no query term."""
    _require(probe, ["qid", "rank", "score"], "probe features")
    scores = _score_summary(probe, PROBE_FEATURE_NAMES)
    if qids is not None:
        scores = (pl.DataFrame({"qid": list(qids)}, schema={"qid": pl.String}).unique()
                  .join(scores, on="qid", how="left").fill_null(0.0))
    return scores.sort("qid")


def family_columns(families: Iterable[str]) -> tuple[str, ...]:
    """The feature columns of a table of `families` (a pair's `features`), in the catalogue's order: what its
    features table must hold, no more and no less."""
    families = set(families)
    return tuple(feature for feature, family in FEATURE_FAMILY.items() if family in families)


def features_contract(families: Iterable[str]) -> Contract:
    """The contract of a features table of `families`: qid and exactly those families' columns (a column missing or
    extra is a contract error)."""
    return FEATURES.select("qid", *family_columns(families))


def combine(tables: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """Join feature tables on qid; every table must cover exactly the same queries."""
    if not tables:
        raise InputError("combine features: no feature tables given")
    combined = tables[0]
    for table in tables[1:]:
        if set(table["qid"]) != set(combined["qid"]):
            differ = sorted(set(table["qid"]) ^ set(combined["qid"]))
            raise InputError(f"combine features: tables cover different queries (e.g. {differ[:5]})")
        shared = (set(table.columns) & set(combined.columns)) - {"qid"}
        if shared:
            raise InputError(f"combine features: columns {sorted(shared)} appear in two tables")
        combined = combined.join(table, on="qid")
    return combined.sort("qid")


def labelled_features(tables: Sequence[pl.DataFrame], labelled: pl.Series) -> pl.DataFrame:
    """The family tables joined on qid (`combine`) over the `labelled` questions only."""
    labelled = labelled.implode()
    return combine([table.filter(pl.col("qid").is_in(labelled)) for table in tables])
