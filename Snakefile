# ragfrontier — one DAG from raw datasets to retrieval, generation, routing and reports.
# The stages live in rules/*.smk (read them in this order), each after its input functions (rules/inputs/); their
# logic in workflow_scripts/<stage>/ (docs/development.md, "Layout").
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


report: "report/workflow.rst"  # the landing page of `snakemake --report`: the run's generated findings


include: "rules/common.smk"
include: "rules/inputs/ingest.smk"
include: "rules/ingest.smk"
include: "rules/inputs/retrieve.smk"
include: "rules/retrieve.smk"
include: "rules/inputs/systems.smk"
include: "rules/systems.smk"
include: "rules/inputs/route.smk"
include: "rules/route.smk"
include: "rules/inputs/answer.smk"
include: "rules/answer.smk"
include: "rules/inputs/review.smk"
include: "rules/review.smk"
include: "rules/inputs/multistep.smk"
include: "rules/multistep.smk"
include: "rules/inputs/report.smk"
include: "rules/report.smk"
include: "rules/inputs/study_c.smk"
include: "rules/study_c.smk"
include: "rules/gather.smk"


onstart:
    remove_partial_files()
    record_run_provenance()
    start_model_servers()


onsuccess:
    stop_model_servers()


onerror:
    stop_model_servers()


rule all:
    default_target: True
    input:
        final_targets(),
