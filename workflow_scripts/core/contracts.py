"""Data contracts: the schema of every canonical Parquet table and CSV report, declared once, checked on every write.

Every table's schema lives here and nowhere else, grouped by the stage that writes it: ingest, retrieval,
evaluation, generation (LLM cache, generations), judging, utility labels, router features, routers, budget
frontiers, paired comparisons, measured cost and Study C. `CONTRACTS` maps each table name to its contract. The
values the tables hold (unit kinds, statuses, outcomes, feature names ...) are named in `vocabulary.py`; the
reader and writers that check a contract are in `tables.py`. This module imports neither a stage nor anything
but `tables` and `vocabulary`, so it can never take part in an import cycle.

In:  nothing (declarations only).
Out: one `Contract` per table (`tables.Contract`: columns with type, nullability and meaning; key; enumerations)
     and the registries `CONTRACTS` (Parquet tables) and `REPORTS` (CSV reports, each with its `file`; the
     retrieval summary's columns follow the measures: `metrics_summary_report`); `docs/outputs.md` is generated
     from them.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from workflow_scripts.core.tables import Column, Contract, Document
from workflow_scripts.core.vocabulary import (
    ADAPTIVE,
    AGREEMENT_MEASURES,
    ALWAYS_ON,
    ARM_OUTCOMES,
    BACKENDS,
    IMPORTED,
    BOOTSTRAP_METHODS,
    COST_BASES,
    FEATURE_FAMILY,
    FRONTIER_KINDS,
    FRONTIER_RULES,
    GATE_MEASURES,
    JUDGE_SCORINGS,
    OBTAINED,
    OFF,
    QUERY_TYPES,
    RETRIEVAL_OUTCOMES,
    SCORE_BASES,
    SPLIT_ORDER,
    STATUSES,
    STOP_REASONS,
    STOP_ROUTERS,
    STRATEGIES,
    STUDY_C_METRICS,
    TOKEN_COLUMNS,
    UNIT_KINDS,
)


# --- Ingest (ingest/stage.py, ingest/splits.py): units, questions, relevance judgments and the grouped splits

SPLIT_NAMES = frozenset(SPLIT_ORDER)

UNITS = Contract(
    name="units",
    columns={
        "dataset": Column(pl.String(), doc="dataset key from the config"),
        "group_id": Column(pl.String(), doc="paper or question context the unit belongs to (group scope, splits)"),
        "unit_id": Column(pl.String(), doc="unique within the dataset; the id qrels and runs refer to"),
        "kind": Column(pl.String(), doc="paragraph | heading | caption | passage | abstract | document"),
        "section": Column(pl.String(), nullable=True, doc="section heading the unit sits under, if any"),
        "position": Column(pl.Int32(), doc="0-based order of the unit inside its group"),
        "title": Column(pl.String(), nullable=True, doc="document or paragraph title, if the source has one"),
        "text": Column(pl.String(), doc="the unit's text (never empty)"),
        "meta": Column(pl.String(), nullable=True, doc="source-specific extras as a JSON object"),
    },
    key=("unit_id",),
    enums={"kind": UNIT_KINDS},
)

QUESTIONS = Contract(
    name="questions",
    columns={
        "dataset": Column(pl.String()),
        "qid": Column(pl.String(), doc="unique within the dataset"),
        "group_id": Column(pl.String(), doc="paper or context the question is about; splits never cross it"),
        "text": Column(pl.String()),
        "query_type": Column(pl.String(), nullable=True, doc="e.g. bridge/comparison, problem/method"),
        "answers": Column(pl.List(pl.String()), doc="reference answers (possibly several annotators)"),
        "gold_unit_ids": Column(pl.List(pl.String()), doc="units annotated as evidence (relevance > 0)"),
        "unaligned_evidence": Column(
            pl.List(pl.String()), doc="evidence strings that matched no unit; the question is kept, flagged"
        ),
        "meta": Column(pl.String(), nullable=True, doc="source-specific extras as a JSON object"),
    },
    key=("qid",),
)

QRELS = Contract(
    name="qrels",
    columns={
        "qid": Column(pl.String()),
        "unit_id": Column(pl.String()),
        "relevance": Column(pl.Int32(), doc="graded relevance; > 0 is relevant"),
    },
    key=("qid", "unit_id"),
)

GENERATED_QUESTIONS = Contract(
    name="generated_questions",
    columns={
        "qid": Column(pl.String(), doc="<source unit id>:q"),
        "group_id": Column(pl.String(), doc="the paper the source unit belongs to"),
        "source_unit_id": Column(pl.String(), doc="the unit the question was written from: its gold evidence"),
        "source_kind": Column(pl.String(), doc="the source unit's kind (paragraph | caption | …)"),
        "text": Column(pl.String(), doc="the generated question (never empty)"),
        "answer": Column(pl.String(), doc="the generator's short answer from the source unit: the reference answer"),
    },
    key=("qid",),
    enums={"source_kind": UNIT_KINDS},
)

SPLITS = Contract(
    name="splits",
    columns={
        "qid": Column(pl.String()),
        "group_id": Column(pl.String()),
        "split": Column(pl.String(), doc="dev | calibration | heldout"),
    },
    key=("qid",),
    enums={"split": SPLIT_NAMES},
)

# --- Retrieval (retrieval/: bm25, dense, rerank, arms): rankings, final runs, vectors and their caches

RANKING = Contract(
    name="ranking",
    columns={
        "qid": Column(pl.String()),
        "unit_id": Column(pl.String()),
        "rank": Column(pl.Int32(), doc="1-based rank within the query"),
        "score": Column(pl.Float64(), doc="the first-stage retriever's score (higher is better)"),
    },
    key=("qid", "unit_id"),
)

RUNS = Contract(
    name="runs",
    columns={
        "qid": Column(pl.String()),
        "rank": Column(pl.Int32(), doc="1-based final rank of the arm"),
        "unit_id": Column(pl.String()),
        "score": Column(pl.Float64(), doc="the score the final order follows (rerank, fused or first-stage)"),
        "dense_score": Column(pl.Float64(), nullable=True),
        "dense_rank": Column(pl.Int32(), nullable=True, doc="rank in the dense first stage (null: not retrieved)"),
        "bm25_score": Column(pl.Float64(), nullable=True),
        "bm25_rank": Column(pl.Int32(), nullable=True, doc="rank in the BM25 first stage (null: not retrieved)"),
        "run_score": Column(pl.Float64(), nullable=True, doc="score in the imported run (arms reading a run)"),
        "run_rank": Column(pl.Int32(), nullable=True, doc="rank in the imported run (null: not in it)"),
        "fused_score": Column(pl.Float64(), nullable=True, doc="reciprocal rank fusion score (hybrid arms)"),
        "rerank_score": Column(pl.Float64(), nullable=True, doc="reranker score (arms with a rerank step)"),
    },
    key=("qid", "unit_id"),
)

EMBEDDING_CACHE = Contract(
    name="embedding_cache",
    columns={
        "key": Column(pl.String(), doc="sha256 of (model fingerprint, text): content-addressed"),
        "vector": Column(pl.List(pl.Float32()), doc="the embedding as the model returned it"),
    },
    key=("key",),
)

UNIT_VECTORS = Contract(
    name="unit_vectors",
    columns={
        "unit_id": Column(pl.String(), doc="row i is row i of the dense index"),
        "group_id": Column(pl.String()),
        "vector": Column(pl.List(pl.Float32()), doc="L2-normalized embedding (cosine = inner product)"),
    },
    key=("unit_id",),
)

QUESTION_VECTORS = Contract(
    name="question_vectors",
    columns={
        "qid": Column(pl.String(), doc="in the questions table's row order"),
        "vector": Column(pl.List(pl.Float32()), doc="L2-normalized embedding by the units' embedder"),
    },
    key=("qid",),
)

RERANK_SCORES = Contract(
    name="rerank_scores",
    columns={
        "qid": Column(pl.String()),
        "unit_id": Column(pl.String()),
        "rerank_score": Column(pl.Float64()),
    },
    key=("qid", "unit_id"),
)

SCORE_CACHE = Contract(
    name="score_cache",
    columns={
        "key": Column(pl.String(), doc="sha256 of (model fingerprint, query text, unit text)"),
        "score": Column(pl.Float64(), doc="pairwise relevance score (cross-encoder or LLM pointwise)"),
    },
    key=("key",),
)

# --- Evaluation (retrieval/evaluate.py): an arm's per-query measures and their means

METRICS = Contract(
    name="metrics",
    columns={
        "qid": Column(pl.String()),
        "measure": Column(pl.String(), doc="ir-measures name (evaluation.measures)"),
        "value": Column(pl.Float64(), doc="0 for a judged query the run does not retrieve for"),
    },
    key=("qid", "measure"),
)

METRICS_SUMMARY = Contract(
    name="metrics_summary",
    columns={
        "arm": Column(pl.String()),
        "split": Column(
            pl.String(), nullable=True, doc="dev | calibration | heldout | all; null: queries without a split"
        ),
        "measure": Column(pl.String()),
        "mean": Column(pl.Float64()),
        "questions": Column(pl.UInt32(), doc="judged queries behind the mean"),
    },
    key=("arm", "split", "measure"),
    enums={"split": SPLIT_NAMES | {"all"}},
)


# --- Generation (llm/engine.py): the LLM cache and one row per generated request


TOKEN_STEP = pl.Struct({
    "token": pl.String(), "alternatives": pl.List(pl.Struct({"text": pl.String(), "logprob": pl.Float64()})),
    "complete": pl.Boolean(), "mass": pl.Float64(),
})

_RESULT_COLUMNS = {
    "text": Column(pl.String(), doc="the generated text (stop strings and end-of-sequence removed)"),
    "finish_reason": Column(pl.String(), doc="stop (end of sequence or a stop string) | length (max_new_tokens)"),
    "prompt_tokens": Column(pl.Int32(), nullable=True, doc="tokens in the prompt (null: a server did not say)"),
    "completion_tokens": Column(pl.Int32(), nullable=True, doc="tokens generated (null: a server did not say)"),
    "mean_entropy": Column(pl.Float64(), nullable=True, doc="mean next-token entropy over generated tokens, nats"),
    "min_token_prob": Column(pl.Float64(), nullable=True, doc="lowest probability of a generated token"),
    "sequence_logprob": Column(pl.Float64(), nullable=True, doc="sum of the generated tokens' log probabilities"),
    "uncertainty_basis": Column(
        pl.String(),
        nullable=True,
        doc="full_vocabulary | grammar_masked (a constrained reply) | top_<k> (see llm/engine.py)",
    ),
    "token_steps": Column(
        pl.List(TOKEN_STEP),
        nullable=True,
        doc="a constrained reply's tokens, each with the "
        "(text, logprob) alternatives at its step, whether they are all the grammar allowed "
        "(complete) and the unmasked mass on them (llm/backends, read by judging/scores.py); for a free-text request "
        "that asked for its tokens (FLARE's look-ahead), each generated token with its own logprob as its one "
        "alternative",
    ),
    "latency_s": Column(pl.Float64(), doc="wall seconds of this call (batch time apportioned by tokens)"),
    "backend": Column(pl.String(), doc="transformers | openai | vllm"),
    "model": Column(pl.String(), doc="the model reference from the config"),
    "device": Column(pl.String(), doc="cpu, cuda:0, ... or the server's base URL"),
}

LLM_CACHE = Contract(
    name="llm_cache",
    columns={
        "key": Column(pl.String(), doc="sha256 of (model fingerprint, backend, sampling, rendered prompt)"),
        **_RESULT_COLUMNS,
    },
    key=("key",),
    enums={"finish_reason": frozenset({"stop", "length"}), "backend": frozenset(BACKENDS)},
)

GENERATIONS = Contract(
    name="generations",
    columns={
        "request_id": Column(pl.String(), doc="the caller's id of the request (unique per call)"),
        "key": Column(pl.String(), doc="the LLM cache key; equal keys mean identical requests"),
        "status": Column(pl.String(), doc="ok | error"),
        "error": Column(pl.String(), nullable=True, doc="why the request failed (status error)"),
        "source": Column(pl.String(), doc="generated (this run) | cache (an earlier run) | duplicate (of a row above) "
                         "| imported (an imported system's answer: ingest/systems.py; backend imported, model the "
                         "system's name, device its file, latency_s and tokens as the file reports them or null)"),
        "constrained": Column(pl.Boolean(), doc="decoded under its step's reply schema (llm/constraints.py)"),
        **{
            name: Column(column.dtype, nullable=name not in ("backend", "model", "device"), doc=column.doc)
            for name, column in _RESULT_COLUMNS.items()
        },
        "evidence_in": Column(pl.Int32(), doc="evidence units the request carried"),
        "evidence_kept": Column(pl.Int32(), doc="units in the prompt after the context-length policy"),
        "evidence_truncated": Column(pl.Boolean(), doc="a unit was cut or dropped to fit max_prompt_tokens"),
        "token_basis": Column(pl.String(), doc="how the prompt was counted and cut to max_prompt_tokens: tokenizer "
                              "(the model's own) | estimate (ceil(characters / chars_per_token): openai without a "
                              "local tokenizer)"),
    },
    key=("request_id",),
    enums={
        "status": frozenset({"ok", "error"}),
        "source": frozenset({"generated", "cache", "duplicate", IMPORTED}),
        "finish_reason": frozenset({"stop", "length"}),
        "backend": frozenset({*BACKENDS, IMPORTED}),
        "token_basis": frozenset({"tokenizer", "estimate", IMPORTED}),
    },
)


# --- Judging (judging/judges.py): one judgment per item, Study C and Study A


_COMMON = {
    "item_id": Column(pl.String(), doc="the judged item (e.g. '<qid>|<policy>')"),
    "status": Column(pl.String(), doc="ok | length (the reply was cut by its token budget) | parse_failed | error"),
    "attempts": Column(pl.Int32(), doc="judge calls made (1 + re-asks)"),
    "obtained": Column(
        pl.String(), doc="how the last reply was obtained: constrained (decoded under its schema) | parsed (strict "
        "JSON, unconstrained) | repaired | reasked (accepted on a re-ask) | length | parse_failed | error",
    ),
    **{name: Column(pl.Int64(), nullable=True, doc=f"{what} of every call for this item (re-asks and a gate's "
                    "re-score included; null: a server did not say)")
       for name, what in zip(TOKEN_COLUMNS, ("prompt tokens", "tokens generated"))},
}


def _expected(name: str, what: str) -> dict[str, Column]:
    """A score field's probability-weighted columns (judging/scores.py): its expected value and the unmasked mass."""
    return {
        f"{name}_{'prob' if what == 'probability' else 'expected'}": Column(
            pl.Float64(), nullable=True, doc=f"{what} over the values the grammar allowed at its token, renormalised "
            "(the reply's own value when score_basis is argmax_only)"),
        f"{name}_mass": Column(pl.Float64(), nullable=True, doc="probability the unmasked model put on those values "
                               "(transformers only)"),
    }


