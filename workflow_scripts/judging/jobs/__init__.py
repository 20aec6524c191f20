"""Thin job modules of the judging rules: each reads its rule's inputs, params and outputs once, calls the plain
functions of `workflow_scripts.judging`, and writes each output."""
