"""Rule generate_answers (per dataset and policy, or per shard of it): the generator's answer to each question.

In:  the questions, splits and, for a retrieval policy, its arm's run and the units; params: the generator block,
     prompt overrides, the splits answered, the LLM and model caches.
Out: results/<dataset>/answers/<policy>.parquet (GENERATIONS, request_id = qid).
"""

from pathlib import Path
from typing import Any

from workflow_scripts.answers import answering
from workflow_scripts.core.contracts import GENERATIONS
from workflow_scripts.core.tables import write_table
from workflow_scripts.jobs.answers import answered_inputs
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.rendering import load_templates


def main(smk: Any) -> None:
    policy = smk.wildcards.policy
    questions, shown = answered_inputs(smk)
    requests = answering.answer_requests(policy, questions, shown, load_templates(smk.params.prompts))
    engine = llm.load_engine(smk.params.generator, Path(smk.params.model_cache), "models.generator")
    write_table(llm.generate(requests, engine, Path(smk.params.cache)), smk.output.answers, GENERATIONS)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
