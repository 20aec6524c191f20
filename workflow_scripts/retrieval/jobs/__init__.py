"""The retrieval rules' jobs (rules/retrieve.smk, and Study C's ColBERT rules in rules/study_c.smk): each reads the
Snakemake job once, calls the retrieval library (bm25.py, dense.py, colbert.py, rerank.py, arms.py, evaluate.py)
and writes the outputs.

In:  the Snakemake job object (only these modules see it).
Out: the files of the rule's `output:`.
"""
