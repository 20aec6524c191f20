"""BM25 first stage on a real Lucene index built and searched by Pyserini (Anserini), as Anserini's BEIR "flat" runs.

In:  a units table (the UNITS contract) to index; a questions table (qid, group_id, text) to search.
Out: an index folder (Lucene files + `manifest.json`), and a RANKING table (qid, unit_id, rank 1..k, score) plus
     the qids whose query ranked nothing.

Both halves call Anserini's Java classes through `pyserini.pyclass.autoclass` (`io.anserini.index.SimpleIndexer`,
`io.anserini.search.SimpleSearcher`: what Pyserini's `LuceneIndexer` and `LuceneSearcher` wrap) instead of
importing `pyserini.search.lucene`, whose package imports torch, transformers and Pyserini's dense encoders
(8–10 s and ~660 MB before the first query; see benchmarks/README.md).

Index (`build_index`): one Lucene document per unit, built in-process with Anserini's `SimpleIndexer` (JsonCollection
documents; on SciFact about 1 s, faster than the `python -m pyserini.index.lucene` command, which starts a second
JVM and needs the corpus written out as files):
- `id` = unit_id: exact, stored, with doc values (Anserini breaks score ties by it);
- `contents` = title + " " + text when the unit has a title, else text ("flat", as Anserini's BEIR flat
  regressions, which join title and text with a newline: the same tokens). Analyzer: Anserini's
  DefaultEnglishAnalyzer (Lucene StandardTokenizer, English possessives, lower case, Lucene's English stop words,
  Porter stemmer), the same analyzer Pyserini's searcher applies to queries. Not stored, no positions, no document
  vectors, no raw JSON: BM25 needs none of them.
- `group` = a token naming the unit's group_id (see `group_token`), for the `group` scope filter. Anserini indexes
  extra JsonCollection fields with the contents analyzer only (no exact keyword field), so the group id is written
  as the decimal form of the first 128 bits of its SHA-256: digits pass that analyzer unchanged as one token, and
  the build checks that no two group ids of the corpus share a token, so the filter is exact.
Memory: the build holds at most RUN units at a time (`Documents`): it reads the units Parquet one record batch at a
time, writes each batch sorted by unit_id as a run of JSON lines to a scratch folder beside `index_dir`, then
merges the runs in unit_id order into Anserini's input and the streaming `units_sha256` (the same lines and hash as
`documents` / `units_sha256` of the whole table). Lucene's indexing buffer is INDEX_BUFFER_MB, inside the JVM's
fixed heap (`lucene.JVM_HEAP`); more segments are flushed than with Anserini's 4 GB default buffer, which changes
no score (BM25 statistics are index-wide) and no rank (ties break by unit_id).
The build writes into a temporary folder beside `index_dir` and renames it into place at the end: a killed build
never leaves a half index at `index_dir` (only hidden `.<name>.*.partial` and `.<name>.*.runs.partial` folders
beside it, which the next run removes).
`manifest.json` records the settings that define the index (`index_settings` = `engine_settings` + the units' count
and hash); `check_index` compares them with what the caller expects (either of the two, or any subset).

Search (`search`): BM25 (k1, b; Anserini's BEIR defaults 0.9 / 0.4; config `retrieval.bm25`) over `contents`.
- `global` scope: the whole index, `SimpleSearcher.batch_search` (Anserini's multi-threaded batch search) on
  QUERY_BATCH questions at a time: each hit it returns holds its loaded Lucene document, so one call for 1,000
  questions at k = 1000 kept a million documents alive. `threads` is passed on, but Anserini 1.7.1's
  `SimpleSearcher.batch_search` ignores it: its work-stealing pool uses all processors the JVM sees.
- `group` scope: only units of the question's own group are ranked. The query is the same bag of words as a MUST
  clause plus a Lucene FILTER clause on the group token: a FILTER clause restricts the matching documents without
  changing any score, so a unit's score is its BM25 score with the whole index's statistics (document frequencies,
  average length), exactly its score in a global search. The group ranking therefore equals a global ranking
  filtered to the group (a test checks this), and scores are comparable across scopes and groups. Questions are
  searched one after another (one Lucene query each; Pyserini has no batch call for prebuilt queries).
Scores are Lucene's BM25 scores (float32, exact as float64) and ranks follow Lucene's sort, which Anserini's
searcher requests: score descending, then unit_id ascending; ties therefore break the same way in every run and
scope. Anserini's searcher would also pass its hits through `ScoreTiesAdjusterReranker`, which rounds scores to
1e-4 and lowers each further tie by 1e-6 per position: that changes a unit's score with its position in the list
(a tied unit scored differently in group and global scope) and makes near-equal scores look tied. We give the
searcher's cascade nothing to run (`_plain_bm25`), so the table holds the scores Lucene computed.
A question whose query ranks nothing (empty, only stop words, or no term in the index/group) gets no rows and is
listed in the returned qids. `remove_query=True` is Anserini's `-removeQuery`: a hit whose unit_id equals the qid is
dropped after retrieving k hits (so such a question has k - 1 rows, as in Anserini's BEIR runs).

`SearchProcess` runs `search` (after `check_index`) in a child process of its own, for a job that also runs torch in
process (multi-step retrieval with the transformers backend): the JVM and torch's thread pool in one process crashed
there (SIGSEGV in torch, through the JVM's chained signal handler — a JVM started before a native thread pool is a
known hazard), so the JVM lives in the child and the job's process never starts it.
"""


