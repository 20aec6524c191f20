"""Ingest stage: dataset adapters → canonical units, questions and qrels; grouped splits."""
