"""Compare two result trees: a refactor must leave every table the same, measured time aside.

In:  two `results/` folders (e.g. a run of the tree before a change, in a git worktree, and one after).
Out: one line per file that differs, is missing on one side or could not be compared, then a count; exit status 1
     when anything differs. Tables (Parquet, CSV) are compared as tables after dropping the measured-time columns
     (`MEASURED`: names with "seconds", "latency" or "wall", or ending in "_s"); a table whose columns changed
     names the added and removed ones and still compares the columns both sides have. JSON files as values without
     those keys; every other file byte for byte. Skipped: Lucene's segment files (`LUCENE`: each commit writes a
     random segment id; the index manifest and every ranking read from it are compared),
     logs, Snakemake benchmark files, caches, and files whose every byte depends on measured time (`TIMED`:
     figures and reports of cost, and the summary Markdown and its dataset pages, which quote seconds).

Run it:
    .venv/bin/python benchmarks/compare_results.py BEFORE/results AFTER/results
"""

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import polars as pl

SKIPPED_FOLDERS = {"logs", "benchmarks", "cache", ".snakemake"}
MEASURED = re.compile(r"seconds|latency|wall|_s$|per_second|s_per_")
TIMED = re.compile(r"(^|/)(summary_[^/]*\.md|summary_[^/]*/[^/]*\.md|cost/.*\.(png|md)|.*cost.*\.png)$")
LUCENE = re.compile(r"(^|/)(_\w+\.\w+|segments_\w+|write\.lock)$")


def table(path: Path) -> pl.DataFrame:
    frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path, infer_schema_length=0)
    return frame.drop([column for column in frame.columns if MEASURED.search(column)])


def untimed(value: Any) -> Any:
    """A JSON value without the keys that hold measured time, at any depth."""
    if isinstance(value, dict):
        return {key: untimed(item) for key, item in value.items() if not MEASURED.search(key)}
    return [untimed(item) for item in value] if isinstance(value, list) else value


def files(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")
            if path.is_file() and not SKIPPED_FOLDERS & set(path.relative_to(root).parts)}


def relative(x: float, y: float) -> float:
    """|x - y| relative to |y| (0 for two NaNs or equal infinities, inf for one NaN)."""
    if x == y or (math.isnan(x) and math.isnan(y)):
        return 0.0
    return abs(x - y) / max(abs(y), 1e-12) if not (math.isnan(x) or math.isnan(y)) else math.inf


def column_differences(left: pl.DataFrame, right: pl.DataFrame, rtol: float = 0.0) -> str | None:
    """The columns whose values differ, each float column with its largest relative difference; None when every
    difference is a float within `rtol` (relative)."""
    parts, beyond = [], False
    for name in left.columns:
        a, b = left[name], right[name]
        if a.equals(b):
            continue
        if a.dtype.is_float() and b.dtype.is_float() and a.is_null().equals(b.is_null()):
            gap = max((relative(x, y) for x, y in zip(a, b) if x is not None), default=0.0)
            beyond |= gap > rtol
            parts.append(f"{name} (max relative difference {gap:.1e})")
        else:
            beyond = True
            parts.append(name)
    return f"values differ in {', '.join(parts)}" if beyond else None


def difference(before: Path, after: Path, rtol: float = 0.0) -> str | None:
    """Why the two files differ, or None when they are the same (as tables, with float columns within `rtol`, or
    byte for byte)."""
    if before.suffix in (".parquet", ".csv"):
        try:
            left, right = table(before), table(after)
        except Exception as error:  # a file that is not a table after all: compare it as bytes
            return None if before.read_bytes() == after.read_bytes() else f"bytes differ ({error})"
        if left.height != right.height:
            return f"{left.height} vs {right.height} rows"
        common = [name for name in left.columns if name in right.columns]
        removed = [name for name in left.columns if name not in right.columns]
        added = [name for name in right.columns if name not in left.columns]
        left, right = left.select(common), right.select(common)
        values = None if left.equals(right) else column_differences(left, right, rtol)
        if not (removed or added):
            return values
        changed = "; ".join(f"{what} {', '.join(names)}" for what, names in (("removed", removed), ("added", added))
                            if names)
        return f"columns {changed}; common columns: {values or 'equal'}"
    if before.suffix == ".json":
        same = untimed(json.loads(before.read_text())) == untimed(json.loads(after.read_text()))
        return None if same else "values differ"
    return None if before.read_bytes() == after.read_bytes() else "bytes differ"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rtol", type=float, default=0.0,
                        help="float columns within this relative difference count as equal (default 0: exact)")
    args = parser.parse_args()
    left, right = files(args.before), files(args.after)
    problems = [f"only in {args.before}: {name}" for name in sorted(left - right)]
    problems += [f"only in {args.after}: {name}" for name in sorted(right - left)]
    compared = 0
    for name in sorted(left & right):
        if TIMED.search(name) or LUCENE.search(name):
            continue
        compared += 1
        why = difference(args.before / name, args.after / name, args.rtol)
        if why:
            problems.append(f"{name}: {why}")
    print("\n".join(problems))
    print(f"{compared} files compared, {len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
