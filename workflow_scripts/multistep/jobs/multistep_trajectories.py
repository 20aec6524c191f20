"""Rule multistep_trajectories (per dataset and multi-step policy): every question's path, step by step
(multistep/loop.py).

In:  the questions and units, the dataset's BM25 index (searched in a child process: retrieval/bm25.py
     SearchProcess); params: the policy (strategy, arm, k, per_step, total), its
     arm's scope, retrieval.bm25, the generator block, the prompt overrides of the templates a step renders, the LLM
     and model caches.
Out: results/<dataset>/multistep/<policy>/trajectories.parquet (TRAJECTORIES).
"""

from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from workflow_scripts.core.contracts import QUESTIONS, TRAJECTORIES, UNITS
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.multistep.loop import Settings, run_loop
from workflow_scripts.retrieval.bm25 import SearchProcess


def main(smk: Any) -> None:
    policy, bm25 = smk.params.policy, smk.params.bm25
    settings = Settings(policy["strategy"], policy["k"], policy["per_step"], policy["total"],
                        policy.get("threshold"), policy.get("mask_below"))
    with SearchProcess(Path(smk.input.index), bm25["k1"], bm25["b"], smk.threads) as searcher:
        table = trajectories(smk, settings, searcher)
    write_table(table, smk.output.trajectories, TRAJECTORIES)


def trajectories(smk: Any, settings: Settings, searcher: SearchProcess) -> pl.DataFrame:
    """The loop with a step's search in the searcher's process (the JVM never beside torch) and units read by id."""

    def retrieve(queries: pl.DataFrame) -> pl.DataFrame:
        return searcher.search(queries, settings.per_step, smk.params.scope)[0]

    def texts(unit_ids: list[str]) -> dict[str, str]:
        units = read_table(smk.input.units, UNITS, where=("unit_id", unit_ids), columns=["unit_id", "text"])
        return dict(zip(units["unit_id"], units["text"]))

    engine = llm.load_engine(smk.params.generator, Path(smk.params.model_cache), "models.generator")
    generate = partial(llm.generate, engine=engine, cache_dir=Path(smk.params.cache))
    questions = read_table(smk.input.questions, QUESTIONS).sort("qid")
    return run_loop(questions, settings, load_templates(smk.params.prompts), retrieve, texts, generate)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
