"""Bad files at every entry point: one line naming the file, a non-zero exit, no traceback, nothing left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memento.cli import app

LM = ["--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1"]  # never reached: bad input fails first
JUSTICE_HEADER = "ID,name,href,docket,term,first_party,second_party,facts,facts_len,majority_vote,minority_vote,"
JUSTICE_HEADER += "first_party_winner,decision_type,disposition,issue_area\n"


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _fails_cleanly(root: Path, args: list[str], *, names: str, env: dict[str, str] | None = None) -> str:
    """Run the CLI; assert one line naming ``names``, exit != 0, no traceback and no new file under ``root``."""
    before = _snapshot(root)
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300", **(env or {})})
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code not in (0, None), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert len(lines) == 1, result.output
    assert names in lines[0], lines[0]
    assert _snapshot(root) == before, sorted(_snapshot(root) - before)
    return lines[0]


@pytest.fixture
def bad(tmp_path: Path) -> dict[str, Path]:
    files = {
        "binary": tmp_path / "binary.jsonl",
        "latin1": tmp_path / "latin1.jsonl",
        "dir": tmp_path / "a_directory.jsonl",
        "csv_binary": tmp_path / "binary.csv",
        "csv_latin1": tmp_path / "latin1.csv",
        "plain": tmp_path / "plain.txt",
    }
    files["binary"].write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    files["latin1"].write_bytes('{"question": "Caf\xe9 owner?", "answers": ["Ren\xe9"]}\n'.encode("latin-1"))
    files["dir"].mkdir()
    files["csv_binary"].write_bytes(b"PK\x03\x04\x00\x00" + bytes(range(256)))
    row = "1,x,h,d,1999,Caf\xe9,B,<p>f</p>,1,5,4,True,m,a,b\n"
    files["csv_latin1"].write_bytes((JUSTICE_HEADER + row).encode("latin-1"))
    files["plain"].write_text("just a file\n")
    return files


@pytest.mark.parametrize("kind", ["binary", "latin1", "dir"])
def test_bad_jsonl_data(tmp_path, bad, kind):
    path = bad[kind]
    args = ["eval", "--task", "multihop", "--data", str(path), "--method", "closed_book", "--out", "o", *LM]
    _fails_cleanly(tmp_path, args, names=str(path))


@pytest.mark.parametrize("kind", ["csv_binary", "csv_latin1", "dir"])
def test_bad_justice_csv(tmp_path, bad, kind):
    path = bad[kind]
    args = ["eval", "--task", "legal", "--data", str(path), "--method", "closed_book", "--out", "o", *LM]
    _fails_cleanly(tmp_path, args, names=str(path))


@pytest.mark.parametrize("kind", ["binary", "latin1", "dir"])
def test_bad_config_file_by_flag_and_by_environment(tmp_path, bad, kind):
    path = bad[kind]
    _fails_cleanly(tmp_path, ["config", "show", "--config", str(path)], names=str(path))
    _fails_cleanly(tmp_path, ["config", "show"], names=str(path), env={"MEMENTO_CONFIG": str(path)})


def _good_data(tmp_path: Path) -> Path:
    path = tmp_path / "good.jsonl"
    path.write_text(json.dumps({"question": "Who?", "answers": ["Ann"]}) + "\n")
    return path


@pytest.mark.parametrize("where", ["file", "under_file"])
def test_eval_out_at_or_under_a_file(tmp_path, bad, where):
    out = bad["plain"] if where == "file" else bad["plain"] / "results"
    args = ["eval", "--task", "multihop", "--data", str(_good_data(tmp_path)), "--method", "closed_book"]
    _fails_cleanly(tmp_path, [*args, "--out", str(out), *LM], names=str(out))


@pytest.mark.parametrize("where", ["file", "under_file"])
def test_run_out_and_memory_at_or_under_a_file(tmp_path, bad, where):
    target = bad["plain"] if where == "file" else bad["plain"] / "sub"
    if where == "under_file":
        _fails_cleanly(tmp_path, ["run", "-q", "Who?", "--method", "closed_book", "--out", str(target / "t.json"), *LM],
                       names=str(target))  # fmt: skip
    _fails_cleanly(tmp_path, ["run", "-q", "Who?", "--method", "memento", "--memory", str(target), *LM],
                   names=str(target))  # fmt: skip


@pytest.mark.parametrize("where", ["file", "under_file"])
def test_train_memory_at_or_under_a_file(tmp_path, bad, where):
    target = bad["plain"] if where == "file" else bad["plain"] / "mem"
    args = ["train", "--task", "multihop", "--data", str(_good_data(tmp_path)), "--memory", str(target), *LM]
    _fails_cleanly(tmp_path, args, names=str(target))


@pytest.mark.parametrize("where", ["file", "under_file"])
def test_corpus_build_out_at_or_under_a_file(tmp_path, bad, where):
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps({"id": "d1", "title": "T", "text": "some words here"}) + "\n")
    out = bad["plain"] if where == "file" else bad["plain"] / "index"
    _fails_cleanly(tmp_path, ["corpus", "build", str(source), "-o", str(out)], names=str(out))


@pytest.mark.parametrize("where", ["file", "under_file"])
def test_memory_export_at_or_under_a_file(tmp_path, bad, where):
    from memento.memory.memento_memory import MementoMemory

    mem_dir = tmp_path / "mem"
    MementoMemory(mem_dir).close()  # an empty but valid memory
    out = bad["plain"] if where == "file" else bad["plain"] / "export"
    _fails_cleanly(tmp_path, ["memory", "export", str(out), "--memory", str(mem_dir)], names=str(out))


@pytest.mark.parametrize("command", ["stats", "show"])
@pytest.mark.parametrize("damage", ["garbled", "directory"])
def test_memory_stats_and_show_on_a_damaged_database(tmp_path, command, damage):
    mem_dir = tmp_path / "mem"
    mem_dir.mkdir()
    db = mem_dir / "memory.db"
    if damage == "garbled":
        db.write_bytes(b"this is not a database at all" * 100)
    else:
        db.mkdir()
    _fails_cleanly(tmp_path, ["memory", command, "--memory", str(mem_dir)], names=str(db))


def test_missing_memory_directory_is_not_created_by_stats(tmp_path):
    _fails_cleanly(tmp_path, ["memory", "stats", "--memory", str(tmp_path / "nope")], names=str(tmp_path / "nope"))


def test_a_failing_eval_leaves_no_out_directory(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text('{"question": "Who?"}\n')  # no answers: a data error after the flags were accepted
    out = tmp_path / "fresh" / "out"
    args = ["eval", "--task", "multihop", "--data", str(data), "--method", "closed_book", "--out", str(out), *LM]
    _fails_cleanly(tmp_path, args, names=str(data))
    assert not (tmp_path / "fresh").exists()
    os.sync()


def test_compare_out_under_a_file(tmp_path, bad):
    out = bad["plain"] / "cmp"
    args = ["compare", "--task", "multihop", "--methods", "closed_book", "--data", str(_good_data(tmp_path))]
    _fails_cleanly(tmp_path, [*args, "--n-train", "1", "--n-test", "1", "--out", str(out), *LM], names=str(out))
