"""A scripted DSPy engine: answers any signature's output fields with schema-valid values read from the prompt DSPy's
adapters write (ChatAdapter ``[[ ## field ## ]]`` format, JSON when the JSON adapter asks), from the first matching
:meth:`ScriptedEngine.when` rule, a per-field override or a type default; every call is recorded.

Example:
    >>> import dspy
    >>> from memento.testing.scripted_engine import ScriptedEngine
    >>> engine = ScriptedEngine(overrides={"answer": "Paris"})
    >>> lm = dspy.LM("scripted/test", engine=engine, cache=False)
    >>> dspy.Predict("question -> answer")(question="Capital of France?", lm=lm).answer
    'Paris'
"""

from __future__ import annotations

import ast
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FieldSpec", "ScriptedCall", "ScriptedEngine", "seq", "scripted_lm"]


_FIELD_LINE = re.compile(r"^\s*\d+\.\s+`(?P<name>\w+)`\s+\((?P<type>.*?)\):?(?P<desc>.*)$")


_MARKER = re.compile(r"\[\[ ## (\w+) ## \]\]")


_SCHEMA = re.compile(r"must adhere to the JSON schema: (\{.*\})\s*$")


@dataclass
class FieldSpec:
    """An output field as the prompt describes it."""

    name: str
    type: str
    schema: dict[str, Any] | None = None


@dataclass
class ScriptedCall:
    """One recorded call: the prompt as sent and the values answered."""

    index: int
    system: str
    messages: list[dict[str, str]]
    instructions: str
    inputs: dict[str, str]
    output_fields: list[str]
    outputs: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    response_format: dict[str, Any] | None = None  # as the request carried it (None: not sent)

    @property
    def prompt(self) -> str:
        """The whole prompt text (system and messages), for assertions."""
        return self.system + "\n" + "\n".join(m.get("content", "") for m in self.messages)


def _parse_fields(system: str, header: str) -> list[FieldSpec]:
    specs: list[FieldSpec] = []
    lines = system.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip().startswith(header))
    except StopIteration:
        return specs
    for line in lines[start + 1 :]:
        if line.strip().startswith(("Your ", "All interactions")):
            break
        match = _FIELD_LINE.match(line)
        if match:
            specs.append(FieldSpec(match["name"], match["type"].strip()))
    return specs


def _json_structure(system: str) -> dict[str, str]:
    """The JSON adapter's output structure (``{"field": "{field}  # note: ... JSON schema: {...}"}``) by field."""
    head, found, rest = system.partition("Outputs will be a JSON object with the following fields.")
    if not found:
        return {}
    block = rest.split("\nIn adhering to this structure", 1)[0].strip()
    try:
        data = json.loads(block)
    except json.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _parse_schemas(system: str, specs: list[FieldSpec]) -> None:
    """Attach the JSON schemas the structure section states for complex fields (either adapter's layout)."""
    sections = _MARKER.split(system)
    # sections: [before, name1, body1, name2, body2, ...]
    bodies = {sections[i]: sections[i + 1] for i in range(1, len(sections) - 1, 2)}
    bodies.update(_json_structure(system))
    for spec in specs:
        body = bodies.get(spec.name, "")
        match = _SCHEMA.search(body.strip().splitlines()[-1] if body.strip() else "")
        if match:
            try:
                spec.schema = json.loads(match.group(1))
            except json.JSONDecodeError:
                spec.schema = None


def _parse_inputs(text: str) -> dict[str, str]:
    parts = _MARKER.split(text)
    values: dict[str, str] = {}
    for i in range(1, len(parts) - 1, 2):
        body = parts[i + 1]
        # the adapter appends its response instructions after the last input field
        body = re.split(r"\n\nRespond with (?:the corresponding output fields|a JSON object)", body, maxsplit=1)[0]
        values[parts[i]] = body.strip()
    return values


