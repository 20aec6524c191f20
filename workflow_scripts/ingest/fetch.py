"""Every study's data, reachable: check the files a config reads against data/sources.yaml, and fetch the ones
published as they are.

In:  a config (config.yaml or experiments/<name>.yaml) and the sources manifest, data/sources.yaml: per file, keyed
     by its path as the configs spell it, its sha256 and size, where it comes from (`source`, and the
     PROVENANCE.md that documents it), the `url` it is published at byte for byte (null when it is not), and for a
     file made from a source (a subset, a format conversion) how it was `derived`.
Out: per file the config's datasets read, one line: `ok` (present where the config reads it, or in `--into`, and
     its sha256 matches), `fetched` (downloaded into `--into`, checked, then moved into place), or the reason it is
     not usable, naming the file, the dataset key and the source; when any file lives in `--into`, an overlay
     config `<into>/<config name>.paths.yaml` that points the config's datasets there, to pass as a second
     `--configfile` (`snakemake --configfile <config> <overlay> --replace-workflow-config`).

A download goes to a temporary file beside its target and is moved into place only once its sha256 matches, so a
failed or interrupted fetch never leaves a partial or wrong file. `--mirror` (a URL or a folder holding the same
layout as the configs' data folder) replaces every official URL, for sites without internet or with their own
copy; it also serves files that have no official URL of their own (the derived ones), if the mirror holds them.

    .venv/bin/python -m workflow_scripts.ingest.fetch experiments/study_b.yaml [--into data/shared]
        [--mirror https://example.org/ragfrontier-data/ | --mirror /mnt/datasets] [--check]

`--write-header` writes the same facts into the config itself: its opening comments get a generated block naming,
per file it reads, the sha256, the source and the address it is published at or how it was derived, taken from the
manifest (tests/test_fetch.py checks every study config's block against it).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters.registry import adapter_for

PROJECT = Path(__file__).resolve().parents[2]
MANIFEST = PROJECT / "data" / "sources.yaml"
SHARED_PREFIX = "../shared/data/"  # how the configs spell the shared data folder; --into replaces it
CHUNK = 1 << 20


@dataclass(frozen=True)
class Needed:
    """One file a config reads: the dataset and key that name it, and its path as spelled there."""

    dataset: str
    key: str
    path: str


def needed_files(config: Mapping[str, Any]) -> Iterator[Needed]:
    """The data files a config's datasets read (the file keys of each dataset's format)."""
    for dataset, spec in (config.get("datasets") or {}).items():
        for key in adapter_for(dataset, spec.get("format"))[1]:
            if spec.get(key):
                yield Needed(dataset, key, str(spec[key]))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def relative(path: str) -> str:
    """The file's path inside the data folder (what --into and --mirror hold)."""
    return path.removeprefix(SHARED_PREFIX)


def check(path: Path, entry: Mapping[str, Any], needed: Needed) -> None:
    found = sha256_of(path)
    if found != entry["sha256"]:
        raise InputError(f"{path} (datasets.{needed.dataset}.{needed.key}): sha256 {found} is not the "
                         f"{entry['sha256']} data/sources.yaml expects; it is another version of {entry['source']} — "
                         f"replace it (see {entry['provenance'] or 'data/sources.yaml'})")


def origin(entry: Mapping[str, Any], mirror: str | None, path: str) -> str | None:
    """Where to download a file from: the mirror's copy, else its official URL (None: nowhere)."""
    if mirror:
        if "://" in mirror:
            return mirror.rstrip("/") + "/" + relative(path)
        return (Path(mirror) / relative(path)).resolve().as_uri()
    return entry.get("url")


