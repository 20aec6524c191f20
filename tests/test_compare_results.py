"""benchmarks/compare_results.py, the check that a refactor left every table the same: it names what differs, and a
table that gained or lost columns still has its common columns compared."""

import importlib.util

import polars as pl

from conftest import PROJECT_ROOT


def compare_module():
    spec = importlib.util.spec_from_file_location("compare_results", PROJECT_ROOT / "benchmarks" / "compare_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write(tmp_path, name, frame):
    path = tmp_path / name
    frame.write_parquet(path)
    return path


def test_tables_compare_common_columns_and_name_added_and_removed_ones(tmp_path):
    difference = compare_module().difference
    before = write(tmp_path, "before.parquet", pl.DataFrame({"q": ["a", "b"], "score": [1.0, 2.0], "old": [1, 2]}))
    same = write(tmp_path, "same.parquet", pl.DataFrame({"q": ["a", "b"], "score": [1.0, 2.0], "tokens": [5, 6]}))
    moved = write(tmp_path, "moved.parquet", pl.DataFrame({"q": ["a", "b"], "score": [1.0, 2.5], "tokens": [5, 6]}))
    close = write(tmp_path, "close.parquet", pl.DataFrame({"q": ["a", "b"], "score": [1.0, 2.000001], "old": [1, 2]}))
    timed = write(tmp_path, "timed.parquet", pl.DataFrame({"q": ["a", "b"], "score": [1.0, 2.0], "old": [1, 2],
                                                           "wall_seconds": [0.1, 0.2]}))
    assert difference(before, same) == "columns removed old; added tokens; common columns: equal"
    assert difference(before, moved) == ("columns removed old; added tokens; common columns: values differ in score "
                                         "(max relative difference 2.0e-01)")
    assert difference(before, close, rtol=1e-5) is None
    assert "values differ in score" in difference(before, close)
    assert difference(before, timed) is None  # measured time is not compared
    assert difference(before, write(tmp_path, "short.parquet", pl.DataFrame({"q": ["a"]}))) == "2 vs 1 rows"
