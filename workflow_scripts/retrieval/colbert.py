"""ColBERT late-interaction retrieval (PLAID, colbert-ai 0.2.22): checkpoint, index, search.

In:  the corpus units (one document per paper: title + abstract), a ColBERT checkpoint (a local folder, or a hub
     id in the local HF cache such as `colbert-ir/colbertv2.0`, resolved by `models.resolve`; or an *untrained*
     checkpoint built here from a BERT-family encoder, see below), and the index settings
     {doc_maxlen 512, query_maxlen 64, nbits 2, kmeans_niters} (the study's values are the defaults).
Out: a PLAID index folder: `plaid/` (colbert-ai's files), `docids.json` (passage id → paper id) and
     `settings.json` (the settings and the checkpoint's fingerprint it was built with); searches return per
     query the top-k (docid, MaxSim score) pairs.

An index whose `settings.json` differs from the configured settings (or was built from another checkpoint or
another corpus) is erased and rebuilt; an identical one is reused. colbert-ai JIT-compiles its C++ extensions
on first use (about 90 s each on 2 cores); `TORCH_EXTENSIONS_DIR` is pointed at a cache folder
(results/cache/torch_extensions by default) so they are compiled once per machine and reused.

colbert-ai 0.2.22 on transformers 5: its HF_ColBERT wrapper calls `init_weights()` in `__init__` without the
`post_init()` that transformers 5 needs to set `all_tied_weights_keys`, so loading any checkpoint fails with
AttributeError. `_patch_class_factory` (our code, site-packages untouched) subclasses the wrapper so that the
first `init_weights()` runs `post_init()` (which sets the attribute and then initializes the weights).

Untrained checkpoints (`build_untrained_checkpoint`): the encoder's weights plus a seeded random linear
projection to `dim`, saved as a ColBERT checkpoint. No trained ColBERT checkpoint ships offline here; such a
checkpoint runs the whole PLAID pipeline (the plumbing) but its scores are not ColBERTv2's. Real runs name
`colbert-ir/colbertv2.0`.
"""

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workflow_scripts.core import models
from workflow_scripts.core.atomic import atomic_folder
from workflow_scripts.core.errors import InputError

log = logging.getLogger("ragfrontier.colbert")

SETTING_KEYS = ("doc_maxlen", "query_maxlen", "nbits", "kmeans_niters")
INSTALL = "pip install -e '.[colbert]'"  # colbert-ai==0.2.22 and its missing dependencies, pinned in pyproject.toml
CHECKPOINT_FORMAT = "colbert-v0.4"  # the "meta" version ColBERT writes into a checkpoint's artifact.metadata


def import_colbert(extensions_dir: Path) -> Any:
    """Import colbert-ai with its JIT extensions cached in `extensions_dir` and the transformers-5 fix applied."""
    extensions_dir = Path(extensions_dir).resolve()
    extensions_dir.mkdir(parents=True, exist_ok=True)
    os.environ["TORCH_EXTENSIONS_DIR"] = str(extensions_dir)
    try:
        import colbert
        from colbert.modeling import base_colbert
    except ImportError as error:
        raise InputError(f"ColBERT needs colbert-ai ({error}); install it with `{INSTALL}`") from None
    _patch_class_factory(base_colbert)
    return colbert


def _patch_class_factory(base_colbert: Any) -> None:
    """Make colbert-ai's HF_ColBERT call transformers 5's `post_init()` (see the module docstring)."""
    from colbert.modeling import hf_colbert

    if getattr(base_colbert.class_factory, "ragfrontier_patched", False):
        return

    def class_factory(name_or_path: str) -> type:
        wrapper = hf_colbert.class_factory(name_or_path)

        class HF_ColBERT(wrapper):
            def init_weights(self) -> None:
                if "all_tied_weights_keys" not in self.__dict__:
                    self.post_init()  # sets all_tied_weights_keys, then calls init_weights() again
                else:
                    super().init_weights()

        return HF_ColBERT

    class_factory.ragfrontier_patched = True
    base_colbert.class_factory = class_factory


