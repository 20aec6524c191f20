"""Study B's deterministic answer metrics: exact match, token F1 and containment against reference answers.

In:  predicted answers and, per prediction, its reference answers (at least one).
Out: `score_answers`: columns em, f1 (Float64) and contains (Boolean), one row per prediction; the per-answer
     scorers `exact_match`, `token_f1`, `contains_answer` and the shared `normalize_answer`.

The scorers use the SQuAD/HotpotQA answer normalization (lowercase, drop punctuation and the articles a/an/the,
collapse whitespace) and take the maximum over the reference answers. Token F1 follows the HotpotQA evaluation
script: when either side normalizes to "yes", "no" or "noanswer" and they differ, F1 is 0. Containment: the
normalized reference occurs in the normalized prediction on token boundaries.
"""

import re
import string
from collections import Counter
from collections.abc import Sequence

import polars as pl

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_SPECIAL = frozenset({"yes", "no", "noanswer"})


def normalize_answer(text: str) -> str:
    """SQuAD/HotpotQA normalization: lowercase, drop punctuation and articles, collapse whitespace."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def _f1(prediction: str, reference: str) -> float:
    if (prediction in _SPECIAL or reference in _SPECIAL) and prediction != reference:
        return 0.0
    predicted, gold = prediction.split(), reference.split()
    if not predicted or not gold:
        return float(predicted == gold)
    same = sum((Counter(predicted) & Counter(gold)).values())
    if not same:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, references: Sequence[str]) -> float:
    normalized = normalize_answer(prediction)
    return max(float(normalized == normalize_answer(reference)) for reference in references)


def token_f1(prediction: str, references: Sequence[str]) -> float:
    normalized = normalize_answer(prediction)
    return max(_f1(normalized, normalize_answer(reference)) for reference in references)


def contains_answer(prediction: str, references: Sequence[str]) -> bool:
    padded = f" {normalize_answer(prediction)} "
    return any(f" {reference} " in padded for reference in map(normalize_answer, references) if reference)


def score_answers(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> pl.DataFrame:
    """Columns em, f1 (Float64) and contains (Boolean), one row per prediction, max over its references."""
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} reference lists")
    empty = [at for at, refs in enumerate(references) if not refs]
    if empty:
        raise ValueError(f"predictions {empty[:5]} have no reference answers to score against")
    return pl.DataFrame(
        {
            "em": [exact_match(p, refs) for p, refs in zip(predictions, references)],
            "f1": [token_f1(p, refs) for p, refs in zip(predictions, references)],
            "contains": [contains_answer(p, refs) for p, refs in zip(predictions, references)],
        },
        schema={"em": pl.Float64, "f1": pl.Float64, "contains": pl.Boolean},
    )
