"""The names every stage shares, defined once: the config's enumerations (formats, devices, backends, first stages,
scopes, index and reranker kinds, routers, feature families, splits, strategies ...), policies, scorers, judges and
what each LLM job renders. The rules (`rules/*.smk`), the config schema, the config checker and the stage modules
read them from here.

In:  nothing (constants only; importing this module costs nothing, so the Snakefile may).
Out: the tuples and mappings below; `enumerations()` names the ones the config schema's `x-enum` markers take
     (core/schema.load_schema fills them in, so a value is added here and nowhere else; each stage's dispatch table
     is keyed by the same tuple, checked in tests/test_vocabulary.py).
"""

# --- Ingest (ingest/adapters/registry.py: each format's loader; trec.py and pool.py: their file formats)
DATASET_FORMATS = ("qasper", "beir", "trec", "pool_tsv", "hotpotqa", "ircot", "musique", "twowiki", "unarxive",
                   "arxiv_metadata", "systems")  # systems: imported systems' files (ingest/systems.py)
COLLECTION_FORMATS = ("html_tar", "smart")  # trec: html_tar (CACM), smart (Cranfield)
TOPIC_FORMATS = ("cacm", "smart", "tsv")
TREC_QRELS_FORMATS = ("trec", "cranfield")
POOL_QRELS_FORMATS = ("trec", "json")

# --- Models
DEVICES = ("cpu", "cuda")
BACKENDS = ("transformers", "openai", "vllm")  # an LLM block's backend (llm/engine.LOADERS)
IMPORTED = "imported"  # the backend, source and token basis of an imported system's answers (ingest/systems.py)
SYSTEM_CONTEXTS = ("texts", "ids")  # how an imported system gives its retrieved contexts

# --- Retrieval
FIRST_STAGES = ("bm25", "dense", "hybrid", "run")  # an arm's first stage (retrieval/arms.py); hybrid: RRF of its
# `fuse` stages (BM25 + dense unless set); run: an imported TREC run (retrieval/runs.py)
FUSABLE_STAGES = ("bm25", "dense", "run")  # what a hybrid arm may fuse
SCOPES = ("global", "group")  # global: the whole corpus; group: the question's own paper or candidate paragraphs
TITLE_MODES = ("prepend", "ignore")  # a unit's title in its indexed text (retrieval/unit_text.py)
DENSE_INDEX_KINDS = ("flat", "ivf", "hnsw")  # FAISS index kinds (retrieval/dense.INDEX_PARAMS)
RERANKER_KINDS = ("cross_encoder", "bi_encoder", "llm_pointwise")  # retrieval/rerank.load_scorer


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

# --- Routers (routing/routers.py) and the feature families they read (routing/features.py)
FEATURE_FAMILIES = ("base_arm", "query_only", "retrieval_score", "uncertainty")
LEARNED_ROUTERS = ("ridge", "bur_linear", "bur_gbm")  # fitted on a pair's features
# one-feature baselines: the feature and its sign (the router fires on high sign × feature)
SCORE_ROUTERS = {
    "entropy": ("unc_entropy", 1.0),
    "min_confidence": ("unc_min_prob", -1.0),
    "bm25_top": ("bm25_top1", 1.0),
}
CONTROL_ROUTERS = ("random", "always", "never")  # read no feature
ROUTER_KINDS = LEARNED_ROUTERS + tuple(SCORE_ROUTERS) + CONTROL_ROUTERS

# --- Statistics and cost
BOOTSTRAP_METHODS = ("percentile", "bca")  # stats/paired.group_bootstrap
COST_MEASURES = ("seconds", "token_equivalents", "money")  # what a policy costs, per query (cost/pricing.py)

# --- Deterministic answer scorers (judging/metrics.py): Study B's correct(with) − correct(without)
SCORERS = ("contains", "em", "f1")

# --- Multi-step retrieval (multistep/loop.py): how the next query is made, and why a question's path ended
MULTISTEP_STRATEGIES = ("ircot", "iter_retgen", "flare")
TRIGGER_STRATEGIES = ("flare",)  # a look-ahead decides whether a step retrieves: its budget is its threshold grid
STOP_REASONS = ("answered", "rule", "cap")  # the chain wrote its answer; a stop rule accepted the step; step K
STOP_ROUTERS = ("uncertainty", "entropy", "novelty", "ridge")  # multistep/budgets.py: a step's continue score

# --- LLM judges: the judgments table suffix and the template each renders
JUDGES = ("grounded", "quality")  # grounded: against the references and the evidence shown; quality: the answer alone
JUDGE_SCORINGS = ("expected", "argmax")  # a judge's score: the expectation over its choices, or the top choice

# --- Prompt templates each LLM job renders: its rule receives only these templates' overrides (prompts.<name>),
# so editing one template reruns only the jobs that render it.
REASK_TEMPLATE = "reask"  # a judge's follow-up turn when a free-text reply did not parse
ANSWER_TEMPLATES = {CLOSED_BOOK: ("answer_closed_book",), "retrieval": ("answer_rag",)}
MULTISTEP_TEMPLATES = ("multistep_thought", "answer_rag")  # a step's chain-of-thought sentence, its forced answer
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
STRATEGIES = tuple(STRATEGY_TEMPLATES)
STRATEGY_SETTINGS = {
    "classic": ("top_k", "max_new_tokens"),
    "rephrased": ("top_k", "max_new_tokens"),
    "rephrased_reranked": ("top_k", "rerank_candidates", "rerank_chars", "max_new_tokens"),
    "fusion": ("top_k", "fusion", "max_new_tokens"),
    "tool_call": ("top_k", "max_new_tokens"),
    "colbert": ("top_k", "max_new_tokens"),  # and the `colbert` block, as the index rules
}


