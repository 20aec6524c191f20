"""Imported TREC runs (retrieval/runs.py): a ranking made elsewhere read as a first stage, in the order every arm
breaks ties in, fused with the project's own stages by RRF, and each bad file refused with the file, line and id."""

import copy

import polars as pl
import pytest
import yaml

from workflow_scripts.config.validate import validate_config
from workflow_scripts.core.contracts import RANKING
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.tables import conform
from workflow_scripts.retrieval.arms import candidates, final_run, write_trec
from workflow_scripts.retrieval.runs import import_run, run_path

QUESTIONS = pl.DataFrame({"qid": ["q1", "q2", "q3"]})
UNITS = pl.DataFrame({"unit_id": ["u1", "u2", "u3", "u4"]})


def write(tmp_path, text, name="system.trec"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_run_is_read_in_score_order_ties_by_unit_id_whatever_its_rank_column_says(tmp_path):
    path = write(tmp_path, "q1 Q0 u3 1 0.5 sys\nq1 Q0 u1 2 0.9 sys\nq1 Q0 u2 3 0.5 sys\n\nq2 Q0 u4 1 1.0 sys\n")
    ranking = conform(import_run(path, QUESTIONS, UNITS), RANKING)
    assert ranking.filter(pl.col("qid") == "q1")["unit_id"].to_list() == ["u1", "u2", "u3"]  # trec_eval's rule
    assert ranking["rank"].to_list() == [1, 2, 3, 1] and ranking["qid"].n_unique() == 2  # q3: no line, no rows


def test_an_arm_reading_its_own_trec_file_back_is_the_same_arm(tmp_path):
    """write_trec then import_run: the order the run was evaluated in survives the round trip."""
    ranking = pl.DataFrame({"qid": ["q1"] * 3 + ["q2"] * 2, "unit_id": ["u2", "u1", "u4", "u3", "u1"],
                            "rank": [1, 2, 3, 1, 2], "score": [0.7, 0.7, 0.1, 2.0, 1.0]})
    arm = {"first_stage": "dense", "candidates": 3, "keep": 3, "scope": "group"}
    run = final_run(arm, candidates(arm, {"dense": ranking}), None)
    write_trec(run, tmp_path / "dense.trec", tag="dense")
    back = import_run(tmp_path / "dense.trec", QUESTIONS, UNITS)
    assert back.select("qid", "unit_id", "rank").equals(run.select("qid", "unit_id", "rank"))


def test_a_hybrid_arm_fuses_an_imported_run_like_its_own_stage():
    bm25 = pl.DataFrame({"qid": ["q1"] * 3, "unit_id": ["u1", "u2", "u3"], "rank": [1, 2, 3], "score": [3.0, 2, 1]})
    dense = pl.DataFrame({"qid": ["q1"] * 3, "unit_id": ["u3", "u4", "u1"], "rank": [1, 2, 3], "score": [0.9, .8, .7]})
    arm = {"first_stage": "hybrid", "candidates": 4, "keep": 4, "scope": "group", "rrf_k": 60, "fusion_depth": 3}
    own = final_run(arm, candidates(arm, {"bm25": bm25, "dense": dense}), None)
    fused = final_run(arm | {"fuse": ["bm25", "run"], "run": "elsewhere"},
                      candidates(arm | {"fuse": ["bm25", "run"]}, {"bm25": bm25, "run": dense}), None)
    assert fused.select("unit_id", "rank", "fused_score").equals(own.select("unit_id", "rank", "fused_score"))
    assert fused["run_rank"].to_list() == own["dense_rank"].to_list() and fused["dense_rank"].is_null().all()


@pytest.mark.parametrize("text, message", [
    ("q1 Q0 u1 1 1.0 s\nq1 Q0 u9 2 0.5 s\n", r"system.trec, line 2: unit 'u9' is not in the dataset \(1 lines"),
    ("q7 Q0 u1 1 1.0 s\n", r"line 1: question 'q7' is not in the dataset"),
    ("q1 Q0 u1 1 1.0 s\nq1 Q0 u2 2 0.5 s\nq1 Q0 u2 3 0.2 s\nq1 Q0 u1 4 0.1 s\n",
     r"line 3: question 'q1' lists unit 'u2' twice"),
    ("q1 Q0 u1 1 nan s\n", r"line 1: score nan of question 'q1' is not a finite number"),
    ("q1 Q0 u1 1 1.0 s\nq1 u2 0.5\n", r"line 2: not a TREC run line"),
    ("\n", r"the file holds no line"),
])
def test_a_bad_run_file_names_the_file_the_line_and_the_id(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        import_run(write(tmp_path, text), QUESTIONS, UNITS)
    with pytest.raises(InputError, match=r"no such file \(config retrieval.runs"):
        import_run(tmp_path / "missing.trec", QUESTIONS, UNITS)
    assert run_path("runs/{dataset}.trec", "scifact").as_posix() == "runs/scifact.trec"


@pytest.fixture()
def config(project_root, monkeypatch):
    monkeypatch.chdir(project_root)
    config = yaml.safe_load((project_root / "config.yaml").read_text())
    config["retrieval"]["runs"] = {"mine": {"path": "runs/{dataset}.trec"}}
    return config


@pytest.mark.parametrize("arm, message", [
    ({"first_stage": "run"}, r"arms.x: first_stage run \(or run in fuse\) and a `run:` entry go together"),
    ({"first_stage": "run", "run": "theirs"},
     r"arms.x.run = 'theirs' names no retrieval.runs entry; defined: \['mine'\]"),
    ({"first_stage": "bm25", "run": "mine"}, r"arms.x.run is set but the arm reads no run"),
    ({"first_stage": "dense", "fuse": ["bm25", "run"], "run": "mine"},
     r"arms.x.fuse is set but first_stage is 'dense'"),
    ({"first_stage": "hybrid", "fuse": ["run"], "run": "mine"}, r"arms.x.fuse"),
])
def test_an_arm_names_the_run_it_reads_exactly_when_it_reads_one(config, arm, message):
    config["arms"]["x"] = {"candidates": 5, "keep": 5, "scope": "group", **arm}
    with pytest.raises(InputError, match=message):
        validate_config(copy.deepcopy(config))
    config["arms"]["x"] = {"first_stage": "hybrid", "fuse": ["bm25", "run"], "run": "mine", "candidates": 5,
                           "keep": 5, "scope": "group"}
    validate_config(copy.deepcopy(config))
    config["retrieval"]["runs"]["mine"]["path"] = "runs/one.trec"
    config["datasets"]["other"] = copy.deepcopy(config["datasets"]["demo"])
    with pytest.raises(InputError, match=r"retrieval.runs.mine.path has no \{dataset\} but arms.x runs on 2 datasets"):
        validate_config(copy.deepcopy(config))


def test_fusing_three_rankings_breaks_ties_by_unit_id_whatever_list_holds_which_rank():
    """1/(60+1) + 1/(60+2) + 1/(60+3) summed in list order differs in the last bit with the order; the fused
    score sums smallest first, so two units ranked (1, 2, 3) and (3, 1, 2) tie and fall back to unit_id."""
    from workflow_scripts.retrieval.fusion import rrf

    lists = [pl.DataFrame({"qid": ["q"] * 2, "unit_id": ["b", "a"], "rank": [r_b, r_a]})
             for r_b, r_a in ((1, 3), (2, 1), (3, 2))]
    fused = rrf(lists, 60)
    assert fused["fused_score"][0] == fused["fused_score"][1] and fused["unit_id"].to_list() == ["a", "b"]
