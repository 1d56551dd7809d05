"""The LM call log: one JSON line per LM call memento makes, appended to a file (``--log-lm FILE``).

Each line holds the role (``lm``, ``judge_lm``, ...), the stage and the predictor that made the call, the
model, the prompt messages in full, DSPy's ``rollout_id`` (``null`` unless an optimiser set one), the completion (the
raw reply text; a dict when the reply also carried reasoning or tool calls; a list for several candidates), the
tokens (``prompt``, ``completion`` and ``cached_prompt``: the prompt tokens the provider's or llama.cpp's prompt
cache served), the latency, whether DSPy's cache served it, the retries with their errors, and the error that ended
the call if any, and whether the reply parsed into the signature's outputs (``parsed``: true or false; null for a
call no adapter parsed, e.g. GEPA's free-text proposals or a failed call) with the parse error's first line
(``parse_error``): enough to replay the run (``--replay-lm FILE``, :mod:`memento.llm.lm_replay`) and to count parse
failures per stage. A line is written once its reply is parsed (the adapter parses right after the call, in the same
thread). Everything written goes through :func:`memento.utils.scrub.scrub_data`, so API keys and URL credentials never
reach the file.

Retries happen inside DSPy (``dspy.clients.execution``) without a hook of their own; :func:`install_retry_hook`
wraps its back-off delay function, which DSPy calls once per retry with the error, so each retry is logged at
``-v`` (INFO) and attached to the call it belongs to, and the back-off is waited out by
:func:`memento.llm.lm_deadline.wait_before_retry` (no retry after a cancel or past the call's deadline).

Example:
    >>> from memento.records.lm_log import LMCallLog
    >>> with LMCallLog("calls.jsonl", roles=roles):  # doctest: +SKIP
    ...     program(question="...")
    >>> LMCallLog.read("calls.jsonl")[0]["role"]  # doctest: +SKIP
    'lm'
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memento.llm.lm_deadline import calling_thread
from memento.records.usage import ActivatedCallback, cached_prompt_tokens, current_predictor, current_stage
from memento.utils.scrub import scrub_data
from memento.utils.text import error_line

__all__ = [
    "LMCallLog",
    "install_cache_guard",
    "install_retry_hook",
    "add_retry_listener",
    "current_predictor",
    "logged_messages",
]

logger = logging.getLogger(__name__)

_retry_local = threading.local()
_hook_lock = threading.Lock()


def _listeners() -> list[Callable[[int, BaseException, float], None]]:
    listeners = getattr(_retry_local, "listeners", None)
    if listeners is None:
        listeners = _retry_local.listeners = []
    return listeners


@contextlib.contextmanager
def add_retry_listener(fn: Callable[[int, BaseException, float], None]) -> Iterator[None]:
    """Call ``fn(attempt, error, delay_s)`` for each retry DSPy makes in this thread while the block runs."""
    listeners = _listeners()
    listeners.append(fn)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            listeners.remove(fn)


def _on_retry(exc: BaseException, attempt: int, seconds: float) -> None:
    """Log one retry at INFO and tell this thread's listeners."""
    from memento.utils.scrub import scrub

    cause = str(exc).splitlines()[0] if str(exc) else ""
    logger.info("LM call retry %d after %s: %s (waiting %.1fs)", attempt, type(exc).__name__, scrub(cause), seconds)
    for listener in list(_listeners()):
        with contextlib.suppress(Exception):
            listener(attempt, exc, seconds)


def _hook_execution(name: str, make: Callable[[Any], Any]) -> None:
    """Replace ``dspy.clients.execution.<name>`` with ``make(original)`` once (idempotent, thread-safe)."""
    try:
        from dspy.clients import execution
    except ImportError:  # pragma: no cover - another DSPy layout: nothing to hook
        return
    with _hook_lock:
        original = getattr(execution, name)
        if getattr(original, "_memento_hook", False):
            return
        replacement = make(original)
        replacement._memento_hook = True
        setattr(execution, name, replacement)


def install_retry_hook() -> None:
    """Log every retry of an LM call at INFO (``-v``) and tell the listeners of the thread (idempotent)."""

    def make(original: Callable[[BaseException, int], float]) -> Callable[[BaseException, int], float]:
        def delay(exc: BaseException, attempt: int) -> float:
            seconds = original(exc, attempt)
            import importlib

            from memento.llm.lm_deadline import wait_before_retry

            # the module as it is now: a reloaded memento.records.lm_log keeps receiving retries
            importlib.import_module(__name__)._on_retry(exc, attempt + 1, seconds)
            # the back-off is waited here: a cancel during it sends no further request, nor does a retry that
            # would start after the call's deadline (DSPy then sleeps the 0 s returned)
            return wait_before_retry(seconds)

        return delay

    _hook_execution("_delay", make)


