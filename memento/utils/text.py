"""Short text for prompts, terminals and logs: one shared way to fold, clip and name an error in one line.

Example:
    >>> from memento.utils.text import clip, error_line, one_line
    >>> one_line("  a\\n  b   c ", 4)
    'a b…'
    >>> clip("line one\\nline two", 10)
    'line one\\n…'
    >>> error_line(ValueError("bad value\\nwith a traceback-like tail"))
    'ValueError: bad value'
"""

from __future__ import annotations

from typing import Any

__all__ = ["clip", "one_line", "error_line"]

ELLIPSIS = "…"


def clip(text: str | None, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, the last one an ellipsis when cut; line breaks are kept.

    Example:
        >>> clip("abcdef", 4), clip("abc", 4), clip(None, 4)
        ('abc…', 'abc', '')
    """
    text = text or ""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + ELLIPSIS


def one_line(text: Any, limit: int | None = None) -> str:
    """``text`` (any value; ``None`` is empty) on one line, runs of white space folded to one space, clipped to
    ``limit`` characters when given.

    Example:
        >>> one_line(None), one_line(0), one_line("a\\t b\\n\\nc", 4)
        ('', '0', 'a b…')
    """
    flat = " ".join(("" if text is None else str(text)).split())
    return flat if limit is None else clip(flat, limit)


def error_line(exc: BaseException, *, limit: int | None = None, with_type: bool = True) -> str:
    """One line naming an error: ``Type: first line of its message`` (``Type`` alone for an empty message); with
    ``with_type=False`` the whole message folded to one line (the type name when it is empty).

    Example:
        >>> error_line(KeyError()), error_line(OSError("disk\\nfull"), with_type=False)
        ('KeyError', 'disk full')
    """
    if with_type:
        lines = str(exc).strip().splitlines()
        text = f"{type(exc).__name__}: {one_line(lines[0])}" if lines else type(exc).__name__
    else:
        text = one_line(exc) or type(exc).__name__
    return text if limit is None else clip(text, limit)
