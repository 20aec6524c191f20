"""The report rules' jobs, one module per rule (rules/report.smk): each reads the Snakemake job once, calls
report/figures.py or report/summary.py and writes the outputs.

In:  the Snakemake job object (only these modules see it).
Out: the files of the rule's `output:`.
"""
