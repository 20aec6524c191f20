"""Retrieval stage: Lucene BM25, dense (FAISS), ColBERT PLAID, rerankers, fusion, arms and their evaluation."""
