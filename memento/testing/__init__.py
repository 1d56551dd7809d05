"""Offline LMs for tests, examples and benchmarks: a scripted DSPy engine and a local OpenAI-compatible server.

:class:`ScriptedEngine` answers any signature's output fields with schema-valid values read from the prompt
DSPy's adapters write (ChatAdapter ``[[ ## field ## ]]`` format, JSON when the JSON adapter asks). Values come
from, in order: the first matching :meth:`ScriptedEngine.when` rule, a per-field override, a type default.
Every call is recorded.

:class:`OpenAICompatServer` serves a ScriptedEngine over ``POST /v1/chat/completions`` on 127.0.0.1 (random
port) and counts requests, so integration tests drive the real ``openai/<model>`` + ``api_base`` path.

Fakes of the web for the same tests: :class:`LocalSite` (a web site on 127.0.0.1 whose routes a subclass writes),
:class:`EchoSearchBackend` (a search backend answering every query with two results naming it) and
:func:`build_corpus` (an offline corpus from a few documents). :func:`react_steps_done`, :func:`is_react_step`,
:func:`script_search_then_scrape` and :func:`script_search_read_finish` script a ReAct agent's tool steps.

Example:
    >>> import dspy
    >>> from memento.testing import ScriptedEngine
    >>> engine = ScriptedEngine(overrides={"answer": "Paris"})
    >>> lm = dspy.LM("scripted/test", engine=engine, cache=False)
    >>> dspy.Predict("question -> answer")(question="Capital of France?", lm=lm).answer
    'Paris'
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = [
    "EchoSearchBackend",
    "FieldSpec",
    "LocalSite",
    "LookupEmbedder",
    "OpenAICompatServer",
    "RayNodes",
    "ScriptedCall",
    "ScriptedEngine",
    "build_corpus",
    "is_react_step",
    "judge_reach",
    "load_rule_pairs",
    "react_steps_done",
    "script_search_read_finish",
    "script_search_then_scrape",
    "scripted_lm",
    "respond",
    "schema_problem",
    "seq",
]

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


class OpenAICompatServer:
    """A small OpenAI-compatible chat server on 127.0.0.1 answering from a :class:`ScriptedEngine`.

    Example:
        >>> with OpenAICompatServer() as server:  # doctest: +SKIP
        ...     lm = dspy.LM("openai/x", api_base=server.api_base, api_key="k", cache=False)
    """

    def __init__(
        self,
        engine: ScriptedEngine | None = None,
        *,
        status_sequence: list[int] | None = None,
        known_models: set[str] | None = None,
        echo_key_status: int | None = None,
        latency: float = 0.0,
        always_status: int | None = None,
        require_schema: bool = False,
        openapi: dict[str, Any] | None = None,
        hang_after: int | None = None,
        echo_key_in_completion: bool = False,
    ) -> None:
        self.engine = engine or ScriptedEngine()
        # refuse (HTTP 400) a chat request whose response_format is not the JSON schema of the signature the prompt
        # states (its output fields), in either form: OpenAI's json_schema, or json_object + schema
        self.require_schema = require_schema
        self.refused: list[str] = []  # why each refused request was refused
        self.openapi = openapi  # served at GET /openapi.json (a server describing the request bodies it takes)
        # every completion repeats the credential of its request (a bearer key, or a Basic password), in its last field
        self.echo_key_in_completion = echo_key_in_completion
        # a provider that stops answering: chat requests after the first ``hang_after`` are read, counted and never
        # answered (until the server stops)
        self.hang_after = hang_after
        self._stopping = threading.Event()
        # a careless provider: every chat request fails with this status and an error that quotes the API key
        self.echo_key_status = echo_key_status
        self.latency = latency  # seconds each chat request takes (a slow server)
        self.always_status = always_status  # answer every chat request with this HTTP status (a broken server)
        self.in_flight = 0  # chat requests being served now
        self.max_in_flight = 0  # the most chat requests served at once
        self.known_models = known_models  # None: any model name is served
        self.requests: list[dict[str, Any]] = []
        # the server's log of answered chat requests: (started, ended, prompt text), monotonic seconds
        self.timeline: list[tuple[float, float, str]] = []
        self.chat_requests = 0
        self._lock = threading.Lock()
        self._status_sequence = list(status_sequence or [])
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> OpenAICompatServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                if self.path == "/openapi.json" and outer.openapi is not None:
                    self._send(200, outer.openapi)
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "x", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "invalid JSON"}})
                    return
                with outer._lock:
                    outer.requests.append(
                        {"path": self.path, "body": body, "authorization": self.headers.get("Authorization")}
                    )
                    forced = outer._status_sequence.pop(0) if outer._status_sequence else None
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"unknown path {self.path}"}})
                    return
                if outer.echo_key_status is not None:
                    key = _credential(self.headers.get("Authorization", "")).strip()
                    message = f"Incorrect API key provided: {key}. You can find your API key in your account."
                    self._send(outer.echo_key_status, {"error": {"message": message, "code": "invalid_api_key"}})
                    return
                model = str(body.get("model", ""))
                if outer.known_models is not None and model not in outer.known_models:
                    self._send(
                        404,
                        {"error": {"message": f"The model `{model}` does not exist", "code": "model_not_found"}},
                    )
                    return
                if forced is None and outer.always_status is not None:
                    forced = outer.always_status
                if forced is not None and forced != 200:
                    self._send(forced, {"error": {"message": f"forced status {forced}", "type": "server_error"}})
                    return
                problem = schema_problem(body) if outer.require_schema else None
                if problem is not None:
                    with outer._lock:
                        outer.refused.append(problem)
                    self._send(400, {"error": {"message": problem, "type": "invalid_request_error"}})
                    return
                with outer._lock:
                    outer.chat_requests += 1
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                    hang = outer.hang_after is not None and outer.chat_requests > outer.hang_after
                if hang:
                    outer._stopping.wait()
                    with outer._lock:
                        outer.in_flight -= 1
                    self.close_connection = True
                    return
                started = time.monotonic()
                try:
                    payload = self._answer(body)
                finally:  # counted in flight until answered, not until the client has read the answer
                    prompt = "\n".join(_content_text(m.get("content")) for m in body.get("messages", []))
                    with outer._lock:
                        outer.in_flight -= 1
                        outer.timeline.append((started, time.monotonic(), prompt))
                self._send(200, payload)

            def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
                if outer.latency:
                    time.sleep(outer.latency)
                messages = [
                    {"role": m.get("role", "user"), "content": _content_text(m.get("content"))}
                    for m in body.get("messages", [])
                ]
                text = outer.engine.reply("", messages, response_format=body.get("response_format"))
                if outer.echo_key_in_completion:  # a careless model: it repeats the credential it was sent
                    text = _echoed(text, _credential(self.headers.get("Authorization", "")))
                prompt_tokens = sum(len(m["content"]) for m in messages) // 4 + 1
                completion_tokens = len(text) // 4 + 1
                return {
                    "id": f"chatcmpl-{len(outer.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "x"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    },
                }

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # hung requests end (unanswered)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OpenAICompatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def schema_problem(body: dict[str, Any]) -> str | None:
    """Why a chat request body does not carry its signature's JSON schema as ``response_format`` (``None``: it does).

    The signature's output fields are read from the system message DSPy's adapters write ("Your output fields
    are: ..."); the schema must be an object whose properties are exactly those fields, in OpenAI's form
    (``{"type": "json_schema", "json_schema": {"schema": ...}}``) or llama-cpp-python's (``{"type": "json_object",
    "schema": ...}``).
    """
    messages = body.get("messages") or []
    system = next((_content_text(m.get("content")) for m in messages if m.get("role") == "system"), "")
    fields = [spec.name for spec in _parse_fields(system, "Your output fields are:")]
    if not fields:
        return "no signature in the prompt (no 'Your output fields are:' section)"
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return f"no response_format (the signature's outputs are {fields})"
    schema = fmt.get("schema") if fmt.get("type") == "json_object" else (fmt.get("json_schema") or {}).get("schema")
    if not isinstance(schema, dict):
        return f"response_format {fmt.get('type')!r} carries no JSON schema"
    props = sorted((schema.get("properties") or {}).keys())
    if schema.get("type") != "object" or props != sorted(fields):
        return f"the schema's properties {props} are not the signature's outputs {sorted(fields)}"
    return None


def _echoed(text: str, credential: str) -> str:
    """A reply with ``credential`` repeated in its last field: the last string of a JSON object, or the text before
    the ChatAdapter's end marker; the reply still parses."""
    echoed = f" (sent with credential {credential})"
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        last = next((key for key in reversed(list(data)) if isinstance(data[key], str)), None)
        if last is not None:
            data[last] += echoed
            return json.dumps(data)
    marker = "\n\n[[ ## completed ## ]]"
    return text.replace(marker, echoed + marker) if marker in text else text + echoed


