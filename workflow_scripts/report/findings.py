"""Findings: what a run's tables say, as sentences that never claim more than the tables hold.

In:  per dataset its tables by contract name and routing pair ({table name: {pair: frame}}; "" for a dataset-wide
     table): the routing pairs' utility, held-out policies and comparisons (metric and utility scales) and
     frontiers; the answers' summary and judged comparisons, the judge's validation verdict and the reference
     label's comparisons; Study C's paired tables; the retrieval metrics and the arms' paired differences against
     their first stage or the dataset's first arm; plus the router kinds (routing.routers),
     generation.partial_error_share and evaluation.references (published numbers to hold the arms against).
Out: `dataset_findings` → every Finding of a dataset (its page lists them all); `landing` → at most about a dozen
     lines across the datasets for the landing page, most informative first: failures (a judge that failed its
     validation, findings marked partial), the arms against published references and (one line per dataset)
     against their first stage or the first arm, effects (a CI that excludes 0 with a p that agrees, a router that
     beats the best fixed policy), where the two tests disagree, then one line each for the routers against the
     fixed policies, what switching rescues and harms per dataset, realized vs target usage, and the folded ones:
     the comparisons with no detectable difference and the pairs whose held-out labels do not vary.

The rules a finding follows (docs/statistics.md, docs/judging.md):
- an interval and a permutation p are read together (`interval`): "the CI includes 0" only when both find nothing,
  "the two tests disagree" when they fall on different sides of the level, and the smallest attainable p when the
  groups are too few for the level;
- routers are ranked on held-out utility against both fixed policies (always switching, never switching); a router
  is reported better only when its paired utility CI against the better fixed policy excludes 0, and a `random`
  router is a baseline, never the best;
- a judged difference is a finding only where the judge passed its validation gate; where it failed, the reference
  label's difference stands in its place; where nothing validated it, the findings say so;
- failed requests (answers, judgments) are counted, and past generation.partial_error_share mark a finding partial.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl
from scipy.stats import false_discovery_control

from workflow_scripts.core.contracts import (
    ANSWER_SUMMARY,
    ARM_COMPARISONS,
    MULTISTEP_COMPARISONS,
    MULTISTEP_CURVE,
    MULTISTEP_FRONTIERS,
    MULTISTEP_STOPS,
    COMPARISONS,
    FRONTIERS,
    JUDGE_VERDICT,
    METRICS_SUMMARY_REPORT,
    REFERENCE_COMPARISONS,
    ROUTER_COMPARISONS,
    ROUTER_POLICIES,
    STUDY_C_PAIRED,
    STUDY_C_PAIRED_RETRIEVAL,
    STUDY_C_QUALITY,
    UTILITY_REPORT,
)
from workflow_scripts.core.vocabulary import ALWAYS_ON, CONSERVATIVE, DEPLOYABLE, FRONTIER_RULES, OFF

# What a finding is, in the order the landing page takes them (see `landing`)
(FAILURE, REFERENCE, ARMS, EFFECT, DISAGREE, ROUTERS, HEADROOM, MULTISTEP, USAGE, NOTE, NULL, FLAT, RANKING,
 DETAIL) = (
    "failure", "reference", "arms", "effect", "disagree", "routers", "headroom", "multistep", "usage", "note", "null",
    "flat", "ranking", "detail")  # detail: on the dataset page only
BASELINE_KINDS = frozenset({"random"})  # routers that are baselines: never named the best
FIXED_KINDS = frozenset({"always", "never"})  # routers that are the fixed policies themselves
LANDING_EFFECTS = 6  # effects listed one by one on the landing page; the rest are counted
LANDING_PAIRS = 3  # up to this many pairs' router lines are listed one by one; more fold into one line
FIXED_NAMES = {ALWAYS_ON: "always switching", OFF: "never switching"}


@dataclass(frozen=True)
class Finding:
    """One sentence of a dataset's findings; `kind` says how the landing page uses it, `data` what it aggregates."""

    text: str
    kind: str
    pair: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)


# --- numbers in sentences