def install_cache_guard() -> None:
    """Keep DSPy's response cache (memory and disk) free of secrets: a response holding a registered secret (a
    provider echoing the key, a completion quoting a URL password) is never stored in it (idempotent)."""
    from memento.utils.scrub import contains_secret

    def make(original: Callable[..., None]) -> Callable[..., None]:
        def store(lm: Any, call: Any, result: Any, asynchronous: bool) -> None:
            record = result.dump() if result.responses or result.raw is None else result.raw
            try:
                text = json.dumps(record, default=str, ensure_ascii=False)
            except (TypeError, ValueError):
                text = str(record)
            if contains_secret(text) or contains_secret(json.dumps(text)):
                return  # not cached: replaying it later would put the secret back into a run
            original(lm, call, result, asynchronous)

        return store

    _hook_execution("_store", make)


class _Open:
    __slots__ = ("record", "started", "billed", "retries", "listening", "parses")

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        self.listening = contextlib.ExitStack()
        self.started = time.perf_counter()
        self.billed = False
        self.retries: list[dict[str, Any]] = []
        self.parses = 0  # replies still to be parsed before the record is written


class _Sink:
    """Stands in for ``dspy.settings.usage_tracker``: the tokens of each non-cached call (chains to the previous)."""

    def __init__(self, log: LMCallLog) -> None:
        self.log = log
        self.parent: Any = None

    def __deepcopy__(self, memo: dict[int, Any]) -> _Sink:
        return self  # DSPy's parallel executors deep-copy the tracker into workers: share it

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        if self.parent is not None:
            self.parent.add_usage(lm, usage_entry)
        calls = getattr(self.log._local, "calls", None)
        if not calls:
            return
        call = calls[-1]
        call.billed = True
        tokens = call.record["tokens"]
        tokens["prompt"] += int(usage_entry.get("prompt_tokens") or usage_entry.get("input_tokens") or 0)
        tokens["completion"] += int(usage_entry.get("completion_tokens") or usage_entry.get("output_tokens") or 0)
        tokens["cached_prompt"] += cached_prompt_tokens(usage_entry)


def _completion(outputs: Any) -> Any:
    """The completion(s) of an LM call as JSON data: one text, or a list when the call asked for several."""
    if outputs is None:
        return None
    items = outputs if isinstance(outputs, list) else [outputs]
    texts: list[Any] = []
    for item in items:
        if hasattr(item, "message") and hasattr(item, "finish_reason"):  # a dspy.lm15.Response (a Request call)
            from dspy.clients.call_result import legacy_output

            item = legacy_output(item)
            item = item["text"] if set(item) == {"text"} else item
        if isinstance(item, dict):
            texts.append({k: v for k, v in item.items() if isinstance(v, str | int | float | bool | list | dict)})
        else:
            texts.append(item if isinstance(item, str) else str(item))
    return texts[0] if len(texts) == 1 else texts


