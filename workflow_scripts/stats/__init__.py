"""Statistics shared by the stages, below all of them: paired comparisons with a bootstrap over groups, a paired
permutation test and win / tie / loss shares (`paired.py`), used by routing, answers and Study C."""
