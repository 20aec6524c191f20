"""ColBERT PLAID plumbing with colbert-ai 0.2.22 on transformers 5.

No ColBERT checkpoint exists offline, so these tests build a *tiny untrained* checkpoint from a BERT config
(2 layers, hidden size 32, the all-MiniLM-L6-v2 tokenizer, random weights): they check the plumbing — the
transformers-5 fix, checkpoint building, PLAID indexing of a real arXiv metadata sample, search, index reuse
and rebuild on changed settings, the missing-checkpoint error — not retrieval quality. colbert-ai compiles its
C++ extensions on first use; they are cached in the workflow tests' shared cache folder (compiled once).
"""

import json
import tomllib
from pathlib import Path

import pytest
import yaml
from workflow_helpers import SHARED_CACHE

from workflow_scripts.core import models
from workflow_scripts.core.errors import InputError
from workflow_scripts.retrieval import colbert

pytest.importorskip("colbert", reason="colbert-ai is not installed (pip install -e '.[colbert]')")

EXTENSIONS = SHARED_CACHE / "torch_extensions"
SETTINGS = {"doc_maxlen": 512, "query_maxlen": 64, "nbits": 2, "kmeans_niters": 4}


def tiny_encoder(folder: Path) -> Path:
    """A randomly initialized 2-layer BERT (hidden size 32) with the all-MiniLM-L6-v2 tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(models.resolve("sentence-transformers/all-MiniLM-L6-v2"))
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def corpus(shared_data):
    path = shared_data / "arxiv-metadata-sample" / "arxiv-metadata-oai-snapshot.first200.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()[:30]]
    return [record["id"] for record in records], [f"{record['title']}. {' '.join(record['abstract'].split())}" for record in records]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("colbert")
    encoder = tiny_encoder(folder / "encoder")
    colbert.build_untrained_checkpoint(encoder, folder / "checkpoint", dim=16, seed=0, extensions_dir=EXTENSIONS)
    return folder / "checkpoint"


@pytest.fixture(scope="module")
def index(checkpoint, corpus, tmp_path_factory):
    folder = tmp_path_factory.mktemp("plaid") / "index"
    assert colbert.build_index(corpus[1], corpus[0], checkpoint, folder, SETTINGS, "cpu", EXTENSIONS)
    return folder


@pytest.mark.slow
def test_untrained_checkpoint_loads_under_transformers_5(checkpoint):
    saved = json.loads((checkpoint / "artifact.metadata").read_text())
    assert saved["dim"] == 16 and (checkpoint / "model.safetensors").is_file()
    from colbert.infra import ColBERTConfig
    from colbert.modeling.checkpoint import Checkpoint

    loaded = Checkpoint(str(checkpoint), colbert_config=ColBERTConfig(), verbose=0)  # AttributeError without the fix
    assert loaded.queryFromText(["graph laplacian"]).shape[-1] == 16


@pytest.mark.slow
def test_a_checkpoint_is_the_same_bytes_every_build_even_in_a_detached_checkout(tmp_path, monkeypatch):
    """ColBERT's own save wrote the host, the time and the git branch into artifact.metadata (a new fingerprint at
    every build) and raised TypeError in a detached-HEAD checkout, as CI systems check out; both builds here run
    inside one."""
    import subprocess

    repo = tmp_path / "checkout"
    repo.mkdir()
    for command in (["init", "-q"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
                                     "-m", "x"], ["checkout", "-q", "--detach"]):
        subprocess.run(["git", *command], cwd=repo, check=True)
    monkeypatch.chdir(repo)
    encoder = tiny_encoder(tmp_path / "encoder")
    for name in ("one", "two"):
        colbert.build_untrained_checkpoint(encoder, tmp_path / name, dim=16, seed=0, extensions_dir=EXTENSIONS)
    first, second = ((tmp_path / name / "artifact.metadata").read_bytes() for name in ("one", "two"))
    assert first == second and json.loads(first)["meta"] == {"version": colbert.CHECKPOINT_FORMAT}
    assert models.path_fingerprint(tmp_path / "one") == models.path_fingerprint(tmp_path / "two")


@pytest.mark.slow
def test_plaid_index_and_search_a_real_corpus_sample(index, checkpoint, corpus):
    docids, texts = corpus
    built = json.loads((index / "settings.json").read_text())
    assert built == {**SETTINGS, "checkpoint": models.path_fingerprint(checkpoint), "documents": 30}
    assert json.loads((index / "docids.json").read_text()) == docids
    retriever = colbert.Retriever(index, checkpoint, SETTINGS, "cpu", EXTENSIONS)
    probes = [3, 11, 27]
    results, seconds = retriever.search([texts[at][:300] for at in probes], k=3)
    assert len(results) == 3 and all(len(hits) == 3 for hits in results) and all(s > 0 for s in seconds)
    assert all(hits[0][0] == docids[at] for at, hits in zip(probes, results))  # a document's own opening finds it
    assert all(hits[0][1] >= hits[1][1] >= hits[2][1] for hits in results)


@pytest.mark.slow
def test_index_is_reused_when_identical_and_rebuilt_when_settings_change(index, checkpoint, corpus):
    docids, texts = corpus
    first = (index / "plaid" / "metadata.json").read_bytes()
    assert not colbert.build_index(texts, docids, checkpoint, index, SETTINGS, "cpu", EXTENSIONS)
    with pytest.raises(InputError, match="was built with"):
        colbert.Retriever(index, checkpoint, {**SETTINGS, "nbits": 1}, "cpu", EXTENSIONS)
    assert colbert.build_index(texts, docids, checkpoint, index, {**SETTINGS, "nbits": 1}, "cpu", EXTENSIONS)
    assert json.loads((index / "settings.json").read_text())["nbits"] == 1
    assert colbert.build_index(texts, docids, checkpoint, index, SETTINGS, "cpu", EXTENSIONS)  # back to 2 bits
    assert (index / "plaid" / "metadata.json").read_bytes() == first, "a rebuild wrote other metadata (a timestamp?)"


def test_a_missing_checkpoint_is_one_clear_error():
    with pytest.raises(InputError, match=r"ColBERT checkpoint: model 'colbert-ir/colbertv2.0' cannot be loaded offline"):
        colbert.resolve_checkpoint("colbert-ir/colbertv2.0")


def test_colbert_env_pins_the_cpu_stack_plus_the_colbert_extra(project_root):
    project = tomllib.loads((project_root / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["cpu"], *project["optional-dependencies"]["colbert"]]
    environment = yaml.safe_load((project_root / "envs" / "colbert.yaml").read_text())
    pip_section = next(entry["pip"] for entry in environment["dependencies"] if isinstance(entry, dict))
    pins = lambda lines: sorted(line.split("#")[0].strip().lower() for line in lines if "==" in line)
    assert pins(pip_section) == pins(wanted)
