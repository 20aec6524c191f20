"""Human review of judge labels: export a stratified sample, import the reviewed labels, measure agreement.

Rules (rules/review.smk; jobs judging/jobs/review_export.py, review_agreement.py over `judged_items`, `export_sheet`
and `judge_agreement`): `review_export` writes results/{dataset}/review/{judge}_sample.csv for each judge
(grounded, quality) over every answered policy; `review_agreement` reads a filled-in copy named in the config
(`review.reviewed.<dataset>.<judge>`) and writes results/{dataset}/review/{judge}_agreement.csv. It redraws the
sample with the same `per_stratum` and `seed` and rejects a sheet with an item_id outside that sample
(InputError naming the unmatched ids): labels of items the export did not draw would break the design weights.

In:  a judgments table (item_id, the judge's label columns, the strata columns such as policy, and whatever the
     reviewer should see: question, answer, references, evidence); later the reviewed CSV. The rules' jobs read
     the policies' judgments, answers, runs, questions and units (jobs/review.py) and build it (`judged_items`),
     item_id "<qid>|<policy>".
Out: `export_review` returns the review sheet (item_id, the shown columns — a list of strings as one "- item" line per
     element — one empty `human_<label>` column per label, and `notes`); `import_review` returns item_id +
     `human_<label>` (Int8, null = not reviewed); `agreement` returns, per label and group (e.g. policy, plus
     "all"), the judge–human agreement and corrected means, and one row per pair of policies "a − b" with the
     prediction-powered estimate of the difference.

Sampling: items are stratified by the given columns (typically the judge's score level and the policy) and
the first `per_stratum` items of each stratum are taken in the order of sha256(seed, item_id) — a seeded draw
that does not depend on row order, and stays the same for items already drawn when items are added. The
CSV does not show the judge's labels, so the review is blind to them; `import_review` and `agreement` join
the labels back by item_id.

What `agreement` computes, for one label (judge column `<label>`, human column `human_<label>`) on items that
have both (e.g. abstentions have no faithfulness and are left out):
- `kappa_quadratic`: Cohen's kappa with quadratic weights (sklearn) between judge and human on the reviewed
  items, over the label's full scale; `exact_agreement`: the share of identical labels. Both are computed on
  the sample as drawn, which over-represents rare judge levels — they describe the judge on this sample.
- `judge_mean`: the judge's mean over the whole group (the score `judging.scoring` names: probability-weighted by
  default; kappa, exact agreement, the strata and the confusion correction use the written levels);
  `judge_mean_reviewed`, `human_mean_reviewed`: raw means
  on the reviewed items (biased by the stratification, shown for transparency).
- `human_mean_stratified`: the design-weighted estimate of the group's human mean: each reviewed item weighs
  N_h / n_h (its stratum's population over its reviewed count), over the strata that have reviews;
  `covered_share` is the share of the group's items in those strata.
- `corrected_mean`: a confusion-matrix correction: E[human | judge = j] is estimated from all reviewed items
  (pooled over groups, design-weighted), and the group's mean is Σ_j P_group(judge = j) · E[human | judge = j].
  It assumes the judge errs the same way in every group; null when a judge level in the group has no review.
- `ppi_mean`, `ppi_low`, `ppi_high`, `ppi_status`, `ppi_lambda`: power-tuned prediction-powered inference (PPI++,
  workflow_scripts/judging/ppi.py, which derives the formulas): λ̂ times the judge's mean over all the group's
  items plus the human − λ̂·judge gap estimated stratum by stratum on the reviewed items, weighted by the strata's
  population shares (λ̂ = 1 is plain PPI; `ppi_lambda` shows it, one per policy of a difference),
      θ̂ = λ̂ · mean_all(judge) + Σ_h (N_h/N) · mean_{reviewed in h}(human − λ̂ · judge),
  with a 95% (`confidence`) CLT interval of variance σ²_human/N + Σ_h (N_h/N)² (1 − n_h/N_h) s²_h/n_h. Valid
  under the stratified design without assuming the judge errs alike across groups. `ppi_status` is "ok", or
  "too_few_reviews: n < min" (fewer than `min_reviewed` reviewed items: the estimate is kept, the interval left
  empty rather than shown misleadingly narrow), or "unreviewed_strata: k of N items" (a stratum of the group has
  no review: all left empty). The "all" row pools every policy's items and treats them as independent (answers
  of one question under several policies are correlated, so its interval is somewhat optimistic).
- rows with group "a − b" (each pair of policies, sorted by name, on the questions judged under both): PPI of the
  difference — the judge's per-question difference plus the difference of the two stratified rectifiers (the
  sample draws each policy separately, so a question is rarely reviewed under both; the two rectifiers are
  independent and their variances add). These rows fill n_population (questions), n_reviewed (both policies'
  reviewed items), judge_mean (the judge's mean difference) and the ppi columns; the rest is empty.
"""

