"""Replay: serve every LM call of a command from the ``--log-lm`` file of an earlier run (``--replay-lm FILE``).

A run made with a paid model re-executes offline, exactly: the same prompts get the same replies, so the same
trajectories, memory and report come out. Each call is matched by its role, model, prompt messages (and DSPy's
``rollout_id`` when it had one) against the log's records, as :class:`memento.records.lm_log.LMCallLog` wrote them
(scrubbed of secrets). Records with the same key are served in the order they were logged. A call that was not
recorded stops the run with one line naming its stage and predictor (:class:`ReplayMissError`): the command, its
settings, its data or memento's prompts differ from the run that was logged.

Every role's ``dspy.LM`` is then a :class:`memento.llm.lm.MementoLM` over a :class:`ReplayEngine` (a DSPy engine: no
network, no key): the LM finds the call's record before DSPy runs (:meth:`ReplayBook.serving`) and the engine returns
that record's reply with the recorded token counts, or raises the recorded error. DSPy's response cache is off for
replayed roles; a call that DSPy's cache served when it was recorded is served again without billing usage, so the
usage (LM calls, cached calls, tokens) comes out as recorded too.

Example:
    >>> from memento.core.config import load_settings
    >>> import memento
    >>> roles = memento.configure(load_settings(flags={"lm": "openai/x", "observe": {"replay_lm": "calls.jsonl"}}))
    ... # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memento.core.errors import ConfigError, LMUnavailableError

__all__ = [
    "ReplayBook",
    "ReplayEngine",
    "ReplayMissError",
    "ReplayedCall",
    "call_key",
    "replay_capabilities",
]


class ReplayMissError(LMUnavailableError):
    """An LM call that the replayed log does not hold: the run diverged from the one that was logged."""


@dataclass
class ReplayedCall:
    """One logged LM call: its reply (or the error that ended it), its tokens and whether DSPy's cache served it."""

    completion: Any
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached: bool = False
    error: str | None = None
    line: int = 0
    _parts: Iterator[Any] | None = field(default=None, repr=False)

    def next_completion(self) -> Any:
        """The reply of the next candidate (a call that asked for ``n`` completions logged a list of them)."""
        if not isinstance(self.completion, list):
            return self.completion
        if self._parts is None:
            self._parts = iter(self.completion)
        return next(self._parts, self.completion[-1] if self.completion else "")


def call_key(role: str | None, model: str, messages: list[dict[str, Any]], rollout_id: Any = None) -> str:
    """The key a call is matched by: role, model, the prompt messages as logged (scrubbed), DSPy's rollout id."""
    from memento.utils.scrub import scrub_data

    return json.dumps([role, model, scrub_data(messages), rollout_id], ensure_ascii=False, sort_keys=True, default=str)


_serving: contextvars.ContextVar[ReplayedCall | None] = contextvars.ContextVar("memento_replayed_call", default=None)


class ReplayBook:
    """The calls of a ``--log-lm`` file, by key, each served once in logged order; thread-safe.

    Args:
        path: the JSONL file an earlier ``--log-lm`` wrote.

    Raises:
        ConfigError: the file is missing, unreadable, or a line is not a call record of memento's LM log (one line,
            naming the file and the line).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.served = 0
        self._calls: dict[str, deque[ReplayedCall]] = {}
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        self.recorded = self._load()

    def __deepcopy__(self, memo: dict[int, Any]) -> ReplayBook:
        return self  # optimisers deep-copy programs and their LMs: every copy serves from the one book

    def _load(self) -> int:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"--replay-lm: {self.path} does not exist (write one with --log-lm)") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--replay-lm: cannot read {self.path}: {exc}") from None
        count = 0
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"--replay-lm: {self.path} line {number} is not JSON ({exc.msg})") from None
            if not isinstance(record, dict) or not {"model", "messages", "completion"} <= set(record):
                raise ConfigError(
                    f"--replay-lm: {self.path} line {number} is not an LM call record of --log-lm "
                    "(it needs model, messages and completion)"
                )
            tokens = record.get("tokens") or {}
            call = ReplayedCall(
                completion=record["completion"],
                prompt_tokens=int(tokens.get("prompt") or 0),
                completion_tokens=int(tokens.get("completion") or 0),
                cached_prompt_tokens=int(tokens.get("cached_prompt") or 0),
                cached=bool(record.get("cached")),
                error=record.get("error"),
                line=number,
            )
            key = call_key(record.get("role"), str(record["model"]), record["messages"], record.get("rollout_id"))
            self._calls.setdefault(key, deque()).append(call)
            count += 1
        return count

    def take(
        self, *, role: str | None, model: str, messages: list[dict[str, Any]], rollout_id: Any = None
    ) -> ReplayedCall:
        """The next logged call with this key (the role falls back to the model string, as the log names an LM it
        cannot attribute).

        Raises:
            ReplayMissError: no such call, or every one was served already (one line: stage, predictor, role).
        """
        keys = [call_key(role, model, messages, rollout_id), call_key(model, model, messages, rollout_id)]
        with self._lock:
            for key in keys:
                queue = self._calls.get(key)
                if queue:
                    self.served += 1
                    self._seen[key] = self._seen.get(key, 0) + 1
                    return queue.popleft()
            asked = max((self._seen.get(key, 0) for key in keys), default=0)
        raise ReplayMissError(self._miss(role, model, asked))

    def _miss(self, role: str | None, model: str, asked: int) -> str:
        from memento.records.lm_log import current_predictor
        from memento.records.usage import current_stage

        again = f" (it was logged {asked} time(s), all served already)" if asked else ""
        return (
            f"--replay-lm: no logged LM call for stage {current_stage()}, predictor {current_predictor() or '-'}, "
            f"role {role or '-'} ({model}){again} in {self.path}: this run's prompts differ from the logged run's"
        )

    def unused(self) -> int:
        """Logged calls not served (a replay that made fewer calls than the logged run)."""
        with self._lock:
            return sum(len(queue) for queue in self._calls.values())

    @contextlib.contextmanager
    def serving(self, lm: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[ReplayedCall]:
        """Around one call of a replayed LM (``lm(*args, **kwargs)``): pin its logged reply for the engine, and, when
        DSPy's cache served it in the logged run, keep its usage unbilled as it was then."""
        import dspy

        from memento.records.lm_log import logged_messages

        prompt = args[0] if args else kwargs.get("prompt")
        messages = logged_messages(
            {"prompt": prompt, "request": kwargs.get("request"), "messages": kwargs.get("messages")}
        )
        rollout_id = kwargs.get("rollout_id", (getattr(lm, "kwargs", None) or {}).get("rollout_id"))
        call = self.take(
            role=getattr(lm, "memento_role", None), model=lm.model, messages=messages, rollout_id=rollout_id
        )
        token = _serving.set(call)
        try:
            with dspy.context(usage_tracker=None) if call.cached else contextlib.nullcontext():
                yield call
        finally:
            _serving.reset(token)


