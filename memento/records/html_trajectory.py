"""A trajectory as HTML (its exploration tree, waves, tool calls and thoughts) and the parts every report page is
made of (a page with its strict Content-Security-Policy, escaped text, links, tables).

Example:
    >>> from memento.records.html_trajectory import render_trajectory_page
    >>> from memento.core.types import Trajectory
    >>> "<!doctype html>" in render_trajectory_page(Trajectory(task_text="Who wrote Dune?")).lower()
    True
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from typing import Any

from memento.core.types import Node, ToolCall, Trajectory
from memento.utils.text import one_line

__all__ = ["trajectory_section", "render_trajectory_page"]


_CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "base-uri 'none'; form-action 'none'"
)


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em auto;max-width:1200px;
padding:0 1em;color:#1b1f24;background:#fff}
h1{font-size:1.45em;margin:.2em 0}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}th,td{border:1px solid #d0d7de;padding:3px 7px;
vertical-align:top;text-align:left}th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
details.node{margin:.25em 0 .25em 1.1em;border-left:2px solid #d0d7de;padding-left:.6em}
details.node>summary{cursor:pointer;list-style-position:outside}
.badge{display:inline-block;border-radius:9px;padding:0 .55em;font-size:12px;color:#fff;background:#6e7781}
.answered{background:#1a7f37}.failed{background:#cf222e}.decomposed{background:#0969da}.pending{background:#9a6700}
.meta{color:#57606a;font-size:12px}.answer{background:#f6f8fa;padding:.3em .5em;margin:.3em 0;white-space:pre-wrap}
.err{color:#cf222e}.tool{font-family:ui-monospace,Menlo,monospace;font-size:12px}.sig{font-weight:600}
ul.sources{margin:.2em 0;padding-left:1.3em}button{margin:.2em .3em .2em 0}img.plot{max-width:100%;
border:1px solid #d0d7de;margin:.5em 0}.added{background:#dafbe1}.removed{background:#ffebe9}
.modified{background:#fff8c5}
code{font-family:ui-monospace,Menlo,monospace;font-size:12px}
"""


