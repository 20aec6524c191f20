"""Study C synthetic queries: the seeded reservoir sample, the reply parser and the counted, dropped failures."""

from collections import Counter

import polars as pl
import pytest

from workflow_scripts.core.contracts import GENERATIONS, STUDY_C_QUERIES
from workflow_scripts.core.tables import conform, frame
from workflow_scripts.study_c import synthetic


def test_reservoir_sample_is_seeded_uniform_and_in_stream_order():
    sample = synthetic.reservoir_sample(range(100), 10, seed=42)
    assert sample == synthetic.reservoir_sample(iter(range(100)), 10, seed=42) and sample == sorted(sample)
    assert len(set(sample)) == 10 and sample != synthetic.reservoir_sample(range(100), 10, seed=43)
    assert synthetic.reservoir_sample(range(5), 10, seed=1) == [0, 1, 2, 3, 4]
    counts = Counter(item for seed in range(3000) for item in synthetic.reservoir_sample(range(20), 5, seed))
    assert min(counts.values()) > 0.8 * 750 and max(counts.values()) < 1.2 * 750  # each item: 5/20 of 3000 draws


@pytest.mark.parametrize("reply, cause", [
    ('{"problem": "How to bound X?", "method": "Using spectral Y."}', None),
    ('Sure! ```json\n{"problem": "How to bound X?", "method": "Using spectral Y.",}\n```', None),
    ("problem: how to bound X", "no_json"),
    ('{"problem": "How to bound X?"}', "missing_query"),
    ('{"problem": "How to bound X?", "method": "  "}', "missing_query"),
    ('{"problem": "How to bound X?", "method": 3}', "missing_query"),
    ('{"problem": "What does Exotic Completions Of Groupoids show?", "method": "y"}', "title_verbatim"),
    ('{"problem": "How to bound X?", "method": "The  Example method"}', "copies_example"),
])
def test_parse_queries(reply, cause):
    queries, failure = synthetic.parse_queries(reply, "Exotic  completions of groupoids",
                                               frozenset({"the example method"}))
    assert failure == cause
    if cause is None:
        assert queries == {"problem": "How to bound X?", "method": "Using spectral Y."}


def _generation(request_id, text, status="ok", finish_reason="stop", constrained=True):
    return {"request_id": request_id, "key": request_id, "status": status, "error": None if status == "ok" else "HTTP 500",
            "source": "generated", "constrained": constrained, "text": text,
            "finish_reason": finish_reason if text is not None else None,
            "latency_s": 0.1, "backend": "transformers", "model": "m", "device": "cpu",
            "evidence_in": 0, "evidence_kept": 0, "evidence_truncated": False, "token_basis": "tokenizer"}


def test_synthesize_keeps_papers_with_both_queries_and_counts_the_rest_by_cause():
    replies = frame([
        _generation("p0", '{"problem": "a b", "method": "c d"}'),
        _generation("p1", None, status="error"),
        _generation("p2", "not json"),
        _generation("p3", '{"problem": "a"}'),
        _generation("p4", '{"problem": "a", "meth', finish_reason="length"),
        _generation("p5", 'Sure: {"problem": "e f", "method": "g h"}', constrained=False),
    ], GENERATIONS)
    papers = [{"unit_id": f"p{index}", "title": "T", "text": "abstract"} for index in range(6)]
    rows, failures, obtained = synthetic.synthesize(papers, replies)
    table = conform(pl.DataFrame(rows), STUDY_C_QUERIES)
    assert table.rows() == [("p0:problem", "p0", "problem", "a b"), ("p0:method", "p0", "method", "c d"),
                            ("p5:problem", "p5", "problem", "e f"), ("p5:method", "p5", "method", "g h")]
    assert failures == Counter({"request_error": 1, "no_json": 1, "missing_query": 1, "length": 1})
    assert obtained == Counter({"constrained": 1, "repaired": 1})
