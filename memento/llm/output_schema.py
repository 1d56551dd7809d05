"""The JSON schema of a signature's outputs, sized so that constrained decoding ends before ``max_tokens``.

:func:`output_schema` turns a signature's output fields into one strict JSON schema (every property required,
objects closed, references inlined) that a server or a local engine can decode against. Every array carries
``maxItems`` and every free string ``maxLength``: a field may state its own bounds (:func:`limit`), an array may take
its bound from an integer input of the same call (``max_items_from="max_questions"``: the decompose budget), and
the rest share the role's output budget, so that a model decoding under the schema closes the JSON before it
runs out of tokens: :func:`reply_chars` is the longest reply the schema admits, in characters, structure included
(keys, quotes, commas, the one space llama.cpp's grammar allows after each), and it is kept within ``max_tokens``
at one character a token (a token is at least one byte: a reply of ``n`` ASCII characters is at most ``n`` tokens;
SmolLM2 writes digits one a token). Where the strings would get fewer than :data:`WANTED_CHARS` each, the lists
without a bound of their own are shortened first (the longest, nested ones first). A field whose value has no closed
type of its own (ReAct's ``next_tool_args``) carries the schema it must follow (:data:`SCHEMA_KEY`; built from the
tools' own argument types by :func:`tool_args_schema`).

Example:
    >>> import dspy
    >>> class Plan(dspy.Signature):
    ...     '''Plan.'''
    ...     task: str = dspy.InputField()
    ...     steps: list[str] = limit(dspy.OutputField(), max_items=3)
    >>> schema = output_schema(Plan, max_tokens=300)
    >>> schema["properties"]["steps"]["maxItems"], schema["properties"]["steps"]["items"]["maxLength"]
    (3, 88)
    >>> reply_chars(schema) <= 300
    True
"""

from __future__ import annotations

import copy
import json
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import TypeAdapter
from pydantic.fields import FieldInfo

__all__ = ["SCHEMA_KEY", "OpenSchemaError", "limit", "output_schema", "reply_chars", "tool_args_schema"]

#: ``json_schema_extra`` key of an output field that carries its own JSON schema (a field typed ``dict[str, Any]``)
SCHEMA_KEY = "memento_schema"
_MAX_ITEMS = "memento_max_items"
_MAX_ITEMS_FROM = "memento_max_items_from"
_MAX_CHARS = "memento_max_chars"
_MAX_CHARS_FROM = "memento_max_chars_from"
_KEYS_FROM = "memento_keys_from"
_DEFAULT_BOUND = "memento_default_bound"  # marks an array whose maxItems is DEFAULT_MAX_ITEMS (removed before sending)

DEFAULT_MAX_ITEMS = 8  # an array without a bound of its own
DEFAULT_MAX_TOKENS = 4096  # the output budget assumed when the role sets no max_tokens
CHARS_PER_TOKEN = 1  # a token is at least one byte (the bound is sound for ASCII replies)
MIN_CHARS = 40  # no free string is bounded below this
#: lists without a bound of their own lose items while the free strings would get fewer characters than this (a few
#: whole items rather than many cut ones: a URL, a sentence)
WANTED_CHARS = 80
MAX_CHARS = 1000  # nor above this: llama.cpp refuses the grammar of a much longer bounded string
#: the longest JSON text of a number the grammar of llama.cpp's schema converter admits: ``-`` and 16 digits, a
#: fraction of 16 digits, an exponent of sign and 16 digits (integers: the first part)
_INTEGER_CHARS = 17
_NUMBER_CHARS = 17 + 17 + 18
_SPACE = 1  # llama.cpp's grammar allows one space after each value and punctuation (its SPACE_RULE: " "?)


class OpenSchemaError(ValueError):
    """An output field whose type admits any keys (``dict[str, Any]``) and carries no schema of its own."""


