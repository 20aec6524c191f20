"""Judge validation against reference labels: how well the Study A correctness judge agrees with a deterministic
reference scorer, and what prediction-powered inference recovers from a few "reviewed" answers when that scorer
plays the human reviewer.

In:  one row per judged answer of a dataset, pooled over its judged policies: item_id, policy, group_id (the
     question's paper / context), the judge's argmax correctness (0–2) and expected correctness (judging/scores.py),
     and the reference label y (0/1: `contains`, `em` or F1 ≥ threshold, judging/metrics.py, against the dataset's
     reference answers); the review settings (the export's stratified design: strata = policy × argmax level), the
     replay sizes n, the number of replays R and a seed.
Out: `agreement_table`: per judge reading (argmax, expected) Spearman's ρ with y, Cohen's κ of the judge binarised
     at its scale's midpoint (correctness > 1, i.e. "correct") against y, the AUROC of the score for y, and the bias
     (the judge's mean rescaled to 0–1, i.e. correctness / 2, minus the reference mean), each with a percentile
     bootstrap CI over groups (B resamples, seeded); n and the number of groups on every row.
     `replay_table`: per n, over R replays of the review loop (each a fresh seeded draw by `review.review_sample`,
     per_stratum the smallest giving at least n reviewed answers): the coverage of the all-answers reference mean
     and the mean width of the PPI++ (power-tuned), PPI (λ = 1) and classical (reviewed labels only) 95%
     intervals, the mean λ̂, and the naive judge interval's coverage (the judge's mean ± z·sd/√N, rescaled to 0–1:
     what reporting the judge alone claims); beside the means, the same coverage and widths for the difference of
     two policies (what a finding reports) against the reference label's difference.

     `verdict_table`: whether the judge is validated on the dataset under judging.validate.gate (the CI's lower
     end of the gate's measure, for the judging.scoring reading, above its floor); `reference_comparisons`: the
     paired differences of the reference label between the policies the answers stage compares (every policy vs
     the first, on the questions judged under both), what a finding shows when the judge fails its gate.

The judge score enters PPI rescaled to the reference's 0–1 scale (correctness / 2), expected or argmax as
`judging.scoring` says. The replay target is the reference mean over the N answers at hand, while the intervals
also carry question sampling (ppi.py: σ²_y/N), so they over-cover that fixed mean somewhat: expected, and reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import polars as pl
from scipy.stats import norm, spearmanr

from workflow_scripts.core.contracts import COMPARISONS
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.vocabulary import AGREEMENT_MEASURES, JUDGE_SCORINGS
from workflow_scripts.judging import ppi
from workflow_scripts.judging.review import review_sample
from workflow_scripts.stats.paired import compare_policies

SCALE_HIGH = 2  # Study A correctness 0–2: rescaled to 0–1 by / 2; "correct" above the midpoint 1
STRATIFY = ("policy", "level")


def _kappa(judge: np.ndarray, reference: np.ndarray) -> float:
    from sklearn.metrics import cohen_kappa_score

    value = cohen_kappa_score((judge > SCALE_HIGH / 2).astype(int), reference.astype(int), labels=[0, 1])
    return float(value)


def _auroc(judge: np.ndarray, reference: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(reference, judge)) if 0 < reference.sum() < reference.size else math.nan


def _spearman(judge: np.ndarray, reference: np.ndarray) -> float:
    if np.ptp(judge) == 0 or np.ptp(reference) == 0:
        return math.nan
    return float(spearmanr(judge, reference).statistic)


STATISTICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "spearman": _spearman,
    "kappa": _kappa,
    "auroc": _auroc,
    "bias": lambda judge, reference: float(judge.mean() / SCALE_HIGH - reference.mean()),
}


def _group_bootstrap(statistic: Callable[[np.ndarray, np.ndarray], float], judge: np.ndarray, reference: np.ndarray,
                     groups: np.ndarray, resamples: int, seed: int, confidence: float) -> tuple[float, float]:
    """Percentile interval of a two-sample statistic, resampling whole groups (undefined resamples dropped)."""
    _, inverse = np.unique(groups, return_inverse=True)
    members = [np.flatnonzero(inverse == group) for group in range(inverse.max() + 1)]
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        rows = np.concatenate([members[group] for group in rng.integers(0, len(members), len(members))])
        value = statistic(judge[rows], reference[rows])
        if math.isfinite(value):
            values.append(value)
    if len(values) < resamples / 2:
        return math.nan, math.nan
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


def agreement_table(items: pl.DataFrame, resamples: int, seed: int, confidence: float = 0.95) -> pl.DataFrame:
    """One row per (reading, measure): the judge's agreement with the reference label (see the module text)."""
    reference = items["reference"].cast(pl.Float64).to_numpy()
    groups = items["group_id"].to_numpy()
    rows = []
    for reading in sorted(JUDGE_SCORINGS):  # argmax, then expected: the table's row order
        judge = items[reading].cast(pl.Float64).to_numpy()
        for measure in AGREEMENT_MEASURES:
            statistic = STATISTICS[measure]
            estimate = statistic(judge, reference)
            low, high = _group_bootstrap(statistic, judge, reference, groups, resamples, seed, confidence) \
                if math.isfinite(estimate) else (math.nan, math.nan)
            rows.append({"reading": reading, "measure": measure, "estimate": estimate, "low": low, "high": high,
                         "n": items.height, "n_groups": int(np.unique(groups).size),
                         "distinct_scores": int(np.unique(judge).size)})
    return pl.DataFrame(rows).with_columns(pl.col("estimate", "low", "high").fill_nan(None))


