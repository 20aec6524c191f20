"""Study C synthetic queries: a seeded reservoir sample of papers, a problem and a method query for each.

In:  the corpus units (one document unit per paper: unit_id = paper id, title, text = abstract; the
     arxiv_metadata adapter), how many papers the ingest skipped for having no abstract (its report's count), the
     generator config, the prompt templates (`synthetic_queries`), the sample size and seed.
Out: STUDY_C_QUERIES (qid "<paper>:<type>", paper_id = the gold target, query_type problem | method, text) and a
     JSON report: papers in the corpus, sampled, succeeded, and the failures by cause.

Sampling is single-pass reservoir sampling (Algorithm R, `random.Random(seed)`) over the papers in corpus order,
as in the study (seed 42 over the streamed JSON), so the same corpus and seed give the same sample. A paper
without abstract never reaches the sample (the adapter skips it; the report carries its count); one whose
unit text is blank is dropped here as "empty_abstract". The generator writes both queries as one JSON object,
decoded under its reply schema (`templates.SYNTHETIC_REPLY`: two strings of at most 300 characters); the report
counts how the used replies were obtained ("replies_used": constrained, parsed, repaired). A paper is dropped,
counted by cause, when the call fails ("request_error"), the reply was cut by its token budget ("length"), it holds
no JSON object ("no_json"), a query is missing or blank ("missing_query"), a query repeats the title verbatim
("title_verbatim", case-insensitive), or a query repeats a worked example of the prompt (a string of its
assistant turns, `Template.example_texts`: "copies_example"; SmolLM2-135M copied the example's problem query for
18 of 49 unarXive abstracts). The study keeps a paper only when both of its queries were generated.
"""

import logging
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import STUDY_C_QUERIES, UNITS
from workflow_scripts.core.tables import frame, table_batches, table_rows
from workflow_scripts.core.vocabulary import QUERY_TYPES
from workflow_scripts.core.shards import Shard, owned
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.parsing import parse_json, read_reply
from workflow_scripts.llm.templates import Template, normalized

log = logging.getLogger("ragfrontier.synthetic")

CAUSES = ("empty_abstract", "request_error", "length", "no_json", "missing_query", "title_verbatim", "copies_example")


def reservoir_sample(items: Iterable[Any], size: int, seed: int) -> list[Any]:
    """Algorithm R: a uniform sample of `size` items in one pass, returned in stream order."""
    rng = random.Random(seed)
    reservoir: list[tuple[int, Any]] = []
    for position, item in enumerate(items):
        if position < size:
            reservoir.append((position, item))
            continue
        slot = rng.randint(0, position)
        if slot < size:
            reservoir[slot] = (position, item)
    return [item for _, item in sorted(reservoir, key=lambda pair: pair[0])]


def parse_queries(
    text: str, title: str, examples: frozenset[str] = frozenset()
) -> tuple[dict[str, str] | None, str | None]:
    """({"problem": …, "method": …}, None) from a generator reply, or (None, the failure cause); `examples`: the
    template's worked-example texts."""
    reply = parse_json(text, dict)
    if reply.value is None:
        return None, "no_json"
    queries = {}
    for name in QUERY_TYPES:
        value = reply.value.get(name)
        if not isinstance(value, str) or not " ".join(value.split()):
            return None, "missing_query"
        queries[name] = " ".join(value.split())
    normalized_title = " ".join(title.split()).lower()
    if normalized_title and any(normalized_title in query.lower() for query in queries.values()):
        return None, "title_verbatim"
    if any(normalized(query) in examples for query in queries.values()):
        return None, "copies_example"
    return queries, None


