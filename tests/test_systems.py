"""Imported systems (ingest/systems.py, ingest/adapters/systems.py, rules/systems.smk): a RAG system's output file
in ragas's, DeepEval's or a mapped convention becomes a policy's answers and an arm's run; each bad file is refused
with the file, the line or id and the key; a workflow run routes between two systems and prices them from their
files."""

import copy
import json

import polars as pl
import pytest
import yaml

from workflow_scripts.config.validate import validate_config
from workflow_scripts.core.contracts import COST_LEDGER, GENERATIONS, QUESTIONS, RUNS, UNITS
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.tables import conform
from workflow_scripts.cost.ledger import Measured, ledger
from workflow_scripts.ingest.adapters.systems import load
from workflow_scripts.ingest import systems as imported

QUESTIONS_TEXT = {"q1": "Who wrote the handbook?", "q2": "When does the library open?", "q3": "Where is the atrium?"}


def ragas_file(tmp_path, rows=None, name="ragas.jsonl"):
    rows = rows if rows is not None else [
        {"user_input": text, "response": f"answer {qid}", "retrieved_contexts": [f"context of {qid}", "shared"],
         "reference": f"ref {qid}", "latency_s": 1.5, "prompt_tokens": 100, "completion_tokens": 7}
        for qid, text in QUESTIONS_TEXT.items()]
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def deepeval_file(tmp_path, name="deepeval.csv"):
    path = tmp_path / name
    pl.DataFrame({
        "input": list(QUESTIONS_TEXT.values()),
        "actual_output": [f"other {qid}" for qid in QUESTIONS_TEXT],
        "retrieval_context": [str([f"context of {qid}", "elsewhere"]) for qid in QUESTIONS_TEXT],  # Python literals
        "expected_output": [f"ref {qid}" for qid in QUESTIONS_TEXT],
    }).write_csv(path)
    return path


def spec(path, **more):
    return {"path": str(path), "columns": {}, "contexts": "texts", "currency": "USD", **more}


def test_ragas_and_deepeval_files_read_alike_and_pair_by_question_text(tmp_path):
    ragas = imported.read_system("a", spec(ragas_file(tmp_path)))
    deepeval = imported.read_system("b", spec(deepeval_file(tmp_path)))
    assert ragas["qid"].to_list() == deepeval["qid"].to_list() == [imported.question_id(t) for t in
                                                                  QUESTIONS_TEXT.values()]
    assert deepeval["contexts"][0].to_list() == ["context of q1", "elsewhere"]
    assert ragas["references"][1].to_list() == ["ref q2"] and ragas["latency_s"].to_list() == [1.5] * 3
    assert deepeval["latency_s"].null_count() == 3 and deepeval["line"].to_list() == [2, 3, 4]  # after the header
    imported.check_paired({"a": ragas, "b": deepeval}, {"a": "ragas.jsonl", "b": "deepeval.csv"})


def test_a_mapping_names_a_files_own_columns_and_its_ids(tmp_path):
    path = tmp_path / "own.parquet"
    pl.DataFrame({"qid": ["q1"], "q": ["Who?"], "out": ["Ann"], "docs": [["u1", "u2"]], "gold": [["Ann", "A."]],
                  "usd": [0.002]}).write_parquet(path)
    table = imported.read_system("own", spec(path, contexts="ids", columns={
        "id": "qid", "question": "q", "answer": "out", "contexts": "docs", "reference": "gold", "money": "usd"}))
    assert table["line"].to_list() == [1]  # a Parquet file's rows are counted from 1
    assert table["qid"][0] == "q1" and table["references"][0].to_list() == ["Ann", "A."] and table["money"][0] == 0.002
    ranked = imported.unit_ids(table, "ids")
    assert ranked["unit_id"].to_list() == ["u1", "u2"]
    imported.check_context_ids("own", str(path), ranked, pl.Series(["u1", "u2"]), "corpus")
    with pytest.raises(InputError, match=r"own.parquet: question 'q1' lists context id 'u2', which the corpus"):
        imported.check_context_ids("own", str(path), ranked, pl.Series(["u1"]), "corpus")


def test_answers_and_run_conform_to_the_policy_and_arm_contracts(tmp_path):
    table = imported.read_system("a", spec(ragas_file(tmp_path)))
    answers = conform(imported.answers("a", "ragas.jsonl", table), GENERATIONS)
    assert set(answers["source"]) == set(answers["backend"]) == {"imported"}
    assert answers["text"].to_list() == [f"answer {qid}" for qid in sorted(QUESTIONS_TEXT, key=lambda q: imported.
                                                                           question_id(QUESTIONS_TEXT[q]))]
    run = conform(imported.run(imported.unit_ids(table, "texts")), RUNS)
    first = run.filter(pl.col("qid") == table["qid"][0])
    assert first["unit_id"].to_list() == [imported.context_unit_id("context of q1"), imported.context_unit_id("shared")]
    assert first["score"].to_list() == [1.0, 0.5]  # no scores in the file: 1/rank, the order the system gave