_SCORE_BASIS = {"score_basis": Column(
    pl.String(), nullable=True, doc="masked_exact (every allowed token listed) | top_k (a backend's top-k "
    "log-probabilities) | argmax_only (no distribution: the reply's values): the weakest of the row's scores")}
_TAIL = {
    "reply": Column(pl.String(), nullable=True, doc="the judge's last raw reply"),
    "failure": Column(pl.String(), nullable=True, doc="why the last reply was unusable, or the call's error"),
    "judge_model": Column(pl.String(), doc="the judge's model reference"),
}

JUDGMENTS_QUALITY = Contract(
    name="judgments_quality",
    columns={
        **_COMMON,
        "is_answer": Column(pl.Boolean(), nullable=True, doc="a genuine attempt to answer (null unless ok)"),
        **{
            metric: Column(pl.Int8(), nullable=True, doc="1–5; 0 when is_answer is false") for metric in STUDY_C_METRICS
        },
        **_expected("is_answer", "probability"),
        **{
            column: spec
            for metric in STUDY_C_METRICS
            for column, spec in {
                **_expected(metric, "unconditional expected score P(is_answer) · E[score | is_answer]"),
                f"{metric}_given_is_answer": Column(
                    pl.Float64(),
                    nullable=True,
                    doc="E[score | is_answer true] (a reply "
                    "that chose false is re-scored under the is_answer-true branch)",
                ),
            }.items()
        },
        **_SCORE_BASIS,
        **_TAIL,
    },
    key=("item_id",),
    enums={"status": STATUSES, "obtained": frozenset(OBTAINED), "score_basis": frozenset(SCORE_BASES)},
)

JUDGMENTS_GROUNDED = Contract(
    name="judgments_grounded",
    columns={
        **_COMMON,
        "abstained": Column(pl.Boolean(), nullable=True, doc="the answer declined or said evidence is insufficient"),
        "correctness": Column(
            pl.Int8(), nullable=True, doc="0 wrong/unsupported/unjustified abstention, 1 partial, 2 correct"
        ),
        "faithfulness": Column(pl.Int8(), nullable=True, doc="0/1/2 against the units shown; null for abstentions"),
        **_expected("abstained", "probability"),
        **_expected("correctness", "expected score"),
        **_expected("faithfulness", "expected score (given not abstained)"),
        **_SCORE_BASIS,
        **_TAIL,
    },
    key=("item_id",),
    enums={"status": STATUSES, "obtained": frozenset(OBTAINED), "score_basis": frozenset(SCORE_BASES)},
)


JUDGE_VALIDATION_ITEMS = Contract(
    name="judge_validation_items",
    columns={
        "item_id": Column(pl.String(), doc="<qid>|<policy>"),
        "policy": Column(pl.String()),
        "qid": Column(pl.String()),
        "group_id": Column(pl.String(), doc="the question's paper or context (the bootstrap's resampling unit)"),
        "argmax": Column(pl.Float64(), doc="the grounded judge's correctness as written (0–2)"),
        "expected": Column(pl.Float64(), doc="its probability-weighted correctness (0–2; judging/scores.py)"),
        "level": Column(pl.Int8(), doc="the argmax level: with the policy, the review export's stratum"),
        "reference": Column(pl.Int8(), doc="the reference label: 1 when the reference scorer calls the answer correct"),
        "judge": Column(pl.Float64(), doc="the reading judging.scoring names (expected or argmax)"),
    },
    key=("item_id",),
)


# --- Utility labels (routing/labels.py): what firing the router changes for each query


LABELS = Contract(
    name="labels",
    columns={
        "qid": Column(pl.String()),
        "metric_off": Column(pl.Float64(), doc="metric when the router does not fire (arm A / no retrieval)"),
        "metric_on": Column(pl.Float64(), doc="metric when the router fires (arm B / retrieval)"),
        "delta": Column(pl.Float64(), doc="metric_on - metric_off: Study A's Δ, Study B's utility u"),
        "outcome": Column(pl.String(), doc="sign of delta: rescue|harm|tie (arms) or benefit|harm|neutral"),
    },
    key=("qid",),
    enums={"outcome": frozenset(ARM_OUTCOMES + RETRIEVAL_OUTCOMES)},
)


# --- Router features (routing/features.py): one wide table per cost family, one Float64 column per feature


FEATURES = Contract(
    name="features",
    columns={"qid": Column(pl.String())} | {feature: Column(pl.Float64(), doc=family)
                                            for feature, family in FEATURE_FAMILY.items()},
    key=("qid",),
)  # a pair's table holds the columns of its families (routing.pairs.<pair>.features): `FEATURES.select(...)`


# --- Routers (routing/routers.py): out-of-fold scores and routed held-out queries

