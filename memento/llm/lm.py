"""LM roles: one ``dspy.LM`` per role, built from :class:`memento.core.config.Settings`.

Any model string DSPy accepts works: ``openai/...``, ``anthropic/...``, ``ollama_chat/...``, ``hosted_vllm/...``,
or ``openai/<name>`` with ``api_base`` for any OpenAI-compatible server; ``local/<path.gguf>`` runs a GGUF model in
process and ``local`` the bundled test model (:mod:`memento.llm.local_lm`). Each role's replies are structured by
:class:`memento.llm.structured_adapter.StructuredAdapter` (``structured_outputs``), which :func:`configure` installs.

Example:
    >>> import memento
    >>> from memento.core.config import load_settings
    >>> roles = memento.configure(load_settings(flags={"lm": "openai/gpt-4o-mini"}))  # doctest: +SKIP
    >>> roles.judge_lm.model  # doctest: +SKIP
    'openai/gpt-4o-mini'
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dspy

from memento.core.cancel import check_cancelled
from memento.core.config import ROLE_FIELD_DEFAULTS, ROLES, LMRole, LocalSettings, Settings
from memento.core.errors import ConfigError, LMDeadlineExceeded, LMNotConfiguredError
from memento.llm.api_base import is_local
from memento.llm.lm_deadline import call_with_deadline
from memento.llm.lm_errors import explain_lm_error, raise_if_fatal  # noqa: F401 (importable from here, as before)
from memento.llm.lm_limiter import limiter_for, set_role_limits
from memento.utils.scrub import register_secret, scrub_url, split_credentials

__all__ = ["MementoLM", "Roles", "build_lm", "configure", "dspy_defaults", "explain_lm_error", "role_lm"]

logger = logging.getLogger(__name__)


@dataclass
class Roles:
    """The LM of each role. Distinct objects even when two roles share settings, so usage is attributable."""

    lm: dspy.LM
    judge_lm: dspy.LM
    reflection_lm: dspy.LM
    curator_lm: dspy.LM
    planner_lm: dspy.LM | None = None  # the CBR planner; None (a hand-built map): the planner runs on ``lm``

    def items(self) -> Iterator[tuple[str, dspy.LM]]:
        """``(role, lm)`` pairs in the order of :data:`memento.core.config.ROLES` (roles without an LM skipped)."""
        for name in ROLES:
            lm = getattr(self, name)
            if lm is not None:
                yield name, lm

    def role_of(self, lm: object) -> str | None:
        """The role whose LM is this object (or a copy of it, e.g. JitMem's executor at its own temperature: a copy
        keeps its ``memento_role``), or ``None``."""
        for name, candidate in self.items():
            if candidate is lm:
                return name
        role = getattr(lm, "memento_role", None)
        return role if role in dict(self.items()) else None


class MementoLM(dspy.LM):
    """A ``dspy.LM`` that stops on a cancel, respects its role's concurrency limit and ends by its deadline.

    Every call first checks the process-wide cancel flag (so AET waves, ReAct steps and thread pools stop between
    LM calls after Ctrl-C), then takes a slot of its role's :class:`memento.llm.lm_limiter.LMLimiter`
    (``max_concurrency``, ``requests_per_minute``) for the duration of the request, and runs under the role's
    deadline (:func:`memento.llm.lm_deadline.call_with_deadline`: ``deadline`` seconds, retries included; a cancel
    stops the wait after ``run.cancel_grace`` seconds).
    """

    memento_role: str | None = None
    memento_replay: Any = None  # a memento.llm.lm_replay.ReplayBook: every call is served from a --log-lm file
    structured_outputs: str = "auto"  # the role's setting, read by memento.llm.structured_adapter
    memento_deadline: float | None = None  # seconds (None: config.ROLE_FIELD_DEFAULTS['deadline'])

    def _deadline_label(self) -> str:
        base = self.kwargs.get("api_base")
        where = f" at {scrub_url(str(base))}" if base else ""
        return f"LM call to {self.model}{where} (role {self.memento_role or 'lm'})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        check_cancelled()
        if self.memento_replay is not None:  # served from a file: no server to wait for
            with self.memento_replay.serving(self, args, kwargs):
                return super().__call__(*args, **kwargs)
        call = functools.partial(super().__call__, *args, **kwargs)
        limiter = limiter_for(self.memento_role)
        with limiter.slot() if limiter is not None else contextlib.nullcontext():
            return call_with_deadline(call, seconds=self.memento_deadline, what=self._deadline_label())

    async def acall(self, *args: Any, **kwargs: Any) -> Any:
        import asyncio

        check_cancelled()
        seconds = self.memento_deadline if self.memento_deadline is not None else ROLE_FIELD_DEFAULTS["deadline"]
        try:
            return await asyncio.wait_for(super().acall(*args, **kwargs), timeout=seconds)
        except TimeoutError:
            message = f"{self._deadline_label()}: no answer within its deadline of {seconds:g} s"
            raise LMDeadlineExceeded(message) from None


def build_lm(role: LMRole, *, name: str = "lm", replay: Any = None, local: LocalSettings | None = None) -> dspy.LM:
    """Build the ``dspy.LM`` of one resolved role.

    Args:
        role: the role's resolved settings.
        name: the role's name.
        replay: a :class:`memento.llm.lm_replay.ReplayBook`: the LM serves every call from it (no server, no key).
        local: the ``[local]`` settings of a model run in process (threads, context).

    Raises:
        LMNotConfiguredError: the role has no model.
        ConfigError: an unknown provider, a missing local model file or extra (one line).
    """
    if not role.model:
        raise LMNotConfiguredError(name)
    if replay is not None:
        lm = _replay_lm(role, name=name, book=replay)
    elif role.model == "local" or role.model.startswith(("local/", "local:")):
        lm = _build_local(role, name, local or LocalSettings())
    else:
        lm = _build_remote(role, name)
    lm.structured_outputs = role.structured_outputs or "auto"
    # one call, retries included, ends by this deadline; a local engine stops generating then (lm_deadline)
    lm.memento_deadline = role.deadline if role.deadline is not None else ROLE_FIELD_DEFAULTS["deadline"]
    return lm


def _replay_lm(role: LMRole, *, name: str, book: Any) -> MementoLM:
    """The replayed ``dspy.LM`` of one resolved role: same model and generation settings, served from ``book``
    (a :class:`memento.llm.lm_replay.ReplayBook`)."""
    from memento.llm.lm_replay import ReplayEngine, replay_capabilities

    kwargs: dict[str, Any] = {"num_retries": 0, "cache": False}  # retries and cache hits are in the log already
    if role.temperature is not None:
        kwargs["temperature"] = role.temperature
    if role.max_tokens is not None:
        kwargs["max_tokens"] = role.max_tokens
    lm = MementoLM(role.model, engine=ReplayEngine(replay_capabilities(role)), **kwargs)
    lm.memento_role = name
    lm.memento_replay = book
    return lm


def _build_remote(role: LMRole, name: str) -> MementoLM:
    """A role served by a provider or an OpenAI-compatible server."""
    assert role.model is not None
    kwargs: dict[str, object] = {}
    if role.api_base:
        kwargs.update(_endpoint(role.api_base))
    key = role.secret()
    if key:
        register_secret(key)  # scrubbed from every message memento prints, logs or saves
        kwargs["api_key"] = key
    else:
        register_secret(os.environ.get(_provider_key_var(role.model)))  # the client will read it: scrub it too
    if not key and role.api_base and is_local(role.api_base) and not os.environ.get(_provider_key_var(role.model)):
        # Local OpenAI-compatible servers (vLLM, llama.cpp, LM Studio) usually need no key, but the client
        # refuses to send a request without one. A remote endpoint keeps the provider's usual variable.
        kwargs["api_key"] = "not-needed"
    if role.temperature is not None:
        kwargs["temperature"] = role.temperature
    if role.top_p is not None:
        kwargs["top_p"] = role.top_p
    if role.top_k is not None:
        kwargs.update(top_k_kwargs(role.model, role.api_base, role.top_k, name=name))
    if role.max_tokens is not None:
        kwargs["max_tokens"] = role.max_tokens
    kwargs["num_retries"] = role.num_retries if role.num_retries is not None else ROLE_FIELD_DEFAULTS["num_retries"]
    kwargs["cache"] = role.cache if role.cache is not None else ROLE_FIELD_DEFAULTS["cache"]
    try:
        lm = MementoLM(role.model, **kwargs)
    except (TypeError, ValueError) as exc:  # DSPy refuses the model string itself ("openai/": no model id)
        raise ConfigError(f"{_flag(name)} {role.model!r}: {exc}") from None
    _check_provider(lm, name)
    set_role_limits(name, max_concurrency=role.max_concurrency, requests_per_minute=role.requests_per_minute)
    lm.memento_role = name
    return lm


#: providers whose own API carries top_k (DSPy sends it as a field); OpenAI-compatible servers take it in the body
_TOP_K_FIELD = ("anthropic", "gemini", "vertex_ai")
_TOP_K_BODY = ("hosted_vllm", "ollama", "ollama_chat", "openrouter", "together_ai", "local")


def top_k_kwargs(model: str, api_base: str | None, top_k: int, *, name: str = "lm") -> dict[str, object]:
    """How to send ``top_k`` to a model, only where it is accepted: a field for providers whose API has one
    (Anthropic, Gemini), the request body for OpenAI-compatible servers (vLLM, llama.cpp, Ollama: an ``openai/``
    model with an ``api_base``), nothing for OpenAI's own API (it refuses the parameter; said once in the log)."""
    provider = model.split("/", 1)[0]
    if provider in _TOP_K_FIELD:
        return {"top_k": top_k}
    if provider in _TOP_K_BODY or api_base:
        return {"extra_body": {"top_k": top_k}}
    logger.info("role %s: top_k=%d is not sent to %s (its API has no top_k)", name, top_k, model)
    return {}


