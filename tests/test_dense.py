"""Dense retrieval: real MiniLM embeddings, the content-addressed embedding cache (counted encoder calls), FAISS
indexes against exact numpy search, per-group scope, deterministic ties and empty questions."""



from pathlib import Path

import numpy as np
import polars as pl
import pytest

from workflow_scripts.core import models
from workflow_scripts.core.errors import InputError
from workflow_scripts.retrieval import dense


@pytest.fixture(scope="module")
def minilm():
    return models.sentence_transformer("sentence-transformers/all-MiniLM-L6-v2")


@pytest.fixture
def encoded(minilm, monkeypatch) -> list[str]:
    """Every text the model encodes, in order (the model's encode is wrapped, not replaced)."""
    calls: list[str] = []
    original = minilm.encode

    def counting(texts, **kwargs):
        calls.extend(texts)
        return original(texts, **kwargs)

    monkeypatch.setattr(minilm, "encode", counting)
    return calls


def test_paraphrase_ranks_above_unrelated_text(minilm, tmp_path):
    texts = ["A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell sharply today."]
    vectors = dense.embed_texts(texts, minilm, tmp_path, batch_size=8)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3


def test_cache_encodes_only_missing_texts(minilm, encoded, tmp_path):
    texts = ["alpha particles", "beta decay", "gamma rays", "beta decay", "delta waves"]
    first = dense.embed_texts(texts, minilm, tmp_path)
    assert encoded == ["alpha particles", "beta decay", "gamma rays", "delta waves"]
    np.testing.assert_array_equal(first[1], first[3])

    encoded.clear()
    again = dense.embed_texts(texts, minilm, tmp_path)
    assert encoded == []
    np.testing.assert_array_equal(again, first)

    changed = ["alpha particles", "beta decay", "gamma radiation", "beta decay", "delta waves"]
    third = dense.embed_texts(changed, minilm, tmp_path)
    assert encoded == ["gamma radiation"]
    np.testing.assert_array_equal(third[[0, 1, 3, 4]], first[[0, 1, 3, 4]])
    fresh = dense.normalize(minilm.encode(["gamma radiation"]))
    np.testing.assert_allclose(third[2], fresh[0], atol=1e-6)
    assert len(list(Path(tmp_path).glob("*.parquet"))) == 2


def test_interrupted_embedding_resumes_from_written_shards(minilm, encoded, monkeypatch, tmp_path):
    texts = [f"sentence number {i}" for i in range(5)]
    counting = minilm.encode

    def failing_on_second_chunk(texts, **kwargs):
        if encoded:
            raise KeyboardInterrupt
        return counting(texts, **kwargs)

    monkeypatch.setattr(minilm, "encode", failing_on_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        dense.embed_texts(texts, minilm, tmp_path, flush_every=2)
    assert encoded == texts[:2]
    monkeypatch.setattr(minilm, "encode", counting)
    encoded.clear()
    dense.embed_texts(texts, minilm, tmp_path, flush_every=2)
    assert encoded == texts[2:]


def _corpus(seed: int = 7, units: int = 300, dim: int = 24, queries: int = 12):
    rng = np.random.default_rng(seed)
    unit_vectors = dense.normalize(rng.normal(size=(units, dim)))
    unit_ids = [f"u{i}" for i in range(units)]
    unit_groups = [f"g{i % 3}" for i in range(units)]
    query_vectors = dense.normalize(rng.normal(size=(queries, dim)))
    questions = pl.DataFrame(
        {"qid": [f"q{i}" for i in range(queries)], "group_id": [f"g{i % 3}" for i in range(queries)],
         "text": [f"question {i}" for i in range(queries)]}
    )
    return questions, query_vectors, unit_ids, unit_groups, unit_vectors


def _brute_force(query, unit_ids, unit_vectors, allowed, k):
    """Exact float64 ranking of the allowed units: score descending, unit_id ascending."""
    scored = [(-float(unit_vectors[i].astype(np.float64) @ query), unit_ids[i]) for i in allowed]
    return [(unit_id, -score) for score, unit_id in sorted(scored)[:k]]


def _ranked(ranking: pl.DataFrame, qid: str) -> list[tuple[str, float]]:
    rows = ranking.filter(pl.col("qid") == qid).sort("rank")
    assert rows["rank"].to_list() == list(range(1, rows.height + 1))
    return list(zip(rows["unit_id"], rows["score"]))


def _assert_same(found, expected):
    assert [unit for unit, _ in found] == [unit for unit, _ in expected]
    np.testing.assert_allclose([s for _, s in found], [s for _, s in expected], atol=1e-5)


def test_group_scope_ranks_only_the_group_units_exactly():
    questions, query_vectors, unit_ids, unit_groups, unit_vectors = _corpus()
    ranking, empty = dense.search(questions, query_vectors, unit_ids, unit_groups, unit_vectors, None, 10, "group")
    assert empty == [] and ranking.height == 12 * 10
    for row, (qid, group) in enumerate(zip(questions["qid"], questions["group_id"])):
        allowed = [i for i, g in enumerate(unit_groups) if g == group]
        _assert_same(_ranked(ranking, qid), _brute_force(query_vectors[row], unit_ids, unit_vectors, allowed, 10))


def test_small_group_returns_all_its_units_and_ties_break_by_unit_id():
    vectors = dense.normalize(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.1]]))
    questions = pl.DataFrame({"qid": ["q1"], "group_id": ["paper"], "text": ["what?"]})
    ranking, _ = dense.search(
        questions, np.array([[1.0, 0.0]]), ["u9", "u10", "u2", "other"], ["paper"] * 3 + ["elsewhere"],
        vectors, None, 30, "group",
    )
    assert ranking["unit_id"].to_list() == ["u10", "u9", "u2"]


