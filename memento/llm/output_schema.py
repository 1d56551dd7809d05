"""The JSON schema of a signature's outputs, sized so that constrained decoding ends before ``max_tokens``.

:func:`output_schema` turns a signature's output fields into one strict JSON schema (every property required,
objects closed, references inlined) that a server or a local engine can decode against. Every array carries
``maxItems`` and every free string ``maxLength``: a field may state its own bounds (:func:`limit`), an array may take
its bound from an integer input of the same call (``max_items_from="max_questions"``: the decompose budget), and
the rest share the role's output budget (``max_tokens`` at two characters a token), so that a small model
decoding under the schema closes the JSON before it runs out of tokens. A field whose value has no closed type of
its own (ReAct's ``next_tool_args``) carries the schema it must follow (:data:`SCHEMA_KEY`; built from the tools'
own argument types by :func:`tool_args_schema`).

Example:
    >>> import dspy
    >>> class Plan(dspy.Signature):
    ...     '''Plan.'''
    ...     task: str = dspy.InputField()
    ...     steps: list[str] = limit(dspy.OutputField(), max_items=3)
    >>> schema = output_schema(Plan, max_tokens=300)
    >>> schema["properties"]["steps"]["maxItems"], schema["properties"]["steps"]["items"]["maxLength"]
    (3, 184)
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import TypeAdapter
from pydantic.fields import FieldInfo

__all__ = ["SCHEMA_KEY", "OpenSchemaError", "limit", "output_schema", "tool_args_schema"]

#: ``json_schema_extra`` key of an output field that carries its own JSON schema (a field typed ``dict[str, Any]``)
SCHEMA_KEY = "memento_schema"
_MAX_ITEMS = "memento_max_items"
_MAX_ITEMS_FROM = "memento_max_items_from"
_MAX_CHARS = "memento_max_chars"
_MAX_CHARS_FROM = "memento_max_chars_from"

DEFAULT_MAX_ITEMS = 8  # an array without a bound of its own
DEFAULT_MAX_TOKENS = 4096  # the output budget assumed when the role sets no max_tokens
CHARS_PER_TOKEN = 2  # a safety factor: a small model looping in a string writes ~3 characters a token
MIN_CHARS = 40  # no free string is bounded below this
MAX_CHARS = 1000  # nor above this: llama.cpp refuses the grammar of a much longer bounded string
_OVERHEAD_TOKENS = 24  # braces, keys and quotes of a small object


class OpenSchemaError(ValueError):
    """An output field whose type admits any keys (``dict[str, Any]``) and carries no schema of its own."""


def limit(
    field: Any,
    *,
    max_items: int | None = None,
    max_items_from: str | None = None,
    max_chars: int | None = None,
    max_chars_from: str | None = None,
) -> Any:
    """Bound an output field in the JSON schema sent to the model (the prompt and the parsing are unchanged).

    Args:
        field: a ``dspy.OutputField(...)``.
        max_items: the most items of a list field.
        max_items_from: the name of an integer input of the same signature that bounds the list at each call.
        max_chars: the longest text of a string field (of each string item, for a list of strings).
        max_chars_from: the name of an integer input that bounds the text at each call.

    Returns:
        The same field.
    """
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    bounds = (
        (_MAX_ITEMS, max_items),
        (_MAX_ITEMS_FROM, max_items_from),
        (_MAX_CHARS, max_chars),
        (_MAX_CHARS_FROM, max_chars_from),
    )
    for key, value in bounds:
        if value is not None:
            extra[key] = value
    field.json_schema_extra = extra
    return field


def tool_args_schema(tools: Iterable[Any]) -> dict[str, Any]:
    """The schema of ReAct's ``next_tool_args``: one closed object per distinct argument list of the tools.

    Args:
        tools: ``dspy.Tool`` objects (their ``args``: ``{name: {"type": ...}}``).
    """
    options: list[dict[str, Any]] = []
    for tool in tools:
        props = {name: _arg_schema(spec) for name, spec in (getattr(tool, "args", None) or {}).items()}
        option = {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
        if option not in options:
            options.append(option)
    return options[0] if len(options) == 1 else {"anyOf": options}


def _arg_schema(spec: Any) -> dict[str, Any]:
    if not isinstance(spec, dict) or not spec.get("type"):
        return {"type": "string"}
    return {k: v for k, v in spec.items() if k in ("type", "enum", "items", "description")}


def output_schema(
    signature: Any, *, max_tokens: int | None = None, inputs: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The strict JSON schema of a signature's output fields, bounded to fit ``max_tokens``.

    Args:
        signature: a ``dspy.Signature`` class.
        max_tokens: the role's output budget (``None``: :data:`DEFAULT_MAX_TOKENS`).
        inputs: this call's inputs (for ``max_items_from`` bounds).

    Raises:
        OpenSchemaError: an output field admits arbitrary keys and carries no schema (send JSON mode instead).
    """
    properties: dict[str, Any] = {}
    fixed: set[str] = set()
    for name, field in signature.output_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        schema = copy.deepcopy(extra[SCHEMA_KEY]) if SCHEMA_KEY in extra else _field_schema(name, field)
        items = _bound(extra, _MAX_ITEMS, _MAX_ITEMS_FROM, inputs)
        if items is not None and schema.get("type") == "array":
            schema["maxItems"] = items
        chars = _bound(extra, _MAX_CHARS, _MAX_CHARS_FROM, inputs)
        if chars is not None:
            _bound_strings(schema, max(1, chars))
            fixed.add(name)
        properties[name] = schema
    root = {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}
    _close(root)
    _share_budget(root, fixed, max_tokens or DEFAULT_MAX_TOKENS)
    return root


