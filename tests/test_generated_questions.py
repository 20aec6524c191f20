"""Generated questions (Study A on a corpus without questions): the seeded per-paper unit sample, the reply parser and
its counted failures, ingest turning them into questions and qrels, the config keys, and the real stage on two
unarXive papers through the Snakefile (SmolLM2 writes the questions, ingest and splits follow)."""

import copy
import gzip
import io
import json
import tarfile
from collections import Counter

import polars as pl
import pytest
import yaml
from test_synthetic import _generation
from workflow_helpers import make_workdir, planned_jobs, snakemake

from workflow_scripts.config.validate import validate_config
from workflow_scripts.core.contracts import GENERATED_QUESTIONS, GENERATIONS, QRELS, QUESTIONS
from workflow_scripts.core.tables import frame, read_table
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest import questions
from workflow_scripts.ingest.stage import ingest_dataset
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.llm.templates import QUESTION_EXAMPLE

SETTINGS = {"per_paper": 2, "kinds": ["paragraph", "caption"], "min_words": 3, "seed": 13}
LONG = "one two three four"


def _units(papers):
    """Units of papers p0, p1, … in reading order: per paper a heading, five paragraphs, a short paragraph, a caption."""
    for paper in papers:
        kinds = ["heading"] + ["paragraph"] * 5 + ["paragraph", "caption"]
        for position, kind in enumerate(kinds):
            text = "two words" if position == 6 else f"{LONG} {paper} {position}"
            meta = json.dumps({"ref_type": "table"}) if kind == "caption" else None
            yield {"group_id": paper, "unit_id": f"{paper}#{position}", "kind": kind, "position": position,
                   "title": f"Title {paper}", "section": "Intro", "text": text, "meta": meta}


def test_the_sample_is_per_paper_seeded_in_reading_order_and_respects_kinds_and_length():
    papers = [f"p{index}" for index in range(6)]
    sample = {paper: [unit["unit_id"] for unit in units] for paper, units, _ in questions.sample_units(_units(papers), SETTINGS)}
    reordered = {paper: [unit["unit_id"] for unit in units]
                 for paper, units, _ in questions.sample_units(_units(papers[::-1]), SETTINGS)}
    assert sample == reordered, "a paper's sample depends on the seed and the paper only"
    for paper, ids in sample.items():
        positions = [int(unit_id.split("#")[1]) for unit_id in ids]
        assert len(ids) == 2 and positions == sorted(positions) and not {0, 6} & set(positions)
    other = {paper: [unit["unit_id"] for unit in units]
             for paper, units, _ in questions.sample_units(_units(papers), {**SETTINGS, "seed": 14})}
    assert other != sample
    every = {**SETTINGS, "per_paper": 10}
    (_, units, candidates), = questions.sample_units(_units(["p0"]), every)
    assert candidates == 6 and [unit["unit_id"] for unit in units] == [f"p0#{i}" for i in (1, 2, 3, 4, 5, 7)]
    assert [questions.kind_label(unit) for unit in units][-2:] == ["paragraph", "table caption"]
    (_, none, zero), = questions.sample_units(_units(["p0"]), {**every, "kinds": ["abstract"]})
    assert none == [] and zero == 0


@pytest.mark.parametrize("reply, cause", [
    ('{"question": "Which solver is used?", "answer": "CG"}', None),
    ("the question is which solver", "no_json"),
    ('{"question": "Which solver is used?"}', "missing_field"),
    ('{"question": " ", "answer": "CG"}', "missing_field"),
    ('{"question": "we solve the system with conjugate gradients on the GPU", "answer": "CG"}', "copies_text"),
    (json.dumps(QUESTION_EXAMPLE), "copies_example"),
])
def test_parse_question(reply, cause):
    examples = load_templates()["generated_question"].example_texts
    fields, failure = questions.parse_question(reply, "Here we solve the system with conjugate gradients on the GPU.",
                                               examples)
    assert failure == cause
    if cause is None:
        assert fields == {"question": "Which solver is used?", "answer": "CG"}