class ReplayEngine:
    """A DSPy engine that answers each request with the logged reply :meth:`ReplayBook.serving` pinned for it.

    It declares the capabilities of the model that was logged (structured outputs, reasoning, tools), so DSPy's
    adapters format the same requests as in the logged run.
    """

    def __init__(self, capabilities: Any = None) -> None:
        self.supports_function_calling = bool(getattr(capabilities, "function_calling", False))
        self.supports_reasoning = bool(getattr(capabilities, "reasoning", False))
        self.supports_response_schema = bool(getattr(capabilities, "response_schema", False))
        self.supported_params = frozenset(getattr(capabilities, "params", ()) or ())

    def __deepcopy__(self, memo: dict[int, Any]) -> ReplayEngine:
        return self

    def dump_state(self) -> dict[str, Any]:
        return {}  # nothing to save: a loaded program replays only under --replay-lm again

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> ReplayEngine:
        return cls()

    def complete(self, request: Any) -> Any:
        from dspy.lm15 import Message, Response, TextPart, ThinkingPart, ToolCallPart, Usage

        call = _serving.get()
        if call is None:
            raise ReplayMissError("--replay-lm: an LM call reached the replay engine outside a replayed LM call")
        if call.error is not None and call.completion is None:
            raise _recorded_error(call.error, request.model)
        reply = call.next_completion()
        item: dict[str, Any] = reply if isinstance(reply, dict) else {"text": "" if reply is None else str(reply)}
        parts: list[Any] = []
        if item.get("reasoning_content"):
            parts.append(ThinkingPart(str(item["reasoning_content"])))
        parts.append(TextPart("" if item.get("text") is None else str(item["text"])))
        for tool in item.get("tool_calls") or []:
            function = tool.get("function") or {}
            arguments = function.get("arguments") or "{}"
            parts.append(
                ToolCallPart(
                    id=str(tool.get("id") or ""),
                    name=str(function.get("name") or ""),
                    input=json.loads(arguments) if isinstance(arguments, str) else dict(arguments),
                )
            )
        usage = Usage(
            input_tokens=call.prompt_tokens,
            output_tokens=call.completion_tokens,
            total_tokens=call.prompt_tokens + call.completion_tokens,
            cache_read_tokens=call.cached_prompt_tokens or None,
        )
        return Response(
            id=None, model=request.model, message=Message.assistant(parts), finish_reason="stop", usage=usage
        )

    def stream(self, request: Any) -> Any:
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        return None


def _recorded_error(error: str, model: str) -> Exception:
    """The exception a logged call ended with (``"LMTransportError: [model] message"``), as DSPy's class of that
    name when it has one."""
    from dspy.utils import exceptions as dx

    name, _, message = error.partition(": ")
    prefix = f"[{model}] "
    cls = getattr(dx, name, None)
    recorded: Exception
    if isinstance(cls, type) and issubclass(cls, dx.LMError):
        recorded = cls(message[len(prefix) :], model=model) if message.startswith(prefix) else cls(message)
    else:
        recorded = dx.LMUnexpectedError(f"{name}: {message}" if message else name)
    return recorded


def replay_capabilities(role: Any) -> Any:
    """What DSPy knows a logged model can do, asked offline of the LM it would build when DSPy's native router
    serves the model; ``None`` otherwise (a model only litellm serves, a local engine): a replay imports no litellm."""
    import dspy
    from dspy.clients.backend_selection import select_backend
    from dspy.clients.capabilities import capabilities

    try:
        shadow = dspy.LM(role.model, api_base=role.api_base) if role.api_base else dspy.LM(role.model)
        return capabilities(shadow) if select_backend(shadow).native else None
    except Exception:  # noqa: BLE001 - a model DSPy cannot describe offline: no declared capability
        return None
