"""Reading source files the way every adapter needs: gzip by magic bytes, strict UTF-8, errors that name the place.

In:  a path to a text, JSON, JSON Lines or TSV file (optionally gzip-compressed), an open binary stream (a tar
     member) together with a source name for messages, or text already decoded from elsewhere.
Out: decoded text, parsed JSON values, (line number, line) pairs, or (line number, record) pairs.

Streaming. Line-based files are read as a stream, never whole: `read_lines` (any text read line by line: SMART
and TREC files, topics, qrels), `read_jsonl`, `read_tsv` and `stream_records` (JSON Lines, or a JSON *list* of
records, item by item). Memory holds one line (one list item) and one read block, not the file; a bad line is
reported when the reader reaches it, after the lines before it were yielded. The lines and their numbers are
exactly those of `str.splitlines()` over the whole decoded file (\\n, \\r\\n, \\r and the other Unicode line
boundaries), and every message is the one a whole-file read gives, with one difference in kind: a file broken in
two places now reports the first break the stream reaches (a bad JSON line before an invalid UTF-8 byte further
on, say), where a whole-file read reported the undecodable byte first.

Whole-file: `read_bytes`, `read_text` and `read_json` read the whole file. They stay for whole-document formats,
whose one JSON value is the data (QASPER's object of papers, a {qid: {doc_id: grade}} qrels object);
`decode_utf8` decodes one small piece (an HTML page of a tar) with the same messages. A JSON list of records streams
(`stream_records`); when its stream meets anything
invalid it re-reads the file whole, so the message is exactly the whole-file one (memory = the file, on that
error path only).

Every failure is an `InputError` naming the file (and the line, for line-based files), never a bare library
traceback.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from workflow_scripts.core.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
BLOCK = 1 << 20  # bytes read at a time by the JSON list stream
PEEK_BLOCK = 1 << 16  # bytes read at a time while looking for a file's first non-blank character
READ_ERRORS = (OSError, EOFError, zlib.error)  # gzip.BadGzipFile is an OSError

Opener = Callable[[], IO[bytes]]


def require_file(path: str | Path, what: str) -> Path:
    """Return `path` as a Path if it is an existing file; else an InputError naming `what` (a config key)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{what}: file {path} does not exist (check the path in your config)")
    return path


def _cannot_read(source: object, error: BaseException) -> InputError:
    return InputError(f"{source}: cannot read the file: {error}")


# --- whole files ---------------------------------------------------------------------------------------------


def read_bytes(path: str | Path) -> bytes:
    """The file's bytes, decompressed if the file is gzip (detected by its magic bytes, not its name)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        return gzip.decompress(raw) if raw[:2] == GZIP_MAGIC else raw
    except READ_ERRORS as error:
        raise _cannot_read(path, error) from None


def decode_utf8(raw: bytes, source: str) -> str:
    """Decode strict UTF-8 (a leading BOM is dropped); bad bytes → InputError naming source, line and offset."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise _not_utf8(source, error.start, line, raw[error.start : error.start + 4]) from None


def _not_utf8(source: str, offset: int, line: int, shown: bytes) -> InputError:
    return InputError(
        f"{source}: not valid UTF-8 at byte {offset} (line {line}): {shown!r}; re-encode the file as UTF-8"
    )


def read_text(path: str | Path) -> str:
    """Whole file as text (gzip and UTF-8 handled as above)."""
    return decode_utf8(read_bytes(path), str(path))


