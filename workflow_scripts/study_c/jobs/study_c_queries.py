"""Rule study_c_queries (per dataset, or per shard of it): a problem and a method query per sampled paper
(study_c/synthetic.py); a sharded stage's gather is study_c_queries_gather.py.

In:  the units and the ingest report; params: study_c.papers, study_c.seed, the generator block, prompt overrides,
     the LLM and model caches.
Out: results/<dataset>/study_c/queries.parquet (STUDY_C_QUERIES) and its JSON report.
"""

import json
from pathlib import Path
from typing import Any

from workflow_scripts.core.atomic import write_json_atomic
from workflow_scripts.core.contracts import STUDY_C_QUERIES
from workflow_scripts.core.tables import write_table
from workflow_scripts.jobs.runtime import run_job, shard_of
from workflow_scripts.llm import engine as llm
from workflow_scripts.llm.rendering import load_templates
from workflow_scripts.study_c.synthetic import synthetic_queries


def main(smk: Any) -> None:
    template = load_templates(smk.params.prompts)["synthetic_queries"]
    engine = llm.load_engine(smk.params.generator, Path(smk.params.model_cache), "models.generator")
    ingest = json.loads(Path(smk.input.report).read_text())
    skipped_upstream = ingest.get("counts", {}).get("papers_without_abstract_skipped", 0)
    table, report = synthetic_queries(smk.input.units, skipped_upstream, smk.params.papers, smk.params.seed,
                                      shard_of(smk), engine, Path(smk.params.cache), template)
    write_table(table, smk.output.queries, STUDY_C_QUERIES)
    write_json_atomic(report, smk.output.report)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
