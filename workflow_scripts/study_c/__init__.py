"""Study C: synthetic queries, the six strategies, the Study C judge and the study's tables."""
