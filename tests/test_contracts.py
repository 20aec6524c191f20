"""Contracts: every canonical table is checked on write, and a failed write leaves nothing behind."""

import polars as pl
import pytest

from workflow_scripts.core import atomic
from workflow_scripts.core.contracts import QRELS, UNITS, ContractError, conform, frame, read_table, write_table


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