_smoke_test_noted = False


def _build_local(role: LMRole, name: str, local: LocalSettings) -> MementoLM:
    """A role run in process by llama.cpp (``local/<path.gguf>``, or ``local``: the bundled model)."""
    from memento.llm.local_lm import (
        BUNDLED_MAX_TOKENS,
        DEFAULT_MAX_TOKENS,
        SMOKE_TEST_NOTE,
        LocalEngine,
        local_model_path,
    )

    global _smoke_test_noted
    assert role.model is not None
    path = local_model_path(role.model)
    if role.api_base:
        raise ConfigError(f"{_flag(name)} {role.model}: a local model runs in this process; it takes no --api-base")
    if role.model == "local" and not _smoke_test_noted:
        _smoke_test_noted = True
        logger.warning(SMOKE_TEST_NOTE)
    max_tokens = role.max_tokens or (BUNDLED_MAX_TOKENS if role.model == "local" else DEFAULT_MAX_TOKENS)
    engine = LocalEngine(path, threads=local.threads, context=local.context, max_tokens=max_tokens)
    set_role_limits(name, max_concurrency=role.max_concurrency, requests_per_minute=role.requests_per_minute)
    lm = MementoLM(
        role.model,
        engine=engine,
        temperature=role.temperature,
        max_tokens=max_tokens,
        num_retries=role.num_retries if role.num_retries is not None else ROLE_FIELD_DEFAULTS["num_retries"],
        cache=role.cache if role.cache is not None else ROLE_FIELD_DEFAULTS["cache"],
    )
    lm.memento_role = name
    return lm


