"""Terminal tables that stay readable: the key column (method names) is never cut or wrapped, and when the table
does not fit the terminal it is shown vertically, one block of ``column: value`` lines per row.

Example:
    >>> from rich.console import Console
    >>> from memento.cli.terminal_table import responsive_table
    >>> table = responsive_table("scores", ["method", "score"], [["miprov2:react_rewrite_rerank", "0.812"]])
    >>> Console(width=20).print(table)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["responsive_table"]

Cell = str | Text
_FOLD_AT = 24  # widest cell of a non-key column that counts when deciding whether the table fits


def _width(cell: Cell) -> int:
    text = cell if isinstance(cell, Text) else Text(cell)
    return max((len(line) for line in text.plain.splitlines()), default=0)


class _Responsive:
    """Renders as a table when it fits the console width, else vertically (decided at render time)."""

    def __init__(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Cell]], right: set[int]) -> None:
        self.title = title
        self.columns = list(columns)
        self.rows = [list(row) for row in rows]
        self.right = right

    def needed_width(self) -> int:
        """Columns at their widest cell (or header), plus rich's borders and padding."""
        widths = [_width(c) for c in self.columns]
        for row in self.rows:
            for i, cell in enumerate(row):
                # a long free-text cell (an error) may fold; it must not force the vertical layout alone
                widths[i] = max(widths[i], _width(cell) if i == 0 else min(_width(cell), _FOLD_AT))
        return sum(widths) + 3 * len(widths) + 1

    def horizontal(self) -> Table:
        table = Table(title=self.title)
        for i, name in enumerate(self.columns):
            if i == 0:
                key = max([_width(name), *(_width(row[0]) for row in self.rows)])
                table.add_column(name, no_wrap=True, min_width=key)
            else:
                table.add_column(name, justify="right" if i in self.right else "left", overflow="fold")
        for row in self.rows:
            table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
        return table

    def vertical(self) -> Group:
        blocks: list[Table | Text] = [Text(self.title, style="bold")] if self.title else []
        names = [" ".join(c.split()) for c in self.columns]
        label = max(len(c) for c in names[1:]) if len(names) > 1 else 0
        for row in self.rows:
            key = row[0] if isinstance(row[0], Text) else Text(row[0])
            block = Table.grid(padding=(0, 1))
            block.add_column(no_wrap=True, min_width=label + 1, style="dim")
            block.add_column(overflow="fold")
            for name, cell in zip(names[1:], row[1:], strict=False):
                block.add_row(f"{name}:", cell if isinstance(cell, Text) else Text(cell))
            shown = key.copy()
            shown.stylize("bold")
            if len(blocks) > 1:
                blocks.append(Text(""))
            blocks += [Text.assemble((f"{names[0]} ", "dim"), shown), block]
        return Group(*blocks)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.horizontal() if self.needed_width() <= options.max_width else self.vertical()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, options.max_width)


def responsive_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[Cell]], *, right: set[int] | None = None
) -> _Responsive:
    """A renderable: a table whose first column is never cut, or one block per row when the terminal is narrow.

    Args:
        title: shown above.
        columns: headers; the first is the key (method names).
        rows: cells as plain strings (printed literally, never as markup) or rich ``Text``.
        right: indexes of right-aligned (numeric) columns.
    """
    return _Responsive(title, columns, rows, right or set())
