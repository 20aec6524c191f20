"""Report stage: figures and results/summary.md."""