ROUTER = Column(pl.String(), doc="the routing.routers entry")

ROUTER_OOF_SCORES = Contract(
    name="oof_scores of one router",
    columns={
        "qid": Column(pl.String()),
        "group_id": Column(pl.String()),
        "fold": Column(pl.Int32(), doc="0-based GroupKFold fold the query was held out in"),
        "score": Column(pl.Float64(), doc="router score from a model that never saw the query's group"),
        "signal_absent": Column(pl.Boolean(), doc="the fold's training labels were constant: the score is flat"),
    },
    key=("qid",),
)

OOF_SCORES = Contract(  # every router of a pair, with the labels its threshold was chosen on (route_fit)
    name="oof_scores",
    columns={**ROUTER_OOF_SCORES.columns, "metric_on": LABELS.columns["metric_on"],
             "metric_off": LABELS.columns["metric_off"], "router": ROUTER},
    key=("router", "qid"),
)

ROUTER_ROUTED = Contract(
    name="routed of one router",
    columns={
        "qid": Column(pl.String()),
        "score": Column(pl.Float64()),
        "triggered": Column(pl.Boolean(), doc="score > the frozen threshold"),
    },
    key=("qid",),
)

ROUTED = Contract(  # every router of a pair on calibration and held-out, with the labels and splits (route_heldout)
    name="routed",
    columns={"qid": Column(pl.String()), "router": ROUTER, "score": ROUTER_ROUTED.columns["score"],
             "triggered": ROUTER_ROUTED.columns["triggered"],
             **{name: LABELS.columns[name] for name in ("metric_off", "metric_on", "delta", "outcome")},
             "group_id": SPLITS.columns["group_id"], "split": SPLITS.columns["split"]},
    key=("router", "qid"),
    enums={"outcome": LABELS.enums["outcome"], "split": SPLITS.enums["split"]},
)


# --- Budget frontiers (routing/frontiers.py): frontier rows per budget and the calibration audit


ROUTER_FRONTIERS = Contract(
    name="frontiers of one router",
    columns={
        "frontier": Column(pl.String(), doc="exact | deployable | conservative"),
        "budget": Column(pl.Float64(), doc="target usage rate ρ"),
        "threshold": Column(pl.Float64(), nullable=True, doc="score > threshold triggers; null for exact"),
        "epsilon": Column(pl.Float64(), doc="DKW slack (conservative), 0 otherwise"),
        "calibration_usage": Column(pl.Float64(), nullable=True, doc="usage on calibration; null for exact"),
        "usage": Column(pl.Float64(), doc="realized usage rate on held-out"),
        "transfer_error": Column(pl.Float64(), doc="usage - budget"),
        "accuracy": Column(pl.Float64(), doc="mean held-out metric under the policy"),
        "n_calibration": Column(pl.Int64()),
        "n_heldout": Column(pl.Int64()),
    },
    key=("frontier", "budget"),
    enums={"frontier": frozenset(FRONTIER_KINDS)},
)

FRONTIERS = Contract(  # every router of a pair (route_frontiers)
    name="frontiers",
    columns={**ROUTER_FRONTIERS.columns, "router": ROUTER},
    key=("router", "frontier", "budget"),
    enums=ROUTER_FRONTIERS.enums,
    title="Routing: budget frontiers",
    about=f"Per router, frontier ({' / '.join(FRONTIER_KINDS)}) and target usage ρ: realized held-out usage and "
          "accuracy.",
    landing=(),
)

AUDIT = Contract(
    name="calibration_audit",
    columns={
        "budget": Column(pl.Float64()),
        "rule": Column(pl.String(), doc="deployable | conservative"),
        "combinations": Column(pl.Int64(), doc="router × split combinations"),
        "violations": Column(pl.Int64(), doc="combinations whose held-out usage exceeds the budget"),
        "violation_share": Column(pl.Float64()),
        "mean_usage": Column(pl.Float64()),
        "mean_accuracy": Column(pl.Float64()),
    },
    key=("budget", "rule"),
    enums={"rule": frozenset(FRONTIER_RULES)},
    title="Routing: calibration audit",
    about="Share of router × split combinations whose held-out usage exceeds ρ.",
    landing=(),
)


# --- Paired comparisons (stats/paired.py): group-bootstrap intervals and win / tie / loss shares

COMPARISONS = Contract(  # answers/answering.py comparisons, stats/paired.py compare_policies
    name="comparisons",
    file="results/<dataset>/answers/comparisons.csv",
    columns={
        "a": Column(pl.String(), doc="policy on the left of the difference"),
        "b": Column(pl.String(), doc="policy subtracted"),
        "estimate": Column(pl.Float64(), doc="mean over queries of a − b"),
        "low": Column(pl.Float64()),
        "high": Column(pl.Float64()),
        "p_permutation": Column(pl.Float64(), doc="two-sided p-value of a paired permutation test: the sign of each "
                                "group's summed a − b flipped (exact over all 2^groups patterns when ≤ resamples, "
                                "else `resamples` seeded patterns)"),
        "p_floor": Column(pl.Float64(), doc="the smallest p the permutation test can give with these groups: "
                          "2^(1 − groups) when exact, else 2 / (resamples + 1)"),
        "confidence": Column(pl.Float64()),
        "method": Column(pl.String(), doc="percentile | bca"),
        "resamples": Column(pl.Int64()),
        "n": Column(pl.Int64(), doc="queries"),
        "n_groups": Column(pl.Int64(), doc="groups resampled"),
        "win": Column(pl.Float64(), doc="share of queries with a > b"),
        "tie": Column(pl.Float64()),
        "loss": Column(pl.Float64()),
    },
    key=("a", "b"),
    enums={"method": frozenset(BOOTSTRAP_METHODS)},
    title="Answers: paired correctness differences",
    about="Mean per-question difference a − b of judged correctness, CI from a bootstrap over groups, paired "
          "permutation p.",
    landing=("a", "b", "estimate", "low", "high", "p_permutation", "p_floor", "n", "n_groups", "win", "tie", "loss"),
)


# --- Multi-step retrieval (multistep/loop.py): one row per question × step taken

TRAJECTORIES = Contract(
    name="trajectories",
    columns={
        "qid": Column(pl.String()),
        "group_id": Column(pl.String(), doc="the question's paper or context (the bootstrap's resampling unit)"),
        "step": Column(pl.Int32(), doc="1 … K; a step is one retrieval call (flare: one sentence, which retrieves "
                       "only when its look-ahead is unsure)"),
        "calls": Column(pl.Int32(), doc="retrieval calls the question has made up to and including this step (= step, "
                        "but for flare)"),
        "query": Column(pl.String(), nullable=True, doc="what the step searched: the question at step 1, then as the "
                        "strategy says (flare: the look-ahead with its unsure tokens masked; null: it did not search)"),
        "unit_ids": Column(pl.List(pl.String()), doc="the units the step retrieved, best first (its per_step first)"),
        "scores": Column(pl.List(pl.Float64()), doc="their retrieval scores"),
        "new_units": Column(pl.Int32(), doc="retrieved units not already in the evidence"),
        "added_units": Column(pl.Int32(), doc="of those, how many joined it (the evidence holds at most `total`)"),
        "evidence_ids": Column(pl.List(pl.String()), doc="the evidence after the step, in the order it came"),
        "thought": Column(pl.String(), doc="what the step wrote: the chain-of-thought sentence (ircot, flare) or its "
                          "answer (iter_retgen); '' when that request failed"),
        "lookahead": Column(pl.String(), nullable=True, doc="flare: the sentence written before deciding to search "
                            "(kept as the step's thought when it is sure; null: the first step, other strategies)"),
        "lookahead_min_prob": Column(pl.Float64(), nullable=True, doc="flare: the look-ahead's lowest token "
                                     "probability; below multistep threshold it searches"),
        "answer": Column(pl.String(), nullable=True, doc="the answer forced from the evidence so far (null: failed)"),
        "answer_status": Column(pl.String(), doc="ok | error: the forced answer's request"),
        "answer_entropy": Column(pl.Float64(), nullable=True, doc="its mean next-token entropy, nats"),
        "answer_min_prob": Column(pl.Float64(), nullable=True, doc="its lowest token probability"),
        "sequences": Column(pl.Int32(), doc="sequences generated at the step (thought and forced answer)"),
        "prompt_tokens": Column(pl.Int32(), doc="their prompt tokens (0 where a server did not say)"),
        "completion_tokens": Column(pl.Int32(), doc="their generated tokens"),
        "seconds": Column(pl.Float64(), doc="their wall seconds, batch time apportioned by tokens"),
        "stop": Column(pl.String(), nullable=True, doc="on a question's last step, why it stopped: answered (the "
                       "chain wrote its answer marker) | rule (an online stop rule) | cap (step K: for ircot a forced "
                       "stop); null on the steps before"),
    },
    key=("qid", "step"),
    enums={"answer_status": frozenset({"ok", "error"}), "stop": frozenset(STOP_REASONS)},
)


MULTISTEP_TABLES = "results/<dataset>/multistep/<policy>/"

MULTISTEP_CURVE = Contract(  # multistep/effects.py curve
    name="multistep_curve",
    file=MULTISTEP_TABLES + "curve.csv",
    columns={
        "policy": Column(pl.String(), doc="k=1 … k=K (each question answers at step min(K, where its chain ended)) | "
                         "oracle (each question at its best step: an upper bound no stop rule can pass)"),
        "n": Column(pl.Int64(), doc="questions scored (with reference answers, the answer not failed)"),
        "failed": Column(pl.Int64(), doc="questions whose forced answer at that step failed"),
        "n_groups": Column(pl.Int64()),
        "mean": Column(pl.Float64(), doc="mean correctness (multistep.scorer)"),
        "low": Column(pl.Float64()),
        "high": Column(pl.Float64()),
        "calls": Column(pl.Float64(), doc="mean retrieval calls per question"),
    },
    key=("policy",),
    title="Multi-step: correctness at each fixed K and at the oracle stop",
    about="Mean correctness per step cap K (a question keeps its last answer once its chain ended) and at each "
    "question's best step, CI from a bootstrap over groups, mean retrieval calls.",
)

