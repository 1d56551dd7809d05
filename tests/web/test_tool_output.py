"""Typed web results, the one renderer and the one recorder: whole results recorded, clipping only when rendered."""

from __future__ import annotations

import json

import pytest

from memento.core.types import PageResult, SearchResults, ToolCall, ToolError
from memento.core.untrusted import quote_data
from memento.utils.scrub import register_secret
from memento.web.offline_corpus import OfflineCorpus
from memento.web.tool_output import ToolRecorder, call_line, render_call, render_page, render_result
from memento.web.web_tools import WebTools

LONG = "Paul Clyne was District Attorney of Albany County. " * 60
SNIPPETY = "The snippet of this page is long: " + "word " * 200
ROWS = [
    {"doc_id": "clyne", "title": "Paul Clyne", "text": LONG},
    {"doc_id": "soares", "title": "David Soares", "text": "David Soares is the Albany County District Attorney."},
    {"doc_id": "creds", "title": "Config page", "text": "Mirror at https://admin:hunter2@mirror.example/x. " * 3},
]


@pytest.fixture
def corpus(tmp_path):
    src = tmp_path / "corpus.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    return OfflineCorpus.build([src], tmp_path / "idx")


def test_open_returns_the_full_page_and_only_rendering_clips_it(corpus):
    tools = WebTools(corpus, page_chars=200)
    page = tools.open("corpus://clyne")
    assert isinstance(page, PageResult)
    assert page.text == LONG  # the whole document, as the corpus holds it
    assert page.chars == len(page.text) > 200 and len(page.sha256) == 64
    shown = tools.render(page)
    assert shown.startswith("Title: Paul Clyne\nURL: corpus://clyne") and "[... clipped:" in shown
    assert len(shown) < 400
    # the text tool records the same whole page, the agent reads the clipped rendering
    observation = tools.scrape("corpus://clyne")
    [call] = tools.tool_calls
    assert call.page is not None and call.page.text == page.text and call.page.sha256 == page.sha256
    assert observation == quote_data(shown) and call.result == ""  # no clipped copy is kept
    dumped = call.model_dump(mode="json")
    assert "text" not in dumped["page"] and dumped["page"]["chars"] == page.chars  # serialised: hash + length


def test_search_keeps_every_hit_with_its_whole_snippet(corpus, tmp_path):
    class Backend:
        def search(self, query, k=10, before=None, undated="keep"):
            from memento.web.search_result import SearchResult

            return [SearchResult(url=f"https://ex.org/{i}", title=f"T{i}", snippet=SNIPPETY) for i in range(7)]

    tools = WebTools(Backend(), k=7, snippet_chars=50)
    text = tools.search_web("albany")
    [call] = tools.tool_calls
    assert isinstance(call.search, SearchResults) and len(call.search.hits) == 7
    assert all(hit.snippet == SNIPPETY for hit in call.search.hits)  # whole, not the 50 characters shown
    assert call.result_urls == [f"https://ex.org/{i}" for i in range(7)]
    assert "[7] T6" in text and SNIPPETY not in text and text == quote_data(render_call(call, snippet_chars=50))


def test_failures_are_typed_and_read_as_error_lines(corpus):
    tools = WebTools(corpus)
    empty = tools.search("  ")
    missing = tools.open("https://not-in-corpus.example/")
    assert isinstance(empty, ToolError) and empty.reason == "empty query"
    assert isinstance(missing, ToolError) and missing.reason.startswith("NotCached")
    assert render_result(missing).startswith("error: ")
    tools.scrape("https://not-in-corpus.example/")
    assert tools.tool_calls[0].error == missing.reason and tools.tool_calls[0].page is None


def test_url_credentials_and_secrets_never_reach_a_record(corpus):
    register_secret("sk-lossless-secret-0123456789")
    tools = WebTools(corpus)
    page = tools.open("corpus://creds")
    assert isinstance(page, PageResult)
    assert "hunter2" not in page.text and "***:***@mirror.example" in page.text
    recorded = ToolRecorder(None).record(
        "scrape",
        {"url": "https://bob:pw123@ex.org/a"},
        PageResult.of_text(
            url="https://bob:pw123@ex.org/a",
            final_url="https://bob:pw123@ex.org/b",
            text="sk-lossless-secret-0123456789 said",
        ),
    )
    assert recorded.page is not None
    blob = recorded.model_dump_json() + recorded.page.text
    assert "pw123" not in blob and "sk-lossless-secret" not in blob
    assert recorded.page.url == "https://***:***@ex.org/a" and recorded.result_urls == ["https://***:***@ex.org/b"]


def test_a_record_from_before_typed_results_still_renders():
    legacy = ToolCall.model_validate({"kind": "scrape", "args": {"url": "corpus://x"}, "result": "Title: X\nURL: …"})
    assert legacy.page is None and render_call(legacy) == "Title: X\nURL: …"
    assert call_line(legacy).endswith("-> Title: X URL: …")


def test_a_page_read_back_without_its_text_says_so():
    page = PageResult.of_text(url="corpus://x", title="X", text="abc " * 10)
    back = PageResult.model_validate_json(page.model_dump_json())
    assert back.text == "" and not back.text_loaded and back.sha256 == page.sha256
    assert "page text not loaded: 40 characters" in render_page(back)
