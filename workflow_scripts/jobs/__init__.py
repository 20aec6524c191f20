"""The job layer's shared ground: how a rule's job module runs (`runtime.run_job`) and the one generic gather job
of every sharded stage (`gather.py`). Only job modules (`<stage>/jobs/*.py` and this package) see the Snakemake
object; the libraries below them take and return plain values."""
