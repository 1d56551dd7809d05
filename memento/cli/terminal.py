"""What memento prints to a terminal: secrets scrubbed, control characters neutralised.

A question, a page or a memory item can carry terminal escape sequences (``ESC[2J``, an OSC title change, a bell,
a bidirectional override) that would act on the user's terminal if printed raw. :func:`neutralize` writes every
control character as a visible escape (``\\x1b``); :class:`SafeConsole` is a rich ``Console`` that applies it, and
:func:`memento.utils.scrub.scrub`, to every piece of text it renders (rich's own styling is added after, so colours
still work). :class:`TerminalFilter` does the same for log records.

Example:
    >>> from memento.cli.terminal import neutralize
    >>> neutralize("red \\x1b[31mtext\\x07")
    'red \\\\x1b[31mtext\\\\x07'
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleDimensions
from rich.segment import Segment

from memento.utils.scrub import MessageFilter, ScrubFilter, scrub

__all__ = ["neutralize", "SafeConsole", "TerminalFilter", "install_log_filters", "PIPED_WIDTH"]

# C0 controls except tab and newline, DEL, C1 controls, and the bidirectional overrides and isolates
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def neutralize(text: str) -> str:
    """``text`` with every control character (but tab and newline) written as a visible escape."""
    return _CONTROL.sub(_visible, text) if text else text


#: The width of a console whose output is piped or redirected (no terminal, no ``COLUMNS``): wide enough that no
#: line is wrapped, so a file or a pipe holds each line whole (tables at their natural width).
PIPED_WIDTH = 10_000


class SafeConsole(Console):
    """A rich ``Console`` whose rendered text is scrubbed of secrets and of control characters.

    Output that is piped or redirected is not wrapped (:data:`PIPED_WIDTH`) unless ``COLUMNS`` says otherwise; on a
    terminal, the terminal's width applies.

    Example:
        >>> import io
        >>> out = io.StringIO()
        >>> SafeConsole(file=out).print("title \\x1b]0;pwned\\x07", markup=False)
        >>> out.getvalue()
        'title \\\\x1b]0;pwned\\n'
    """

    @property
    def size(self) -> ConsoleDimensions:
        """The console's size: :data:`PIPED_WIDTH` wide when it writes to no terminal and ``COLUMNS`` is unset
        (rich would take another stream's terminal, or 80 columns)."""
        dims = super().size
        if self._width is None and not self.is_terminal and not self._environ.get("COLUMNS", "").isdigit():
            return ConsoleDimensions(PIPED_WIDTH, dims.height)
        return dims

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """``Console.print`` with string arguments scrubbed whole first (wrapping could split a secret)."""
        super().print(*(scrub(o) if isinstance(o, str) else o for o in objects), **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        safe = (
            segment if segment.control else Segment(neutralize(scrub(segment.text)), segment.style, None)
            for segment in buffer
        )
        return super()._render_buffer(safe)


class TerminalFilter(MessageFilter):
    """A logging filter that neutralises the control characters of a record's message."""

    def clean(self, message: str) -> str:
        return neutralize(message)


def install_log_filters(handlers: Iterable[Any] | None = None, *, level: int | None = None) -> None:
    """Add :class:`~memento.utils.scrub.ScrubFilter` and :class:`TerminalFilter` to the root logger's handlers (or to
    ``handlers``), once each. ``level`` also becomes the level of the plain stream handlers (the console's): a
    library that sets its own logger to DEBUG (bm25s does) then prints nothing below the chosen verbosity."""
    from memento.utils.scrub import install_record_scrubber

    install_record_scrubber()  # also the records of libraries that log through handlers of their own (LiteLLM)
    for handler in handlers if handlers is not None else logging.getLogger().handlers:
        if level is not None and type(handler) is logging.StreamHandler:
            handler.setLevel(level)
        for kind in (ScrubFilter, TerminalFilter):
            if not any(isinstance(f, kind) for f in handler.filters):
                handler.addFilter(kind())
