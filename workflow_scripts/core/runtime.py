"""How a stage module runs as a Snakemake job: log to the job's log file, turn user errors into one clear line.

In:  the `snakemake` object that Snakemake's `script:` directive injects, and the stage's `main(snakemake)`.
Out: the stage's outputs; on an `InputError` the job fails with exit status 1 after logging
     "ragfrontier: ERROR: <message>" (to stderr and the job's log) — no library traceback as the only message.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workflow_scripts.core.errors import InputError
from workflow_scripts.core.shards import Shard, checked_parts, gather, parse_shard

FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
STDERR_FORMAT = "ragfrontier: %(levelname)s: %(message)s"
QUIET_LIBRARIES = ("httpx", "httpx2")  # the openai client's HTTP layer logs every request at INFO


def configure_logging(log_path: str | None) -> None:
    """Send log records to `log_path` (the rule's `log:` file) and to stderr."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    handlers[0].setFormatter(logging.Formatter(STDERR_FORMAT))
    if log_path:
        handlers.append(logging.FileHandler(log_path, mode="w", encoding="utf-8"))
        handlers[1].setFormatter(logging.Formatter(FILE_FORMAT))
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)


def limit_threads(threads: int) -> None:
    """Keep torch to the job's `threads:` (its OpenMP pool otherwise fights the other jobs for every core and
    a shared 2-core machine slows LLM generation 20–40×)."""
    os.environ["OMP_NUM_THREADS"] = str(max(1, threads))  # read by torch when it is imported later
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(max(1, threads))


def shard_of(smk: Any) -> Shard | None:
    """The shard a Snakemake job works on, or None for an unsharded job (no `shard` wildcard)."""
    return parse_shard(smk.rule, dict(smk.wildcards.items()).get("shard"))


def is_gather(smk: Any) -> bool:
    """Whether the job is a sharded stage's gather (it alone gets `params.tables`)."""
    return "tables" in dict(smk.params.items())


def shard_paths(smk: Any, key: str) -> list[Path]:
    """The gather job's shard files of output `key` (inputs `<key>__<i>`), in shard order, all present."""
    names = sorted((name for name in smk.input.keys() if name.startswith(f"{key}__")),
                   key=lambda name: int(name.rsplit("__", 1)[1]))
    return checked_parts([Path(smk.input[name]) for name in names], smk.rule)


def gather_job(smk: Any) -> None:
    """The gather job of a stage whose outputs are all contract tables (core/shards.gather)."""
    tables = smk.params.tables
    gather(tables, {key: shard_paths(smk, key) for key in tables},
           dict(smk.input.items()), dict(smk.output.items()))


def run_job(main: Callable[[Any], None], smk: Any, gather_main: Callable[[Any], None] | None = None) -> None:
    """Run `main(smk)` as a Snakemake job with logging set up and user errors reported in one line; a sharded
    stage's gather job runs `gather_main(smk)` instead (default: `gather_job`, for stages whose outputs are all
    contract tables)."""
    configure_logging(smk.log[0] if smk.log else None)
    limit_threads(smk.threads)
    try:
        (gather_main or gather_job)(smk) if is_gather(smk) else main(smk)
    except InputError as error:
        logging.getLogger("ragfrontier").error("%s", error)
        sys.exit(1)
