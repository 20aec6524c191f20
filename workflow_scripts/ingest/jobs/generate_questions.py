"""Rule generate_questions (per dataset with `generate_questions`): questions the generator writes from sampled
units (ingest/questions.py).

In:  params: the dataset's config entry, the generator block, prompt overrides, the LLM and model caches.
Out: results/<dataset>/generated_questions.parquet (GENERATED_QUESTIONS) and its JSON report.
"""

from pathlib import Path
from typing import Any

from workflow_scripts.core.atomic import write_json_atomic
from workflow_scripts.core.contracts import GENERATED_QUESTIONS
from workflow_scripts.core.tables import write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.ingest.questions import generate_questions
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.rendering import load_templates


def main(smk: Any) -> None:
    template = load_templates(smk.params.prompts)["generated_question"]
    engine = llm.load_engine(smk.params.generator, Path(smk.params.model_cache), "models.generator")
    table, report = generate_questions(smk.wildcards.dataset, smk.params.spec, engine, Path(smk.params.cache), template)
    write_table(table, smk.output.questions, GENERATED_QUESTIONS)
    write_json_atomic(report, smk.output.report)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
