"""Study C tables (hand-computed values) and the whole Study C DAG on a real arXiv metadata sample.

The workflow test runs the real Snakefile with every strategy. Its generator and judge are a scripted
OpenAI-compatible server in this process (deterministic replies that exercise the fallbacks), the embedder is
all-MiniLM-L6-v2 and ColBERT a tiny untrained checkpoint built from a BERT config (plumbing; see test_colbert.py).
"""

import json
import re

import polars as pl
import pytest
import yaml
from local_server import JsonHandler, chat_completion, serving
from test_colbert import tiny_encoder
from workflow_helpers import make_workdir, planned_jobs, snakemake

from workflow_scripts.core.contracts import JUDGMENTS_QUALITY, STUDY_C_ANSWERS, STUDY_C_QUERIES, STUDY_C_RUNS
from workflow_scripts.core.tables import frame, read_table
from workflow_scripts.core.vocabulary import STUDY_C_METRICS
from workflow_scripts.llm.templates import DEFAULTS
from workflow_scripts.study_c import comparisons as study_c

QUERIES = frame([
    {"qid": f"p{paper}:{kind}", "paper_id": f"p{paper}", "query_type": kind, "text": f"q {paper} {kind}"}
    for paper in (1, 2) for kind in ("problem", "method")
], STUDY_C_QUERIES)


def _tables(overall: dict, gold_rank: dict, is_answer: dict | None = None, status: dict | None = None):
    """per_query input for strategies classic and fusion: overall scores, gold ranks (None: not retrieved)."""
    runs, answers, judgments = [], [], []
    for strategy in ("classic", "fusion"):
        run, answer, judged = [], [], []
        for qid in QUERIES["qid"]:
            rank = gold_rank[strategy][qid]
            paper = qid.split(":")[0]
            docs = ["x1", "x2", "x3"] if rank is None else ["x1", "x2", "x3"][: rank - 1] + [paper] + ["x4", "x5"][: 3 - rank]
            run += [{"qid": qid, "strategy": strategy, "docid": doc, "rank": at, "score": 1.0 / at} for at, doc in enumerate(docs, 1)]
            answer.append({"qid": qid, "strategy": strategy, "searched": True, "search_queries": ["q"],
                           "fallback": "fusion_too_few_subqueries" if strategy == "fusion" and qid == "p1:problem" else None,
                           "answer": "a", "answer_status": "ok", "llm_calls": 2, "prompt_tokens": 100,
                           "completion_tokens": 10, "llm_seconds": 0.5, "retrieval_seconds": 0.25})
            score = overall[strategy][qid]
            ok = (status or {}).get(strategy, {}).get(qid, "ok")
            yes = score > 0
            judged.append({"item_id": qid, "status": ok, "attempts": 1, "judge_model": "j",
                           "obtained": "constrained" if ok == "ok" else ok,
                           "is_answer": yes if ok == "ok" else None,
                           **{metric: (score if ok == "ok" else None) for metric in STUDY_C_METRICS}})
        runs.append(frame(run, STUDY_C_RUNS))
        answers.append(frame(answer, STUDY_C_ANSWERS))
        judgments.append(frame(judged, JUDGMENTS_QUALITY))
    # the written scores (scoring argmax): these judgments carry no token steps (expected scoring: test_judge_scores)
    return study_c.per_query(QUERIES, ["classic", "fusion"], runs, answers, judgments, scoring="argmax")


OVERALL = {"classic": {"p1:problem": 4, "p1:method": 0, "p2:problem": 3, "p2:method": 2},
           "fusion": {"p1:problem": 5, "p1:method": 2, "p2:problem": 3, "p2:method": 0}}
GOLD = {"classic": {"p1:problem": 1, "p1:method": None, "p2:problem": 3, "p2:method": 2},
        "fusion": {"p1:problem": 2, "p1:method": 1, "p2:problem": None, "p2:method": None}}
STRATEGIES = ["classic", "fusion"]


def _row(table, strategy, kind):
    return table.filter((pl.col("strategy") == strategy) & (pl.col("query_type") == kind)).row(0, named=True)


