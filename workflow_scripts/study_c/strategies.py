"""Study C's six RAG strategies over the global corpus: retrieval, the generator's answer, per-query cost.

In:  the synthetic queries (STUDY_C_QUERIES), the corpus units (one document per paper; a job reads only the texts
     of the units its queries retrieved, see `UnitTexts`), a retriever (dense:
     the embedder, unit vectors and FAISS index of the dense stage; colbert: a PLAID index, see colbert.py), the
     generator config, the prompt templates and the `study_c` settings (top_k, rerank candidates, fusion
     sub-queries / hits / rrf_k, max_new_tokens per LLM step).
Out: per strategy a run STUDY_C_RUNS (qid, docid, rank, score: the top-k documents given to the generator) and
     STUDY_C_ANSWERS (per query: answer, whether it searched, the texts searched, the fallback taken, LLM calls,
     prompt / completion tokens, measured LLM and retrieval seconds).

The JSON steps (listwise rerank, sub-queries, tool call) are decoded under their reply schemas (`llm/templates.py`:
a permutation of the candidate numbers, exactly n strings, a search or an answer), so their fallbacks are
expected near zero; each still runs the parser below, and a reply cut by its token budget falls back with its own
cause ("rerank_length", "fusion_length", "tool_reply_length").

Strategies (the study's; every one answers from its top-k = 3 with the `answer_rag` prompt except Tool Call):
- classic: search the query, top-k.
- rephrased: the generator rewrites the query (`rephrase`); the first non-blank line of the reply, stripped of
  quotes, is searched. A failed call or a blank reply → the original query ("rephrase_failed").
- rephrased_reranked: the rewrite as above, `rerank_candidates` (10) hits, listwise rerank by the generator
  (`rerank_listwise`, candidates numbered 1..n, each cut to `rerank_chars` characters); keep top-k. The reply
  must be a JSON list of distinct candidate numbers with at least top-k entries, otherwise the retrieval order
  is kept and the cause counted ("rerank_failed", "rerank_not_a_list", "rerank_invalid_item",
  "rerank_too_short"); unranked candidates follow the ranked ones in retrieval order. Score = n − position.
- fusion: the generator writes `subqueries` (3) queries as a JSON list (`subqueries`); each usable one (a
  non-blank string, case-insensitively distinct) is searched for `hits` (5) documents and the lists are fused by
  RRF, score Σ 1/(rrf_k + rank), ties by docid. Fewer usable sub-queries than asked → the original query alone
  ("fusion_too_few_subqueries").
- tool_call: the generator sees the question and a search tool (`tool_call`). A reply {"search": q} with a
  non-blank q runs one search (top-k) and the model answers from the results (`tool_answer`, its call replayed
  as the assistant turn); {"answer": a} answers without retrieval; any other reply is taken as a plain-text
  answer without retrieval, as a chat tool API would, counted as "tool_reply_not_json". At most one search.
- colbert: the query searched in the PLAID index, top-k.
A rephrase shared by rephrased and rephrased_reranked is the same prompt, so the second is a cache hit; its cost
is still charged to both (cached rows keep the latency of the call that produced them).
"""

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import polars as pl

from workflow_scripts.core import models
from workflow_scripts.core.contracts import STUDY_C_ANSWERS, STUDY_C_RUNS, UNITS, UNIT_VECTORS
from workflow_scripts.core.tables import frame, read_table
from workflow_scripts.core.shards import Shard, own_rows
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.parsing import parse_json
from workflow_scripts.llm.templates import Template
from workflow_scripts.retrieval import colbert, dense
from workflow_scripts.retrieval.fusion import rrf

log = logging.getLogger("ragfrontier.strategies")

Hits = list[tuple[str, float]]


