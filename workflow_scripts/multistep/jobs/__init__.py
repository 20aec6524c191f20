"""The multi-step rules' jobs, one module per rule (rules/multistep.smk): each reads the Snakemake job and its input
files through their contracts, calls the multi-step libraries (loop.py, stops.py, effects.py) and writes the outputs
through theirs.

In:  the Snakemake job object (only these modules see it).
Out: the files of the rule's `output:`.
"""
