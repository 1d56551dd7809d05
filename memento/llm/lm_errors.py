"""What a failed LM call means for the run: one line for a failure the user must fix (the server is unreachable,
the key is refused, the model does not exist), else nothing (the step failed; the run goes on).

Example:
    >>> from memento.llm.lm_errors import explain_lm_error
    >>> explain_lm_error(ValueError("a reply that did not parse")) is None
    True
"""

from __future__ import annotations

from memento.core.errors import LMUnavailableError
from memento.utils.scrub import scrub

__all__ = ["explain_lm_error", "raise_if_fatal"]


def explain_lm_error(exc: BaseException, *, model: str | None = None, api_base: str | None = None) -> str | None:
    """One line describing an LM failure the user must fix (unreachable, key refused, unknown model), else None."""
    from dspy.utils import exceptions as dx

    where = f" at {api_base}" if api_base else ""
    label = model or getattr(exc, "model", None) or "the model"
    cause = scrub(str(exc).splitlines()[0]) if str(exc).strip() else type(exc).__name__
    if isinstance(exc, dx.LMTransportError):
        return f"LM server unreachable{where} ({label}): {cause}"
    if isinstance(exc, dx.LMAuthError):
        return f"the provider refused the API key for {label}{where}: {cause}"
    if isinstance(exc, dx.LMUnsupportedModelError):
        return f"model {label} does not exist{where}: {cause}"
    if isinstance(exc, dx.LMNotConfiguredError | dx.LMConfigurationError):
        return f"LM {label} is misconfigured: {cause}"
    if isinstance(exc, dx.LMBillingError):
        return f"the provider refused the request for billing reasons ({label}): {cause}"
    lowered = cause.lower()
    unknown_model = (
        getattr(exc, "status", None) == 404
        or getattr(exc, "provider_code", None) == "model_not_found"
        or "does not exist" in lowered
        or "model not found" in lowered
    )
    if isinstance(exc, dx.LMProviderError) and unknown_model:
        return f"model {label} does not exist{where}: {cause}"
    return None


def raise_if_fatal(exc: BaseException, *, model: str | None = None, api_base: str | None = None) -> None:
    """Re-raise ``exc`` as :class:`LMUnavailableError` when it means the LM cannot be used at all.

    Programs call this in their per-node error handlers: a parse failure marks a node failed, but an
    unreachable server or a refused key must stop the run with one clear line.
    """
    message = explain_lm_error(exc, model=model, api_base=api_base)
    if message is not None:
        raise LMUnavailableError(message) from exc