def synthesize(
    papers: Sequence[Mapping[str, str]], replies: pl.DataFrame, examples: frozenset[str] = frozenset()
) -> tuple[list[dict[str, str]], Counter, Counter]:
    """Query rows, failure counts and how the used replies were obtained (`parsing.read_reply`: constrained,
    parsed, repaired) from the sampled papers and their GENERATIONS rows (same order); `examples` as in
    `parse_queries`."""
    rows, failures, obtained = [], Counter(), Counter()
    for paper, reply in zip(papers, replies.iter_rows(named=True)):
        if reply["status"] != "ok":
            failures["request_error"] += 1
            continue
        queries, cause = parse_queries(reply["text"], paper["title"] or "", examples)
        if cause:
            cut = reply["finish_reason"] == "length" and cause in ("no_json", "missing_query")
            failures["length" if cut else cause] += 1
            continue
        obtained[read_reply(reply)[1]] += 1
        rows += [{"qid": f"{paper['unit_id']}:{kind}", "paper_id": paper["unit_id"], "query_type": kind,
                  "text": queries[kind]} for kind in QUERY_TYPES]
    return rows, failures, obtained


def synthetic_queries(units: str, skipped_upstream: int, papers_wanted: int, seed: int, shard: Shard | None,
                      engine: llm.Engine, cache: Path, template: Template) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Rule study_c_queries' work: `papers_wanted` papers drawn from the units (seeded reservoir), of them the job's
    shard's, each asked for a problem and a method query; the queries (STUDY_C_QUERIES, by qid) and the report.
    `skipped_upstream`: the papers the ingest skipped for having no abstract (its report's count)."""
    papers_in_corpus = table_rows(units)
    sample = reservoir_sample((paper for batch in table_batches(units, UNITS, columns=["unit_id", "title", "text"])
                               for paper in batch.iter_rows(named=True)), papers_wanted, seed)
    # sharded: the whole sample is drawn, then this job keeps its own papers
    sample = [
        paper
        for paper, mine in zip(sample, owned([paper["unit_id"] for paper in sample], shard, "sampled papers"))
        if mine
    ]
    failures = Counter({"empty_abstract": sum(1 for paper in sample if not paper["text"].strip())})
    papers = [paper for paper in sample if paper["text"].strip()]
    requests = [llm.Request(paper["unit_id"], template, {"title": paper["title"] or "", "abstract": paper["text"]})
                for paper in papers]
    replies = llm.generate(requests, engine, cache)
    rows, parse_failures, obtained = synthesize(papers, replies, template.example_texts)
    failures.update(parse_failures)
    report = {
        "papers_in_corpus": papers_in_corpus, "papers_without_abstract_in_source": skipped_upstream,
        "papers_sampled": len(sample), "papers_succeeded": len(rows) // len(QUERY_TYPES),
        "queries": len(rows), "failures": {cause: failures[cause] for cause in CAUSES},
        "replies_used": dict(sorted(obtained.items())),
        "seed": seed,
    }
    log.info("synthetic queries: %d of %d sampled papers succeeded; failures %s", report["papers_succeeded"],
             len(sample), report["failures"])
    return frame(rows, STUDY_C_QUERIES).sort("qid"), report


SHARED_FIELDS = ("papers_in_corpus", "papers_without_abstract_in_source", "seed")  # the same in every shard's report


def merged_reports(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One report from the shards' reports: the corpus fields and seed as every shard has them, every count
    summed (sampled, succeeded, queries, failures by cause, replies by how they were obtained)."""
    for field in SHARED_FIELDS:
        if len({report[field] for report in reports}) != 1:
            raise ValueError(f"the shards' query reports disagree on {field}: {[report[field] for report in reports]}")
    replies: Counter = Counter()
    for report in reports:
        replies.update(report["replies_used"])
    total = {key: sum(report[key] for report in reports) for key in ("papers_sampled", "papers_succeeded", "queries")}
    return {
        "papers_in_corpus": reports[0]["papers_in_corpus"],
        "papers_without_abstract_in_source": reports[0]["papers_without_abstract_in_source"], **total,
        "failures": {cause: sum(report["failures"][cause] for report in reports) for cause in CAUSES},
        "replies_used": dict(sorted(replies.items())), "seed": reports[0]["seed"],
    }