def verdict_table(agreement: pl.DataFrame, reading: str, gate: dict[str, Any], reference: str) -> pl.DataFrame:
    """One row: the gate's measure for `reading` against the `reference` label, its CI, the floor and whether the
    CI's lower end is above it (`validated`; false too when the measure is undefined, e.g. a constant label)."""
    row = agreement.filter((pl.col("reading") == reading) & (pl.col("measure") == gate["measure"])).row(0, named=True)
    validated = row["low"] is not None and row["low"] > gate["above"]
    kept = ("reading", "measure", "estimate", "low", "high", "n", "n_groups")
    return pl.DataFrame([{"reference": reference, **{key: row[key] for key in kept}, "above": float(gate["above"]),
                          "validated": validated}])


def reference_comparisons(items: pl.DataFrame, policies: Sequence[str], bootstrap: dict[str, Any],
                          seed: int) -> pl.DataFrame:
    """The reference label's paired differences, every policy vs the first (as answers/comparisons.csv pairs the
    judged correctness), on the questions whose answers were judged under both; COMPARISONS rows."""
    wide = items.pivot(on="policy", index=["qid", "group_id"], values="reference").drop_nulls()
    pairs = [(policy, policies[0]) for policy in policies[1:] if policy in wide.columns and policies[0] in wide.columns]
    if not pairs or wide.height < 2:
        return pl.DataFrame(schema=COMPARISONS.schema)
    return compare_policies(
        wide.with_columns(pl.col(name).cast(pl.Float64) for name in set(policies) & set(wide.columns)),
        pairs,
        B=bootstrap["resamples"],
        seed=seed,
        method=bootstrap["method"],
        confidence=bootstrap["confidence"],
    )


def _per_stratum_for(items: pl.DataFrame, n: int) -> int:
    """The smallest per-stratum draw that gives at least n reviewed items under the export's design."""
    sizes = items.group_by(list(STRATIFY)).len()["len"].to_numpy()
    for per_stratum in range(1, int(sizes.max()) + 1):
        if np.minimum(sizes, per_stratum).sum() >= n:
            return per_stratum
    return int(sizes.max())


def difference_arms(items: pl.DataFrame, policies: Sequence[str]) -> tuple[str, np.ndarray, np.ndarray] | None:
    """The pair a difference is replayed for: policies[1] − policies[0] (as answers/comparisons.csv pairs them), and
    for each side its items' row positions on the questions judged under both, in one question order; None with
    fewer than two judged policies or no shared question."""
    present = [policy for policy in policies if policy in set(items["policy"].to_list())]
    if len(present) < 2:
        return None
    a, b = present[1], present[0]
    indexed = items.with_row_index("position")
    sides = [indexed.filter(pl.col("policy") == side).select("qid", "position") for side in (a, b)]
    both = sides[0].join(sides[1], on="qid", suffix="_b").sort("qid")
    if both.height < 2:
        return None
    return f"{a} − {b}", both["position"].to_numpy(), both["position_b"].to_numpy()


