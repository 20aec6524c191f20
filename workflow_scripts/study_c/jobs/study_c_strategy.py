"""Rule study_c_strategy (per dataset and strategy, or per shard of it): one of the six RAG strategies on every
synthetic query, its run and its answer with costs (study_c/strategies.py).

In:  the queries, the units and the strategy's search indexes (ColBERT, or the dense vectors and FAISS index);
     params: the strategy's settings, study_c.colbert, models.embedder, the generator block, prompt overrides and
     the LLM, model and embedding caches.
Out: results/<dataset>/study_c/runs/<strategy>.parquet (STUDY_C_RUNS) and answers/<strategy>.parquet
     (STUDY_C_ANSWERS).
"""

from pathlib import Path
from typing import Any

from workflow_scripts.core.contracts import STUDY_C_ANSWERS, STUDY_C_QUERIES, STUDY_C_RUNS
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job, shard_of
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.study_c.strategies import Context, UnitTexts, own_queries, retriever_for, strategy_tables


def main(smk: Any) -> None:
    strategy = smk.wildcards.strategy
    queries = own_queries(read_table(smk.input.queries, STUDY_C_QUERIES), shard_of(smk))
    engine = llm.load_engine(smk.params.generator, Path(smk.params.model_cache), "models.generator")
    retriever = retriever_for(strategy, smk.params.colbert, smk.input.get("colbert_index"), smk.input.get("checkpoint"),
                              smk.params.embedder, smk.input.get("vectors"), smk.input.get("index"),
                              Path(smk.params.embedding_cache))
    ctx = Context(engine=engine, cache=Path(smk.params.cache), templates=load_templates(smk.params.prompts),
                  settings=smk.params.settings, retriever=retriever, doc_texts=UnitTexts(Path(smk.input.units)))
    runs, answers = strategy_tables(strategy, ctx, queries)
    write_table(runs, smk.output.run, STUDY_C_RUNS)
    write_table(answers, smk.output.answers, STUDY_C_ANSWERS)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