import contextlib
import hashlib
import heapq
import json
import logging
import multiprocessing
import tempfile
import time
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import polars as pl

from workflow_scripts.core.atomic import PARTIAL_SUFFIX, atomic_folder, write_json_atomic
from workflow_scripts.core.contracts import RANKING, UNITS
from workflow_scripts.core.tables import ContractError, conform, table_batches
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.vocabulary import SCOPES
from workflow_scripts.retrieval.lucene import anserini_jar_folder, pyserini_ready
from workflow_scripts.retrieval.unit_text import unit_texts

log = logging.getLogger("ragfrontier.bm25")

MANIFEST = "manifest.json"
LAYOUT = "ragfrontier-bm25-flat-v1"
GROUP_FIELD = "group"
BATCH = 10_000  # JSON documents handed to Anserini per call
RUN = 10_000  # units per sorted run of the index build: what it holds of the corpus at a time (1M units: 100 runs)
INDEX_BUFFER_MB = 128  # Lucene's indexing RAM buffer (IndexWriterConfig.setRAMBufferSizeMB); fits lucene.JVM_HEAP
QUERY_BATCH = 100  # questions per Anserini batch_search in global scope: the loaded hits of one batch are alive
Hits = tuple[str, list[str], list[float]]  # one question: qid, unit ids and scores in Lucene's order
ANALYZER = (
    "Anserini DefaultEnglishAnalyzer: Lucene StandardTokenizer, English possessive filter, lower case, "
    "Lucene English stop words, Porter stemmer"
)
FIELDS = {
    "id": "unit_id, exact (stored, doc values for tie-breaking)",
    "contents": "title + ' ' + text (text alone when title is null), analyzed, term frequencies and norms only",
    GROUP_FIELD: "decimal of the first 128 bits of sha256(group_id), one token, for the group-scope filter",
}


def group_token(group_id: str) -> str:
    """The `group` field's value for `group_id`: one all-digit token that the English analyzer keeps unchanged."""
    return str(int.from_bytes(hashlib.sha256(group_id.encode("utf-8")).digest()[:16], "big"))


def documents(units: pl.DataFrame, title: str = "prepend") -> pl.DataFrame:
    """(id, group_id, contents) per unit, sorted by id; contents = `unit_texts` (title + " " + text by default)."""
    contents = pl.Series("contents", unit_texts(units, title), dtype=pl.String)
    return units.select(pl.col("unit_id").alias("id"), "group_id").with_columns(contents).sort("id")


