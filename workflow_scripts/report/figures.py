"""Report figures (matplotlib, Agg backend). Plain functions of tables and a path; the rules' jobs (report/jobs/)
read the inputs and call them.

In:  a routing pair's routed scores, frontiers, audit, policy costs and cost frontiers; Study C's quality, paired
     and cost tables.
Out: one PNG per call, written atomically: the pair's frontiers, calibration, outcomes, utility, cost breakdown and
     cost frontiers; Study C's per-metric bars, paired forest plot and cost per strategy.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import polars as pl

from workflow_scripts.core.atomic import atomic_file
from workflow_scripts.core.vocabulary import CONSERVATIVE, DEPLOYABLE, EXACT_FRONTIER, STUDY_C_METRICS

FRONTIER_STYLE = {EXACT_FRONTIER: ("black", "-"), DEPLOYABLE: ("tab:blue", "--"), CONSERVATIVE: ("tab:orange", ":")}
COMPONENTS = ("pre_decision", "base_answer", "trigger_retrieval", "trigger_generation")
COMPONENT_COLORS = ("tab:gray", "tab:blue", "tab:orange", "tab:red")


def save(figure: plt.Figure, path: str) -> None:
    """Write a PNG atomically (temporary file beside it, then rename) and close the figure."""
    figure.tight_layout()
    with atomic_file(path) as temporary:
        figure.savefig(temporary, dpi=110, format="png")
    plt.close(figure)


def grid(count: int, width: float = 4.2, height: float = 3.4, columns: int = 3) -> tuple[plt.Figure, list[plt.Axes]]:
    """`count` panels, at most `columns` per row (unused panels of the last row hidden)."""
    count = max(count, 1)
    rows, cols = -(-count // columns), min(count, columns)
    figure, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    panels = [axis for row in axes for axis in row]
    for axis in panels[count:]:
        axis.set_visible(False)
    return figure, panels[:count]


def frontier_figure(frontiers: pl.DataFrame, path: str) -> None:
    """Held-out accuracy against realized usage per router: exact, deployable, conservative; hollow markers are
    the target budgets, joined to the realized usage each threshold reached."""
    routers = frontiers["router"].unique(maintain_order=True).to_list()
    figure, axes = grid(len(routers))
    for axis, router in zip(axes, routers):
        for name, (color, style) in FRONTIER_STYLE.items():
            table = frontiers.filter((pl.col("router") == router) & (pl.col("frontier") == name)).sort("budget")
            axis.plot(table["usage"], table["accuracy"], style, color=color, marker="o", markersize=4, label=name)
            if name != EXACT_FRONTIER:
                axis.scatter(table["budget"], table["accuracy"], facecolors="none", edgecolors=color, s=22)
                for budget, usage, accuracy in table.select("budget", "usage", "accuracy").iter_rows():
                    axis.plot([budget, usage], [accuracy, accuracy], color=color, linewidth=0.6, alpha=0.6)
        axis.set(
            title=router,
            xlabel="usage (filled: realized, hollow: target)",
            ylabel="held-out accuracy",
            xlim=(-0.02, 1.02),
        )
        axis.legend(fontsize=7)
    save(figure, path)


def calibration_figure(frontiers: pl.DataFrame, audit: pl.DataFrame, path: str) -> None:
    """Target budget vs realized held-out usage (deployable, conservative), and the audit's violation shares."""
    figure, (left, right) = grid(2)
    left.plot([0, 1], [0, 1], color="lightgray", linewidth=1)
    markers = dict(zip(frontiers["router"].unique(maintain_order=True).to_list(), "os^vDP*X"))
    for (router, frontier), table in frontiers.filter(pl.col("frontier") != EXACT_FRONTIER).group_by(
        ["router", "frontier"], maintain_order=True
    ):
        color, style = FRONTIER_STYLE[frontier]
        table = table.sort("budget")
        left.plot(table["budget"], table["usage"], style, marker=markers.get(router, "o"), markersize=4, color=color,
                  label=f"{router} {frontier}")
    left.set(
        xlabel="target usage ρ", ylabel="realized held-out usage", title="target vs realized", xlim=(0, 1), ylim=(0, 1)
    )
    left.legend(fontsize=6)
    for rule, table in audit.group_by("rule", maintain_order=True):
        color, style = FRONTIER_STYLE[rule[0]]
        table = table.sort("budget")
        right.plot(
            table["budget"], table["violation_share"], style, marker="s", markersize=3, color=color, label=rule[0]
        )
    right.set(
        xlabel="target usage ρ",
        ylabel="share of router × split with usage > ρ",
        title="calibration audit",
        ylim=(-0.02, 1.02),
    )
    right.legend(fontsize=7)
    save(figure, path)


