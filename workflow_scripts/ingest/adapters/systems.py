"""Format `systems`: a dataset made of imported systems' output files (ingest/systems.py) — for systems whose
contexts are texts, so there is no corpus of their own.

In:  the dataset's spec with `systems` (name → its `systems.<name>` block: path, columns), which the ingest rule
     adds from the config's `systems` entries whose `dataset` is this one.
Out: units: each distinct context text of any system, once (unit_id `ingest/systems.context_unit_id`, its own group,
     kind passage, in the order first met: systems by name, then their rows); questions: every question any system
     answers (group_id = qid: an imported question has no paper or context of its own), with the references its
     files give; no qrels (an imported context is not judged relevant by anyone). Counts: systems, questions,
     contexts read and units.
Bad input: `imported.read_system`'s, and two files that give the same question id another question text or other
references (the message names both files and the id).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflow_scripts.core.errors import InputError
from workflow_scripts.ingest.adapters import Ingested, Rest, UnitStream
from workflow_scripts.ingest.adapters.source_records import collect, question_row, unit_row
from workflow_scripts.ingest.systems import context_unit_id, read_system


def stream(spec: Mapping[str, Any], dataset: str) -> UnitStream:
    """Yield each distinct context as a unit, then return the questions (see the module docstring)."""
    if not spec.get("systems"):
        raise InputError(f"datasets.{dataset}: format 'systems' needs at least one systems entry with "
                         f"dataset: {dataset}")
    questions: dict[str, dict] = {}
    seen: set[str] = set()
    contexts = 0
    for name, system in sorted(spec["systems"].items()):
        table = read_system(name, system)
        for row in table.iter_rows(named=True):
            known = questions.setdefault(row["qid"], row | {"path": system["path"]})
            for key in ("question", "references"):
                if row[key] != known[key] and (key == "question" or (row[key] and known[key])):
                    raise InputError(f"{system['path']}: line {row['line']} gives question {row['qid']!r} another "
                                     f"{key} than {known['path']} does; the same id must be the same question")
            if row["references"] and not known["references"]:
                known["references"] = row["references"]
            for text in row["contexts"]:
                contexts += 1
                unit_id = context_unit_id(text)
                if unit_id not in seen and text.strip():
                    seen.add(unit_id)
                    yield unit_row(unit_id, unit_id, "passage", 0, None, text)
    rows = [question_row(qid, qid, row["question"], None, row["references"], [], [])
            for qid, row in sorted(questions.items())]
    counts = {"systems": len(spec["systems"]), "questions": len(rows), "contexts": contexts, "units": len(seen)}
    return Rest(questions=rows, counts=counts)


def load(spec: Mapping[str, Any], dataset: str) -> Ingested:
    return collect(stream(spec, dataset), dataset)
