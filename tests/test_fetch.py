"""Every study's data, reachable (workflow_scripts/ingest/fetch.py): a config's files checked against
data/sources.yaml, and fetched from a local HTTP server on the loopback address serving copies of the shared files —
a right copy lands in place with an overlay config, a wrong one leaves nothing, a missing one names its source."""

import functools
import shutil
from http.server import SimpleHTTPRequestHandler

import pytest
import yaml
from local_server import serving

from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.fetch import (
    MANIFEST,
    data_header,
    fetch_config,
    main,
    needed_files,
    sha256_of,
    write_header,
)

HOTPOT = "../shared/data/hotpotqa/hotpot_dev_distractor_100.json"
MUSIQUE = "../shared/data/musique/kag_musique_ans_train_100.json.gz"


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture()
def mirror(tmp_path, shared_data):
    """A folder in the configs' data layout holding copies of two shared files, served on 127.0.0.1."""
    folder = tmp_path / "mirror"
    for path in (HOTPOT, MUSIQUE):
        target = folder / path.removeprefix("../shared/data/")
        target.parent.mkdir(parents=True)
        shutil.copy(shared_data / path.removeprefix("../shared/data/"), target)
    with serving(functools.partial(Quiet, directory=str(folder))) as url:
        yield folder, url.removesuffix("/v1")


def study(tmp_path):
    """A config in a fresh checkout (`root`) that reads the two files where the study configs do."""
    root = tmp_path / "checkout"
    root.mkdir()
    config = root / "study.yaml"
    config.write_text(yaml.safe_dump({"name": "study", "datasets": {
        "hotpotqa": {"format": "hotpotqa", "path": HOTPOT}, "musique": {"format": "musique", "path": MUSIQUE}}}))
    return root, config


def test_the_manifest_names_every_file_a_study_config_reads_with_its_checksum_and_source(project_root, shared_data):
    sources = yaml.safe_load(MANIFEST.read_text())
    for config in [project_root / "config.yaml", *sorted((project_root / "experiments").glob("*.yaml"))]:
        for needed in needed_files(yaml.safe_load(config.read_text())):
            if needed.path.startswith(("../shared/data/", "data/demo/", "data/your-data/")):
                entry = sources.get(needed.path)
                assert entry, f"{config.name}: {needed.path} has no entry in data/sources.yaml"
                assert len(entry["sha256"]) == 64 and entry["source"] and (entry["provenance"] or entry["shipped"])
                assert entry.get("url") or entry.get("derived") or entry.get("shipped"), needed.path
                assert sha256_of(project_root / needed.path) == entry["sha256"], needed.path


def test_a_fresh_checkout_fetches_the_files_checks_them_and_gets_an_overlay_config(tmp_path, mirror):
    folder, url = mirror
    root, config = study(tmp_path)
    into = root / "data" / "shared"
    results = fetch_config(config, into, mirror=url, root=root)
    assert [what for _, what, _ in results] == ["fetched", "fetched"]
    assert (into / "hotpotqa" / "hotpot_dev_distractor_100.json").read_bytes() == (
        folder / "hotpotqa" / "hotpot_dev_distractor_100.json").read_bytes()
    overlay = yaml.safe_load((into / "study.paths.yaml").read_text())
    assert overlay == {"datasets": {"hotpotqa": {"path": "data/shared/hotpotqa/hotpot_dev_distractor_100.json"},
                                    "musique": {"path": "data/shared/musique/kag_musique_ans_train_100.json.gz"}}}
    again = fetch_config(config, into, fetch=False, root=root)  # --check: what is there, checked, nothing fetched
    assert [what for _, what, _ in again] == ["ok", "ok"]


def test_a_wrong_copy_is_refused_and_nothing_partial_is_kept(tmp_path, mirror):
    folder, url = mirror
    served = folder / "musique" / "kag_musique_ans_train_100.json.gz"
    served.write_bytes(served.read_bytes()[:-10] + b"0123456789")
    root, config = study(tmp_path)
    into = root / "data" / "shared"
    with pytest.raises(InputError, match=r"kag_musique_ans_train_100.json.gz \(datasets.musique.path\): the "
                                         r"download's sha256 \w+ is not the \w+ data/sources.yaml expects; nothing"):
        fetch_config(config, into, mirror=url, root=root)
    assert not (into / "musique").exists() or not any((into / "musique").iterdir())
    assert (into / "hotpotqa" / "hotpot_dev_distractor_100.json").is_file()  # the right one before it stays


def test_a_missing_file_names_its_source_and_a_bad_local_copy_its_provenance(tmp_path, capsys):
    root, config = study(tmp_path)
    with pytest.raises(InputError, match=r"hotpot_dev_distractor_100.json \(datasets.hotpotqa.path\) is missing; "
                                         r"source: .*HotpotQA"):
        fetch_config(config, root / "data" / "shared", root=root)
    assert main([str(config), "--check", "--into", str(root / "nowhere"), "--root", str(root)]) == 2
    assert "is missing; source:" in capsys.readouterr().err
    local = root / "data" / "shared" / "hotpotqa" / "hotpot_dev_distractor_100.json"
    local.parent.mkdir(parents=True)
    local.write_text("[]")
    with pytest.raises(InputError, match=r"sha256 \w+ is not the \w+ data/sources.yaml expects; it is another "
                                         r"version of .* \(see .*PROVENANCE.md\)"):
        fetch_config(config, root / "data" / "shared", root=root)


def test_every_study_config_names_its_files_checksums_and_sources_in_its_header(project_root, tmp_path):
    """The block --write-header generates from the manifest sits in each CPU study config's opening comments, as
    the manifest says now; rewriting a config whose block is current changes nothing."""
    sources = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    checked = 0
    for path in sorted((project_root / "experiments").glob("*.yaml")):
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        files = [needed.path for needed in needed_files(config)]
        if not files or not all(file in sources for file in files):  # GPU recipes: the user downloads their data
            continue
        text = path.read_text(encoding="utf-8")
        block = "\n".join(data_header(config, sources, f"experiments/{path.name}"))
        assert block in text, f"{path.name}: run `python -m workflow_scripts.ingest.fetch --write-header {path}`"
        assert text.index(block) < text.index("\nname:"), f"{path.name}: the data block belongs in the header"
        copy = tmp_path / path.name
        copy.write_text(text, encoding="utf-8")
        assert not write_header(copy, label=f"experiments/{path.name}")
        checked += 1
    assert checked >= 12