def outcome_counts(heldout: pl.DataFrame) -> pl.DataFrame:
    """Per router: held-out rescues and harms among the queries it triggered."""
    return heldout.group_by("router", maintain_order=True).agg(
        (pl.col("triggered") & (pl.col("delta") > 0)).sum().alias("rescues"),
        (pl.col("triggered") & (pl.col("delta") < 0)).sum().alias("harms"),
        pl.col("triggered").sum().alias("triggered"), pl.len().alias("questions"),
    )


def outcomes_figure(routed: pl.DataFrame, path: str) -> None:
    counts = outcome_counts(routed.filter(pl.col("split") == "heldout"))
    figure, (axis,) = grid(1, width=1.2 * counts.height + 2.5)
    positions = range(counts.height)
    axis.bar([p - 0.2 for p in positions], counts["rescues"], width=0.4, color="tab:green", label="rescues (Δ > 0)")
    axis.bar([p + 0.2 for p in positions], counts["harms"], width=0.4, color="tab:red", label="harms (Δ < 0)")
    axis.set_xticks(list(positions), counts["router"].to_list())
    axis.set(ylabel="held-out questions triggered", title="rescues and harms when the router fires")
    axis.legend(fontsize=7)
    save(figure, path)


def utility_figure(routed: pl.DataFrame, path: str) -> None:
    """Distribution of Δ = metric(on) − metric(off) per split (each question once)."""
    labels = routed.unique("qid").select("split", "delta")
    values = sorted(labels["delta"].unique().to_list())
    splits = [split for split in ("calibration", "heldout") if split in labels["split"].to_list()]
    figure, (axis,) = grid(1, width=5.5)
    width = 0.8 / max(len(splits), 1)
    for index, split in enumerate(splits):
        shares = [
            labels.filter((pl.col("split") == split) & (pl.col("delta") == value)).height
            / labels.filter(pl.col("split") == split).height
            for value in values
        ]
        axis.bar([i + index * width for i in range(len(values))], shares, width=width, label=split)
    axis.set_xticks(
        [i + width * (len(splits) - 1) / 2 for i in range(len(values))], [f"{value:+.2g}" for value in values]
    )
    axis.set(xlabel="Δ = metric(on) − metric(off)", ylabel="share of questions", title="utility distribution")
    axis.legend(fontsize=7)
    save(figure, path)


def cost_breakdown_figure(costs: pl.DataFrame, path: str) -> None:
    """Stacked bars per router: mean seconds and token-equivalents per held-out query by component."""
    routers = costs["router"].unique(maintain_order=True).to_list()
    figure, axes = plt.subplots(2, 1, figsize=(max(5.0, 0.8 * len(routers) + 2.5), 6.4), squeeze=True)
    for axis, column, unit in zip(axes, ("seconds", "token_equivalents"), ("seconds", "token-equivalents")):
        bottom = [0.0] * len(routers)
        for component, color in zip(COMPONENTS, COMPONENT_COLORS):
            values = [
                costs.filter((pl.col("router") == r) & (pl.col("component") == component))[column].sum()
                for r in routers
            ]
            axis.bar(routers, values, bottom=bottom, color=color, label=component)
            bottom = [b + v for b, v in zip(bottom, values)]
        usage = [costs.filter(pl.col("router") == r)["usage"][0] for r in routers]
        for index, (total, rate) in enumerate(zip(bottom, usage)):
            axis.annotate(f"usage {rate:.0%}", (index, total), ha="center", va="bottom", fontsize=7)
        axis.set(ylabel=f"mean {unit} per held-out query", title=f"cost by component ({unit})")
        axis.legend(fontsize=6)
    save(figure, path)


