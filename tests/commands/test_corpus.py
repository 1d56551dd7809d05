"""`memento corpus build` and `memento corpus search`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from memento.cli import app

runner = CliRunner()


def flat(text: str) -> str:
    """Rich wraps long lines at the terminal width: compare with whitespace collapsed."""
    return " ".join(text.split())


ROWS = [
    {"doc_id": "a", "title": "Albany County", "text": "Albany County is a county in the state of New York."},
    {"doc_id": "b", "title": "Cape Verde", "text": "Cape Verde is an island country in the Atlantic Ocean."},
    {"url": "https://n.example/x", "title": "Island news", "text": "News about an island.", "published": "2021-01-02"},
]


def _src(tmp_path, bad_lines=()):
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join([json.dumps(r) for r in ROWS] + list(bad_lines)) + "\n", encoding="utf-8")
    return src


def test_build_then_search(tmp_path):
    src = _src(tmp_path, bad_lines=["{broken"])
    out = tmp_path / "idx"
    result = runner.invoke(app, ["corpus", "build", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "3 documents, 1 malformed entries skipped" in result.stdout
    assert f"{src}:4: invalid JSON" in result.stderr
    result = runner.invoke(app, ["corpus", "search", str(out), "island country Atlantic", "-k", "1"])
    assert result.exit_code == 0, result.output
    assert "Cape Verde" in result.stdout and "Albany" not in result.stdout
    result = runner.invoke(app, ["corpus", "search", str(out), "island", "--before", "2021-01-01"])
    assert result.exit_code == 0 and "Cape Verde" in result.stdout and "Island news" not in result.stdout
    result = runner.invoke(app, ["corpus", "search", str(out), "zyzzyva"])
    assert result.exit_code == 0 and "no results" in result.stdout


def test_strict_build_fails_with_file_and_line(tmp_path):
    src = _src(tmp_path, bad_lines=['{"title": "no text"}'])
    result = runner.invoke(app, ["corpus", "build", str(src), "-o", str(tmp_path / "idx"), "--strict"])
    assert result.exit_code == 1
    assert f"{src}:4: missing or empty 'text'" in flat(result.stderr)
    assert "Traceback" not in result.output and not (tmp_path / "idx").exists()


def test_search_a_source_file_builds_its_index_on_first_use(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMENTO_WEB_CACHE_DIR", str(tmp_path / "cache"))
    src = _src(tmp_path)
    result = runner.invoke(app, ["corpus", "search", str(src), "Albany"])
    assert result.exit_code == 0, result.output
    assert "Albany County" in result.stdout
    assert len(list((tmp_path / "cache" / "corpora").iterdir())) == 1


def test_bad_inputs_are_one_line_errors(tmp_path):
    result = runner.invoke(app, ["corpus", "search", str(tmp_path / "nope"), "x"])
    assert result.exit_code == 1 and "corpus not found" in flat(result.stderr)
    result = runner.invoke(app, ["corpus", "search", str(tmp_path), "x", "--undated", "maybe"])
    assert result.exit_code == 1 and "--undated" in flat(result.stderr)
    result = runner.invoke(app, ["corpus", "build", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "i")])
    assert result.exit_code == 1 and "not found" in flat(result.stderr)
