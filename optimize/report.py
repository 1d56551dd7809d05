"""The comparison report: ``results.json``, ``results.md`` and the PNG plots of a ``memento compare`` directory.

:class:`CompareReport` holds one :class:`MethodResult` per method: the per-example test scores, their mean with a
bootstrap 95% confidence interval, the paired-bootstrap difference against the baseline, the training and test
costs, the budgets, and (memory methods) the per-batch learning curve and memory growth. :func:`write_report`
writes the three kinds of output atomically:

- ``results.json``: the report itself (``CompareReport.model_validate_json`` reads it back);
- ``results.md``: the table a reader compares methods with;
- ``score_vs_cost.png`` (test score against training cost per method), ``learning_curve.png`` (per-batch score of
  the memory methods) and ``memory_growth.png`` (memory size per batch), the last two when a memory method reported
  batches.

Example:
    >>> from memento.optimize.report import CompareReport, render_markdown
    >>> print(render_markdown(CompareReport(task="multihop", metric="multihop")).splitlines()[0])
    # memento compare: multihop
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memento.core.types import utcnow
from memento.metrics.behaviour import describe_behaviour
from memento.optimize.costs import MethodCosts, PhaseCost
from memento.records.leakage import LeakageAudit, audit_lines
from memento.utils.extras import has_extra, install_hint
from memento.utils.files import atomic_path, atomic_write_text

__all__ = [
    "BaselineDiff",
    "MethodResult",
    "CompareReport",
    "render_markdown",
    "write_report",
    "plot_score_vs_cost",
    "plot_learning_curves",
    "plot_memory_growth",
]

logger = logging.getLogger(__name__)

MethodStatus = Literal["done", "error", "pending"]


class BaselineDiff(BaseModel):
    """Paired-bootstrap difference ``method - baseline`` over the examples both scored, with its 95% CI."""

    model_config = ConfigDict(extra="forbid")

    baseline: str
    diff: float
    ci_low: float
    ci_high: float
    n: int

    @property
    def significant(self) -> bool:
        """True when the 95% interval excludes zero."""
        return self.ci_low > 0 or self.ci_high < 0


class MethodResult(BaseModel):
    """Everything recorded about one compared method."""

    model_config = ConfigDict(extra="forbid")

    method: str
    kind: str = ""  # baseline | optimizer | memory
    base: str = ""
    status: MethodStatus = "pending"
    error: str | None = None
    example_ids: list[str] = Field(default_factory=list)
    scores: list[float] = Field(default_factory=list)
    failed_examples: int = 0
    mean: float | None = None
    measures: dict[str, float] = Field(default_factory=dict)  # means of the metric's extra measures (f1, tvd...)
    behaviour: dict[str, float] = Field(default_factory=dict)  # test behaviour per sample (metrics.behaviour)
    ci_low: float | None = None
    ci_high: float | None = None
    vs_baseline: BaselineDiff | None = None
    costs: MethodCosts = Field(default_factory=MethodCosts)
    budgets: dict[str, Any] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)
    curve: list[dict[str, Any]] = Field(default_factory=list)
    growth: list[dict[str, Any]] = Field(default_factory=list)
    artefacts: dict[str, str] = Field(default_factory=dict)
    leakage: LeakageAudit | None = None  # the test phase's leakage audit (totals; per example in test/results.json)
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None


class CompareReport(BaseModel):
    """The whole comparison: one task, one metric, one split, the same LM roles, every method's result."""

    model_config = ConfigDict(extra="forbid")

    task: str
    metric: str
    higher_is_better: bool = True
    baseline: str = "closed_book"
    seed: int = 42
    split: dict[str, Any] = Field(default_factory=dict)
    lm_roles: dict[str, str] = Field(default_factory=dict)
    budget: dict[str, Any] = Field(default_factory=dict)
    methods: dict[str, MethodResult] = Field(default_factory=dict)
    preprocess: PhaseCost = Field(default_factory=PhaseCost)  # the task's preprocessing of the split (LLM scrubs)
    totals: PhaseCost = Field(default_factory=PhaseCost)
    created_at: dt.datetime = Field(default_factory=utcnow)
    provenance: dict[str, Any] | None = None  # settings, models, versions, data hashes, times (records.provenance)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _int(value: int) -> str:
    return f"{value:,}"


