"""`memory stats` and `memory diff` agree on the size of every store."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memento.cli import app
from memento.memory.embedder import HashingEmbedder
from memento.memory.memento_memory import MementoMemory


def test_stats_and_diff_agree_on_sizes(tmp_path: Path) -> None:
    mem = MementoMemory(tmp_path / "mem", embedder=HashingEmbedder())
    with mem.transaction(batch=1) as tx:
        mem.craft.add("Open the encyclopedia page of the entity.", batch=1, tx=tx)
        mem.facts.add("Albany County", "is a county in the state of New York.", batch=1, tx=tx)
        mem.facts.add("Ed Wood", "was born in Poughkeepsie.", batch=1, tx=tx)
        mem.decomposition.add("Split a comparison into one question per entity.", batch=1, tx=tx)
        mem.web_action.add("Search the full name in quotes.", batch=1, tx=tx)
        mem.commit_version(batch=1, note="batch 1", tx=tx)
    version = mem.version
    runner = CliRunner()
    stats = json.loads(runner.invoke(app, ["memory", "stats", "--memory", str(tmp_path / "mem"), "--json"]).output)
    diff = mem.diff(0, version)
    sizes = {
        "craft": stats["craft"]["chars"],
        "decomposition": stats["decomposition"]["chars"],
        "web_action": stats["web_action"]["chars"],
        "facts": stats["facts"]["chars"],
    }
    assert sizes == {name: d.chars_after for name, d in diff.stores.items()}
    assert sizes["facts"] == len("Albany County: is a county in the state of New York.") + len(
        "Ed Wood: was born in Poughkeepsie."
    )
