"""Study C strategies' control flow with a scripted LLM (through the real cached engine) and a fixed retriever:
what each strategy searches, what reaches the generator, every fallback and its count, and the per-query cost."""


import polars as pl
import pytest
from llm_fakes import WordTokenBackend

from workflow_scripts.core.contracts import STUDY_C_ANSWERS, STUDY_C_RUNS
from workflow_scripts.core.tables import conform
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.llm.templates import DEFAULTS
from workflow_scripts.study_c import strategies

TEMPLATES = load_templates()
SYSTEMS = {template.messages[0][1].replace("{{", "{").replace("}}", "}"): name for name, template in DEFAULTS.items() if template.messages[0][0] == "system"}
SETTINGS = {
    "top_k": 3, "rerank_candidates": 10, "rerank_chars": 600,
    "fusion": {"subqueries": 3, "hits": 5, "rrf_k": 60},
    "max_new_tokens": {"rephrase": 16, "rerank": 16, "subqueries": 32, "tool_call": 32},
}
DOCS = [f"d{index:02d}" for index in range(20)]


class ScriptedBackend(WordTokenBackend):
    """Replies by template (told apart by the system message) and by question, from a script of callables."""

    fingerprint = "scripted"

    def __init__(self, script, fail=(), failing=None):
        self.script, self.fail, self.failing, self.asked = script, set(fail), failing, []

    def complete(self, batch, sampling):
        outcomes = []
        for prompt in batch:
            name = SYSTEMS[prompt.messages[0]["content"]]
            if name in ("tool_call", "tool_answer"):  # one system prompt: the answer turn replays the call
                name = "tool_answer" if len(prompt.messages) > 2 else "tool_call"
            self.asked.append((name, prompt.messages))
            if name in self.fail and (self.failing is None or question_of(prompt.messages) in self.failing):
                outcomes.append(llm.Outcome(error="HTTP 500", latency_s=0.5))
                continue
            text = self.script[name](prompt.messages)
            outcomes.append(llm.Outcome(text=text, finish_reason="stop", prompt_tokens=100, completion_tokens=10,
                                        latency_s=0.25))
        return outcomes


class FixedRetriever:
    """Search results keyed by the searched text: a rotation of DOCS that depends on the text."""

    def __init__(self):
        self.searched = []

    def search(self, texts, k):
        self.searched += [(text, k) for text in texts]
        start = lambda text: sum(map(ord, text)) % len(DOCS)
        return ([[(DOCS[(start(text) + at) % len(DOCS)], 1.0 - at / 100) for at in range(k)] for text in texts],
                [0.125] * len(texts))


def question_of(messages):
    return next(line for message in messages for line in message["content"].splitlines()
                if line.startswith("Question: ")).removeprefix("Question: ")


def answer_script(**replies):
    base = {"answer_rag": lambda messages: f"answer: {question_of(messages)}",
            "tool_answer": lambda messages: f"tool answer: {question_of(messages)}"}
    return base | replies


def run(strategy, queries, script, tmp_path, fail=(), failing=None):
    """Run a strategy on `queries` with the scripted backend; the steps in `fail` answer HTTP 500 (for the questions
    in `failing` only, when given: a call whose every request fails stops the stage, llm/engine.py)."""
    backend, retriever = ScriptedBackend(script, fail, failing), FixedRetriever()
    engine = llm.Engine(llm.engine_config({"backend": "transformers", "model": "scripted"}), backend)
    ctx = strategies.Context(engine, tmp_path / "llm", TEMPLATES, SETTINGS, retriever,
                             {docid: f"text of {docid}" for docid in DOCS})
    runs, answers = strategies.run_strategy(strategy, ctx, queries)
    conform(runs, STUDY_C_RUNS), conform(answers, STUDY_C_ANSWERS)
    return runs, {row["qid"]: row for row in answers.iter_rows(named=True)}, backend, retriever


def docs_of(runs, qid):
    return runs.filter(pl.col("qid") == qid).sort("rank")["docid"].to_list()