def replay_table(items: pl.DataFrame, sizes: Sequence[int], replays: int, seed: int, judge_column: str,
                 confidence: float = 0.95, min_reviewed: int = 2, policies: Sequence[str] = ()) -> pl.DataFrame:
    """Per n in `sizes`: coverage and widths of the PPI++, PPI, classical and naive intervals over `replays` seeded
    review draws (see the module text), and with two judged `policies` the same for their difference (policies[1]
    − policies[0], `difference_arms`) against the reference label's difference on the questions judged under both:
    the review draw is the policies' own, so a question is rarely reviewed under both and the difference's
    rectifiers come from two independent samples (judging/ppi.py). InputError for an n larger than the answers
    available."""
    total = items.height
    too_many = [n for n in sizes if n > total]
    if too_many:
        raise InputError(
            f"judging.validate.review_sizes: n = {too_many[0]} is more than the {total} judged answers available; "
            f"use sizes up to about half of {total}"
        )
    f = items[judge_column].cast(pl.Float64).to_numpy() / SCALE_HIGH
    y = items["reference"].cast(pl.Float64).to_numpy()
    strata = (items["policy"] + "\0" + items["level"].cast(pl.String)).to_numpy()
    target = float(y.mean())
    z = float(norm.ppf(0.5 + confidence / 2))
    naive_half = z * f.std(ddof=1) / math.sqrt(total)
    naive_covers = abs(f.mean() - target) <= naive_half
    position = {item_id: index for index, item_id in enumerate(items["item_id"].to_list())}
    pair = difference_arms(items, policies)
    if pair is not None:
        label, side_a, side_b = pair
        target_difference = float((y[side_a] - y[side_b]).mean())
    rows = []
    for n in sizes:
        per_stratum = _per_stratum_for(items, n)
        records: dict[str, list] = {name: [] for name in ("tuned", "plain", "classical")}
        differences: dict[str, list] = {name: [] for name in records}
        lams, drawn_counts = [], []
        for replay in range(replays):
            sample = review_sample(items, list(STRATIFY), per_stratum, seed=seed * 100_003 + replay * 7919 + n)
            observed = np.full(total, np.nan)
            chosen = [position[item_id] for item_id in sample["item_id"].to_list()]
            observed[chosen] = y[chosen]
            drawn_counts.append(len(chosen))
            for name, lam in (("tuned", None), ("plain", 1.0), ("classical", 0.0)):
                estimate = ppi.ppi_mean(f, observed, strata, min_reviewed=min_reviewed, confidence=confidence, lam=lam)
                if estimate.status != ppi.OK:
                    raise InputError(
                        f"judge validation: n = {n} gives no PPI interval ({estimate.status}); use a larger n"
                    )
                records[name].append((estimate.low <= target <= estimate.high, estimate.high - estimate.low))
                if name == "tuned":
                    lams.append(estimate.lam[0])
                if pair is not None:
                    difference = ppi.ppi_difference(
                        ppi.make_arm(f[side_a], observed[side_a], strata[side_a]),
                        ppi.make_arm(f[side_b], observed[side_b], strata[side_b]),
                        min_reviewed=min_reviewed, confidence=confidence, lam=lam)
                    if difference.status == ppi.OK:  # else this replay drew too few reviews of a side: not counted
                        differences[name].append((difference.low <= target_difference <= difference.high,
                                                  difference.high - difference.low))
        row = {"n": n, "n_reviewed_mean": float(np.mean(drawn_counts)), "per_stratum": per_stratum,
               "N": total, "replays": replays, "reference_mean": target}
        for name, values in records.items():
            covered, widths = zip(*values)
            row[f"{name}_coverage"] = float(np.mean(covered))
            row[f"{name}_width"] = float(np.mean(widths))
        row["tuned_lambda_mean"] = float(np.mean(lams))
        row["naive_coverage"] = float(naive_covers)
        row["naive_width"] = 2 * naive_half
        row["naive_mean"] = float(f.mean())
        row["difference"] = label if pair is not None else None
        row["difference_target"] = target_difference if pair is not None else None
        for name, values in differences.items():
            covered, widths = zip(*values) if values else ((), ())
            row[f"difference_{name}_coverage"] = float(np.mean(covered)) if values else None
            row[f"difference_{name}_width"] = float(np.mean(widths)) if values else None
        row["difference_replays"] = len(differences["tuned"]) if pair is not None else None
        rows.append(row)
    return pl.DataFrame(rows)