def test_quality_answer_rate_and_conditional_vs_unconditional_means():
    quality = study_c.quality(_tables(OVERALL, GOLD), STRATEGIES)
    row = _row(quality, "classic", "method")
    assert row["answer_rate"] == 0.5 and row["overall_cond"] == 2.0 and row["overall_uncond"] == 1.0
    row = _row(quality, "classic", "all")
    assert row["queries"] == 4 and row["answer_rate"] == 0.75
    assert row["overall_cond"] == pytest.approx(3.0) and row["overall_uncond"] == pytest.approx(9 / 4)
    assert row["accuracy_cond"] == row["overall_cond"]


def test_a_parse_failed_judgment_is_counted_and_left_out():
    table = _tables(OVERALL, GOLD, status={"classic": {"p1:problem": "parse_failed"}})
    row = _row(study_c.quality(table, STRATEGIES), "classic", "problem")
    assert (row["judged"], row["parse_failed"], row["overall_uncond"], row["answer_rate"]) == (1, 1, 3.0, 1.0)
    paired = _row(study_c.paired(table, STRATEGIES, 200, 0.95, 0), "fusion", "problem")
    assert paired["queries"] == 1 and paired["delta"] == 0.0 and paired["low"] is None  # one paper: no CI


def test_gold_paper_hit_and_mrr_at_3():
    retrieval = study_c.retrieval(_tables(OVERALL, GOLD), STRATEGIES)
    row = _row(retrieval, "classic", "all")
    assert row["hit_at_1"] == 0.25 and row["hit_at_3"] == 0.75
    assert row["mrr_at_3"] == pytest.approx((1 + 1 / 3 + 1 / 2) / 4)
    row = _row(retrieval, "fusion", "method")
    assert (row["hit_at_1"], row["hit_at_3"], row["mrr_at_3"]) == (0.5, 0.5, 0.5)


def test_paired_delta_vs_classic_with_win_tie_loss():
    paired = study_c.paired(_tables(OVERALL, GOLD), STRATEGIES, 500, 0.95, 7)
    assert paired["strategy"].unique().to_list() == ["fusion"]
    row = _row(paired, "fusion", "all")
    assert row["delta"] == pytest.approx((1 + 2 + 0 - 2) / 4) and row["papers"] == 2
    assert (row["win"], row["tie"], row["loss"]) == (0.5, 0.25, 0.25)
    assert row["low"] <= row["delta"] <= row["high"]


def test_paired_hit_at_3_counts_every_query_judged_or_not():
    table = _tables(OVERALL, GOLD, status={"classic": {"p1:problem": "parse_failed"}})
    paired = study_c.paired(table, STRATEGIES, 500, 0.95, 7, measure="hit_at_3")
    row = _row(paired, "fusion", "all")  # classic hits p1:problem, p2:problem, p2:method; fusion p1:problem, p1:method
    assert row["queries"] == 4 and row["delta"] == pytest.approx((0 + 1 - 1 - 1) / 4)
    assert (row["win"], row["tie"], row["loss"]) == (0.25, 0.25, 0.5)
    assert row["low"] <= row["delta"] <= row["high"] and 0 <= row["p_permutation"] <= 1


def test_gold_hit_vs_miss_gap_and_cost():
    table = _tables(OVERALL, GOLD)
    gold = _row(study_c.gold(table, STRATEGIES), "classic", "all")
    assert (gold["gold_hit"], gold["gold_miss"]) == (3, 1)
    assert gold["overall_uncond_hit"] == pytest.approx(3.0) and gold["overall_uncond_miss"] == 0.0
    assert gold["overall_cond_miss"] is None and gold["uncond_hit_minus_miss"] == pytest.approx(3.0)
    gap = study_c.gap(study_c.quality(table, STRATEGIES), STRATEGIES).row(0, named=True)
    assert gap["overall_cond_problem_minus_method"] == pytest.approx(3.5 - 2.0)
    assert gap["overall_uncond_problem_minus_method"] == pytest.approx(3.5 - 1.0)
    cost = _row(study_c.cost(table, STRATEGIES), "fusion", "all")
    assert cost["llm_calls_per_query"] == 2 and cost["seconds_per_query"] == pytest.approx(0.75)
    assert cost["fallbacks"] == "fusion_too_few_subqueries: 1" and cost["searched_share"] == 1.0


