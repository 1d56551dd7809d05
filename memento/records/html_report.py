"""One self-contained HTML page for a trajectory, an eval directory, a memory directory or a compare directory.

The page loads nothing: styles and a few lines of script are inline, plots are embedded as data URIs, and a
Content-Security-Policy forbids every other load, so it opens offline and from any file location. All text that
came from pages, LMs or users is escaped.

- trajectory (``run``'s JSON file, or one line of ``trajectories.jsonl``): the exploration tree as collapsible
  nodes (question, status, answer, sources, tool calls with their timings), a summary per wave, the timings.
- eval directory (``results.json`` of ``memento eval``): the per-example table and each example's tree.
- memory directory (``memory.db``): the stores per version, every M2/M3 rule with its support and contradiction
  history over the versions, and the diff between two versions (the last two unless ``diff=(a, b)``).
- compare directory (``results.json`` of ``memento compare``): the results table with CIs and paired differences,
  the plots, and links to a report of each method's test trajectories (written beside them).

Example:
    >>> from memento.records.html_report import write_report
    >>> write_report("runs/cmp")  # doctest: +SKIP
    PosixPath('runs/cmp/report.html')
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Literal

from memento.core.errors import DataError
from memento.core.types import Trajectory
from memento.records.html_trajectory import _e, _num, _page, _table, render_trajectory_page, trajectory_section
from memento.utils.files import atomic_write_text
from memento.utils.text import one_line

__all__ = ["write_report", "report_kind", "render_trajectory_page", "ReportKind"]

ReportKind = Literal["trajectory", "eval", "memory", "compare"]


# -- eval directories --------------------------------------------------------------------------------------------
def _eval_trajectories(directory: Path, examples: list[dict[str, Any]]) -> dict[int, Trajectory]:
    """Each example's trajectory from ``trajectories.jsonl`` (written in example order, one per example that has
    one; an example whose inputs differ from the next trajectory's has none)."""
    path = directory / "trajectories.jsonl"
    if not path.exists():
        return {}
    pending = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                pending.append(Trajectory.model_validate_json(line))
            except ValueError:
                continue  # a damaged line loses its tree, not the report
    found: dict[int, Trajectory] = {}
    for position, row in enumerate(examples):
        if not pending:
            break
        inputs = pending[0].inputs
        if not inputs or inputs == row.get("inputs"):
            found[position] = pending.pop(0)
    return found


def _eval_page(results: dict[str, Any], directory: Path, *, title: str) -> str:
    rows = []
    sections = []
    examples = results.get("examples", [])
    trajectories = _eval_trajectories(directory, examples)
    for position, row in enumerate(examples):
        first = next(iter((row.get("prediction") or {}).values()), "")
        anchor = f"ex-{row.get('index', position)}"
        traj = trajectories.get(position)
        label = f'<a href="#{anchor}">{_e(row.get("index"))}</a>' if traj is not None else _e(row.get("index"))
        error = row.get("error")
        note = _e(one_line(error or row.get("feedback"), 120))
        note = f'<span class="err">{note}</span>' if error else note
        rows.append(
            [
                label,
                _e(one_line(row.get("id"), 30)),
                _e(one_line(first, 90)),
                f"{float(row.get('score') or 0.0):.3f}",
                note,
            ]
        )
        if traj is not None:
            sections.append(
                f'<details class="example" id="{anchor}"><summary>example {_e(row.get("index"))}: '
                f"{_e(one_line(traj.task_text, 140))}</summary>{trajectory_section(traj, heading='h3')}</details>"
            )
    mean, lo, hi = results.get("mean"), results.get("ci_low"), results.get("ci_high")
    summary = (
        f"<p><b>mean {_num(mean)}</b> (95% CI {_num(lo)}–{_num(hi)}) over {results.get('n', len(rows))} examples; "
        f"errors {results.get('errors', 0)}; task {_e(results.get('task'))}, method {_e(results.get('method'))}, "
        f"metric {_e(results.get('metric'))}"
        + ("" if results.get("complete", True) else ' · <span class="err">incomplete run</span>')
        + "</p>"
    )
    if results.get("behaviour"):  # MEMENTO's Table 8/10 measures
        from memento.metrics.behaviour import describe_behaviour

        summary += f"<p>behaviour: {_e(describe_behaviour(results['behaviour']))}</p>"
    body = (
        f"<h1>{_e(title)}</h1>{summary}"
        + _leakage_section(results)
        + "<h2>Examples</h2>"
        + _table(["#", "id", "prediction", "score", "note"], rows, numeric={0, 3})
        + ("<h2>Trajectories</h2>" + "".join(sections) if sections else "")
    )
    return _page(title, body)


