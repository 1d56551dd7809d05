"""What MEMENTO's distillers read of one run: per-sub-question records, search logs, findings, source pages.

A run record is built per sub-question: the question, its status and answer, and under it that node's own
searches (query, result titles) and scrapes (whether the page was used as evidence). The search log is the same
tree without answers, so web-action distillation always sees the queries; it has its own budget. Nothing is cut
from the middle of a concatenation: a text over its budget is first rendered with fewer result titles per search
(:data:`TITLE_LADDER`), then summarised by the caller (a recorded LLM step).

Example:
    >>> from memento.core.types import Node, SearchHit, SearchResults, ToolCall, Trajectory
    >>> traj = Trajectory(task_text="Where was Ed Wood born?", nodes=[
    ...     Node(id="root", question="Where was Ed Wood born?"),
    ...     Node(id="n1", parent_id="root", question="Ed Wood birthplace?", answer="Poughkeepsie", status="answered")])
    >>> hits = SearchResults(query="Ed Wood born", hits=[SearchHit(url="corpus://ed-wood", title="Ed Wood")])
    >>> traj.tool_calls.append(ToolCall(kind="search_web", args={"query": "Ed Wood born"}, node_id="n1",
    ...     search=hits, result_urls=hits.urls))
    >>> print(search_log(traj))
    Q1 [answered] Ed Wood birthplace?
      search "Ed Wood born" -> 1 results: Ed Wood
"""

from __future__ import annotations

from typing import Any

from memento.core.types import Node, ToolCall, Trajectory
from memento.memory.memory_guard import texts_read
from memento.utils.text import one_line

__all__ = [
    "run_record",
    "search_log",
    "judged_tree",
    "findings",
    "page_text",
    "has_record",
    "read_texts",
    "result_titles",
    "TITLE_LADDER",
]


def _norm_url(url: str) -> str:
    return str(url or "").strip().rstrip("/").lower()


def has_record(trajectory: Trajectory) -> bool:
    """Whether a run left anything to learn from (sub-questions or tool calls): crashed runs do not."""
    return any(n.parent_id is not None for n in trajectory.nodes) or bool(trajectory.tool_calls)


def result_titles(call: ToolCall) -> list[str]:
    """The titles of a search call's results, in order (from its typed results; a record without them has none)."""
    if call.search is None:
        return []
    return [hit.title or hit.url for hit in call.search.hits]


def _sub_questions(trajectory: Trajectory) -> list[Node]:
    return [n for n in trajectory.nodes if n.parent_id is not None]


def _calls_by_node(trajectory: Trajectory) -> dict[str | None, list[ToolCall]]:
    known = {n.id for n in _sub_questions(trajectory)}
    out: dict[str | None, list[ToolCall]] = {}
    for call in trajectory.tool_calls:
        out.setdefault(call.node_id if call.node_id in known else None, []).append(call)
    return out


def _tool_lines(calls: list[ToolCall], used: set[str], *, titles: int = 5) -> list[str]:
    lines = []
    for call in calls:
        if call.kind == "search_web":
            query = call.args.get("query", "")
            shown = result_titles(call)
            head = f'  search "{one_line(query, 200)}" -> {len(call.result_urls) or len(shown)} results'
            if call.error:
                head += f" (error: {one_line(call.error, 80)})"
            if shown and titles > 0:
                head += ": " + " | ".join(one_line(t, 80) for t in shown[:titles])
            lines.append(head)
        elif call.kind == "scrape":
            url = str(call.args.get("url", ""))
            mark = "used as evidence" if _norm_url(url) in used else "not used"
            if call.error:
                mark = f"failed: {one_line(call.error, 80)}"
            lines.append(f"  scrape {one_line(url, 200)} ({mark})")
        elif call.kind == "search_memory":
            lines.append(f'  search_memory "{one_line(call.args.get("query", ""), 200)}"')
    return lines


def _tree(trajectory: Trajectory, *, answers: bool, tools: bool, titles: int = 5) -> str:
    used = {_norm_url(e.url) for n in trajectory.nodes for e in n.evidence}
    by_node = _calls_by_node(trajectory) if tools else {}
    blocks = []
    for i, node in enumerate(_sub_questions(trajectory), 1):
        lines = [f"Q{i} [{node.status}] {one_line(node.question, 400)}"]
        if answers:
            lines.append(f"  answer: {one_line(node.answer, 400) or '(none)'}")
        lines += _tool_lines(by_node.get(node.id, []), used, titles=titles)
        blocks.append("\n".join(lines))
    other = by_node.get(None, [])
    if other:
        blocks.append("\n".join(["other tool calls (exploration, root):", *_tool_lines(other, used, titles=titles)]))
    return "\n".join(blocks)


#: result titles shown per search, from the most to the least detailed rendering (the compaction ladder)
TITLE_LADDER: tuple[int, ...] = (5, 3, 1, 0)


def run_record(trajectory: Trajectory, *, titles: int = 5) -> str:
    """The whole run, one block per sub-question: question, status, answer, its searches (with up to ``titles``
    result titles each) and scrapes."""
    return _tree(trajectory, answers=True, tools=True, titles=titles)


def search_log(trajectory: Trajectory, *, titles: int = 5) -> str:
    """The run's searches (with up to ``titles`` result titles each) and scrapes grouped under the sub-question that
    made them (no answers). Every query is always listed."""
    return _tree(trajectory, answers=False, tools=True, titles=titles)


def judged_tree(trajectory: Trajectory) -> str:
    """The sub-questions with their answers (what supervised reflection reads), one line pair each."""
    return _tree(trajectory, answers=True, tools=False)


def findings(trajectory: Trajectory, *, is_no_data: Any, max_chars: int) -> list[str]:
    """Answered sub-questions with their evidence, split into chunks of at most ``max_chars`` (never dropped)."""
    blocks = []
    for node in _sub_questions(trajectory):
        if node.status != "answered" or is_no_data(node.answer or ""):
            continue
        evidence = "; ".join(f"{e.url} {one_line(e.snippet, 200)}" for e in node.evidence[:6])
        blocks.append(f"Q: {node.question}\nA: {one_line(node.answer, 600)}\nEvidence: {evidence or '(none)'}")
    chunks: list[str] = []
    for block in blocks:
        block = block[:max_chars]
        if chunks and len(chunks[-1]) + len(block) + 2 <= max_chars:
            chunks[-1] += "\n\n" + block
        else:
            chunks.append(block)
    return chunks


#: every text the run read from the web (what the memory guard compares candidates with)
read_texts = texts_read


def page_text(trajectory: Trajectory, urls: list[str], *, max_chars: int) -> str:
    """The text of the pages at ``urls`` as the run read them (the full text of its scrapes while it is in memory;
    else the evidence snippets), cut to ``max_chars`` in all."""
    wanted = [_norm_url(u) for u in urls if u]
    pages: dict[str, str] = {}
    for call in trajectory.tool_calls:
        page = call.page
        if page is not None and page.text:
            for url in (page.url, page.address, str(call.args.get("url", ""))):
                pages.setdefault(_norm_url(url), page.text)
    snippets: dict[str, list[str]] = {}
    for node in trajectory.nodes:
        for e in node.evidence:
            snippets.setdefault(_norm_url(e.url), []).append(e.snippet)
    parts = []
    for url in dict.fromkeys(wanted):
        text = pages.get(url) or "\n".join(s for s in snippets.get(url, []) if s)
        if text:
            parts.append(f"[{url}]\n{text}")
    out = "\n\n".join(parts)
    return out[:max_chars]
