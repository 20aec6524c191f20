"""How the two example systems' outputs in this folder were made (docs/your-system.md): ragfrontier's own demo
arms, exported as if they were systems that run elsewhere. Rerun it to remake them.

1. Answer every demo question with SmolLM2-135M-Instruct from the BM25 arm's and the dense arm's top 5 units
   (config.yaml's demo, every split):
     .venv/bin/snakemake --cores all results/demo/answers/bm25.parquet results/demo/answers/dense.parquet \
         --config 'generation={policies: [bm25, dense], splits: [dev, calibration, heldout]}'
2. Export them (this script): `bm25_rag.jsonl` in ragas's columns (user_input, response, retrieved_contexts,
   reference) with each answer's latency and tokens, and `dense_rag.csv` in DeepEval's (input, actual_output,
   retrieval_context as a JSON list, expected_output), without cost columns — the two conventions, and a system
   that reports its cost beside one that does not:
     .venv/bin/python data/your-system/make_example.py
The reference is the question's first reference answer in data/demo/papers.json.
"""

import json
from pathlib import Path

import polars as pl

HERE = Path(__file__).parent
RESULTS = Path("results/demo")


def system(arm: str) -> pl.DataFrame:
    """Question, reference, the arm's answer with its latency and tokens, and the texts of the units it showed."""
    questions = pl.read_parquet(RESULTS / "questions.parquet").select("qid", "text", "answers")
    answers = pl.read_parquet(RESULTS / "answers" / f"{arm}.parquet").filter(pl.col("status") == "ok")
    units = pl.read_parquet(RESULTS / "units.parquet").select("unit_id", pl.col("text").alias("context"))
    run = pl.read_parquet(RESULTS / "runs" / f"{arm}.parquet").join(units, on="unit_id").sort("qid", "rank")
    contexts = run.group_by("qid", maintain_order=True).agg(pl.col("context"))
    table = questions.join(answers.select(pl.col("request_id").alias("qid"), pl.col("text").alias("answer"),
                                          "latency_s", "prompt_tokens", "completion_tokens"), on="qid")
    # a question the arm found nothing for was answered without evidence: no contexts
    return table.join(contexts, on="qid", how="left").with_columns(
        pl.col("context").fill_null(pl.lit([], dtype=pl.List(pl.String)))).sort("qid")


def main() -> None:
    bm25 = system("bm25")
    with open(HERE / "bm25_rag.jsonl", "w", encoding="utf-8") as handle:
        for row in bm25.iter_rows(named=True):
            record = {"user_input": row["text"], "response": row["answer"].strip(),
                      "retrieved_contexts": row["context"], "reference": row["answers"][0],
                      "latency_s": round(row["latency_s"], 3), "prompt_tokens": row["prompt_tokens"],
                      "completion_tokens": row["completion_tokens"]}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    dense = system("dense")
    dense.select(
        pl.col("text").alias("input"), pl.col("answer").str.strip_chars().alias("actual_output"),
        pl.col("context").map_elements(lambda texts: json.dumps(list(texts), ensure_ascii=False),
                                       return_dtype=pl.String).alias("retrieval_context"),
        pl.col("answers").list.first().alias("expected_output"),
    ).write_csv(HERE / "dense_rag.csv")


if __name__ == "__main__":
    main()
