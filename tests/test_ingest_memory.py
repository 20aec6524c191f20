"""Bounded memory of the ingest stage (#16): the job streams its source files and writes units in batches, so its
peak RSS does not grow with the corpus (beyond the unit ids it keeps for the uniqueness check); and the line
readers are lazy: a bad line is reported when it is reached, after the lines before it were yielded."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from workflow_scripts.ingest import files
from workflow_scripts.core.errors import InputError

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# One ingest job as Snakemake runs it (`stage.ingest_dataset`, what `main` calls), in a fresh interpreter that
# prints its report and its peak RSS. The peak is VmHWM of /proc/self/status: the process's own address space
# since exec. (ru_maxrss would not do: Linux carries the forking parent's resident size, a pytest process of
# several hundred MiB, over exec into the child's ru_maxrss.)
JOB = """
import json, re, sys
from pathlib import Path
from workflow_scripts.ingest import stage
spec, out = json.loads(sys.argv[1]), sys.argv[2]
outputs = {key: f"{out}/{key}.parquet" for key in ("units", "questions", "qrels")} | {"report": f"{out}/report.json"}
summary = stage.ingest_dataset("memory", spec, outputs)
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1))
print(json.dumps({"report": summary, "peak_kib": peak}))
"""


def beir_corpus(folder: Path, units: int) -> dict:
    """A BEIR dataset of `units` short passages (gzip JSON Lines), 50 queries and their qrels."""
    folder.mkdir()
    with gzip.open(folder / "corpus.jsonl.gz", "wt", encoding="utf-8", compresslevel=1) as corpus:
        for index in range(units):
            text = f"passage {index} about topic {index % 97} " + "lorem ipsum dolor sit amet " * 6
            corpus.write(json.dumps({"_id": f"d{index}", "title": f"Title {index}", "text": text}) + "\n")
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": f"topic {i}?"}) + "\n"
                                                  for i in range(50)))
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(50)))
    return {"format": "beir", "corpus": str(folder / "corpus.jsonl.gz"), "queries": str(folder / "queries.jsonl"),
            "qrels": str(folder / "qrels.tsv")}


def peak_rss(spec: dict, out: Path) -> tuple[int, dict]:
    """(peak RSS in KiB of one ingest job in its own process, the job's report)."""
    out.mkdir()
    process = subprocess.run([sys.executable, "-c", JOB, json.dumps(spec), str(out)], cwd=PROJECT_ROOT,
                             capture_output=True, text=True)
    assert process.returncode == 0, process.stderr[-3000:]
    result = json.loads(process.stdout.strip().splitlines()[-1])
    return result["peak_kib"], result["report"]


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads a process's peak RSS from /proc (Linux)")
@pytest.mark.slow  # ingests two corpora in subprocesses (~3 s)
def test_peak_memory_does_not_grow_with_the_corpus(tmp_path: Path) -> None:
    """Ingest N and 4N passages: the 4N job's peak above a tiny job's (interpreter, libraries, one batch) stays
    within 1.6 times the N job's. Reading the whole corpus into memory, as ingest once did, gives about 3 times."""
    n = 20_000
    runs = {}
    for units in (100, n, 4 * n):
        rss, summary = peak_rss(beir_corpus(tmp_path / f"beir_{units}", units), tmp_path / f"out_{units}")
        assert summary["units"] == summary["groups"] == units and summary["counts"]["qrels_unknown_units"] == 0
        runs[units] = rss
    base = runs[100]
    assert runs[4 * n] - base < 1.6 * (runs[n] - base), runs


def test_read_jsonl_on_gzip_yields_lazily(tmp_path: Path) -> None:
    """The good lines come out before the bad one raises (whose message names the file and line), and the lines
    after it are never parsed."""
    path = tmp_path / "corpus.jsonl.gz"
    lines = [json.dumps({"_id": f"d{i}", "text": "x" * 100}) for i in range(3)] + ['{"_id": "d3", "text": }']
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n" + "{not json either}\n" * 50_000).encode()))
    records = files.read_jsonl(path)
    assert [(number, record["_id"]) for number, record in (next(records) for _ in range(3))] == [
        (1, "d0"), (2, "d1"), (3, "d2")]
    with pytest.raises(InputError, match=r"corpus.jsonl.gz: line 4 is not valid JSON: Expecting value \(column 23\)"):
        next(records)


def test_read_jsonl_yields_the_lines_before_a_truncated_gzip_tail(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl.gz"
    whole = gzip.compress(b"".join(json.dumps({"_id": f"d{i}", "text": f"passage {i}"}).encode() + b"\n"
                                   for i in range(20_000)))
    path.write_bytes(whole[: len(whole) // 2])
    seen = []
    with pytest.raises(InputError, match="corpus.jsonl.gz: cannot read the file: Compressed file ended"):
        for _, record in files.read_jsonl(path):
            seen.append(record["_id"])
    assert len(seen) > 1_000 and seen[:2] == ["d0", "d1"]


def test_json_list_streams_item_by_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A JSON list of records is read item by item; an invalid list is reported with the whole-file message,
    after the items before the fault were yielded."""
    monkeypatch.setattr(files, "BLOCK", 64)  # many blocks, items across block boundaries
    path = tmp_path / "corpus.json.gz"
    items = [{"title": f"T{i}", "text": "word " * (i % 40)} for i in range(200)]
    path.write_bytes(gzip.compress(json.dumps(items, indent=2).encode()))
    assert [value for _, _, value in files.read_records(path)] == items
    broken = json.dumps(items[:5], indent=1)[:-1] + ",]"  # a trailing comma after the fifth item
    path.write_bytes(broken.encode())
    records = files.read_records(path)
    assert [index for _, index, _ in (next(records) for _ in range(5))] == [0, 1, 2, 3, 4]
    with pytest.raises(InputError) as error:
        next(records)
    with pytest.raises(InputError) as whole:
        files.parse_json(broken, str(path))
    assert str(error.value) == str(whole.value) and "invalid JSON at line" in str(error.value)