def resolve_checkpoint(name_or_path: str) -> Path:
    """The checkpoint's local folder; InputError naming it and how to supply it when it is not available offline."""
    try:
        path = models.resolve(name_or_path)
    except InputError as error:
        raise InputError(f"ColBERT checkpoint: {error}") from None
    if not (path / "config.json").is_file():
        raise InputError(f"ColBERT checkpoint '{name_or_path}' ({path}) has no config.json; give a checkpoint folder")
    return path


def build_untrained_checkpoint(encoder: Path, out: Path, dim: int, seed: int, extensions_dir: Path) -> None:
    """An untrained ColBERT checkpoint at `out`: `encoder`'s weights and tokenizer + a seeded random projection."""
    import torch
    from transformers import AutoTokenizer

    import_colbert(extensions_dir)
    from colbert.infra import ColBERTConfig
    from colbert.modeling import base_colbert

    encoder = Path(encoder)
    if not (encoder / "config.json").is_file():
        raise InputError(f"ColBERT untrained_from: {encoder} is not a transformers model folder (no config.json)")
    wrapper = base_colbert.class_factory(str(encoder))
    config = ColBERTConfig(dim=dim)
    torch.manual_seed(seed)
    model = wrapper.from_pretrained(str(encoder), colbert_config=config)
    with atomic_folder(out) as partial:
        model.save_pretrained(str(partial))
        AutoTokenizer.from_pretrained(str(encoder)).save_pretrained(str(partial))
        # ColBERT's own config.save_for_checkpoint adds the host, the time and the git branch of the working
        # directory to artifact.metadata: the checkpoint's bytes (and so its fingerprint) change with every build,
        # and in a detached-HEAD checkout (a CI system's, `git checkout <tag>`) asking for the branch raises
        # TypeError. The file is written as it writes it, with a fixed "meta".
        metadata = {**config.export(), "meta": {"version": CHECKPOINT_FORMAT}}
        (partial / "artifact.metadata").write_text(json.dumps(metadata, indent=4) + "\n")


def index_settings(settings: Mapping[str, Any], checkpoint: Path, docids: Sequence[str]) -> dict[str, Any]:
    """What an index is built from: the configured settings, the checkpoint's fingerprint, the corpus' ids."""
    return {**{key: settings[key] for key in SETTING_KEYS}, "checkpoint": models.path_fingerprint(checkpoint),
            "documents": len(docids)}


def _run_config(folder: Path, device: str) -> Any:
    from colbert.infra import RunConfig

    # name: ColBERT's default is the time of day, which it writes into the index's metadata.json and plan.json
    return RunConfig(nranks=1, gpus=1 if device == "cuda" else 0, avoid_fork_if_possible=True,
                     root=str(folder / "runs"), experiment="colbert", name="plaid", index_root=str(folder))


def build_index(texts: Sequence[str], docids: Sequence[str], checkpoint: Path, folder: Path,
                settings: Mapping[str, Any], device: str, extensions_dir: Path) -> bool:
    """Index `texts` (passage i = docids[i]) into `folder` unless an identical index is there; True if built."""
    folder = Path(folder)
    wanted = index_settings(settings, checkpoint, docids)
    settings_file, docids_file = folder / "settings.json", folder / "docids.json"
    if settings_file.is_file() and docids_file.is_file():
        if json.loads(settings_file.read_text()) == wanted and json.loads(docids_file.read_text()) == list(docids):
            log.info("colbert: index in %s matches the configured settings; reused", folder)
            return False
        log.info("colbert: index in %s was built with other settings or another corpus; rebuilding", folder)
    if not texts:
        raise InputError("ColBERT index: the corpus has no documents")
    import_colbert(extensions_dir)
    from colbert import Indexer
    from colbert.infra import ColBERTConfig, Run

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    config = ColBERTConfig(**{key: settings[key] for key in SETTING_KEYS})
    started = time.perf_counter()
    with Run().context(_run_config(folder, device)), contextlib.redirect_stdout(_LogStream()):
        Indexer(checkpoint=str(checkpoint), config=config).index(name="plaid", collection=list(texts), overwrite=True)
    (folder / "docids.json").write_text(json.dumps(list(docids)))
    (folder / "settings.json").write_text(json.dumps(wanted, indent=2))
    log.info("colbert: indexed %d documents in %.1f s", len(texts), time.perf_counter() - started)
    return True