def test_a_systems_dataset_holds_every_question_its_reference_and_each_context_once(tmp_path):
    bundle = load({"systems": {"a": spec(ragas_file(tmp_path)), "b": spec(deepeval_file(tmp_path))}}, "mine")
    conform(bundle.units, UNITS)
    conform(bundle.questions, QUESTIONS)
    assert sorted(bundle.questions["answers"].to_list()) == [["ref q1"], ["ref q2"], ["ref q3"]]
    assert bundle.units.height == 3 + 1 + 1  # three own contexts, "shared" and "elsewhere" once each
    assert bundle.counts == {"systems": 2, "questions": 3, "contexts": 12, "units": 5}


@pytest.mark.parametrize("rows, message", [
    ([{"user_input": "Who?", "retrieved_contexts": ["x"]}], r"ragas.jsonl: no column for \['answer'\] \(looked for \['response'\]"),
    ([{"user_input": "Who?", "response": "A", "retrieved_contexts": ["x"]}] * 2,
     r"ragas.jsonl: question id 'q-[0-9a-f]+' appears on lines \[1, 2\] \(column 'user_input'\)"),
    ([{"user_input": "Who?", "response": "", "retrieved_contexts": ["x"]}], r"line 1: column 'response' \(answer\)"),
    ([{"user_input": "Who?", "response": "A", "retrieved_contexts": "x"}], r"line 1: column 'retrieved_contexts'"),
    ([{"user_input": "Who?", "response": "A", "retrieved_contexts": ["x"], "latency_s": "slow"}],
     r"line 1: column 'latency_s' \(latency_s\): 'slow' is not a number"),
])
def test_a_bad_file_names_the_file_the_line_and_the_column(tmp_path, rows, message):
    with pytest.raises(InputError, match=message):
        imported.read_system("a", spec(ragas_file(tmp_path, rows)))


def test_a_question_only_one_compared_system_answers_is_refused(tmp_path):
    a = imported.read_system("a", spec(ragas_file(tmp_path)))
    rows = [{"user_input": text, "response": "x", "retrieved_contexts": []} for text in QUESTIONS_TEXT.values()]
    b = imported.read_system("b", spec(ragas_file(tmp_path, rows[:2], "b.jsonl")))
    with pytest.raises(InputError, match=r"a.jsonl: line 3 answers question 'q-\w+', which systems.b \(b.jsonl\)"):
        imported.check_paired({"a": a, "b": b}, {"a": "a.jsonl", "b": "b.jsonl"})
    with pytest.raises(InputError, match=r"answers question 'q-\w+', which datasets.corpus does not hold"):
        imported.check_questions("a", "a.jsonl", a, b["qid"], "corpus")


def test_two_files_that_disagree_on_a_questions_reference_are_refused(tmp_path):
    rows = [{"user_input": "Who?", "response": "A", "retrieved_contexts": ["x"], "reference": "Ann"}]
    other = [{"user_input": "Who?", "response": "B", "retrieved_contexts": ["y"], "reference": "Bob"}]
    systems = {"a": spec(ragas_file(tmp_path, rows, "a.jsonl")), "b": spec(ragas_file(tmp_path, other, "b.jsonl"))}
    with pytest.raises(InputError, match=r"b.jsonl: line 1 gives question 'q-\w+' another references than"):
        load({"systems": systems}, "mine")


def test_the_ledger_records_a_systems_own_latency_tokens_and_money():
    costs = pl.DataFrame({"qid": ["q1", "q2"], "latency_s": [1.0, None], "prompt_tokens": [10, 20],
                          "completion_tokens": [1, 2], "money": [0.5, 0.25], "currency": ["EUR", "EUR"]},
                         schema_overrides={"prompt_tokens": pl.Int32, "completion_tokens": pl.Int32})
    source = {"kind": "imported", "stage": "import_system", "component": "a"}
    table = conform(ledger([Measured(source, [costs], 0.3)], pl.DataFrame({"qid": ["q1", "q2"]}), "d"), COST_LEDGER)
    assert table["seconds"].to_list() == [1.0, None] and table["money"].to_list() == [0.5, 0.25]
    assert set(table["basis"]) == {"imported"} and table["currency"].to_list() == ["EUR", "EUR"]