_JS = """
function setAll(open){document.querySelectorAll('details').forEach(function(d){d.open=open;});}
document.addEventListener('DOMContentLoaded',function(){
  var n=document.querySelectorAll('[data-node-id]').length;var c=document.getElementById('node-count');
  if(c){c.textContent=n+' nodes';}
});
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style><script>{_JS}</script></head>\n<body>\n"
        f'{body}\n<p class="meta">written by memento report</p>\n</body></html>\n'
    )


def _link(url: str, text: str | None = None) -> str:
    shown = _e(one_line(text or url, 120))
    if url.startswith(("http://", "https://")):
        return f'<a href="{_e(url)}" rel="noopener noreferrer" target="_blank">{shown}</a>'
    return f"<code>{shown}</code>"


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]], *, numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{cell}</td>' if i in numeric else f"<td>{cell}</td>" for i, cell in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# -- trajectories ------------------------------------------------------------------------------------------------
def _tool_call(call: ToolCall, thought: str = "") -> str:
    from memento.web.tool_output import result_summary

    args = ", ".join(f"{k}={one_line(v, 120)}" for k, v in call.args.items())
    flags = " cached" if call.cached else ""
    if call.page is not None:
        flags += f", {call.page.chars} characters"
    error = f' <span class="err">{_e(one_line(call.error, 200))}</span>' if call.error else ""
    summary = result_summary(call, result_chars=300)
    result = f'<div class="meta">{_e(summary)}</div>' if summary else ""
    why = f'<div class="meta">thought: {_e(one_line(thought, 300))}</div>' if thought else ""
    return (
        f'<li class="tool"><span class="sig">{_e(call.kind)}</span>({_e(args)}) '
        f'<span class="meta">{call.ms:.0f} ms{flags}</span>{error}{why}{result}</li>'
    )


def _thoughts(traj: Trajectory) -> dict[str, str]:
    return {step.call_id: step.thought for step in traj.steps if step.call_id and step.thought}


def _node(node: Node, traj: Trajectory, calls: dict[str | None, list[ToolCall]], depth: int = 0) -> str:
    status = _e(node.status)
    steps = f", {node.steps} steps" if node.steps else ""
    parts = [
        f'<details class="node" data-node-id="{_e(node.id)}"{" open" if depth < 2 else ""}>',
        f'<summary><b>{_e(node.id)}</b> <span class="badge {status}">{status}</span> '
        f'<span class="meta">wave {node.wave}{steps}</span> {_e(node.question)}</summary>',
    ]
    if node.answer:
        parts.append(f'<div class="answer">{_e(node.answer)}</div>')
    if node.error:
        parts.append(f'<div class="err">{_e(node.error)}</div>')
    if node.evidence:
        items = "".join(
            f"<li>{_link(ev.url, ev.title or ev.url)}"
            + (f' <span class="meta">{_e(ev.published)}</span>' if ev.published else "")
            + (f'<div class="meta">{_e(one_line(ev.snippet, 240))}</div>' if ev.snippet else "")
            + "</li>"
            for ev in node.evidence
        )
        parts.append(f'<div>sources:</div><ul class="sources">{items}</ul>')
    own = calls.get(node.id, [])
    if own:
        total = sum(c.ms for c in own)
        parts.append(f"<div>tool calls ({len(own)}, {total / 1000:.2f} s):</div><ul>")
        thoughts = _thoughts(traj)
        parts.extend(_tool_call(c, thoughts.get(c.id, "")) for c in own)
        parts.append("</ul>")
    for child in traj.children(node.id):
        parts.append(_node(child, traj, calls, depth + 1))
    parts.append("</details>")
    return "".join(parts)


def _waves(traj: Trajectory, calls: dict[str | None, list[ToolCall]]) -> str:
    waves: dict[int, list[Node]] = {}
    for node in traj.nodes:
        if node.wave >= 0:
            waves.setdefault(node.wave, []).append(node)
    rows = []
    for wave in sorted(waves):
        nodes = waves[wave]
        wave_calls = [c for n in nodes for c in calls.get(n.id, [])]
        answered = sum(1 for n in nodes if n.status == "answered")
        failed = sum(1 for n in nodes if n.status == "failed")
        timing = traj.timings.get(f"wave_{wave}_s")
        rows.append(
            [
                str(wave),
                str(len(nodes)),
                str(answered),
                str(failed),
                str(len(wave_calls)),
                f"{sum(c.ms for c in wave_calls) / 1000:.2f}",
                "–" if timing is None else f"{timing:.2f}",
            ]
        )
    if not rows:
        return ""
    headers = ["wave", "sub-questions", "answered", "failed", "tool calls", "tool s", "wave s"]
    return "<h2>Waves</h2>" + _table(headers, rows, numeric={0, 1, 2, 3, 4, 5, 6})


def trajectory_section(traj: Trajectory, *, heading: str = "h2") -> str:
    """The body of a trajectory's report (also used per example in eval and compare reports)."""
    calls: dict[str | None, list[ToolCall]] = {}
    for call in traj.tool_calls:
        calls.setdefault(call.node_id, []).append(call)
    known = {n.id for n in traj.nodes}
    parts = [f'<{heading}>Question</{heading}><div class="answer">{_e(traj.task_text)}</div>']
    if traj.prediction:
        rows = [[_e(k), f'<div class="answer">{_e(v if isinstance(v, str) else json.dumps(v))}</div>']
                for k, v in traj.prediction.items()]  # fmt: skip
        parts.append(f"<{heading}>Prediction</{heading}>" + _table(["field", "value"], rows))
    if traj.error:
        parts.append(f'<p class="err">error: {_e(traj.error)}</p>')
    u = traj.usage
    parts.append(
        f'<p class="meta">method {_e(traj.method or "?")} · {u.lm_calls} LM calls · '
        f"{u.prompt_tokens + u.completion_tokens} tokens · {u.searches} searches · {u.fetches} fetches · "
        f"{traj.timings.get('total_s', 0.0):.1f} s"
        + (f" · score {traj.score:.3f}" if traj.score is not None else "")
        + (f" · memory version {traj.memory_version}" if traj.memory_version is not None else "")
        + "</p>"
    )
    parts.append(
        f'<{heading}>Exploration tree <span class="meta" id="node-count"></span></{heading}>'
        '<button type="button" onclick="setAll(true)">expand all</button>'
        '<button type="button" onclick="setAll(false)">collapse all</button>'
    )
    for root in (n for n in traj.nodes if n.parent_id is None or n.parent_id not in known):
        parts.append(_node(root, traj, calls))
    loose = [c for key, group in calls.items() if key not in known for c in group]
    if loose:
        thoughts = _thoughts(traj)
        items = "".join(_tool_call(c, thoughts.get(c.id, "")) for c in loose)
        parts.append(f"<{heading}>Other tool calls</{heading}><ul>{items}</ul>")
    parts.append(_waves(traj, calls))
    if traj.timings:
        rows = [[_e(k), f"{v:.3f}"] for k, v in traj.timings.items()]
        parts.append(f"<{heading}>Timings</{heading}>" + _table(["phase", "seconds"], rows, numeric={1}))
    if traj.notes:
        parts.append(f"<{heading}>Notes</{heading}><ul>" + "".join(f"<li>{_e(n)}</li>" for n in traj.notes) + "</ul>")
    return "".join(parts)


def render_trajectory_page(traj: Trajectory) -> str:
    """A whole page for one trajectory."""
    title = f"memento run · {one_line(traj.task_text, 80)}"
    return _page(title, f"<h1>{_e(title)}</h1>" + trajectory_section(traj))


def _num(value: Any, digits: int = 3) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "–"
    return "–" if number != number else f"{number:.{digits}f}"