def limit(
    field: Any,
    *,
    max_items: int | None = None,
    max_items_from: str | None = None,
    max_chars: int | None = None,
    max_chars_from: str | None = None,
    keys_from: str | None = None,
) -> Any:
    """Bound an output field in the JSON schema sent to the model (the prompt and the parsing are unchanged).

    Args:
        field: a ``dspy.OutputField(...)``.
        max_items: the most items of a list field.
        max_items_from: the name of an integer input of the same signature that bounds the list at each call.
        max_chars: the longest text of a string field (of each string item, for a list of strings).
        max_chars_from: the name of an integer input that bounds the text at each call.
        keys_from: for a mapping field (``dict[str, V]``), the name of a list-of-strings input whose items are the
            mapping's keys at each call: the schema is a closed object with one required property per item, each a
            ``V`` (an opinion distribution over the question's options). Without that input the field stays open.

    Returns:
        The same field.
    """
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    bounds = (
        (_MAX_ITEMS, max_items),
        (_MAX_ITEMS_FROM, max_items_from),
        (_MAX_CHARS, max_chars),
        (_MAX_CHARS_FROM, max_chars_from),
        (_KEYS_FROM, keys_from),
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
        keyed = _keyed_schema(field, extra, inputs)
        if keyed is not None:
            schema = keyed
        elif SCHEMA_KEY in extra:
            schema = copy.deepcopy(extra[SCHEMA_KEY])
        else:
            schema = _field_schema(name, field)
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


def _keyed_schema(
    field: FieldInfo, extra: Mapping[str, Any], inputs: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """A mapping field's closed schema, its keys this call's items of the input named by ``keys_from`` (None: the
    field has no such bound, or this call does not give that input as a list of strings)."""
    source = extra.get(_KEYS_FROM)
    keys = inputs.get(source) if source is not None and inputs is not None else None
    if not isinstance(keys, list) or not keys or not all(isinstance(key, str) for key in keys):
        return None
    args = typing.get_args(field.annotation)
    value = TypeAdapter(args[1] if len(args) == 2 else str).json_schema()
    value = _inline(value, value.get("$defs", {}), ())
    if _is_open(value):
        return None
    properties = {key: copy.deepcopy(value) for key in dict.fromkeys(keys)}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


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
            schema[_DEFAULT_BOUND] = True
        yield from _strings(schema.get("items"), weight * max(1, int(schema["maxItems"])))
        return
    for sub in (schema.get("properties") or {}).values():
        yield from _strings(sub, weight)
    for key in ("anyOf", "oneOf"):
        for sub in schema.get(key, ()):
            yield from _strings(sub, weight)


def reply_chars(schema: Any) -> int:
    """The longest JSON text, in characters, that a model decoding under ``schema`` may write (llama.cpp's grammar of
    it: one optional space after each value and punctuation; a string's escapes count one character, as
    ``maxLength`` counts them). A free string without ``maxLength`` or an array without ``maxItems`` is unbounded:
    it counts :data:`MAX_CHARS` characters or :data:`DEFAULT_MAX_ITEMS` items.

    Example:
        >>> reply_chars({"type": "object", "properties": {"a": {"type": "string", "maxLength": 10}}})
        25
    """
    if not isinstance(schema, dict):
        return 0
    if "const" in schema:
        return len(json.dumps(schema["const"])) + _SPACE
    if "enum" in schema:
        return max((len(json.dumps(value)) for value in schema["enum"]), default=0) + _SPACE
    options = [*schema.get("anyOf", ()), *schema.get("oneOf", ())]
    if options:
        return max(reply_chars(option) for option in options)
    kind = schema.get("type")
    if isinstance(kind, list):
        return max(reply_chars({**schema, "type": one}) for one in kind)
    if kind == "string":
        return int(schema.get("maxLength", MAX_CHARS)) + 2 + _SPACE
    if kind == "integer":
        return _INTEGER_CHARS + _SPACE
    if kind == "number":
        return _NUMBER_CHARS + _SPACE
    if kind == "boolean":
        return len("false") + _SPACE
    if kind == "null":
        return len("null") + _SPACE
    if kind == "array":
        items = int(schema.get("maxItems", DEFAULT_MAX_ITEMS))
        return 2 * (1 + _SPACE) + items * (reply_chars(schema.get("items")) + 1 + _SPACE)  # [ ], items and commas
    props = schema.get("properties") or {}
    # { } and, per property: its quoted key, the colon, the value, the comma (each punctuation with its space)
    return 2 * (1 + _SPACE) + sum(len(json.dumps(key)) + _SPACE + 1 + _SPACE + reply_chars(sub) + 1 + _SPACE
                                  for key, sub in props.items())  # fmt: skip


def _arrays(schema: Any, depth: int = 0) -> Iterable[tuple[dict[str, Any], int]]:
    """Every array under ``schema`` with its depth."""
    if isinstance(schema, list):
        for item in schema:
            yield from _arrays(item, depth)
        return
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "array":
        yield schema, depth
    for key in ("items", "anyOf", "oneOf"):
        if key in schema:
            yield from _arrays(schema[key], depth + 1)
    for sub in (schema.get("properties") or {}).values():
        yield from _arrays(sub, depth + 1)


def _share_budget(root: dict[str, Any], fixed: set[str], max_tokens: int) -> None:
    """Bound every array and every free string left unbounded so that the whole reply fits ``max_tokens``
    (:func:`reply_chars` at :data:`CHARS_PER_TOKEN`): the free strings share what the structure and the bounded
    strings leave. While that gives a string fewer than :data:`WANTED_CHARS`, the lists without a bound of their own
    lose items; while it gives fewer than :data:`MIN_CHARS` (or, without free strings, the reply does not fit), any
    list does (a bound is a most, never a target). The longest list first, the innermost on a tie, down to one item.
    A schema that does not fit even so gets :data:`MIN_CHARS` a string (a field's own ``max_chars`` bounds stay)."""
    budget = max_tokens * CHARS_PER_TOKEN
    free = [
        node
        for name, schema in root["properties"].items()
        for node, _ in _strings(schema, 1)
        if name not in fixed and "maxLength" not in node
    ]
    for node in free:
        node["maxLength"] = 0  # the structure alone, first
    chars = 0
    for wanted, any_list in ((WANTED_CHARS, False), (MIN_CHARS, True)):
        while True:
            weights: dict[int, int] = {}
            for schema in root["properties"].values():
                for node, weight in _strings(schema, 1):
                    weights[id(node)] = weights.get(id(node), 0) + weight
            slots = sum(weights.get(id(node), 0) for node in free)
            spare = budget - reply_chars(root)
            chars = spare // slots if slots else spare
            if chars >= (wanted if slots else 0):
                break
            shorter = [
                (int(array["maxItems"]), depth, array)
                for array, depth in _arrays(root)
                if int(array.get("maxItems", 0)) > 1 and (any_list or array.get(_DEFAULT_BOUND))
            ]
            if not shorter:
                break
            array = max(shorter, key=lambda entry: entry[:2])[2]
            array["maxItems"] = int(array["maxItems"]) - 1
    for node in free:
        node["maxLength"] = max(MIN_CHARS, min(MAX_CHARS, chars))
    for array, _ in _arrays(root):
        array.pop(_DEFAULT_BOUND, None)
