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
times N / (N − 1) (so a fully reviewed arm gets the classical sample variance of y). For a difference the same holds
with
y = y_A − y_B and both design terms summed; Var(y_A − y_B) needs Cov(r_A, r_B), which the sample cannot see
(no question reviewed under both), and it is taken as 0 — conservative when the judge errs alike on two
answers to one question. With n ≪ N and Cov(f, r) = 0 this is the paper's σ²_f / N + σ²_r / n (ppi_py's
`ppi_mean_ci` with lam = 1); here the judge term uses σ²_y, since the judge also scores the reviewed items.
Interval: θ̂ ± z_{(1+c)/2} · √Var. Checked by simulation in tests/test_ppi.py (coverage of a known mean).

Power tuning (PPI++, Angelopoulos, Duchi & Zrnic 2023, "PPI++: efficient prediction-powered inference"; the
default, `lam=None`): the judge's term is weighted by λ, θ̂(λ) = λ · mean_N(f) + Σ_h W_h · mean_{n_h}(y − λ f). Its
population value is ȳ_N for every λ, so the question-sampling term σ²_y/N does not depend on λ and only the
design term does, Σ_h a_h s²_h(y − λ f) with a_h = W_h² (1 − n_h/N_h)/n_h. That is a quadratic in λ, minimised at
    λ̂ = Σ_h a_h s_h(y, f) / Σ_h a_h s²_h(f)        (clipped to [0, 1], as ppi_py clips),
from the same within-stratum sample moments the variance uses, so the tuned design variance is never above plain
PPI's (λ = 1) or the classical one's (λ = 0, the reviews alone; its σ²_y then comes from the reviews too). With one
stratum, λ̂ = s(y, f)/s²(f); ppi_py's λ̂ = cov(y, f)/((1 + n/N) var(f)) has the extra (1 + n/N) because its
labelled and unlabelled sets are disjoint samples, while here the reviewed items are among the N the judge scored.
For the same λ the point estimate equals ppi_py's `ppi_mean_pointestimate` with the reviewed items as its
labelled set and every item's judge score as its unlabelled set (tests/test_ppi.py). A difference of two arms
tunes each arm's λ on its own design term.

Rare 0/1 labels: with few reviews per stratum, a stratum whose reviews hold no positive label has a sample
variance of 0, and the Wald interval under-covers (measured on the HotpotQA validation bench: 90% at n = 30 for a
12% reference rate). For 0/1 human labels the within-stratum s²_h(y) is therefore at least p̃(1 − p̃) with the
Agresti–Coull p̃ = (Σ y + z²/2)/(n_h + z²) (Agresti & Coull 1998): 98% at n = 30 on the same bench.

For users: docs/statistics.md, "Prediction-powered inference (PPI++)".
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
    lam: tuple[float, ...] = ()  # the power-tuning weight of each arm (1: plain PPI, 0: classical)


@dataclass(frozen=True)
class _Moments:
    """One arm's reviewed items, stratum by stratum: sizes, reviews, within-stratum sample (co)variances of the
    human score y and the judge score f (ddof 1; pooled where a stratum has one review of several items)."""

    size: np.ndarray
    drawn: np.ndarray
    mean_y: np.ndarray
    mean_f: np.ndarray
    s_yy: np.ndarray
    s_yf: np.ndarray
    s_ff: np.ndarray

    @property
    def share(self) -> np.ndarray:
        return self.size / self.size.sum()

    @property
    def design_weights(self) -> np.ndarray:
        """a_h = W_h² (1 − n_h/N_h) / n_h: each stratum's weight in the review-sampling variance."""
        return self.share**2 * (1.0 - self.drawn / self.size) / self.drawn

    def design_variance(self, lam: float) -> float:
        """Σ_h a_h s²_h(y − λf)."""
        return float(self.design_weights @ (self.s_yy - 2 * lam * self.s_yf + lam * lam * self.s_ff))

    def tuned(self) -> float:
        """The λ in [0, 1] that minimises the design variance: Σ a_h s_h(y, f) / Σ a_h s²_h(f) (PPI++)."""
        denominator = float(self.design_weights @ self.s_ff)
        if denominator <= 0:
            return 1.0
        return float(np.clip(self.design_weights @ self.s_yf / denominator, 0.0, 1.0))


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


def _moments(arm: Arm, z: float) -> _Moments | str:
    """The arm's per-stratum moments, or why there are none (a stratum without any review). For 0/1 human labels
    the within-stratum variance of y is at least p̃(1 − p̃), p̃ = (Σ y + z²/2) / (n_h + z²) (Agresti & Coull 1998):
    a stratum of few reviews with no or one positive label otherwise claims a variance near 0 and the interval
    under-covers a rare label (measured: 90% coverage at n = 30 on HotpotQA's 12% reference rate)."""
    _, inverse = np.unique(arm.strata, return_inverse=True)
    reviewed = ~np.isnan(arm.human)
    size = np.bincount(inverse).astype(float)
    drawn = np.bincount(inverse[reviewed], minlength=size.size).astype(float)
    if (drawn == 0).any():
        return f"unreviewed_strata: {int(size[drawn == 0].sum())} of {arm.judge.size} items"
    where = inverse[reviewed]
    y, f = arm.human[reviewed], arm.judge[reviewed]
    mean_y = np.bincount(where, weights=y, minlength=size.size) / drawn
    mean_f = np.bincount(where, weights=f, minlength=size.size) / drawn
    dy, df = y - mean_y[where], f - mean_f[where]
    sums = [np.bincount(where, weights=a * b, minlength=size.size) for a, b in ((dy, dy), (dy, df), (df, df))]
    dof = drawn - 1
    borrow = (dof == 0) & (drawn < size)
    moments = []
    for total in sums:
        s2 = np.divide(total, dof, out=np.zeros_like(total), where=dof > 0)
        if borrow.any():  # no variance without a stratum of two reviews: NaN, reported as too few reviews
            s2[borrow] = total.sum() / dof.sum() if dof.sum() else np.nan
        moments.append(s2)
    if np.isin(y, (0.0, 1.0)).all():
        shrunk = (mean_y * drawn + z * z / 2) / (drawn + z * z)
        moments[0] = np.fmax(moments[0], shrunk * (1 - shrunk))
    return _Moments(size, drawn, mean_y, mean_f, *moments)


