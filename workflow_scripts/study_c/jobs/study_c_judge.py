"""Rule study_c_judge (per dataset and strategy, or per shard of it): the quality judge on each answered query.

In:  the synthetic queries and the strategy's answers; params: the judge block, re-asks, prompt overrides, the LLM
     and model caches.
Out: results/<dataset>/study_c/judgments/<strategy>.parquet (JUDGMENTS_QUALITY, item_id = qid).
"""

from pathlib import Path
from typing import Any

from workflow_scripts.core.contracts import JUDGMENTS_QUALITY, STUDY_C_ANSWERS, STUDY_C_QUERIES
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job, shard_of
from workflow_scripts.core.shards import own_rows
from workflow_scripts.judging import judges
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.study_c.comparisons import judge_items


def main(smk: Any) -> None:
    answers = own_rows(read_table(smk.input.answers, STUDY_C_ANSWERS), "qid", shard_of(smk), "answered queries")
    items = judge_items(read_table(smk.input.queries, STUDY_C_QUERIES), answers)
    engine = llm.load_engine(smk.params.judge, Path(smk.params.model_cache), "models.judge")
    templates = load_templates(smk.params.prompts)
    table = judges.judge(judges.QUALITY, items, engine, Path(smk.params.cache), templates, smk.params.max_reasks)
    write_table(table, smk.output.judgments, JUDGMENTS_QUALITY)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
