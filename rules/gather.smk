# Gathers (config `shards`): for each stage split into shards, `<stage>_gather` joins the shard jobs' files
# (`<table>.shards/<i>-of-<n>.parquet`) into the tables the unsharded job writes, on CPU, through the contracts the
# stage's `output:` names (`sharded(stage, path, contract)`, rules/common.smk). The job module goes through params:
# Snakemake reads a `script:` expression when the job runs, after this loop, so a bare loop variable would make
# every gather run the last stage's.


for gathered_stage in GATHERED:
    if shard_count(gathered_stage) > 1 and hasattr(rules, gathered_stage):

        rule:
            name:
                gathered_stage + GATHER_RULE_SUFFIX
            input:
                unpack(gather_inputs(gathered_stage)),
            output:
                **{key: unsharded(path) for key, path in getattr(rules, gathered_stage).output.items()},
            log:
                unsharded(getattr(rules, gathered_stage).log[0]),
            benchmark:
                unsharded(getattr(rules, gathered_stage).benchmark)
            conda:
                "../envs/cpu.yaml"
            params:
                tables=gathered_tables(gathered_stage),
                script=gather_script(gathered_stage),
            script:
                "{params.script}"