def cost_frontier_figure(points: pl.DataFrame, path: str) -> None:
    """Held-out accuracy against measured cost (seconds, token-equivalents) of the deployable (solid) and
    conservative (dotted) frontier points, one color per router."""
    routers = points["router"].unique(maintain_order=True).to_list()
    colors = dict(zip(routers, plt.get_cmap("tab10").colors * 3))
    figure, axes = grid(2, width=4.6)
    for axis, column in zip(axes, ("seconds", "token_equivalents")):
        for router in routers:
            for frontier, style in ((DEPLOYABLE, "-"), (CONSERVATIVE, ":")):
                table = points.filter((pl.col("router") == router) & (pl.col("frontier") == frontier)).sort("budget")
                axis.plot(table[column], table["accuracy"], style, color=colors[router], marker="o", markersize=3,
                          label=router if frontier == DEPLOYABLE else None)
        name = column.replace("_", "-")
        axis.set(xlabel=f"mean {name} per held-out query", ylabel="held-out accuracy", title=f"accuracy vs {name}")
    axes[-1].legend(
        fontsize=6,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        title="solid: deployable\ndotted: conservative",
        title_fontsize=6,
    )
    save(figure, path)


# --- Study C (study_c/comparisons.py's tables)


def study_c_metrics_figure(quality: pl.DataFrame, path: str) -> None:
    """Per strategy (all queries): conditional mean of each judge score as bars, unconditional as markers."""
    table = quality.filter(pl.col("query_type") == "all")
    strategies = table["strategy"].to_list()
    figure, (axis,) = grid(1, width=max(6.0, 1.3 * len(STUDY_C_METRICS) + 2))
    width = 0.8 / max(len(strategies), 1)
    for index, strategy in enumerate(strategies):
        row = table.filter(pl.col("strategy") == strategy).row(0, named=True)
        positions = [i + index * width for i in range(len(STUDY_C_METRICS))]
        axis.bar(positions, [row[f"{m}_cond"] or 0.0 for m in STUDY_C_METRICS], width=width, label=strategy)
        axis.scatter(positions, [row[f"{m}_uncond"] or 0.0 for m in STUDY_C_METRICS], color="black", s=8, zorder=3)
    axis.set_xticks([i + width * (len(strategies) - 1) / 2 for i in range(len(STUDY_C_METRICS))], list(STUDY_C_METRICS))
    axis.set(ylabel="judge score (1–5)", ylim=(0, 5.2), title="conditional (bars) and unconditional (dots) means")
    axis.legend(fontsize=6, ncol=2)
    save(figure, path)


def study_c_paired_figure(paired: pl.DataFrame, path: str) -> None:
    """Forest plot: paired overall delta vs the baseline with its CI, per strategy and query type."""
    rows = paired.filter(pl.col("delta").is_not_null())
    figure, (axis,) = grid(1, width=6.0, height=max(2.5, 0.32 * rows.height + 1.2))
    labels = [f"{strategy} · {kind}" for strategy, kind in rows.select("strategy", "query_type").iter_rows()]
    for position, row in enumerate(rows.iter_rows(named=True)):
        low = row["low"] if row["low"] is not None else row["delta"]
        high = row["high"] if row["high"] is not None else row["delta"]
        axis.plot([low, high], [position, position], color="tab:blue")
        axis.plot(row["delta"], position, "o", color="tab:blue" if row["query_type"] == "all" else "tab:gray")
    axis.axvline(0.0, color="black", linestyle="--", linewidth=0.8)
    axis.set_yticks(range(rows.height), labels)
    axis.invert_yaxis()
    axis.set(xlabel="Δ unconditional overall vs classic (95% CI)", title="paired differences")
    save(figure, path)


def study_c_cost_figure(cost_table: pl.DataFrame, path: str) -> None:
    """Stacked LLM and search seconds per query, and tokens in / out per query, per strategy (all queries)."""
    table = cost_table.filter(pl.col("query_type") == "all")
    strategies = table["strategy"].to_list()
    figure, (left, right) = grid(2, width=max(4.2, 0.9 * len(strategies) + 2))
    for axis, parts, unit in ((left, ("llm_seconds_per_query", "retrieval_seconds_per_query"), "seconds"),
                              (right, ("prompt_tokens_per_query", "completion_tokens_per_query"), "tokens")):
        bottom = [0.0] * len(strategies)
        for part in parts:
            values = [value or 0.0 for value in table[part].to_list()]
            axis.bar(strategies, values, bottom=bottom, label=part.removesuffix("_per_query").replace("_", " "))
            bottom = [b + v for b, v in zip(bottom, values)]
        axis.set(ylabel=f"mean {unit} per query", title=f"cost per strategy ({unit})")
        axis.tick_params(axis="x", labelrotation=30)
        axis.legend(fontsize=7)
    save(figure, path)
