"""Contracts: every canonical table is checked on write, and a failed write leaves nothing behind."""

import polars as pl
import pytest

from workflow_scripts.core import atomic, tables
from workflow_scripts.core.contracts import QRELS, RANKING, UNITS
from workflow_scripts.core.tables import (
    ContractError,
    TableWriter,
    conform,
    frame,
    read_table,
    table_batches,
    write_table,
)


def unit(unit_id: str, **overrides) -> dict:
    row = dict(dataset="d", group_id="g", unit_id=unit_id, kind="paragraph", section=None, position=0,
               title=None, text="some text", meta=None)
    row.update(overrides)
    return row


def test_frame_casts_to_declared_order_and_types():
    table = frame([unit("u1", position=3)], UNITS)
    assert table.columns == list(UNITS.columns)
    assert table.schema["position"] == pl.Int32()


def test_missing_and_extra_columns_are_named():
    table = frame([unit("u1")], UNITS).drop("kind").with_columns(pl.lit(1).alias("score"))
    with pytest.raises(ContractError, match=r"missing columns \['kind'\], unexpected columns \['score'\]"):
        conform(table, UNITS)


def test_null_in_required_column_is_rejected():
    with pytest.raises(ContractError, match="column 'text' has 1 null"):
        frame([unit("u1", text=None)], UNITS)


def test_kind_outside_enumeration_is_rejected():
    with pytest.raises(ContractError, match=r"column 'kind' has values 'figure'"):
        frame([unit("u1", kind="figure")], UNITS)


def test_duplicate_keys_are_listed():
    with pytest.raises(ContractError, match=r"2 duplicated unit_id values: 'a', 'b'"):
        frame([unit("a"), unit("a"), unit("b"), unit("b"), unit("c")], UNITS)


def test_composite_key_duplicates():
    rows = [dict(qid="q", unit_id="u", relevance=1), dict(qid="q", unit_id="u", relevance=2)]
    with pytest.raises(ContractError, match=r"duplicated qid/unit_id values: \('q', 'u'\)"):
        frame(rows, QRELS)


def test_uncastable_value_is_rejected():
    table = pl.DataFrame({"qid": ["q"], "unit_id": ["u"], "relevance": ["high"]})
    with pytest.raises(ContractError, match="does not cast"):
        conform(table, QRELS)


def test_write_then_read_round_trip(tmp_path):
    path = tmp_path / "units.parquet"
    written = write_table(frame([unit("u1"), unit("u2", position=1)], UNITS), path, UNITS)
    assert read_table(path, UNITS).equals(written)


def test_killed_write_leaves_no_file(tmp_path, monkeypatch):
    path = tmp_path / "units.parquet"

    def write_half_then_die(self, file, **kwargs):
        with open(file, "wb") as handle:
            handle.write(b"PAR1 half a file")
        raise KeyboardInterrupt

    monkeypatch.setattr(pl.DataFrame, "write_parquet", write_half_then_die)
    with pytest.raises(KeyboardInterrupt):
        write_table(frame([unit("u1")], UNITS), path, UNITS)
    assert list(tmp_path.iterdir()) == []


def test_failed_write_keeps_the_previous_version(tmp_path, monkeypatch):
    path = tmp_path / "units.parquet"
    first = write_table(frame([unit("u1")], UNITS), path, UNITS)
    monkeypatch.setattr(pl.DataFrame, "write_parquet", lambda self, file, **kw: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        write_table(frame([unit("u2")], UNITS), path, UNITS)
    assert read_table(path, UNITS).equals(first)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["units.parquet"]


def test_json_written_atomically(tmp_path):
    atomic.write_json_atomic({"a": 1}, tmp_path / "r.json")
    assert (tmp_path / "r.json").read_text() == '{\n  "a": 1\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_table_written_in_batches_is_the_same_file_whatever_the_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "GROUP_ROWS", 10)
    rows = 37
    table = pl.DataFrame({"qid": [f"q{i}" for i in range(rows)], "unit_id": [f"u{i}" for i in range(rows)],
                          "rank": [1] * rows, "score": [i / 7 for i in range(rows)]})
    files = []
    for cuts in ([rows], [5, 32], [10, 10, 10, 7], [1] * rows, [0, 36, 1]):
        files.append(tmp_path / f"{len(files)}.parquet")
        with TableWriter(files[-1], RANKING) as writer:
            start = 0
            for size in cuts:
                writer.write(table.slice(start, size))
                start += size
    assert len({path.read_bytes() for path in files}) == 1
    assert read_table(files[0], RANKING).equals(conform(table, RANKING))
    assert [batch.height for batch in table_batches(files[0], RANKING, rows=16)] == [16, 16, 5]
    # one row group: the file write_table writes
    with TableWriter(tmp_path / "small.parquet", RANKING) as writer:
        writer.write(table.head(4))
        writer.write(table.slice(4, 6))
    write_table(table.head(10), tmp_path / "whole.parquet", RANKING)
    assert (tmp_path / "small.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()


def test_a_table_written_with_batch_groups_has_one_row_group_per_batch(tmp_path):
    """`batch_groups`: the caller's batches are the row groups, an empty one included; one batch is the file
    `write_table` writes; `finish` completes the file for reading back before it moves into place."""
    import pyarrow.parquet as pq

    table = pl.DataFrame({"qid": [f"q{i}" for i in range(7)], "unit_id": ["u"] * 7, "rank": [1] * 7,
                          "score": [0.5] * 7})
    target = tmp_path / "run.parquet"
    with TableWriter(target, RANKING, batch_groups=True) as writer:
        for start, size in ((0, 3), (3, 0), (3, 4)):
            writer.write(table.slice(start, size))
        assert writer.finish().collect().equals(conform(table, RANKING)) and not target.exists()
    stored = pq.ParquetFile(target).metadata
    assert [stored.row_group(i).num_rows for i in range(stored.num_row_groups)] == [3, 0, 4]
    with TableWriter(tmp_path / "one.parquet", RANKING, batch_groups=True) as writer:
        writer.write(table)
    write_table(table, tmp_path / "whole.parquet", RANKING)
    assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    with pytest.raises(ContractError, match=r"1 duplicated qid/unit_id values: \('q1', 'u'\)"):
        with TableWriter(target, RANKING, batch_groups=True) as writer:
            writer.write(table)
            writer.write(table.slice(1, 1))
    assert read_table(target, RANKING).equals(conform(table, RANKING))  # the previous version stays


def test_a_table_written_in_batches_checks_every_batch_and_the_key_across_them(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "GROUP_ROWS", 10)
    table = pl.DataFrame({"qid": [f"q{i}" for i in range(25)], "unit_id": ["u"] * 25, "rank": [1] * 25,
                          "score": [0.5] * 25})
    target = tmp_path / "run.parquet"
    with pytest.raises(ContractError, match=r"2 duplicated qid/unit_id values: \('q3', 'u'\), \('q4', 'u'\)"):
        with TableWriter(target, RANKING) as writer:
            writer.write(table)
            writer.write(table.slice(3, 2))  # repeats two keys of an earlier row group
    with pytest.raises(ContractError, match="column 'rank' does not cast|does not cast to its declared type"):
        with TableWriter(target, RANKING) as writer:
            writer.write(table)
            writer.write(table.head(1).with_columns(pl.lit("first").alias("rank")))
    with pytest.raises(RuntimeError, match="killed"):
        with TableWriter(target, RANKING) as writer:
            writer.write(table)
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []  # no table, no partial file