def units_sha256(docs: pl.DataFrame) -> str:
    """SHA-256 of the JSON lines [id, group_id, contents] in id order: changes whenever a unit's index entry does."""
    digest = hashlib.sha256()
    for row in docs.iter_rows():
        digest.update(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


def lucene_version() -> str:
    pyserini_ready()
    from pyserini.pyclass import autoclass

    return str(autoclass("org.apache.lucene.util.Version").LATEST.toString())


def engine_settings() -> dict[str, Any]:
    """The settings that define how any index is built (code and library versions), whatever the units."""
    return {
        "layout": LAYOUT,
        "analyzer": ANALYZER,
        "fields": FIELDS,
        "stored": ["id"],
        "pyserini": metadata.version("pyserini"),
        "anserini_jar": sorted(path.name for path in anserini_jar_folder().glob("anserini-*-fatjar.jar")),
        "lucene": lucene_version(),
    }


def index_settings(units: pl.DataFrame, title: str = "prepend") -> dict[str, Any]:
    """All settings that define an index of `units` (what `manifest.json` records and `check_index` compares)."""
    return _settings(documents(conform(units, UNITS), title))


def _settings(docs: pl.DataFrame) -> dict[str, Any]:
    return {
        **engine_settings(),
        "units": docs.height,
        "groups": docs["group_id"].n_unique(),
        "units_sha256": units_sha256(docs),
    }


def _check_groups(group_ids: pl.Series) -> int:
    """The number of distinct group ids; InputError when two of them share a group token."""
    tokens = group_ids.unique().map_elements(group_token, return_dtype=pl.String)
    if tokens.len() != tokens.n_unique():
        raise InputError("units: two group_ids share a BM25 group token (a 128-bit hash collision); rename one")
    return tokens.len()


def _unit_batches(units: pl.DataFrame | Path) -> Iterator[pl.DataFrame]:
    """The units in slices of at most RUN rows, each checked against the UNITS contract; a Parquet file is read
    one record batch at a time (pyarrow), so its texts are never all in memory."""
    if isinstance(units, pl.DataFrame):
        yield from conform(units, UNITS).iter_slices(RUN)
        return
    yield from table_batches(units, UNITS, rows=RUN)


class Documents:
    """(id, group_id, contents) of every unit in id order (`documents`' rows, `units_sha256`'s lines), holding at
    most RUN units at a time: each slice of the units is sorted by id and written as a run of JSON lines to
    `scratch`, then `lines()` merges the runs. Checks the units on the way (blank texts, group tokens, unit ids
    repeated across slices) and counts them."""

    def __init__(self, units: pl.DataFrame | Path, title: str, scratch: Path):
        self.runs: list[Path] = []
        self.count = 0
        blank: list[str] = []
        groups: list[pl.Series] = []
        for batch in _unit_batches(units):
            docs = documents(batch, title)
            blank += docs.filter(pl.col("contents").str.strip_chars() == "")["id"].to_list()
            groups.append(docs["group_id"].unique())
            self.runs.append(scratch / f"run-{len(self.runs):05d}.jsonl")
            with self.runs[-1].open("wb") as run:
                for row in docs.iter_rows():
                    run.write(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
            self.count += docs.height
        if blank:
            raise InputError(
                f"units: {len(blank)} units have no text to index, e.g. {sorted(blank)[:5]}; fix the ingest output"
            )
        self.groups = _check_groups(pl.concat(groups) if groups else pl.Series("group_id", [], pl.String))

    def lines(self) -> Iterator[tuple[bytes, list[str]]]:
        """(JSON line of [id, group_id, contents] with its newline, the row) for every unit, in id order."""
        with contextlib.ExitStack() as stack:
            runs = [_run_rows(stack.enter_context(path.open("rb"))) for path in self.runs]
            previous = None
            for line, row in heapq.merge(*runs, key=lambda item: item[1][0]):
                if row[0] == previous:
                    raise ContractError(f"table 'units': unit_id {row[0]!r} appears more than once")
                previous = row[0]
                yield line, row


def _run_rows(run: IO[bytes]) -> Iterator[tuple[bytes, list[str]]]:
    for line in run:
        yield line, json.loads(line)


def _document_lines(lines: Iterable[tuple[bytes, list[str]]], digest: Any) -> Iterator[list[str]]:
    """JsonCollection documents {"id", "contents", "group"} as JSON strings, in batches of BATCH; every line of
    `lines` is added to `digest` on the way (the streaming `units_sha256`)."""
    batch: list[str] = []
    for line, (unit_id, group_id, contents) in lines:
        digest.update(line)
        document = {"id": unit_id, "contents": contents, GROUP_FIELD: group_token(group_id)}
        batch.append(json.dumps(document, ensure_ascii=False))
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _write_lucene(batches: Iterable[list[str]], folder: Path, threads: int) -> None:
    """Anserini's SimpleIndexer with the arguments Pyserini's `LuceneIndexer(args=...)` passes, and an indexing
    buffer of INDEX_BUFFER_MB (Anserini's default, 4,096 MB, is more than the JVM's heap, see lucene.JVM_HEAP)."""
    from pyserini.pyclass import autoclass

    args = ["-index", str(folder), "-fields", GROUP_FIELD, "-input", "", "-collection", "JsonCollection"]
    indexer = autoclass("io.anserini.index.SimpleIndexer")(
        [*args, "-threads", str(threads), "-memoryBuffer", str(INDEX_BUFFER_MB)]
    )
    for lines in batches:
        indexer.addRawDocuments(lines)
    indexer.close()


def _indexed_count(folder: Path) -> int:
    from pyserini.pyclass import autoclass

    reader = autoclass("org.apache.lucene.index.DirectoryReader").open(
        autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.nio.file.Paths").get(str(folder)))
    )
    try:
        return int(reader.numDocs())
    finally:
        reader.close()


def build_index(
    units: pl.DataFrame | Path, index_dir: Path, threads: int, title: str = "prepend"
) -> dict[str, Any]:
    """Index `units` (a UNITS table, or the path of its Parquet file, read in batches) at `index_dir` (atomically)
    and return the manifest written there. At most RUN units' texts are in memory at a time (see `Documents`)."""
    if threads < 1:
        raise InputError(f"bm25 index: threads must be at least 1, got {threads}")
    started = time.monotonic()
    index_dir = Path(index_dir)
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    # the sorted runs' scratch folder is named like an atomic write's partial, so the one a killed build leaves is
    # removed by the next run (atomic.remove_partials, the Snakefile's onstart)
    with tempfile.TemporaryDirectory(prefix=f".{index_dir.name}.", suffix=f".runs{PARTIAL_SUFFIX}",
                                     dir=index_dir.parent) as scratch:
        docs = Documents(units, title, Path(scratch))
        engine = engine_settings()
        digest = hashlib.sha256()
        with atomic_folder(index_dir) as building:
            _write_lucene(_document_lines(docs.lines(), digest), building, threads)
            indexed = _indexed_count(building)
            if indexed != docs.count:
                raise InputError(
                    f"bm25 index {index_dir}: Anserini indexed {indexed} documents for {docs.count} units (it skips "
                    f"documents it considers empty); check the units table"
                )
            settings = {**engine, "units": docs.count, "groups": docs.groups, "units_sha256": digest.hexdigest()}
            manifest = {**settings, "build": {"threads": threads, "seconds": round(time.monotonic() - started, 2)}}
            write_json_atomic(manifest, building / MANIFEST)
    return manifest


def read_manifest(index_dir: Path) -> dict[str, Any]:
    path = Path(index_dir) / MANIFEST
    if not path.is_file():
        raise InputError(
            f"bm25 index {index_dir}: no {MANIFEST}; it was not built by build_index — delete it and rebuild"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def check_index(index_dir: Path, expected: dict[str, Any]) -> None:
    """InputError naming every setting where the index's manifest differs from `expected` (a stale index)."""
    manifest = read_manifest(index_dir)
    differing = [key for key in expected if manifest.get(key) != expected[key]]
    if differing:
        details = "; ".join(
            f"{key}: index has {manifest.get(key)!r}, config asks {expected[key]!r}" for key in differing
        )
        raise InputError(
            f"bm25 index {index_dir} is stale ({details}); delete the folder so that it is rebuilt from the units"
        )


def _check_questions(questions: pl.DataFrame, k: int, scope: str) -> None:
    if scope not in SCOPES:
        raise InputError(f"bm25 search: scope must be one of {list(SCOPES)}, got {scope!r}")
    if k < 1:
        raise InputError(f"bm25 search: k must be at least 1, got {k}")
    missing = [name for name in ("qid", "group_id", "text") if name not in questions.columns]
    if missing:
        raise InputError(f"bm25 search: the questions table lacks columns {missing}")
    if questions["qid"].n_unique() != questions.height:
        raise InputError("bm25 search: the questions table repeats qids; each question must appear once")


def _plain_bm25(searcher: Any, k1: float, b: float) -> None:
    """BM25(k1, b) with Lucene's own scores: empty the searcher's reranker cascade, which holds only Anserini's
    ScoreTiesAdjusterReranker (score rounding and tie perturbation). `cascade` and its `rerankers` list are
    non-public fields of this searcher's own objects; pyjnius reads them as Pyserini itself reads the protected
    `reader` field. (Assigning a new, empty cascade to the field through pyjnius made the JVM segfault a few calls
    later in our tests; clearing the existing list is a plain Java method call.)"""
    searcher.set_bm25(float(k1), float(b))
    searcher.cascade.rerankers.clear()


def _global_hits(searcher: Any, questions: pl.DataFrame, k: int, threads: int) -> Iterator[Hits]:
    """Anserini's batch search, QUERY_BATCH questions at a time: each hit it returns holds its loaded Lucene
    document, so one call for all questions kept questions × k documents alive at once (1,000 × 1,000 at scale)."""
    from pyserini.pyclass import autoclass

    for batch in questions.select("qid", "text").iter_slices(QUERY_BATCH):
        qids = batch["qid"].to_list()
        texts, ids = autoclass("java.util.ArrayList")(), autoclass("java.util.ArrayList")()
        for qid, text in zip(qids, batch["text"].to_list()):
            texts.add(text)
            ids.add(qid)
        results = searcher.batch_search(texts, ids, int(k), int(threads))
        for qid in qids:
            hits = results.get(qid)
            yield qid, [hit.docid for hit in hits], [hit.score for hit in hits]


def _group_hits(searcher: Any, questions: pl.DataFrame, k: int) -> Iterator[Hits]:
    from pyserini.pyclass import autoclass

    builder = autoclass("org.apache.lucene.search.BooleanQuery$Builder")
    occur = autoclass("org.apache.lucene.search.BooleanClause$Occur")
    term_query = autoclass("org.apache.lucene.search.TermQuery")
    term = autoclass("org.apache.lucene.index.Term")
    bag_of_words = autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
    analyzer = searcher.get_analyzer()
    for qid, group_id, text in questions.select("qid", "group_id", "text").iter_rows():
        query = builder()
        query.add(bag_of_words.buildQuery("contents", analyzer, text), occur.MUST)
        query.add(term_query(term(GROUP_FIELD, group_token(group_id))), occur.FILTER)
        hits = searcher.search(query.build(), k)
        yield qid, [hit.docid for hit in hits], [hit.score for hit in hits]


def _ranking(hits: Iterable[Hits], remove_query: bool) -> pl.DataFrame:
    """RANKING rows from per-question hits given in question order: sorted by question, score desc, unit_id asc."""
    qids: list[str] = []
    unit_ids: list[str] = []
    scores: list[float] = []
    for qid, units, unit_scores in hits:
        qids.extend([qid] * len(units))
        unit_ids.extend(units)
        scores.extend(unit_scores)
    table = pl.DataFrame(
        {"qid": qids, "unit_id": unit_ids, "score": scores},
        schema={"qid": pl.String, "unit_id": pl.String, "score": pl.Float64},
    )
    if remove_query:
        table = table.filter(pl.col("unit_id") != pl.col("qid"))
    table = (
        table.with_columns(pl.col("qid").rle_id().alias("question"))
        .sort(["question", "score", "unit_id"], descending=[False, True, False])
        .with_columns(pl.int_range(1, pl.len() + 1).over("question").alias("rank"))
    )
    return conform(table.select("qid", "unit_id", "rank", "score"), RANKING)


def search(
    index_dir: Path,
    questions: pl.DataFrame,
    k: int,
    scope: str,
    k1: float = 0.9,
    b: float = 0.4,
    threads: int = 1,
    remove_query: bool = False,
) -> tuple[pl.DataFrame, list[str]]:
    """Rank units for every question; return (RANKING table, qids whose query ranked nothing, in question order)."""
    _check_questions(questions, k, scope)
    read_manifest(index_dir)
    pyserini_ready()
    from pyserini.pyclass import autoclass

    searcher = autoclass("io.anserini.search.SimpleSearcher")(str(index_dir))
    try:
        _plain_bm25(searcher, k1, b)
        hits = (
            _global_hits(searcher, questions, k, threads) if scope == "global" else _group_hits(searcher, questions, k)
        )
        ranking = _ranking(hits, remove_query)
    finally:
        searcher.close()
    ranked = set(ranking["qid"].unique().to_list())
    return ranking, [qid for qid in questions["qid"].to_list() if qid not in ranked]


def _serve(connection: Any, index_dir: str, expected: dict[str, Any] | None, k1: float, b: float, threads: int) -> None:
    """The child of `SearchProcess`: check the index, then answer (questions, k, scope) with `search`'s result (or
    the exception it raised) until told to stop (None) or the parent is gone."""
    try:
        if expected is not None:
            check_index(Path(index_dir), {**engine_settings(), **expected})
        connection.send(None)
    except Exception as error:  # noqa: BLE001 — handed to the parent, which raises it
        connection.send(error)
        return
    while True:
        try:
            message = connection.recv()
        except EOFError:  # the parent died
            return
        if message is None:
            return
        questions, k, scope = message
        try:
            connection.send(search(Path(index_dir), questions, k, scope, k1=k1, b=b, threads=threads))
        except Exception as error:  # noqa: BLE001
            connection.send(error)


class SearchProcess:
    """`search` in a child process that holds the JVM (see the module docstring); a context manager that checks the
    index against `engine_settings` (plus `expected`) when it starts and stops the child when it ends, also on an
    error."""

    def __init__(self, index_dir: Path, k1: float = 0.9, b: float = 0.4, threads: int = 1,
                 expected: dict[str, Any] | None = None):
        self.arguments = (str(index_dir), expected if expected is not None else {}, k1, b, threads)

    def __enter__(self) -> "SearchProcess":
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, *self.arguments), daemon=True)
        self.process.start()
        child.close()
        self._answer()
        return self

    def _answer(self) -> Any:
        answer = self.connection.recv()
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def search(self, questions: pl.DataFrame, k: int, scope: str) -> tuple[pl.DataFrame, list[str]]:
        self.connection.send((questions, k, scope))
        return self._answer()

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self.connection.send(None)
        self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.connection.close()
