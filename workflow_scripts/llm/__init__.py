"""The LLM engine: configuration, context fitting, cache, the backends, prompts and output constraints."""
