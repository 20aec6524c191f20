"""The cost rule's job (rules/report.smk, `cost_ledger`): reads the Snakemake job once, calls cost/ledger.py and
writes the outputs.

In:  the Snakemake job object (only these modules see it).
Out: the files of the rule's `output:`.
"""