def _bound(extra: Mapping[str, Any], key: str, key_from: str, inputs: Mapping[str, Any] | None) -> int | None:
    """A field's bound: from this call's input named by ``key_from`` when given, else the fixed ``key``."""
    source = extra.get(key_from)
    if source is not None and inputs is not None and isinstance(inputs.get(source), int):
        return max(0, int(inputs[source]))
    value = extra.get(key)
    return None if value is None else int(value)


def _field_schema(name: str, field: FieldInfo) -> dict[str, Any]:
    schema: dict[str, Any] = TypeAdapter(field.annotation if field.annotation is not None else str).json_schema()
    schema = _inline(schema, schema.get("$defs", {}), ())
    if _is_open(schema):
        raise OpenSchemaError(f"output field {name!r} admits any keys; it needs a schema of its own ({SCHEMA_KEY})")
    return schema


def _inline(schema: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    """The schema with every ``$ref`` replaced by its definition, titles and ``$defs`` dropped."""
    if isinstance(schema, list):
        return [_inline(item, defs, seen) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in seen:
            raise OpenSchemaError(f"recursive type {name!r} cannot be a closed schema")
        merged = {**defs.get(name, {}), **{k: v for k, v in schema.items() if k != "$ref"}}
        return _inline(merged, defs, (*seen, name))
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("$defs", "title"):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {prop: _inline(sub, defs, seen) for prop, sub in value.items()}
        else:
            out[key] = _inline(value, defs, seen)
    if len(out.get("allOf", ())) == 1:
        out.update(out.pop("allOf")[0])
    return out


def _is_open(schema: dict[str, Any]) -> bool:
    if schema.get("type") == "object" and not schema.get("properties") and schema.get("additionalProperties", True):
        return True
    children = [schema.get("items"), *schema.get("anyOf", ()), *(schema.get("properties") or {}).values()]
    return any(isinstance(child, dict) and _is_open(child) for child in children)


def _close(schema: Any) -> None:
    """Strict form: every object closed with all its properties required, ``None`` defaults dropped."""
    if isinstance(schema, list):
        for item in schema:
            _close(item)
        return
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "object":
        props = schema.setdefault("properties", {})
        schema["required"] = list(props)
        schema["additionalProperties"] = False
    if "default" in schema:
        del schema["default"]
    for key in ("properties",):
        for sub in (schema.get(key) or {}).values():
            _close(sub)
    for key in ("items", "anyOf", "oneOf"):
        if key in schema:
            _close(schema[key])


def _bound_strings(schema: Any, chars: int) -> None:
    """Set ``maxLength`` on every free string (no enum, no bound yet) under ``schema``."""
    for node, _ in _strings(schema, 1):
        node.setdefault("maxLength", chars)


def _strings(schema: Any, weight: int) -> Iterable[tuple[dict[str, Any], int]]:
    """Every free string under ``schema`` with how many times it may occur (the product of the arrays' bounds)."""
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "string" and "enum" not in schema and "const" not in schema:
        yield schema, weight
        return
    if schema.get("type") == "array":
        if "maxItems" not in schema:
            schema["maxItems"] = DEFAULT_MAX_ITEMS
        yield from _strings(schema.get("items"), weight * max(1, int(schema["maxItems"])))
        return
    for sub in (schema.get("properties") or {}).values():
        yield from _strings(sub, weight)
    for key in ("anyOf", "oneOf"):
        for sub in schema.get(key, ()):
            yield from _strings(sub, weight)


def _share_budget(root: dict[str, Any], fixed: set[str], max_tokens: int) -> None:
    """Bound every array and every free string left unbounded so that the whole reply fits ``max_tokens``."""
    budget = max(0, max_tokens - _OVERHEAD_TOKENS) * CHARS_PER_TOKEN
    free: list[tuple[dict[str, Any], int]] = []
    for name, schema in root["properties"].items():
        for node, weight in _strings(schema, 1):
            if name in fixed or "maxLength" in node:
                budget -= node.get("maxLength", 0) * weight
            else:
                free.append((node, weight))
    slots = sum(weight for _, weight in free)
    if not slots:
        return
    chars = max(MIN_CHARS, min(MAX_CHARS, max(0, budget) // slots))
    for node, _ in free:
        node["maxLength"] = chars