def _credential(authorization: str) -> str:
    """The secret of an ``Authorization`` header: a bearer key, or the password of Basic credentials."""
    import base64

    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "basic":
        try:
            return base64.b64decode(value).decode("utf-8").partition(":")[2]
        except ValueError:
            return value
    return value


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


# -- ReAct steps -------------------------------------------------------------------------------------------------


def react_steps_done(call: ScriptedCall) -> int:
    """How many tool observations a ReAct call's trajectory holds (the adapter renders them as input fields)."""
    return sum(1 for key in call.inputs if key.startswith("observation_"))


def is_react_step(call: ScriptedCall, n: int | None = None) -> bool:
    """A ReAct tool-step call (optionally: the ``n``-th step of its agent, counted from 0)."""
    return "next_tool_name" in call.output_fields and (n is None or react_steps_done(call) == n)


def script_search_then_scrape(engine: ScriptedEngine, url: str) -> None:
    """Script every ReAct agent to search the web for its question, then scrape ``url`` (later steps: unscripted)."""
    engine.when(
        predicate=lambda c: is_react_step(c, 0),
        next_tool_name="search_web",
        next_tool_args=lambda c: {"query": c.inputs["question"]},
    )
    engine.when(predicate=lambda c: is_react_step(c, 1), next_tool_name="scrape", next_tool_args={"url": url})


