"""Atomic writes: the one way every stage puts a file or a folder in place, so a killed job never leaves half of it.

In:  a target path (a file or a folder) and what to write there.
Out: the target, complete, or no change at all. While it is written it lives beside the target under a hidden
     name `.<target name>.<random>.partial` (files and folders alike); `remove_partials` deletes such leftovers of
     a killed run, and nothing else, before the next run starts (the Snakefile's onstart).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl

PARTIAL_SUFFIX = ".partial"
PARTIAL_GLOB = f".*{PARTIAL_SUFFIX}"


def _partial_name(target: Path) -> str:
    return f".{target.name}."


def _umask() -> int:
    """The process's umask, read without changing it where Linux shows it (/proc/self/status): setting it to read
    it back would briefly give another thread's new files the wrong mode."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _as_created(path: Path, mode: int) -> None:
    """Give `path` the mode a plain open() / mkdir() would (`mode` less the umask): mkstemp and mkdtemp create
    0600 / 0700, which the rest of a shared cluster group could not read once the file is in place."""
    os.chmod(path, mode & ~_umask())


@contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path` to write to; on success fsync it and rename it onto `path`; on any
    error (or a kill) delete it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=_partial_name(target), suffix=PARTIAL_SUFFIX, dir=target.parent)
    os.close(handle)
    try:
        yield Path(temporary)
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        _as_created(Path(temporary), 0o666)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@contextmanager
def atomic_folder(path: str | os.PathLike, replace: bool = True) -> Iterator[Path]:
    """Yield an empty temporary folder beside `path` to fill; on success put it in place of `path` (an older
    folder there is moved aside under a partial name first, then deleted); on any error delete it.

    replace=False is for content-addressed folders that concurrent jobs may build at the same time (a converted
    model): the first folder in place wins and stays, a later one is discarded, so no reader ever sees a folder
    swapped under it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=_partial_name(target), suffix=PARTIAL_SUFFIX, dir=target.parent))
    try:
        yield building
        _as_created(building, 0o777)
        if not replace:
            try:
                os.rename(building, target)  # fails when another job put a (non-empty) folder there first
            except OSError:
                if not target.is_dir():
                    raise
                shutil.rmtree(building, ignore_errors=True)
            return
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=_partial_name(target), suffix=PARTIAL_SUFFIX, dir=target.parent))
            os.replace(target, old / target.name)
        os.replace(building, target)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise


def write_parquet_atomic(table: pl.DataFrame, path: str | os.PathLike) -> None:
    """Write `table` as zstd Parquet (with statistics) at `path` atomically."""
    with atomic_file(path) as temporary:
        table.write_parquet(temporary, compression="zstd", statistics=True)


def write_text_atomic(text: str, path: str | os.PathLike) -> None:
    """Write UTF-8 `text` at `path` atomically."""
    with atomic_file(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def write_json_atomic(data: object, path: str | os.PathLike) -> None:
    """Write `data` as indented JSON at `path` atomically."""
    write_text_atomic(json.dumps(data, indent=2) + "\n", path)


def remove_partials(top: str | os.PathLike, keep: frozenset[str] = frozenset({"cache"})) -> list[Path]:
    """Delete every leftover partial file or folder under `top`'s sub-folders, except those named in `keep` (the
    shared caches, which running jobs of another invocation may be writing). Return what was deleted."""
    roots = [root for root in Path(top).glob("*") if root.is_dir() and not root.is_symlink() and root.name not in keep]
    removed = [path for root in roots for path in root.rglob(PARTIAL_GLOB)]
    for path in removed:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return removed
