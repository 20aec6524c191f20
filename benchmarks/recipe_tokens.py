"""Prompt tokens per LLM request of the full-size study recipes (experiments/*_full.yaml, study_a_qasper.yaml), for
the GPU-hours estimate in experiments/README.md.

In:  real records from ../shared/data (unarXive paper units for QASPER-like papers, HotpotQA, MuSiQue, 2Wiki, arXiv
     metadata) and the demo's questions and references (data/demo/papers.json); the default prompt templates
     and experiments/study_b_full.yaml's short-answer prompts.
Out: a table on stdout: per recipe and LLM step, requests rendered and mean / p90 prompt tokens.

Each step's prompt is rendered by the pipeline's own code (llm.rendering.render, then the model's chat template via
llm.chat_tokenizer) with the recipe's evidence count and title mode, and counted with SmolLM2's tokenizer (the only
one offline; Llama-3 / Qwen2.5 tokenizers have larger vocabularies and count English text ~10-15% shorter, so
these counts lean high). Long-form answers enter the judges' prompts at the recipe's generation cap
(`--answer-tokens-a`, `--answer-tokens-c`), an upper bound. Reply tokens are not estimated here (see the README).

Run: .venv/bin/python benchmarks/recipe_tokens.py [--samples 200]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workflow_scripts.core import models  # noqa: E402
from workflow_scripts.ingest.adapters.registry import adapter_for  # noqa: E402
from workflow_scripts.llm.chat_tokenizer import ChatTokenizer  # noqa: E402
from workflow_scripts.llm.rendering import load_templates, render  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"


def load(fmt: str, **spec: str):
    return adapter_for("x", fmt)[0]({"format": fmt, **spec}, "x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200, help="requests rendered per step")
    parser.add_argument("--answer-tokens-a", type=int, default=256, help="Study A answer length in judge prompts")
    parser.add_argument("--answer-tokens-c", type=int, default=512, help="Study C answer length in judge prompts")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    folder, _ = models.causal_lm_folder("HuggingFaceTB/SmolLM2-135M-Instruct", ROOT / "results" / "cache" / "models")
    tokenizer = ChatTokenizer(folder)
    default = load_templates({})
    study_b = load_templates(yaml.safe_load((ROOT / "experiments" / "study_b_full.yaml").read_text())["prompts"])
    rows = []

    def count(recipe: str, step: str, template, requests) -> None:
        sizes = sorted(len(tokenizer.encode(tokenizer.render(render(template, fields, evidence))))
                       for fields, evidence in requests)
        rows.append((recipe, step, len(sizes), statistics.mean(sizes), sizes[int(0.9 * len(sizes))]))

    def filler(tokens: int) -> str:
        """An answer of about `tokens` tokens (real prose, cut)."""
        return tokenizer.cut(" ".join(prose), tokens)

    # Study A on QASPER: units of real arXiv papers (unarXive sample), 10 per request, title ignored;
    # questions and references from the demo (QASPER format).
    papers = load("unarxive", path=str(SHARED / "unarxive-sample" / "unarXive_data_sample.tar.gz")).units
    papers = papers.filter(papers["kind"].is_in(["paragraph", "caption", "abstract"])
                           & (papers["text"].str.len_chars() > 0))
    by_paper = {}
    for group, text in papers.select("group_id", "text").iter_rows():
        by_paper.setdefault(group, []).append(text)
    prose = [text for texts in by_paper.values() for text in texts]
    demo = load("qasper", path=str(ROOT / "data" / "demo" / "papers.json")).questions
    questions = demo["text"].to_list()
    references = ["\n".join(f"- {answer}" for answer in answers) for answers in demo["answers"].to_list()]
    picks = []
    for _ in range(args.samples):
        texts = by_paper[rng.choice(sorted(by_paper))]
        picks.append((rng.randrange(len(questions)), rng.sample(texts, min(10, len(texts)))))
    answer_a = filler(args.answer_tokens_a)
    count("study_a_qasper", "answer_rag (10 units)", default["answer_rag"],
          [({"question": questions[q]}, units) for q, units in picks])
    count("study_a_qasper", f"judge_grounded (10 units, {args.answer_tokens_a}-token answer)", default["judge_grounded"],
          [({"question": questions[q], "references": references[q], "answer": answer_a}, units) for q, units in picks])
    count("study_a_qasper", f"judge_quality ({args.answer_tokens_a}-token answer)", default["judge_quality"],
          [({"question": questions[q], "answer": answer_a}, ()) for q, _ in picks])

    # Study B: five paragraphs (title prepended) of the question's own candidates; short-answer prompts.
    for name, bundle in [
        ("hotpotqa", load("hotpotqa", path=str(SHARED / "hotpotqa" / "hotpot_dev_distractor_100.json"))),
        ("musique", load("musique", path=str(SHARED / "musique" / "kag_musique_ans_train_100.json.gz"))),
    ]:
        units = {}
        for group, title, text in bundle.units.select("group_id", "title", "text").iter_rows():
            units.setdefault(group, []).append(f"{title} {text}")
        items = [(text, units[group]) for text, group in bundle.questions.select("text", "group_id").iter_rows()]
        count("study_b_full", f"{name} answer_rag (5 paragraphs)", study_b["answer_rag"],
              [({"question": text}, rng.sample(paragraphs, 5)) for text, paragraphs in items])
        count("study_b_full", f"{name} answer_closed_book", study_b["answer_closed_book"],
              [({"question": text}, ()) for text, _ in items])
    corpus = json.loads(gzip.decompress((SHARED / "2wikimultihopqa" / "hipporag_2wiki_corpus_6119.json.gz")
                                        .read_bytes()))
    passages = [f"{passage['title']} {passage['text']}" for passage in corpus]
    wiki_questions = [record["question"] for record in
                      json.loads((SHARED / "2wikimultihopqa" / "lag_dev_questions_covered_354.json").read_text())]
    count("study_b_full", "twowiki answer_rag (5 paragraphs)", study_b["answer_rag"],
          [({"question": text}, rng.sample(passages, 5)) for text in wiki_questions])
    count("study_b_full", "twowiki answer_closed_book", study_b["answer_closed_book"],
          [({"question": text}, ()) for text in wiki_questions])

    # Study C: arXiv title + abstract documents; synthetic queries stand in as the questions (one per paper: its
    # title, as long as a one-line query).
    arxiv = load("arxiv_metadata",
                 path=str(SHARED / "arxiv-metadata-sample" / "arxiv-metadata-oai-snapshot.first200.jsonl")).units
    documents = [f"{title} {text}" for title, text in arxiv.select("title", "text").iter_rows()]
    titles = arxiv["title"].to_list()
    answer_c = filler(args.answer_tokens_c)
    count("study_c_full", "synthetic_queries", default["synthetic_queries"],
          [({"title": title, "abstract": text}, ()) for title, text in arxiv.select("title", "text").iter_rows()])
    count("study_c_full", "rephrase", default["rephrase"], [({"question": title}, ()) for title in titles])
    count("study_c_full", "subqueries (n = 3)", default["subqueries"],
          [({"question": title, "n": "3"}, ()) for title in titles])
    count("study_c_full", "tool_call", default["tool_call"], [({"question": title}, ()) for title in titles])
    count("study_c_full", "answer_rag (3 documents)", default["answer_rag"],
          [({"question": title}, rng.sample(documents, 3)) for title in titles])
    count("study_c_full", "rerank_listwise (10 x 600 chars)", default["rerank_listwise"],
          [({"question": title, "n": "10"}, [d[:600] for d in rng.sample(documents, 10)]) for title in titles])
    count("study_c_full", "tool_answer (3 documents)", default["tool_answer"],
          [({"question": title, "call": json.dumps({"search": title})}, rng.sample(documents, 3)) for title in titles])
    count("study_c_full", f"judge_quality ({args.answer_tokens_c}-token answer)", default["judge_quality"],
          [({"question": title, "answer": answer_c}, ()) for title in titles])

    print(f"{'recipe':<16} {'step':<52} {'requests':>8} {'mean':>7} {'p90':>6}")
    for recipe, step, n, mean, p90 in rows:
        print(f"{recipe:<16} {step:<52} {n:>8} {mean:>7.0f} {p90:>6}")


if __name__ == "__main__":
    main()