class UnitTexts(Mapping[str, str]):
    """docid → `colbert.doc_texts` of that unit, read from the units table only for the docids asked: `load(docids)`
    reads the missing ones in one filtered pass (tables.read_table `where`), so a strategy job holds the texts of
    the units its queries retrieved, not the corpus. A docid never loaded is read on its own when looked up."""

    def __init__(self, path: Path):
        self.path, self.texts = Path(path), {}

    def load(self, docids: Iterable[str]) -> None:
        missing = sorted(set(docids) - self.texts.keys())
        if missing:
            self.texts.update(colbert.doc_texts(read_table(self.path, UNITS, where=("unit_id", missing))))

    def __getitem__(self, docid: str) -> str:
        self.load([docid])
        return self.texts[docid]

    def __iter__(self) -> Iterator[str]:
        return iter(self.texts)

    def __len__(self) -> int:
        return len(self.texts)


class Retriever(Protocol):
    def search(self, texts: Sequence[str], k: int) -> tuple[list[Hits], list[float]]: ...


@dataclass
class Cost:
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_seconds: float = 0.0
    retrieval_seconds: float = 0.0


@dataclass
class Plan:
    """One query's outcome: the documents for the generator, what was searched, the fallback, and its cost."""

    docs: Hits = field(default_factory=list)
    search_queries: list[str] = field(default_factory=list)
    fallback: str | None = None
    searched: bool = True
    answer: dict[str, Any] | None = None  # a GENERATIONS row when the strategy produced the answer itself
    cost: Cost = field(default_factory=Cost)


@dataclass(frozen=True)
class Context:
    """What every strategy step needs: the engine, the LLM cache, templates, settings and the retriever."""

    engine: llm.Engine
    cache: Path
    templates: Mapping[str, Template]
    settings: Mapping[str, Any]
    retriever: Retriever
    doc_texts: Mapping[str, str]

    def ask(self, requests: Sequence[llm.Request], plans: Mapping[str, Plan], step: str) -> dict[str, dict[str, Any]]:
        """Generate `requests` (request_id = qid), charging each call to its query's plan. Steps rephrase, rerank,
        subqueries and tool_call use `max_new_tokens[step]`; answers use the generator's own sampling."""
        if not requests:
            return {}
        limit = self.settings["max_new_tokens"].get(step)
        table = llm.generate(requests, self.engine, self.cache, {"max_new_tokens": limit} if limit else None)
        rows = {}
        for request, row in zip(requests, table.iter_rows(named=True)):
            cost = plans[request.request_id].cost
            cost.llm_calls += 1
            cost.prompt_tokens += row["prompt_tokens"] or 0
            cost.completion_tokens += row["completion_tokens"] or 0
            cost.llm_seconds += row["latency_s"]
            rows[request.request_id] = row
        return rows

    def search(self, items: Sequence[tuple[str, str]], k: int, plans: Mapping[str, Plan]) -> list[Hits]:
        """Search each (qid, text); record the text and charge the measured seconds to the query's plan."""
        results, seconds = self.retriever.search([text for _, text in items], k)
        for (qid, text), spent in zip(items, seconds):
            plans[qid].search_queries.append(text)
            plans[qid].cost.retrieval_seconds += spent
        return results

    def load_texts(self, docids: Iterable[str]) -> None:
        """Read the texts of `docids` in one pass before they are looked up one by one (for a `UnitTexts`)."""
        if isinstance(self.doc_texts, UnitTexts):
            self.doc_texts.load(docids)

    def request(self, qid: str, template: str, fields: Mapping[str, str], evidence: Sequence[str] = ()) -> llm.Request:
        return llm.Request(qid, self.templates[template], dict(fields), tuple(evidence))


def was_cut(row: Mapping[str, Any] | None) -> bool:
    """Whether a successful reply was cut by its token budget (its own fallback cause, "<step>_length")."""
    return bool(row) and row["status"] == "ok" and row["finish_reason"] == "length"


def first_line(text: str) -> str:
    """The first non-blank line of a reply, without surrounding quotes or a 'Query:' label."""
    for line in text.splitlines():
        line = line.strip().strip("\"'`").strip()
        if line.lower().startswith("query:"):
            line = line[len("query:"):].strip().strip("\"'`").strip()
        if line:
            return line
    return ""


