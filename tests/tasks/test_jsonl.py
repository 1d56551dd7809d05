"""Task data files: every loader reports a bad file or row as one DataError naming file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from memento.core.errors import DataError
from memento.tasks import get_task


@pytest.mark.parametrize("name", ["qa", "multihop", "opinion", "sales"])
def test_missing_file_and_bad_rows(tmp_path: Path, name: str) -> None:
    task = get_task(name)
    with pytest.raises(DataError, match="data file not found"):
        task.load(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n[1, 2]\n")
    with pytest.raises(DataError, match=r"bad.jsonl:2: not an? .* row \(a JSON list, not an object\)"):
        task.load(bad)
    bad.write_text("{not json\n")
    with pytest.raises(DataError, match=r"bad.jsonl:1: not an? .* row \(JSONDecodeError"):
        task.load(bad)
    bad.write_text('{"something": 1}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:1: .*missing"):
        task.load(bad)