def validation_items(judged: Sequence[tuple[str, pl.DataFrame]], answers: Sequence[pl.DataFrame],
                     questions: pl.DataFrame, splits: pl.DataFrame, reference: str, f1_threshold: float,
                     scoring: str) -> pl.DataFrame:
    """One row per answer the grounded judge graded (status ok), pooled over policies: item_id "<qid>|<policy>",
    policy, qid, group_id, argmax, expected, level (the argmax, the review's stratum), the answer's reference label
    (0/1) and `judge` (the reading `scoring` names)."""
    from workflow_scripts.judging.metrics import score_answers

    references = questions.select("qid", "answers").join(splits.select("qid", "group_id"), on="qid")
    tables = []
    for (policy, judgments), generated in zip(judged, answers):
        table = (
            judgments.filter(pl.col("status") == "ok")
            .select(pl.col("item_id").alias("qid"), pl.col("correctness").cast(pl.Float64).alias("argmax"),
                    pl.col("correctness_expected").alias("expected"))
            .join(generated.select(pl.col("request_id").alias("qid"), pl.col("text").alias("answer")), on="qid")
            .join(references, on="qid")
        )
        scored = score_answers(table["answer"].to_list(), table["answers"].to_list())
        label = scored["contains"].cast(pl.Int8) if reference == "contains" else (
            scored["em"] >= 1.0 if reference == "em" else scored["f1"] >= f1_threshold).cast(pl.Int8)
        tables.append(table.with_columns(
            pl.concat_str("qid", pl.lit(policy), separator="|").alias("item_id"), pl.lit(policy).alias("policy"),
            label.alias("reference"), pl.col("argmax").cast(pl.Int8).alias("level"),
        ))
    items = pl.concat(tables).sort("item_id")
    if items.height < 2:
        raise InputError(
            f"judge validation: {items.height} judged answers; it needs judged answers under generation.policies"
        )
    return items.select("item_id", "policy", "qid", "group_id", "argmax", "expected", "level", "reference",
                        pl.col("expected" if scoring == "expected" else "argmax").alias("judge"))


