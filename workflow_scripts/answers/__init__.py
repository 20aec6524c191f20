"""Answer stage: each policy's generated answers, their judgments and the policy comparisons."""