def _endpoint(api_base: str) -> dict[str, object]:
    """The client settings of an ``api_base``: credentials in it (``http://user:pw@host/v1``) are split off before any
    client sees the URL and sent as a Basic ``Authorization`` header (so nothing resolves or logs ``user:pw@host``);
    the password and the header are registered as secrets."""
    import base64

    url, user, password = split_credentials(api_base)
    if user is None and password is None:
        return {"api_base": api_base}
    token = base64.b64encode(f"{user or ''}:{password or ''}".encode()).decode("ascii")
    for secret in (password, token, f"{user}:{password}"):
        register_secret(secret)
    return {"api_base": url, "extra_headers": {"Authorization": f"Basic {token}"}}


def _check_provider(lm: dspy.LM, role: str) -> None:
    """Refuse, before any call, a model string whose provider no client knows (``--lm foo/bar``), in one line.

    A model that DSPy's native engine routes (``openai/...``, ``anthropic/...``, ``ollama_chat/...``,
    ``hosted_vllm/...`` and most others) is known without importing litellm, which takes seconds to import; only a
    model that only the litellm engine can serve is checked against litellm's provider list.
    """
    if not isinstance(lm.engine, str):
        return  # a custom engine (a local model, a replay) serves the model itself
    from dspy.clients.backend_selection import select_backend

    try:
        if select_backend(lm).native:
            return
    except Exception:  # noqa: BLE001 - a refusal of the native route: litellm's check below decides
        pass
    model = lm.model
    import litellm

    flag = _flag(role)
    hint = (
        f"{flag} {model!r}: unknown provider; write provider/model (openai/gpt-4o-mini, anthropic/..., "
        "ollama_chat/..., hosted_vllm/...), or openai/NAME with --api-base URL for any OpenAI-compatible server"
    )
    if "/" in model:
        if model.split("/", 1)[0] not in {str(getattr(p, "value", p)) for p in litellm.provider_list}:
            raise ConfigError(hint)
        return
    quiet, litellm.suppress_debug_info = litellm.suppress_debug_info, True
    try:
        litellm.get_llm_provider(model)
    except Exception:  # noqa: BLE001 - litellm raises its own BadRequestError for an unknown bare model name
        raise ConfigError(hint.replace("unknown provider", "unknown model")) from None
    finally:
        litellm.suppress_debug_info = quiet


