"""Judging answers: the LLM judges, deterministic answer metrics and the human-review loop."""
