"""The OpenAI Batch API for the openai backend (`batch: true`): a shard of requests as one batch, at half the price
of online calls on hosted APIs, answered within the completion window instead of at once.

In:  the openai backend (its client settings, `body` of each prompt, endpoint, model cache) and a shard of `Prompt`s.
Out: one `Outcome` per prompt, read from the batch's output file as an online reply is read (`parse_chat_completion`
     / `parse_completion`), so a batch run writes the same tables as an online one.

The cycle (OpenAI's documented Batch API; vLLM's `run_batch` reads and writes the same file format):
1. `batch_file`: one JSON line per request, `{"custom_id": "request-<i>", "method": "POST", "url": <endpoint>,
   "body": <the online request's body>}`.
2. Upload it (`files.create`, purpose "batch"), create the batch (`batches.create`, completion window 24h), and
   record its id in `<model cache>/openai-batches/<sha256 of the file>.json` before waiting.
3. Poll `batches.retrieve` every `batch_poll_s` seconds until the batch is completed, failed, expired or cancelled.
4. Read the output file (`files.content`) and the error file: a line with status 200 is parsed as an online reply;
   another status or an `error` is that row's error. A request the output files do not mention is an error row
   naming the batch, never dropped. A failed, expired or cancelled batch makes every row an error with its reason.
A run killed while a batch is pending finds the record of the same file (same requests, same bodies) and waits for
that batch instead of submitting it again; the record is removed once the batch's output is read (failed rows are
retried by the next run, as online ones are). Each row's latency is the batch's wall time split evenly over its rows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import openai

from workflow_scripts.core.atomic import write_text_atomic
from workflow_scripts.llm.backends import Outcome

log = logging.getLogger(__name__)

ENDPOINTS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
COMPLETION_WINDOW = "24h"
FINISHED = frozenset({"completed", "failed", "expired", "cancelled"})
STATE_FOLDER = "openai-batches"


def custom_id(index: int) -> str:
    return f"request-{index}"


def batch_file(bodies: Sequence[Mapping[str, Any]], url: str) -> str:
    """The Batch input file (JSONL) of request bodies sent to `url` (an endpoint path, e.g. /v1/chat/completions)."""
    return "".join(json.dumps({"custom_id": custom_id(index), "method": "POST", "url": url, "body": body},
                              ensure_ascii=False, sort_keys=True) + "\n" for index, body in enumerate(bodies))


def read_output(texts: Sequence[str], count: int, parse: Callable[[int, Mapping[str, Any]], Outcome],
                where: str) -> list[Outcome]:
    """The `count` Outcomes of a batch from its output and error files' texts (JSONL): `parse(index, body)` reads a
    200 reply; `where` names the batch in the error of a request no line answers."""
    found: dict[str, Outcome] = {}
    indices = {custom_id(index): index for index in range(count)}
    for text in texts:
        for line in text.splitlines():
            if not line.strip():
                continue
            entry = json.loads(line)
            response = entry.get("response") or {}
            status, body, error = response.get("status_code", 200), response.get("body"), entry.get("error")
            name = entry.get("custom_id")
            index = indices.get(name) if isinstance(name, str) else None
            if index is None:
                log.warning("%s: an output line names an unknown request %r; ignored", where, name)
                continue
            if error is None and status == 200 and isinstance(body, Mapping):
                try:
                    found[entry["custom_id"]] = parse(index, body)
                except (ValueError, KeyError, IndexError, TypeError) as failure:
                    found[entry["custom_id"]] = Outcome(error=f"unreadable reply in {where}: {failure}")
            else:
                found[entry["custom_id"]] = Outcome(error=f"HTTP {status} in {where}: {_reason(error, body)[:200]}")
    return [found.get(custom_id(index)) or Outcome(error=f"{where}: its output has no line for {custom_id(index)}")
            for index in range(count)]


def _reason(error: Any, body: Any) -> str:
    """The words of a failed line: its `error` (a string or {message}) or its body's error."""
    for part in (error, body):
        if isinstance(part, Mapping):
            inner = part.get("error", part)
            return str(inner.get("message") if isinstance(inner, Mapping) and inner.get("message") else inner)
        if part:
            return str(part)
    return "no reason given"


def state_path(folder: Path, content: str, base_url: str) -> Path:
    """Where a pending batch of `content` sent to the server at `base_url` is recorded (the file names the model in
    every body; the same requests sent to another server are another batch)."""
    key = hashlib.sha256(f"{base_url}\n{content}".encode()).hexdigest()
    return Path(folder) / STATE_FOLDER / f"{key}.json"


def submit_or_resume(client: openai.OpenAI, content: str, url: str, state: Path, where: str) -> str:
    """The id of the batch of `content`: the one a killed run recorded in `state`, else a new one (recorded)."""
    if state.is_file():
        batch_id = json.loads(state.read_text())["batch_id"]
        log.info("%s: resuming batch %s (recorded in %s)", where, batch_id, state)
        return batch_id
    uploaded = client.files.create(file=("batch.jsonl", content.encode()), purpose="batch")
    batch = client.batches.create(input_file_id=uploaded.id, endpoint=url, completion_window=COMPLETION_WINDOW)
    state.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(json.dumps({"batch_id": batch.id, "input_file_id": uploaded.id, "endpoint": url}), state)
    log.info("%s: submitted batch %s (%d requests, file %s)", where, batch.id, content.count("\n"), uploaded.id)
    return batch.id


def wait(client: openai.OpenAI, batch_id: str, poll_s: float, where: str) -> Any:
    """The batch once it is finished (completed, failed, expired or cancelled)."""
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in FINISHED:
            return batch
        counts = batch.request_counts
        log.info("%s: batch %s is %s (%s of %s done); next look in %.0f s", where, batch_id, batch.status,
                 getattr(counts, "completed", "?"), getattr(counts, "total", "?"), poll_s)
        time.sleep(poll_s)


def run(client: openai.OpenAI, bodies: Sequence[Mapping[str, Any]], url: str, state_folder: Path, poll_s: float,
        parse: Callable[[int, Mapping[str, Any]], Outcome], where: str) -> list[Outcome]:
    """One batch of `bodies` to `url`, from submission (or resumption) to its Outcomes (see the module docstring)."""
    started = time.perf_counter()
    content = batch_file(bodies, url)
    state = state_path(state_folder, content, str(client.base_url))
    batch_id = submit_or_resume(client, content, url, state, where)
    batch = wait(client, batch_id, poll_s, where)
    name = f"batch {batch_id}"
    if batch.status != "completed":
        errors = "; ".join(str(error.message) for error in (batch.errors.data or [])) if batch.errors else ""
        outcomes = [Outcome(error=f"{name} {batch.status}" + (f": {errors[:200]}" if errors else ""))] * len(bodies)
    else:
        texts = [
            client.files.content(file_id).text for file_id in (batch.output_file_id, batch.error_file_id) if file_id
        ]
        outcomes = read_output(texts, len(bodies), parse, name)
    state.unlink(missing_ok=True)
    share = (time.perf_counter() - started) / max(len(bodies), 1)
    return [outcome._replace(latency_s=share) for outcome in outcomes]
