"""Multi-step retrieval stage: the batched loop that retrieves again, the stop rules replayed on its trajectories,
and what each extra step rescues and harms."""