def parse_ranking(text: str, n: int, keep: int) -> tuple[list[int] | None, str | None]:
    """0-based candidate order from a listwise reply (numbers 1..n), or (None, why it is malformed)."""
    reply = parse_json(text, list)
    if reply.value is None:
        return None, "rerank_not_a_list"
    order = []
    for item in reply.value:
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= n or item - 1 in order:
            return None, "rerank_invalid_item"
        order.append(item - 1)
    if len(order) < min(keep, n):
        return None, "rerank_too_short"
    return order, None


def parse_subqueries(text: str, wanted: int) -> list[str]:
    """The usable sub-queries of a reply: non-blank strings, case-insensitively distinct, at most `wanted`."""
    reply = parse_json(text, list)
    usable, seen = [], set()
    for item in reply.value or []:
        if isinstance(item, str) and " ".join(item.split()) and " ".join(item.split()).lower() not in seen:
            usable.append(" ".join(item.split()))
            seen.add(usable[-1].lower())
    return usable[:wanted]


def parse_tool_reply(text: str) -> tuple[str, str]:
    """("search", query) | ("answer", text) | ("plain", text) from a tool-call reply."""
    reply = parse_json(text, dict)
    if reply.value is not None:
        query, answer = reply.value.get("search"), reply.value.get("answer")
        if isinstance(query, str) and query.strip():
            return "search", " ".join(query.split())
        if isinstance(answer, str) and answer.strip():
            return "answer", answer.strip()
    return "plain", text.strip()


def fuse(rankings: Sequence[Hits], k: int, depth: int) -> Hits:
    """One query's hit lists fused by reciprocal rank (`fusion.rrf`), the top `depth`, ties by docid."""
    lists = [
        pl.DataFrame({"qid": "q", "unit_id": [docid for docid, _ in hits], "rank": range(1, len(hits) + 1)},
                     schema={"qid": pl.String, "unit_id": pl.String, "rank": pl.Int64})
        for hits in rankings
    ]
    fused = rrf(lists, k).head(depth)
    return list(zip(fused["unit_id"].to_list(), fused["fused_score"].to_list()))


# ---- the strategies: queries (qid → text) → plans -----------------------------------------------------------


def direct(ctx: Context, queries: Mapping[str, str]) -> dict[str, Plan]:
    """classic and colbert: search the query as written."""
    plans = {qid: Plan() for qid in queries}
    for (qid, _), hits in zip(queries.items(), ctx.search(list(queries.items()), ctx.settings["top_k"], plans)):
        plans[qid].docs = hits
    return plans


def rephrase(ctx: Context, queries: Mapping[str, str], plans: dict[str, Plan]) -> dict[str, str]:
    """qid → the rewritten query (the original one when the rewrite failed; the fallback is recorded)."""
    rows = ctx.ask(
        [ctx.request(qid, "rephrase", {"question": text}) for qid, text in queries.items()], plans, "rephrase"
    )
    rewritten = {}
    for qid, text in queries.items():
        line = first_line(rows[qid]["text"]) if rows[qid]["status"] == "ok" else ""
        if not line:
            plans[qid].fallback = "rephrase_failed"
        rewritten[qid] = line or text
    return rewritten


def rephrased(ctx: Context, queries: Mapping[str, str]) -> dict[str, Plan]:
    plans = {qid: Plan() for qid in queries}
    rewritten = rephrase(ctx, queries, plans)
    for qid, hits in zip(rewritten, ctx.search(list(rewritten.items()), ctx.settings["top_k"], plans)):
        plans[qid].docs = hits
    return plans


def rephrased_reranked(ctx: Context, queries: Mapping[str, str]) -> dict[str, Plan]:
    plans = {qid: Plan() for qid in queries}
    rewritten = rephrase(ctx, queries, plans)
    candidates = dict(zip(rewritten, ctx.search(list(rewritten.items()), ctx.settings["rerank_candidates"], plans)))
    cut = ctx.settings["rerank_chars"]
    ctx.load_texts(docid for hits in candidates.values() for docid, _ in hits)
    requests = [
        ctx.request(qid, "rerank_listwise", {"question": queries[qid], "n": str(len(hits))},
                    [ctx.doc_texts[docid][:cut] for docid, _ in hits])
        for qid, hits in candidates.items() if hits
    ]
    rows = ctx.ask(requests, plans, "rerank")
    keep = ctx.settings["top_k"]
    for qid, hits in candidates.items():
        order, cause = (None, "rerank_failed") if rows.get(qid, {}).get("status") != "ok" else \
            parse_ranking(rows[qid]["text"], len(hits), keep)
        if cause and was_cut(rows.get(qid)):
            cause = "rerank_length"
        if qid in rows and cause:
            plans[qid].fallback = plans[qid].fallback or cause
        order = order or []
        order += [position for position in range(len(hits)) if position not in order]
        plans[qid].docs = [(hits[position][0], float(len(hits) - place)) for place, position in enumerate(order[:keep])]
    return plans


