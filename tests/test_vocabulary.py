"""Every enumeration written once (core/vocabulary.py): the config schema names it (`x-enum`) and gets its values
when loaded, each stage's dispatch table is keyed by the same values, and a value added in the vocabulary alone is
accepted by the schema wherever the enumeration is used."""

import copy

import pytest
import yaml
from jsonschema import Draft202012Validator

from workflow_scripts.core import schema as config_schema, vocabulary
from workflow_scripts.core.schema import ENUM_MARKER, SCHEMA_PATH, load_schema, problem_lines

RAW = yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))


def marked(node, path=()):
    """(path, enumeration name) of every `x-enum` marker of the raw schema."""
    if isinstance(node, dict):
        if ENUM_MARKER in node:
            yield path, node[ENUM_MARKER]
        for key, value in node.items():
            yield from marked(value, (*path, key))
    elif isinstance(node, list):
        for at, value in enumerate(node):
            yield from marked(value, (*path, at))


def at(node, path):
    for part in path:
        node = node[part]
    return node


def literal_enums(node):
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list):
            yield node["enum"]
        for value in node.values():
            yield from literal_enums(value)
    elif isinstance(node, list):
        for value in node:
            yield from literal_enums(value)


def test_every_enumeration_is_named_by_the_schema_and_filled_in():
    names = {name for _, name in marked(RAW)}
    assert names == set(vocabulary.enumerations()), "an enumeration the schema does not use, or a marker without one"
    loaded = load_schema()
    for path, name in marked(RAW):
        assert at(loaded, path)["enum"] == list(vocabulary.enumerations()[name]), path
        assert ENUM_MARKER not in at(loaded, path)


def test_the_schema_restates_no_enumeration_of_the_vocabulary():
    known = {frozenset(values): name for name, values in vocabulary.enumerations().items()}
    restated = [(values, known[frozenset(values)]) for values in literal_enums(RAW) if frozenset(values) in known]
    assert not restated, f"write `x-enum: <name>` instead of the values: {restated}"


def test_a_marker_naming_no_enumeration_is_an_error_naming_it():
    with pytest.raises(KeyError, match="x-enum 'colours' names no enumeration"):
        config_schema.fill_enumerations({"properties": {"colour": {ENUM_MARKER: "colours"}}}, {"scopes": ("global",)})


def demo_config():
    return yaml.safe_load((SCHEMA_PATH.parents[2] / "config.yaml").read_text())


def schema_problems(config):
    return problem_lines(Draft202012Validator(load_schema()), config)


@pytest.mark.parametrize("name, key, place", [
    ("SCOPES", "scope", lambda config, value: config["arms"]["dense"].update(scope=value)),
    ("FIRST_STAGES", "first_stage", lambda config, value: config["arms"]["dense"].update(first_stage=value)),
    ("BACKENDS", "backend", lambda config, value: config["models"]["generator"].update(backend=value)),
    ("ROUTER_KINDS", "kind", lambda config, value: config["routing"]["routers"].update(new={"kind": value})),
    ("STRATEGIES", "strategies", lambda config, value: config.update(study_c={"dataset": "x", "strategies": [value]})),
    ("DEVICES", "device", lambda config, value: config["models"]["generator"].update(device=value)),
])
def test_a_value_added_to_the_vocabulary_alone_is_accepted_by_the_schema(monkeypatch, name, key, place):
    config = demo_config()
    place(config, "fake_value")
    assert any("fake_value" in line and key in line for line in schema_problems(copy.deepcopy(config))), \
        "refused before it is added"
    monkeypatch.setattr(vocabulary, name, (*getattr(vocabulary, name), "fake_value"))
    assert not [line for line in schema_problems(config) if "fake_value" in line]


def test_each_dispatch_table_is_keyed_by_its_enumeration():
    from workflow_scripts.core.vocabulary import FEATURE_FAMILY
    from workflow_scripts.ingest.adapters import pool, registry, trec
    from workflow_scripts.llm import engine
    from workflow_scripts.retrieval import dense, rerank
    from workflow_scripts.routing import routers
    from workflow_scripts.study_c import strategies

    tables = {
        "DATASET_FORMATS": [registry.ADAPTERS, registry.STREAMS], "COLLECTION_FORMATS": [trec.COLLECTION_READERS],
        "TOPIC_FORMATS": [trec.TOPIC_READERS], "TREC_QRELS_FORMATS": [trec.QRELS_READERS],
        "POOL_QRELS_FORMATS": [pool.QRELS_READERS], "BACKENDS": [engine.LOADERS],
        "DENSE_INDEX_KINDS": [dense.INDEX_PARAMS], "RERANKER_KINDS": [rerank.SCORER_LOADERS],
        "LEARNED_ROUTERS": [routers.DEFAULT_PARAMS], "STRATEGIES": [strategies.RUNNERS, vocabulary.STRATEGY_SETTINGS],
    }
    for name, dispatch in tables.items():
        for table in dispatch:
            assert list(table) == list(getattr(vocabulary, name)), name
    assert set(FEATURE_FAMILY.values()) == set(vocabulary.FEATURE_FAMILIES)
    assert set(routers.FIXED_THRESHOLDS) < set(vocabulary.CONTROL_ROUTERS)
    assert {feature for feature, _ in vocabulary.SCORE_ROUTERS.values()} < set(FEATURE_FAMILY)