_AUDIT_COLUMNS = (
    ("items_shown", "items shown"),
    ("items_after_cutoff", "items after cutoff"),
    ("items_undated_kept", "undated items kept"),
    ("items_hidden", "items hidden"),
    ("items_undated_dropped", "undated items dropped"),
    ("pages_shown", "pages shown"),
    ("pages_after_cutoff", "pages after cutoff"),
    ("pages_undated_kept", "undated pages kept"),
    ("pages_undated_dropped", "undated pages dropped"),
)


def _leakage_section(results: dict[str, Any]) -> str:
    """The leakage audit of an eval: the totals (a warning when anything dated on/after a cutoff was shown) and one
    row per example."""
    from memento.records.leakage import LeakageAudit

    total = results.get("leakage")
    if not total:
        return ""
    audit = LeakageAudit.model_validate(total)
    warn = (
        f'<p class="err"><b>{audit.leaked} memory items and pages dated on or after their example\'s cutoff were '
        f"shown ({audit.examples_leaking} of {audit.examples} examples).</b></p>"
        if audit.leaked
        else ""
    )
    rows = []
    for row in results.get("examples", []):
        if not row.get("leakage"):
            continue
        one = LeakageAudit.model_validate(row["leakage"])
        cells = [str(getattr(one, key)) for key, _ in _AUDIT_COLUMNS]
        if one.leaked:
            cells[1] = f'<span class="err">{cells[1]}</span>' if one.items_after_cutoff else cells[1]
            cells[6] = f'<span class="err">{cells[6]}</span>' if one.pages_after_cutoff else cells[6]
        rows.append([_e(row.get("index")), _e(one_line(row.get("id"), 30)), _e(one.cutoff or "–"), *cells])
    headers = ["#", "id", "cutoff", *(label for _, label in _AUDIT_COLUMNS)]
    offenders = (
        "<p>shown after the cutoff: " + ", ".join(f"<code>{_e(x)}</code>" for x in audit.after_cutoff) + "</p>"
        if audit.after_cutoff
        else ""
    )
    return (
        f"<h2>Leakage audit</h2>{warn}<p>{_e(audit.summary())}</p>{offenders}"
        + _table(headers, rows, numeric={0, *range(3, 3 + len(_AUDIT_COLUMNS))})
        + '<p class="meta">After cutoff: shown to the example and dated on or after its cutoff (expected 0), '
        "counted from the item ids and pages recorded with its prompts; hidden: kept away by the date filter.</p>"
    )


# -- compare directories -----------------------------------------------------------------------------------------
def _compare_page(directory: Path) -> str:
    from memento.optimize.compare import parse_methods
    from memento.optimize.report import CompareReport

    report = CompareReport.model_validate_json((directory / "results.json").read_text(encoding="utf-8"))
    rows = []
    for name, res in report.methods.items():
        score = "–" if res.mean is None else f"{res.mean:.3f} [{_num(res.ci_low)}, {_num(res.ci_high)}]"
        diff = "(baseline)" if name == report.baseline else "–"
        if res.vs_baseline is not None:
            mark = " *" if res.vs_baseline.significant else ""
            diff = f"{res.vs_baseline.diff:+.3f} [{res.vs_baseline.ci_low:+.3f}, {res.vs_baseline.ci_high:+.3f}]{mark}"
        link = "–"
        test_dir = directory / parse_methods([name])[0].slug / "test"
        if (test_dir / "results.json").exists():
            written = _write(test_dir, "eval", None)
            link = f'<a href="{_e(written.relative_to(directory).as_posix())}">trajectories</a>'
        status = (
            _e(res.status) if res.status == "done" else f'<span class="err">{_e(res.status)}: {_e(res.error)}</span>'
        )
        train, test, total = res.costs.train, res.costs.test, res.costs.total
        rows.append(
            [
                f"<code>{_e(name)}</code>",
                status,
                _e(score),
                _e(diff),
                f"{train.lm_calls:,}",
                f"{test.lm_calls:,}",
                f"{train.tokens + test.tokens:,}",
                f"{train.judge_calls}/{test.judge_calls}",
                f"{train.wall_seconds:.1f}/{test.wall_seconds:.1f}",
                "–" if total.dollars is None else f"${total.dollars:.4f}",
                link,
            ]
        )
    headers = ["method", "status", "score [95% CI]", f"Δ vs {report.baseline} [95% CI]", "train LM calls",
               "test LM calls", "tokens", "judge calls (train/test)", "wall s (train/test)", "$",
               "per example"]  # fmt: skip
    plots = []
    for name in ("score_vs_cost.png", "learning_curve.png", "memory_growth.png"):
        path = directory / name
        if path.exists():
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            plots.append(f'<img class="plot" alt="{_e(name)}" src="data:image/png;base64,{data}">')
    split = report.split
    title = f"memento compare · {report.task}"
    audits = [(name, res.leakage) for name, res in report.methods.items() if res.leakage is not None]
    leak_rows = [
        [f"<code>{_e(name)}</code>", *(str(getattr(a, key)) for key, _ in _AUDIT_COLUMNS)] for name, a in audits
    ]
    leaking = [f"<code>{_e(name)}</code>" for name, a in audits if a.leaked]
    warning = (
        '<p class="err"><b>Leakage: '
        + ", ".join(leaking)
        + " were shown information dated on or after their examples' cutoff.</b></p>"
        if leaking
        else ""
    )
    body = (
        f"<h1>{_e(title)}</h1>" + warning + f"<p>metric <code>{_e(report.metric)}</code>, split seed {report.seed}: "
        f"{split.get('n_train', 0)} train / {split.get('n_test', 0)} test; baseline <code>{_e(report.baseline)}</code>"
        f"; LM roles: {_e(', '.join(f'{k} = {v}' for k, v in report.lm_roles.items()))}</p>"
        "<h2>Results</h2>"
        + _table(headers, rows, numeric={4, 5, 6, 7, 8, 9})
        + '<p class="meta">*: the paired-bootstrap 95% interval of the difference excludes zero.</p>'
        + (
            "<h2>Leakage audit (test)</h2>"
            + _table(["method", *(label for _, label in _AUDIT_COLUMNS)], leak_rows, numeric=set(range(1, 10)))
            if leak_rows
            else ""
        )
        + ("<h2>Plots</h2>" + "".join(plots) if plots else "")
    )
    return _page(title, body)


