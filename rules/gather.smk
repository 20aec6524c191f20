# Gathers (config `shards`, rules/common.smk GATHERS): for each stage split into shards, `<stage>_gather` joins
# the shard jobs' files (`<table>.shards/<i>-of-<n>.parquet`) into the tables the unsharded job writes, on CPU.
# The script path goes through params: Snakemake reads a `script:` expression when the job runs, after this loop,
# so a bare `gather_script` would make every gather run the last stage's script.


for gathered_stage, (gather_script, gather_tables) in GATHERS.items():
    if shard_count(gathered_stage) > 1 and hasattr(rules, gathered_stage):

        rule:
            name:
                gathered_stage + GATHER_RULE_SUFFIX
            input:
                unpack(gather_inputs(gathered_stage, gather_tables)),
            output:
                **{key: unsharded(path) for key, path in getattr(rules, gathered_stage).output.items()},
            log:
                unsharded(getattr(rules, gathered_stage).log[0]),
            benchmark:
                unsharded(getattr(rules, gathered_stage).benchmark)
            conda:
                "../envs/cpu.yaml"
            params:
                tables=gather_tables,
                script=gather_script,
            script:
                "{params.script}"