def fusion(ctx: Context, queries: Mapping[str, str]) -> dict[str, Plan]:
    plans = {qid: Plan() for qid in queries}
    wanted = ctx.settings["fusion"]["subqueries"]
    rows = ctx.ask(
        [ctx.request(qid, "subqueries", {"question": text, "n": str(wanted)}) for qid, text in queries.items()],
        plans,
        "subqueries",
    )
    searches: list[tuple[str, str]] = []
    for qid, text in queries.items():
        usable = parse_subqueries(rows[qid]["text"], wanted) if rows[qid]["status"] == "ok" else []
        if len(usable) < wanted:
            plans[qid].fallback = "fusion_length" if was_cut(rows[qid]) else "fusion_too_few_subqueries"
            usable = [text]
        searches += [(qid, subquery) for subquery in usable]
    hits_by_query: dict[str, list[Hits]] = {qid: [] for qid in queries}
    for (qid, _), hits in zip(searches, ctx.search(searches, ctx.settings["fusion"]["hits"], plans)):
        hits_by_query[qid].append(hits)
    for qid, rankings in hits_by_query.items():
        plans[qid].docs = fuse(rankings, ctx.settings["fusion"]["rrf_k"], ctx.settings["top_k"])
    return plans


def tool_call(ctx: Context, queries: Mapping[str, str]) -> dict[str, Plan]:
    plans = {qid: Plan(searched=False) for qid in queries}
    rows = ctx.ask(
        [ctx.request(qid, "tool_call", {"question": text}) for qid, text in queries.items()], plans, "tool_call"
    )
    to_search: dict[str, str] = {}
    for qid in queries:
        row = rows[qid]
        if row["status"] != "ok":
            plans[qid].answer = row
            continue
        kind, value = parse_tool_reply(row["text"])
        if kind == "search":
            to_search[qid] = value
        else:
            plans[qid].answer = {**row, "text": value}
            plans[qid].fallback = (
                None if kind != "plain" else "tool_reply_length" if was_cut(row) else "tool_reply_not_json"
            )
    for qid, hits in zip(to_search, ctx.search(list(to_search.items()), ctx.settings["top_k"], plans)):
        plans[qid].docs, plans[qid].searched = hits, True
    ctx.load_texts(docid for qid in to_search for docid, _ in plans[qid].docs)
    requests = [
        ctx.request(qid, "tool_answer", {"question": queries[qid], "call": json.dumps({"search": query})},
                    [ctx.doc_texts[docid] for docid, _ in plans[qid].docs])
        for qid, query in to_search.items()
    ]
    for qid, row in ctx.ask(requests, plans, "answer").items():
        plans[qid].answer = row
    return plans


RUNNERS: dict[str, Callable[[Context, Mapping[str, str]], dict[str, Plan]]] = {
    "classic": direct, "rephrased": rephrased, "rephrased_reranked": rephrased_reranked, "fusion": fusion,
    "tool_call": tool_call, "colbert": direct,
}


