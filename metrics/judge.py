"""A reusable base for LLM judges used as DSPy metrics.

A judge runs one signature under the ``judge_lm`` role (``dspy.context(lm=roles.judge_lm)``), memoises its replies
per input (so re-scoring the same example and prediction, which optimisers do often, costs no LM call), and turns
a reply it cannot use (unparseable, out of range) into a recorded *judge error* instead of an exception. Only an
LM that cannot be used at all (unreachable server, refused key) raises, as
:class:`memento.core.errors.LMUnavailableError`.

Example:
    >>> from memento.metrics.verdict_judge import VerdictJudge
    >>> judge = VerdictJudge()  # doctest: +SKIP
    >>> judge(example, prediction).score, judge.judge_errors  # doctest: +SKIP
    (1.0, 0)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import dspy

from memento.core.error_policy import handle_error
from memento.core.errors import ParseError
from memento.core.untrusted import quote_data
from memento.llm.lm import role_lm

__all__ = ["LLMJudge", "JudgeError", "as_data"]

logger = logging.getLogger(__name__)


class JudgeError(ParseError):
    """A judge reply that cannot be used: unparseable or outside the allowed range."""


#: judged text made safe to embed as a field value: the project's one data marking
#: (:func:`memento.core.untrusted.quote_data`: a ``<data>`` block with DSPy field markers and the block's own delimiters
#: escaped), so a judged answer can neither close its field and open a fake one (``[[ ## score ## ]]``) nor instruct
#: the judge; every judge signature carries the shared data rule (``signatures/_fields.reads_data``)
as_data = quote_data


def _key(inputs: dict[str, Any]) -> str:
    blob = json.dumps(inputs, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class LLMJudge:
    """Base class of LLM-judge metrics.

    Subclasses set ``signature`` and implement ``__call__(example, pred, trace=None, pred_name=None,
    pred_trace=None) -> dspy.Prediction(score, feedback)`` on top of :meth:`judge`, and may override
    :meth:`validate` to reject replies (raise :class:`JudgeError`).

    Args:
        roles: the LM roles; the judge runs under ``roles.judge_lm``. Without roles (and without ``lm``) the
            judge uses DSPy's current default LM.
        lm: an explicit judge LM (takes precedence over ``roles``).
        memoize: cache replies per input (thread-safe).

    Attributes:
        errors: messages of the judge errors met so far (``judge_errors`` is their count).
        lm_calls: judge predictor calls made (memo misses; DSPy's own LM cache may still answer some).
    """

    signature: ClassVar[type[dspy.Signature]]

    def __init__(self, *, roles: Any | None = None, lm: dspy.LM | None = None, memoize: bool = True) -> None:
        self.lm = lm if lm is not None else role_lm(roles, "judge_lm")
        self.memoize = memoize
        self.predictor = dspy.Predict(self.signature)
        self.errors: list[str] = []
        self.lm_calls = 0
        self._cache: dict[str, dspy.Prediction] = {}
        self._inflight: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self.__name__ = type(self).__name__

    @property
    def judge_errors(self) -> int:
        """How many judge replies were unusable."""
        with self._lock:
            return len(self.errors)

    def validate(self, reply: dspy.Prediction) -> None:
        """Raise :class:`JudgeError` if the reply cannot be used. Accepts everything by default."""

    @contextlib.contextmanager
    def _judge_lm(self) -> Iterator[None]:
        if self.lm is None:
            yield
        else:
            with dspy.context(lm=self.lm):
                yield

    def judge(self, **inputs: Any) -> dspy.Prediction | None:
        """One validated judge reply for these inputs (memoised), or ``None`` after recording a judge error."""
        key = _key(inputs)
        if self.memoize:
            with self._lock:
                if key in self._cache:
                    return self._cache[key]
                gate = self._inflight.setdefault(key, threading.Lock())
        else:
            gate = threading.Lock()
        with gate:  # a second thread asking the same question waits for the first answer
            if self.memoize:
                with self._lock:
                    if key in self._cache:
                        return self._cache[key]
            try:
                with self._judge_lm():
                    with self._lock:
                        self.lm_calls += 1
                    reply = self.predictor(**inputs)
                self.validate(reply)
            except JudgeError as exc:
                self._record(str(exc))
                return None
            except Exception as exc:  # a parse failure of the judge's reply is a judge error, not a crash
                failure = handle_error(exc, where="judge", log=logger)
                self._record(f"unparseable judge reply ({failure.reason[:200]})")
                return None
            else:
                if self.memoize:
                    with self._lock:
                        self._cache[key] = reply
                return reply
            finally:  # success, judge error or fatal error alike: the key's gate is not kept
                if self.memoize:
                    with self._lock:
                        self._inflight.pop(key, None)

    def _record(self, message: str) -> None:
        logger.warning("%s: judge error: %s", type(self).__name__, message)
        with self._lock:
            self.errors.append(message)

    def clear_cache(self) -> None:
        """Forget memoised replies."""
        with self._lock:
            self._cache.clear()

    def __call__(
        self, example: Any, pred: Any, trace: Any = None, pred_name: str | None = None, pred_trace: Any = None
    ) -> dspy.Prediction:
        raise NotImplementedError