def download(url: str, target: Path, entry: Mapping[str, Any], needed: Needed) -> None:
    """`url` into `target`, through a temporary file beside it that is moved into place only when its sha256
    matches (module docstring)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310
            shutil.copyfileobj(response, out, CHUNK)
        found = sha256_of(Path(partial))
        if found != entry["sha256"]:
            raise InputError(f"{url} (datasets.{needed.dataset}.{needed.key}): the download's sha256 {found} is not "
                             f"the {entry['sha256']} data/sources.yaml expects; nothing was kept (another version "
                             f"of {entry['source']}, or a corrupt mirror)")
        os.replace(partial, target)
    except (urllib.error.URLError, OSError) as error:
        raise InputError(f"{url} (datasets.{needed.dataset}.{needed.key}): download failed: {error}; nothing was "
                         f"kept (source: {entry['source']})") from error
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def resolve(needed: Needed, entry: Mapping[str, Any], into: Path, mirror: str | None, fetch: bool,
            root: Path) -> tuple[str, Path]:
    """(what happened, where the file is) for one needed file (module docstring)."""
    where = root / needed.path
    if where.is_file():
        check(where, entry, needed)
        return "ok", where
    target = into / relative(needed.path)
    if target.is_file():
        check(target, entry, needed)
        return "ok", target
    url = origin(entry, mirror, needed.path)
    missing = f"{needed.path} (datasets.{needed.dataset}.{needed.key}) is missing; source: {entry['source']}"
    if url is None:
        how = f"it is derived: {entry['derived']}" if entry.get("derived") else "it has no download address"
        raise InputError(f"{missing}; {how} (see {entry['provenance'] or 'data/sources.yaml'}); place it there or at "
                         f"{target}, or give "
                         f"--mirror")
    if not fetch:
        raise InputError(f"{missing}; it can be fetched from {url} (run without --check)")
    download(url, target, entry, needed)
    return "fetched", target


def fetch_config(config_path: Path, into: Path, mirror: str | None = None, fetch: bool = True,
                 manifest: Path = MANIFEST, root: Path = PROJECT) -> list[tuple[Needed, str, Path]]:
    """Check or fetch every file `config_path` reads; write the overlay when any lives in `into`; per file
    (needed, what happened, where it is). The first unusable file is an InputError (module docstring)."""
    config = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    sources = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    results = []
    for needed in needed_files(config):
        entry = sources.get(needed.path)
        if entry is None:
            raise InputError(f"{manifest}: no entry for {needed.path} (datasets.{needed.dataset}.{needed.key} of "
                             f"{config_path}); add its sha256, source and provenance")
        results.append((needed, *resolve(needed, entry, into, mirror, fetch, root)))
    moved = {(needed.dataset, needed.key): place for needed, _, place in results if place != root / needed.path}
    if moved:
        overlay = {"datasets": {}}
        for (dataset, key), place in sorted(moved.items()):
            overlay["datasets"].setdefault(dataset, {})[key] = os.path.relpath(place, root)
        into.mkdir(parents=True, exist_ok=True)
        (into / f"{config.get('name', config_path.stem)}.paths.yaml").write_text(yaml.safe_dump(overlay))
    return results


HEADER_START = "# Data files (generated from data/sources.yaml by"
HEADER_END = "# (end of data files)"


def data_header(config: Mapping[str, Any], sources: Mapping[str, Any], config_path: str) -> list[str]:
    """The comment block naming, for every file the config reads, its sha256, source and where it is published or
    how it was derived (none for a config that reads no file)."""
    import textwrap

    files = list(dict.fromkeys(needed.path for needed in needed_files(config)))
    if not files:
        return []
    lines = [f"{HEADER_START} `python -m workflow_scripts.ingest.fetch --write-header`; do not edit;",
             f"# `python -m workflow_scripts.ingest.fetch {config_path}` checks them and fetches the published ones):"]
    for path in files:
        entry = sources.get(path)
        if entry is None:
            raise InputError(f"{MANIFEST}: no entry for {path} ({config_path}); add its sha256, source and provenance")
        lines += [f"#   {path}", f"#     sha256 {entry['sha256']}"]
        for key in ("source", "url", "derived"):
            if entry.get(key):
                lines += textwrap.wrap(f"{key}: {' '.join(str(entry[key]).split())}", 116, initial_indent="#     ",
                                       subsequent_indent="#       ")
    return lines + [HEADER_END]


def write_header(config_path: Path, manifest: Path = MANIFEST, label: str | None = None) -> bool:
    """Put `data_header` into the config's opening comments (replacing an earlier one), naming the config as `label`
    (default: its path from the project root); True when the file changed."""
    text = config_path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if HEADER_START in text:
        start = next(at for at, line in enumerate(lines) if line.startswith(HEADER_START))
        end = lines.index(HEADER_END, start)
        lines = lines[:start] + lines[end + 1:]
    block = data_header(yaml.safe_load(text) or {}, yaml.safe_load(manifest.read_text(encoding="utf-8")),
                        label or os.path.relpath(config_path.resolve(), PROJECT))
    at = next((at for at, line in enumerate(lines) if not line.startswith("#")), len(lines))
    new = "\n".join(lines[:at] + block + lines[at:]) + "\n"
    if new != text:
        config_path.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path, help="config.yaml or experiments/<name>.yaml")
    parser.add_argument("--into", type=Path, default=PROJECT / "data" / "shared",
                        help="where fetched files go (git-ignored), in the configs' data layout")
    parser.add_argument("--mirror", help="a URL or folder with the same layout, replacing every official URL")
    parser.add_argument("--check", action="store_true", help="check what is there; download nothing")
    parser.add_argument("--root", type=Path, default=PROJECT, help="the checkout the config's paths start from")
    parser.add_argument("--write-header", action="store_true",
                        help="write the config's data files, with their sha256 and sources, into its header comments")
    args = parser.parse_args(argv)
    try:
        if args.write_header:
            print(f"{args.config}: {'written' if write_header(args.config) else 'up to date'}")
            return 0
        results = fetch_config(args.config, args.into, args.mirror, fetch=not args.check, root=args.root)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for needed, what, place in results:
        print(f"{what:8} {needed.path}  ({place})")
    if any(place != args.root / needed.path for needed, _, place in results):
        name = yaml.safe_load(args.config.read_text(encoding="utf-8")).get("name", args.config.stem)
        print(f"run it with: .venv/bin/snakemake --cores all --configfile {args.config} "
              f"{os.path.relpath(args.into / f'{name}.paths.yaml', args.root)} --replace-workflow-config")
    return 0


if __name__ == "__main__":
    sys.exit(main())