# --- What the tables hold (core/contracts.py builds the table schemas from these)
UNIT_KINDS = frozenset({"paragraph", "heading", "caption", "passage", "abstract", "document"})  # a unit's kind
TOKEN_COLUMNS = ("prompt_tokens", "completion_tokens")  # an LLM call's usage, priced by models.<role>.prices
STATUSES = frozenset({"ok", "length", "parse_failed", "error"})  # a generation's or judgment's status
OBTAINED = ("constrained", "parsed", "repaired", "reasked", "length", "parse_failed", "error")  # how a judgment came
STUDY_C_METRICS = ("accuracy", "completeness", "faithfulness", "relevance", "clarity", "overall")  # the 1-5 scores
SCORE_BASES = ("masked_exact", "top_k", "argmax_only")  # judging/scores.py, strongest first
ARM_OUTCOMES = ("rescue", "harm", "tie")  # a label's sign between two arms (Study A)
RETRIEVAL_OUTCOMES = ("benefit", "harm", "neutral")  # ... between no retrieval and retrieval (Study B)
# a router's budget frontiers (routing/frontiers.py): exact ranks the held-out queries themselves (a diagnostic, no
# threshold); the rules set a threshold on calibration, nominal (deployable) or lowered by the DKW slack (conservative)
EXACT_FRONTIER, DEPLOYABLE, CONSERVATIVE = "exact", "deployable", "conservative"
FRONTIER_RULES = (DEPLOYABLE, CONSERVATIVE)  # how a frontier's threshold is set on calibration
FRONTIER_KINDS = (EXACT_FRONTIER, *FRONTIER_RULES)  # a frontier table's `frontier` values, in plotting order

# router features by family (routing/features.py)
KEEP_FEATURE_NAMES = (
    "top1_cos", "gap12_cos", "mean_top5_cos", "overlap_top10", "rerank_top1_vector_rank", "caption_share"
)
QUESTION_WORDS = ("what", "which", "who", "when", "where", "why", "how", "yesno", "other")
QUERY_FEATURE_NAMES = ("q_tokens", "q_has_digits", "q_capitalized") + tuple(f"qword_{w}" for w in QUESTION_WORDS)
UNCERTAINTY_FEATURE_NAMES = ("unc_entropy", "unc_min_prob", "unc_seq_logprob")
PROBE_FEATURE_NAMES = ("bm25_top1", "bm25_gap12", "bm25_mean_top5")
FEATURE_FAMILY = {
    **{name: "base_arm" for name in KEEP_FEATURE_NAMES},
    **{name: "query_only" for name in QUERY_FEATURE_NAMES},
    **{name: "uncertainty" for name in UNCERTAINTY_FEATURE_NAMES},
    **{name: "retrieval_score" for name in PROBE_FEATURE_NAMES},
}

# What a cost source is priced as (cost/ledger.py; each source declares its kind in rules/inputs/*.smk): a search
# per question, reranked (query, unit) pairs, a per-query table job, LLM answers (each its own latency), LLM judgments.
COST_KINDS = ("retrieval", "rerank", "table", "generation", "judge", "multistep", "imported")
LLM_COST_KINDS = ("generation", "judge", "multistep")  # the kinds whose tokens cost money at the model block's prices
COST_BASES = frozenset({"item", "job_even", IMPORTED})  # how a job's seconds are shared among its items
QUERY_TYPES = ("problem", "method")  # Study C's synthetic queries, in the order each paper's rows are written
AGREEMENT_MEASURES = (
    "spearman",
    "kappa",
    "auroc",
    "bias",
)  # the judge against its reference label (judging/validation.py)
GATE_MEASURES = (
    "auroc",
    "spearman",
    "kappa",
)  # higher is better: judging.validate.gate may require one's CI above a floor


def enumerations() -> dict[str, tuple]:
    """The enumerations the config schema's `x-enum: <name>` markers take, read when the schema is loaded."""
    return {
        "dataset_formats": DATASET_FORMATS,
        "collection_formats": COLLECTION_FORMATS,
        "topic_formats": TOPIC_FORMATS,
        "trec_qrels_formats": TREC_QRELS_FORMATS,
        "pool_qrels_formats": POOL_QRELS_FORMATS,
        "devices": DEVICES,
        "backends": BACKENDS,
        "system_contexts": SYSTEM_CONTEXTS,
        "first_stages": FIRST_STAGES,
        "fusable_stages": FUSABLE_STAGES,
        "scopes": SCOPES,
        "title_modes": TITLE_MODES,
        "dense_index_kinds": DENSE_INDEX_KINDS,
        "reranker_kinds": RERANKER_KINDS,
        "feature_families": FEATURE_FAMILIES,
        "router_kinds": ROUTER_KINDS,
        "bootstrap_methods": BOOTSTRAP_METHODS,
        "cost_measures": COST_MEASURES,
        "scorers": SCORERS,
        "judge_scorings": JUDGE_SCORINGS,
        "gate_measures": GATE_MEASURES,
        "splits": SPLIT_ORDER,
        "strategies": STRATEGIES,
        "multistep_strategies": MULTISTEP_STRATEGIES,
        "stop_routers": STOP_ROUTERS,
    }