def test_the_worked_examples_are_read_from_the_templates_assistant_turns(project_root):
    assert load_templates()["generated_question"].example_texts == {
        " ".join(QUESTION_EXAMPLE["question"].split()).lower(), QUESTION_EXAMPLE["answer"].lower()}
    study_c = yaml.safe_load((project_root / "experiments" / "study_c.yaml").read_text())["prompts"]
    examples = load_templates(study_c)["synthetic_queries"].example_texts
    assert "how can linear systems in graph laplacians be solved in nearly linear time?" in examples
    assert load_templates()["synthetic_queries"].example_texts == frozenset()  # the default has no example turn
    assert load_templates()["tool_answer"].example_texts == frozenset()  # its assistant turn is a placeholder


def test_kept_questions_name_their_source_unit_and_the_rest_are_counted_by_cause():
    units = [unit for unit in _units(["p0"]) if unit["kind"] != "heading"][:6]
    replies = frame([
        _generation("a", '{"question": "Q one?", "answer": "A"}'),
        _generation("b", None, status="error"),
        _generation("c", '{"question": "Q one?"', finish_reason="length"),
        _generation("d", '{"question": "q ONE?", "answer": "B"}'),  # the same question again for p0
        _generation("e", 'Sure: {"question": "Q two?", "answer": "C"}', constrained=False),
        _generation("f", "nothing"),
    ], GENERATIONS)
    rows, failures, obtained = questions.keep_questions(units, replies)
    table = frame(rows, GENERATED_QUESTIONS)
    assert table.select("qid", "source_unit_id", "text", "answer").rows() == [
        ("p0#1:q", "p0#1", "Q one?", "A"), ("p0#5:q", "p0#5", "Q two?", "C")]
    assert failures == Counter({"request_error": 1, "length": 1, "duplicate_question": 1, "no_json": 1})
    assert obtained == Counter({"constrained": 1, "repaired": 1})


@pytest.fixture(scope="module")
def two_papers(tmp_path_factory, shared_data):
    """The first two papers of the unarXive sample as a plain JSON Lines file."""
    records = []
    with tarfile.open(shared_data / "unarxive-sample" / "unarXive_data_sample.tar.gz") as archive:
        member = next(member for member in archive.getmembers() if member.name.endswith(".jsonl"))
        for line in io.TextIOWrapper(archive.extractfile(member), encoding="utf-8"):
            records.append(line)
            if len(records) == 2:
                break
    path = tmp_path_factory.mktemp("unarxive") / "two_papers.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(records)
    return path


def _generated(rows):
    return frame([{"source_kind": "paragraph", "answer": "an answer", **row} for row in rows], GENERATED_QUESTIONS)


def test_ingest_makes_the_generated_questions_the_datasets_questions_and_qrels(two_papers, tmp_path):
    spec = {"format": "unarxive", "path": str(two_papers), "generate_questions": SETTINGS}
    outputs = {key: str(tmp_path / f"{key}.parquet") for key in ("units", "questions", "qrels")}
    outputs["report"] = str(tmp_path / "report.json")
    empty = tmp_path / "empty.parquet"
    _generated([]).write_parquet(empty)
    with pytest.raises(InputError, match=r"datasets.u.generate_questions: the generator kept no question"):
        ingest_dataset("u", spec, outputs, str(empty))
    # ingest once without questions to learn two real unit ids
    ingest_dataset("u", {key: value for key, value in spec.items() if key != "generate_questions"}, outputs)
    units = pl.read_parquet(outputs["units"]).filter(pl.col("kind") == "paragraph")
    first, second = units.row(0, named=True), units.row(-1, named=True)
    generated = tmp_path / "generated.parquet"
    _generated([{"qid": f"{unit['unit_id']}:q", "group_id": unit["group_id"], "source_unit_id": unit["unit_id"],
                 "text": f"Question about {unit['unit_id']}?"} for unit in (first, second)]).write_parquet(generated)
    report = ingest_dataset("u", spec, outputs, str(generated))
    table = read_table(outputs["questions"], QUESTIONS)
    assert table.select("qid", "group_id", "query_type", "answers", "gold_unit_ids").rows() == [
        (f"{unit['unit_id']}:q", unit["group_id"], "paragraph", ["an answer"], [unit["unit_id"]]) for unit in (first, second)]
    assert read_table(outputs["qrels"], QRELS).rows() == [(f"{u['unit_id']}:q", u["unit_id"], 1) for u in (first, second)]
    assert report["counts"]["questions_generated"] == 2 and report["counts"]["qrels_unknown_units"] == 0
    _generated([{"qid": "x:q", "group_id": "x", "source_unit_id": "no#1", "text": "Q?"}]).write_parquet(generated)
    with pytest.raises(InputError, match=r"1 generated questions name a unit ingest did not write: .* stale"):
        ingest_dataset("u", spec, outputs, str(generated))


