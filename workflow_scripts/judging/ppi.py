"""Prediction-powered inference (PPI) of a policy's mean human score from the judge's scores on all items and the
human labels on the review loop's stratified sample; a paired version for the difference of two policies.

In:  per policy ("arm") one row per item: the judge's score f (all N items), the human score y (NaN where not
     reviewed) and the item's review stratum h (the review export draws up to `per_stratum` items per stratum in
     a seeded random order, so within a stratum the reviewed items are a simple random sample); for a difference,
     two arms aligned on the same N questions. The confidence level and the minimum number of reviews.
Out: an `Estimate`: the estimate, the normal (CLT) interval, its standard error, N, n and a status — "ok",
     "too_few_reviews: n < min" (the estimate is kept, the interval left empty; also "too_few_reviews: no stratum
     has two reviews" when no within-stratum variance can be estimated) or "unreviewed_strata: k of N items" (a
     stratum with items has no review, so no unbiased estimate: all left empty).

Estimator (Angelopoulos et al. 2023, "Prediction-powered inference", Science; ARES uses it): the judge's mean
on every item plus a "rectifier", the human − judge gap measured on the reviewed items. Because the sample is
stratified (rare judge levels are over-drawn), the rectifier is estimated stratum by stratum and weighted by
each stratum's population share W_h = N_h / N (n_h reviewed of N_h items in stratum h, r = y − f):

    θ̂ = mean_{all N}(f) + Σ_h W_h · r̄_h,        r̄_h = mean of r over the n_h reviewed items of h.

For the difference of two policies A − B on the same questions, f = f_A − f_B per question and the rectifier is
Σ_h W_{A,h} r̄_{A,h} − Σ_h W_{B,h} r̄_{B,h}: the review sample draws each policy's strata separately, so a question
is rarely reviewed under both policies and a per-question human difference is not available; the two
rectifiers come from disjoint, independent samples, while the judge term keeps the pairing (the judge's
per-question difference, whose spread is small when the policies agree on most questions).

Variance (target: the policy's expected human score over questions, as the bootstrap CIs elsewhere). Unlike
the paper, the judge also scores the reviewed items (no separate unlabelled set), so θ̂ − μ splits exactly into
(ȳ_N − μ), the question sampling, plus Σ_h W_h (r̄_h − R̄_h), the review sampling (R̄_h: the stratum's rectifier
mean over all its items), which has mean 0 given the items, so the two are uncorrelated:

    Var(θ̂) = σ²_y / N + Σ_h W_h² (1 − n_h / N_h) s²_h / n_h

with s²_h the sample variance of r in stratum h (finite-population correction: a fully reviewed stratum adds
nothing; a stratum with one review of several items borrows the arm's pooled within-stratum variance), and
σ²_y = Var(f + r) estimated as Var_N(f) + 2 Ĉov_w(f, r) + V̂ar_w(r): the judge's variance from all N items, the
other two design-weighted (weight N_h / n_h) over the reviewed items, all three as population moments, the sum
times N / (N − 1) (so a fully reviewed arm gets the classical sample variance of y). For a difference the same holds with
y = y_A − y_B and both design terms summed; Var(y_A − y_B) needs Cov(r_A, r_B), which the sample cannot see
(no question reviewed under both), and it is taken as 0 — conservative when the judge errs alike on two
answers to one question. With n ≪ N and Cov(f, r) = 0 this is the paper's σ²_f / N + σ²_r / n (ppi_py's
`ppi_mean_ci` with lam = 1); here the judge term uses σ²_y, since the judge also scores the reviewed items.
Interval: θ̂ ± z_{(1+c)/2} · √Var. Checked by simulation in tests/test_ppi.py (coverage of a known mean).
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.stats import norm

from workflow_scripts.core.errors import InputError

OK = "ok"


@dataclass(frozen=True)
class Arm:
    """One policy's items: the judge's score on every item, the human score (NaN = not reviewed), the stratum."""

    judge: np.ndarray
    human: np.ndarray
    strata: np.ndarray


@dataclass(frozen=True)
class Estimate:
    estimate: float | None
    low: float | None
    high: float | None
    se: float | None
    n_population: int
    n_reviewed: int
    status: str


@dataclass(frozen=True)
class _Terms:
    rectifier: float
    design_variance: float
    var_r: float
    cov_fr: float


def make_arm(judge: Any, human: Any, strata: Any = None) -> Arm:
    """An Arm from array-likes (strata: one label per item, or None for a single stratum)."""
    f = np.asarray(judge, dtype=float)
    y = np.asarray(human, dtype=float)
    h = np.zeros(f.shape, dtype=int) if strata is None else np.asarray(strata)
    if f.ndim != 1 or f.shape != y.shape or f.shape != h.shape or f.size == 0:
        raise InputError("PPI: need one judge score, one human score (NaN = not reviewed) and one stratum per item")
    if not np.isfinite(f).all() or np.isinf(y).any():
        raise InputError("PPI: the judge's scores must all be finite and the human scores finite or NaN")
    return Arm(f, y, h)


def _terms(arm: Arm, combined: np.ndarray) -> _Terms | str:
    """The arm's rectifier, its design variance and the design-weighted Var(r), Cov(F, r); or why not."""
    _, inverse = np.unique(arm.strata, return_inverse=True)
    reviewed = ~np.isnan(arm.human)
    size = np.bincount(inverse).astype(float)
    drawn = np.bincount(inverse[reviewed], minlength=size.size).astype(float)
    if (drawn == 0).any():
        return f"unreviewed_strata: {int(size[drawn == 0].sum())} of {arm.judge.size} items"
    where = inverse[reviewed]
    r = arm.human[reviewed] - arm.judge[reviewed]
    means = np.bincount(where, weights=r, minlength=size.size) / drawn
    squares = np.bincount(where, weights=(r - means[where]) ** 2, minlength=size.size)
    dof = drawn - 1
    s2 = np.divide(squares, dof, out=np.zeros_like(squares), where=dof > 0)
    borrow = (dof == 0) & (drawn < size)
    if borrow.any():  # no variance without a stratum of two reviews: NaN, reported as too few reviews
        s2[borrow] = squares.sum() / dof.sum() if dof.sum() else np.nan
    share = size / size.sum()
    rectifier = float(share @ means)
    design_variance = float(np.sum(share**2 * (1.0 - drawn / size) * s2 / drawn))
    weight = (size / drawn)[where]
    f = combined[reviewed]
    f_mean = float(weight @ f / weight.sum())
    var_r = float(weight @ (r - rectifier) ** 2 / weight.sum())
    cov_fr = float(weight @ ((f - f_mean) * (r - rectifier)) / weight.sum())
    return _Terms(rectifier, design_variance, var_r, cov_fr)


