"""A local stand-in of the OpenAI files and batches endpoints (and the online chat endpoint), for the Batch API tests:
uploads are kept in memory, a created batch is answered `in_progress` for `pending_looks` retrievals and then run
through `answer` (one request body → one chat-completions body) — or, with `process` set, through a function of the
whole input file (tests/test_served.py runs vLLM's own batch runner there)."""

import json
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import default
from typing import ClassVar

from local_server import JsonHandler, chat_completion


def echo(body: dict) -> dict:
    """A reply naming the request's last message, with its length as the prompt's tokens."""
    last = body["messages"][-1]["content"]
    return chat_completion(f"reply to {last[:20]}", prompt_tokens=len(last), completion_tokens=3)


class BatchServer(JsonHandler):
    models = ("m",)
    owned_by: ClassVar[str] = "tests"
    answer: ClassVar[Callable[[dict], dict]] = staticmethod(echo)
    process: ClassVar[Callable[[str], str] | None] = None  # input file → output file, instead of `answer`
    drop: ClassVar[frozenset[str]] = frozenset()  # custom ids the output leaves out
    fail_with: ClassVar[str | None] = None  # the batch fails, with this error
    pending_looks: ClassVar[int] = 1
    files: ClassVar[dict[str, bytes]] = {}
    batches: ClassVar[dict[str, dict]] = {}
    creates: ClassVar[int] = 0
    online: ClassVar[int] = 0

    @classmethod
    def reset(cls, **settings) -> None:
        cls.files, cls.batches, cls.creates, cls.online = {}, {}, 0, 0
        cls.answer, cls.process, cls.drop, cls.fail_with, cls.pending_looks = staticmethod(echo), None, frozenset(), None, 1
        cls.models, cls.owned_by = ("m",), "tests"
        for name, value in settings.items():
            setattr(cls, name, staticmethod(value) if callable(value) else value)

    def do_GET(self):
        path = self.path.rstrip("/")
        if path.endswith("/models"):
            return self.send_json(200, {"object": "list", "data": [
                {"id": name, "object": "model", "owned_by": self.owned_by} for name in self.models]})
        if "/files/" in path and path.endswith("/content"):
            return self.send_json(200, self.files[path.split("/")[-2]].decode())
        if "/batches/" in path:
            return self.send_json(200, self.look(path.split("/")[-1]))
        return self.send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self):
        path = self.path.rstrip("/")
        if path.endswith("/files"):
            data = self.rfile.read(int(self.headers["Content-Length"]))
            message = BytesParser(policy=default).parsebytes(
                f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + data)
            parts = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                     for part in message.iter_parts()}
            assert parts["purpose"] == b"batch", parts["purpose"]
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = parts["file"]
            return self.send_json(200, {"id": file_id, "object": "file", "bytes": len(parts["file"]), "created_at": 0,
                                        "filename": "batch.jsonl", "purpose": "batch", "status": "processed"})
        if path.endswith("/batches"):
            request = self.read_json()
            type(self).creates += 1
            batch_id = f"batch-{len(self.batches) + 1}"
            self.batches[batch_id] = {"id": batch_id, "object": "batch", "endpoint": request["endpoint"],
                                      "input_file_id": request["input_file_id"], "created_at": 0,
                                      "completion_window": request["completion_window"], "status": "validating",
                                      "looks": 0}
            return self.send_json(200, self.public(batch_id))
        if path.endswith("/chat/completions"):
            type(self).online += 1
            return self.send_json(200, self.answer(self.read_json()))
        return self.send_json(404, {"error": {"message": f"no route {self.path}"}})

    def public(self, batch_id: str) -> dict:
        return {key: value for key, value in self.batches[batch_id].items() if key != "looks"}

    def look(self, batch_id: str) -> dict:
        batch = self.batches[batch_id]
        batch["looks"] += 1
        if batch["status"] in ("completed", "failed"):
            return self.public(batch_id)
        if batch["looks"] <= self.pending_looks:
            batch["status"] = "in_progress"
            return self.public(batch_id)
        if self.fail_with:
            batch.update(status="failed", errors={"object": "list", "data": [{"code": "invalid", "message": self.fail_with}]})
            return self.public(batch_id)
        content = self.files[batch["input_file_id"]].decode()
        output = self.process(content) if self.process else self.run(content)
        output_id = f"file-{len(self.files) + 1}"
        self.files[output_id] = output.encode()
        batch.update(status="completed", output_file_id=output_id)
        return self.public(batch_id)

    def run(self, content: str) -> str:
        lines = []
        for line in content.splitlines():
            request = json.loads(line)
            assert request["method"] == "POST" and request["url"] == "/v1/chat/completions"
            if request["custom_id"] in self.drop:
                continue
            if "bad" in request["body"]["messages"][-1]["content"]:
                response = {"status_code": 400, "body": {"error": {"message": "unknown parameter"}}}
            else:
                response = {"status_code": 200, "body": self.answer(request["body"])}
            lines.append(json.dumps({"id": f"out-{request['custom_id']}", "custom_id": request["custom_id"],
                                     "response": response, "error": None}))
        return "\n".join(lines) + "\n"
