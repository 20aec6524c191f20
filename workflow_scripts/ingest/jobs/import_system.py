"""Rule import_system (per dataset and imported system): the system's file as a policy's answers and an arm's run.

In:  the system's file (systems.<name>.path), the dataset's questions (and units, for contexts given as ids), the
     files of the systems generation.policies compares it with; params: its own block first, then theirs.
Out: results/<dataset>/systems/<name>/answers.parquet (GENERATIONS, request_id = qid, source imported),
     run.parquet (RUNS: its contexts in its order) and costs.parquet (SYSTEM_COSTS: its latency, tokens, money).
Every check of ingest/systems.py runs before anything is written, so bad input leaves no table.
"""

from typing import Any

import polars as pl

from workflow_scripts.core.contracts import GENERATIONS, QUESTIONS, RUNS, SYSTEM_COSTS, UNITS
from workflow_scripts.core.tables import read_table, write_table
from workflow_scripts.jobs.runtime import run_job
from workflow_scripts.ingest import systems as imported


def main(smk: Any) -> None:
    name, dataset = smk.wildcards.system, smk.wildcards.dataset
    spec = smk.params.systems[name]
    table = imported.read_system(name, spec)
    compared = {other: imported.read_system(other, block)
                for other, block in smk.params.systems.items() if other != name}
    imported.check_paired({name: table, **compared}, {key: value["path"] for key, value in smk.params.systems.items()})
    imported.check_questions(name, spec["path"], table, read_table(smk.input.questions, QUESTIONS)["qid"], dataset)
    ranked = imported.unit_ids(table, spec["contexts"])
    if spec["contexts"] == "ids":
        units = read_table(smk.input.units, UNITS, columns=["unit_id"])["unit_id"]
        imported.check_context_ids(name, spec["path"], ranked, units, dataset)
    costs = table.select("qid", "latency_s", "prompt_tokens", "completion_tokens", "money").with_columns(
        pl.when(pl.col("money").is_not_null()).then(pl.lit(spec["currency"])).alias("currency"))
    write_table(imported.answers(name, spec["path"], table), smk.output.answers, GENERATIONS)
    write_table(imported.run(ranked), smk.output.run, RUNS)
    write_table(costs.sort("qid"), smk.output.costs, SYSTEM_COSTS)


if __name__ == "__main__":
    run_job(main, snakemake)  # noqa: F821 — injected by Snakemake's script directive