import hashlib
import logging
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from workflow_scripts.core.contracts import JUDGMENTS_GROUNDED, JUDGMENTS_QUALITY
from workflow_scripts.core.vocabulary import STUDY_C_METRICS
from workflow_scripts.core.errors import InputError
from workflow_scripts.judging.ppi import Arm, Estimate, make_arm, ppi_difference, ppi_mean

HUMAN_PREFIX = "human_"
# judge → (its judgments contract, label → scale, the label whose level stratifies the sample)
JUDGES = {
    "grounded": (JUDGMENTS_GROUNDED, {"correctness": (0, 2), "faithfulness": (0, 2)}, "correctness"),
    "quality": (JUDGMENTS_QUALITY, {metric: (0, 5) for metric in STUDY_C_METRICS}, "overall"),
}
SHOWN = ("question", "answer", "references", "evidence")
MAX_REPORTED = 20
MINUS = " − "
log = logging.getLogger(__name__)
INTEGER = re.compile(r"[+-]?\d+")

AGREEMENT_SCHEMA = {
    "label": pl.String,
    "group": pl.String,
    "n_population": pl.Int64,
    "n_reviewed": pl.Int64,
    "judge_mean": pl.Float64,
    "ppi_mean": pl.Float64,
    "ppi_low": pl.Float64,
    "ppi_high": pl.Float64,
    "ppi_status": pl.String,
    "ppi_lambda": pl.String,
    "judge_mean_reviewed": pl.Float64,
    "human_mean_reviewed": pl.Float64,
    "human_mean_stratified": pl.Float64,
    "corrected_mean": pl.Float64,
    "kappa_quadratic": pl.Float64,
    "exact_agreement": pl.Float64,
    "covered_share": pl.Float64,
}


def _draw_order(seed: int, item_ids: Sequence[str]) -> list[str]:
    return [hashlib.sha256(f"{seed}\0{item_id}".encode()).hexdigest() for item_id in item_ids]


def review_sample(judgments: pl.DataFrame, stratify: Sequence[str], per_stratum: int, seed: int) -> pl.DataFrame:
    """Up to `per_stratum` items of every stratum (rows with a null stratum value are not eligible)."""
    eligible = judgments.drop_nulls(list(stratify))
    return (
        eligible.with_columns(pl.Series("_draw", _draw_order(seed, eligible["item_id"].to_list())))
        .sort([*stratify, "_draw"])
        .filter(pl.int_range(pl.len()).over(list(stratify)) < per_stratum)
        .drop("_draw")
    )


