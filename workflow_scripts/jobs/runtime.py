"""How a job module runs as a Snakemake job: log to the job's log file, keep to the job's threads, turn user errors
into one clear line. The job layer's own module: no library package imports it.

In:  the `snakemake` object that Snakemake's `script:` directive injects, and the job module's `main(snakemake)`.
Out: the job's outputs; on an `InputError` the job fails with exit status 1 after logging
     "ragfrontier: ERROR: <message>" (to stderr and the job's log) — no library traceback as the only message.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from workflow_scripts.core.errors import InputError
from workflow_scripts.core.shards import Shard, parse_shard

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


def run_job(main: Callable[[Any], None], smk: Any) -> None:
    """Run `main(smk)` as a Snakemake job with logging set up and user errors reported in one line."""
    configure_logging(smk.log[0] if smk.log else None)
    limit_threads(smk.threads)
    try:
        main(smk)
    except InputError as error:
        logging.getLogger("ragfrontier").error("%s", error)
        sys.exit(1)
