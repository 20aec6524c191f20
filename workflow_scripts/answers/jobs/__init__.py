"""The answer rules' jobs (rules/answer.smk: `generate_answers`, `judge_answers`, `answer_summary`): each reads the
Snakemake job once, calls answers/answering.py and writes the outputs through their contracts.

In:  the Snakemake job object (only these modules see it).
Out: the files of the rule's `output:`.
"""
