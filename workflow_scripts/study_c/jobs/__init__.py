"""Study C's rules' jobs (rules/study_c.smk: `study_c_queries`, `study_c_strategy`, `study_c_judge`,
`study_c_tables`; the ColBERT index rules' jobs are retrieval's): each reads the Snakemake job once, calls
study_c/synthetic.py, strategies.py or comparisons.py (and the judge) and writes the outputs.

In:  the Snakemake job object (only these modules see it).
Out: the files of the rule's `output:`.
"""
