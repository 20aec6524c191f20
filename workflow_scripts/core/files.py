"""Reading source files the way every adapter needs: gzip by magic bytes, strict UTF-8, errors that name the place.

In:  a path to a text, JSON, JSON Lines or TSV file (optionally gzip-compressed), or text already decoded from
     elsewhere (a tar member) together with a source name for messages.
Out: decoded text, parsed JSON values, or (line number, record) pairs.

Every failure is an `InputError` naming the file (and the line, for JSON Lines), never a bare library traceback.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workflow_scripts.core.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"


def require_file(path: str | Path, what: str) -> Path:
    """Return `path` as a Path if it is an existing file; else an InputError naming `what` (a config key)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{what}: file {path} does not exist (check the path in your config)")
    return path


def read_bytes(path: str | Path) -> bytes:
    """The file's bytes, decompressed if the file is gzip (detected by its magic bytes, not its name)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        return gzip.decompress(raw) if raw[:2] == GZIP_MAGIC else raw
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise InputError(f"{path}: cannot read the file: {error}") from None


def decode_utf8(raw: bytes, source: str) -> str:
    """Decode strict UTF-8 (a leading BOM is dropped); bad bytes → InputError naming source, line and offset."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise InputError(
            f"{source}: not valid UTF-8 at byte {error.start} (line {line}): {raw[error.start:error.start + 4]!r}; "
            f"re-encode the file as UTF-8"
        ) from None


def read_text(path: str | Path) -> str:
    """Whole file as text (gzip and UTF-8 handled as above)."""
    return decode_utf8(read_bytes(path), str(path))


def parse_json(text: str, source: str) -> Any:
    """Parse a whole JSON document from decoded text; a syntax error names `source`, line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{source}: invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}") from None


def parse_jsonl(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """Yield (1-based line number, parsed value) for each non-blank line of decoded JSON Lines text; a bad line
    names `source` and the line."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{source}: line {number} is not valid JSON: {error.msg} (column {error.colno})") from None


def read_json(path: str | Path) -> Any:
    """Parse a whole JSON file (as `parse_json`)."""
    return parse_json(read_text(path), str(path))


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed value) for each non-blank line of a JSON Lines file (as `parse_jsonl`)."""
    yield from parse_jsonl(read_text(path), str(path))


def read_tsv(path: str | Path, columns: int, header: bool = False) -> Iterator[tuple[int, list[str]]]:
    """Yield (line number, fields) of a tab-separated file whose rows have at least `columns` fields."""
    lines = read_text(path).splitlines()
    for number, line in enumerate(lines, start=1):
        if (header and number == 1) or not line.strip():
            continue
        fields = line.rstrip("\r").split("\t")
        if len(fields) < columns:
            raise InputError(f"{path}: line {number} has {len(fields)} tab-separated fields, expected {columns}")
        yield number, fields