def _as_text(column: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """A column as CSV text: a list of strings becomes one "- item" line per element."""
    if dtype == pl.List(pl.String):
        return column.list.eval(pl.lit("- ") + pl.element()).list.join("\n")
    return column.cast(pl.String)


def export_review(
    judgments: pl.DataFrame,
    labels: Mapping[str, tuple[int, int]],
    stratify: Sequence[str],
    per_stratum: int,
    seed: int,
    show: Sequence[str],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The review sheet of a stratified sample (judge labels hidden), and the sampled judgments."""
    sample = review_sample(judgments, stratify, per_stratum, seed)
    sheet = sample.select(
        "item_id",
        *(_as_text(pl.col(name), sample[name].dtype) for name in show),
        *(pl.lit(None, dtype=pl.String).alias(f"{HUMAN_PREFIX}{label}") for label in labels),
        pl.lit(None, dtype=pl.String).alias("notes"),
    )
    return sheet, sample


def import_review(path: Path, sample: pl.DataFrame, labels: Mapping[str, tuple[int, int]]) -> pl.DataFrame:
    """The reviewed labels as item_id + human_<label> (Int8, null = left empty); InputError naming file and line.

    `sample`: the exported sample (review_sample with the export's settings); every item_id of the sheet must be
    in it (rows may be dropped: they count as not reviewed)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"review file {path} does not exist; export it first and fill in the human_* columns")
    try:
        sheet = pl.read_csv(path, infer_schema=False)
    except pl.exceptions.PolarsError as error:
        raise InputError(f"review file {path} is not a readable CSV: {error}") from None
    needed = ["item_id", *(f"{HUMAN_PREFIX}{label}" for label in labels)]
    missing = [name for name in needed if name not in sheet.columns]
    if missing:
        raise InputError(f"review file {path}: missing columns {missing}; keep the exported header")
    known = set(sample["item_id"].to_list())
    problems: list[str] = []
    unmatched: list[str] = []
    seen: set[str] = set()
    rows: list[dict[str, object]] = []
    for line, record in enumerate(sheet.select(needed).iter_rows(named=True), start=2):
        item_id = (record["item_id"] or "").strip()
        if not item_id or item_id not in known or item_id in seen:
            why = "has no item_id" if not item_id else "repeats" if item_id in seen else "is not in the exported sample"
            problems.append(f"line {line}: item_id {item_id!r} {why}")
            if item_id and item_id not in known:
                unmatched.append(item_id)
            continue
        seen.add(item_id)
        row: dict[str, object] = {"item_id": item_id}
        for label, (low, high) in labels.items():
            column = f"{HUMAN_PREFIX}{label}"
            text = (record[column] or "").strip()
            row[column] = int(text) if INTEGER.fullmatch(text) else None
            if text and (row[column] is None or not low <= row[column] <= high):
                problems.append(f"line {line}: {column} = {text!r} is not an integer from {low} to {high}")
        rows.append(row)
    if unmatched:
        more = f" (and {len(unmatched) - MAX_REPORTED} more)" if len(unmatched) > MAX_REPORTED else ""
        raise InputError(
            f"review file {path}: {len(unmatched)} item_ids are not in the exported review sample (the sheet must "
            f"come from review_export with the current review.per_stratum, review.seed and judgments): "
            f"{unmatched[:MAX_REPORTED]}{more}; all problems: " + "; ".join(problems[:MAX_REPORTED])
        )
    if problems:
        more = f" (and {len(problems) - MAX_REPORTED} more)" if len(problems) > MAX_REPORTED else ""
        raise InputError(f"review file {path}: {len(problems)} problems: " + "; ".join(problems[:MAX_REPORTED]) + more)
    schema = {"item_id": pl.String, **{f"{HUMAN_PREFIX}{label}": pl.Int8 for label in labels}}
    return pl.DataFrame(rows, schema=schema, orient="row")


def _mean(values: Sequence[float], weights: Sequence[float] | None = None) -> float | None:
    weights = weights or [1.0] * len(values)
    return sum(v * w for v, w in zip(values, weights)) / sum(weights) if values else None


def _kappa(judge: Sequence[int], human: Sequence[int], low: int, high: int) -> float | None:
    from sklearn.metrics import cohen_kappa_score

    if len(judge) < 2:
        return None
    kappa = cohen_kappa_score(judge, human, labels=list(range(low, high + 1)), weights="quadratic")
    return None if math.isnan(kappa) else float(kappa)


def agreement(
    judgments: pl.DataFrame,
    reviewed: pl.DataFrame,
    label: str,
    scale: tuple[int, int],
    stratify: Sequence[str],
    by: str = "policy",
    min_reviewed: int = 30,
    confidence: float = 0.95,
    question: str = "qid",
    score: str | None = None,
) -> pl.DataFrame:
    """Judge–human agreement, corrected means and PPI(++) estimates for `label` per value of `by` and overall
    ("all"); with a `question` column, PPI of the difference for each pair of `by` values ("a − b"). `score`: the
    judgments column the means and PPI read (e.g. the probability-weighted `<label>_expected`; default the label's
    written value, which kappa, exact agreement and the confusion correction always use)."""
    human = f"{HUMAN_PREFIX}{label}"
    paired = question in judgments.columns and question not in (by, *stratify)
    population = (
        judgments.drop_nulls([label, *stratify])
        .select("item_id", by, *[name for name in stratify if name != by], *([question] if paired else []),
                pl.col(label).cast(pl.Int64).alias("judge"), pl.col(score or label).cast(pl.Float64).alias("score"))
        .with_columns(pl.concat_str([pl.col(name).cast(pl.String) for name in stratify], separator="\0")
                      .alias("_stratum"))
    )
    strata = population.group_by(stratify).agg(pl.len().alias("N"))
    sample = (
        population.join(reviewed.drop_nulls(human).select("item_id", pl.col(human).cast(pl.Int64).alias("human")),
                        on="item_id")
        .join(strata, on=list(stratify))
    )
    sample = sample.with_columns((pl.col("N") / pl.len().over(list(stratify))).alias("weight"))
    expected = {
        level: _mean(group["human"].to_list(), group["weight"].to_list())
        for (level,), group in sample.group_by("judge")
    }
    groups = [("all", population, sample)] + [
        (str(value), population.filter(pl.col(by) == value), sample.filter(pl.col(by) == value))
        for value in sorted(population[by].unique().to_list())
    ]
    rows = []
    for name, pool, drawn in groups:
        covered = pool.join(drawn.select(stratify).unique(), on=list(stratify), how="semi").height
        levels = Counter(pool["judge"].to_list())
        corrected = (
            sum(count * expected[level] for level, count in levels.items()) / pool.height
            if pool.height and all(level in expected for level in levels) else None
        )
        mine = _arm(pool.join(drawn.select("item_id", "human"), on="item_id", how="left")) if pool.height else None
        estimate = ppi_mean(mine.judge, mine.human, mine.strata, min_reviewed, confidence) if mine else None
        rows.append({
            "label": label, "group": name, "n_population": pool.height, "n_reviewed": drawn.height,
            "judge_mean": _mean(pool["score"].to_list()), **_ppi_columns(estimate),
            "judge_mean_reviewed": _mean(drawn["score"].to_list()),
            "human_mean_reviewed": _mean(drawn["human"].to_list()),
            "human_mean_stratified": _mean(drawn["human"].to_list(), drawn["weight"].to_list()),
            "corrected_mean": corrected,
            "kappa_quadratic": _kappa(drawn["judge"].to_list(), drawn["human"].to_list(), *scale),
            "exact_agreement": _mean([float(j == h) for j, h in zip(drawn["judge"], drawn["human"])]),
            "covered_share": covered / pool.height if pool.height else None,
        })
    labelled = population.join(sample.select("item_id", "human"), on="item_id", how="left")
    values = sorted(population[by].unique().to_list()) if paired else []
    for index, a in enumerate(values):
        for b in values[index + 1:]:
            both = labelled.filter(pl.col(by) == a).join(labelled.filter(pl.col(by) == b), on=question, suffix="_b")
            if not both.height:
                continue
            other = both.select(pl.col("score_b").alias("score"), pl.col("human_b").alias("human"),
                                pl.col("_stratum_b").alias("_stratum"))
            estimate = ppi_difference(_arm(both), _arm(other), min_reviewed, confidence)
            rows.append({
                "label": label, "group": f"{a}{MINUS}{b}", "n_population": both.height,
                "n_reviewed": estimate.n_reviewed, "judge_mean": _mean((both["score"] - both["score_b"]).to_list()),
                **_ppi_columns(estimate),
            })
    return pl.DataFrame(rows, schema=AGREEMENT_SCHEMA, orient="row")


def _arm(items: pl.DataFrame) -> Arm:
    """A PPI arm from columns score (the judge's), human (null = not reviewed) and _stratum."""
    return make_arm(items["score"].cast(pl.Float64).to_numpy(),
                    items["human"].cast(pl.Float64).fill_null(float("nan")).to_numpy(), items["_stratum"].to_numpy())


def _ppi_columns(estimate: Estimate | None) -> dict[str, object]:
    if estimate is None:
        return {"ppi_mean": None, "ppi_low": None, "ppi_high": None, "ppi_status": None, "ppi_lambda": None}
    return {"ppi_mean": estimate.estimate, "ppi_low": estimate.low, "ppi_high": estimate.high,
            "ppi_status": estimate.status, "ppi_lambda": " / ".join(f"{lam:.3f}" for lam in estimate.lam) or None}


# ---- what the rules' jobs hand over (jobs/review.py reads it)


def shown_evidence(run: pl.DataFrame, units: pl.DataFrame) -> dict[str, list[str]]:
    """qid → the texts of the units (unit_id, text) shown with the answer, in the `run`'s rank order (RUNS)."""
    run = run.join(units.select("unit_id", "text"), on="unit_id")
    shown = run.sort(["qid", "rank"]).group_by("qid", maintain_order=True).agg(pl.col("text"))
    return dict(zip(shown["qid"].to_list(), shown["text"].to_list()))


def judged_items(judge: str, questions: pl.DataFrame, judged: Mapping[str, pl.DataFrame],
                 answers: Mapping[str, pl.DataFrame], shown: Mapping[str, Mapping[str, list[str]]]) -> pl.DataFrame:
    """One row per judged answer of every policy: item_id "<qid>|<policy>", policy, the judge's labels and SHOWN;
    per policy (in `judged`'s order) its judgments (the judge's contract), its answers (GENERATIONS) and the
    evidence it showed (`shown_evidence`; empty for closed_book); `questions` is QUESTIONS."""
    _, labels, _ = JUDGES[judge]
    texts = questions.select("qid", pl.col("text").alias("question"), pl.col("answers").alias("references"))
    tables = []
    for policy, judgments in judged.items():
        table = (
            judgments.select(
                pl.col("item_id").alias("qid"),
                *labels,
                *(column for column in scored_columns(judge) if column not in labels),
            )
            .join(answers[policy].select(pl.col("request_id").alias("qid"), pl.col("text").alias("answer")), on="qid")
            .join(texts, on="qid")
        )
        tables.append(table.with_columns(
            pl.concat_str("qid", pl.lit(policy), separator="|").alias("item_id"), pl.lit(policy).alias("policy"),
            pl.Series("evidence", [shown[policy].get(qid, []) for qid in table["qid"]], dtype=pl.List(pl.String)),
        ))
    return pl.concat(tables).sort("item_id")


def scored_columns(judge: str, scoring: str = "expected") -> dict[str, str]:
    """label → the judgments column whose mean the agreement reports (`judging.scoring`): <label>_expected, or the
    label itself under argmax (Study C's scores: the unconditional expected score)."""
    _, labels, _ = JUDGES[judge]
    return {label: f"{label}_expected" if scoring == "expected" else label for label in labels}


def export_sheet(judge: str, items: pl.DataFrame, per_stratum: int, seed: int) -> pl.DataFrame:
    """Rule review_export's work for one judge: its blind review sheet (REVIEW_SHEETS[judge])."""
    _, labels, level = JUDGES[judge]
    sheet, sample = export_review(items, labels, ["policy", level], per_stratum, seed, SHOWN)
    log.info("review %s: %d items to review", judge, sample.height)
    return sheet


def judge_agreement(judge: str, items: pl.DataFrame, reviewed: Path, per_stratum: int, seed: int, min_reviewed: int,
                    scoring: str) -> pl.DataFrame:
    """Rule review_agreement's work: the reviewed sheet of one judge → agreement and corrected means per label (the
    sample redrawn with the export's `per_stratum` and `seed`)."""
    _, labels, level = JUDGES[judge]
    sample = review_sample(items, ["policy", level], per_stratum, seed)
    human = import_review(reviewed, sample, labels)
    score = scored_columns(judge, scoring)
    return pl.concat([agreement(items, human, label, scale, ["policy", level], min_reviewed=min_reviewed,
                                score=score[label]) for label, scale in labels.items()])
