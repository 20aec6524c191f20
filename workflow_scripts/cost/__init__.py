"""Cost stage: the measured per-query ledger and what each routing policy costs."""
