"""Rendering templates into chat messages, and the config's `prompts:` overrides of the defaults.

In:  the config's `prompts:` mapping (optional overrides of `templates.DEFAULTS`), and per request the fields a
     template names (question, title, ...) plus the evidence units' texts in rank order.
Out: the templates in force (`load_templates`, validated) and chat messages (`render`).

Evidence units are written as the template's `evidence_item` ("[{index}] {text}", 1-based index) and separated by
blank lines; a template that shows evidence gets "(no documents)" when there is none.
An override may replace a template's `messages` and/or `evidence_item`, and must use exactly the default's
placeholders (a dropped placeholder would silently ignore an input; an extra one cannot be filled). An override
keeps its step's constraint: one whose messages no longer mention a field the schema requires gets a warning
naming the template (the model would be made to write fields it was never asked for).
"""

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from workflow_scripts.core.errors import InputError
from workflow_scripts.llm.templates import DEFAULTS, EVIDENCE_FIELD, Template, placeholders

log = logging.getLogger(__name__)

ROLES = ("system", "user", "assistant")
EVIDENCE_ITEM_FIELDS = frozenset({"index", "text"})
NO_EVIDENCE = "(no documents)"


def _override(default: Template, override: Any) -> Template:
    where = f"prompts.{default.name}"
    if not isinstance(override, Mapping) or set(override) - {"messages", "evidence_item"} or not override:
        raise InputError(f"{where}: expected a mapping with 'messages' and/or 'evidence_item', got {override!r}")
    messages = default.messages
    if "messages" in override:
        given = override["messages"]
        if not isinstance(given, Sequence) or isinstance(given, str) or not given:
            raise InputError(f"{where}.messages: expected a non-empty list of {{role, content}} mappings")
        messages = []
        for at, message in enumerate(given):
            if not isinstance(message, Mapping) or set(message) != {"role", "content"}:
                raise InputError(f"{where}.messages[{at}]: expected a mapping with exactly 'role' and 'content'")
            if message["role"] not in ROLES or not isinstance(message["content"], str):
                raise InputError(f"{where}.messages[{at}]: role must be one of {ROLES} and content a string")
            messages.append((message["role"], message["content"]))
        messages = tuple(messages)
    evidence_item = override.get("evidence_item", default.evidence_item)
    item_fields = set(placeholders(str(evidence_item), f"{where}.evidence_item"))
    if "text" not in item_fields or item_fields - EVIDENCE_ITEM_FIELDS:
        raise InputError(
            f"{where}.evidence_item: must contain {{text}} and may contain {{index}}; got {evidence_item!r}"
        )
    template = Template(default.name, messages, str(evidence_item), default.constraint)
    if template.fields != default.fields:
        raise InputError(
            f"{where}: the messages must use exactly the placeholders {sorted(default.fields)}; "
            f"got {sorted(template.fields)}"
        )
    _warn_unasked(template)
    return template


def _warn_unasked(template: Template) -> None:
    """Warn when an overridden template's messages never mention a field its reply schema requires."""
    if template.constraint is None:
        return
    probe = template.constraint({name: "2" for name in template.fields - {EVIDENCE_FIELD}})  # "n" fields need a number
    said = " ".join(content for _, content in template.messages)
    unasked = sorted(name for name in probe.required_fields() if not re.search(rf"\b{re.escape(name)}\b", said))
    if unasked:
        log.warning(
            "prompts.%s: the messages never mention %s, which the reply schema requires; the model will be made to "
            "write fields it was not asked for (name them in the prompt)", template.name, unasked,
        )


def load_templates(overrides: Mapping[str, Any] | None = None) -> dict[str, Template]:
    """The default templates with the config's `prompts:` overrides applied (validated)."""
    overrides = overrides or {}
    unknown = sorted(set(overrides) - set(DEFAULTS))
    if unknown:
        raise InputError(f"prompts: unknown templates {unknown}; known: {sorted(DEFAULTS)}")
    return {name: _override(default, overrides[name]) if name in overrides else default
            for name, default in DEFAULTS.items()}


def render(template: Template, fields: Mapping[str, str], evidence: Sequence[str] = ()) -> list[dict[str, str]]:
    """Chat messages of `template` filled with `fields` and the evidence units (in rank order)."""
    expected = template.fields - {EVIDENCE_FIELD}
    if set(fields) != expected:
        raise ValueError(f"template {template.name} needs fields {sorted(expected)}, got {sorted(fields)}")
    if evidence and not template.uses_evidence:
        raise ValueError(f"template {template.name} shows no evidence, but {len(evidence)} units were given")
    values = dict(fields)
    if template.uses_evidence:
        items = [template.evidence_item.format(index=index, text=text) for index, text in enumerate(evidence, 1)]
        values[EVIDENCE_FIELD] = "\n\n".join(items) if items else NO_EVIDENCE
    return [{"role": role, "content": content.format(**values)} for role, content in template.messages]
