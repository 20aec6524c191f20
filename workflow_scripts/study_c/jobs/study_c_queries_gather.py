"""Rule study_c_queries_gather (per dataset, when config `shards` splits study_c_queries): the shards' queries
joined as the generic gather joins any stage's tables (jobs/gather.py), and their JSON reports merged.

In:  every shard's queries table and report (inputs `queries__<i>`, `report__<i>`); params: `tables` (as every
     gather's).
Out: results/<dataset>/study_c/queries.parquet (STUDY_C_QUERIES) and its JSON report, as the unsharded job writes.
"""

import json
from typing import Any

from workflow_scripts.core.atomic import write_json_atomic
from workflow_scripts.jobs.gather import gather_tables, shard_paths
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.study_c.synthetic import merged_reports


def main(smk: Any) -> None:
    gather_tables(smk, smk.params.tables)
    reports = [json.loads(path.read_text()) for path in shard_paths(smk, "report")]
    write_json_atomic(merged_reports(reports), smk.output.report)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