def number(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def signed(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:+.{digits}f}"


def p_value(value: Any) -> str:
    return "n/a" if value is None else f"{value:.2g}"


def excludes_zero(row: Mapping[str, Any]) -> int:
    """+1 when the CI lies above 0, −1 below, 0 when it includes 0 (or is missing)."""
    low, high = row.get("low"), row.get("high")
    return 0 if low is None or high is None else 1 if low > 0 else -1 if high < 0 else 0


def verdict_of(row: Mapping[str, Any]) -> str:
    """How a paired row's interval and permutation p read together: EFFECT (both find a difference), NULL (neither
    does) or DISAGREE (they fall on different sides of the level)."""
    outside = excludes_zero(row) != 0
    p, alpha = row.get("p_permutation"), 1 - (row.get("confidence") or 0.95)
    below = p is not None and p < alpha
    if row.get("low") is None or row.get("high") is None:
        return EFFECT if below else NULL
    return EFFECT if outside and (p is None or below) else NULL if not outside and not below else DISAGREE


def interval(row: Mapping[str, Any], estimate: str = "estimate") -> str:
    """The row as "Δ +0.012 (95% CI −0.03 to +0.05, p = 0.6)", then what the two tests say together: "the CI
    includes 0" when both find nothing, a plain "the two tests disagree" when the interval and the permutation p
    fall on different sides of the level (docs/statistics.md), and the smallest p the groups allow when it is above
    the level."""
    low, high, p = row.get("low"), row.get("high"), row.get("p_permutation")
    confidence = row.get("confidence") or 0.95
    alpha = 1 - confidence
    text = (f"Δ {signed(row[estimate])} ({round(100 * confidence)}% CI {signed(low)} to {signed(high)}, "
            f"p = {p_value(p)})")
    if low is not None and high is not None:
        verdict = verdict_of(row)
        if verdict == NULL:
            text += ", the CI includes 0"
        elif verdict == DISAGREE:
            text += (f", the CI excludes 0 but p ≥ {alpha:.2g}" if excludes_zero(row) else
                     f", the CI includes 0 but p < {alpha:.2g}") + ": the two tests disagree"
    floor, groups = row.get("p_floor"), row.get("n_groups", row.get("papers"))
    if floor is not None and floor >= alpha:
        text += f"; with {groups} groups p cannot fall below {p_value(floor)}"
    return text


# --- routing pairs


def headroom(pair: str, utility: pl.DataFrame) -> Finding:
    """What always switching does on held-out (or on all questions without a held-out split): rescues, harms."""
    rows = {row["split"]: row for row in utility.iter_rows(named=True)}
    held = rows.get("heldout") or rows["all"]
    where = "held-out" if "heldout" in rows else "all"
    text = (f"Pair `{pair}` ({held['measure']}): on {held['n']} {where} questions, always switching rescues "
            f"{held['gains']}, harms {held['harms']} and ties {held['ties']}; mean {number(held['mean_off'])} off → "
            f"{number(held['mean_on'])} always on.")
    flat = held["signal_absent"] or held["gains"] + held["harms"] == 0
    if flat:
        text += f" No {where} label varies: there is nothing for a router to learn or show here."
    return Finding(text, FLAT if flat else HEADROOM, pair, {k: held[k] for k in ("n", "gains", "harms", "measure")})


def router_verdicts(pair: str, policies: pl.DataFrame, comparisons: pl.DataFrame,
                    kinds: Mapping[str, str]) -> list[Finding]:
    """Every policy ranked on held-out utility, the fixed ones included; per learned router its utility against the
    better fixed policy (its paired utility CI, comparisons' `utility` scale). A router that beats it is an EFFECT;
    otherwise one ROUTERS line names the best fixed policy and the closest router."""
    if not policies.height:
        return []
    scored = comparisons.filter(pl.col("scale") == "utility") if "scale" in comparisons.columns else comparisons.clear()
    learned = policies.filter(~pl.col("router").replace_strict(kinds, default="").is_in(BASELINE_KINDS | FIXED_KINDS))
    cost = policies["cost_per_trigger"][0]
    fixed = {ALWAYS_ON: policies["always_on"][0] - cost, OFF: policies["off"][0]}
    best_fixed = max(fixed, key=lambda name: (fixed[name], name == OFF))  # a tie goes to never switching (cheaper)
    ranked = sorted([(row["utility"], row["router"]) for row in learned.iter_rows(named=True)], reverse=True)
    beating, closest = [], None
    for utility, router in ranked:
        mine = {row["b"]: row for row in scored.filter(pl.col("router") == router).iter_rows(named=True)}
        # its CI against its own better fixed policy (a measured cost differs per router)
        own = {ALWAYS_ON: policies.filter(pl.col("router") == router)["always_on"][0]
               - policies.filter(pl.col("router") == router)["cost_per_trigger"][0], OFF: fixed[OFF]}
        better = max(own, key=lambda name: (own[name], name == OFF))
        row = mine.get(better)
        if row is not None and verdict_of(row) == EFFECT and row["estimate"] > 0:
            beating.append(Finding(
                f"Pair `{pair}`: router `{router}` beats the better fixed policy ({FIXED_NAMES[better]}) on held-out "
                f"utility: {number(utility)} vs {number(own[better])}, {interval(row)}, n = {row['n']} in "
                f"{row['n_groups']} groups.", EFFECT, pair))
        elif closest is None:
            closest = (router, utility, row)
    everyone = sorted([*((value, FIXED_NAMES[name]) for name, value in fixed.items()),
                       *((row["utility"], f"`{row['router']}`") for row in policies.iter_rows(named=True)
                         if kinds.get(row["router"]) not in FIXED_KINDS)], reverse=True)
    priced = (f"c = {cost:g}" if policies["cost_per_trigger"].n_unique() == 1 else
              f"c measured per router; always switching at `{policies['router'][0]}`'s c = {cost:g}")
    ranking = Finding(f"Pair `{pair}`, held-out utility (metric − c × trigger, {priced}), best first: "
                      + ", ".join(f"{name} {number(value)}" for value, name in everyone)
                      + (" (`random` is a baseline, never the best)." if BASELINE_KINDS & set(kinds.values()) else "."),
                      RANKING, pair)
    if beating:
        return [*beating, ranking]
    named = ", ".join(f"{FIXED_NAMES[name]} {number(value)}" for name, value in fixed.items())
    text = f"Pair `{pair}`: no router beats the better fixed policy on held-out utility ({named})"
    if closest is not None:
        router, utility, row = closest
        text += f"; the closest, `{router}`, {number(utility)}" + (f", {interval(row)}" if row is not None else "")
    return [Finding(text + ".", ROUTERS, pair, {"best_fixed": FIXED_NAMES[best_fixed]}), ranking]


def usage(pair: str, frontiers: pl.DataFrame) -> Finding | None:
    """Realized held-out usage against the target ρ of the budget knobs, per frontier rule."""
    if frontiers is None or not frontiers.height:
        return None
    budgets = sorted(frontiers["budget"].unique().to_list())
    parts, data = [], {}
    for rule in FRONTIER_RULES:
        table = frontiers.filter(pl.col("frontier") == rule).with_columns(
            (pl.col("usage") - pl.col("budget")).alias("excess")
        )
        if not table.height:
            continue
        worst = table.sort("excess", descending=True, maintain_order=True).row(0, named=True)
        over = table.filter(pl.col("excess") > 0).height
        data[rule] = (over, table.height, worst["excess"])
        parts.append(f"{rule} thresholds exceed ρ at {over} of {table.height} router × budget points (largest usage "
                     f"− ρ {signed(worst['excess'], 2)}, `{worst['router']}` at ρ = {worst['budget']:g})")
    if not parts:
        return None
    return Finding(f"Pair `{pair}`: realized held-out usage vs target ρ ∈ [{budgets[0]:g}, {budgets[-1]:g}]: "
                   + "; ".join(parts) + ".", USAGE, pair, data)


def routing_findings(pair: str, utility: pl.DataFrame, policies: pl.DataFrame, comparisons: pl.DataFrame,
                     frontiers: pl.DataFrame | None, kinds: Mapping[str, str]) -> list[Finding]:
    """Per routing pair: what switching does, the routers against the fixed policies, usage at the budgets."""
    first = headroom(pair, utility)
    if first.kind == FLAT:
        return [first]
    found = [first, *router_verdicts(pair, policies, comparisons, kinds)]
    return found + [finding for finding in [usage(pair, frontiers)] if finding is not None]


# --- judged answers


MEASURE_NAMES = {"auroc": "AUROC", "spearman": "Spearman ρ", "kappa": "Cohen's κ"}


def verdict_text(verdict: Mapping[str, Any]) -> str:
    """The verdict in words, e.g. "AUROC 0.433 (CI 0.391 to 0.474) against the `contains` label; validated when the
    CI's lower end is above 0.5"."""
    return (f"{MEASURE_NAMES.get(verdict['measure'], verdict['measure'])} {number(verdict['estimate'])} (CI "
            f"{number(verdict['low'])} to {number(verdict['high'])}) against the `{verdict['reference']}` label; "
            f"validated when the CI's lower end is above {verdict['above']:g}")


def failures(summary: pl.DataFrame, row: Mapping[str, Any], partial_share: float) -> str:
    """A finding's tail "; partial: 7 requests of 34 answers failed (…; most common: 5× HTTP 400 …) and are not in
    n" when the two policies' failed requests exceed `partial_share` of their answers
    (generation.partial_error_share)."""
    if "answer_errors" not in summary.columns:
        return ""
    sides = summary.filter(pl.col("policy").is_in([row["a"], row["b"]]))
    failed = int(sides["answer_errors"].sum() + sides["judge_errors"].sum())
    answers = int(sides["answers"].sum())
    if not failed or failed <= partial_share * answers:
        return ""
    causes = ", ".join(cause for cause in sides["error_cause"].drop_nulls().to_list())
    return (f"; partial: {failed} requests of {answers} answers failed (answers never judged, or judgments that "
            f"errored; most common: {causes}) and are not in n")


def paired_finding(text: str, row: Mapping[str, Any], partial: str) -> Finding:
    """A paired difference as a finding: FAILURE when partial, else as its interval and p read together."""
    return Finding(text, FAILURE if partial else verdict_of(row))


def judged_findings(summary: pl.DataFrame, comparisons: pl.DataFrame, verdict: pl.DataFrame | None = None,
                    reference: pl.DataFrame | None = None, partial_share: float = 0.0) -> list[Finding]:
    """Per judged comparison: the difference with its CI and n, gated by the judge's validation on the dataset
    (`verdict`, judging.validate.gate): a validated judge's differences are findings; a failed judge's are not, and
    the reference label's paired difference (`reference`) stands in their place; with no validation one line says
    the judge is not validated on this data. Flagged when the judge gave constant scores."""
    distinct = (
        dict(zip(summary["policy"], summary["distinct_correctness"]))
        if "distinct_correctness" in summary.columns
        else {}
    )
    gate = verdict.row(0, named=True) if verdict is not None and verdict.height else None
    if gate is not None and not gate["validated"]:
        found = [Finding(f"The judge failed validation here: {verdict_text(gate)}. Its judged differences are not "
                         f"findings; the reference label's stand in their place.", FAILURE)]
        judged = {(row["a"], row["b"]): row for row in comparisons.iter_rows(named=True)}
        for row in (reference if reference is not None else comparisons.clear()).iter_rows(named=True):
            other, partial = judged.get((row["a"], row["b"])), failures(summary, row, partial_share)
            stand_in = paired_finding(
                f"Reference label (`{gate['reference']}`) {row['a']} − {row['b']}: {interval(row)}, n = {row['n']} "
                f"questions in {row['n_groups']} groups{partial}"
                + (f" (the failed judge's Δ {signed(other['estimate'])} is not a finding)." if other else "."),
                row, partial)
            # it stands in for the judged comparison: shown on the landing page beside the failure, difference or not
            found.append(stand_in if stand_in.kind != NULL else replace(stand_in, kind=REFERENCE))
        return found
    found = []
    for row in comparisons.iter_rows(named=True):
        constant = distinct.get(row["a"]) == 1 and distinct.get(row["b"]) == 1
        partial = failures(summary, row, partial_share)
        text = (f"Judged correctness {row['a']} − {row['b']}: {interval(row)}, n = {row['n']} questions in "
                f"{row['n_groups']} groups{partial}")
        if constant:
            found.append(Finding(text + ". The judge gave every answer the same correctness score, so this "
                                 "difference carries no information.", NULL))
        else:
            found.append(paired_finding(text + ".", row, partial))
    if not comparisons.height and summary.height > 1:
        found.append(Finding("No question was judged under every policy: no paired comparison of judged answers.",
                             NOTE))
    if comparisons.height:
        found.append(Finding(f"The judge is validated here: {verdict_text(gate)}." if gate is not None else
                             "The judge is not validated on this data (no judging.validate against reference "
                             "answers): judged differences are the judge's, not established correctness.", NOTE))
    return found


# --- Study C


def study_c_findings(paired_retrieval: pl.DataFrame, paired: pl.DataFrame, quality: pl.DataFrame) -> list[Finding]:
    """Per Study C strategy (all queries): Hit@3 vs classic, and the judged overall score vs classic (the judge is not
    validated on Study C's data, which has no reference answers)."""
    judged = {row["strategy"]: row for row in paired.filter(pl.col("query_type") == "all").iter_rows(named=True)}
    distinct = quality.filter(pl.col("query_type") == "all")
    constant = bool(distinct.height) and distinct["distinct_overall"].max() <= 1
    found = []
    for row in paired_retrieval.filter(pl.col("query_type") == "all").iter_rows(named=True):
        overall = judged.get(row["strategy"])
        text = (f"Study C `{row['strategy']}` vs classic: Hit@3 over {row['queries']} queries of {row['papers']} "
                f"papers {interval(row, 'delta')}")
        if overall is not None:
            text += f"; judged overall (1–5) over {overall['queries']} judged queries {interval(overall, 'delta')}"
        found.append(Finding(text + ".", verdict_of({**row, "estimate": row["delta"]})))
    if constant:
        found.append(Finding("The quality judge gave every Study C answer the same overall score: its differences "
                             "carry no information; read Hit@3.", NOTE))
    elif judged:
        found.append(Finding("The quality judge is not validated on this data (Study C's queries have no reference "
                             "answers): its judged differences are the judge's; Hit@3 of the source paper is "
                             "judge-free.", NOTE))
    return found


# --- retrieval against published numbers


def reference_findings(metrics: pl.DataFrame, references: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """Per configured reference (evaluation.references, measure names as the metrics table spells them) and arm it
    applies to: the arm's mean over all its questions against the reference value, per measure, and whether they
    agree to the 4 decimals the tables keep."""
    found = []
    overall = metrics.filter(pl.col("split") == "all")
    for name, reference in references.items():
        arms = reference.get("arms") or overall["arm"].to_list()
        for row in overall.filter(pl.col("arm").is_in(arms)).iter_rows(named=True):
            pairs = [(measure, row.get(measure), value) for measure, value in reference["measures"].items()]
            parts = ", ".join(f"{measure} {number(ours, 4)} vs {number(theirs, 4)}" for measure, ours, theirs in pairs)
            gaps = [ours - theirs for _, ours, theirs in pairs if ours is not None]
            worst = max(gaps, key=abs) if gaps else None
            same = worst is not None and len(gaps) == len(pairs) and abs(worst) < 5e-5
            verdict = ("equal to 4 decimals" if same else
                       f"largest gap {signed(worst, 4)}" if worst is not None else "not measured by this run")
            found.append(Finding(f"`{row['arm']}` against {reference['source']} (`{name}`), over {row['questions']} "
                                 f"questions: {parts}; {verdict}.", REFERENCE))
    return found


def arm_findings(comparisons: pl.DataFrame) -> list[Finding]:
    """Per arm and measure, the paired difference against its first stage or the dataset's first arm
    (ARM_COMPARISONS), as its interval and p read together; `data` keeps what the landing page's one line per dataset
    folds."""
    found = []
    for row in comparisons.iter_rows(named=True):
        text = (f"`{row['a']}` − `{row['b']}` {row['measure']}: {interval(row)}, n = {row['n']} queries in "
                f"{row['n_groups']} groups.")
        found.append(Finding(text, ARMS, data={**row, "verdict": verdict_of(row)}))
    return found


def arms_line(findings: Sequence[Finding]) -> str:
    """One dataset's arm findings in one line: per arm, the measures whose CI excludes 0 (with the two tests
    agreeing) and their Δ, how many show no detectable difference, and where the two tests disagree."""
    rows = [finding.data for finding in findings]
    parts = []
    for arm, baseline in dict.fromkeys((row["a"], row["b"]) for row in rows):
        mine = [row for row in rows if (row["a"], row["b"]) == (arm, baseline)]
        said = []
        for direction, word in ((1, "higher"), (-1, "lower")):
            effects = [row for row in mine if row["verdict"] == EFFECT and excludes_zero(row) == direction]
            if effects:
                said.append(
                    f"{word} on " + ", ".join(f"{row['measure']} ({signed(row['estimate'])})" for row in effects)
                )
        nulls = sum(row["verdict"] == NULL for row in mine)
        if nulls:
            said.append(f"no detectable difference on {nulls} measure{'s' * (nulls > 1)}")
        disagree = [row["measure"] for row in mine if row["verdict"] == DISAGREE]
        if disagree:
            said.append(f"the two tests disagree on {', '.join(disagree)}")
        parts.append(f"`{arm}` vs `{baseline}` " + ", ".join(said))
    return (
        f"Arms against their first stage or the first arm, paired over {rows[0]['n']} queries "
        f"({round(100 * rows[0]['confidence'])}% CIs and p on the dataset page): " + "; ".join(parts) + "."
    )


def arms_counts(findings: Sequence[Finding]) -> str:
    """A dataset's arm findings as counts per pair, e.g. "`bm25_global` vs `bm25_candidates` 0 / 3 / 0 / 0"."""
    rows = [finding.data for finding in findings]
    parts = []
    for pair in dict.fromkeys((row["a"], row["b"]) for row in rows):
        mine = [row for row in rows if (row["a"], row["b"]) == pair]
        higher = sum(row["verdict"] == EFFECT and excludes_zero(row) > 0 for row in mine)
        lower = sum(row["verdict"] == EFFECT and excludes_zero(row) < 0 for row in mine)
        nulls, disagree = (sum(row["verdict"] == kind for row in mine) for kind in (NULL, DISAGREE))
        parts.append(f"`{pair[0]}` vs `{pair[1]}` {higher} / {lower} / {nulls} / {disagree}")
    return ", ".join(parts)


# --- multi-step retrieval


def multistep_findings(policy: str, curve: pl.DataFrame, comparisons: pl.DataFrame, stops: pl.DataFrame,
                       frontiers: pl.DataFrame | None = None) -> list[Finding]:
    """A multi-step policy: its fixed-K curve against the oracle stop and the forced stops (one line), what each extra
    step rescues and harms (the dataset page), the stop rules against the fixed K at matched calls (one line: the
    rule that beats it, with its interval, or that none does) and, given its frontiers, the stop routers' deployable
    thresholds against spending the same calls blindly (one line: frontier_findings)."""
    rows = {row["policy"]: row for row in curve.iter_rows(named=True)}
    oracle = rows.pop("oracle")
    fixed = list(rows.values())
    best = max(fixed, key=lambda row: (row["mean"], -row["calls"]))
    chain = stops.filter(pl.col("rule") == "chain").row(0, named=True)
    one, last, at_cap = fixed[0], fixed[-1], chain["at_cap"]
    found = [Finding(
        f"Multi-step `{policy}`, {one['n']} questions: correct {number(one['mean'])} with one retrieval, "
        f"{number(last['mean'])} at K = {len(fixed)} ({number(last['calls'], 2)} calls per question); the best "
        f"fixed K, {best['policy']}, {number(best['mean'])}; stopping each question at its best step (the oracle, an "
        f"upper bound) {number(oracle['mean'])}, headroom {signed(oracle['mean'] - best['mean'])}; {at_cap} "
        f"question{'s' * (at_cap != 1)} reached K without an answer.", MULTISTEP, policy)]
    for row in comparisons.iter_rows(named=True):
        found.append(Finding(
            f"`{policy}` {row['a']} against {row['b']}: rescues {number(100 * row['win'], 0)}% and harms "
            f"{number(100 * row['loss'], 0)}% of {row['n']} questions; {interval(row)}.", DETAIL, policy))
    rules = [{**row, "estimate": row["delta_estimate"], "low": row["delta_low"], "high": row["delta_high"]}
             for row in stops.filter(pl.col("rule") != "chain").iter_rows(named=True)]
    if rules:
        beating = [row for row in rules if verdict_of(row) == EFFECT and excludes_zero(row) > 0]
        row = max(beating or rules, key=lambda row: row["estimate"])
        against = (f"`{row['rule']}` ({number(row['calls'], 2)} calls) against {row['matched']} "
                   f"({number(row['matched_calls'], 2)} calls): {interval(row)}")
        found.append(Finding(
            f"`{policy}`: stop rule {against}." if beating else
            f"`{policy}`: no stop rule beats the fixed K at matched calls ({len(rules)} replayed); the closest, "
            f"{against}.", MULTISTEP, policy))
    if frontiers is not None and frontiers.height:
        found.append(frontier_finding(policy, frontiers))
    return found


def frontier_finding(policy: str, frontiers: pl.DataFrame) -> Finding:
    """The stop routers' deployable frontier over retrieval calls: the (router, budget) that beats spending the same
    calls blindly by the most, with its interval, or that none does (the closest), and how often the frozen
    thresholds overspent their target on held-out (deployable and conservative). Every cell is a test, so a cell
    beats only with its CI above 0 and its permutation p adjusted over all cells (Benjamini–Hochberg) below the
    level; the p shown is the adjusted one."""
    deployable = frontiers.filter(pl.col("frontier") == DEPLOYABLE)
    adjusted = false_discovery_control(deployable["p_permutation"].fill_null(1.0).to_numpy())  # Benjamini–Hochberg
    rows = [{**row, "estimate": row["vs_blind"], "low": row["vs_blind_low"], "high": row["vs_blind_high"],
             "p_permutation": float(p)} for row, p in zip(deployable.iter_rows(named=True), adjusted)]
    beating = [row for row in rows if verdict_of(row) == EFFECT and excludes_zero(row) > 0]
    row = max(beating or rows, key=lambda row: (row["estimate"], -row["budget"]))
    where = (f"`{row['router']}` at {number(row['target_calls'], 2)} calls per question (realized "
             f"{number(row['calls'], 2)}, correct {number(row['accuracy'])}, harms {number(100 * row['harmed'], 0)}% "
             f"against one retrieval): {interval(row)}")
    overspent = {frontier: frontiers.filter((pl.col("frontier") == frontier) & (pl.col("transfer_error") > 1e-9))
                 .height for frontier in (DEPLOYABLE, CONSERVATIVE)}
    budgets = deployable.height
    return Finding(
        (f"`{policy}`: stop router {where} against spending the same calls blindly (the best of {len(rows)} router "
         f"× budget cells, p adjusted over them)" if beating else
         f"`{policy}`: no stop router's frozen threshold beats spending the same calls blindly ({budgets} router × "
         f"budget cells, {row['n_heldout']} held-out questions, p adjusted over them); the closest, {where}") +
        f"; held-out calls exceeded the target in {overspent[DEPLOYABLE]} of {budgets} deployable and "
        f"{overspent[CONSERVATIVE]} of {budgets} conservative cells.", MULTISTEP, policy)


# --- a dataset, and the landing page


def dataset_findings(tables: Mapping[str, Mapping[str, Any]], kinds: Mapping[str, str], partial_share: float = 0.0,
                     references: Mapping[str, Mapping[str, Any]] | None = None) -> list[Finding]:
    """Every finding of one dataset, from its tables by contract name and pair (a missing table: no finding)."""
    found = []
    if references and METRICS_SUMMARY_REPORT in tables:
        found += reference_findings(tables[METRICS_SUMMARY_REPORT][""], references)
    if ARM_COMPARISONS.name in tables:
        found += arm_findings(tables[ARM_COMPARISONS.name][""])
    for pair, utility in tables.get(UTILITY_REPORT.name, {}).items():
        if pair in tables.get(ROUTER_POLICIES.name, {}) and pair in tables.get(ROUTER_COMPARISONS.name, {}):
            found += routing_findings(pair, utility, tables[ROUTER_POLICIES.name][pair],
                                      tables[ROUTER_COMPARISONS.name][pair], tables.get(FRONTIERS.name, {}).get(pair),
                                      kinds)
    if COMPARISONS.name in tables and ANSWER_SUMMARY.name in tables:
        found += judged_findings(tables[ANSWER_SUMMARY.name][""], tables[COMPARISONS.name][""],
                                 tables.get(JUDGE_VERDICT.name, {}).get(""),
                                 tables.get(REFERENCE_COMPARISONS.name, {}).get(""), partial_share)
    for policy, curve in tables.get(MULTISTEP_CURVE.name, {}).items():
        found += multistep_findings(policy, curve, tables[MULTISTEP_COMPARISONS.name][policy],
                                    tables[MULTISTEP_STOPS.name][policy],
                                    tables.get(MULTISTEP_FRONTIERS.name, {}).get(policy))
    study_c = (STUDY_C_PAIRED_RETRIEVAL.name, STUDY_C_PAIRED.name, STUDY_C_QUALITY.name)
    if all(name in tables for name in study_c):
        found += study_c_findings(*(tables[name][""] for name in study_c))
    return found


def landing(found: Mapping[str, Sequence[Finding]]) -> list[str]:
    """The landing page's lines across datasets (see the module docstring); a line names its dataset when the run
    has several."""
    several = len(found) > 1

    def where(dataset: str) -> str:
        return f"{dataset}: " if several else ""

    every = [(dataset, finding) for dataset, findings in found.items() for finding in findings]

    def of(kind: str) -> list[tuple[str, Finding]]:
        return [(dataset, finding) for dataset, finding in every if finding.kind == kind]

    lines = [f"{where(dataset)}{finding.text}" for dataset, finding in of(FAILURE) + of(REFERENCE)]
    arms = {dataset: [finding for name, finding in of(ARMS) if name == dataset] for dataset in found}
    arms = {dataset: findings for dataset, findings in arms.items() if findings}
    if len(arms) == 1:
        lines += [f"{where(dataset)}{arms_line(findings)}" for dataset, findings in arms.items()]
    elif arms:
        lines.append("Arms against their first stage or the first arm, measures higher / lower / without a detectable "
                     "difference / where the two tests disagree (per measure on the dataset pages): "
                     + "; ".join(f"{dataset} {arms_counts(findings)}" for dataset, findings in arms.items()) + ".")
    effects = of(EFFECT) + of(DISAGREE)
    lines += [f"{where(dataset)}{finding.text}" for dataset, finding in effects[:LANDING_EFFECTS]]
    if len(effects) > LANDING_EFFECTS:
        lines.append(f"{len(effects) - LANDING_EFFECTS} more differences whose CI excludes 0 or whose tests disagree: "
                     "see the dataset pages.")
    routers = of(ROUTERS)
    if len(routers) <= LANDING_PAIRS:
        lines += [f"{where(dataset)}{finding.text}" for dataset, finding in routers]
    else:
        fixed = sorted({finding.data["best_fixed"] for _, finding in routers})
        lines.append(f"No router beats the better fixed policy on held-out utility in {len(routers)} pairs (the better "
                     f"fixed policy: {' or '.join(fixed)}); per pair on the dataset pages.")
    headrooms = of(HEADROOM)
    if len(headrooms) == 1:
        lines.append(f"{where(headrooms[0][0])}{headrooms[0][1].text}")
    elif headrooms:
        counts = "; ".join(f"{where(dataset)}`{finding.pair}` {finding.data['gains']} / {finding.data['harms']} of "
                           f"{finding.data['n']}" for dataset, finding in headrooms)
        lines.append(f"Always switching rescues / harms, held-out, of the questions: {counts}.")
    lines += [f"{where(dataset)}{finding.text}" for dataset, finding in of(MULTISTEP)]
    usages = of(USAGE)
    if len(usages) == 1:
        lines.append(f"{where(usages[0][0])}{usages[0][1].text}")
    elif usages:
        parts = []
        for rule in FRONTIER_RULES:
            counts = [finding.data[rule] for _, finding in usages if rule in finding.data]
            if counts:
                parts.append(
                    f"{rule} thresholds exceed ρ at {sum(c[0] for c in counts)} of {sum(c[1] for c in counts)}"
                    f" router × budget points (largest usage − ρ {signed(max(c[2] for c in counts), 2)})"
                )
        lines.append(f"Realized held-out usage vs target ρ over {len(usages)} pairs: " + "; ".join(parts) + ".")
    notes: dict[str, list[str]] = {}
    for dataset, finding in of(NOTE):
        notes.setdefault(finding.text, []).append(dataset)
    lines += [(f"{', '.join(datasets)}: " if several else "") + text for text, datasets in notes.items()]
    flat = of(FLAT)
    if flat:
        named = ", ".join(f"{where(dataset)}`{finding.pair}`" for dataset, finding in flat)
        lines.append(
            f"No held-out label varies (nothing to route) in {len(flat)} pair{'s' * (len(flat) > 1)}: {named}."
        )
    nulls = of(NULL)
    if nulls:
        many = len(nulls) > 1
        lines.append(f"{len(nulls)} other comparison{'s' * many} find{'' if many else 's'} no difference (the CI "
                     "includes 0, p at or above the level): see the dataset pages.")
    return lines
