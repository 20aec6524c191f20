"""The ingest rules' jobs (rules/ingest.smk: `generate_questions`, `ingest`, `splits`): each reads the Snakemake job
once, calls ingest/questions.py, stage.py or splits.py and writes the outputs through their contracts.

In:  the Snakemake job object (only these modules see it).
Out: the files of the rule's `output:`.
"""
