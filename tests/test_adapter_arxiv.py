"""arXiv metadata adapter on the shared 200-record snapshot (and unarXive's 49 metadata records); expected
numbers come from ../shared/data/arxiv-metadata-sample/PROVENANCE.md or were read by hand from the raw files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from workflow_scripts.core import contracts, tables
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested
from workflow_scripts.ingest.adapters.arxiv import load


@pytest.fixture(scope="module")
def arxiv(shared_data: Path) -> Ingested:
    path = shared_data / "arxiv-metadata-sample" / "arxiv-metadata-oai-snapshot.first200.jsonl"
    return load({"path": str(path)}, "arxiv")


def test_counts(arxiv: Ingested) -> None:
    units = tables.conform(arxiv.units, contracts.UNITS)
    assert tables.conform(arxiv.questions, contracts.QUESTIONS).height == 0
    assert tables.conform(arxiv.qrels, contracts.QRELS).height == 0
    assert units.height == 200
    assert arxiv.counts == {"papers_read": 200, "papers_without_abstract_skipped": 0}
    assert units["unit_id"].to_list()[0] == "0704.0001" and units["unit_id"].to_list()[-1] == "0704.0200"
    assert (units["unit_id"] == units["group_id"]).all() and units["kind"].unique().to_list() == ["document"]
    first_categories = [json.loads(meta)["categories"][0].split(".")[0] for meta in units["meta"]]
    top = Counter(first_categories)
    expected = {
        "math": 46,
        "cond-mat": 42,
        "physics": 23,
        "astro-ph": 19,
        "hep-ph": 18,
        "hep-th": 12,
        "gr-qc": 8,
        "nlin": 6,
        "cs": 6,
        "quant-ph": 5,
    }
    assert {name: top[name] for name in expected} == expected
    assert sum(top.values()) - sum(expected.values()) == 15  # "others 15"
    assert not units["text"].str.contains("\n").any() and not units["title"].str.contains("  ").any()


def test_spot_check(arxiv: Ingested) -> None:
    first = arxiv.units.filter(pl.col("unit_id") == "0704.0001").row(0, named=True)
    assert first["title"] == "Calculation of prompt diphoton production cross sections at Tevatron and LHC energies"
    assert first["text"].startswith(
        "A fully differential calculation in perturbative quantum chromodynamics is presented"
    )
    assert json.loads(first["meta"]) == {"categories": ["hep-ph"], "update_date": "2008-11-26"}
    second = arxiv.units.filter(pl.col("unit_id") == "0704.0002").row(0, named=True)
    assert second["title"] == "Sparsity-certifying Graph Decompositions"
    assert json.loads(second["meta"])["categories"] == ["math.CO", "cs.CG"]


def test_unarxive_metadata_records(shared_data: Path) -> None:
    ingested = load({"path": str(shared_data / "unarxive-sample" / "metadata_49.jsonl")}, "meta49")
    assert ingested.units.height == 49
    assert ingested.units.filter(pl.col("unit_id") == "2212.11867")["title"].to_list() == [
        "Zeros of a growing number of derivatives of random polynomials with independent roots"
    ]


def record(paper_id: str, abstract: str | None) -> str:
    return json.dumps({"id": paper_id, "title": "T", "abstract": abstract, "categories": "cs.IR", "update_date": "x"})


def test_blank_abstract_skipped_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join([record("1", "  An\n abstract. "), record("2", " \n "), record("3", None)]))
    ingested = load({"path": str(path)}, "small")
    assert ingested.units["unit_id"].to_list() == ["1"]
    assert ingested.units["text"].to_list() == ["An abstract."]
    assert ingested.counts == {"papers_read": 3, "papers_without_abstract_skipped": 2}
    path.write_text(record("1", "x") + "\n" + json.dumps({"id": "0704.9", "title": "T", "abstract": "x"}) + "\n")
    with pytest.raises(InputError, match=r"a\.jsonl, line 2 \(id '0704\.9'\): missing key 'categories'"):
        load({"path": str(path)}, "small")
    path.write_text(record("1", "x") + "\n[1, 2]\n")
    with pytest.raises(InputError, match=r"a\.jsonl, line 2: expected a JSON object, found list"):
        load({"path": str(path)}, "small")
    path.write_text(record("1", "x")[:-2] + "\n")
    with pytest.raises(InputError, match=r"a\.jsonl: line 1 is not valid JSON"):
        load({"path": str(path)}, "small")
