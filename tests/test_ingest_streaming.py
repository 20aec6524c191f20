"""Streaming ingest reads and writes what whole-file ingest did: the same lines and line numbers, the same
values, the same error messages (`ingest/files.py`), and the same tables, counts and errors when the units are
written in many batches (`ingest/stage.py`)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from ingest_helpers import load_dataset

from workflow_scripts.ingest import files
from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest import stage

# Text that splitlines() cuts in unusual places: CRLF, a lone CR, Unicode line and paragraph separators, NEL,
# form feed, blank lines, no final newline.
TRICKY = "a\tb\r\nc\rd\u2028e\x85f\x0cg\n\n  \nlast"


@pytest.fixture
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "BLOCK", 5)
    monkeypatch.setattr(files, "PEEK_BLOCK", 3)


def write(path: Path, data: bytes, compress: bool) -> Path:
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def outcome(read) -> tuple:
    """("ok", values) or ("error", message) of reading everything `read()` yields."""
    try:
        return "ok", list(read())
    except InputError as error:
        return "error", str(error)


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_lines_are_those_of_splitlines(tmp_path: Path, compress: bool, bom: bytes) -> None:
    path = write(tmp_path / "f.txt", bom + TRICKY.encode(), compress)
    assert list(files.read_lines(path)) == list(enumerate(TRICKY.splitlines(), start=1))
    assert list(files.read_tsv(path, 1)) == [(number, line.split("\t")) for number, line in
                                             enumerate(TRICKY.splitlines(), start=1) if line.strip()]


@pytest.mark.parametrize("data", [
    b"ab\xffcd\n", b"ok\nab\xff\ncd\n", b"ok\nabc\xe9\nx", b"ok\nab\xe2\x82\n", b"\xef\xbb\xbfab\xff",
    b"\xef\xbb\xbf\n\xff\n", b"\xef\xbb\xbfx\ny\n\xff", b"\xef\xbb\xbf\xff", b"12\r\n\xc3(\r\n",
])
def test_invalid_utf8_gets_the_whole_file_message(tmp_path: Path, data: bytes) -> None:
    path = write(tmp_path / "f.jsonl", data, compress=False)
    with pytest.raises(InputError) as whole:
        files.decode_utf8(data, str(path))
    assert outcome(lambda: files.read_lines(path)) == ("error", str(whole.value))


@pytest.mark.parametrize("text", [
    '[{"a": 1}, {"b": [1, 2, {"c": "d"}]}, 12345, -0.5e-3, true, null, "s\\u00e9"]',
    '  \n[\n]\n', '[]', '\ufeff[1,2]', '[1, 2] ', '[1 2]', '[1,]', '[,1]', '[1, 2', '[1] x', '[1] [2]',
    '[{"a": 1}, {"a" 2}]', '[123456789012345678901234567890]', '\x0c[1]', '[1, {"x": "\n"}]',
])
def test_json_lists_read_as_json_loads_reads_them(tmp_path: Path, tiny_blocks: None, text: str) -> None:
    path = write(tmp_path / "f.json", text.encode(), compress=False)
    try:
        expected = ("ok", [("item", index, value) for index, value in enumerate(json.loads(text.lstrip("\ufeff")))])
    except json.JSONDecodeError:
        with pytest.raises(InputError) as whole:
            files.parse_json(text.lstrip("\ufeff"), str(path))
        expected = ("error", str(whole.value))
    got = outcome(lambda: files.read_records(path))
    if expected[0] == "error":  # the items before the fault may come first; the message is the whole-file one
        assert got[0] == "error" and got[1] == expected[1]
    else:
        assert got == expected


@pytest.mark.parametrize("compress", [False, True])
def test_json_lines_records_keep_their_line_numbers(tmp_path: Path, tiny_blocks: None, compress: bool) -> None:
    text = '\n  \n{"a": 1}\r\n{"b": 2}\n\n{"c": [1, 2]}'
    path = write(tmp_path / "f.jsonl", text.encode(), compress)
    assert list(files.read_records(path)) == [("line", number, value) for number, value in files.parse_jsonl(text, "")]


# --- the stage, with units written in many batches ---------------------------------------------------------


def beir(folder: Path, corpus: list[dict]) -> dict:
    folder.mkdir(exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in corpus))
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "what?"}\n{"_id": "q2", "text": "who?"}\n')
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td9\t2\nq2\tnope\t1\n")
    return {"format": "beir", **{key: str(folder / name) for key, name in
                                 (("corpus", "corpus.jsonl"), ("queries", "queries.jsonl"), ("qrels", "qrels.tsv"))}}


def docs(ids: list[str], blank: tuple[str, ...] = ()) -> list[dict]:
    return [{"_id": doc_id, "title": f"T {doc_id}", "text": "  " if doc_id in blank else f" text of {doc_id} "}
            for doc_id in ids]


def test_many_batches_give_the_tables_of_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = beir(tmp_path / "beir", docs([f"d{i}" for i in range(20)], blank=("d4", "d17")))
    whole = load_dataset("b", spec)
    monkeypatch.setattr(stage, "BATCH_UNITS", 3)
    batched = load_dataset("b", spec)
    assert batched.units.equals(whole.units) and batched.counts == whole.counts
    assert whole.counts["units_empty_dropped"] == 2 and whole.counts["qrels_unknown_units"] == 1
    outputs = {key: str(tmp_path / "out" / f"{key}.parquet") for key in ("units", "questions", "qrels")}
    summary = stage.ingest_dataset("b", spec, outputs | {"report": str(tmp_path / "out" / "report.json")})
    assert pl.read_parquet(outputs["units"]).equals(whole.units)
    assert pq.ParquetFile(outputs["units"]).num_row_groups == 7  # 20 units read, 3 per batch
    assert summary == stage.report(whole) == json.loads((tmp_path / "out" / "report.json").read_text())


@pytest.mark.parametrize("batch", [3, 10_000])
@pytest.mark.parametrize("ids, blank, expected", [
    (["a", "b", "c", "d", "a"], (), "1 duplicated unit_id values: 'a'"),  # across batches (3 per batch)
    (["a", "a", "b", "c", "b", "b"], (), "2 duplicated unit_id values: 'a', 'b'"),  # inside a batch, and across
    (["a", "b", "c", "d", "e", "c"], ("c",), "1 duplicated unit_id values: 'c'"),  # one copy empty (not written)
])
def test_duplicate_ids_over_the_stream_give_the_whole_table_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int, ids: list[str], blank: tuple, expected: str
) -> None:
    monkeypatch.setattr(stage, "BATCH_UNITS", batch)
    spec = beir(tmp_path / "beir", docs(ids, blank))
    with pytest.raises(InputError, match=rf"^datasets.b \(beir\): table 'units': {expected}$"):
        load_dataset("b", spec)
    units = tmp_path / "out" / "units.parquet"
    with pytest.raises(InputError, match=expected):
        stage.ingest_dataset("b", spec, {"units": str(units), "questions": "", "qrels": "", "report": ""})
    assert list((tmp_path / "out").iterdir()) == []  # no units.parquet, no partial file


def test_a_hash_collision_falls_back_to_the_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Equal hashes only send the ids themselves to the exact check: distinct ids pass."""
    monkeypatch.setattr(stage, "BATCH_UNITS", 2)
    monkeypatch.setattr(pl.Series, "hash", lambda self, *args, **kwargs: pl.Series([7] * len(self), dtype=pl.UInt64))
    assert load_dataset("b", beir(tmp_path / "beir", docs(["d1", "d2", "d3", "d9"]))).units.height == 4
