"""`memento report` on a trajectory with typed tool results and agent steps: every hit, the page's length, the
thought behind each call; a trajectory read back from a results file says its page text is not loaded."""

from __future__ import annotations

from memento.core.types import AgentStep, Node, PageResult, SearchHit, SearchResults, ToolCall, Trajectory
from memento.records.html_report import trajectory_section


def _trajectory() -> Trajectory:
    hits = [SearchHit(url=f"https://ex.org/{i}", title=f"Result <{i}>") for i in range(4)]
    search = ToolCall(kind="search_web", args={"query": "dune"}, search=SearchResults(query="dune", hits=hits))
    page = PageResult.of_text(url="https://ex.org/0", title="Dune", text="Dune is a 1965 novel. " * 100)
    scrape = ToolCall(kind="scrape", args={"url": "https://ex.org/0"}, page=page)
    for call in (search, scrape):
        call.node_id = "root"
    return Trajectory(
        task_text="Who wrote Dune?",
        nodes=[Node(id="root", question="Who wrote Dune?", answer="Frank Herbert", status="answered")],
        tool_calls=[search, scrape],
        steps=[
            AgentStep(node_id="root", index=0, thought="look it up", tool_name="search_web", call_id=search.id),
            AgentStep(node_id="root", index=1, thought="read the first hit", tool_name="scrape", call_id=scrape.id),
        ],
    )


def test_the_report_shows_typed_results_and_thoughts():
    html = trajectory_section(_trajectory())
    assert "4 results: Result &lt;0&gt; &lt;https://ex.org/0&gt; | Result &lt;1&gt;" in html  # every hit, escaped
    assert "2200 characters" in html and "Dune is a 1965 novel." in html
    assert "thought: look it up" in html and "thought: read the first hit" in html


def test_a_trajectory_from_a_results_file_says_its_page_text_is_not_loaded():
    back = Trajectory.model_validate_json(_trajectory().model_dump_json())
    html = trajectory_section(back)
    assert "[2200 characters not loaded]" in html and "Dune is a 1965 novel." not in html
