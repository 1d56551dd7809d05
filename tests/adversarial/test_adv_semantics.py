"""Semantics under odd requests: rollback 0, overlapping splits, unknown methods, odd labels, terminal escapes,
passwords in settings, library DEBUG lines, damaged Q-gate and index files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.memory.memento_memory import MementoMemory

LM = ["--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1"]
ESCAPES = "\x1b[2J\x1b]0;owned\x07\x1b[31m"


def _lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def _memory_with_two_versions(path: Path, text: str = "Read the primary source first.") -> MementoMemory:
    memory = MementoMemory(path)
    for batch in (1, 2):
        with memory.transaction(batch=batch) as tx:
            memory.craft.add(f"{text} (batch {batch})", provenance=[f"t{batch}"], batch=batch, tx=tx)
            memory.commit_version(batch=batch, tx=tx)
    return memory


def test_rollback_to_version_0_returns_to_the_empty_memory_and_the_log_keeps_everything(tmp_path):
    _memory_with_two_versions(tmp_path / "mem").db.close()
    result = CliRunner().invoke(app, ["memory", "rollback", "0", "--memory", str(tmp_path / "mem")])
    assert result.exit_code == 0 and "version 2 -> the empty memory (2 items restored" in result.output
    memory = MementoMemory(tmp_path / "mem", read_only=True)
    assert memory.version == 0 and memory.craft.all() == []
    assert [v["status"] for v in memory.versions()] == ["rolled_back", "rolled_back"]
    assert len(memory.snapshot(2)["stores"]["craft"]) == 2  # still readable in the change log
    assert [c["op"] for c in memory.db.changes()][-2:] == ["rollback", "rollback"]


def _rows(path: Path, n: int = 4) -> Path:
    path.write_text("".join(json.dumps({"question": f"Q{i}?", "answers": [f"A{i}"]}) + "\n" for i in range(n)))
    return path


def test_compare_refuses_identical_train_and_test_before_any_work(tmp_path):
    data = _rows(tmp_path / "rows.jsonl")
    args = ["compare", "--task", "multihop", "--methods", "closed_book", "--out", str(tmp_path / "cmp")]
    result = CliRunner().invoke(app, [*args, "--train", str(data), "--test", str(data), *LM])
    assert result.exit_code == 1 and "same file" in result.output and len(_lines(result.output)) == 1
    assert not (tmp_path / "cmp").exists()


def test_compare_refuses_a_test_set_inside_the_training_set(tmp_path):
    from memento.core.errors import ConfigError
    from memento.optimize.compare import compare
    from memento.tasks.task import get_task

    task = get_task("multihop")
    rows = task.load(_rows(tmp_path / "rows.jsonl"))
    with pytest.raises(ConfigError, match="every test example is also a training example"):
        compare(task, "closed_book", out_dir=tmp_path / "cmp", trainset=rows, testset=rows[:2], roles=object())
    assert not (tmp_path / "cmp").exists()


@pytest.mark.parametrize(
    ("methods", "baseline", "named"),
    [("closed_book,no_such_method", "closed_book", "no_such_method"), ("closed_book", "nope_base", "nope_base")],
)
def test_compare_refuses_unknown_methods_and_baselines_before_any_work(tmp_path, methods, baseline, named):
    data = _rows(tmp_path / "rows.jsonl")
    args = ["compare", "--task", "multihop", "--methods", methods, "--baseline", baseline, "--out", str(tmp_path / "c")]
    result = CliRunner().invoke(app, [*args, "--data", str(data), "--n-train", "2", "--n-test", "2", *LM])
    assert result.exit_code == 1 and len(_lines(result.output)) == 1
    assert f"unknown method '{named}'" in result.output and "available:" in result.output
    assert not (tmp_path / "c").exists()


def test_an_all_invalid_justice_file_lists_the_reasons(tmp_path):
    from memento.core.errors import DataError
    from memento.tasks.task import get_task

    header = "ID,docket,term,first_party,second_party,facts,first_party_winner\n"
    path = tmp_path / "justice.csv"
    path.write_text(header + "1,d1,1999,A,B,<p>Facts.</p>,\n2,d2,,A,B,<p>Facts.</p>,True\n3,d3,1999,A,B,,False\n")
    with pytest.raises(DataError) as info:
        get_task("legal").load(path)
    message = str(info.value)
    assert "blank first_party_winner" in message and "no usable term" in message and "no facts" in message


def test_a_null_answer_is_not_the_gold_string_none(tmp_path):
    from memento.core.errors import DataError
    from memento.tasks.task import get_task

    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"question": "Who?", "answers": [None]}) + "\n")
    with pytest.raises(DataError, match="non-empty answers"):
        get_task("multihop").load(path)
    path.write_text(json.dumps({"question": "Who?", "answers": [None, "Ann"]}) + "\n")
    assert get_task("multihop").load(path)[0].answers == ["Ann"]
    path.write_text(json.dumps({"question": "Who?", "answers": [None]}) + "\n")
    assert get_task("qa").load(path)[0].answers == []


def test_config_show_masks_a_password_in_the_api_base():
    result = CliRunner().invoke(app, ["config", "show", "--api-base", "http://bob:Pa55word-x@10.1.1.1:8000/v1"])
    assert result.exit_code == 0, result.output
    assert "Pa55word-x" not in result.output and "bob" not in result.output and "10.1.1.1" in result.output


def test_memory_show_neutralises_terminal_escapes(tmp_path):
    _memory_with_two_versions(tmp_path / "mem", text=f"Use quotes{ESCAPES} always.").db.close()
    result = CliRunner().invoke(app, ["memory", "show", "--memory", str(tmp_path / "mem")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "Use quotes\\x1b[2J" in result.output


def test_run_neutralises_terminal_escapes_in_the_question(tmp_path, openai_server):
    result = CliRunner().invoke(
        app,
        ["run", "-q", f"Who wrote Dune?{ESCAPES}", "--method", "closed_book", "--out", str(tmp_path / "t.json"),
         "--lm", "openai/x", "--api-base", openai_server.api_base],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output and "Who wrote Dune?" in result.output


def test_default_verbosity_prints_no_debug_lines_of_libraries(tmp_path):
    code = (
        "import logging, sys\n"
        "from memento.cli import app\n"
        "@app.command('noisy')\n"
        "def noisy() -> None:\n"
        "    lib = logging.getLogger('bm25s')\n"
        "    lib.setLevel(logging.DEBUG)  # as bm25s does on import\n"
        "    lib.debug('DEBUG-LINE from a library')\n"
        "    lib.warning('a warning still shows')\n"
        "sys.argv = ['memento', 'noisy']\n"
        "app()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "DEBUG-LINE" not in proc.stderr and "a warning still shows" in proc.stderr


def test_garbage_qgate_file_is_one_line(tmp_path):
    from memento.memory.case_bank import CaseBank, CaseBankError
    from memento.memory.embedder import HashingEmbedder

    bank = CaseBank(tmp_path / "mem" / "cbr", HashingEmbedder(), seed=0)
    for j in range(3):
        case = bank.add(f"case {j} about rivers", f"plan {j}", reward=1.0)
        bank.record(f"query {j} about rivers", [case], [1.0])
    bank.close()
    gate = tmp_path / "mem" / "cbr" / "qgate.pt"
    assert gate.exists()
    gate.write_bytes(b"\x80\x02garbage that is not a torch file" * 10)
    with pytest.raises(CaseBankError, match="not a saved Q-gate"):
        CaseBank(tmp_path / "mem" / "cbr", HashingEmbedder(), seed=0).gate  # noqa: B018
    result = CliRunner().invoke(app, ["memory", "qgate-stats", "--memory", str(tmp_path / "mem")])
    assert result.exit_code == 1 and len(_lines(result.output)) == 1 and "qgate.pt" in result.output


@pytest.mark.parametrize("watermark", ["[1, 2]", '{"max_seq": 1, "count": null}', '"text"', "{not json"])
def test_a_jitmem_index_watermark_of_the_wrong_type_is_rebuilt(tmp_path, watermark):
    from memento.core.types import Trajectory
    from memento.memory.trajectory_bank import TrajectoryBank

    bank = TrajectoryBank(tmp_path / "bank")
    bank.add(Trajectory(task_text="Which river runs through York?", prediction={"answer": "Ouse"}), accepted=True)
    assert bank.retrieve("river York", k=1)
    index = next((tmp_path / "bank").rglob("watermark.json"))
    index.write_text(watermark)
    again = TrajectoryBank(tmp_path / "bank")
    assert again.retrieve("river York", k=1)[0][0].task_text == "Which river runs through York?"


def test_run_cbr_over_a_garbage_qgate_is_one_line_and_non_zero(tmp_path):
    """`run --method cbr` on a bank whose qgate.pt is garbage stops with one line naming the file (no empty answer)."""
    from memento.memory.case_bank import CaseBank
    from memento.memory.embedder import HashingEmbedder
    from memento.testing import OpenAICompatServer, ScriptedEngine

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "d1", "title": "Ouse", "text": "The Ouse runs through York."}) + "\n")
    bank = CaseBank(tmp_path / "mem" / "cbr", HashingEmbedder(), seed=0, min_pairs=0)
    for j in range(3):
        case = bank.add(f"case {j} about rivers", f"plan {j}", reward=1.0)
        bank.record(f"query {j} about rivers", [case], [1.0])
    bank.close()
    gate = tmp_path / "mem" / "cbr" / "qgate.pt"
    gate.write_bytes(b"\x80\x02garbage that is not a torch file" * 10)
    with OpenAICompatServer(ScriptedEngine()) as server:
        args = ["run", "--task", "multihop", "--method", "cbr", "--question", "Which river runs through York?",
                "--memory", str(tmp_path / "mem"), "--corpus", str(corpus), "--out", str(tmp_path / "out"),
                "--lm", "openai/scripted", "--api-base", server.api_base]  # fmt: skip
        result = CliRunner().invoke(app, args, env={"MEMENTO_LM_CACHE": "false"})
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = _lines(result.output)
    assert any("qgate.pt" in line for line in lines) and "Traceback" not in result.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