# ---- the whole DAG ------------------------------------------------------------------------------------------

SYSTEMS = {template.messages[0][1].replace("{{", "{").replace("}}", "}"): name
           for name, template in DEFAULTS.items() if template.messages[0][0] == "system"}


def scripted_reply(messages: list[dict]) -> str:
    """The scripted generator / judge: JSON where asked, with odd-length questions taking the fallbacks."""
    name = SYSTEMS[messages[0]["content"]]
    user = messages[-1]["content"]
    question = next((line[len("Question: "):] for message in messages for line in message["content"].splitlines()
                     if line.startswith("Question: ")), "")
    odd = len(question) % 2 == 1
    if name == "synthetic_queries":
        words = user.split("Abstract: ", 1)[1].split()
        return json.dumps({"problem": " ".join(words[:12]), "method": " ".join(words[12:24])})
    if name == "rephrase":
        return f"{question} related work"
    if name == "rerank_listwise":
        return "no ranking" if odd else "[2, 1, 3]"
    if name == "subqueries":
        return '["only one"]' if odd else json.dumps([question, f"{question} methods", f"{question} results"])
    if name in ("tool_call", "tool_answer"):
        if len(messages) > 2:
            return "Answer from the search results."
        return '{"answer": "From memory."}' if odd else json.dumps({"search": question})
    if name == "answer_rag":
        return "The available information is insufficient." if odd else "Answer from the papers."
    if name == "judge_quality":
        if "insufficient" in user:
            return '{"is_answer": false}'
        return '{"is_answer": true, "accuracy": 4, "completeness": 3, "faithfulness": 5, "relevance": 4, "clarity": 4, "overall": 4}'
    raise AssertionError(f"unexpected prompt {name}")


class ScriptedChat(JsonHandler):
    models = ("scripted",)

    def do_POST(self):
        self.send_json(200, chat_completion(scripted_reply(self.read_json()["messages"])))


