"""Structured outputs for every LM role: DSPy's JSON adapter, with the signature's JSON schema sent where it helps.

Each role has a ``structured_outputs`` setting (``[lm] structured_outputs``, ``--structured-outputs``):

- ``auto`` (default): the JSON adapter; the signature's JSON schema is sent as ``response_format`` to any model
  behind an ``api_base`` and to local models (``local/...``, Ollama, vLLM, LM Studio, llamafile), which DSPy never
  sends one to; any other provider gets what DSPy decides from its own capability table.
- ``schema``: the JSON adapter and the schema, whatever the provider says.
- ``json``: the JSON adapter and ``{"type": "json_object"}`` (JSON mode, no schema).
- ``off``: DSPy's ChatAdapter (``[[ ## field ## ]]`` sections), no ``response_format``.

The schema (:func:`memento.llm.output_schema.output_schema`) is strict and bounded (``maxItems``/``maxLength``) so that
constrained decoding closes the JSON before ``max_tokens``. A reply that still fails to parse is asked for once
more with the parse error shown to the model; a second failure raises ``AdapterParseError`` (the stage records it).

Servers differ in how they take a schema. The OpenAI form (``{"type": "json_schema", "json_schema": {...}}``) is
sent unless the server's own OpenAPI description (``/openapi.json``, read once per endpoint on this machine or a
private network) shows it only takes ``{"type": "json_object", "schema": {...}}`` (llama-cpp-python's server).

Example:
    >>> import dspy
    >>> from memento.llm.structured_adapter import StructuredAdapter
    >>> dspy.configure(adapter=StructuredAdapter())  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any, Literal
from urllib.parse import urlsplit

import dspy
from dspy.adapters.chat_adapter import ChatAdapter
from dspy.adapters.json_adapter import JSONAdapter
from dspy.clients.capabilities import with_capability_planning
from dspy.utils.exceptions import AdapterParseError

from memento.llm.api_base import is_local
from memento.llm.output_schema import OpenSchemaError, output_schema
from memento.records.usage import GENERIC_SIGNATURE, current_predictor
from memento.utils.text import error_line

__all__ = ["STRUCTURED_MODES", "StructuredAdapter", "StructuredMode", "is_self_hosted", "structured_mode"]

logger = logging.getLogger(__name__)

StructuredMode = Literal["auto", "schema", "json", "off"]
STRUCTURED_MODES: tuple[str, ...] = ("auto", "schema", "json", "off")

#: providers that serve a model on the user's own machine or network: ``auto`` sends them the schema
SELF_HOSTED_PROVIDERS = frozenset(
    {"local", "ollama", "ollama_chat", "hosted_vllm", "vllm", "lm_studio", "llamafile", "openai_like", "sglang"}
)
_FEEDBACK_CHARS = 1500  # of the unparseable reply shown back to the model

_dialects: dict[str, str] = {}
_dialect_lock = threading.Lock()


def structured_mode(lm: Any) -> str:
    """A role's ``structured_outputs`` setting (``auto`` for an LM built outside :func:`memento.configure`)."""
    mode = getattr(lm, "structured_outputs", None)
    return mode if mode in STRUCTURED_MODES else "auto"


def is_self_hosted(lm: Any) -> bool:
    """Whether an LM is served behind an ``api_base`` or by a local provider (``local/...``, ``ollama_chat/...``)."""
    kwargs = getattr(lm, "kwargs", None) or {}
    if kwargs.get("api_base") or kwargs.get("base_url"):
        return True
    model = str(getattr(lm, "model", "") or "")
    return model.split("/", 1)[0] in SELF_HOSTED_PROVIDERS if "/" in model else model == "local"


class _TypedOutputs:
    """A text field whose JSON value is an object or a list fails to parse (DSPy would keep the object's ``repr`` as
    the text: a final answer printed as a dict of invented keys); text is stripped, as the ChatAdapter gives it; the
    other fields are typed by DSPy's parse."""

    def parse(self, signature: type[dspy.Signature], completion: str) -> dict[str, Any]:
        fields: dict[str, Any] = super().parse(signature, completion)  # type: ignore[misc]
        if not isinstance(self, JSONAdapter):
            return fields
        raw = _json_object(completion)
        for name, field in signature.output_fields.items():
            if field.annotation is str and isinstance(raw.get(name), dict | list):
                raise AdapterParseError(
                    adapter_name=type(self).__name__,
                    signature=signature,
                    lm_response=completion,
                    message=f"field {name} must be text, not a JSON {type(raw[name]).__name__}",
                )
            if field.annotation is str and isinstance(fields.get(name), str):
                fields[name] = fields[name].strip()  # as the ChatAdapter gives text
        return fields