def _money(value: float | None) -> str:
    return "tokens only" if value is None else f"${value:.4f}"


def render_markdown(report: CompareReport) -> str:
    """The results table (plus costs by phase and budgets) as GitHub markdown."""
    lines = [
        f"# memento compare: {report.task}",
        "",
        f"Metric: `{report.metric}` (its score: higher is better"
        + ("" if report.higher_is_better else "; the task's own measure is lower-is-better, the score its complement")
        + "). "
        f"Split seed {report.seed}: {report.split.get('n_train', 0)} train / {report.split.get('n_test', 0)} test. "
        f"Baseline for the paired bootstrap: `{report.baseline}`. Budget preset: `{report.budget.get('preset', '?')}`.",
        "",
        "LM roles: " + ", ".join(f"{role} = `{model}`" for role, model in report.lm_roles.items()),
        "",
        *_leak_warning(report),
        "| method | status | score (95% CI) | failed examples | Δ vs baseline (95% CI) | train LM calls (cached) | "
        "train tokens | test LM calls (cached) | test tokens | judge calls (train/test) | searches (train/test) | "
        "fetches (train/test) | wall s (train/test) | $ (train+test) |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, res in report.methods.items():
        train, test = res.costs.train, res.costs.test
        score = "–"
        if res.mean is not None:
            score = f"{res.mean:.3f} [{_fmt(res.ci_low)}, {_fmt(res.ci_high)}]"
        diff = "–"
        if res.vs_baseline is not None:
            mark = " *" if res.vs_baseline.significant else ""
            diff = f"{res.vs_baseline.diff:+.3f} [{res.vs_baseline.ci_low:+.3f}, {res.vs_baseline.ci_high:+.3f}]{mark}"
        elif name == report.baseline:
            diff = "(baseline)"
        status = res.status if res.status != "error" else f"error: {(res.error or '')[:60]}"
        total = res.costs.total
        lines.append(
            f"| `{name}` | {status} | {score} | {res.failed_examples}/{len(res.scores)} | {diff} | "
            f"{_int(train.lm_calls)} ({_int(train.cached_lm_calls)}) | {_int(train.tokens)} | "
            f"{_int(test.lm_calls)} ({_int(test.cached_lm_calls)}) | {_int(test.tokens)} | "
            f"{train.judge_calls}/{test.judge_calls} | "
            f"{train.searches}/{test.searches} | {train.fetches}/{test.fetches} | "
            f"{train.wall_seconds:.1f}/{test.wall_seconds:.1f} | {_money(total.dollars)} |"
        )
    t = report.totals
    lines += [
        "",
        f"Total: {_int(t.lm_calls)} LM calls ({t.judge_calls} by the judge role, {t.cached_lm_calls} served from "
        f"cache), {_int(t.prompt_tokens)} prompt + {_int(t.completion_tokens)} completion tokens, "
        f"{t.searches} searches, {t.fetches} fetches, {t.wall_seconds:.1f} s, {_money(t.dollars)}.",
        "",
        "`*`: the paired-bootstrap 95% interval excludes zero. LM calls count every billed request of every role "
        "(in brackets: calls served from the method's own response cache, not billed); judge calls are the part "
        "made by the judge role. Failed examples: test examples whose run or metric failed (scored 0)."
        + (
            f" The total includes {report.preprocess.lm_calls} LM calls of the task's preprocessing."
            if report.preprocess.lm_calls
            else ""
        ),
        "",
        "## Budgets",
        "",
    ]
    for name, res in report.methods.items():
        if res.budgets:
            shown = ", ".join(f"{k}={v}" for k, v in res.budgets.items())
            lines.append(f"- `{name}`: {shown}")
    measured = {name: res.measures for name, res in report.methods.items() if res.measures}
    if measured:
        lines += ["", "## Measures (test means)", ""]
        for name, measures in measured.items():
            lines.append(f"- `{name}`: " + ", ".join(f"{k}={v:.3f}" for k, v in sorted(measures.items())))
    behaved = {name: res.behaviour for name, res in report.methods.items() if res.behaviour}
    if behaved:
        lines += ["", "## Behaviour (test, per sample; MEMENTO Tables 8/10)", ""]
        for name, figures in behaved.items():
            lines.append(f"- `{name}`: {describe_behaviour(figures)}")
    streams = {name: res.info["stream"] for name, res in report.methods.items() if res.info.get("stream")}
    if streams:
        lines += ["", "## Test streams (JitMem stream protocol: mean ± std over orderings, score per stream batch)", ""]
        for name, info in streams.items():
            start = "training bank" if info.get("warm") else "empty bank"
            mean = "–" if info.get("mean") is None else f"{info['mean']:.3f} ± {info.get('std', 0.0):.3f}"
            curve = ", ".join(
                "–" if p.get("score") is None else f"{p['score']:.2f}±{p.get('std', 0.0):.2f}" for p in info["curve"]
            )
            lines.append(
                f"- `{name}`: {mean} over {info.get('orderings')} orderings from an {start}, batches of "
                f"{info.get('stream_batch')}; per batch: {curve}"
            )
    passes = {name: res.info["passes"] for name, res in report.methods.items() if len(res.info.get("passes", [])) > 1}
    if passes:
        lines += ["", "## Training passes (score per pass over the same tasks, the bank growing)", ""]
        for name, rows in passes.items():
            shown = ", ".join(f"pass {r['pass']}: {_fmt(r['score'])}" for r in rows)
            lines.append(f"- `{name}`: {shown}")
    audited = {name: res.leakage for name, res in report.methods.items() if res.leakage is not None}
    if audited:
        lines += ["", "## Leakage audit (test)", ""]
        for name, audit in audited.items():
            first, *rest = audit_lines(audit)
            lines += [f"- `{name}`: {first.removeprefix('- ')}", *rest]
        lines += [
            "",
            "Shown after the cutoff: memory items and pages dated on or after an example's cutoff that reached its "
            "prompts (expected 0), counted from the item ids and pages recorded with each prompt; per example in each "
            "method's `test/results.json`.",
        ]
    lines += ["", "## Artefacts", ""]
    for name, res in report.methods.items():
        for label, value in res.artefacts.items():
            lines.append(f"- `{name}` {label}: `{value}`")
    lines += _provenance_lines(report.provenance)
    return "\n".join(lines) + "\n"


def _leak_warning(report: CompareReport) -> list[str]:
    """The warning at the top of a report whose methods were shown items dated on or after an example's cutoff."""
    leaking = {name: res.leakage for name, res in report.methods.items() if res.leakage and res.leakage.leaked}
    if not leaking:
        return []
    parts = ", ".join(
        f"`{name}` ({a.items_after_cutoff} memory items, {a.pages_after_cutoff} pages, in {a.examples_leaking} "
        f"examples)"
        for name, a in leaking.items()
    )
    return [
        f"**Leakage: these methods were shown information dated on or after their examples' cutoff, so their "
        f'scores may be inflated: {parts}. See "Leakage audit" below.**',
        "",
    ]


def _provenance_lines(prov: dict[str, Any] | None) -> list[str]:
    """The provenance section of results.md: versions, commit, data files, endpoints, times."""
    if not prov:
        return []
    versions = ", ".join(f"{k} {v}" for k, v in (prov.get("versions") or {}).items() if v)
    lines = ["", "## Provenance", "", f"- versions: {versions}", f"- git commit: `{prov.get('git_commit') or '-'}`"]
    for label, info in (prov.get("data") or {}).items():
        lines.append(f"- {label}: `{info.get('path')}` sha256 `{info.get('sha256')}`")
    for role, info in (prov.get("roles") or {}).items():
        lines.append(f"- {role}: `{info.get('model')}` at `{info.get('api_base') or 'provider default'}`")
    lines.append(f"- started {prov.get('started_at')}, ended {prov.get('ended_at')}")
    lines.append("- effective settings (secrets masked, with their sources): in results.json, `provenance.settings`")
    return lines


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
_LINESTYLES = ("-", "--", "-.", ":")


def _style(i: int) -> dict[str, Any]:
    """A distinct colour, marker and line style per series (12 markers x 10 colours before anything repeats)."""
    return {
        "color": f"C{i % 10}",
        "marker": _MARKERS[i % len(_MARKERS)],
        "linestyle": _LINESTYLES[(i // 10) % len(_LINESTYLES)],
    }


def _legend_outside(ax: Any) -> Any:
    """The legend to the right of the axes, never over the data."""
    return ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)


def _tokens_label(value: float, _pos: Any = None) -> str:
    """Tick labels of the token axis: 0, 1k, 10k, 1M ... (short, so neighbouring decades never collide)."""
    value = abs(value)
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _dodge(points: list[tuple[float, float]], *, close: float = 0.02) -> list[float]:
    """Horizontal offsets in points for markers that would sit on top of each other (same x, nearly the same y):
    each such group is spread side by side, 9 points apart, centred on the true x."""
    offsets = [0.0] * len(points)
    groups: list[list[int]] = []
    for i, (x, y) in enumerate(points):
        for group in groups:
            gx, gy = points[group[0]]
            if x == gx and abs(y - gy) <= close:
                group.append(i)
                break
        else:
            groups.append([i])
    for group in groups:
        for rank, i in enumerate(group):
            offsets[i] = (rank - (len(group) - 1) / 2) * 9.0
    return offsets


def score_vs_cost_figure(report: CompareReport) -> Any | None:
    """The figure of :func:`plot_score_vs_cost` (``None`` when no method finished)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter
    from matplotlib.transforms import offset_copy

    done = [(n, r, r.mean) for n, r in report.methods.items() if r.status == "done" and r.mean is not None]
    if not done:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.5))
    points = [(float(r.costs.train.tokens), float(mean)) for _, r, mean in done]
    offsets = _dodge(points)
    for i, ((name, res, _), (x, mean), dx) in enumerate(zip(done, points, offsets, strict=True)):
        lo = mean - (res.ci_low if res.ci_low is not None else mean)
        hi = (res.ci_high if res.ci_high is not None else mean) - mean
        style = _style(i)
        shifted = offset_copy(ax.transData, fig=fig, x=dx, y=0.0, units="points")
        ax.errorbar(
            [x], [mean], yerr=[[max(lo, 0.0)], [max(hi, 0.0)]], fmt=style["marker"], color=style["color"],
            markersize=7, markeredgecolor="white", capsize=4, label=name, transform=shifted, zorder=3 + i,
        )  # fmt: skip
    ax.set_xscale("symlog", linthresh=1000)
    # shifted markers do not take part in autoscaling: the limits are set from the data
    right = max(2000.0, max(x for x, _ in points) * 3)
    ax.set_xlim(left=-300, right=right)
    # ticks at 0 and at each decade from 1k: the linear part below 1k gets no ticks that would crowd 0
    ax.xaxis.set_major_locator(FixedLocator([0.0, *(10.0**k for k in range(3, 13) if 10.0**k <= right)]))
    ax.xaxis.set_major_formatter(FuncFormatter(_tokens_label))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda *_: ""))
    lows = [r.ci_low if r.ci_low is not None else mean for _, r, mean in done]
    highs = [r.ci_high if r.ci_high is not None else mean for _, r, mean in done]
    pad = max(0.05, (max(highs) - min(lows)) * 0.08)
    ax.set_ylim(min(lows) - pad, max(highs) + pad)
    ax.set_xlabel("training cost (prompt + completion tokens; symlog: linear below 1k)")
    ax.set_ylabel(f"test {report.metric}\n(mean, 95% CI)")
    ax.set_title(f"{report.task}: score vs training cost")
    ax.grid(alpha=0.3)
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def plot_score_vs_cost(report: CompareReport, path: Path) -> Path | None:
    """Test score (with its 95% CI) against training cost (tokens) per finished method; methods at the same cost
    and score are set side by side, each with its own colour and marker; the legend is outside the axes."""
    return _save(score_vs_cost_figure(report), path)


def _series_figure(series: dict[str, list[tuple[float, float]]], *, xlabel: str, ylabel: str, title: str) -> Any:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.5))
    for i, (name, points) in enumerate(series.items()):
        style = _style(i)
        ax.plot(
            [b for b, _ in points], [v for _, v in points], label=name, color=style["color"],
            marker=style["marker"], linestyle=style["linestyle"], markersize=6, markeredgecolor="white",
            linewidth=1.6, alpha=0.9, zorder=3 + i,
        )  # fmt: skip
    _integer_x(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def learning_curves_figure(report: CompareReport) -> Any | None:
    """The figure of :func:`plot_learning_curves` (``None`` without batches)."""
    series: dict[str, list[tuple[float, float]]] = {}
    for name, res in report.methods.items():
        points = [(p["batch"], p["score"]) for p in res.curve if p.get("score") is not None]
        if points:
            series[name] = points
    if not series:
        return None
    return _series_figure(
        series,
        xlabel="training batch",
        ylabel=f"{report.metric} on the batch",
        title=f"{report.task}: learning curve per batch",
    )


def plot_learning_curves(report: CompareReport, path: Path) -> Path | None:
    """Per-batch training score of each memory method (only methods that reported batches)."""
    return _save(learning_curves_figure(report), path)


def memory_growth_figure(report: CompareReport) -> Any | None:
    """The figure of :func:`plot_memory_growth` (``None`` without growth records)."""
    series: dict[str, list[tuple[float, float]]] = {}
    for name, res in report.methods.items():
        if res.growth:
            unit = res.growth[-1].get("unit", "entries")
            series[f"{name} ({unit})"] = [(p["batch"], p["size"]) for p in res.growth]
    if not series:
        return None
    return _series_figure(
        series, xlabel="training batch", ylabel="memory size", title=f"{report.task}: memory growth per batch"
    )


def plot_memory_growth(report: CompareReport, path: Path) -> Path | None:
    """Memory size after each batch (entries of each memory method, in its own unit)."""
    return _save(memory_growth_figure(report), path)


def _integer_x(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _save(fig: Any | None, path: Path) -> Path | None:
    """Write ``fig`` to ``path`` as a PNG (atomically) and close it; ``None`` (nothing to plot) writes nothing."""
    if fig is None:
        return None
    try:
        with atomic_path(path, suffix=".png") as tmp:
            fig.savefig(tmp, dpi=110, bbox_inches="tight")  # the legend outside the axes is kept
    finally:
        _pyplot().close(fig)
    return path


def write_report(report: CompareReport, out_dir: str | Path, *, plots: bool = True) -> dict[str, Path]:
    """Write ``results.json``, ``results.md`` and (``plots=True``) the plots into ``out_dir``; returns what was
    written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    atomic_write_text(out / "results.json", report.model_dump_json(indent=2))
    written["json"] = out / "results.json"
    atomic_write_text(out / "results.md", render_markdown(report))
    written["markdown"] = out / "results.md"
    if not plots:
        return written
    if not has_extra("plots"):
        logger.warning("no plots drawn: they need the 'plots' extra (%s)", install_hint("plots"))
        return written
    for key, fn, name in (
        ("score_vs_cost", plot_score_vs_cost, "score_vs_cost.png"),
        ("learning_curve", plot_learning_curves, "learning_curve.png"),
        ("memory_growth", plot_memory_growth, "memory_growth.png"),
    ):
        try:
            made = fn(report, out / name)
        except Exception as exc:  # a plotting failure must not lose the numbers already written
            logger.warning("could not draw %s: %s", name, exc)
            continue
        if made is not None:
            written[key] = made
    return written