def base_config(tmp_path):
    config = yaml.safe_load(open("config.yaml"))
    config["datasets"] = {"mine": {"format": "systems"}}
    config["systems"] = {"a": {"dataset": "mine", "path": str(ragas_file(tmp_path))},
                         "b": {"dataset": "mine", "path": str(deepeval_file(tmp_path))}}
    config["arms"], config["routing"]["pairs"] = {}, {}
    config["generation"]["policies"] = ["a", "b"]
    return config


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["systems"]["a"].update(dataset="nowhere"), r"systems.a.dataset = 'nowhere' names no datasets entry"),
    (lambda c: c["systems"]["a"].update(contexts="ids"), r"systems.a.contexts = 'ids' but datasets.mine has format"),
    (lambda c: c["systems"]["a"].update(path="missing.jsonl"), r"systems.a.path: file 'missing.jsonl' does not exist"),
    (lambda c: c["systems"].clear(), r"datasets.mine: format systems is made of the systems that name it"),
    (lambda c: c["routing"]["pairs"].update(p={"base": "a", "alternative": "b", "measure": "contains",
                                                "features": ["uncertainty"]}),
     r"routing.pairs.p.features: \['uncertainty'\] need the project's own retrieval"),
    (lambda c: c["routing"]["pairs"].update(p={"base": "a", "alternative": "b", "measure": "Success@5",
                                                "features": ["query_only"]}),
     r"routing.pairs.p.measure = 'Success@5' is not an answer scorer"),
])
def test_config_errors_name_the_key(tmp_path, edit, message):
    config = base_config(tmp_path)
    validate_config(copy.deepcopy(config))
    edit(config)
    with pytest.raises(InputError, match=message):
        validate_config(config)


@pytest.mark.slow
@pytest.mark.integration
def test_two_systems_are_imported_routed_and_priced_without_an_llm(tmp_path):
    """A workflow run on two small systems' files, nothing judged: each system's answers and run, the pair's labels
    from their answers, routers and frontiers, and the ledger's rows from the files' own costs; a second run has
    nothing to do."""
    from workflow_helpers import make_workdir, planned_jobs, snakemake

    texts = [f"Question number {i} about the handbook?" for i in range(24)]
    rows = [{"user_input": text, "response": "yes" if i % 3 else "no", "retrieved_contexts": [f"c{i}", "common"],
             "reference": "yes", "latency_s": 0.5 + i / 100, "prompt_tokens": 50, "completion_tokens": 2}
            for i, text in enumerate(texts)]
    other = [{"input": text, "actual_output": "yes" if i % 2 else "no", "retrieval_context": json.dumps([f"d{i}"]),
              "expected_output": "yes"} for i, text in enumerate(texts)]
    config = base_config(tmp_path)
    config["systems"]["a"]["path"] = str(ragas_file(tmp_path, rows, "a.jsonl"))
    (tmp_path / "b.csv").write_text(pl.DataFrame(other).write_csv())
    config["systems"]["b"]["path"] = str(tmp_path / "b.csv")
    config["generation"]["policies"] = []
    config["routing"]["pairs"] = {"a_vs_b": {"base": "a", "alternative": "b", "measure": "contains",
                                             "features": ["query_only"]}}
    config["routing"]["routers"] = {"ridge": {"kind": "ridge", "alpha": 20}, "never": {"kind": "never"},
                                    "always": {"kind": "always"}}
    config["routing"]["n_splits"] = 2
    work = make_workdir(tmp_path)
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    snakemake(work)
    results = work / "results" / "mine"
    answers = pl.read_parquet(results / "systems" / "a" / "answers.parquet")
    assert answers.height == 24 and set(answers["source"]) == {"imported"}
    labels = pl.read_parquet(results / "routing" / "a_vs_b" / "labels.parquet")
    assert labels.height == 24 and labels["delta"].abs().sum() > 0  # the systems disagree on some questions
    assert (results / "routing" / "a_vs_b" / "frontiers.parquet").is_file()
    costs = pl.read_parquet(results / "cost" / "ledger.parquet").filter(pl.col("stage") == "import_system")
    assert costs.filter(pl.col("component") == "a")["seconds"].sum() == pytest.approx(sum(r["latency_s"] for r in rows))
    assert costs.filter(pl.col("component") == "b")["seconds"].null_count() == 24  # b reports no latency
    assert planned_jobs(work) == {}


def test_context_scores_are_kept_where_given_and_1_over_rank_where_not(tmp_path):
    """A file whose rows give scores for some questions keeps them; the rest rank by 1/rank (no row loses its own)."""
    rows = [{"user_input": "Who?", "response": "A", "retrieved_contexts": ["x", "y"], "context_scores": [7.0, 3.0]},
            {"user_input": "When?", "response": "B", "retrieved_contexts": ["z", "w"]}]
    table = imported.read_system("a", spec(ragas_file(tmp_path, rows)))
    run = conform(imported.run(imported.unit_ids(table, "texts")), RUNS)
    scores = {imported.question_id(q): run.filter(pl.col("qid") == imported.question_id(q))["score"].to_list()
              for q in ("Who?", "When?")}
    assert scores == {imported.question_id("Who?"): [7.0, 3.0], imported.question_id("When?"): [1.0, 0.5]}
