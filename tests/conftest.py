"""Shared test fixtures: where the real evaluation data lives, and the project root."""

import os
from pathlib import Path

import pytest

# Tests never reach a model hub: every model comes from a PyPI package, a local path or a model built in the test.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data beside the checkout (read-only public datasets; see its README.md)."""
    assert SHARED_DATA.is_dir(), f"expected the shared datasets at {SHARED_DATA}"
    return SHARED_DATA


@pytest.fixture(scope="session")
def project_root() -> Path:
    return PROJECT_ROOT