def test_classic_searches_the_query_and_answers_from_the_top_3(tmp_path):
    runs, answers, backend, retriever = run("classic", {"q1": "graph neural nets"}, answer_script(), tmp_path)
    assert retriever.searched == [("graph neural nets", 3)]
    top = [hit for hit, _ in FixedRetriever().search(["graph neural nets"], 3)[0][0]]
    assert docs_of(runs, "q1") == top and runs["rank"].to_list() == [1, 2, 3]
    (name, messages), = backend.asked
    assert name == "answer_rag" and all(f"text of {docid}" in messages[-1]["content"] for docid in top)
    row = answers["q1"]
    assert row["answer"] == "answer: graph neural nets" and row["searched"] and row["fallback"] is None
    assert (row["llm_calls"], row["prompt_tokens"], row["completion_tokens"]) == (1, 100, 10)
    assert row["llm_seconds"] == pytest.approx(0.25) and row["retrieval_seconds"] == pytest.approx(0.125)


def test_rephrased_searches_the_rewrite_and_falls_back_on_a_blank_one(tmp_path):
    script = answer_script(rephrase=lambda messages: {
        "good": 'Query: "spectral graph convolution survey"\nmore text', "blank": "  \n \"\"\n"}[question_of(messages)])
    _, answers, _, retriever = run("rephrased", {"a": "good", "b": "blank"}, script, tmp_path)
    assert ("spectral graph convolution survey", 3) in retriever.searched and ("blank", 3) in retriever.searched
    assert answers["a"]["search_queries"] == ["spectral graph convolution survey"] and answers["a"]["fallback"] is None
    assert answers["b"]["search_queries"] == ["blank"] and answers["b"]["fallback"] == "rephrase_failed"
    assert answers["a"]["llm_calls"] == 2 and answers["a"]["answer"] == "answer: good"


def test_rephrase_request_error_falls_back_to_the_original_query(tmp_path):
    script = answer_script(rephrase=lambda messages: "rewritten")
    _, answers, _, _ = run("rephrased", {"a": "x", "b": "y"}, script, tmp_path, fail={"rephrase"}, failing={"x"})
    assert answers["a"]["fallback"] == "rephrase_failed" and answers["a"]["search_queries"] == ["x"]
    assert answers["a"]["llm_calls"] == 2 and answers["a"]["llm_seconds"] == pytest.approx(0.75)
    assert answers["b"]["fallback"] is None and answers["b"]["search_queries"] == ["rewritten"]
    with pytest.raises(InputError, match=r"all 1 requests to the transformers backend .* HTTP 500"):
        run("rephrased", {"a": "x"}, answer_script(), tmp_path / "all", fail={"rephrase"})


@pytest.mark.parametrize("reply, cause, order", [
    ("[3, 1, 2, 10]", None, [2, 0, 1]),
    ("Ranking: [5,4,3]", None, [4, 3, 2]),
    ("the best is number two", "rerank_not_a_list", [0, 1, 2]),
    ("[1, 1, 2]", "rerank_invalid_item", [0, 1, 2]),
    ("[11, 1, 2]", "rerank_invalid_item", [0, 1, 2]),
    ('["1", 2, 3]', "rerank_invalid_item", [0, 1, 2]),
    ("[2]", "rerank_too_short", [0, 1, 2]),
])
def test_rephrased_reranked_keeps_3_of_10_or_the_retrieval_order(tmp_path, reply, cause, order):
    script = answer_script(rephrase=lambda messages: "rewritten", rerank_listwise=lambda messages: reply)
    runs, answers, backend, retriever = run("rephrased_reranked", {"q": "original"}, script, tmp_path)
    assert retriever.searched == [("rewritten", 10)]
    candidates = [docid for docid, _ in FixedRetriever().search(["rewritten"], 10)[0][0]]
    rerank_messages = next(messages for name, messages in backend.asked if name == "rerank_listwise")
    assert "Question: original" in rerank_messages[-1]["content"] and "Rank the 10 candidates" in rerank_messages[-1]["content"]
    assert docs_of(runs, "q") == [candidates[position] for position in order]
    assert runs.sort("rank")["score"].to_list() == [10.0, 9.0, 8.0]
    assert answers["q"]["fallback"] == cause and answers["q"]["llm_calls"] == 3


