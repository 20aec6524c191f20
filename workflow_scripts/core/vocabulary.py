"""The names every stage shares, defined once: scopes, splits, policies, scorers, judges and what
each LLM job renders. The rules (`rules/*.smk`), the config checker and the stage modules import them from here.

In:  nothing (constants only; importing this module costs nothing, so the Snakefile may).
Out: the tuples and mappings below.
"""

# --- Retrieval
SCOPES = ("global", "group")  # global: the whole corpus; group: the question's own paper or candidate paragraphs


def ranking_name(method: str, scope: str) -> str:
    """The name of a shared first-stage ranking of `method` over `scope`: its file stem under first_stage/ and the
    key under which a rerank or cost job receives it."""
    return f"{method}_{scope}"


# --- Splits (ingest/splits.py): routers are fitted on dev, thresholds calibrated on calibration, scored on heldout
SPLIT_ORDER = ("dev", "calibration", "heldout")

# --- Policies
CLOSED_BOOK = "closed_book"  # the policy that answers without retrieval: Study B's base


def is_closed_book_pair(pair: dict) -> bool:
    """A routing pair whose base is closed_book is Study B's retrieve-or-not decision (labels from answers);
    any other pair is Study A's switch between two arms (labels from retrieval metrics)."""
    return pair["base"] == CLOSED_BOOK


# what a routing pair's held-out table compares: never switch, always switch, switch when the router fires
OFF, ALWAYS_ON, ADAPTIVE = "off", "always_on", "adaptive"

# --- Deterministic answer scorers (judging/metrics.py): Study B's correct(with) − correct(without)
SCORERS = ("em", "f1", "contains")

# --- LLM judges: the judgments table suffix and the template each renders
JUDGES = ("study_a", "study_c")

# --- Prompt templates each LLM job renders: its rule receives only these templates' overrides (prompts.<name>),
# so editing one template reruns only the jobs that render it.
REASK_TEMPLATE = "reask"  # a judge's follow-up turn when a free-text reply did not parse
ANSWER_TEMPLATES = {CLOSED_BOOK: ("answer_closed_book",), "retrieval": ("answer_rag",)}
JUDGE_TEMPLATES = tuple(f"judge_{judge}" for judge in JUDGES) + (REASK_TEMPLATE,)
SYNTHETIC_TEMPLATES = ("synthetic_queries",)
QUESTION_TEMPLATES = ("generated_question",)  # questions written from a unit (ingest/questions.py)

# --- Study C's six strategies (study_c/strategies.py), classic first (the paired baseline), and what each reads:
# its templates and its `study_c` settings
STRATEGY_TEMPLATES = {
    "classic": ("answer_rag",),
    "rephrased": ("rephrase", "answer_rag"),
    "rephrased_reranked": ("rephrase", "rerank_listwise", "answer_rag"),
    "fusion": ("subqueries", "answer_rag"),
    "tool_call": ("tool_call", "tool_answer", "answer_rag"),
    "colbert": ("answer_rag",),
}
STRATEGY_SETTINGS = {
    "classic": ("top_k", "max_new_tokens"),
    "rephrased": ("top_k", "max_new_tokens"),
    "rephrased_reranked": ("top_k", "rerank_candidates", "rerank_chars", "max_new_tokens"),
    "fusion": ("top_k", "fusion", "max_new_tokens"),
    "tool_call": ("top_k", "max_new_tokens"),
    "colbert": ("top_k", "max_new_tokens"),  # and the `colbert` block, as the index rules
}