MULTISTEP_COMPARISONS = Contract(  # multistep/effects.py comparisons
    name="multistep_comparisons",
    file=MULTISTEP_TABLES + "comparisons.csv",
    columns={
        **COMPARISONS.columns,
        "a": Column(pl.String(), doc="k=s"),
        "b": Column(pl.String(), doc="k=s−1 (the extra step), k=1 (single-step retrieval) or closed_book"),
        "win": Column(pl.Float64(), doc="share of questions a rescues (correct under a, not under b)"),
        "loss": Column(pl.Float64(), doc="share of questions a harms (correct under b, not under a)"),
    },
    key=("a", "b"),
    enums=COMPARISONS.enums,
    title="Multi-step: what each extra step rescues and harms",
    about="Paired correctness differences a − b: each step against the one before, against one step and against "
    "closed book; win = rescued, loss = harmed; CI from a bootstrap over groups, paired permutation p.",
    landing=("a", "b", "estimate", "low", "high", "p_permutation", "n", "win", "loss"),
)

MULTISTEP_STOPS = Contract(  # multistep/effects.py stop_table
    name="multistep_stops",
    file=MULTISTEP_TABLES + "stops.csv",
    columns={
        "rule": Column(pl.String(), doc="chain (each path's own end: its answer marker or K) | confident@p (the "
                       "forced answer's lowest token probability reaches p) | calm@h (its mean entropy is at most h "
                       "nats) | stale@n (a step brings fewer than n new units) (multistep/stops.py), replayed on the "
                       "trajectories"),
        "n": Column(pl.Int64()),
        "failed": Column(pl.Int64()),
        "n_groups": Column(pl.Int64()),
        "mean": Column(pl.Float64(), doc="mean correctness at the step the rule stops"),
        "low": Column(pl.Float64()),
        "high": Column(pl.Float64()),
        "calls": Column(pl.Float64(), doc="mean retrieval calls per question"),
        "sequences": Column(pl.Float64(), doc="mean generated sequences per question"),
        "prompt_tokens": Column(pl.Float64()),
        "completion_tokens": Column(pl.Float64()),
        "seconds": Column(pl.Float64(), doc="mean generation seconds per question"),
        "at_cap": Column(pl.Int64(), doc="questions the rule leaves at step K without an answer (forced stops)"),
        "matched": Column(pl.String(), doc="the fixed K whose mean calls are nearest the rule's"),
        "matched_calls": Column(pl.Float64()),
        "delta_estimate": Column(pl.Float64(), doc="mean correctness, rule − matched fixed K (paired)"),
        "delta_low": Column(pl.Float64()),
        "delta_high": Column(pl.Float64()),
        "p_permutation": COMPARISONS.columns["p_permutation"],
        "p_floor": COMPARISONS.columns["p_floor"],
        "confidence": Column(pl.Float64()),
    },
    key=("rule",),
    title="Multi-step: stop rules replayed against the fixed K at matched calls",
    about="Each stop rule replayed on the logged trajectories: correctness with its CI, what it spends, and its "
    "paired difference against the fixed K of nearest mean calls.",
    landing=("rule", "mean", "low", "high", "calls", "at_cap", "matched", "delta_estimate", "delta_low",
             "delta_high", "p_permutation"),
)


MULTISTEP_FRONTIERS = Contract(  # multistep/budgets.py frontier_table
    name="multistep_frontiers",
    file=MULTISTEP_TABLES + "frontiers.csv",
    columns={
        "router": Column(pl.String(), doc="uncertainty | entropy | novelty | ridge: the step's continue score "
                         "(multistep/budgets.py)"),
        "frontier": Column(pl.String(), doc="exact (threshold tuned on held-out itself: a diagnostic) | deployable "
                           "(frozen on calibration) | conservative (frozen at the DKW-lowered target)"),
        "budget": Column(pl.Float64(), doc="ρ: the share of the K − 1 extra retrievals a question may take "
                         "(budgets.grid)"),
        "target_calls": Column(pl.Float64(), doc="1 + ρ(K − 1): the mean retrieval calls per question allowed"),
        "threshold": Column(pl.Float64(), nullable=True, doc="retrieve again while the score exceeds it; null: ±inf"),
        "epsilon": Column(pl.Float64(), doc="the conservative rule's slack in ρ; 0 for the others"),
        "calibration_calls": Column(pl.Float64(), nullable=True, doc="mean calls on calibration at the threshold"),
        "calls": Column(pl.Float64(), doc="mean calls realized on the held-out questions"),
        "transfer_error": Column(pl.Float64(), doc="calls − target_calls (> 0: the budget was overspent)"),
        "accuracy": Column(pl.Float64(), doc="held-out mean correctness at the step each question stops"),
        "vs_blind": Column(pl.Float64(), doc="accuracy − spending the same calls blindly (fixed K mixed between the "
                           "two K bracketing them), paired per question"),
        "vs_blind_low": Column(pl.Float64()),
        "vs_blind_high": Column(pl.Float64()),
        "p_permutation": COMPARISONS.columns["p_permutation"],
        "p_floor": COMPARISONS.columns["p_floor"],
        "confidence": Column(pl.Float64()),
        "rescued": Column(pl.Float64(), doc="share of held-out questions wrong after one retrieval, right at the stop"),
        "harmed": Column(pl.Float64(), doc="share right after one retrieval, wrong at the stop"),
        "seconds": Column(pl.Float64(), doc="mean generation seconds per held-out question up to its stop"),
        "tokens": Column(pl.Float64(), doc="mean prompt + completion tokens per held-out question up to its stop"),
        "n_calibration": Column(pl.Int64()),
        "n_heldout": Column(pl.Int64()),
        "n_groups": Column(pl.Int64(), doc="held-out question groups (the bootstrap's resampling unit)"),
    },
    key=("router", "frontier", "budget"),
    enums={"frontier": frozenset(FRONTIER_KINDS), "router": frozenset(STOP_ROUTERS)},
    title="Multi-step: budget frontiers over retrieval calls",
    about="Stop routers' frozen thresholds per budget of mean retrieval calls: calls on calibration and realized on "
    "held-out, correctness, rescued and harmed against one retrieval, and the paired difference against spending the "
    "same calls blindly (CI from a bootstrap over groups, paired permutation p).",
    landing=(),  # per router × frontier × budget: the dataset page's; the landing page has its finding
)


# --- Measured cost (cost/ledger.py, cost/pricing.py, routing/policy_costs.py): the per-query ledger and what each
# routing policy costs


COST_LEDGER = Contract(
    name="cost_ledger",
    columns={
        "dataset": Column(pl.String()),
        "qid": Column(pl.String()),
        "stage": Column(pl.String(), doc="the rule that did the work, as its cost source names it"),
        "component": Column(pl.String(), doc="which instance: scope, reranker, arm, pair or policy"),
        "seconds": Column(pl.Float64(), nullable=True, doc="measured wall seconds attributed to this query (null: an "
                          "imported system that did not report its latency)"),
        "basis": Column(
            pl.String(),
            doc="item: the stage's own per-item measurement; job_even: the job's benchmark "
            "seconds divided evenly over its items; imported: an imported system's own report (its file's latency)",
        ),
        "job_seconds": Column(pl.Float64(), doc="wall seconds of the whole job (Snakemake benchmark file)"),
        "job_items": Column(pl.Int64(), doc="items the job processed (queries, pairs or requests)"),
        "items": Column(pl.Int64(), doc="items of this query in the job"),
        "device": Column(pl.String(), doc="cpu, cuda, ... or a server's base URL"),
        "prompt_tokens": Column(
            pl.Int64(), nullable=True, doc="LLM prompt tokens (null: not an LLM stage or not recorded)"
        ),
        "completion_tokens": Column(pl.Int64(), nullable=True),
        "retrieval_calls": Column(pl.Int64(), doc="first-stage searches made for this query"),
        "llm_calls": Column(pl.Int64(), doc="LLM generation calls made for this query (re-asks included)"),
        "rerank_pairs": Column(pl.Int64(), doc="(query, unit) pairs scored by a reranker"),
        "money": Column(
            pl.Float64(),
            nullable=True,
            doc="what this query's LLM tokens cost at the model block's "
            "prices (0 without an LLM; null: the model has no prices or a server gave no token counts)",
        ),
        "currency": Column(pl.String(), nullable=True, doc="the prices' currency (null where money is 0 or null)"),
    },
    key=("qid", "stage", "component"),
    enums={"basis": COST_BASES},
)

SYSTEM_COSTS = Contract(
    name="system_costs",
    columns={
        "qid": Column(pl.String()),
        "latency_s": Column(pl.Float64(), nullable=True,
                            doc="the system's own latency for the question (null: its file has none)"),
        "prompt_tokens": Column(pl.Int32(), nullable=True),
        "completion_tokens": Column(pl.Int32(), nullable=True),
        "money": Column(pl.Float64(), nullable=True, doc="what answering it cost, as the file reports it"),
        "currency": Column(pl.String(), nullable=True, doc="systems.<name>.currency (null where money is)"),
    },
    key=("qid",),
)

