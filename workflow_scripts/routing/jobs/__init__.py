"""The routing rules' jobs, one module per rule (rules/route.smk): each reads the Snakemake job once, calls
routing/protocol.py and writes the outputs.

In:  the Snakemake job object (only these modules see it).
Out: the files of the rule's `output:`.
"""
