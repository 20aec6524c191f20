"""The LLM engine and what it renders and parses.

engine.py: settings (`engine_config`), `load_engine`, context fitting, cache keys and batched, cached `generate`;
backends/: the shared contract (`__init__.py`) and one module per backend (transformers, openai, vllm, and the vLLM
worker process); templates.py: the prompt texts and their reply constraints; rendering.py: `prompts:` overrides
and chat messages; parsing.py: JSON replies; constraints.py: JSON Schema constraints, token budgets, grammars;
chat_tokenizer.py: the model's chat template and tokenizer without torch.
"""
