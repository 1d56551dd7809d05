"""Readable compare plots and terminal tables: checked on the figures' artists and on rendered text."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from rich.console import Console

from memento.cli.terminal_table import responsive_table
from memento.optimize.costs import PhaseCost
from memento.optimize.report import (
    CompareReport,
    MethodResult,
    learning_curves_figure,
    plot_score_vs_cost,
    score_vs_cost_figure,
)

METHODS = {  # three untrained methods with the same score sit on the same point
    "closed_book": ("program", 0, 0.5),
    "react": ("program", 0, 0.5),
    "aet": ("program", 0, 0.5),
    "gepa:react": ("optimizer", 9_000, 0.8),
    "miprov2:react_rewrite_rerank": ("optimizer", 250_000, 0.8),
    "memento": ("memory", 40_000, 0.65),
}


def _report() -> CompareReport:
    report = CompareReport(task="multihop", metric="multihop:default", split={"n_train": 4, "n_test": 4})
    for name, (kind, tokens, mean) in METHODS.items():
        res = MethodResult(method=name, kind=kind, status="done", mean=mean, ci_low=mean - 0.1, ci_high=mean + 0.1)
        res.costs.train = PhaseCost(lm_calls=tokens // 100, prompt_tokens=tokens)
        res.curve = [{"batch": b, "score": 0.5} for b in (1, 2, 3)] if kind == "memory" or name == "aet" else []
        report.methods[name] = res
    return report


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_score_vs_cost_legend_outside_and_every_marker_visible(tmp_path: Path) -> None:
    fig = score_vs_cost_figure(_report())
    assert fig is not None
    (ax,) = fig.axes
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == list(METHODS)
    assert not _overlap(legend.get_window_extent(renderer), ax.get_window_extent(renderer))  # outside the axes
    # each method's marker: the data line of its errorbar container, in display coordinates
    centres = {}
    for container in ax.containers:
        line = container.lines[0]
        (centre,) = line.get_transform().transform(line.get_xydata())
        centres[container.get_label()] = centre
    assert set(centres) == set(METHODS)
    box = ax.get_window_extent(renderer)
    for name, (x, y) in centres.items():
        assert box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1, name
    for (a, pa), (b, pb) in itertools.combinations(centres.items(), 2):
        distance = ((pa[0] - pb[0]) ** 2 + (pa[1] - pb[1]) ** 2) ** 0.5
        assert distance >= 8, f"{a} and {b} markers overlap ({distance:.1f} px apart)"
    markers = {(c.lines[0].get_marker(), c.lines[0].get_color()) for c in ax.containers}
    assert len(markers) == len(METHODS)  # each method its own marker and colour
    # the log axis: labelled ticks, none colliding with its neighbour
    labels = [t for t in ax.get_xticklabels() if t.get_text() and t.get_visible()]
    assert len(labels) >= 3 and "k" in "".join(t.get_text() for t in labels)
    extents = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.x0)
    assert all(left.x1 <= right.x0 for left, right in itertools.pairwise(extents))
    assert "symlog" in ax.get_xlabel()
    path = plot_score_vs_cost(_report(), tmp_path / "p.png")
    from matplotlib.image import imread

    assert path is not None
    height, width = imread(path).shape[:2]
    assert width > height * 1.5  # the saved image keeps the legend to the right of the axes


def test_learning_curves_distinguish_identical_series() -> None:
    fig = learning_curves_figure(_report())
    assert fig is not None
    (ax,) = fig.axes
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["aet", "memento"]
    assert lines[0].get_ydata().tolist() == lines[1].get_ydata().tolist()  # the same values ...
    styles = [(line.get_marker(), line.get_color(), line.get_linestyle()) for line in lines]
    assert styles[0] != styles[1] and lines[0].get_marker() != lines[1].get_marker()  # ... drawn differently
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert not _overlap(ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer))


@pytest.mark.parametrize("width", [80, 60, 200])
def test_terminal_table_keeps_method_names_whole(width: int) -> None:
    rows = [[name, "done", f"{mean:.3f} [{mean - 0.1:.3f}, {mean + 0.1:.3f}]", "+0.300", str(tokens // 100), "8",
             "8", "12.5", "3.1"] for name, (_, tokens, mean) in METHODS.items()]  # fmt: skip
    columns = ["method", "status", "score [95% CI]", "Δ vs\nclosed_book", "train\nLM calls", "test\nLM calls",
               "judge\ncalls", "train\ns", "test\ns"]  # fmt: skip
    console = Console(width=width, record=True, color_system=None)
    console.print(responsive_table("memento compare: multihop", columns, rows, right={3, 4, 5, 6, 7, 8}))
    text = console.export_text()
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines)
    for name in METHODS:
        assert any(name in line for line in lines), f"{name} cut at {width} columns"
    vertical = "score [95% CI]:" in text
    assert vertical == (width < 120)  # narrow: one block per method; wide: one row per method
    if not vertical:
        assert any("miprov2:react_rewrite_rerank" in line and "0.800 [0.700, 0.900]" in line for line in lines)