def test_rerank_request_error_keeps_the_retrieval_order(tmp_path):
    script = answer_script(rephrase=lambda messages: "rewritten")
    runs, answers, _, _ = run("rephrased_reranked", {"q": "original", "p": "other"}, script | {
        "rerank_listwise": lambda messages: "[1, 2, 3]"}, tmp_path, fail={"rerank_listwise"}, failing={"original"})
    candidates = [docid for docid, _ in FixedRetriever().search(["rewritten"], 10)[0][0]]
    assert docs_of(runs, "q") == candidates[:3] and answers["q"]["fallback"] == "rerank_failed"
    assert answers["p"]["fallback"] is None


def test_rrf_sums_reciprocal_ranks_and_breaks_ties_by_docid():
    fused = strategies.fuse([[("a", 9.0), ("b", 8.0)], [("b", 1.0), ("c", 0.5)], [("c", 3.0), ("a", 2.0)]], 60, 3)
    assert [docid for docid, _ in fused] == ["a", "b", "c"]  # all three tie at 1/61 + 1/62: docid order
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    assert strategies.fuse([[("x", 1.0), ("y", 1.0)], [("y", 1.0)]], 60, 1) == [("y", pytest.approx(1 / 62 + 1 / 61))]


@pytest.mark.parametrize("reply, usable", [
    ('["alpha beta", "gamma", "delta"]', ["alpha beta", "gamma", "delta"]),
    ('["alpha", "gamma", "delta", "extra"]', ["alpha", "gamma", "delta"]),
    ('["alpha", "ALPHA", "gamma"]', None),
    ('["alpha", "", 7]', None),
    ("alpha; gamma; delta", None),
])
def test_fusion_fuses_three_subqueries_or_falls_back_to_the_original(tmp_path, reply, usable):
    script = answer_script(subqueries=lambda messages: reply)
    runs, answers, _, retriever = run("fusion", {"q": "original question"}, script, tmp_path)
    if usable is None:
        assert retriever.searched == [("original question", 5)]
        assert answers["q"]["fallback"] == "fusion_too_few_subqueries"
        expected = strategies.fuse(FixedRetriever().search(["original question"], 5)[0], 60, 3)
    else:
        assert retriever.searched == [(text, 5) for text in usable] and answers["q"]["fallback"] is None
        expected = strategies.fuse(FixedRetriever().search(usable, 5)[0], 60, 3)
    assert docs_of(runs, "q") == [docid for docid, _ in expected]
    assert answers["q"]["search_queries"] == (usable or ["original question"]) and answers["q"]["llm_calls"] == 2
    assert answers["q"]["retrieval_seconds"] == pytest.approx(0.125 * len(usable or [1]))


def test_tool_call_searches_at_most_once_then_answers_from_the_results(tmp_path):
    replies = {"s": '{"search": "tool query"}', "a": '{"answer": "from memory"}', "p": "I think it is X.",
               "both": '{"answer": "x", "search": "   "}'}
    script = answer_script(tool_call=lambda messages: replies[question_of(messages)])
    runs, answers, backend, retriever = run("tool_call", {key: key for key in replies}, script, tmp_path)
    assert retriever.searched == [("tool query", 3)]
    assert answers["s"]["searched"] and answers["s"]["answer"] == "tool answer: s" and answers["s"]["llm_calls"] == 2
    call = next(messages for name, messages in backend.asked if name == "tool_answer")
    assert call[2] == {"role": "assistant", "content": '{"search": "tool query"}'}
    assert all(f"text of {docid}" in call[3]["content"] for docid in docs_of(runs, "s"))
    assert not answers["a"]["searched"] and answers["a"]["answer"] == "from memory" and answers["a"]["fallback"] is None
    assert answers["p"]["answer"] == "I think it is X." and answers["p"]["fallback"] == "tool_reply_not_json"
    assert answers["both"]["answer"] == "x" and not answers["both"]["searched"]
    assert set(runs["qid"]) == {"s"} and all(answers[key]["llm_calls"] == 1 for key in ("a", "p", "both"))
    assert all(answers[key]["search_queries"] == [] for key in ("a", "p", "both"))