def run_strategy(strategy: str, ctx: Context, queries: Mapping[str, str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(STUDY_C_RUNS, STUDY_C_ANSWERS) of one strategy: its plans, then answers from the top-k where needed."""
    plans = RUNNERS[strategy](ctx, queries)
    ctx.load_texts(docid for plan in plans.values() if plan.answer is None for docid, _ in plan.docs)
    requests = [
        ctx.request(qid, "answer_rag", {"question": queries[qid]}, [ctx.doc_texts[docid] for docid, _ in plan.docs])
        for qid, plan in plans.items() if plan.answer is None
    ]
    for qid, row in ctx.ask(requests, plans, "answer").items():
        plans[qid].answer = row
    runs = [{"qid": qid, "strategy": strategy, "docid": docid, "rank": rank, "score": score}
            for qid, plan in plans.items() for rank, (docid, score) in enumerate(plan.docs, 1)]
    answers = [
        {"qid": qid, "strategy": strategy, "searched": plan.searched, "search_queries": plan.search_queries,
         "fallback": plan.fallback, "answer": plan.answer["text"] if plan.answer["status"] == "ok" else None,
         "answer_status": plan.answer["status"], "answer_error": plan.answer["error"], **vars(plan.cost)}
        for qid, plan in plans.items()
    ]
    return frame(runs, STUDY_C_RUNS), frame(answers, STUDY_C_ANSWERS)


# ---- retrievers and the Snakemake rule ---------------------------------------------------------------------


class DenseRetriever:
    """Global dense search over the dense stage's unit vectors and FAISS index (cosine, ties by docid)."""

    def __init__(self, embedder: Any, vectors: pl.DataFrame, index: Any, cache: Path):
        self.embedder, self.index, self.cache = embedder, index, cache
        self.unit_ids, self.groups = vectors["unit_id"].to_list(), vectors["group_id"].to_list()
        self.vectors = np.asarray(vectors["vector"].to_list(), dtype=np.float32)

    def search(self, texts: Sequence[str], k: int) -> tuple[list[Hits], list[float]]:
        if not texts:
            return [], []
        started = time.perf_counter()
        query_vectors = dense.embed_texts(list(texts), self.embedder, self.cache)
        questions = pl.DataFrame({"qid": [str(at) for at in range(len(texts))], "group_id": [""] * len(texts),
                                  "text": list(texts)})
        ranking, _ = dense.search(
            questions, query_vectors, self.unit_ids, self.groups, self.vectors, self.index, k, "global"
        )
        per_text = (time.perf_counter() - started) / len(texts)
        hits: dict[str, Hits] = {}
        for qid, docid, score in ranking.sort(["qid", "rank"]).select("qid", "unit_id", "score").iter_rows():
            hits.setdefault(qid, []).append((docid, score))
        return [hits.get(str(at), []) for at in range(len(texts))], [per_text] * len(texts)


def retriever_for(strategy: str, colbert_spec: Mapping[str, Any] | None, colbert_index: str | None,
                  checkpoint: str | None, embedder: Mapping[str, Any] | None, vectors: str | None, index: str | None,
                  embedding_cache: Path) -> Retriever:
    """The strategy's search: ColBERT PLAID over its index (colbert), else dense over the FAISS index."""
    if strategy == "colbert":
        return colbert.Retriever(Path(colbert_index), colbert.checkpoint_for(colbert_spec, checkpoint), colbert_spec,
                                 colbert_spec["device"], Path(colbert_spec["extensions_dir"]))
    model = models.sentence_transformer(embedder["model"], device=embedder["device"])
    return DenseRetriever(model, read_table(vectors, UNIT_VECTORS), dense.load_index(Path(index)), embedding_cache)


def own_queries(queries: pl.DataFrame, shard: Shard | None) -> pl.DataFrame:
    """The queries a job of the strategy answers, by qid (those of its shard)."""
    return own_rows(queries.sort("qid"), "qid", shard, "queries")


def strategy_tables(strategy: str, ctx: Context, queries: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rule study_c_strategy's work: the strategy on `queries` (`own_queries`); its runs and answers."""
    runs, answers = run_strategy(strategy, ctx, dict(zip(queries["qid"], queries["text"])))
    fallbacks = answers["fallback"].drop_nulls().value_counts().sort("fallback").rows()
    log.info("%s: %d queries, %d searched, fallbacks %s, %d answer errors", strategy, answers.height,
             int(answers["searched"].sum()), dict(fallbacks), answers.filter(pl.col("answer_status") == "error").height)
    return runs, answers