def ppi_combination(arms: Sequence[Arm], coefficients: Sequence[float], min_reviewed: int = 30,
                    confidence: float = 0.95) -> Estimate:
    """PPI of Σ_p c_p · mean human score of arm p, the arms aligned on the same items (see the module text)."""
    if not arms or len(arms) != len(coefficients) or len({arm.judge.size for arm in arms}) != 1:
        raise InputError("PPI: need one coefficient per arm and arms of the same length (aligned items)")
    if not 0.0 < confidence < 1.0 or min_reviewed < 1:
        raise InputError(f"PPI: need a confidence level in (0, 1) and min_reviewed ≥ 1 (got {min_reviewed})")
    size = arms[0].judge.size
    reviewed = [int((~np.isnan(arm.human)).sum()) for arm in arms]
    combined = sum(c * arm.judge for c, arm in zip(coefficients, arms))
    empty = Estimate(None, None, None, None, size, sum(reviewed), "")
    terms = [_terms(arm, combined) for arm in arms]
    failed = [term for term in terms if isinstance(term, str)]
    if failed:
        return replace(empty, status=failed[0])
    estimate = float(combined.mean() + sum(c * t.rectifier for c, t in zip(coefficients, terms)))
    if min(reviewed) < min_reviewed:
        status = f"too_few_reviews: {min(reviewed)} < {min_reviewed}"
        return Estimate(estimate, None, None, None, size, sum(reviewed), status)
    if any(np.isnan(t.design_variance) for t in terms):
        return Estimate(estimate, None, None, None, size, sum(reviewed), "too_few_reviews: no stratum has two reviews")
    moments = float(combined.var()) + sum(2 * c * t.cov_fr + c * c * t.var_r for c, t in zip(coefficients, terms))
    var_y = max(0.0, moments) * size / (size - 1) if size > 1 else 0.0
    variance = var_y / size + sum(c * c * t.design_variance for c, t in zip(coefficients, terms))
    se = float(np.sqrt(variance))
    half = float(norm.ppf(0.5 + confidence / 2)) * se
    return Estimate(estimate, estimate - half, estimate + half, se, size, sum(reviewed), OK)


def ppi_mean(judge: Any, human: Any, strata: Any = None, min_reviewed: int = 30,
             confidence: float = 0.95) -> Estimate:
    """Stratified PPI of one policy's mean human score (human NaN = not reviewed)."""
    return ppi_combination([make_arm(judge, human, strata)], [1.0], min_reviewed, confidence)


def ppi_difference(a: Arm, b: Arm, min_reviewed: int = 30, confidence: float = 0.95) -> Estimate:
    """PPI of mean(a) − mean(b), the two arms aligned on the same questions (min_reviewed applies to each)."""
    return ppi_combination([a, b], [1.0, -1.0], min_reviewed, confidence)
