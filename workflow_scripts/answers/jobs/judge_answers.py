"""Rule judge_answers (per dataset and policy, or per shard of it): both judges on each answer.

In:  the questions, splits, the policy's answers and, for a retrieval policy, its arm's run and the units; params:
     the judge block, re-asks, prompt overrides, the judged splits, the LLM and model caches.
Out: results/<dataset>/judgments/<policy>_grounded.parquet (JUDGMENTS_GROUNDED: against the references and the
     evidence shown) and <policy>_quality.parquet (JUDGMENTS_QUALITY: the answer alone).
"""

from pathlib import Path
from typing import Any

from workflow_scripts.answers import answering
from workflow_scripts.core.contracts import GENERATIONS
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.answers import answered_inputs
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.judging import judges
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.rendering import load_templates


def main(smk: Any) -> None:
    questions, shown = answered_inputs(smk)
    items = answering.judge_items(questions, shown, read_table(smk.input.answers, GENERATIONS))
    templates = load_templates(smk.params.prompts)
    engine = llm.load_engine(smk.params.judge, Path(smk.params.model_cache), "models.judge")
    for name, spec in answering.JUDGES.items():
        table = judges.judge(spec, items, engine, Path(smk.params.cache), templates, smk.params.max_reasks)
        write_table(table, smk.output[name], spec.contract)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