def _json_object(completion: str) -> dict[str, Any]:
    """The reply's JSON object as DSPy's JSON adapter reads it (``{}`` when there is none)."""
    import json_repair

    data = json_repair.loads(completion)
    if not isinstance(data, dict) and "{" in completion:
        data = json_repair.loads(completion[completion.find("{") : completion.rfind("}") + 1])
    return data if isinstance(data, dict) else {}


class _ChatAdapter(_TypedOutputs, ChatAdapter):
    """DSPy's ChatAdapter (the ``off`` mode), its outputs typed, its JSON fallback typed too."""

    def _make_json_adapter_fallback(self) -> JSONAdapter:
        return _JSONFallback(use_native_function_calling=self.use_native_function_calling)


class _JSONFallback(_TypedOutputs, JSONAdapter):
    """The JSON adapter the ChatAdapter falls back to, with typed outputs."""


class StructuredAdapter(_TypedOutputs, JSONAdapter):
    """DSPy's JSON adapter with memento's choice of ``response_format`` per role and one retry on a parse error.

    A role set to ``off`` is served by a ChatAdapter, as DSPy does by default. See the module docstring.

    Example:
        >>> import dspy
        >>> from memento.testing import scripted_lm
        >>> with dspy.context(adapter=StructuredAdapter(), lm=scripted_lm()):
        ...     dspy.Predict("question -> answer")(question="?").answer
        'scripted answer'
    """

    def __init__(self) -> None:
        super().__init__()
        self._chat = _ChatAdapter()

    @with_capability_planning
    def __call__(
        self,
        lm: Any,
        lm_kwargs: dict[str, Any],
        signature: type[dspy.Signature],
        demos: list[dict[str, Any]],
        inputs: dict[str, Any],
    ) -> list[dict[str, Any]]:
        if structured_mode(lm) == "off":
            replies: list[dict[str, Any]] = self._chat(lm, lm_kwargs, signature, demos, inputs)
            return replies
        lm_kwargs = dict(lm_kwargs)
        self._choose_format(lm, lm_kwargs, signature, inputs)
        try:
            return self._run(lm, lm_kwargs, signature, demos, inputs)
        except AdapterParseError as err:
            logger.info("%s: unparseable reply, asking once more (%s)", _name(signature), _parse_message(err))
            return self._run(lm, lm_kwargs, signature, demos, inputs, feedback=self._feedback(signature, err))

    async def acall(self, lm: Any, *args: Any) -> list[dict[str, Any]]:  # (lm, lm_kwargs, signature, demos, inputs)
        """Async calls: the role's mode chooses the adapter (no retry with feedback; programs call synchronously)."""
        replies: list[dict[str, Any]]
        if structured_mode(lm) == "off":
            replies = await self._chat.acall(lm, *args)
        else:
            replies = await super().acall(lm, *args)
        return replies

    # -- response_format -----------------------------------------------------------------------------------------
    def _choose_format(
        self, lm: Any, lm_kwargs: dict[str, Any], signature: type[dspy.Signature], inputs: dict[str, Any]
    ) -> None:
        """Set ``lm_kwargs["response_format"]`` for this call (or leave it to DSPy, for ``auto`` on a provider)."""
        if "response_format" in lm_kwargs:  # the caller chose
            return
        mode = structured_mode(lm)
        if mode == "json":
            lm_kwargs["response_format"] = {"type": "json_object"}
            return
        if mode == "auto" and not is_self_hosted(lm):
            self._prepare_response_format(lm, lm_kwargs, signature)  # the provider's own word (DSPy's decision)
            return
        max_tokens = lm_kwargs.get("max_tokens") or (getattr(lm, "kwargs", None) or {}).get("max_tokens")
        try:
            schema = output_schema(signature, max_tokens=max_tokens, inputs=inputs)
        except OpenSchemaError as exc:
            logger.debug("%s: JSON mode instead of a schema (%s)", _name(signature), exc)
            lm_kwargs["response_format"] = {"type": "json_object"}
            return
        name = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in _name(signature))[:64] or "outputs"
        lm_kwargs["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": True},
        }

    # -- one LM call and its parse -------------------------------------------------------------------------------
    def _run(self, *call: Any, feedback: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
        """One LM call and its parse; ``call`` is the adapter's ``(lm, lm_kwargs, signature, demos, inputs)``."""
        lm, lm_kwargs, signature, demos, inputs = call
        kwargs = dict(lm_kwargs)
        processed = self._call_preprocess(lm, kwargs, signature, inputs)
        messages = self.format(processed, demos, inputs)
        if feedback:
            messages = [*messages, *feedback]
        outputs = self._complete(lm, messages, kwargs)
        replies: list[dict[str, Any]] = self._call_postprocess(processed, signature, outputs, lm, kwargs)
        return replies

    def _complete(self, lm: Any, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> list[Any]:
        """The LM's completions for these messages, with the schema in the form the server takes."""
        fmt = kwargs.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and _dialect(lm) == "json_object":
            return self._complete_json_object(lm, messages, kwargs, fmt["json_schema"]["schema"])
        from dspy.clients._deprecation import adapter_message_call

        with adapter_message_call(lm, messages):
            return list(lm(messages=messages, **kwargs))

    @staticmethod
    def _complete_json_object(
        lm: Any, messages: list[dict[str, Any]], kwargs: dict[str, Any], schema: dict[str, Any]
    ) -> list[Any]:
        """One call with ``{"type": "json_object", "schema": ...}`` (a field DSPy's request builder has no key for:
        it travels as a request extension)."""
        from dspy.clients.backend_selection import CLIENT_KEYS
        from dspy.lm15 import request_from_openai_chat

        skip = set(CLIENT_KEYS) | {"response_format", "num_retries", "cache", "rollout_id", "n", "prompt_cache"}
        knobs = {k: v for k, v in {**lm.kwargs, **kwargs}.items() if k not in skip and v is not None}
        request = request_from_openai_chat({"model": lm.model, "messages": messages, **knobs})
        extensions = {**(request.config.extensions or {}), "response_format": {"type": "json_object", "schema": schema}}
        request = dataclasses.replace(request, config=dataclasses.replace(request.config, extensions=extensions))
        call: dict[str, Any] = {"cache": kwargs["cache"]} if "cache" in kwargs else {}
        response = lm(request, **call)
        return [response.text or ""]

    @staticmethod
    def _feedback(signature: type[dspy.Signature], err: AdapterParseError) -> list[dict[str, str]]:
        reply = str(getattr(err, "lm_response", "") or "")
        if len(reply) > _FEEDBACK_CHARS:
            reply = reply[:_FEEDBACK_CHARS] + " ..."
        fields = ", ".join(f"`{name}`" for name in signature.output_fields)
        return [
            {"role": "assistant", "content": reply},
            {
                "role": "user",
                "content": f"Your reply could not be used: {_parse_message(err).rstrip('.')}. Reply again with one "
                f"JSON object holding exactly the fields {fields}, each of the type stated above, and nothing else.",
            },
        ]


def _parse_message(err: BaseException) -> str:
    """The first line of an error's message (its type when it has none)."""
    return error_line(err).removeprefix(f"{type(err).__name__}: ")


# -- how a server takes a schema ---------------------------------------------------------------------------------
def _dialect(lm: Any) -> str:
    """``json_schema`` (OpenAI's form) or ``json_object`` (llama-cpp-python's), read once per endpoint."""
    base = str((getattr(lm, "kwargs", None) or {}).get("api_base") or "")
    if not base or not is_local(base):
        return "json_schema"
    with _dialect_lock:
        if base not in _dialects:
            _dialects[base] = _probe(base)
            if _dialects[base] != "json_schema":
                logger.info("%s takes a schema as response_format json_object + schema", base)
        return _dialects[base]


def _probe(api_base: str) -> str:
    """Read the server's OpenAPI description; ``json_object`` when its response_format takes no ``json_schema``."""
    import requests

    parts = urlsplit(api_base)
    candidates = [f"{parts.scheme}://{parts.netloc}/openapi.json", api_base.rstrip("/") + "/openapi.json"]
    for url in candidates:
        try:
            reply = requests.get(url, timeout=3)
            if reply.status_code != 200:
                continue
            return _dialect_from_openapi(reply.json())
        except (requests.RequestException, ValueError):
            continue
    return "json_schema"


def _dialect_from_openapi(spec: Any) -> str:
    """``json_object`` when the described response_format has a ``type`` enum without ``json_schema`` and a
    ``schema`` property (llama-cpp-python's server); ``json_schema`` otherwise."""
    schemas = ((spec or {}).get("components") or {}).get("schemas") or {}
    for name, schema in schemas.items():
        if "responseformat" not in name.lower() or not isinstance(schema, dict):
            continue
        props = schema.get("properties") or {}
        kinds = (props.get("type") or {}).get("enum") or []
        if "json_object" in kinds and "json_schema" not in kinds and "schema" in props:
            return "json_object"
    return "json_schema"


def _name(signature: type[dspy.Signature]) -> str:
    """The signature's class name; for one DSPy derived (``StringSignature``), the running predictor's name."""
    name = str(signature.__name__)
    return (current_predictor() or name) if name == GENERIC_SIGNATURE else name