POLICY_COSTS = Contract(
    name="policy_costs",
    columns={
        "router": Column(pl.String()),
        "families": Column(pl.String(), doc="feature families the router reads, '+'-joined ('' for none)"),
        "component": Column(pl.String(), doc="pre_decision | base_answer | trigger_retrieval | trigger_generation"),
        "usage": Column(pl.Float64(), doc="held-out trigger rate of the frozen router"),
        "accuracy": Column(pl.Float64(), doc="held-out mean metric of the adaptive policy"),
        "seconds": Column(pl.Float64(), doc="mean measured seconds per held-out query spent in this component"),
        "token_equivalents": Column(pl.Float64(), doc="mean token-equivalents per held-out query (costs.prices)"),
        "money": Column(pl.Float64(), nullable=True, doc="mean money per held-out query at the LLM blocks' prices "
                        "(null: a model in it has no prices)"),
        "currency": Column(pl.String(), nullable=True, doc="the prices' currency (null: no model block is priced)"),
    },
    key=("router", "component"),
    enums={"component": frozenset({"pre_decision", "base_answer", "trigger_retrieval", "trigger_generation"})},
    title="Cost: each router's frozen policy",
    about="Mean measured seconds, token-equivalents and money (at the LLM blocks' `prices`; empty when not priced) "
          "per held-out query by component.",
    landing=(),
)

COST_FRONTIERS = Contract(
    name="cost_frontiers",
    columns={
        "router": Column(pl.String()),
        "frontier": Column(pl.String(), doc="exact | deployable | conservative"),
        "budget": Column(pl.Float64()),
        "usage": Column(pl.Float64(), doc="realized held-out usage (frontiers.parquet)"),
        "accuracy": Column(pl.Float64(), doc="held-out mean metric (frontiers.parquet)"),
        "seconds": Column(pl.Float64(), doc="mean measured seconds per held-out query under the same triggers"),
        "token_equivalents": Column(pl.Float64(), doc="mean token-equivalents per held-out query"),
        "money": Column(pl.Float64(), nullable=True, doc="mean money per held-out query at the LLM blocks' prices "
                        "(null: a model in it has no prices)"),
        "currency": Column(pl.String(), nullable=True, doc="the prices' currency (null: no model block is priced)"),
    },
    key=("router", "frontier", "budget"),
    enums={"frontier": frozenset(FRONTIER_KINDS)},
    title="Cost: frontier points with measured cost",
    about="Per router, frontier and budget: usage, accuracy, seconds, token-equivalents and money per held-out query.",
    landing=(),
)

REUSE_COSTS = Contract(
    name="reuse_costs",
    columns={
        "mode": Column(pl.String(), doc="reuse (the base arm's rankings and rerank scores are reused) | recompute"),
        "stage": Column(pl.String(), doc="the triggered arm's stage, as the ledger names it"),
        "component": Column(pl.String()),
        "seconds": Column(pl.Float64(), doc="mean measured seconds per held-out query of triggering the arm"),
        "token_equivalents": Column(pl.Float64()),
        "money": Column(pl.Float64(), nullable=True, doc="mean money per held-out query at the LLM blocks' prices "
                        "(null: a model in it has no prices)"),
        "currency": Column(pl.String(), nullable=True, doc="the prices' currency (null: no model block is priced)"),
        "rerank_pairs": Column(pl.Float64(), doc="mean pairs the trigger sends to the reranker"),
    },
    key=("mode", "stage", "component"),
    enums={"mode": frozenset({"reuse", "recompute"})},
    title="Cost: reuse vs recompute",
    about="Triggering the alternative arm, reusing the base arm's rankings and rerank scores or recomputing them.",
    landing=(),
)


# --- Study C (study_c/: synthetic, strategies, tables): synthetic queries, strategy runs, answers with costs


STUDY_C_QUERIES = Contract(
    name="study_c_queries",
    columns={
        "qid": Column(pl.String(), doc="<paper id>:<query type>"),
        "paper_id": Column(pl.String(), doc="the source paper: the gold target (a unit_id of the corpus)"),
        "query_type": Column(pl.String(), doc="problem | method"),
        "text": Column(pl.String(), doc="the generated query (never empty)"),
    },
    key=("qid",),
    enums={"query_type": frozenset(QUERY_TYPES)},
)

STUDY_C_RUNS = Contract(
    name="study_c_runs",
    columns={
        "qid": Column(pl.String()),
        "strategy": Column(pl.String()),
        "docid": Column(pl.String(), doc="a paper id (unit_id of the corpus)"),
        "rank": Column(pl.Int32(), doc="1-based; the top-k given to the generator"),
        "score": Column(pl.Float64(), doc="the score the final order follows (cosine, MaxSim, RRF or listwise rank)"),
    },
    key=("qid", "docid"),
    order=("qid", "rank"),
)

STUDY_C_ANSWERS = Contract(
    name="study_c_answers",
    columns={
        "qid": Column(pl.String()),
        "strategy": Column(pl.String()),
        "searched": Column(pl.Boolean(), doc="the strategy retrieved for this query (false: Tool Call chose not to)"),
        "search_queries": Column(pl.List(pl.String()), doc="the texts actually searched, in order"),
        "fallback": Column(pl.String(), nullable=True, doc="why the strategy fell back (null: it did not)"),
        "answer": Column(pl.String(), nullable=True, doc="the generated answer (null when its call failed)"),
        "answer_status": Column(pl.String(), doc="ok | error"),
        "answer_error": Column(pl.String(), nullable=True),
        "llm_calls": Column(pl.Int32(), doc="LLM calls for this query, the answer included"),
        "prompt_tokens": Column(pl.Int64()),
        "completion_tokens": Column(pl.Int64()),
        "llm_seconds": Column(pl.Float64(), doc="measured LLM seconds (batch time apportioned by tokens)"),
        "retrieval_seconds": Column(pl.Float64(), doc="measured search seconds (batch time split evenly)"),
    },
    key=("qid",),
    enums={"answer_status": frozenset({"ok", "error"})},
)


# --- CSV reports: the tables a reader opens (`tables.write_report` conforms each on write; `file` is its path)

CELL_QUERY_TYPE = Column(pl.String(), doc="problem | method | all (both pooled)")
STRATEGY = Column(pl.String(), doc="the study_c.strategies entry")
STUDY_C_CELLS = {"strategy": frozenset(STRATEGIES), "query_type": frozenset({*QUERY_TYPES, "all"})}
STUDY_C_TABLES = "results/<dataset>/study_c/tables/"

ANSWER_SUMMARY = Contract(  # answers/answering.py summarize
    name="answer_summary",
    file="results/<dataset>/answers/summary.csv",
    columns={
        "policy": Column(pl.String(), doc="the generation.policies entry (closed_book or an arm)"),
        "judged": Column(pl.Int64(), doc="questions with a judgment of this policy by either judge"),
        "grounded_questions": Column(
            pl.Int64(),
            doc="questions every policy has a grounded correctness for: the questions the correctness mean is over",
        ),
        "correctness": Column(
            pl.Float64(),
            nullable=True,
            doc="mean grounded correctness (0–2, read as judging.scoring says) on those questions; null: none",
        ),
        "faithfulness_questions": Column(
            pl.Int64(), doc="of those, the questions where no policy abstained (an unknown abstention counts as one)"
        ),
        "faithfulness": Column(
            pl.Float64(), nullable=True, doc="mean faithfulness (0–2) on those questions; null: none"
        ),
        "answer_rate": Column(
            pl.Float64(),
            nullable=True,
            doc="quality judge: mean is_answer (expected: P(is_answer)) over the policy's judgments; null: none",
        ),
        "overall_unconditional": Column(
            pl.Float64(),
            nullable=True,
            doc="mean overall score, refusals kept (expected: P(is_answer) · E[overall | is_answer])",
        ),
        "overall_conditional": Column(
            pl.Float64(),
            nullable=True,
            doc="mean overall score given is_answer (argmax: over the replies that chose is_answer true)",
        ),
        "distinct_correctness": Column(
            pl.Int64(),
            doc="distinct correctness values the judge gave (1: every answer "
            "the same, the difference carries no information)",
        ),
        "distinct_overall": Column(pl.Int64(), doc="distinct overall values the judge gave"),
        "grounded_basis": Column(
            pl.String(),
            doc="the grounded judgments' score bases with counts, e.g. \"masked_exact: 17\" ('' for none)",
        ),
        "quality_basis": Column(pl.String(), doc="the quality judgments' score bases with counts"),
        "grounded_parse_failed": Column(pl.Int64(), doc="grounded judgments with status parse_failed"),
        "quality_parse_failed": Column(pl.Int64(), doc="quality judgments with status parse_failed"),
        "grounded_replies": Column(
            pl.String(), doc='how the grounded replies were obtained, with counts, e.g. "constrained: 15; length: 2"'
        ),
        "quality_replies": Column(pl.String(), doc="how the quality replies were obtained, with counts"),
        "answers": Column(pl.Int64(), doc="the policy's answer requests (every split it is answered on)"),
        "answer_errors": Column(pl.Int64(), doc="answer requests that failed (status error): never judged"),
        "judge_errors": Column(pl.Int64(), doc="judgments (either judge) whose call failed"),
        "error_cause": Column(
            pl.String(),
            nullable=True,
            doc="the most common cause of those failures, with its count (null: none failed)",
        ),
    },
    key=("policy",),
    title="Answers: judged quality per policy",
    about="Judged answers per policy and the judges' mean scores; `distinct_*` counts the different scores the judge "
    "gave (1 = it gave every answer the same).",
    landing=(
        "policy",
        "judged",
        "grounded_questions",
        "correctness",
        "faithfulness",
        "answer_rate",
        "overall_unconditional",
        "distinct_correctness",
        "distinct_overall",
        "answer_errors",
        "judge_errors",
    ),
)

