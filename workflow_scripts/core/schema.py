"""The config schema (config/config.schema.yaml, which documents every key) and its messages a user can act on.

In:  a config dict, or one block of it checked on its own (an LLM block given to the engine), and the schema part
     it is checked against (a JSON pointer such as "#/$defs/llm").
Out: one line per problem (`problem_lines`, `schema_problems` for a block): the key (as a dotted path), the value
     found and what the schema allows there (`describe`); `with_defaults` makes a validator class that also fills in
     the schema's defaults. A key the schema retired (`{not: {}, removed: "why, and what replaces it"}`) is refused
     with that text, and left out of the allowed keys listed for a misspelt one. An enumeration is written once, in
     core/vocabulary.py: the schema names it (`x-enum: <name>`) and `load_schema` fills in its values.

This is the mechanism of `snakemake.utils.validate` (Draft 2020-12, defaults filled in), with messages instead of a
dump of the schema. It imports no stage, so any stage can check a block against the schema here.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema import Draft202012Validator, validators

from workflow_scripts.core import vocabulary

# the schema document sits with its validator (config/validate.py); this loader stays in core, below every stage,
# since stages check their own blocks with it (llm/settings.py) and config/ imports them
SCHEMA_PATH = Path(__file__).parents[1] / "config" / "config.schema.yaml"
ENUM_MARKER = "x-enum"


def load_schema() -> dict[str, Any]:
    """The config schema with its `x-enum` markers replaced by the enumerations of core/vocabulary.py."""
    return fill_enumerations(yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8")), vocabulary.enumerations())


def fill_enumerations(node: Any, enumerations: dict[str, tuple]) -> Any:
    """`node` with every `{x-enum: name}` replaced by `{enum: [the values of name]}` (in place)."""
    if isinstance(node, dict):
        if ENUM_MARKER in node:
            name = node.pop(ENUM_MARKER)
            if name not in enumerations:
                raise KeyError(f"{SCHEMA_PATH.name}: x-enum '{name}' names no enumeration of core/vocabulary.py "
                               f"({sorted(enumerations)})")
            node["enum"] = list(enumerations[name])
        for value in node.values():
            fill_enumerations(value, enumerations)
    elif isinstance(node, list):
        for value in node:
            fill_enumerations(value, enumerations)
    return node


def with_defaults(validator_class: type) -> type:
    """A validator class that also fills in `default` values (the jsonschema FAQ recipe Snakemake uses)."""
    check_properties = validator_class.VALIDATORS["properties"]

    def fill_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(name, subschema["default"])
        yield from check_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": fill_defaults})


def _dotted(path: Iterable[Any]) -> str:
    return ".".join(str(part) for part in path) or "(top level)"


def describe(error: jsonschema.ValidationError, where: str = "") -> str:
    """One line: the key (under `where`, the dotted path of the validated block), the value found and what the
    schema allows there."""
    key = _dotted([where, *error.absolute_path] if where else error.absolute_path)
    if error.validator == "not" and "removed" in error.schema:  # a key the schema retired: {not: {}, removed: why}
        return f"{key} was removed: {error.schema['removed']}"
    if error.validator == "additionalProperties":
        allowed = sorted(name for name, spec in error.schema.get("properties", {}).items()
                         if not (isinstance(spec, dict) and "removed" in spec))
        unknown = sorted(set(error.instance) - set(allowed))
        return f"{key}: unknown key(s) {unknown}; allowed keys: {allowed}"
    if error.validator == "required":  # the missing key's own description says what it is for
        missing = [name for name in error.validator_value if name not in error.instance]
        about = " ".join(error.schema.get("properties", {}).get(missing[0], {}).get("description", "").split())
        about = about.split(". ")[0].rstrip(".")  # its first sentence
        return f"{key}: {error.message}" + (f" ({about})" if about else "")
    allowed = {
        "enum": lambda: f"one of {error.validator_value}",
        "type": lambda: f"a value of type {error.validator_value}",
        "minimum": lambda: f"a number >= {error.validator_value}",
        "maximum": lambda: f"a number <= {error.validator_value}",
        "exclusiveMinimum": lambda: f"a number > {error.validator_value}",
        "exclusiveMaximum": lambda: f"a number < {error.validator_value}",
        "minProperties": lambda: f"at least {error.validator_value} entries",
        "minItems": lambda: f"at least {error.validator_value} items",
        "uniqueItems": lambda: "a list without repeated values",
        "pattern": lambda: f"a string matching {error.validator_value!r}",
    }.get(error.validator, lambda: error.message)()
    return f"{key} = {error.instance!r} is not allowed; expected {allowed}"


def problem_lines(validator: Any, instance: Any, where: str = "") -> list[str]:
    """One line per problem `validator` finds in `instance` (the innermost errors of a failed anyOf / oneOf)."""
    errors = sorted(validator.iter_errors(instance), key=lambda error: list(map(str, error.absolute_path)))
    leaves = [error for error in errors if not error.context] + [
        sub for error in errors if error.context for sub in error.context
    ]
    return sorted({describe(error, where) for error in leaves})


@cache
def _validator(pointer: str) -> Any:
    schema = load_schema()
    return Draft202012Validator({"$defs": schema["$defs"], "$ref": pointer})


def schema_problems(instance: Any, pointer: str, where: str) -> list[str]:
    """What the schema part at `pointer` (e.g. "#/$defs/llm") refuses in `instance`, a block checked on its own
    (an LLM block given to the engine), one line per problem with its key under `where`; defaults are not filled."""
    return problem_lines(_validator(pointer), instance, where)
