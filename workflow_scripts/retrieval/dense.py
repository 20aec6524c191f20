"""Dense retrieval: cached embeddings, FAISS indexes, and global or per-group cosine search.

In:  texts and a SentenceTransformer loaded by `workflow_scripts.core.models` (for its fingerprint); unit ids,
     groups and vectors in the units table's row order; questions (qid, group_id, text) with their vectors.
Out: L2-normalized float32 embeddings (cosine = inner product); a FAISS index whose row i is unit i; a RANKING
     table (qid, unit_id, rank 1..k, score = cosine) plus the qids skipped because their text is empty.

Embedding cache: a folder of EMBEDDING_CACHE Parquet shards (see `models.append_cache`), key =
sha256(model fingerprint + "\\0" + text). Only texts missing from it are encoded, in chunks of `flush_every`
texts, each chunk appended as its own shard as soon as it is encoded, so an interrupted run resumes where it
stopped and a rerun with unchanged texts encodes nothing. Vectors are stored as the model returned them and
normalized on the way out.
"""

import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import polars as pl
from threadpoolctl import threadpool_limits

from workflow_scripts.core import models
from workflow_scripts.core.atomic import atomic_file
from workflow_scripts.core.cache import append_cache, content_key, read_cache
from workflow_scripts.core.contracts import EMBEDDING_CACHE, QUESTIONS, QUESTION_VECTORS, RANKING, UNITS, UNIT_VECTORS
from workflow_scripts.core.tables import TableWriter, conform, table_batches, table_rows
from workflow_scripts.core.errors import InputError
from workflow_scripts.core.models import model_fingerprint
from workflow_scripts.core.shards import Shard, owned_batches
from workflow_scripts.core.vocabulary import DENSE_INDEX_KINDS, SCOPES
from workflow_scripts.retrieval.unit_text import unit_texts

log = logging.getLogger(__name__)