_CORPUS_URL = re.compile(r"corpus://[\w-]+")


def script_search_read_finish(engine: ScriptedEngine, query: Callable[[ScriptedCall], str]) -> None:
    """Script every ReAct agent to search ``query(call)``, read the first offline-corpus result (``corpus://...``)
    when there is one, then finish; the rule takes precedence only over rules added after it.

    Example:
        >>> engine = ScriptedEngine()
        >>> script_search_read_finish(engine, lambda c: c.inputs.get("question", ""))
    """

    def step(call: ScriptedCall) -> str:
        if "observation_0" not in call.inputs:
            return "search_web"
        if "observation_1" not in call.inputs and _CORPUS_URL.search(call.inputs["observation_0"]):
            return "scrape"
        return "finish"

    def args(call: ScriptedCall) -> dict[str, Any]:
        name = step(call)
        if name == "search_web":
            return {"query": query(call)}
        match = _CORPUS_URL.search(call.inputs.get("observation_0", "")) if name == "scrape" else None
        return {"url": match.group(0)} if match else {}

    engine.when(predicate=is_react_step, next_tool_name=step, next_tool_args=args, next_thought="look it up")


# -- the web -----------------------------------------------------------------------------------------------------


def build_corpus(docs: list[dict[str, Any]], directory: Any) -> Any:
    """An :class:`~memento.web.offline_corpus.OfflineCorpus` of ``docs`` (written to ``directory/docs.jsonl``,
    indexed in ``directory/index``)."""
    from pathlib import Path

    from memento.web.offline_corpus import OfflineCorpus

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    src = directory / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d) for d in docs), encoding="utf-8")
    return OfflineCorpus.build([src], directory / "index")


class EchoSearchBackend:
    """A search backend answering every query with two results naming it; records the queries (thread-safe).

    Example:
        >>> [r.url for r in EchoSearchBackend().search("dune author")]
        ['https://ex.org/dune-author/a', 'https://ex.org/dune-author/b']
    """

    def __init__(self) -> None:
        self.queries: list[str] = []
        self._lock = threading.Lock()

    def search(self, query: str, k: int = 10, before: Any = None, undated: str = "keep") -> list[Any]:
        from memento.web.search_result import SearchResult

        with self._lock:
            self.queries.append(query)
        slug = "-".join(query.lower().split())[:40]
        return [
            SearchResult(url=f"https://ex.org/{slug}/a", title=f"A about {query}", snippet=f"fact about {query}"),
            SearchResult(url=f"https://ex.org/{slug}/b", title=f"B about {query}", snippet="less relevant"),
        ]