UTILITY_REPORT = Contract(  # routing/labels.py utility_table
    name="utility_report",
    file="results/<dataset>/routing/<pair>/utility.csv",
    columns={
        "dataset": Column(pl.String(), doc="dataset key from the config"),
        "pair": Column(pl.String(), doc="the routing.pairs entry"),
        "model": Column(pl.String(), nullable=True, doc="Study B: the generator model(s) behind the answers, "
                        "' | '-joined; null for Study A"),
        "measure": Column(pl.String(), doc="the pair's measure: an evaluation.measures name (Study A) or the "
                          "answer scorer em | f1 | contains (Study B)"),
        "split": Column(pl.String(), doc="dev | calibration | heldout | all"),
        "n": Column(pl.UInt32(), doc="labelled questions"),
        "gains": Column(pl.UInt32(), doc="questions with delta > 0 (rescue / benefit)"),
        "harms": Column(pl.UInt32(), doc="questions with delta < 0"),
        "ties": Column(pl.UInt32(), doc="questions with delta = 0 (tie / neutral)"),
        "mean_off": Column(pl.Float64(), doc="mean metric never switching (the base arm / no retrieval)"),
        "mean_on": Column(pl.Float64(), doc="mean metric always switching (the alternative arm / retrieval)"),
        "mean_delta": Column(pl.Float64(), doc="mean of delta = metric on − metric off"),
        "gain_rate": Column(pl.Float64(), doc="gains / n"),
        "harm_rate": Column(pl.Float64(), doc="harms / n"),
        "tie_rate": Column(pl.Float64(), doc="ties / n"),
        "without_reference": Column(pl.Int32(), doc="Study B: answered questions left out for lack of reference "
                                    "answers (0 for Study A); the same on every row"),
        "signal_absent": Column(pl.Boolean(), doc="every label's delta is equal (over all splits): nothing to learn; "
                                "the same on every row"),
    },
    key=("dataset", "pair", "split"),
    enums={"split": SPLIT_NAMES | {"all"}},
    title="Routing: utility distribution",
    about="Per split: questions where switching rescues (gains), harms or ties, and the mean metric off / always on.",
    landing=("split", "measure", "n", "gains", "harms", "ties", "mean_off", "mean_on", "mean_delta", "signal_absent"),
)

ROUTER_THRESHOLDS = Contract(  # routing/routers.py fit_routers
    name="router_thresholds",
    file="results/<dataset>/routing/<pair>/thresholds.csv",
    columns={
        "router": ROUTER,
        "cost_per_trigger": Column(
            pl.Float64(),
            doc="c of the dev sweep: routing.cost_per_trigger, or with "
            "routing.measured_cost per_unit × the router's measured cost of one trigger on dev",
        ),
        "threshold": Column(
            pl.Float64(),
            doc="the frozen threshold (a score above it triggers): the dev utility "
            "maximiser, fewest triggers on near-ties; -inf for always, inf for never",
        ),
        "dev_utility": Column(
            pl.Float64(), doc="mean(metric − c × triggered) on dev's out-of-fold scores at that threshold"
        ),
        "dev_trigger_rate": Column(pl.Float64(), doc="share of dev questions triggered at that threshold"),
        "signal_absent": Column(pl.Boolean(), doc="some fold's training labels were constant (a flat score)"),
    },
    key=("router",),
)

ROUTER_POLICIES = Contract(  # routing/routers.py heldout_tables (policy_rows)
    name="router_policies",
    file="results/<dataset>/routing/<pair>/policies.csv",
    columns={
        "router": ROUTER,
        "questions": Column(pl.Int64(), doc="held-out questions"),
        OFF: Column(pl.Float64(), doc="held-out mean metric never switching (the base arm / no retrieval)"),
        ALWAYS_ON: Column(pl.Float64(), doc="held-out mean metric always switching"),
        ADAPTIVE: Column(pl.Float64(), doc="held-out mean metric switching when the frozen router fires"),
        "trigger_rate": Column(pl.Float64(), doc="share of held-out questions the router triggers on"),
        "rescues": Column(pl.Int64(), doc="triggered held-out questions with delta > 0"),
        "harms": Column(pl.Int64(), doc="triggered held-out questions with delta < 0"),
        "cost_per_trigger": Column(pl.Float64(), doc="c the router was frozen with (thresholds.csv)"),
        "utility": Column(pl.Float64(), doc="held-out mean(adaptive metric − c × triggered)"),
    },
    key=("router",),
    title="Routing: held-out policies",
    about="Per router: held-out metric off, always on and adaptive, trigger rate, rescues and harms among the "
          "triggered, utility = mean(metric − c × triggered).",
    landing=("router", "questions", "off", "always_on", "adaptive", "trigger_rate", "rescues", "harms",
             "cost_per_trigger", "utility"),
)

ROUTER_COMPARISONS = Contract(  # routing/routers.py heldout_tables: COMPARISONS rows per router and scale
    name="router_comparisons",
    file="results/<dataset>/routing/<pair>/comparisons.csv",
    columns={
        **COMPARISONS.columns,
        "a": Column(pl.String(), doc="adaptive: the router's held-out policy"),
        "b": Column(pl.String(), doc="always_on | off: the policy subtracted"),
        "router": ROUTER,
        "scale": Column(
            pl.String(),
            doc="metric (the pair's measure) | utility (metric − c × triggered with the "
            "router's frozen c; always switching pays c on every question): what is compared",
        ),
    },
    key=("router", "scale", "a", "b"),
    enums={
        **COMPARISONS.enums,
        "a": frozenset({ADAPTIVE}),
        "b": frozenset({ALWAYS_ON, OFF}),
        "scale": frozenset({"metric", "utility"}),
    },
    title="Routing: adaptive vs always-on and vs off",
    about="Mean per-question difference a − b on held-out, on the metric and on the utility (metric − c × trigger), "
    "CI from a bootstrap over groups, paired permutation p, win / tie / loss shares.",
    landing=(),
)


METRICS_SUMMARY_REPORT = "metrics_summary_report"  # the name of metrics/summary.csv's contract, whatever its measures


def metrics_summary_report(measures: Sequence[str]) -> Contract:
    """metrics/summary.csv (retrieval/evaluate.py summary_table): one column per measure, so its contract is built
    from the measures the arms' summaries hold (ir-measures' names, in sorted order)."""
    return Contract(
        name=METRICS_SUMMARY_REPORT,
        file="results/<dataset>/metrics/summary.csv",
        columns={
            "arm": METRICS_SUMMARY.columns["arm"],
            "split": Column(pl.String(), doc="dev | calibration | heldout | all (only all unless the runs feed "
                            "routing or answers)"),
            **{measure: Column(pl.Float64(), doc="the measure's mean over the split's judged queries; one column per "
                               "evaluation.measures entry, named as ir-measures writes it, sorted")
               for measure in measures},
            "questions": Column(pl.UInt32(), doc="judged queries behind the means"),
        },
        key=("arm", "split"),
        enums={"split": SPLIT_NAMES | {"all"}},
        title="Retrieval metrics",
        about="Mean of each measure per arm and split (ir-measures; `n` queries).",
    )


ARM_COMPARISONS = Contract(  # retrieval/evaluate.py arm_comparisons: COMPARISONS rows per measure
    name="arm_comparisons",
    file="results/<dataset>/metrics/paired.csv",
    columns={
        "measure": Column(pl.String(), doc="ir-measures name (evaluation.measures)"),
        **COMPARISONS.columns,
        "a": Column(pl.String(), doc="the arm"),
        "b": Column(pl.String(), doc="the arm subtracted: for a reranking arm, the arm that ranks its first stage "
                    "unreranked (when one does), else the dataset's first arm (retrieval/arms.py "
                    "comparison_baselines)"),
        "n": Column(pl.Int64(), doc="judged queries"),
    },
    key=("measure", "a", "b"),
    enums=COMPARISONS.enums,
    title="Retrieval: paired differences between arms",
    about="Per measure, the mean per-query difference of each arm against its first stage (a reranking arm) or the "
    "dataset's first arm, CI from a bootstrap over groups, paired permutation p, win / tie / loss shares.",
    landing=("measure", "a", "b", "estimate", "low", "high", "p_permutation", "p_floor", "n", "n_groups", "win",
             "tie", "loss"),
)

STUDY_C_QUALITY = Contract(  # study_c/comparisons.py quality
    name="study_c_quality",
    file=STUDY_C_TABLES + "quality.csv",
    columns={
        "strategy": STRATEGY,
        "query_type": CELL_QUERY_TYPE,
        "queries": Column(pl.Int64(), doc="queries in the cell"),
        "judged": Column(pl.Int64(), doc="queries judged with status ok"),
        "parse_failed": Column(pl.Int64(), doc="judgments with status parse_failed"),
        "judge_replies": Column(pl.String(), doc="how the judge's replies were obtained, with counts, e.g. "
                                "\"constrained: 40\" ('' for none)"),
        "score_basis": Column(pl.String(), doc="the ok judgments' score bases with counts, e.g. \"masked_exact: 40\""),
        "answer_rate": Column(pl.Float64(), nullable=True, doc="mean is_answer (expected: P(is_answer)) among judged; "
                              "null: none judged"),
        "distinct_overall": Column(pl.Int64(), doc="distinct overall scores among judged (1: the judge gave every "
                                   "answer the same)"),
        **{f"{metric}_cond": Column(pl.Float64(), nullable=True, doc=f"mean {metric} given is_answer; null: none")
           for metric in STUDY_C_METRICS},
        **{f"{metric}_uncond": Column(pl.Float64(), nullable=True, doc=f"mean {metric} with refusals as 0 "
                                      "(expected: P(is_answer) · E[score | is_answer]); null: none")
           for metric in STUDY_C_METRICS},
    },
    key=("strategy", "query_type"),
    enums=STUDY_C_CELLS,
    title="Study C: judged quality per strategy",
    about="The judge's scores per strategy.",
    landing=(),
)

