"""Shared by every stage: errors, source-file reading, atomic writes, caches, table contracts, the job runtime, model
resolution, config validation and the names every stage shares."""
