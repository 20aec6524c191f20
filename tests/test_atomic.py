"""The one atomic writer: a target is complete or untouched, and every temporary name it uses is one the start-up
clean-up removes (and nothing else)."""

import os

import polars as pl
import pytest

from workflow_scripts.core import atomic


class Killed(Exception):
    pass


def test_atomic_file_replaces_whole_or_not_at_all(tmp_path):
    target = tmp_path / "out" / "table.parquet"
    atomic.write_parquet_atomic(pl.DataFrame({"a": [1, 2]}), target)
    with pytest.raises(Killed), atomic.atomic_file(target) as temporary:
        temporary.write_bytes(b"PAR1 half")
        assert temporary.name.startswith(".table.parquet.") and temporary.name.endswith(".partial")
        raise Killed
    assert pl.read_parquet(target)["a"].to_list() == [1, 2]
    assert os.listdir(target.parent) == ["table.parquet"]


def test_atomic_folder_swaps_an_older_folder_and_cleans_up(tmp_path):
    target = tmp_path / "index"
    with atomic.atomic_folder(target) as building:
        (building / "v1").write_text("1")
    with atomic.atomic_folder(target) as building:
        (building / "v2").write_text("2")
    assert sorted(os.listdir(target)) == ["v2"]
    with pytest.raises(Killed), atomic.atomic_folder(target) as building:
        (building / "v3").write_text("3")
        raise Killed
    assert sorted(os.listdir(target)) == ["v2"]
    assert sorted(os.listdir(tmp_path)) == ["index"]


def test_remove_partials_matches_every_writer_and_spares_caches(tmp_path):
    results = tmp_path / "results"
    open_writes = [writer(results / "demo" / "figures" / f"{writer.__name__}.png")
                   for writer in (atomic.atomic_file, atomic.atomic_folder)]
    names = [write.__enter__() for write in open_writes]  # a kill: the writes never exit
    cached = results / "cache" / "llm" / ".shard.parquet.x.partial"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"being written by another run")
    kept = results / "demo" / "units.parquet"
    kept.write_bytes(b"done")
    removed = atomic.remove_partials(results)
    assert sorted(removed) == sorted(names)
    assert not any(path.exists() for path in names)
    assert cached.exists() and kept.exists()


def test_a_folder_built_twice_at_once_keeps_the_first_without_replace(tmp_path):
    target = tmp_path / "model"
    with atomic.atomic_folder(target, replace=False) as first, atomic.atomic_folder(target, replace=False) as second:
        (first / "config.json").write_text("first")
        (second / "config.json").write_text("second")
    assert (target / "config.json").read_text() == "second"  # the inner write finished first and won
    assert sorted(os.listdir(tmp_path)) == ["model"]  # the loser's folder is gone, nothing partial is left


def test_files_and_folders_in_place_have_the_modes_plain_writes_give(tmp_path):
    """mkstemp / mkdtemp create 0600 / 0700: in place, a file or folder has the umask's mode, as open() would give,
    so a cluster group sharing results/ can read it."""
    previous = os.umask(0o022)
    try:
        atomic.write_text_atomic("x", tmp_path / "file.txt")
        with atomic.atomic_folder(tmp_path / "folder") as building:
            (building / "inner").write_text("y")
        os.umask(0o027)
        atomic.write_text_atomic("x", tmp_path / "group.txt")
    finally:
        os.umask(previous)
    assert (tmp_path / "file.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "folder").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "group.txt").stat().st_mode & 0o777 == 0o640
