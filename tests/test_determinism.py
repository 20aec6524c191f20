"""Same config and seed → the same results: two clean runs of the tiny demo DAG, each with its own empty results
cache, produce byte-identical files, except these, listed exactly:
- answers/keep.parquet: `latency_s` (measured wall time) and `source` (generated vs served from the cache),
  cost/ledger.parquet: `seconds` and `job_seconds`, cost/stages.csv: `seconds` (measured wall times) differ by
  nature; every other column of these tables is compared value for value;
- index/bm25/: Lucene segment files carry their own ids and timestamps, and the manifest the build time; the
  rankings read from the index (first_stage/*.parquet) are compared byte for byte instead.
Logs and Snakemake benchmark files (timings) live outside results/<dataset>/ and are not compared."""

from __future__ import annotations

import pytest
from tiny_demo import VOLATILE_COLUMNS, differences, reference_run, result_files, tiny_workdir
from workflow_helpers import snakemake

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_two_clean_runs_give_identical_tables(tmp_path, tmp_path_factory):
    first = reference_run(tmp_path_factory)
    second = tiny_workdir(tmp_path)
    snakemake(second)
    assert differences(first, second) == []
    compared = set(result_files(first))
    assert {"units.parquet", "splits.parquet", "runs/keep.parquet", "rerank/smollm2_yes_no.parquet",
            "answers/keep.parquet", "judgments/keep_grounded.parquet", "answers/summary.csv"} <= compared
    assert set(VOLATILE_COLUMNS) <= compared