def _from_schema(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return _from_schema(defs.get(schema["$ref"].split("/")[-1], {}), defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return _from_schema(options[0], defs)
    kind = schema.get("type")
    if kind == "object":
        return {name: _from_schema(sub, defs) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [_from_schema(schema.get("items", {"type": "string"}), defs)]
    if kind == "integer":
        return 1
    if kind == "number":
        return 0.5
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "scripted"


def _default_for(spec: FieldSpec) -> Any:
    type_text = spec.type
    if spec.schema is not None:
        return _from_schema(spec.schema)
    if type_text.startswith("Literal["):
        try:
            options = ast.literal_eval("[" + type_text[len("Literal[") : -1] + "]")
        except (SyntaxError, ValueError):
            options = ["scripted"]
        return "finish" if "finish" in options else options[0]
    lowered = type_text.lower()
    if lowered == "bool":
        return True
    if lowered == "int":
        return 1
    if lowered == "float":
        return 0.5
    if lowered.startswith(("list", "tuple", "set")):
        return []
    if lowered.startswith("dict"):
        return {}
    return f"scripted {spec.name}"


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    return json.dumps(value)


@dataclass
class _Rule:
    contains: str | None
    predicate: Callable[[ScriptedCall], bool] | None
    values: dict[str, Any]
    raw: str | Callable[[ScriptedCall], str] | None
    times: int | None
    used: int = 0


class ScriptedEngine:
    """A DSPy engine that answers from a script instead of a model.

    Args:
        overrides: per-field values. A value may be a constant, :func:`seq` values (answered in turn, the last
            repeated), or a callable ``f(call: ScriptedCall) -> value``.
        delay: seconds to sleep per call (benchmarks of parallelism).
        tokens_per_char: token estimate reported as usage (deterministic).

    Rules added with :meth:`when` take precedence over overrides; ``raw=`` replies with unparseable text.
    """

    def __init__(
        self,
        overrides: dict[str, Any] | None = None,
        *,
        delay: float = 0.0,
        tokens_per_char: float = 0.25,
    ) -> None:
        self.overrides: dict[str, Any] = dict(overrides or {})
        self.delay = delay
        self.tokens_per_char = tokens_per_char
        self.calls: list[ScriptedCall] = []
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        self._counters: dict[str, Iterator[int]] = {}

    # -- scripting ----------------------------------------------------------------------------------------
    def when(
        self,
        contains: str | None = None,
        *,
        predicate: Callable[[ScriptedCall], bool] | None = None,
        raw: str | Callable[[ScriptedCall], str] | None = None,
        times: int | None = None,
        **values: Any,
    ) -> ScriptedEngine:
        """Answer calls whose prompt contains ``contains`` (and/or satisfies ``predicate``) with ``values``.

        ``times`` limits how often the rule fires; ``raw`` replies with that text verbatim (e.g. garbage).
        Returns the engine, so rules chain.
        """
        self._rules.append(_Rule(contains, predicate, values, raw, times))
        return self

    def calls_matching(self, contains: str) -> list[ScriptedCall]:
        """Recorded calls whose prompt contains the text."""
        return [c for c in self.calls if contains in c.prompt]

    # -- engine protocol ----------------------------------------------------------------------------------
    def complete(self, request: Any) -> Any:
        from dspy.lm15 import Message, Response, TextPart, Usage

        system = ""
        if request.system is not None:
            system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
        messages = [{"role": m.role, "content": m.text or ""} for m in request.messages]
        config = request.config
        fmt = config.response_format or (config.extensions or {}).get("response_format")
        text = self.reply(system, messages, response_format=dict(fmt) if fmt else None)
        prompt_chars = len(system) + sum(len(m["content"]) for m in messages)
        prompt_tokens = max(1, int(prompt_chars * self.tokens_per_char))
        completion_tokens = max(1, int(len(text) * self.tokens_per_char))
        usage = Usage(
            input_tokens=prompt_tokens, output_tokens=completion_tokens, total_tokens=prompt_tokens + completion_tokens
        )
        return Response(
            id=None, model="scripted", message=Message.assistant([TextPart(text)]), finish_reason="stop", usage=usage
        )

    def stream(self, request: Any) -> Any:
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        return None

    # -- core ---------------------------------------------------------------------------------------------
    def reply(
        self, system: str, messages: list[dict[str, str]], *, response_format: dict[str, Any] | None = None
    ) -> str:
        """The reply text for a prompt (used by the engine and by :class:`OpenAICompatServer`)."""
        if self.delay:
            time.sleep(self.delay)
        if not system and messages and messages[0].get("role") == "system":
            system, messages = messages[0]["content"], messages[1:]
        specs = _parse_fields(system, "Your output fields are:")
        _parse_schemas(system, specs)
        last_user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        instructions = system.split("your objective is:", 1)[-1].strip() if "your objective is:" in system else ""
        with self._lock:
            call = ScriptedCall(
                index=len(self.calls),
                system=system,
                messages=messages,
                instructions=instructions,
                inputs=_parse_inputs(last_user),
                output_fields=[s.name for s in specs],
                response_format=response_format,
            )
            self.calls.append(call)
            rule = self._match(call)
        if rule is not None and rule.raw is not None:
            call.text = rule.raw(call) if callable(rule.raw) else rule.raw
            return call.text
        for spec in specs:
            call.outputs[spec.name] = self._value(spec, call, rule)
        json_mode = "[[ ## completed ## ]]" not in system and "json" in system.lower()
        if json_mode:
            call.text = json.dumps(
                {k: json.loads(_render(v)) if not isinstance(v, str) else v for k, v in call.outputs.items()}
            )
        else:
            chunks = [f"[[ ## {name} ## ]]\n{_render(value)}" for name, value in call.outputs.items()]
            call.text = "\n\n".join([*chunks, "[[ ## completed ## ]]"])
        return call.text

    def _match(self, call: ScriptedCall) -> _Rule | None:
        prompt = call.prompt
        for rule in self._rules:
            if rule.times is not None and rule.used >= rule.times:
                continue
            if rule.contains is not None and rule.contains not in prompt:
                continue
            if rule.predicate is not None and not rule.predicate(call):
                continue
            rule.used += 1
            return rule
        return None

    def _value(self, spec: FieldSpec, call: ScriptedCall, rule: _Rule | None) -> Any:
        source: Any
        if rule is not None and spec.name in rule.values:
            source = rule.values[spec.name]
            key = f"rule{id(rule)}:{spec.name}"
        elif spec.name in self.overrides:
            source = self.overrides[spec.name]
            key = f"override:{spec.name}"
        else:
            return _default_for(spec)
        if callable(source):
            return source(call)
        if isinstance(source, _Seq):
            with self._lock:
                counter = self._counters.setdefault(key, itertools.count())
                i = next(counter)
            return source.items[min(i, len(source.items) - 1)]
        return source


class _Seq:
    def __init__(self, items: list[Any]) -> None:
        if not items:
            raise ValueError("a sequence needs at least one value")
        self.items = items


def seq(*items: Any) -> _Seq:
    """Values answered in turn for a field (the last one repeats): ``overrides={"answer": seq("a", "b")}``."""
    return _Seq(list(items))


def scripted_lm(engine: ScriptedEngine | None = None, model: str = "scripted/test", **kwargs: Any) -> Any:
    """A ``dspy.LM`` backed by a ScriptedEngine (cache off)."""
    import dspy

    return dspy.LM(model, engine=engine or ScriptedEngine(), cache=False, **kwargs)