def validation_figure(items: pl.DataFrame, replay: pl.DataFrame, path: str, title: str) -> None:
    """Two panels: the reference rate per expected-score bin (the judge's calibration against the reference), and
    the coverage of each interval per number of reviewed answers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    edges = np.linspace(0, SCALE_HIGH, 6)
    expected = items["expected"].to_numpy()
    bins = np.clip(np.digitize(expected, edges[1:-1]), 0, len(edges) - 2)
    reference = items["reference"].to_numpy()
    centres, rates, counts = [], [], []
    for index in range(len(edges) - 1):
        members = bins == index
        if members.any():
            centres.append((edges[index] + edges[index + 1]) / 2)
            rates.append(reference[members].mean())
            counts.append(int(members.sum()))
    left.plot(centres, rates, marker="o")
    for x, y, count in zip(centres, rates, counts):
        left.annotate(f"n={count}", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
    left.set(xlabel="judge's expected correctness (0–2)", ylabel="reference label rate", ylim=(-0.05, 1.05),
             title=f"Judge vs reference (N = {items.height})")
    for name, label in (("tuned", "PPI++"), ("plain", "PPI"), ("classical", "classical"), ("naive", "judge alone")):
        right.plot(replay["n"], replay[f"{name}_coverage"], marker="o", label=label)
    right.axhline(0.95, color="grey", linestyle="--", linewidth=1)
    right.set(xlabel="reviewed answers n", ylabel="coverage of the reference mean", ylim=(-0.05, 1.05),
              title=f"95% intervals over {int(replay['replays'][0])} replays")
    right.legend()
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.{digits}f}"


def findings(agreement: pl.DataFrame, replay: pl.DataFrame, reference: str, scoring: str) -> list[str]:
    """Sentences generated from the two tables: the judge's agreement with the reference, and what PPI recovers."""
    def row(reading: str, measure: str) -> dict:
        return agreement.filter((pl.col("reading") == reading) & (pl.col("measure") == measure)).row(0, named=True)

    expected, argmax = row("expected", "auroc"), row("argmax", "kappa")
    bias, rho = row(scoring, "bias"), row("expected", "spearman")
    n, groups = expected["n"], expected["n_groups"]
    distinct = row("expected", "spearman")["distinct_scores"]
    target = replay["reference_mean"][0]
    sentences = [
        f"Over {n} judged answers ({groups} questions), the judge's expected correctness takes {distinct} distinct "
        f"values; it ranks the `{reference}` reference label with AUROC {_fmt(expected['estimate'])} "
        f"(95% CI {_fmt(expected['low'])}–{_fmt(expected['high'])}; 0.5 is chance) and Spearman ρ "
        f"{_fmt(rho['estimate'])} ({_fmt(rho['low'])}–{_fmt(rho['high'])}); its written grades agree with the label "
        f"at Cohen's κ {_fmt(argmax['estimate'])} ({_fmt(argmax['low'])}–{_fmt(argmax['high'])}).",
        f"The judge's mean ({scoring}, rescaled to 0–1) is {_fmt(bias['estimate'], 2)} "
        f"({_fmt(bias['low'], 2)}–{_fmt(bias['high'], 2)}) away from the reference mean {_fmt(target, 3)}: reported "
        f"alone, its 95% interval {'covers' if replay['naive_coverage'][0] else 'misses'} the reference mean.",
    ]
    for item in replay.iter_rows(named=True):
        ratio = item["tuned_width"] / item["classical_width"] if item["classical_width"] else math.nan
        sentences.append(
            f"With n = {item['n']} reviewed answers ({item['replays']} replays): PPI++ covers the reference mean in "
            f"{100 * item['tuned_coverage']:.1f}% of replays (PPI {100 * item['plain_coverage']:.1f}%, classical "
            f"{100 * item['classical_coverage']:.1f}%), its interval {_fmt(item['tuned_width'])} wide vs "
            f"{_fmt(item['classical_width'])} from the reviews alone ({_fmt(ratio, 2)}×; mean λ̂ "
            f"{_fmt(item['tuned_lambda_mean'], 2)})."
            + (f" For the difference {item['difference']} (reference {item['difference_target']:+.3f}): PPI++ covers "
               f"it in {100 * item['difference_tuned_coverage']:.1f}% of {item['difference_replays']} replays (PPI "
               f"{100 * item['difference_plain_coverage']:.1f}%, classical "
               f"{100 * item['difference_classical_coverage']:.1f}%), {_fmt(item['difference_tuned_width'])} wide vs "
               f"{_fmt(item['difference_classical_width'])}."
               if item.get("difference_tuned_coverage") is not None else "")
        )
    return sentences


def report_text(dataset: str, agreement: pl.DataFrame, replay: pl.DataFrame, reference: str, scoring: str) -> str:
    """The validation's Markdown: findings first, then both tables (each with its n)."""
    def table(frame: pl.DataFrame) -> list[str]:
        show = lambda value: (
            "" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
        )  # noqa: E731
        return ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns),
                *("| " + " | ".join(show(value) for value in values) + " |" for values in frame.iter_rows())]

    lines = [f"## Judge validation: {dataset}", "", "Findings (generated from the tables below):", ""]
    lines += [f"- {sentence}" for sentence in findings(agreement, replay, reference, scoring)]
    lines += [
        "",
        f"Agreement of the Study A correctness judge with the `{reference}` label (bootstrap CI over questions):",
        "",
        *table(agreement),
        "",
        "Review-loop replays: coverage of the reference mean and mean interval width per n:",
        "",
        *table(
            replay.select(
                "n",
                "n_reviewed_mean",
                "N",
                "replays",
                "tuned_coverage",
                "plain_coverage",
                "classical_coverage",
                "naive_coverage",
                "tuned_width",
                "plain_width",
                "classical_width",
                "naive_width",
                "tuned_lambda_mean",
            )
        ),
        "",
    ]
    if replay["difference"].drop_nulls().len():
        lines += [f"Review-loop replays for the difference {replay['difference'][0]} (target: the reference label's "
                  f"difference, {replay['difference_target'][0]:+.3f}): coverage and mean width per n:", "",
                  *table(replay.select("n", "difference_replays", "difference_tuned_coverage",
                                       "difference_plain_coverage", "difference_classical_coverage",
                                       "difference_tuned_width", "difference_plain_width",
                                       "difference_classical_width")), ""]
    return "\n".join(lines)
