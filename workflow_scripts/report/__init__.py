"""Report stage: figures and results/summary_<name>.md."""
