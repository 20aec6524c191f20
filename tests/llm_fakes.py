"""A stand-in for an LLM backend's text handling, shared by tests that script the replies themselves: prompts render
as the messages' JSON and tokens are whitespace-separated words. Subclasses set `fingerprint` and `complete`."""

import json


class WordTokenBackend:
    name, device, uncertainty_basis = "transformers", "cpu", None
    token_basis = "tokenizer"

    def render(self, messages):
        return json.dumps(messages, ensure_ascii=False)

    def count_tokens(self, text):
        return len(text.split())

    def cut(self, text, max_tokens):
        return " ".join(text.split()[:max_tokens])
