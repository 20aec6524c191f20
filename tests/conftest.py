"""Shared test fixtures: where the real evaluation data lives, the project root, one demo run for the session, and
the markers that sort the suite into tiers (registered in pyproject.toml):

- fast unit tests (no marker): no Snakemake, no model loads, no shared data; `pytest -m "not slow"`;
- `slow`: runs Snakemake, loads a real model or vLLM, or takes more than a few seconds;
- `integration`: runs the Snakefile (a real run or a dry run of the DAG);
- `regression`: checks published reference numbers on ../shared/data;
- `needs_data`: reads ../shared/data.

Modules mark themselves (`pytestmark`) and slow tests of otherwise fast modules carry `@pytest.mark.slow`;
`pytest_collection_modifyitems` below adds what a test's fixtures or file imply, so a new test cannot forget it.
"""

import os
import shutil
from pathlib import Path

import pytest

# Tests never reach a model hub: every model comes from a PyPI package, a local path or a model built in the test.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# RAGFRONTIER_SHARED_DATA points the suite elsewhere (a missing folder shows which tests need the data).
SHARED_DATA = Path(os.environ.get("RAGFRONTIER_SHARED_DATA", PROJECT_ROOT.parent / "shared" / "data"))

# Fixtures whose users are integration tests of the demo DAG (the session's one demo run).
DEMO_FIXTURES = {"demo_run", "demo_copy"}


def pytest_collection_modifyitems(config, items):
    """The safety net: `needs_data` on every test that uses the shared_data fixture, `regression` on every test in a
    regression file (tests/test_regression_*.py), `slow` + `integration` on every test that reads the demo run."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "shared_data" in fixtures:
            item.add_marker(pytest.mark.needs_data)
        if item.path.name.startswith("test_regression"):
            item.add_marker(pytest.mark.regression)
            item.add_marker(pytest.mark.needs_data)
        if fixtures & DEMO_FIXTURES:
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data beside the checkout (read-only public datasets; see its README.md)."""
    assert SHARED_DATA.is_dir(), f"expected the shared datasets at {SHARED_DATA}"
    return SHARED_DATA


@pytest.fixture(scope="session")
def project_root() -> Path:
    return PROJECT_ROOT


@pytest.fixture(scope="session")
def models_cache(pytestconfig) -> Path:
    """Converted models (SmolLM2's GGUF as a transformers folder), kept in pytest's cache across sessions."""
    return pytestconfig.cache.mkdir("ragfrontier-models")


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> Path:
    """A workdir where the default experiment (config.yaml, the demo) has run to the end: run once per session and
    shared by every test that reads it. Never change it; a test that edits files or reruns jobs takes `demo_copy`."""
    from workflow_helpers import finished_demo

    return finished_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def demo_copy(demo_run, tmp_path_factory) -> Path:
    """A private copy of the session's finished demo for one module (files, modification times, Snakemake's
    metadata and links kept), so its edits and reruns neither see nor disturb another module's."""
    work = tmp_path_factory.mktemp("demo_copy") / "work"
    shutil.copytree(demo_run, work, symlinks=True)
    return work


@pytest.fixture()
def stand_in_checkout(tmp_path, monkeypatch):
    """Config validation without ../shared/data: the working directory becomes tmp_path/checkout, and the returned
    function writes an empty stand-in for every file a config's datasets name (relative paths, as validation
    resolves them: `../shared/data/x` lands in tmp_path/shared/data/x). Validation checks only that they exist."""
    from workflow_scripts.ingest.adapters.registry import adapter_for

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    monkeypatch.chdir(checkout)

    def stand_in(config: dict) -> dict:
        for name, spec in config.get("datasets", {}).items():
            for key in adapter_for(name, spec["format"])[1]:
                if key in spec and not Path(spec[key]).is_absolute():
                    path = checkout / spec[key]
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.touch()
        return config

    return stand_in