STUDY_C_RETRIEVAL = Contract(  # study_c/comparisons.py retrieval
    name="study_c_retrieval",
    file=STUDY_C_TABLES + "retrieval.csv",
    columns={
        "strategy": STRATEGY,
        "query_type": CELL_QUERY_TYPE,
        "queries": Column(pl.Int64(), doc="queries in the cell"),
        "hit_at_1": Column(pl.Float64(), nullable=True, doc="share of queries with the gold paper at rank 1 (null: no "
                           "queries)"),
        "hit_at_3": Column(pl.Float64(), nullable=True, doc="share with the gold paper in the top 3"),
        "mrr_at_3": Column(pl.Float64(), nullable=True, doc="mean reciprocal rank of the gold paper, 0 below rank 3"),
    },
    key=("strategy", "query_type"),
    enums=STUDY_C_CELLS,
    title="Study C: retrieval of the source paper",
    about="Hit@1, Hit@3 and MRR@3 of the paper each query was written from, per strategy and query type (judge-free).",
    landing=("strategy", "query_type", "queries", "hit_at_1", "hit_at_3", "mrr_at_3"),
)

PAIRED_VS_CLASSIC = {
    "strategy": STRATEGY,
    "query_type": CELL_QUERY_TYPE,
    "queries": Column(pl.Int64(), doc="queries scored under both the strategy and classic (overall: judged ok)"),
    "papers": Column(pl.Int64(), doc="papers among those queries (the bootstrap's resampling unit)"),
    "delta": Column(pl.Float64(), nullable=True, doc="mean per-query strategy − classic (null: no query)"),
    "low": Column(pl.Float64(), nullable=True, doc="bootstrap CI over papers (null: fewer than 2 papers)"),
    "high": Column(pl.Float64(), nullable=True),
    "p_permutation": Column(pl.Float64(), nullable=True, doc="two-sided paired permutation p, each paper's summed "
                            "difference flipped (null: fewer than 2 papers)"),
    "p_floor": Column(pl.Float64(), nullable=True, doc="the smallest p the test can give with these papers "
                      "(stats/paired.py smallest_p)"),
    "win": Column(pl.Float64(), nullable=True, doc="share of queries with strategy > classic"),
    "tie": Column(pl.Float64(), nullable=True),
    "loss": Column(pl.Float64(), nullable=True),
}
STUDY_C_PAIRED = Contract(  # study_c/comparisons.py paired (the judged overall score)
    name="study_c_paired", file=STUDY_C_TABLES + "paired.csv", columns=PAIRED_VS_CLASSIC,
    key=("strategy", "query_type"), enums=STUDY_C_CELLS,
    title="Study C: judged overall vs classic",
    about="Mean paired difference of the unconditional overall score (1–5), CI from a bootstrap over papers.",
    landing=(),
)
STUDY_C_PAIRED_RETRIEVAL = Contract(  # study_c/comparisons.py paired (the gold paper's Hit@3, judge-free)
    name="study_c_paired_retrieval", file=STUDY_C_TABLES + "paired_retrieval.csv", columns=PAIRED_VS_CLASSIC,
    key=("strategy", "query_type"), enums=STUDY_C_CELLS,
    title="Study C: Hit@3 vs classic",
    about="Mean paired difference of the gold paper's Hit@3, CI from a bootstrap over papers (judge-free).",
    landing=(),
)

STUDY_C_GOLD = Contract(  # study_c/comparisons.py gold (over judged queries, status ok)
    name="study_c_gold",
    file=STUDY_C_TABLES + "gold.csv",
    columns={
        "strategy": STRATEGY,
        "query_type": CELL_QUERY_TYPE,
        "gold_hit": Column(pl.Int64(), doc="judged queries whose gold paper is in the top k shown"),
        "gold_miss": Column(pl.Int64(), doc="judged queries whose gold paper is not"),
        "overall_cond_hit": Column(pl.Float64(), nullable=True, doc="mean overall given is_answer on gold-hit queries "
                                   "(null: none)"),
        "overall_cond_miss": Column(pl.Float64(), nullable=True, doc="the same on gold-miss queries"),
        "overall_uncond_hit": Column(pl.Float64(), nullable=True, doc="mean unconditional overall on gold-hit queries"),
        "overall_uncond_miss": Column(pl.Float64(), nullable=True, doc="the same on gold-miss queries"),
        "uncond_hit_minus_miss": Column(pl.Float64(), nullable=True, doc="overall_uncond_hit − overall_uncond_miss "
                                        "(null: either is)"),
    },
    key=("strategy", "query_type"),
    enums=STUDY_C_CELLS,
)

STUDY_C_GAP = Contract(  # study_c/comparisons.py gap
    name="study_c_gap",
    file=STUDY_C_TABLES + "gap.csv",
    columns={
        "strategy": STRATEGY,
        "overall_cond_problem_minus_method": Column(pl.Float64(), nullable=True, doc="overall_cond of problem − of "
                                                    "method queries (quality.csv; null: either is)"),
        "overall_uncond_problem_minus_method": Column(pl.Float64(), nullable=True, doc="the same for overall_uncond"),
    },
    key=("strategy",),
    enums={"strategy": frozenset(STRATEGIES)},
)

STUDY_C_COST = Contract(  # study_c/comparisons.py cost
    name="study_c_cost",
    file=STUDY_C_TABLES + "cost.csv",
    columns={
        "strategy": STRATEGY,
        "query_type": CELL_QUERY_TYPE,
        "queries": Column(pl.Int64(), doc="queries in the cell"),
        "llm_calls_per_query": Column(
            pl.Float64(), nullable=True, doc="mean LLM calls per query, the answer included (null: no answers)"
        ),
        "prompt_tokens_per_query": Column(pl.Float64(), nullable=True),
        "completion_tokens_per_query": Column(pl.Float64(), nullable=True),
        "llm_seconds_per_query": Column(pl.Float64(), nullable=True, doc="mean measured LLM seconds"),
        "retrieval_seconds_per_query": Column(pl.Float64(), nullable=True, doc="mean measured search seconds"),
        "seconds_per_query": Column(pl.Float64(), nullable=True, doc="mean LLM + search seconds"),
        "money_per_query": Column(
            pl.Float64(), nullable=True, doc="mean money at models.generator.prices (null: no prices)"
        ),
        "currency": Column(pl.String(), nullable=True, doc="the prices' currency (null: no prices)"),
        "searched_share": Column(pl.Float64(), nullable=True, doc="share of queries the strategy searched for"),
        "fallbacks": Column(
            pl.String(), doc="fallbacks by cause with counts, e.g. \"rephrase_failed: 3\" ('' for none)"
        ),
    },
    key=("strategy", "query_type"),
    enums=STUDY_C_CELLS,
)

COST_STAGE_TOTALS = Contract(  # cost/ledger.py stage_totals
    name="cost_stage_totals",
    file="results/<dataset>/cost/stages.csv",
    columns={
        "stage": COST_LEDGER.columns["stage"],
        "component": COST_LEDGER.columns["component"],
        "basis": COST_LEDGER.columns["basis"],
        "rows": Column(pl.UInt32(), doc="ledger rows (queries) of this stage, component and basis"),
        "seconds": Column(pl.Float64(), nullable=True, doc="their measured seconds, summed (null: an imported system "
                          "that did not report its latency)"),
        "money": Column(pl.Float64(), nullable=True, doc="their money, summed (null: any row's money is unknown)"),
        "currency": Column(pl.String(), nullable=True, doc="the prices' currency (null: none)"),
    },
    key=("stage", "component", "basis"),
    enums={"basis": COST_BASES},
    title="Measured cost per stage",
    about="Ledger totals per stage (basis: item = measured per item, job_even = the job's benchmark seconds split "
          "evenly over its items; money at the LLM blocks' `prices`).",
    landing=(),
)

REVIEW_AGREEMENT = Contract(  # judging/review.py judge_agreement
    name="review_agreement",
    file="results/<dataset>/review/<judge>_agreement.csv",
    columns={
        "label": Column(
            pl.String(),
            doc="the judge's label compared (grounded: correctness | faithfulness; quality: the six Study C scores)",
        ),
        "group": Column(pl.String(), doc="all | a policy | '<a> − <b>' (the difference of two policies)"),
        "n_population": Column(
            pl.Int64(), doc="judged items of the group with the label (a − b: questions judged under both)"
        ),
        "n_reviewed": Column(pl.Int64(), doc="reviewed items among them"),
        "judge_mean": Column(
            pl.Float64(),
            nullable=True,
            doc="the judge's mean over the group (judging.scoring's reading; a − b: mean per-question difference)",
        ),
        "ppi_mean": Column(
            pl.Float64(), nullable=True, doc="PPI++ estimate of the human mean (null: unreviewed strata)"
        ),
        "ppi_low": Column(
            pl.Float64(), nullable=True, doc="its CLT interval (null: too few reviews or unreviewed strata)"
        ),
        "ppi_high": Column(pl.Float64(), nullable=True),
        "ppi_status": Column(
            pl.String(), nullable=True, doc="ok | too_few_reviews: … | unreviewed_strata: … (null: no items)"
        ),
        "ppi_lambda": Column(
            pl.String(), nullable=True, doc="λ̂ (3 decimals), ' / '-joined per policy of a difference"
        ),
        "judge_mean_reviewed": Column(
            pl.Float64(), nullable=True, doc="the judge's raw mean on the reviewed items (null on a − b rows)"
        ),
        "human_mean_reviewed": Column(pl.Float64(), nullable=True, doc="the human raw mean on the reviewed items"),
        "human_mean_stratified": Column(
            pl.Float64(), nullable=True, doc="design-weighted human mean over the reviewed strata"
        ),
        "corrected_mean": Column(
            pl.Float64(),
            nullable=True,
            doc="confusion-matrix corrected mean (null: a judge level of the group has no review)",
        ),
        "kappa_quadratic": Column(
            pl.Float64(),
            nullable=True,
            doc="quadratic-weighted Cohen's kappa judge vs human "
            "on the reviewed items (null: fewer than 2 or undefined)",
        ),
        "exact_agreement": Column(pl.Float64(), nullable=True, doc="share of identical labels on the reviewed items"),
        "covered_share": Column(pl.Float64(), nullable=True, doc="share of the group's items in strata with reviews"),
    },
    key=("label", "group"),
    enums={"label": frozenset({"correctness", "faithfulness", *STUDY_C_METRICS})},
)


