"""Reciprocal rank fusion (Cormack et al., 2009): the one implementation behind the hybrid arms and Study C's
multi-query fusion.

In:  ranked lists as tables (qid, unit_id, rank), rank 1-based; the constant k (60 in both studies).
Out: (qid, unit_id, fused_score) with fused(d) = Σ_i 1 / (k + rank_i(d)) over the lists that retrieved d, ordered
     per qid by fused_score descending, unit_id ascending (so identical inputs give identical orders).
"""

from collections.abc import Sequence

import polars as pl

KEYS = ("qid", "unit_id")


def rrf(rankings: Sequence[pl.DataFrame], k: int) -> pl.DataFrame:
    """Fuse `rankings` (each with qid, unit_id, rank) by reciprocal rank; see the module docstring."""
    if k < 0:
        raise ValueError(f"rrf: k must be non-negative, got {k}")
    parts = [
        ranking.select(*KEYS, (1.0 / (k + pl.col("rank").cast(pl.Float64))).alias(f"rrf_{index}"))
        for index, ranking in enumerate(rankings)
    ]
    if not parts:
        return pl.DataFrame(schema={"qid": pl.String, "unit_id": pl.String, "fused_score": pl.Float64})
    merged = parts[0]
    for part in parts[1:]:
        merged = merged.join(part, on=list(KEYS), how="full", coalesce=True)
    terms = pl.concat_list([pl.col(f"rrf_{index}").fill_null(0.0) for index in range(len(parts))])
    # summed smallest first: floating-point addition is not associative, so with three or more lists a fixed list
    # order could split documents whose ranks are the same multiset (two lists: a + b = b + a, unchanged)
    fused = merged.select(*KEYS, terms.list.sort().list.sum().alias("fused_score"))
    return fused.sort(["qid", "fused_score", "unit_id"], descending=[False, True, False])
