"""Study B's routing rules on hand-made answers: labels from a closed-book and a retrieval answer table, the utility
distribution per split, the uncertainty features, and constant labels that leave the routers without signal."""

import polars as pl
import pytest

from workflow_scripts.core.contracts import GENERATIONS, QUESTIONS, SPLITS
from workflow_scripts.core.tables import frame, read_table, write_table
from workflow_scripts.routing.features import labelled_features, query_features, uncertainty_features
from workflow_scripts.routing.labels import answer_labels, utility_table
from workflow_scripts.routing.routers import fit_routers

PAIR = {"base": "closed_book", "alternative": "bm25", "measure": "em", "f1_threshold": 0.5,
        "features": ["query_only", "uncertainty"]}
ROUTERS = {"ridge": {"kind": "ridge"}, "bur_linear": {"kind": "bur_linear"}, "unc": {"kind": "entropy"},
           "low_conf": {"kind": "min_confidence"}, "never": {"kind": "never"}}


def answers(texts: list[str], model: str = "tiny-llm") -> pl.DataFrame:
    rows = [{"request_id": f"q{i}", "key": f"k{i}", "status": "ok", "source": "generated", "constrained": False, "text": text,
             "finish_reason": "stop", "mean_entropy": 0.1 * i, "min_token_prob": 1 / (i + 2),
             "sequence_logprob": -float(i), "latency_s": 0.01, "backend": "transformers", "model": model,
             "device": "cpu", "evidence_in": 0, "evidence_kept": 0, "evidence_truncated": False, "token_basis": "tokenizer"}
            for i, text in enumerate(texts)]
    return frame(rows, GENERATIONS)


def write_inputs(folder, without: list[str], with_retrieval: list[str]):
    n = len(without)
    split = ["dev"] * (n // 2) + ["calibration"] * (n // 4) + ["heldout"] * (n - n // 2 - n // 4)
    write_table(pl.DataFrame({"qid": [f"q{i}" for i in range(n)], "group_id": [f"g{i}" for i in range(n)],
                              "split": split}), folder / "splits.parquet", SPLITS)
    write_table(pl.DataFrame({
        "dataset": "d", "qid": [f"q{i}" for i in range(n)], "group_id": [f"g{i}" for i in range(n)],
        "text": [f"Who wrote book {i}?" for i in range(n)], "query_type": None,
        "answers": [["alpha"]] * n, "gold_unit_ids": [[]] * n, "unaligned_evidence": [[]] * n, "meta": None,
    }, schema_overrides={"answers": pl.List(pl.String), "gold_unit_ids": pl.List(pl.String),
                         "unaligned_evidence": pl.List(pl.String)}), folder / "questions.parquet", QUESTIONS)
    write_table(answers(without), folder / "closed_book.parquet", GENERATIONS)
    write_table(answers(with_retrieval), folder / "bm25.parquet", GENERATIONS)


def labels(folder):
    """What rule route_labels writes: the labels and the utility table."""
    table, model, unscorable = answer_labels(
        read_table(folder / "questions.parquet", QUESTIONS), read_table(folder / "closed_book.parquet", GENERATIONS),
        read_table(folder / "bm25.parquet", GENERATIONS), PAIR["measure"], PAIR["f1_threshold"])
    utility = utility_table(table, pl.read_parquet(folder / "splits.parquet"), "d", "closed_vs_bm25",
                            PAIR["measure"], model, unscorable)
    return table, utility


def features(folder, labelled: pl.DataFrame) -> pl.DataFrame:
    """What rule route_features writes for the pair's families (query_only, uncertainty)."""
    tables = [query_features(read_table(folder / "questions.parquet", QUESTIONS)),
              uncertainty_features(read_table(folder / "closed_book.parquet", GENERATIONS))]
    return labelled_features(tables, labelled["qid"])


def test_labels_and_utility_distribution_per_split(tmp_path):
    write_inputs(tmp_path, ["alpha", "beta", "alpha", "beta"] * 2, ["alpha", "alpha", "beta", "beta"] * 2)
    labelled, utility = labels(tmp_path)
    assert labelled["delta"].to_list() == [0.0, 1.0, -1.0, 0.0] * 2
    assert labelled["outcome"].to_list() == ["neutral", "benefit", "harm", "neutral"] * 2
    assert utility["split"].to_list() == ["all", "calibration", "dev", "heldout"]
    overall = utility.row(0, named=True)
    assert (overall["dataset"], overall["pair"], overall["model"], overall["measure"]) == ("d", "closed_vs_bm25",
                                                                                          "tiny-llm", "em")
    assert (overall["n"], overall["gains"], overall["harms"], overall["ties"]) == (8, 2, 2, 4)
    assert overall["harm_rate"] == 0.25 and overall["mean_off"] == 0.5 and not overall["signal_absent"]
    dev = utility.filter(pl.col("split") == "dev").row(0, named=True)
    assert (dev["n"], dev["gains"], dev["harms"]) == (4, 1, 1)
    table = features(tmp_path, labelled)
    assert table["unc_entropy"].to_list()[:3] == [0.0, 0.1, 0.2]
    assert table["unc_seq_logprob"].to_list()[:3] == [0.0, -1.0, -2.0]
    assert "q_tokens" in table.columns and table.height == 8


def test_constant_labels_still_fit_every_router_and_report_signal_absent(tmp_path):
    write_inputs(tmp_path, ["alpha"] * 8, ["alpha"] * 8)
    labelled, utility = labels(tmp_path)
    assert utility["signal_absent"].to_list() == [True] * 4
    splits = pl.read_parquet(tmp_path / "splits.parquet")
    oof, thresholds, _ = fit_routers(labelled, features(tmp_path, labelled), splits, ROUTERS,
                                     {"n_splits": 2, "seed": 3, "cost_per_trigger": 0.02}, "closed_vs_bm25")
    assert set(thresholds["router"]) == set(ROUTERS)
    learned = thresholds.filter(pl.col("router").is_in(["ridge", "bur_linear"]))
    assert learned["signal_absent"].all() and (learned["dev_trigger_rate"] == 0).all()
    assert oof.filter(pl.col("router") == "unc")["score"].to_list() == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert oof.filter(pl.col("router") == "low_conf")["score"].to_list() == pytest.approx([-1 / 2, -1 / 3, -1 / 4, -1 / 5])
