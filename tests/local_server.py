"""A local OpenAI-style HTTP server for tests: a handler base class that reads and writes JSON, and `serving`,
which runs a handler on a free port of 127.0.0.1 for the length of a `with` block."""

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    """Silent request handler with JSON helpers; subclasses implement do_POST."""

    def log_message(self, *args):
        pass

    def read_json(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def send_json(self, status: int, body: dict | str) -> None:
        """Send `body` (a dict as JSON, a string as it is) with `status`; a client that already left (a timeout
        test) is not an error of the server."""
        data = (json.dumps(body) if isinstance(body, dict) else body).encode()
        try:
            self.send_response(status)
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