@pytest.fixture()
def chat_server():
    with serving(ScriptedChat) as url:
        yield url


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_data
def study_c_workdir(tmp_path, shared_data, chat_server, **settings):
    """A workdir running Study C on 40 arXiv papers with the scripted LLM server (config `settings` added)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    source = shared_data / "arxiv-metadata-sample" / "arxiv-metadata-oai-snapshot.first200.jsonl"
    corpus = tmp_path / "arxiv.jsonl"
    corpus.write_text("\n".join(source.read_text().splitlines()[:40]) + "\n")
    encoder = tiny_encoder(tmp_path / "tiny-bert")
    llm = {"backend": "openai", "model": "scripted", "base_url": chat_server, "top_logprobs": 0, "max_retries": 0}
    config = {
        "name": "study_c_scripted",
        "datasets": {"arxiv": {"format": "arxiv_metadata", "path": str(corpus)}},
        "models": {"generator": llm, "judge": llm},
        "study_c": {"dataset": "arxiv", "papers": 4, "seed": 42, "judge_reasks": 0, "bootstrap": {"resamples": 200},
                    "colbert": {"untrained_from": str(encoder), "dim": 16}},
    }
    work = make_workdir(tmp_path)
    (work / "config.yaml").write_text(yaml.safe_dump(config | settings))
    return work


@pytest.mark.slow
@pytest.mark.integration
def test_study_c_dag_runs_all_six_strategies_and_writes_the_tables(tmp_path, shared_data, chat_server):
    work = study_c_workdir(tmp_path, shared_data, chat_server)
    snakemake(work)
    base = work / "results" / "arxiv" / "study_c"
    queries = read_table(base / "queries.parquet", STUDY_C_QUERIES)
    report = json.loads((base / "queries_report.json").read_text())
    assert report["papers_sampled"] == 4 and report["queries"] == queries.height == 8
    assert set(queries["query_type"]) == {"problem", "method"}
    for strategy in ("classic", "rephrased", "rephrased_reranked", "fusion", "tool_call", "colbert"):
        answers = read_table(base / "answers" / f"{strategy}.parquet", STUDY_C_ANSWERS)
        run = read_table(base / "runs" / f"{strategy}.parquet", STUDY_C_RUNS)
        judged = read_table(base / "judgments" / f"{strategy}.parquet", JUDGMENTS_QUALITY)
        assert answers.height == 8 and judged.height == 8 and (judged["status"] == "ok").all()
        assert run.group_by("qid").len()["len"].max() == 3 and (answers["llm_calls"] >= 1).all()
    retrieval = pl.read_csv(base / "tables" / "retrieval.csv")
    classic = retrieval.filter((pl.col("strategy") == "classic") & (pl.col("query_type") == "all")).row(0, named=True)
    assert classic["hit_at_3"] > 0.5  # queries are spans of their own abstract: dense search finds most of them
    cost = pl.read_csv(base / "tables" / "cost.csv").filter(pl.col("query_type") == "all")
    calls = dict(zip(cost["strategy"], cost["llm_calls_per_query"]))
    assert calls["classic"] == calls["colbert"] == 1 and calls["rephrased"] == 2 and calls["rephrased_reranked"] == 3
    report_md = (base / "tables" / "report.md").read_text()
    assert "Paired difference" in report_md and "| tool_call | all |" in report_md
    assert planned_jobs(work) == {}
    # the same study with its LLM stages sharded gives the same tables: every value but measured seconds (the
    # scripted LLM answers each prompt alone, so no batch is shared across shards)
    sharded = study_c_workdir(tmp_path / "sharded", shared_data, chat_server,
                              shards={"study_c_queries": 2, "study_c_strategy": 2, "study_c_judge": 3})
    snakemake(sharded)
    other = sharded / "results" / "arxiv" / "study_c"
    assert (other / "judgments" / "classic.shards" / "2-of-3.parquet").is_file()
    assert different_values(base, other) == []


MEASURED = re.compile(r"(^|_)seconds(_|$)")  # wall-time columns: retrieval_seconds, seconds_per_query, ...


def different_values(first, second):
    """Study C's tables and reports that differ between two runs, measured-time columns left out (the ColBERT
    index, whose metadata names its folder, per-shard files and figures aside)."""
    def tables(root):
        return {path.relative_to(root): path for path in sorted(root.rglob("*")) if path.is_file()
                and path.suffix in (".parquet", ".csv", ".json") and "colbert_index" not in path.parts
                and not any(part.endswith(".shards") for part in path.parts)}
    mine, theirs = tables(first), tables(second)
    problems = [f"only in one run: {name}" for name in sorted(set(mine) ^ set(theirs))]
    for name in sorted(set(mine) & set(theirs)):
        if name.suffix == ".json":
            same = mine[name].read_bytes() == theirs[name].read_bytes()
        else:
            read = pl.read_parquet if name.suffix == ".parquet" else pl.read_csv
            frames = [read(path) for path in (mine[name], theirs[name])]
            frames = [frame.drop([column for column in frame.columns if MEASURED.search(column)]) for frame in frames]
            same = frames[0].equals(frames[1])
        if not same:
            problems.append(str(name))
    return problems


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_data
def test_study_c_experiment_plans_every_strategy_once(tmp_path, project_root):
    config = yaml.safe_load((project_root / "experiments" / "study_c.yaml").read_text())
    config["datasets"]["arxiv"]["path"] = str((project_root / config["datasets"]["arxiv"]["path"]).resolve())
    work = make_workdir(tmp_path)
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    jobs = planned_jobs(work)
    expected = {"study_c_queries": 1, "study_c_colbert_checkpoint": 1, "study_c_colbert_index": 1,
                "study_c_strategy": 6, "study_c_judge": 6, "study_c_tables": 1}
    assert {rule: jobs.get(rule) for rule in expected} == expected