@pytest.fixture()
def study_a_unarxive(project_root, stand_in_checkout):
    return stand_in_checkout(yaml.safe_load((project_root / "experiments" / "study_a_unarxive.yaml").read_text()))


def test_the_settings_get_their_defaults_and_bad_ones_name_the_key(study_a_unarxive):
    config = copy.deepcopy(study_a_unarxive)
    config["datasets"]["unarxive"]["generate_questions"] = {"per_paper": 3}
    settings = validate_config(config)["datasets"]["unarxive"]["generate_questions"]
    assert settings == {"per_paper": 3, "kinds": ["paragraph", "caption"], "min_words": 30, "seed": 13}
    for bad, message in (({"per_paper": 0}, r"per_paper = 0 is not allowed"),
                         ({"per_paper": 2, "kinds": ["heading"]}, r"kinds.0 = 'heading'"),
                         ({"per_paper": 2, "seed": "x"}, r"seed")):
        config = copy.deepcopy(study_a_unarxive)
        config["datasets"]["unarxive"]["generate_questions"] = bad
        with pytest.raises(InputError, match=rf"datasets.unarxive.generate_questions.{message}"):
            validate_config(config)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_data
def test_smollm2_writes_questions_that_ingest_and_splits_use(tmp_path, project_root, two_papers):
    """The real stage through the Snakefile: one unit per paper, SmolLM2 under the reply schema."""
    config = yaml.safe_load((project_root / "experiments" / "study_a_unarxive.yaml").read_text())
    config["datasets"] = {"unarxive": {"format": "unarxive", "path": str(two_papers),
                                       "generate_questions": {"per_paper": 1, "min_words": 25}}}
    config["models"]["generator"] = {"backend": "transformers", "model": config["models"]["generator"]["model"],
                                     "max_prompt_tokens": 1024}  # two prompts: below vLLM's break-even
    work = make_workdir(tmp_path)
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    planned = planned_jobs(work)
    assert planned["generate_questions"] == 1 and planned["ingest"] == 1
    snakemake(work, "results/unarxive/splits.parquet")
    results = work / "results" / "unarxive"
    report = json.loads((results / "generated_questions_report.json").read_text())
    assert report["papers"] == 2 and report["units_sampled"] == 2 <= report["candidate_units"]
    assert report["questions"] + sum(report["failures"].values()) == 2
    generated = read_table(results / "generated_questions.parquet", GENERATED_QUESTIONS)
    table = read_table(results / "questions.parquet", QUESTIONS)
    assert table["qid"].to_list() == generated["qid"].to_list() and table.height == report["questions"]
    assert report["replies_used"] == ({"constrained": report["questions"]} if report["questions"] else {})
    units = pl.read_parquet(results / "units.parquet")
    assert set(generated["source_unit_id"]) <= set(units["unit_id"])
