"""ragfrontier: offline evaluation of retrieval-augmented generation, one Snakemake DAG.

Each stage's logic lives in one module of this package; `rules/*.smk` wires the modules into the DAG.
"""
