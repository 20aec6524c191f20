"""Study C: synthetic queries, the six strategies, the quality judge and the study's tables."""