def parse_json(text: str, source: str) -> Any:
    """Parse a whole JSON document from decoded text; a syntax error names `source`, line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{source}: invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}") from None


def _jsonl_values(lines: Iterable[tuple[int, str]], source: str) -> Iterator[tuple[int, Any]]:
    for number, line in lines:
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{source}: line {number} is not valid JSON: {error.msg} (column {error.colno})") from None


def parse_jsonl(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """Yield (1-based line number, parsed value) for each non-blank line of decoded JSON Lines text; a bad line
    names `source` and the line."""
    return _jsonl_values(enumerate(text.splitlines(), start=1), source)


def read_json(path: str | Path) -> Any:
    """Parse a whole JSON file (as `parse_json`): a whole-document format, read whole."""
    return parse_json(read_text(path), str(path))


# --- streams -------------------------------------------------------------------------------------------------


def open_binary(path: str | Path) -> IO[bytes]:
    """The file opened for reading bytes, through gzip when it starts with the gzip magic bytes (not by name)."""
    path = Path(path)
    try:
        with path.open("rb") as probe:
            magic = probe.read(2)
        return gzip.open(path, "rb") if magic == GZIP_MAGIC else path.open("rb")
    except READ_ERRORS as error:
        raise _cannot_read(path, error) from None


def _byte_lines(handle: IO[bytes], source: str, prefix: bytes = b"") -> Iterator[bytes]:
    """The stream's lines as bytes, each ending with b"\\n" (the last one may not); `prefix` holds bytes already
    read from the handle. A read error (a truncated or corrupt gzip stream) → InputError naming `source`."""
    try:
        if prefix:
            *complete, partial = prefix.split(b"\n")
            yield from (line + b"\n" for line in complete)
            if partial:
                yield partial + handle.readline()
        yield from iter(handle.readline, b"")
    except READ_ERRORS as error:
        raise _cannot_read(source, error) from None


def _decoded_lines(handle: IO[bytes], source: str, prefix: bytes = b"") -> Iterator[str]:
    """The stream's \\n-terminated lines decoded as strict UTF-8 (a BOM dropped from the first); an undecodable byte
    → the very message `decode_utf8` gives for the whole file (offset, line and bytes shown)."""
    lines = _byte_lines(handle, source, prefix)
    offset, before, bom = 0, b"", 0  # bytes read before this line; the last 3 of them; 3 when the file has a BOM
    for index, raw in enumerate(lines, start=1):
        try:
            yield raw.decode("utf-8-sig" if index == 1 else "utf-8")
        except UnicodeDecodeError as error:
            if index == 1:
                bom = 3 if raw.startswith(codecs.BOM_UTF8) else 0
            # utf-8-sig counts offsets after the BOM, and decode_utf8 reads its line and bytes at that offset of
            # the raw file: reproduce both, which only differ from the bad byte's own place when there is a BOM.
            at = error.start + (bom if index == 1 else 0)  # the bad byte's index in `raw`
            lead = (before + raw[:at])[-bom:] if bom else b""
            shown = lead + raw[at : at + 4 - bom]
            while len(shown) < 4 and (more := next(lines, b"")):
                shown += more[: 4 - len(shown)]
            raise _not_utf8(source, offset + at - bom, index - lead.count(b"\n"), shown[:4]) from None
        if index == 1:
            bom = 3 if raw.startswith(codecs.BOM_UTF8) else 0
        offset += len(raw)
        before = (before + raw)[-3:]


def stream_lines(handle: IO[bytes], source: str, prefix: bytes = b"") -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of an open binary stream, as `text.splitlines()` numbers the whole decoded
    text (each \\n-terminated piece is split on the other line boundaries too, so the numbers are the same)."""
    number = 0
    for text in _decoded_lines(handle, source, prefix):
        for line in text.splitlines():
            number += 1
            yield number, line


def read_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a text file (plain or gzip, strict UTF-8), streamed."""
    with open_binary(path) as handle:
        yield from stream_lines(handle, str(path))


def stream_jsonl(handle: IO[bytes], source: str, prefix: bytes = b"") -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for each non-blank line of a JSON Lines stream (as `parse_jsonl`)."""
    return _jsonl_values(stream_lines(handle, source, prefix), source)


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed value) for each non-blank line of a JSON Lines file (as `parse_jsonl`), streamed:
    a bad line raises when it is reached, after the values of the lines before it."""
    with open_binary(path) as handle:
        yield from stream_jsonl(handle, str(path))


def read_tsv(path: str | Path, columns: int, header: bool = False) -> Iterator[tuple[int, list[str]]]:
    """Yield (line number, fields) of a tab-separated file whose rows have at least `columns` fields, streamed."""
    for number, line in read_lines(path):
        if (header and number == 1) or not line.strip():
            continue
        fields = line.rstrip("\r").split("\t")
        if len(fields) < columns:
            raise InputError(f"{path}: line {number} has {len(fields)} tab-separated fields, expected {columns}")
        yield number, fields


# --- records: a JSON list or JSON Lines ----------------------------------------------------------------------


def read_records(path: str | Path) -> Iterator[tuple[str, int, Any]]:
    """`stream_records` of a file (plain or gzip)."""
    return stream_records(lambda: open_binary(path), str(path))


def stream_records(opener: Opener, source: str) -> Iterator[tuple[str, int, Any]]:
    """("item", index, value) for each item of a JSON list, or ("line", line number, value) for each non-blank line
    of JSON Lines, streamed from the stream `opener` opens. The text is a list when it starts (after whitespace)
    with "[". Anything invalid in a list, or an undecodable byte in the first block (read to find that first
    character), is reported by re-reading the whole stream (a second `opener()`) exactly as `parse_json` /
    `decode_utf8` report it; values already yielded are not yielded again."""
    yielded = 0
    with opener() as handle:
        try:
            prefix, first = _first_character(handle)
        except (UnicodeDecodeError, *READ_ERRORS):
            first = None  # undecodable or unreadable: the whole-file read below reports it
        else:
            if first != "[":
                yield from (("line", number, value) for number, value in stream_jsonl(handle, source, prefix))
                return
            try:
                for value in _JsonList(handle, prefix).items():
                    yield "item", yielded, value
                    yielded += 1
                return
            except (_Unstreamable, UnicodeDecodeError, *READ_ERRORS):
                pass  # the whole-file read below gives the exact message
    yield from _whole_records(opener, source, skip=yielded)


def _first_character(handle: IO[bytes]) -> tuple[bytes, str | None]:
    """(bytes read, the first non-whitespace character of the decoded text or None if there is none)."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    read = b""
    while True:
        block = handle.read(PEEK_BLOCK)
        read += block
        text = decoder.decode(block, final=not block).lstrip()
        if text or not block:
            return read, text[:1] or None