def _review_sheet(judge: str, labels: Sequence[str]) -> Contract:
    return Contract(
        name=f"review_sheet_{judge}",
        file=f"results/<dataset>/review/{judge}_sample.csv",
        columns={
            "item_id": Column(pl.String(), doc="<qid>|<policy>"),
            "question": Column(pl.String(), doc="the question text"),
            "answer": Column(pl.String(), doc="the judged answer"),
            "references": Column(pl.String(), doc="reference answers, one '- item' line each ('' for none)"),
            "evidence": Column(pl.String(), doc="the units shown with the answer, one '- item' line each ('' for "
                               "closed_book)"),
            **{f"human_{label}": Column(pl.String(), nullable=True, doc=f"to fill in: the reviewer's {label}")
               for label in labels},
            "notes": Column(pl.String(), nullable=True, doc="to fill in: free text"),
        },
        key=("item_id",),
    )


REVIEW_SHEETS = {"grounded": _review_sheet("grounded", ("correctness", "faithfulness")),  # 0–2 each
                 "quality": _review_sheet("quality", STUDY_C_METRICS)}  # 0–5 each

JUDGE_AGREEMENT = Contract(  # judging/validation.py agreement_table
    name="judge_agreement",
    file="results/<dataset>/judging/agreement.csv",
    columns={
        "reading": Column(pl.String(), doc="argmax | expected: the judge's correctness as written or "
                          "probability-weighted"),
        "measure": Column(pl.String(), doc="spearman | kappa (judge binarised at correctness > 1) | auroc | bias "
                          "(correctness / 2 − reference mean)"),
        "estimate": Column(pl.Float64(), nullable=True, doc="the measure against the reference label (null: "
                           "undefined, e.g. a constant label)"),
        "low": Column(pl.Float64(), nullable=True, doc="percentile bootstrap CI over groups (null: undefined)"),
        "high": Column(pl.Float64(), nullable=True),
        "n": Column(pl.Int64(), doc="judged answers"),
        "n_groups": Column(pl.Int64(), doc="groups (papers / contexts) resampled"),
        "distinct_scores": Column(pl.Int64(), doc="distinct judge values of this reading"),
    },
    key=("reading", "measure"),
    enums={"reading": frozenset(JUDGE_SCORINGS), "measure": frozenset(AGREEMENT_MEASURES)},
)

JUDGE_VERDICT = Contract(  # judging/validation.py verdict_table
    name="judge_verdict",
    file="results/<dataset>/judging/verdict.csv",
    columns={
        "reference": Column(pl.String(), doc="judging.validate.reference: the label the judge is checked against"),
        "reading": JUDGE_AGREEMENT.columns["reading"],
        "measure": Column(pl.String(), doc="judging.validate.gate.measure"),
        "estimate": JUDGE_AGREEMENT.columns["estimate"],
        "low": JUDGE_AGREEMENT.columns["low"],
        "high": JUDGE_AGREEMENT.columns["high"],
        "n": JUDGE_AGREEMENT.columns["n"],
        "n_groups": JUDGE_AGREEMENT.columns["n_groups"],
        "above": Column(pl.Float64(), doc="judging.validate.gate.above: the floor the CI's lower end must clear"),
        "validated": Column(pl.Boolean(), doc="low > above: the judge's differences on this dataset are findings"),
    },
    key=("reading",),
    enums={"reading": frozenset(JUDGE_SCORINGS), "measure": frozenset(GATE_MEASURES)},
    title="Judge validation: verdict",
    about="Whether the judge is validated on this dataset (judging.validate.gate: the CI's lower end of its measure "
          "above the floor); judged differences count as findings only when it is.",
)

REFERENCE_COMPARISONS = Contract(  # judging/validation.py reference_comparisons
    name="reference_comparisons",
    file="results/<dataset>/judging/reference_comparisons.csv",
    columns=COMPARISONS.columns,
    key=COMPARISONS.key,
    enums=COMPARISONS.enums,
    title="Reference label: paired differences",
    about="Mean per-question difference a − b of the reference label (judging.validate.reference) on the questions "
          "judged under both, CI from a bootstrap over groups, paired permutation p.",
    landing=COMPARISONS.landing,
)

PPI_REPLAY = Contract(  # judging/validation.py replay_table
    name="ppi_replay",
    file="results/<dataset>/judging/ppi_replay.csv",
    columns={
        "n": Column(pl.Int64(), doc="reviewed answers asked for (judging.validate.review_sizes)"),
        "n_reviewed_mean": Column(pl.Float64(), doc="mean reviewed answers actually drawn per replay"),
        "per_stratum": Column(pl.Int64(), doc="the smallest per-stratum draw giving at least n"),
        "N": Column(pl.Int64(), doc="judged answers"),
        "replays": Column(pl.Int64(), doc="seeded replays of the review draw"),
        "reference_mean": Column(pl.Float64(), doc="the reference label's mean over all N answers: the target"),
        **{
            column: spec
            for name, what in (
                ("tuned", "PPI++ (power-tuned)"),
                ("plain", "PPI (λ = 1)"),
                ("classical", "classical (reviewed labels only)"),
            )
            for column, spec in {
                f"{name}_coverage": Column(
                    pl.Float64(), doc=f"share of replays whose {what} interval covers the target"
                ),
                f"{name}_width": Column(pl.Float64(), doc=f"mean width of the {what} interval"),
            }.items()
        },
        "tuned_lambda_mean": Column(pl.Float64(), doc="mean λ̂ of PPI++"),
        "naive_coverage": Column(
            pl.Float64(), doc="1 when the judge-only interval (mean ± z·sd/√N, 0–1) covers the target, else 0"
        ),
        "naive_width": Column(pl.Float64(), doc="its width"),
        "naive_mean": Column(pl.Float64(), doc="the judge's mean rescaled to 0–1"),
        "difference": Column(
            pl.String(),
            nullable=True,
            doc="the policy difference replayed (the second judged "
            "policy − the first); null: fewer than two judged policies",
        ),
        "difference_target": Column(
            pl.Float64(),
            nullable=True,
            doc="the reference label's mean difference on the questions judged under both: the target",
        ),
        **{
            column: spec
            for name, what in (("tuned", "PPI++"), ("plain", "PPI (λ = 1)"), ("classical", "classical"))
            for column, spec in {
                f"difference_{name}_coverage": Column(
                    pl.Float64(),
                    nullable=True,
                    doc=f"share of replays whose {what} interval of the difference covers its target",
                ),
                f"difference_{name}_width": Column(pl.Float64(), nullable=True, doc="mean width of that interval"),
            }.items()
        },
        "difference_replays": Column(
            pl.Int64(),
            nullable=True,
            doc="replays whose draw reviewed both sides enough for an interval (the coverage's denominator)",
        ),
    },
    key=("n",),
)

# Every CSV report by name (metrics/summary.csv's contract depends on the measures: `metrics_summary_report`)
REPORTS = {
    contract.name: contract
    for contract in (
        ANSWER_SUMMARY, COMPARISONS, ARM_COMPARISONS, UTILITY_REPORT, ROUTER_THRESHOLDS, ROUTER_POLICIES,
        ROUTER_COMPARISONS, STUDY_C_QUALITY, STUDY_C_RETRIEVAL, STUDY_C_PAIRED, STUDY_C_PAIRED_RETRIEVAL,
        STUDY_C_GOLD, STUDY_C_GAP, STUDY_C_COST, COST_STAGE_TOTALS, REVIEW_AGREEMENT, *REVIEW_SHEETS.values(),
        JUDGE_AGREEMENT, JUDGE_VERDICT, REFERENCE_COMPARISONS, PPI_REPLAY, MULTISTEP_CURVE, MULTISTEP_COMPARISONS,
        MULTISTEP_STOPS, MULTISTEP_FRONTIERS,
    )
}


# --- Stage reports that are no table, as the run's summary shows them

GENERATED_QUESTIONS_REPORT = Document(  # ingest/questions.py: the question generator's report
    name="generated_questions_report",
    file="results/<dataset>/generated_questions_report.json",
    title="Generated questions",
    about="Units sampled, questions kept and failures by cause of the question generator.",
)
JUDGE_VALIDATION_REPORT = Document(  # judging/validation.py: the judge against the reference label
    name="judge_validation_report",
    file="results/<dataset>/judging/report.md",
    title="Judge validation against the reference label",
    about="The judge's own report.",
)
STUDY_C_REPORT = Document(  # study_c/comparisons.py: Study C's tables in Markdown
    name="study_c_report",
    file=STUDY_C_TABLES + "report.md",
    title="Study C: strategies",
    about="Study C's own tables (study_c/tables/*.csv).",
    landing=(),
)


# --- The registry: every Parquet table's contract, by table name

CONTRACTS = {
    contract.name: contract
    for contract in (
        UNITS,
        QUESTIONS,
        QRELS,
        GENERATED_QUESTIONS,
        SPLITS,
        RANKING,
        RUNS,
        METRICS,
        TRAJECTORIES,
        METRICS_SUMMARY,
        UNIT_VECTORS,
        QUESTION_VECTORS,
        RERANK_SCORES,
        EMBEDDING_CACHE,
        SCORE_CACHE,
        LLM_CACHE,
        GENERATIONS,
        JUDGMENTS_QUALITY,
        JUDGMENTS_GROUNDED,
        JUDGE_VALIDATION_ITEMS,
        LABELS,
        FEATURES,
        OOF_SCORES,
        ROUTED,
        FRONTIERS,
        AUDIT,
        COST_LEDGER,
        SYSTEM_COSTS,
        POLICY_COSTS,
        COST_FRONTIERS,
        REUSE_COSTS,
        STUDY_C_QUERIES,
        STUDY_C_RUNS,
        STUDY_C_ANSWERS,
    )
}