def _flag(role: str) -> str:
    """The CLI flag that sets a role's model (``--lm``, ``--judge-lm`` ...)."""
    return "--lm" if role == "lm" else f"--{role.replace('_', '-')}"


def _provider_key_var(model: str) -> str:
    """The provider's usual API-key variable (``OPENAI_API_KEY`` for ``openai/...``)."""
    return model.split("/", 1)[0].upper() + "_API_KEY"


def configure(settings: Settings, *, set_default: bool = True) -> Roles:
    """Build every role's LM and (by default) make ``lm`` DSPy's default LM.

    Returns:
        The role map; pass ``roles.judge_lm`` etc. to ``dspy.context(lm=...)`` to run a stage under a role.

    Raises:
        LMNotConfiguredError: no model for ``lm``.
    """
    from memento.core.cancel import set_cancel_grace
    from memento.records.lm_log import install_cache_guard, install_retry_hook

    install_retry_hook()  # every retry of an LM call is logged at INFO (-v) with its error
    install_cache_guard()  # a response holding a secret is never cached (memory or disk)
    set_cancel_grace(settings.run.cancel_grace)  # how long calls in flight may finish after Ctrl-C / SIGTERM
    replay = None
    if settings.observe.replay_lm is not None:  # --replay-lm: every call served from an earlier run's --log-lm
        from memento.llm.lm_replay import ReplayBook

        replay = ReplayBook(settings.observe.replay_lm)
    lms = {name: build_lm(settings.role(name), name=name, replay=replay, local=settings.local) for name in ROLES}
    roles = Roles(**lms)
    if set_default:
        dspy.configure(**dspy_defaults(roles))
    logger.info("configured LM roles: %s", {name: lm.model for name, lm in roles.items()})
    return roles


def dspy_defaults(roles: Roles) -> dict[str, Any]:
    """What :func:`configure` makes DSPy's defaults (the ``lm`` role, the structured adapter): ``dspy.configure`` or
    ``dspy.context`` keywords (a Ray worker installs them per call with ``dspy.context``)."""
    from memento.llm.structured_adapter import StructuredAdapter

    return {"lm": roles.lm, "adapter": StructuredAdapter()}


def role_lm(roles: Roles | None, name: str) -> dspy.LM | None:
    """The LM of a role, or ``None`` (DSPy's current default LM is then used)."""
    if roles is None:
        return None
    return getattr(roles, name)