def _whole_records(opener: Opener, source: str, skip: int) -> Iterator[tuple[str, int, Any]]:
    """The records of the whole stream read at once (the error path of `stream_records`)."""
    try:
        with opener() as handle:
            raw = handle.read()
    except READ_ERRORS as error:
        raise _cannot_read(source, error) from None
    text = decode_utf8(raw, source)
    del raw
    if text.lstrip().startswith("["):
        values = parse_json(text, source)
        yield from (("item", index, values[index]) for index in range(skip, len(values)))
    else:
        yield from (("line", number, value) for number, value in parse_jsonl(text, source))


class _Unstreamable(Exception):
    """The JSON list stream met something invalid; the whole-file parse reports it."""


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


class _JsonList:
    """The items of a JSON list, decoded and parsed block by block (`json.JSONDecoder.raw_decode` per item)."""

    def __init__(self, handle: IO[bytes], prefix: bytes) -> None:
        self.handle, self.pending = handle, prefix
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.scan = json.JSONDecoder().raw_decode
        self.text, self.at, self.ended = "", 0, False

    def fill(self) -> bool:
        """Append decoded text, at least as much as is still unread (so an item spanning many blocks is rescanned
        a logarithmic number of times); False once the stream is exhausted."""
        if self.ended:
            return False
        pieces, wanted, got = [self.text[self.at :]], max(BLOCK, len(self.text) - self.at), 0
        while got < wanted:
            block, self.pending = self.pending or self.handle.read(BLOCK), b""
            pieces.append(self.decoder.decode(block, final=not block))
            got += len(pieces[-1])
            if not block:
                self.ended = True
                break
        self.text, self.at = "".join(pieces), 0
        return True

    def peek(self) -> str | None:
        """The next non-whitespace character (not consumed), or None at the end of the stream."""
        while True:
            self.at = _JSON_SPACE.match(self.text, self.at).end()
            if self.at < len(self.text):
                return self.text[self.at]
            if not self.fill():
                return None

    def value(self) -> Any:
        while True:
            try:
                value, end = self.scan(self.text, self.at)
            except json.JSONDecodeError:
                if self.fill():
                    continue
                raise _Unstreamable from None
            after = _JSON_SPACE.match(self.text, end).end()
            if (after == len(self.text) or self.text[after] not in ",]") and self.fill():
                continue  # not followed by a separator yet: the value may go on in the next block ("1." + "5")
            self.at = end
            return value

    def items(self) -> Iterator[Any]:
        if self.peek() != "[":
            raise _Unstreamable
        self.at += 1
        if self.peek() == "]":
            self.at += 1
        else:
            while True:
                if self.peek() is None:
                    raise _Unstreamable
                yield self.value()
                separator = self.peek()
                if separator not in (",", "]"):
                    raise _Unstreamable
                self.at += 1
                if separator == "]":
                    break
        if self.peek() is not None:
            raise _Unstreamable  # data after the list