def _question_variance(arms: Sequence[Arm], coefficients: Sequence[float], moments: Sequence[_Moments],
                       combined: np.ndarray, lams: Sequence[float]) -> float:
    """σ²_y of the combination over questions: Var_N(f) + 2 Ĉov_w(f, r) + V̂ar_w(r) with r = y − f (the judge's
    variance from all N items, the rest design-weighted over the reviewed ones); labels only (the design-weighted
    variance of y) when every λ is 0, the classical estimator, which does not use the judge."""
    classical = all(lam == 0.0 for lam in lams)
    total = 0.0 if classical else float(combined.var())
    for c, arm, m in zip(coefficients, arms, moments):
        reviewed = ~np.isnan(arm.human)
        _, inverse = np.unique(arm.strata, return_inverse=True)
        weight = (m.size / m.drawn)[inverse[reviewed]]
        y = arm.human[reviewed]
        if classical:  # the design-weighted variance of y, times n/(n − 1)
            mean = float(weight @ y / weight.sum())
            total += c * c * float(weight @ (y - mean) ** 2 / weight.sum()) * y.size / max(y.size - 1, 1)
            continue
        r = y - arm.judge[reviewed]
        f = combined[reviewed]
        rectifier = float(m.share @ (m.mean_y - m.mean_f))
        f_mean = float(weight @ f / weight.sum())
        total += 2 * c * float(weight @ ((f - f_mean) * (r - rectifier)) / weight.sum())
        total += c * c * float(weight @ (r - rectifier) ** 2 / weight.sum())
    size = combined.size
    return max(0.0, total) if classical else max(0.0, total) * size / (size - 1) if size > 1 else 0.0


def ppi_combination(arms: Sequence[Arm], coefficients: Sequence[float], min_reviewed: int = 30,
                    confidence: float = 0.95, lam: float | None = None) -> Estimate:
    """PPI of Σ_p c_p · mean human score of arm p, the arms aligned on the same items (see the module text).
    `lam`: None tunes each arm's λ (PPI++), 1 is plain PPI, 0 the classical estimate from the reviews alone."""
    if not arms or len(arms) != len(coefficients) or len({arm.judge.size for arm in arms}) != 1:
        raise InputError("PPI: need one coefficient per arm and arms of the same length (aligned items)")
    if not 0.0 < confidence < 1.0 or min_reviewed < 1:
        raise InputError(f"PPI: need a confidence level in (0, 1) and min_reviewed ≥ 1 (got {min_reviewed})")
    if lam is not None and not 0.0 <= lam <= 1.0:
        raise InputError(f"PPI: lam must be in [0, 1] or None (tuned), got {lam}")
    size = arms[0].judge.size
    reviewed = [int((~np.isnan(arm.human)).sum()) for arm in arms]
    combined = sum(c * arm.judge for c, arm in zip(coefficients, arms))
    empty = Estimate(None, None, None, None, size, sum(reviewed), "")
    z = float(norm.ppf(0.5 + confidence / 2))
    moments = [_moments(arm, z) for arm in arms]
    failed = [m for m in moments if isinstance(m, str)]
    if failed:
        return replace(empty, status=failed[0])
    no_variance = any(np.isnan(m.s_ff).any() for m in moments)
    lams = tuple(1.0 if no_variance else m.tuned() if lam is None else float(lam) for m in moments)
    estimate = float(sum(
        c * (lam_p * arm.judge.mean() + m.share @ (m.mean_y - lam_p * m.mean_f))
        for c, arm, m, lam_p in zip(coefficients, arms, moments, lams)
    ))
    if min(reviewed) < min_reviewed:
        status = f"too_few_reviews: {min(reviewed)} < {min_reviewed}"
        return Estimate(estimate, None, None, None, size, sum(reviewed), status, lams)
    if no_variance:
        return Estimate(
            estimate, None, None, None, size, sum(reviewed), "too_few_reviews: no stratum has two reviews", lams
        )
    var_y = _question_variance(arms, coefficients, moments, combined, lams)
    variance = var_y / size + sum(c * c * m.design_variance(lam_p) for c, m, lam_p in zip(coefficients, moments, lams))
    se = float(np.sqrt(variance))
    half = z * se
    return Estimate(estimate, estimate - half, estimate + half, se, size, sum(reviewed), OK, lams)


def ppi_mean(judge: Any, human: Any, strata: Any = None, min_reviewed: int = 30,
             confidence: float = 0.95, lam: float | None = None) -> Estimate:
    """Stratified PPI(++) of one policy's mean human score (human NaN = not reviewed)."""
    return ppi_combination([make_arm(judge, human, strata)], [1.0], min_reviewed, confidence, lam)


def ppi_difference(a: Arm, b: Arm, min_reviewed: int = 30, confidence: float = 0.95,
                   lam: float | None = None) -> Estimate:
    """PPI(++) of mean(a) − mean(b), the two arms aligned on the same questions (min_reviewed applies to each)."""
    return ppi_combination([a, b], [1.0, -1.0], min_reviewed, confidence, lam)