INDEX_PARAMS = {  # each kind of DENSE_INDEX_KINDS and its parameters
    "flat": set(), "ivf": {"nlist", "nprobe"}, "hnsw": {"M", "efConstruction", "efSearch"}}


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm as float32 (an all-zero row stays zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _to_matrix(column: pl.Series, dim: int) -> np.ndarray:
    return column.list.explode().to_numpy().astype(np.float32).reshape(len(column), dim)


def embed_texts(
    texts: Sequence[str], model: Any, cache_dir: Path, batch_size: int = 64, flush_every: int = 4096
) -> np.ndarray:
    """Normalized embeddings of `texts` (one row each, in order), encoding only texts not in the cache."""
    dim = model.get_embedding_dimension()
    fingerprint = model_fingerprint(model)
    keys = [content_key(fingerprint, text) for text in texts]
    cached = read_cache(cache_dir, set(keys), EMBEDDING_CACHE)
    found = dict(zip(cached["key"].to_list(), _to_matrix(cached["vector"], dim)))
    missing = {key: text for key, text in zip(keys, texts) if key not in found}
    missing_keys = list(missing)
    for start in range(0, len(missing_keys), flush_every):
        chunk = missing_keys[start : start + flush_every]
        encoded = model.encode(
            [missing[key] for key in chunk], batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False
        ).astype(np.float32)
        vectors = pl.Series("vector", encoded, dtype=pl.Array(pl.Float32, dim)).cast(pl.List(pl.Float32))
        append_cache(cache_dir, pl.DataFrame({"key": chunk, "vector": vectors}), EMBEDDING_CACHE)
        found.update(zip(chunk, encoded))
    log.info("embeddings: %d texts, %d encoded, the rest from %s", len(texts), len(missing), cache_dir)
    if not keys:
        return np.zeros((0, dim), dtype=np.float32)
    return normalize(np.stack([found[key] for key in keys]))


def build_index(vectors: np.ndarray, kind: str = "flat", params: Mapping[str, int] | None = None) -> faiss.Index:
    """An inner-product FAISS index over normalized `vectors` (row i = unit i).

    kind "flat": exact. "ivf": IndexIVFFlat, params nlist (default 4·√n, at most n) and nprobe (default 8).
    "hnsw": IndexHNSWFlat, params M (32), efConstruction (80), efSearch (64). The search-time settings
    (nprobe, efSearch) are stored in the index and survive `save_index`/`load_index`.
    """
    params = dict(params or {})
    if kind not in INDEX_PARAMS:
        raise InputError(f"dense index kind '{kind}' is unknown; use one of {list(DENSE_INDEX_KINDS)}")
    unknown = set(params) - INDEX_PARAMS[kind]
    if unknown:
        raise InputError(
            f"dense index '{kind}': unknown parameters {sorted(unknown)}; allowed: {sorted(INDEX_PARAMS[kind])}"
        )
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    count, dim = vectors.shape
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "ivf":
        nlist = int(params.get("nlist", max(1, min(count, round(4 * count**0.5)))))
        if not 1 <= nlist <= count:
            raise InputError(f"dense index 'ivf': nlist={nlist} must be between 1 and the number of vectors ({count})")
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.train(vectors)
        index.nprobe = int(params.get("nprobe", 8))
    else:
        index = faiss.IndexHNSWFlat(dim, int(params.get("M", 32)), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = int(params.get("efConstruction", 80))
        index.hnsw.efSearch = int(params.get("efSearch", 64))
    index.add(vectors)
    return index


def save_index(index: faiss.Index, path: Path) -> None:
    """Write a FAISS index at `path` atomically."""
    with atomic_file(path) as temporary:
        faiss.write_index(index, str(temporary))


def load_index(path: Path) -> faiss.Index:
    """Read a FAISS index written by `save_index`; a missing or unreadable file is an InputError."""
    if not Path(path).is_file():
        raise InputError(f"dense index {path} does not exist; rebuild it (the index_dense rule)")
    try:
        return faiss.read_index(str(path))
    except RuntimeError as error:
        raise InputError(f"dense index {path} cannot be read ({error}); delete it and rebuild it") from None


def _top_k(candidates: np.ndarray, scores: np.ndarray, id_order: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best candidates by score descending, ties by unit_id ascending (`id_order` = rank of the id)."""
    order = np.lexsort((id_order[candidates], -scores))[:k]
    return candidates[order], scores[order]


def search(
    questions: pl.DataFrame,
    query_vectors: np.ndarray,
    unit_ids: Sequence[str],
    unit_groups: Sequence[str],
    unit_vectors: np.ndarray | None,
    index: faiss.Index | None,
    k: int,
    scope: str,
) -> tuple[pl.DataFrame, list[str]]:
    """Rank units for each question by cosine; return (RANKING table, qids skipped for empty text).

    `questions` has qid, group_id, text; row i matches `query_vectors[i]`. Units are given in index row order.
    scope "global": candidates from `index` (exact numpy search over all units when None), each rescored by
    the exact inner product, so an approximate index only changes which units are found, never their score; the
    candidates' vectors come from `unit_vectors`, or, when it is None, from the index, which stores them as given.
    scope "group": exact inner product against the question's own group's units only (fewer than k rows when
    the group is smaller). Ties: score descending, then unit_id ascending.
    """
    if scope not in SCOPES:
        raise InputError(f"retrieval scope '{scope}' is unknown; use one of {list(SCOPES)}")
    unit_ids = np.asarray(unit_ids, dtype=object)
    if unit_vectors is None:
        if index is None or scope != "global":
            raise ValueError("dense.search needs the unit vectors unless it searches an index globally")
        ivf = faiss.try_extract_index_ivf(index)
        if ivf is not None:
            ivf.make_direct_map()  # lets an IVF index give back a stored vector by its row
        rows_of = lambda candidates: index.reconstruct_batch(candidates)
    else:
        unit_vectors = np.asarray(unit_vectors, dtype=np.float32)
        rows_of = lambda candidates: unit_vectors[candidates]
    query_vectors = np.asarray(query_vectors, dtype=np.float32)
    if index is not None and index.ntotal != len(unit_ids):
        raise InputError(
            f"dense index has {index.ntotal} vectors but there are {len(unit_ids)} units; rebuild the index"
        )
    id_order = np.empty(len(unit_ids), dtype=np.int64)
    id_order[np.argsort(unit_ids.astype(str), kind="stable")] = np.arange(len(unit_ids))
    empty = [qid for qid, text in zip(questions["qid"], questions["text"]) if not text.strip()]
    live = [row for row, text in enumerate(questions["text"]) if text.strip()]
    qids = questions["qid"].to_list()
    results: list[tuple[int, np.ndarray, np.ndarray]] = []
    if scope == "global" and live and len(unit_ids):
        fetch = min(len(unit_ids), 2 * k)
        if index is None:
            scores = query_vectors[live] @ unit_vectors.T
            candidate_rows = np.argpartition(-scores, fetch - 1, axis=1)[:, :fetch]
        else:
            candidate_rows = index.search(np.ascontiguousarray(query_vectors[live]), fetch)[1]
        with threadpool_limits(1, user_api="blas"):  # many tiny products: BLAS threads only add overhead
            for row, candidates in zip(live, candidate_rows):
                candidates = candidates[candidates >= 0]
                results.append((row, *_top_k(candidates, rows_of(candidates) @ query_vectors[row], id_order, k)))
    elif scope == "group":
        members: dict[str, list[int]] = {}
        for position, group in enumerate(unit_groups):
            members.setdefault(group, []).append(position)
        groups = questions["group_id"].to_list()
        with threadpool_limits(1, user_api="blas"):
            for row in live:
                candidates = np.asarray(members.get(groups[row], []), dtype=np.int64)
                results.append((row, *_top_k(candidates, unit_vectors[candidates] @ query_vectors[row], id_order, k)))
    ranking = pl.DataFrame(
        {
            "qid": [qids[row] for row, found, _ in results for _ in found],
            "unit_id": [unit_ids[i] for _, found, _ in results for i in found],
            "rank": [rank for _, found, _ in results for rank in range(1, len(found) + 1)],
            "score": np.concatenate([scores for _, _, scores in results]).astype(np.float64) if results else [],
        },
        schema={"qid": pl.String, "unit_id": pl.String, "rank": pl.Int32, "score": pl.Float64},
    )
    if empty:
        log.info("dense search: %d questions with empty text skipped: %s", len(empty), empty[:5])
    return conform(ranking, RANKING), empty


def _with_vectors(table: pl.DataFrame, vectors: np.ndarray) -> pl.DataFrame:
    return table.with_columns(pl.Series("vector", list(vectors), dtype=pl.List(pl.Float32)))


def embed_units(units: str, questions: str, unit_vectors: str, question_vectors: str, spec: Mapping[str, Any],
                title: str, cache: Path, shard: Shard | None) -> None:
    """Rule embed_units' work: units and questions → unit_vectors (row order = units order = dense index order) and
    question_vectors, with the embedder `spec` (models.embedder); the one job per dataset that loads the embedding
    model, so searching needs only FAISS. Streams: a batch of the (owned, when sharded) units is read, embedded and
    written before the next is read."""
    model, batch_size = models.sentence_transformer(spec["model"], device=spec["device"]), spec["batch_size"]
    for path, contract, column, what, texts, output, written in (
        (units, UNITS, "unit_id", "units", lambda rows: unit_texts(rows, title), unit_vectors, UNIT_VECTORS),
        (questions, QUESTIONS, "qid", None, lambda rows: rows["text"].to_list(), question_vectors, QUESTION_VECTORS),
    ):
        with TableWriter(output, written) as writer:
            for rows in owned_batches(path, contract, column, shard, what):
                ids = rows.select([name for name in written.columns if name != "vector"])
                writer.write(_with_vectors(ids, embed_texts(texts(rows), model, cache, batch_size)))


def _vectors(table: pl.DataFrame) -> np.ndarray:
    return _to_matrix(table["vector"], len(table["vector"][0])) if table.height else np.zeros((0, 0), np.float32)


def vector_batches(path: str | Path) -> Iterator[np.ndarray]:
    """The unit vectors of a UNIT_VECTORS table as float32 matrices, one row-group-sized batch at a time."""
    for batch in table_batches(path, UNIT_VECTORS, columns=["vector"]):
        if batch.height:
            yield _vectors(batch)


def read_vectors(path: str | Path) -> np.ndarray:
    """All unit vectors of a UNIT_VECTORS table as one float32 matrix, filled batch by batch (no other copy)."""
    count = table_rows(path)
    matrix: np.ndarray | None = None
    start = 0
    for batch in vector_batches(path):
        if matrix is None:
            matrix = np.empty((count, batch.shape[1]), dtype=np.float32)
        matrix[start : start + len(batch)] = batch
        start += len(batch)
    return matrix if matrix is not None else np.zeros((0, 0), np.float32)


def index_dense(vectors: str, spec: Mapping[str, Any], output: Path) -> None:
    """Rule index_dense's work: unit_vectors → FAISS index (flat / IVF / HNSW, as `spec` says: retrieval.dense_index).
    A flat index is filled batch by batch (the job holds the index and one batch); IVF trains on all vectors and HNSW
    links them in one `add`, as before, so those two hold the vectors once besides the index."""
    params = {
        "flat": {},
        "ivf": {"nlist": spec["nlist"], "nprobe": spec["nprobe"]},
        "hnsw": {"M": spec["hnsw_m"], "efSearch": spec["ef_search"]},
    }[spec["kind"]]
    if spec["kind"] == "flat":
        index = None
        for batch in vector_batches(vectors):
            if index is None:
                index = build_index(batch[:0], "flat")
                # the storage allocated once for every vector (grown, then emptied: a std::vector keeps its
                # capacity), so no `add` reallocates it, which would hold the old and the new storage at once
                index.codes.resize(table_rows(vectors) * index.code_size)
                index.codes.resize(0)
            index.add(np.ascontiguousarray(batch))
        if index is None:
            index = build_index(np.zeros((0, 0), np.float32), "flat")
    else:
        index = build_index(read_vectors(vectors), spec["kind"], params)
    save_index(index, output)


def retrieve_dense(
    asked: pl.DataFrame,
    embedded: pl.DataFrame,
    units: pl.DataFrame,
    unit_vectors: np.ndarray | None,
    index: faiss.Index | None,
    scope: str,
    depth: int,
    files: tuple[str, str] = ("the question vectors", "the questions"),
) -> tuple[pl.DataFrame, list[str]]:
    """Rule retrieve_dense's work: the questions (QUESTIONS), their vectors (QUESTION_VECTORS, in the questions'
    order), the units' ids (and group_id for group scope) with their vectors (group scope) or the FAISS `index`
    (global scope) → the first-stage RANKING and the questions with empty text. Global scope needs no vector matrix:
    candidates are rescored with their vectors as the index stores them (the very floats of unit_vectors), so the
    job holds the index, not a second copy of it. `files` names the vectors' and the questions' files in errors."""
    if embedded["qid"].to_list() != asked["qid"].to_list():
        raise InputError(f"{files[0]} does not list the questions of {files[1]} in order; rerun embed_units")
    unit_groups = units["group_id"].to_list() if scope != "global" else []
    ranking, empty = search(asked, _vectors(embedded), units["unit_id"].to_list(), unit_groups, unit_vectors, index,
                            depth, scope)
    log.info("dense %s: %d questions ranked, %d with empty text", scope, ranking["qid"].n_unique(), len(empty))
    return ranking, empty