def logged_messages(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The prompt of an LM call as the log holds it (``inputs``: the call's ``prompt`` and ``messages``): a list of
    ``{"role", "content"}`` with the text parts of multi-part contents joined (:mod:`memento.llm.lm_replay` matches
    calls
    by it); a call made with an explicit ``dspy.lm15.Request`` is logged as its system text and messages."""
    messages = inputs.get("messages")
    prompt = inputs.get("prompt") or inputs.get("request")
    if not messages and prompt is not None and hasattr(prompt, "messages") and hasattr(prompt, "system"):
        system = prompt.system if isinstance(prompt.system, str | None) else "".join(p.text for p in prompt.system)
        head = [{"role": "system", "content": system}] if system else []
        return head + [{"role": str(m.role), "content": m.text or ""} for m in prompt.messages]
    if not messages and prompt:
        messages = [{"role": "user", "content": prompt}]
    out: list[dict[str, Any]] = []
    for message in messages or []:
        if isinstance(message, dict):
            content = message.get("content")
            if isinstance(content, list):  # multi-part content: keep the text parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            out.append({"role": str(message.get("role", "user")), "content": "" if content is None else str(content)})
        else:
            out.append({"role": "user", "content": str(message)})
    return out


def _rollout_id(instance: Any, inputs: dict[str, Any]) -> Any:
    """DSPy's ``rollout_id`` of a call (optimisers sample distinct replies to one prompt with it), else ``None``."""
    call = inputs.get("kwargs") or {}
    return call.get("rollout_id", (getattr(instance, "kwargs", None) or {}).get("rollout_id"))


def _text(completion: Any) -> str:
    if isinstance(completion, dict):
        return str(completion.get("text") or completion.get("tool_calls") or "")
    return "" if completion is None else str(completion)


class LMCallLog(ActivatedCallback):
    """Append one scrubbed JSON line per LM call to ``path``; thread-safe.

    Args:
        path: the JSONL file (created with its directory; appended to, never truncated); ``None``: the records are
            kept in :attr:`records` (a Ray worker returns them to the driver, which writes them).
        roles: the role map from :func:`memento.configure`, to name each call's role; an LM that is not in it is
            named by its model string.

    Use it as a context manager: it installs itself with ``dspy.context`` (callbacks and usage tracker), which
    DSPy's parallel executors and :func:`memento.execution.threads.run_parallel` carry into worker threads. Meters
    installed inside (:class:`memento.records.usage.UsageMeter`) chain to it.

    Example:
        >>> with LMCallLog("calls.jsonl"):  # doctest: +SKIP
        ...     dspy.Predict("q -> a")(q="hi")
    """

    def __init__(self, path: str | Path | None, *, roles: Any | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else None
        self.roles = roles
        self.sink = _Sink(self)
        self.lines = 0
        self.records: list[dict[str, Any]] = []  # path None: the records are kept here (a Ray worker's calls)
        self._lock = threading.Lock()
        self._open: dict[str, _Open] = {}
        # by the thread that made the call (lm_deadline.calling_thread: the call itself runs in a worker): a reply
        # waiting for its parse
        self._pending: dict[int, _Open] = {}
        self._local = threading.local()
        self._file: Any = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")

    # -- DSPy callback hooks -------------------------------------------------------------------------------
    def _role(self, instance: Any) -> str:
        role = self.roles.role_of(instance) if self.roles is not None else None
        if role is None:  # a copy of a role's LM (optimisers copy programs) keeps its role
            role = getattr(instance, "memento_role", None)
        if role is None and self.roles is not None:  # another LM of a role's model: by model
            matches = [name for name, lm in self.roles.items() if getattr(lm, "model", None) == instance.model]
            role = matches[0] if len(matches) == 1 else None
        return role or str(getattr(instance, "model", "lm"))

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        record = {
            "time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            "role": self._role(instance),
            "stage": current_stage(),
            "predictor": current_predictor(),
            "model": str(getattr(instance, "model", "")),
            "messages": logged_messages(inputs),
            "rollout_id": _rollout_id(instance, inputs),
            "completion": None,
            "tokens": {"prompt": 0, "completion": 0, "cached_prompt": 0},
            "latency_s": 0.0,
            "cached": False,
            "retries": [],
            "error": None,
            "parsed": None,
            "parse_error": None,
        }
        self._flush_pending()  # a reply of this thread that no adapter parsed
        call = _Open(record)
        calls = getattr(self._local, "calls", None)
        if calls is None:
            calls = self._local.calls = []
        calls.append(call)

        def on_retry(attempt: int, exc: BaseException, delay: float) -> None:
            if calls and calls[-1] is call:
                message = str(exc).splitlines()[0] if str(exc) else ""
                call.retries.append({"attempt": attempt, "error": f"{type(exc).__name__}: {message}", "delay_s": delay})

        call.listening.enter_context(add_retry_listener(on_retry))
        with self._lock:
            self._open[call_id] = call

    def on_lm_end(self, call_id: str, outputs: Any | None, exception: Exception | None = None) -> None:
        with self._lock:
            call = self._open.pop(call_id, None)
        if call is None:
            return
        calls = getattr(self._local, "calls", None)
        if calls and calls[-1] is call:
            calls.pop()
        record = call.record
        call.listening.close()
        record["latency_s"] = round(time.perf_counter() - call.started, 4)
        record["cached"] = exception is None and not call.billed
        record["completion"] = _completion(outputs)
        record["retries"] = call.retries
        if exception is not None:
            message = str(exception).splitlines()[0] if str(exception) else ""
            record["error"] = f"{type(exception).__name__}: {message}"
            self.write(record)
            return
        completions = record["completion"] if isinstance(record["completion"], list) else [record["completion"]]
        if not any(_text(c) for c in completions):
            record["parsed"], record["parse_error"] = False, "the LM returned an empty reply"
            self.write(record)
            return
        call.parses = len(completions)
        with self._lock:  # written when the adapter has parsed the reply (or at this thread's next call, or close)
            self._pending[calling_thread()] = call

    def on_adapter_parse_end(self, call_id: str, outputs: Any | None, exception: Exception | None = None) -> None:
        with self._lock:
            call = self._pending.get(calling_thread())
        if call is None:
            return  # no reply waiting (DSPy wraps an inherited parse twice: the second end finds none)
        record = call.record
        if exception is not None:
            record["parsed"] = False
            if record["parse_error"] is None:
                record["parse_error"] = error_line(exception)
        elif record["parsed"] is None:
            record["parsed"] = True
        call.parses -= 1
        if call.parses <= 0:
            with self._lock:
                self._pending.pop(calling_thread(), None)
            self.write(record)

    def _flush_pending(self, *, every_thread: bool = False) -> None:
        """Write the reply still waiting for a parse (none came: ``parsed`` stays null): this thread's, or all."""
        with self._lock:
            if every_thread:
                calls = list(self._pending.values())
                self._pending.clear()
            else:
                call = self._pending.pop(calling_thread(), None)
                calls = [call] if call is not None else []
        for call in calls:
            self.write(call.record)

    # -- output --------------------------------------------------------------------------------------------
    def write(self, record: dict[str, Any]) -> None:
        """Append one record (scrubbed) as a JSON line and flush."""
        if self._file is None:
            with self._lock:
                self.records.append(json.loads(json.dumps(scrub_data(record), ensure_ascii=False, default=str)))
                self.lines += 1
            return
        line = json.dumps(scrub_data(record), ensure_ascii=False, default=str)
        with self._lock:
            if self._file.closed:
                return
            self._file.write(line + "\n")
            self._file.flush()
            self.lines += 1

    def absorb_remote(self, outcome: Any) -> None:
        """Write the LM calls another process of the run made (a Ray worker's task, scrubbed there)."""
        for record in outcome.log:
            self.write(record)

    def close(self) -> None:
        """Write the replies still waiting for a parse and the calls still open (as abandoned), then close the file
        (further calls are not logged).

        A call is still open when the command stops without waiting for it (its deadline passed, or a cancel's
        grace period ended): its line says so in ``error``.
        """
        self._flush_pending(every_thread=True)
        with self._lock:
            abandoned = list(self._open.values())
            self._open.clear()
        for call in abandoned:
            call.record["latency_s"] = round(time.perf_counter() - call.started, 4)
            call.record["retries"] = call.retries
            call.record["error"] = "abandoned: the call had not ended when the command stopped waiting for it"
            self.write(call.record)
        with self._lock:
            if self._file is not None:
                self._file.close()

    @staticmethod
    def read(path: str | Path) -> list[dict[str, Any]]:
        """The records of a log file, in order."""
        text = Path(path).read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    # -- installation --------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def activate(self) -> Iterator[LMCallLog]:
        """Log the LM calls of the enclosed block (this thread and the workers DSPy's context reaches)."""
        import dspy

        install_retry_hook()
        callbacks = [*dspy.settings.get("callbacks", []), self]
        previous = dspy.settings.get("usage_tracker")
        self.sink.parent = previous if previous is not self.sink else None
        with dspy.context(callbacks=callbacks, usage_tracker=self.sink):
            yield self

    def install(self) -> None:
        """Add this log to DSPy's global settings (callbacks and usage tracker) until :meth:`uninstall`."""
        import dspy

        install_retry_hook()
        previous = dspy.settings.get("usage_tracker")
        self._previous_tracker = previous
        self.sink.parent = previous if previous is not self.sink else None
        dspy.configure(callbacks=[*dspy.settings.get("callbacks", []), self], usage_tracker=self.sink)

    def uninstall(self) -> None:
        """Remove what :meth:`install` added (other callbacks stay)."""
        import dspy

        callbacks = [c for c in dspy.settings.get("callbacks", []) if c is not self]
        tracker = dspy.settings.get("usage_tracker")
        dspy.configure(
            callbacks=callbacks,
            usage_tracker=getattr(self, "_previous_tracker", None) if tracker is self.sink else tracker,
        )

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self.close()
