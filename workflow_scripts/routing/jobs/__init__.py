"""The routing rules' jobs, one module per rule (rules/route.smk, rules/report.smk): each reads the Snakemake job and
its input files through their contracts, calls the routing libraries (labels.py, features.py, routers.py,
frontiers.py, policy_costs.py) and writes the outputs through theirs.

In:  the Snakemake job object (only these modules see it).
Out: the files of the rule's `output:`.
"""
