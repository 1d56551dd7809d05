"""`memento compare`: each method's billed LM calls are what the server received for it (own response cache),
an LM failing every call is a failure (non-zero exit, named in results.md), provenance in the report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import dspy
from typer.testing import CliRunner

from memento.cli import app
from memento.core.config import load_settings
from memento.optimize.compare import compare
from memento.tasks.task import get_task
from memento.testing import OpenAICompatServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from commands.test_compare import _engine, multihop  # noqa: E402,F401 - the fixture is used by name


class _Windows:
    """Records the server's request count when each method finishes."""

    def __init__(self, server: OpenAICompatServer) -> None:
        self.server = server
        self.marks: list[tuple[str, int]] = []

    def phase(self, method: str, phase: str, total: int | None) -> None:
        pass

    def example(self, method: str, phase: str, score: float, error: bool) -> None:
        pass

    def method_done(self, result, method_dir: Path) -> None:
        self.marks.append((result.method, self.server.chat_requests))


def test_each_method_is_billed_what_the_server_received(multihop: dict, tmp_path: Path) -> None:  # noqa: F811
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=str(tmp_path / "shared"))
    with OpenAICompatServer(_engine(multihop["gold"])) as server:
        settings = load_settings(
            flags={
                "lm": {"model": "openai/scripted", "api_base": server.api_base, "cache": True},
                "web": {"corpus": str(multihop["corpus"]), "cache_dir": str(tmp_path / "webcache")},
                "run": {"threads": 2, "seed": 42},
            }
        )
        task = get_task("qa")
        windows = _Windows(server)
        report = compare(
            task, "closed_book,react", out_dir=tmp_path / "out", settings=settings, budget="tiny",
            data=task.load(multihop["questions"]), n_train=4, n_test=6, observer=windows,
        )  # fmt: skip
    before = 0
    assert [name for name, _ in windows.marks] == ["closed_book", "react"]
    for name, at_end in windows.marks:
        costs = report.methods[name].costs
        billed = costs.train.lm_calls + costs.test.lm_calls
        assert billed == at_end - before > 0, name
        before = at_end
    # each method had its own cache directory; the process-wide cache is restored afterwards
    assert (tmp_path / "out" / "react" / "lm-cache").is_dir()
    assert dspy.cache.disk_cache_dir == str(tmp_path / "shared")
    md = (tmp_path / "out" / "results.md").read_text()
    assert "test LM calls (cached)" in md and "## Provenance" not in md  # no provenance given through the API


def test_an_lm_failing_every_call_fails_the_comparison(multihop: dict, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "out"
    with OpenAICompatServer(always_status=500) as server:
        result = CliRunner().invoke(
            app,
            ["compare", "--task", "qa", "--methods", "closed_book", "--data", str(multihop["questions"]),
             "--n-train", "2", "--n-test", "3", "--out", str(out), "--budget", "tiny", "--corpus",
             str(multihop["corpus"]), "--lm", "openai/x", "--api-base", server.api_base],
            env={"MEMENTO_LM_CACHE": "false", "MEMENTO_LM_NUM_RETRIES": "0", "COLUMNS": "200"},
        )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "1 method(s) failed: closed_book" in result.output
    md = (out / "results.md").read_text()
    assert "every example failed (3 of 3)" in md and "| 3/3 |" in md
    saved = json.loads((out / "results.json").read_text())
    assert saved["methods"]["closed_book"]["status"] == "error"
    prov = saved["provenance"]
    assert prov["roles"]["lm"]["model"] == "openai/x" and prov["versions"]["dspy"]
    assert prov["data"]["data"]["sha256"] and prov["ended_at"] >= prov["started_at"]
    assert "## Provenance" in md