class Retriever:
    """Searches a PLAID index built by `build_index`: `search(texts, k)` → per text [(docid, score)], seconds."""

    def __init__(self, folder: Path, checkpoint: Path, settings: Mapping[str, Any], device: str, extensions_dir: Path):
        folder = Path(folder)
        if not (folder / "settings.json").is_file():
            raise InputError(
                f"ColBERT index {folder} is missing or incomplete; rebuild it (rule study_c_colbert_index)"
            )
        built = json.loads((folder / "settings.json").read_text())
        self.docids = json.loads((folder / "docids.json").read_text())
        wanted = index_settings(settings, checkpoint, self.docids)
        if built != wanted:
            raise InputError(f"ColBERT index {folder} was built with {built}, but {wanted} is configured; rebuild it")
        import_colbert(extensions_dir)
        from colbert import Searcher
        from colbert.infra import ColBERTConfig, Run

        self.run_config = _run_config(folder, device)
        with Run().context(self.run_config), contextlib.redirect_stdout(_LogStream()):
            self.searcher = Searcher(index="plaid", checkpoint=str(checkpoint), index_root=str(folder),
                                     config=ColBERTConfig(query_maxlen=settings["query_maxlen"]), verbose=0)

    def search(self, texts: Sequence[str], k: int) -> tuple[list[list[tuple[str, float]]], list[float]]:
        from colbert.infra import Run

        results, seconds = [], []
        with Run().context(self.run_config), contextlib.redirect_stdout(_LogStream()):
            for text in texts:
                started = time.perf_counter()
                pids, _, scores = self.searcher.search(text, k=k)
                seconds.append(time.perf_counter() - started)
                results.append([(self.docids[pid], float(score)) for pid, score in zip(pids, scores)])
        return results, seconds


class _LogStream:
    """A file-like sink that sends colbert-ai's print() chatter to the log at DEBUG level."""

    def write(self, text: str) -> int:
        if text.strip():
            log.debug("%s", text.rstrip())
        return len(text)

    def flush(self) -> None:
        pass


def checkpoint_for(spec: Mapping[str, Any], built: str | None) -> Path:
    """The checkpoint a job uses: the untrained one built by the checkpoint rule, or the named one, resolved."""
    return Path(built) if spec["untrained_from"] else resolve_checkpoint(spec["checkpoint"])


def doc_texts(units: Any) -> dict[str, str]:
    """docid → what the index holds, and what Study C's generator and reranker read: "title. abstract"."""
    return {
        unit_id: f"{title}. {text}" if title else text
        for unit_id, title, text in units.select("unit_id", "title", "text").iter_rows()
    }


def index_units(units: str, spec: Mapping[str, Any], checkpoint: Path, index_dir: Path) -> None:
    """Rule study_c_colbert_index's work: every unit's "title. abstract" into a PLAID index at `index_dir`, in unit_id
    order."""
    from workflow_scripts.core.contracts import UNITS
    from workflow_scripts.core.tables import read_table

    table = read_table(units, UNITS).sort("unit_id")
    texts = doc_texts(table)
    docids = table["unit_id"].to_list()
    build_index([texts[docid] for docid in docids], docids, checkpoint, index_dir, spec, spec["device"],
                Path(spec["extensions_dir"]))
