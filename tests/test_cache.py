"""Content-addressed shard caches: shards are named by their keys, read back by key, missing keys absent."""

from pathlib import Path

import polars as pl

from workflow_scripts.core.cache import append_cache, content_key, read_cache
from workflow_scripts.core.contracts import SCORE_CACHE


def test_cache_shards_are_content_named_and_read_back_by_key(tmp_path):
    keys = [content_key("fp", "query", text) for text in ("a", "b", "c")]
    assert len(set(keys)) == 3 and keys[0] == content_key("fp", "query", "a")
    first = append_cache(tmp_path, pl.DataFrame({"key": keys[:2], "score": [1.0, 2.0]}), SCORE_CACHE)
    again = append_cache(tmp_path, pl.DataFrame({"key": keys[:2], "score": [1.0, 2.0]}), SCORE_CACHE)
    append_cache(tmp_path, pl.DataFrame({"key": keys[1:], "score": [2.0, 3.0]}), SCORE_CACHE)
    assert first == again and len(list(Path(tmp_path).glob("*.parquet"))) == 2
    found = read_cache(tmp_path, [keys[1], keys[2], "missing"], SCORE_CACHE)
    assert dict(found.iter_rows()) == {keys[1]: 2.0, keys[2]: 3.0}
    assert read_cache(tmp_path / "empty", keys, SCORE_CACHE).is_empty()