# -- memory directories ------------------------------------------------------------------------------------------
_STORE_LABEL = {"craft": "M1 craft", "decomposition": "M2 decomposition", "web_action": "M3 web-action",
                "facts": "M4 facts"}  # fmt: skip


def _memory_page(directory: Any, diff: tuple[int, int] | None) -> str:
    from memento.memory.memento_memory import MementoMemory

    mem = MementoMemory(directory, read_only=True)
    versions = mem.versions()
    numbers = [int(v["version"]) for v in versions]
    snapshots = {n: mem.snapshot(n) for n in numbers}
    stores = list(_STORE_LABEL)
    version_rows = []
    for v in versions:
        stores_at = snapshots[int(v["version"])]["stores"]
        version_rows.append(
            [str(v["version"]), _e(v.get("batch")), _e(v.get("status")), _e(v.get("created_at")),
             *(str(len(stores_at.get(s, []))) for s in stores), _e(one_line(v.get("note"), 80))]
        )  # fmt: skip
    parts = [
        f"<h1>memento memory · {_e(directory)}</h1>",
        f"<p>current version {mem.version}; {len(versions)} versions</p><h2>Versions</h2>",
        _table(
            ["version", "batch", "status", "created", *(_STORE_LABEL[s] for s in stores), "note"],
            version_rows,
            numeric={0, 4, 5, 6, 7},
        ),  # fmt: skip
    ]
    for store in ("decomposition", "web_action"):
        history: dict[str, dict[int, dict[str, Any]]] = {}
        texts: dict[str, str] = {}
        for n in numbers:
            for rule in snapshots[n]["stores"].get(store, []):
                history.setdefault(rule["id"], {})[n] = rule
                texts[rule["id"]] = rule.get("text", "")
        rows = []
        for rule_id, by_version in history.items():
            cells = []
            for n in numbers:
                rule = by_version.get(n)
                cells.append(
                    ""
                    if rule is None
                    else f"+{rule.get('support', 0)}/−{rule.get('contradiction', 0)} "
                    f'<span class="meta">{_e(rule.get("status"))}</span>'
                )
            rows.append([f"<code>{_e(rule_id)}</code>", _e(texts[rule_id]), *cells])
        parts.append(f"<h2>{_STORE_LABEL[store]} rules: support/contradiction per version</h2>")
        parts.append(
            _table(["rule", "text", *(f"v{n}" for n in numbers)], rows) if rows else '<p class="meta">none</p>'
        )
    current = snapshots[numbers[-1]]["stores"] if numbers else {}
    for store, key in (("craft", "text"), ("facts", "text")):
        items = current.get(store, [])
        rows = [[f"<code>{_e(i.get('id'))}</code>", _e(i.get("entity", "")), _e(i.get(key, ""))] for i in items]
        parts.append(f"<h2>{_STORE_LABEL[store]} (current version)</h2>")
        parts.append(_table(["id", "entity", "text"], rows) if rows else '<p class="meta">none</p>')
    if diff is None and len(numbers) >= 2:
        diff = (numbers[-2], numbers[-1])
    if diff is not None:
        parts.append(_memory_diff(mem, *diff))
    return _page(f"memento memory · {directory.name}", "".join(parts))


