"""Bad input stops with one clear message: malformed configs (validated before any job) and malformed datasets
(read by the ingest stage), each case with the exact words its message must contain. Most cases call the
validation and ingest functions directly; a few run the real Snakefile to check that the message reaches the
user without a traceback and that nothing is left half-written under results/."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml
from conftest import PROJECT_ROOT
from workflow_helpers import make_workdir, snakemake

from workflow_scripts.config.validate import validate_config
from workflow_scripts.core.errors import InputError
from ingest_helpers import load_dataset


@pytest.fixture
def config():
    config = yaml.safe_load((PROJECT_ROOT / "config.yaml").read_text())
    config["datasets"]["demo"]["path"] = str(PROJECT_ROOT / "data" / "demo" / "papers.json")
    return config


def set_key(path: str, value):
    """A config edit: set the dotted `path` to `value` (creating mappings on the way)."""
    def edit(config):
        *parents, last = path.split(".")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return edit


CONFIG_CASES = {
    "wrong type": (set_key("splits.seed", "abc"), "splits.seed = 'abc' is not allowed; expected a value of type integer"),
    "string for integer": (set_key("arms.bm25.candidates", "5"),
                           "arms.bm25.candidates = '5' is not allowed; expected a value of type integer"),
    "boolean for integer": (set_key("arms.bm25.candidates", True),
                            "arms.bm25.candidates = True is not allowed; expected a value of type integer"),
    "unknown top-level key": (set_key("datasetz", {}), "unknown key(s) ['datasetz']"),
    "unknown first stage": (set_key("arms.bm25.first_stage", "splade"),
                            "arms.bm25.first_stage = 'splade' is not allowed; expected one of ['bm25', 'dense', 'hybrid', 'run']"),
    "unknown reranker reference": (set_key("arms.keep.rerank", "monot5"),
                                   "arms.keep.rerank = 'monot5' names no models.rerankers entry"),
    "keep larger than candidates": (set_key("arms.bm25.keep", 50), "arms.bm25.keep = 50 is larger than candidates = 5"),
    "unknown arm as policy": (set_key("generation.policies", ["keep", "colbert"]),
                              "generation.policies: ['colbert'] are neither arms, imported systems nor closed_book"),
    "unknown arm in routing pair": (set_key("routing.pairs.keep_vs_hybrid.alternative", "hybird"),
                                    "routing.pairs.keep_vs_hybrid.alternative = 'hybird' names no arm"),
    "routing pair that refers to itself": (set_key("routing.pairs.keep_vs_hybrid.alternative", "keep"),
                                           "routing.pairs.keep_vs_hybrid: base and alternative are the same arm 'keep'"),
    "unknown measure": (set_key("evaluation.measures", ["Success@5", "Foo@10"]),
                        "evaluation.measures: 'Foo@10' is not an ir-measures measure"),
    "malformed measure": (set_key("evaluation.measures", ["Success@5", "nDCG@ten"]),
                          "evaluation.measures: 'nDCG@ten' is not an ir-measures measure"),
    "pair measure not computed": (set_key("routing.pairs.keep_vs_hybrid.measure", "nDCG@10"),
                                  "routing.pairs.keep_vs_hybrid.measure = 'nDCG@10' is not computed"),
    "budget outside (0, 1)": (set_key("budgets.grid", [0.5, 1.5]), "budgets.grid.1 = 1.5 is not allowed; expected a number < 1"),
    "empty budget grid": (set_key("budgets.grid", []), "budgets.grid = [] is not allowed; expected at least 1 items"),
    "repeated budget": (set_key("budgets.grid", [0.2, 0.2]),
                        "budgets.grid = [0.2, 0.2] is not allowed; expected a list without repeated values"),
    "zero delta": (set_key("budgets.delta", 0), "budgets.delta = 0 is not allowed; expected a number > 0"),
    "split fractions not summing to 1": (set_key("splits.fractions", {"dev": 0.5, "calibration": 0.5, "heldout": 0.5}),
                                         "sum to 1"),
    "unknown dataset format": (set_key("datasets.demo.format", "csv"), "datasets.demo.format"),
    "missing dataset file": (set_key("datasets.demo.path", "data/nope.json"),
                             "datasets.demo.path: file 'data/nope.json' does not exist"),
    "folder instead of file": (set_key("datasets.demo.path", str(PROJECT_ROOT / "data")), "is a folder; name the file inside it"),
    "no name (a config of one's own, run with --replace-workflow-config)": (
        lambda config: config.pop("name"),
        "(top level): 'name' is a required property (The run's name: its summary is results/summary_<name>.md"),
    "no datasets": (set_key("datasets", {}), "datasets = {} is not allowed; expected at least 1 entries"),
    "dataset name with a space": (set_key("datasets", {"my data": {"format": "qasper", "path": "x"}}),
                                  "expected a string matching"),
    "unknown LLM backend": (set_key("models.generator.backend", "ollama"),
                            "models.generator.backend = 'ollama' is not allowed; expected one of ['transformers', 'openai', 'vllm']"),
    "openai backend without a server": (set_key("models.judge", {"backend": "openai", "model": "judge"}),
                                        "models.judge.base_url is required for the openai backend"),
    "removed backoff_s": (set_key("models.judge.backoff_s", 2.0), "models.judge.backoff_s was removed: the openai client "
                                                                "backs off by itself"),
    "serve on a backend without an engine": (set_key("models.generator.serve", True),
                                             "models.generator.serve applies to the vllm backend"),
    "tokenizer on an offline backend": (set_key("models.judge.tokenizer", "HuggingFaceTB/SmolLM2-135M-Instruct"),
                                        "models.judge.tokenizer applies to the openai backend"),
    "API key written into the config": (set_key("models.judge.api_key", "sk-secret"),
                                        "models.judge: unknown key(s) ['api_key']"),
    "unknown prompt template": (set_key("prompts", {"answer": {"messages": []}}), "prompts: unknown templates ['answer']"),
    "judge template by its old name": (set_key("prompts", {"judge_study_a": {"messages": []}}),
                                       "prompts.judge_study_a was removed: the judges are named for what they judge: "
                                       "judge_study_a is now judge_grounded"),
    "review sheet keyed by the old judge name": (
        set_key("review.reviewed", {"demo": {"study_c": "sheet.csv"}}),
        "review.reviewed.demo.study_c was removed: the judges are named for what they judge: study_c is now quality"),
    "zero new tokens": (set_key("models.generator.sampling.max_new_tokens", 0),
                        "models.generator.sampling.max_new_tokens = 0 is not allowed; expected a number >= 1"),
    "unknown split to answer": (set_key("generation.splits", ["test"]), "generation.splits.0 = 'test' is not allowed"),
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_bad_config_is_refused_with_a_clear_message(config, case):
    edit, expected = CONFIG_CASES[case]
    edit(config)
    with pytest.raises(InputError) as error:
        validate_config(config)
    assert expected in str(error.value)


OK_DOC = b'{"_id": "d1", "title": "t", "text": "hello world"}\n'
OK_QUERY = b'{"_id": "q1", "text": "what is it?"}\n'
OK_QRELS = b"query-id\tcorpus-id\tscore\nq1\td1\t1\n"

BEIR_CASES = {
    "empty corpus": ({"corpus": b""}, "no units with text: the corpus is empty"),
    "corpus of blank documents": ({"corpus": b'{"_id": "d1", "title": "", "text": "   "}\n'}, "the corpus is empty"),
    "no queries": ({"queries": b""}, "no questions: the question / query file holds no records"),
    "duplicate document ids": ({"corpus": OK_DOC + OK_DOC}, "table 'units': 1 duplicated unit_id values: 'd1'"),
    "tab in a document id": ({"corpus": b'{"_id": "d\\t1", "title": "t", "text": "x"}\n'}, "offending unit_id 'd\\t1'"),
    "newline in a document id": ({"corpus": b'{"_id": "d\\n1", "title": "t", "text": "x"}\n'}, "offending unit_id 'd\\n1'"),
    "space in a query id": ({"queries": b'{"_id": "q 1", "text": "what?"}\n'}, "offending qid 'q 1'"),
    "empty document id": ({"corpus": b'{"_id": "", "title": "t", "text": "x"}\n'}, "offending unit_id ''"),
    "non-UTF-8 corpus": ({"corpus": b'{"_id": "d1", "title": "t", "text": "caf\xe9"}\n'},
                         "corpus.jsonl: not valid UTF-8 at byte 40 (line 1)"),
    "broken JSON line": ({"corpus": OK_DOC + b'{"_id": "d2", "text": }\n'}, "corpus.jsonl: line 2 is not valid JSON"),
    "document without text": ({"corpus": b'{"_id": "d1", "title": "t"}\n'}, "corpus.jsonl: line 1 has no string field 'text'"),
    "truncated gzip": ({"corpus": gzip.compress(OK_DOC * 100)[:40]},
                       "corpus.jsonl: cannot read the file: Compressed file ended before the end-of-stream marker"),
    "relevance that is not a number": ({"qrels": b"query-id\tcorpus-id\tscore\nq1\td1\thigh\n"},
                                       "qrels.tsv: line 2: relevance 'high' is not an integer"),
    "qrels separated by spaces": ({"qrels": b"query-id\tcorpus-id\tscore\nq1 d1 1\n"},
                                  "qrels.tsv: line 2 has 1 tab-separated fields, expected 3"),
}


def write_beir(folder: Path, files: dict[str, bytes]) -> dict:
    folder.mkdir()
    contents = {"corpus": OK_DOC, "queries": OK_QUERY, "qrels": OK_QRELS} | files
    names = {"corpus": "corpus.jsonl", "queries": "queries.jsonl", "qrels": "qrels.tsv"}
    for key, data in contents.items():
        (folder / names[key]).write_bytes(data)
    return {"format": "beir"} | {key: str(folder / name) for key, name in names.items()}


@pytest.mark.parametrize("case", sorted(BEIR_CASES))
def test_bad_dataset_is_refused_with_a_clear_message(tmp_path, case):
    files, expected = BEIR_CASES[case]
    spec = write_beir(tmp_path / "beir", files)
    with pytest.raises(InputError) as error:
        load_dataset("bad", spec)
    assert expected in str(error.value)


QASPER_CASES = {
    "not a JSON object": (b"[]", "expected a JSON object mapping paper ids to papers, found list"),
    "no papers": (b"{}", "datasets.bad (qasper: "),
    "paper without its keys": (json.dumps({"p1": {"title": "t", "abstract": "a", "full_text": []}}).encode(),
                               "paper 'p1': missing key 'figures_and_tables'"),
    "binary file": (b"\x89PNG\r\n\x1a\n\x00", "not valid UTF-8 at byte 0 (line 1)"),
    "empty file": (b"", "invalid JSON at line 1, column 1"),
}


@pytest.mark.parametrize("case", sorted(QASPER_CASES))
def test_bad_qasper_file_is_refused_with_a_clear_message(tmp_path, case):
    raw, expected = QASPER_CASES[case]
    path = tmp_path / "papers.json"
    path.write_bytes(raw)
    with pytest.raises(InputError) as error:
        load_dataset("bad", {"format": "qasper", "path": str(path)})
    assert expected in str(error.value)


def test_huge_document_is_ingested_whole(tmp_path):
    """A 10 MB document is not an error: it is one unit with its full text (stages cut what they read)."""
    text = "word " * 2_000_000
    spec = write_beir(tmp_path / "beir", {"corpus": json.dumps({"_id": "d1", "title": "t", "text": text}).encode()})
    units = load_dataset("huge", spec).units
    assert units.height == 1 and len(units["text"][0]) == len(text.strip())


# End to end: the message reaches the user through Snakemake, without a traceback, and results/ stays clean.
E2E_CASES = {
    "unknown measure (before any job)": (
        {"evaluation": {"measures": ["Success@5", "Foo@10"]}}, None,
        "ragfrontier: ERROR: invalid config:\n  evaluation.measures: 'Foo@10' is not an ir-measures measure",
    ),
    "tab in a paper id (ingest job)": (
        {}, lambda text: text.replace('"1901.00001"', '"1901\\t00001"', 1),
        "ids must be non-empty and free of whitespace and control characters",
    ),
    "no papers (ingest job)": ({}, lambda text: "{}", "no units with text: the corpus is empty"),
}


@pytest.mark.parametrize("case", sorted(E2E_CASES))
@pytest.mark.slow
@pytest.mark.integration
def test_bad_input_stops_the_workflow_cleanly(tmp_path, case):
    overrides, corrupt, expected = E2E_CASES[case]
    work = make_workdir(tmp_path, {"datasets": {"mini": {"format": "qasper", "path": "data/mini.json"}}, **overrides})
    text = (PROJECT_ROOT / "tests" / "data" / "qasper_mini.json").read_text()
    (work / "data" / "mini.json").write_text(corrupt(text) if corrupt else text)
    process = snakemake(work, "--until", "ingest", check=False)
    assert process.returncode != 0
    assert expected in process.stdout
    assert "Traceback" not in process.stdout
    written = [path for path in (work / "results").rglob("*") if path.is_file() and "logs" not in path.parts
               and "benchmarks" not in path.parts and "cache" not in path.parts]
    assert written == []