def test_a_failed_answer_call_is_recorded_not_raised(tmp_path):
    runs, answers, _, _ = run("classic", {"q": "x", "r": "y"}, answer_script(), tmp_path, fail={"answer_rag"},
                              failing={"x"})
    assert answers["q"]["answer_status"] == "error" and answers["q"]["answer"] is None
    assert answers["q"]["answer_error"] == "HTTP 500" and runs.height == 6 and answers["r"]["answer_status"] == "ok"


def test_rephrase_is_shared_through_the_cache_but_charged_to_each_strategy(tmp_path):
    script = answer_script(rephrase=lambda messages: "rewritten", rerank_listwise=lambda messages: "[1, 2, 3]")
    backend, retriever = ScriptedBackend(script), FixedRetriever()
    engine = llm.Engine(llm.engine_config({"backend": "transformers", "model": "scripted"}), backend)
    ctx = strategies.Context(engine, tmp_path / "llm", TEMPLATES, SETTINGS, retriever, {d: d for d in DOCS})
    _, first = strategies.run_strategy("rephrased", ctx, {"q": "original"})
    _, second = strategies.run_strategy("rephrased_reranked", ctx, {"q": "original"})
    assert [name for name, _ in backend.asked].count("rephrase") == 1
    assert first["llm_calls"].to_list() == [2] and second["llm_calls"].to_list() == [3]


def test_parsers():
    assert strategies.first_line('\n  "Query: deep learning"  \nignored') == "deep learning"
    assert strategies.parse_ranking("[2, 1, 3]", 3, 3) == ([1, 0, 2], None)
    assert strategies.parse_ranking("[true, 1, 2]", 3, 3) == (None, "rerank_invalid_item")
    assert strategies.parse_ranking("[1, 2]", 2, 3) == ([0, 1], None)  # fewer candidates than kept: all of them
    assert strategies.parse_tool_reply('```json\n{"search": "a  b"}\n```') == ("search", "a b")
    assert strategies.parse_tool_reply('{"tool": "search"}') == ("plain", '{"tool": "search"}')


def test_unit_texts_reads_only_the_units_asked(tmp_path, monkeypatch):
    """Issue 16 (bounded memory): a strategy job reads the texts of the retrieved units, not the whole units table;
    the texts equal colbert.doc_texts of the table, and the answers equal those from an in-memory mapping."""
    from workflow_scripts.core.contracts import UNITS
    from workflow_scripts.core.tables import frame, write_table
    from workflow_scripts.retrieval import colbert

    units = frame(({"dataset": "t", "group_id": docid, "unit_id": docid, "kind": "document", "position": 0,
                    "title": None if at % 2 else f"Title {docid}", "text": f"text of {docid}"}
                   for at, docid in enumerate(DOCS)), UNITS)
    write_table(units, tmp_path / "units.parquet", UNITS)
    reads = []
    read_table = strategies.read_table
    monkeypatch.setattr(strategies, "read_table",
                        lambda *args, **kw: reads.append(kw["where"][1]) or read_table(*args, **kw))
    texts = strategies.UnitTexts(tmp_path / "units.parquet")
    script = answer_script(rephrase=lambda messages: "rewritten", rerank_listwise=lambda messages: "[2, 1, 3]")
    results = {}
    for name, doc_texts in (("lazy", texts), ("all", colbert.doc_texts(units))):
        backend, retriever = ScriptedBackend(script), FixedRetriever()
        engine = llm.Engine(llm.engine_config({"backend": "transformers", "model": "scripted"}), backend)
        ctx = strategies.Context(engine, tmp_path / f"llm-{name}", TEMPLATES, SETTINGS, retriever, doc_texts)
        results[name] = strategies.run_strategy("rephrased_reranked", ctx, {"q1": "a", "q2": "b"}), backend.asked
    assert results["lazy"][0][0].equals(results["all"][0][0]) and results["lazy"][1] == results["all"][1]
    assert results["lazy"][0][1].drop("llm_seconds").equals(results["all"][0][1].drop("llm_seconds"))
    assert len(reads) == 1 and set(texts) == set(reads[0]) and len(texts) == 10  # one read: the 10 candidates
    assert dict(texts) == {docid: colbert.doc_texts(units)[docid] for docid in reads[0]}