def _memory_diff(mem: Any, a: int, b: int) -> str:
    result = mem.diff(a, b)
    old, new = mem.db.state_at(a), mem.db.state_at(b)
    rows = []
    for name, d in result.stores.items():
        for kind, ids, state in (("added", d.added, new), ("removed", d.removed, old), ("modified", d.modified, new)):
            for item_id in ids:
                before, after = old.get((name, item_id), {}), state.get((name, item_id), {})
                changes = ", ".join(
                    f"{key} {before.get(key)} → {after.get(key)}"
                    for key in ("support", "contradiction", "status")
                    if kind == "modified" and before.get(key) != after.get(key)
                )
                if kind == "modified" and before.get("text") != after.get("text"):
                    changes = (changes + "; " if changes else "") + f"text was: {one_line(before.get('text'), 160)}"
                rows.append(
                    f'<tr class="{kind}"><td>{_e(_STORE_LABEL.get(name, name))}</td><td>{kind}</td>'
                    f"<td><code>{_e(item_id)}</code></td><td>{_e(after.get('text', ''))}</td>"
                    f"<td>{_e(changes)}</td></tr>"
                )
    counts = _table(
        ["store", "+items", "−items", "~items", "+chars", "−chars", "~chars"],
        [[_e(_STORE_LABEL.get(n, n)), str(len(d.added)), str(len(d.removed)), str(len(d.modified)),
          str(d.chars_added), str(d.chars_deleted), str(d.chars_modified)] for n, d in result.stores.items()],
        numeric={1, 2, 3, 4, 5, 6},
    )  # fmt: skip
    detail = (
        "<table><thead><tr><th>store</th><th>change</th><th>item</th><th>text</th><th>what changed</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        if rows
        else '<p class="meta">no changes</p>'
    )
    return f"<h2>Diff: version {a} → {b}</h2>{counts}{detail}"


# -- entry point -------------------------------------------------------------------------------------------------
def report_kind(path: str | Path) -> ReportKind:
    """What ``path`` holds, or a one-line :class:`DataError` (a ``postgresql://`` location is a memory)."""
    from memento.memory.location import is_postgres

    if is_postgres(path):
        return "memory"
    path = Path(path)
    if path.is_dir():
        if (path / "memory.db").exists():
            return "memory"
        results = path / "results.json"
        if results.exists():
            data = _read_json(results)
            return "compare" if isinstance(data.get("methods"), dict) else "eval"
        raise DataError(f"{path} holds no results.json (eval or compare) and no memory.db (memory directory)")
    if not path.exists():
        raise DataError(f"no such file or directory: {path}")
    if path.name == "memory.db":
        return "memory"
    data = _read_json(path)
    if "methods" in data:
        return "compare"
    if "examples" in data:
        return "eval"
    if "nodes" in data and "task_text" in data:
        return "trajectory"
    raise DataError(f"{path} is not a trajectory, eval results, compare results or memory directory")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise DataError(f"{path} does not hold a JSON object")
    return data


def _write(path: Path, kind: ReportKind, out: Path | None, diff: tuple[int, int] | None = None) -> Path:
    directory = path if path.is_dir() else path.parent
    if kind == "trajectory":
        page = render_trajectory_page(Trajectory.model_validate(_read_json(path)))
        target = out or path.with_suffix(".html")
    elif kind == "eval":
        results = path / "results.json" if path.is_dir() else path
        page = _eval_page(_read_json(results), directory, title=f"memento eval · {directory.name}")
        target = out or directory / "report.html"
    elif kind == "compare":
        page = _compare_page(directory)
        target = out or directory / "report.html"
    else:
        memory_dir = path if path.is_dir() else path.parent
        page = _memory_page(memory_dir, diff)
        target = out or memory_dir / "report.html"
    atomic_write_text(target, page)
    return target


def write_report(path: str | Path, *, out: str | Path | None = None, diff: tuple[int, int] | None = None) -> Path:
    """Write the HTML report of ``path`` (see the module docstring) and return the file written.

    Args:
        path: a trajectory JSON file, an eval or compare directory (or its ``results.json``), a memory directory.
        out: the HTML file (default: ``<trajectory>.html`` beside the file, ``report.html`` inside a directory).
        diff: memory reports: the two versions to compare (default: the last two).

    Raises:
        DataError: ``path`` is missing or holds none of these.
    """
    from memento.memory.location import is_postgres, parse_location

    if is_postgres(path):  # a memory in PostgreSQL: the report goes to ``out`` or ./report.html
        target = Path(out) if out is not None else Path("report.html")
        atomic_write_text(target, _memory_page(parse_location(path), diff))
        return target
    path = Path(path)
    return _write(path, report_kind(path), Path(out) if out is not None else None, diff)
