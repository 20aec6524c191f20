"""A local OpenAI-style HTTP server for tests: a handler base class that reads and writes JSON, and `serving`,
which runs a handler on a free port of 127.0.0.1 for the length of a `with` block; and `process_group` / `left_after`,
which list the processes a killed job may have left behind."""

import json
import threading
import time
from pathlib import Path
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar


class JsonHandler(BaseHTTPRequestHandler):
    """Silent request handler with JSON helpers; subclasses implement do_POST and name the models they serve in
    `models` (GET /v1/models lists them, as the openai backend asks before any work)."""

    models: ClassVar[tuple[str, ...]] = ()

    def log_message(self, *args):
        pass

    def read_json(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            return self.send_json(200, {"object": "list", "data": [
                {"id": name, "object": "model", "owned_by": "tests"} for name in self.models]})
        return self.send_json(404, {"error": {"message": f"no route {self.path}"}})

    def send_json(self, status: int, body: dict | str, headers: dict[str, str] | None = None) -> None:
        """Send `body` (a dict as JSON, a string as it is) with `status` and extra `headers`; a client that already
        left (a timeout test) is not an error of the server."""
        data = (json.dumps(body) if isinstance(body, dict) else body).encode()
        try:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


def chat_completion(text: str, prompt_tokens: int = 50, completion_tokens: int = 7, **choice) -> dict:
    """A /v1/chat/completions response with one choice whose message is `text` (extra keys: into the choice)."""
    return {"choices": [{"message": {"content": text}, "finish_reason": "stop", **choice}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve `handler` on a free local port; yields the OpenAI base URL (http://127.0.0.1:<port>/v1)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def process_group(group: int) -> list[str]:
    """The processes of process group `group`, as "pid name"."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, rest = stat.read_text().split(" (", 1)
        except OSError:
            continue  # ended while listing
        name, fields = rest.rsplit(") ", 1)
        if int(fields.split()[2]) == group:
            members.append(f"{pid} {name}")
    return members


def left_after(processes: Callable[[], Collection], seconds: float = 30) -> Collection:
    """What `processes()` still lists once it is empty or `seconds` have passed (a killed job's leftovers)."""
    deadline = time.monotonic() + seconds
    while (found := processes()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found
