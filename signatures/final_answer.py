"""The final-answer stage: the task's own output signature, extended with the research context.

A task's signature (``question -> answer, sources`` for ``qa``) maps its inputs to its outputs and its docstring is
the final-answer prompt. Programs answer from more than the inputs: the caller's ``context`` (extra guidance such as a
JitMem payload or memory text) and, for the research programs, the ``research_findings`` of the tree.
:func:`answer_signature` builds that extended signature as a new, distinctly named class (GEPA maps traces to
predictors by signature, so every program's final predictor gets its own class name).

Example:
    >>> from memento.signatures.final_answer import answer_signature
    >>> from memento.tasks import get_task
    >>> sig = answer_signature(get_task("qa"), findings=True)
    >>> sig.__name__, list(sig.input_fields)
    ('AnswerQuestionFromFindings', ['context', 'research_findings', 'question'])
"""

from __future__ import annotations

import threading

import dspy

from memento.core.untrusted import DATA_NOTE, DATA_RULE, GUIDANCE_NOTE, GUIDANCE_RULE, with_rule
from memento.tasks.task import Task

__all__ = ["answer_signature"]

_CONTEXT_DESC = (
    f"extra guidance for this task from the caller (memory, curated notes; {GUIDANCE_NOTE}, any facts or past "
    "cases in it quoted as data); may be empty"
)
_FINDINGS_DESC = (
    "the research findings: the synthesised answer to the task and the sub-questions answered on the way, "
    f"each with the URLs of its sources; ground the answer in them ({DATA_NOTE})"
)
_CITE = "; cite the URLs of the findings the answer rests on in `sources`"
_REASONING_DESC = (
    "how the findings lead to the answer: the facts used, each hop or comparison, and conflicts resolved, "
    "in a few sentences"
)
_CLOSED_BOOK_SOURCES = "leave empty: this answer is given without research, so it rests on no source"

_cache: dict[tuple[type, str, bool, bool], type[dspy.Signature]] = {}
_lock = threading.Lock()


def answer_signature(task: Task, *, findings: bool, suffix: str | None = None) -> type[dspy.Signature]:
    """The task's final-answer signature with ``context`` (and ``research_findings`` when ``findings``) prepended.

    The instructions agree with the outputs: the findings' description asks to cite URLs only when the task's
    signature has a ``sources`` output; closed book (no findings, suffix ``ClosedBook``) ``sources``, if any, is asked
    to stay empty (a tool-using agent, suffix ``ReAct``, keeps the task's description);
    with findings and a short answer (``task.reason_before_answer``: multihop, qa) a ``reasoning`` output comes
    first, in this predictor only (the task's signature, hence the baselines and saved programs, keep their shape).

    Args:
        task: the task whose signature (inputs -> outputs, docstring) is extended.
        findings: add the ``research_findings`` input (research programs) or not (closed-book answers).
        suffix: the class-name suffix; default ``FromFindings`` / ``ClosedBook``.

    Returns:
        A signature class named ``<TaskSignature><suffix>``, the same class for the same arguments.
    """
    base = task.signature
    suffix = suffix or ("FromFindings" if findings else "ClosedBook")
    reason = findings and task.reason_before_answer and "reasoning" not in base.output_fields
    key = (base, suffix, findings, reason)
    with _lock:
        cached = _cache.get(key)
        if cached is not None:
            return cached
        sig = base
        has_sources = "sources" in base.output_fields
        if findings:
            desc = _FINDINGS_DESC + (_CITE if has_sources else "")
            sig = sig.prepend("research_findings", dspy.InputField(desc=desc), type_=str)
            if reason:
                sig = sig.prepend("reasoning", dspy.OutputField(desc=_REASONING_DESC), type_=str)
        elif has_sources and suffix == "ClosedBook":  # no tools, no findings: nothing to cite
            info = base.output_fields["sources"]
            sig = sig.with_updated_fields("sources", desc=_CLOSED_BOOK_SOURCES)
            sig = sig.with_updated_fields("sources", type_=info.annotation)
        sig = sig.prepend("context", dspy.InputField(desc=_CONTEXT_DESC), type_=str)
        # the context may hold learned guidance and quoted memory; findings and tool observations are quoted data
        doc = with_rule(with_rule(base.instructions, GUIDANCE_RULE), DATA_RULE)
        named = type(f"{base.__name__}{suffix}", (sig,), {"__doc__": doc, "__module__": __name__})
        _cache[key] = named
        return named