def respond(
    h: BaseHTTPRequestHandler, status: int, body: bytes = b"", ctype: str = "text/html; charset=utf-8", **headers: str
) -> None:
    """Answer a request with ``body`` (``Retry_After="7"`` sends the header ``Retry-After: 7``)."""
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(body)))
    for key, value in headers.items():
        h.send_header(key.replace("_", "-"), value)
    h.end_headers()
    h.wfile.write(body)


class LocalSite:
    """A web site on 127.0.0.1 (random port) for fetcher tests; subclasses answer GET requests in :meth:`route`.

    Every request path is recorded in ``paths`` (under ``lock``). The base site answers 404 to everything.

    Example:
        >>> import urllib.request
        >>> with LocalSite() as site:
        ...     try:
        ...         urllib.request.urlopen(site.base + "/x")
        ...     except Exception as exc:
        ...         print(exc.code, site.paths)
        404 ['/x']
    """

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def do_GET(self) -> None:  # noqa: N802
                with site.lock:
                    site.paths.append(self.path)
                site.route(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def route(self, h: BaseHTTPRequestHandler) -> None:
        """Answer one GET request (``h.path``); see :func:`respond`."""
        respond(h, 404, b"nope", "text/plain")

    def hits(self, prefix: str) -> int:
        """Requests so far whose path starts with ``prefix``."""
        with self.lock:
            return sum(1 for p in self.paths if p.startswith(prefix))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> LocalSite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LookupEmbedder:
    """An embedder over a fixed table: each known text maps to its vector (synthetic worlds of tests and benchmarks).

    Example:
        >>> import numpy as np
        >>> emb = LookupEmbedder(2)
        >>> emb.table["a"] = np.array([1.0, 0.0])
        >>> emb.embed(["a"]).tolist(), emb.name
        ([[1.0, 0.0]], 'lookup-2')
    """

    def __init__(self, dim: int, name: str = "lookup") -> None:
        self.dim = dim
        self.name = f"{name}-{dim}"
        self.table: dict[str, Any] = {}

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        return np.stack([self.table[t] for t in texts]).astype(np.float32)


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _ray_bin() -> str:
    found = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    assert found, "the ray command is not installed"
    return found


class RayNodes:
    """A Ray cluster of two nodes on this machine for tests and benches: a head and a second node, each a
    ``ray start --block`` process of its own on a loopback address (Ray replaces 127.0.0.1 by the host's address
    when a cluster may have several nodes), usage statistics off, no dashboard, a small object store, a short temp
    directory, a token of its own; stopped by signalling both processes.

    Example:
        >>> with RayNodes(tmp_path) as cluster:  # doctest: +SKIP
        ...     subprocess.run([..., "--executor", "ray", "--ray-address", cluster.address], env=cluster.env)
    """

    ADDRESSES = ("127.0.0.2", "127.0.0.3")

    def __init__(self, base: Path, *, cpus: int = 4) -> None:
        self.cpus = cpus
        self.token = secrets.token_hex(16)
        self.port = _free_port(self.ADDRESSES[0])
        self.address = f"{self.ADDRESSES[0]}:{self.port}"
        self.temp = tempfile.mkdtemp(prefix="mr2", dir="/tmp")  # socket paths must stay short
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMENTO_", "RAY_"))}
        self.env.update(
            RAY_USAGE_STATS_ENABLED="0",
            RAY_AUTH_MODE="token",
            RAY_AUTH_TOKEN=self.token,
            DSPY_CACHEDIR=str(base / "dspy-cache"),
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            HF_HUB_OFFLINE="1",
        )
        self.procs: list[Any] = []

    def _start(self, *args: str) -> None:
        common = [f"--num-cpus={self.cpus}", "--object-store-memory=80000000", "--disable-usage-stats", "--block"]
        proc = subprocess.Popen(
            [_ray_bin(), "start", *args, *common],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs.append(proc)

    def alive_nodes(self) -> int:
        probe = (
            f"import ray; ray.init(address={self.address!r}, _node_ip_address={self.ADDRESSES[0]!r}, "
            "log_to_driver=False); print(sum(1 for n in ray.nodes() if n['Alive']))"
        )
        done = subprocess.run([sys.executable, "-c", probe], env=self.env, capture_output=True, text=True, timeout=120)
        return int(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() else 0

    def __enter__(self) -> RayNodes:
        head = self.ADDRESSES[0]
        self._start("--head", f"--node-ip-address={head}", f"--port={self.port}", "--include-dashboard=false",
                    f"--temp-dir={self.temp}")  # fmt: skip
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex((head, self.port)) == 0:
                    break
            time.sleep(0.5)
        self._start(f"--address={self.address}", f"--node-ip-address={self.ADDRESSES[1]}")
        while time.monotonic() < deadline and self.alive_nodes() < 2:
            time.sleep(1)
        assert self.alive_nodes() == 2, "the second node did not join"
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        shutil.rmtree(self.temp, ignore_errors=True)


# -- canonicalisation: which stored rules reach the merge judge (tests/data/rule_pairs.jsonl) ------------------------
def load_rule_pairs(path: Any) -> list[dict[str, Any]]:
    """The labelled rule pairs of ``path`` (JSONL: ``id``, ``label`` paraphrase | contradiction | unrelated,
    ``store`` craft | decomposition | web_action, ``stored``, ``new``)."""
    from pathlib import Path

    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        if row.get("label") not in ("paraphrase", "contradiction", "unrelated") or not row.get("stored"):
            raise ValueError(f"{path}: malformed rule pair {row.get('id')!r}")
    return rows


def judge_reach(
    pairs: list[dict[str, Any]], *, embedder: Any, threshold: float | None = None, canonicalizer: Any = None
) -> dict[str, Any]:
    """Which labelled pairs reach the canonicaliser's merge judge.

    Every distinct ``stored`` text is stored in its store of one memory (the background each new rule is compared
    with); each pair's ``new`` text is then planned as a candidate with a merge stage that records what it is asked
    and answers ``distinct``. A pair *reaches the judge* when its stored text is among the items judged against its
    new one. Returns ``{"rates": {label: share}, "reached": {label: [ids]}, "missed": {label: [ids]},
    "calls": [judge calls per new rule], "threshold": the canonicaliser's threshold}``. ``canonicalizer``: the
    class to measure (default :class:`~memento.memory.canonicalizer.Canonicalizer`; a bench passes a variant).
    """
    import tempfile

    from memento.memory.canonicalizer import Candidate, Canonicalizer
    from memento.memory.craft_knowledge import CraftKnowledge
    from memento.memory.rule_book import RuleBook
    from memento.memory.sqlite_store import SQLiteStore

    with tempfile.TemporaryDirectory() as directory:
        db = SQLiteStore(directory)
        try:
            seen: set[tuple[str, str]] = set()
            for row in pairs:
                key = (row["store"], row["stored"])
                if key in seen:
                    continue
                seen.add(key)
                if row["store"] == "craft":
                    CraftKnowledge(db).add(row["stored"])
                else:
                    RuleBook(db, row["store"]).add(row["stored"], support=1)
            asked: list[str] = []

            def merge(kind: str, stored: str, candidate: str) -> tuple[str, str]:
                asked.append(stored)
                return "distinct", ""

            canon = (canonicalizer or Canonicalizer)(db, embedder=embedder, merge=merge, threshold=threshold)
            reached: dict[str, list[str]] = {"paraphrase": [], "contradiction": [], "unrelated": []}
            missed: dict[str, list[str]] = {"paraphrase": [], "contradiction": [], "unrelated": []}
            calls: list[int] = []
            for row in pairs:
                asked.clear()
                canon.plan(row["store"], [Candidate(text=row["new"])])
                calls.append(len(asked))
                (reached if row["stored"] in asked else missed)[row["label"]].append(row["id"])
        finally:
            db.close()
    rates = {label: len(reached[label]) / max(1, len(reached[label]) + len(missed[label])) for label in reached}
    return {"rates": rates, "reached": reached, "missed": missed, "calls": calls, "threshold": canon.threshold}