def test_flat_index_equals_exact_numpy_search(tmp_path):
    questions, query_vectors, unit_ids, unit_groups, unit_vectors = _corpus()
    index = dense.build_index(unit_vectors, "flat")
    dense.save_index(index, tmp_path / "flat.faiss")
    loaded = dense.load_index(tmp_path / "flat.faiss")
    with_index, _ = dense.search(questions, query_vectors, unit_ids, unit_groups, unit_vectors, loaded, 10, "global")
    exact, _ = dense.search(questions, query_vectors, unit_ids, unit_groups, unit_vectors, None, 10, "global")
    assert with_index.equals(exact)
    from_index, _ = dense.search(questions, query_vectors, unit_ids, unit_groups, None, loaded, 10, "global")
    assert from_index.equals(exact)
    for row, qid in enumerate(questions["qid"]):
        _assert_same(_ranked(with_index, qid), _brute_force(query_vectors[row], unit_ids, unit_vectors, range(300), 10))


@pytest.mark.parametrize("kind, params", [("ivf", {"nlist": 16, "nprobe": 4}), ("hnsw", {"M": 16, "efSearch": 64})])
def test_approximate_indexes_run_and_survive_a_round_trip(tmp_path, kind, params):
    questions, query_vectors, unit_ids, unit_groups, unit_vectors = _corpus()
    index = dense.build_index(unit_vectors, kind, params)
    dense.save_index(index, tmp_path / f"{kind}.faiss")
    loaded = dense.load_index(tmp_path / f"{kind}.faiss")
    found, _ = dense.search(questions, query_vectors, unit_ids, unit_groups, unit_vectors, index, 10, "global")
    again, _ = dense.search(questions, query_vectors, unit_ids, unit_groups, unit_vectors, loaded, 10, "global")
    assert found.equals(again) and found.height == 12 * 10
    # the search job reads no unit vectors: the index gives back the very floats it was built from
    from_index, _ = dense.search(questions, query_vectors, unit_ids, unit_groups, None, loaded, 10, "global")
    assert from_index.equals(found)
    exact, _ = dense.search(questions, query_vectors, unit_ids, unit_groups, unit_vectors, None, 10, "global")
    joined = found.join(exact, on=["qid", "unit_id"], suffix="_exact")
    np.testing.assert_allclose(joined["score"], joined["score_exact"], atol=1e-6)
    assert joined.height / exact.height > 0.5


def test_empty_questions_are_skipped_and_counted():
    questions, query_vectors, unit_ids, unit_groups, unit_vectors = _corpus(queries=4)
    questions = questions.with_columns(pl.Series("text", ["first", "", "   ", "fourth"]))
    for scope in ("global", "group"):
        ranking, empty = dense.search(questions, query_vectors, unit_ids, unit_groups, unit_vectors, None, 5, scope)
        assert empty == ["q1", "q2"]
        assert sorted(ranking["qid"].unique()) == ["q0", "q3"]


def test_bad_settings_are_input_errors():
    questions, query_vectors, unit_ids, unit_groups, unit_vectors = _corpus()
    with pytest.raises(InputError, match="'annoy'"):
        dense.build_index(unit_vectors, "annoy")
    with pytest.raises(InputError, match="efSearch"):
        dense.build_index(unit_vectors, "ivf", {"efSearch": 10})
    with pytest.raises(InputError, match="nlist=500"):
        dense.build_index(unit_vectors, "ivf", {"nlist": 500})
    with pytest.raises(InputError, match="'corpus'"):
        dense.search(questions, query_vectors, unit_ids, unit_groups, unit_vectors, None, 5, "corpus")
    with pytest.raises(InputError, match="rebuild"):
        dense.search(questions, query_vectors, unit_ids[:-1], unit_groups[:-1], unit_vectors[:-1],
                     dense.build_index(unit_vectors), 5, "global")


def test_the_index_job_fills_a_flat_index_batch_by_batch(tmp_path, monkeypatch):
    from workflow_scripts.core import contracts, tables

    monkeypatch.setattr(tables, "GROUP_ROWS", 64)  # 300 vectors: five row groups, read in five batches
    _, _, unit_ids, unit_groups, unit_vectors = _corpus()
    vectors = tmp_path / "unit_vectors.parquet"
    with tables.TableWriter(vectors, contracts.UNIT_VECTORS) as writer:
        writer.write(pl.DataFrame({"unit_id": unit_ids, "group_id": unit_groups, "vector": list(unit_vectors)}))
    assert [len(batch) for batch in dense.vector_batches(vectors)] == [64, 64, 64, 64, 44]
    np.testing.assert_array_equal(dense.read_vectors(vectors), unit_vectors.astype(np.float32))
    spec = {"kind": "flat", "nlist": None, "nprobe": None, "hnsw_m": None, "ef_search": None}
    dense.index_dense(vectors, spec, tmp_path / "flat")
    assert dense.faiss.serialize_index(dense.load_index(tmp_path / "flat")).tobytes() == \
        dense.faiss.serialize_index(dense.build_index(unit_vectors, "flat")).tobytes()
