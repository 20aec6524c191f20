"""Judging answers: the LLM judges (judges.py), Study B's deterministic answer metrics (metrics.py) and the
human-review loop (review.py)."""
