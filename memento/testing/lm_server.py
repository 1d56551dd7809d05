"""A local OpenAI-compatible server for tests: a :class:`~memento.testing.scripted_engine.ScriptedEngine` served over
``POST /v1/chat/completions`` on 127.0.0.1 (random port), its requests counted and checked (a response_format's
schema), so integration tests drive the real ``openai/<model>`` + ``api_base`` path.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memento.testing.scripted_engine import ScriptedEngine, _parse_fields

__all__ = ["OpenAICompatServer", "schema_problem"]


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
