"""A new user's first hour (issue 21 item 6): what the commands print, accept and say about themselves.

Each test is one item of the issue's list: a comparison's stdout holds only results; every command that runs a
program takes the research budgets (and a test-time exploration flag of its own); help texts keep their bracketed
words; the Python settings API takes the flat form; the run status line ends its line and counts the run's
sub-questions; piped output is not wrapped; a finished eval's rerun shows a full bar; ``config show --json`` and
the effective values of an LM role. The packaging tests themselves install with ``--no-index`` (tests/core).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.core.config import load_settings
from memento.core.errors import ConfigError
from memento.testing import OpenAICompatServer, ScriptedEngine

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = REPO / "examples" / "multihop" / "questions.jsonl"
CORPUS = REPO / "examples" / "multihop" / "corpus.jsonl"
TERMINAL = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "TERM": "xterm", "COLUMNS": "160"}


def _questions(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(QUESTIONS.read_text(encoding="utf-8").splitlines()[:n]) + "\n", encoding="utf-8")
    return path


def test_compare_with_gepa_prints_only_results_on_stdout(tmp_path: Path) -> None:
    data = _questions(tmp_path, 6)
    with OpenAICompatServer(ScriptedEngine(overrides={"answer": "novelist"})) as server:
        result = CliRunner().invoke(
            app,
            [
                "compare", "--task", "multihop", "--data", str(data), "--n-train", "4", "--n-test", "2",
                "--methods", "closed_book,gepa:closed_book", "--budget", "tiny", "--out", str(tmp_path / "cmp"),
                "--lm", "openai/x", "--api-base", server.api_base, "--threads", "1",
            ],
            env={"MEMENTO_LM_CACHE": "false", "COLUMNS": None},
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Average Metric" not in out and "%|" not in out and "INFO" not in out
    assert "INFO" not in result.stderr  # DSPy's and GEPA's INFO lines follow memento's verbosity (-v shows them)
    lines = [line for line in out.splitlines() if line.strip()]
    table = [line for line in lines if line[:1] in "┏┃┡│└"]
    assert len(table) >= 6 and any("gepa:closed_book" in line for line in table)
    rest = [line for line in lines if line not in table and "memento compare:" not in line]
    assert rest == [f"wrote {tmp_path / 'cmp' / 'results.json'}, {tmp_path / 'cmp' / 'results.md'} and plots",
                    f"report: memento report {tmp_path / 'cmp'}"]  # fmt: skip


@pytest.mark.parametrize("command", ["run", "eval", "train", "compare", "optimize-curator"])
def test_every_command_that_runs_a_program_takes_the_research_budgets(command: str) -> None:
    help_text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "300"}).output
    for flag in ("--initial-questions", "--total-questions", "--steps-per-question"):
        assert flag in help_text, (command, flag)
    options = set(re.findall(r"│\s+(--[a-z-]+)", help_text))
    assert ("--test-exploration" in options) is (command in ("run", "eval", "compare")), command
    assert ("--exploration" in options) is (command == "train"), command  # the trainer's own


def test_eval_applies_the_budget_flags_and_test_exploration(tmp_path: Path) -> None:
    data = _questions(tmp_path, 1)
    engine = ScriptedEngine()
    engine.when("sub_questions", sub_questions=["Who is John Lanchester?", "Who is Alan Dean Foster?"])
    with OpenAICompatServer(engine) as server:
        result = CliRunner().invoke(
            app,
            [
                "eval", "--task", "multihop", "--data", str(data), "--method", "aet", "--corpus", str(CORPUS),
                "--lm", "openai/x", "--api-base", server.api_base, "--out", str(tmp_path / "out"), "--threads", "1",
                "--initial-questions", "1", "--total-questions", "1", "--steps-per-question", "1",
                "--test-exploration", "2",
            ],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    settings = {row["key"]: row for row in results["provenance"]["settings"]}
    assert settings["budgets.total_questions"]["value"] == 1 and settings["budgets.total_questions"]["source"] == "flag"
    assert settings["budgets.exploration"]["value"] == 2 and settings["budgets.exploration"]["source"] == "flag"
    (line,) = (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()
    assert len([n for n in json.loads(line)["nodes"] if n["id"] != "root"]) == 1


@pytest.mark.parametrize("command", ["run", "eval", "train", "compare", "optimize-curator", "config show"])
def test_help_shows_every_option_text_whole(command: str) -> None:
    import typer.main

    words = command.split()
    click_command = typer.main.get_command(app)
    for word in words:
        click_command = click_command.commands[word]  # type: ignore[attr-defined]
    help_text = " ".join(CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "400"}).output.split())
    helps = [getattr(p, "help") for p in click_command.params if getattr(p, "help", None)]  # noqa: B009
    assert len(helps) >= 5
    for text in helps:
        assert " ".join(text.split()) in help_text, (command, text)
    if command == "train":
        assert "(trainer.batch_size, 10)" in help_text  # was "(default: batch_size)": rich ate "[trainer]"


def test_the_python_settings_api_takes_the_flat_form_and_names_the_forms_otherwise() -> None:
    url = "http://127.0.0.1:8000/v1"
    flat = load_settings(flags={"lm": "openai/x", "api_base": url, "judge_lm": "openai/j"})
    assert (flat.lm.model, flat.lm.api_base, flat.role("judge_lm").api_base) == ("openai/x", url, url)
    assert flat.source_of("lm.api_base") == "flag"
    nested = load_settings(flags={"lm": {"model": "openai/x", "api_base": url}, "budgets": {"total_questions": 3}})
    assert nested.lm == flat.lm and nested.budgets.total_questions == 3
    cli = load_settings(flags={"corpus": "c.jsonl", "total_questions": 3, "stores": "M1,M3", "web.offline": True})
    assert (str(cli.web.corpus), cli.budgets.total_questions, cli.memory.stores, cli.web.offline) == (
        "c.jsonl", 3, ["M1", "M3"], True,
    )  # fmt: skip
    with pytest.raises(ConfigError, match="unknown setting 'apibase': give a section as a dict"):
        load_settings(flags={"lm": "openai/x", "apibase": url})


def test_run_status_line_ends_its_line_and_counts_the_sub_questions(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    engine.when("sub_questions", sub_questions=["Who is John Lanchester?", "Who is Alan Dean Foster?"])
    with OpenAICompatServer(engine) as server:
        result = CliRunner().invoke(
            app,
            [
                "run", "--task", "multihop", "--question", "What profession do they share?", "--corpus", str(CORPUS),
                "--lm", "openai/x", "--api-base", server.api_base, "--out", str(tmp_path / "t.json"),
                "--initial-questions", "2", "--total-questions", "2", "--steps-per-question", "1",
                "--log-lm", str(tmp_path / "calls.jsonl"),
            ],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    status = [line for line in result.stderr.splitlines() if line.startswith("run aet")]
    assert len(status) == 1 and "memento:" not in status[0]  # the next message starts a line of its own
    assert " · 2 sub-questions · " in status[0]
    assert "2 sub-questions" in result.stdout
    assert any(line.startswith("memento: ") and "LM calls logged" in line for line in result.stderr.splitlines())


def test_piped_output_is_not_wrapped(tmp_path: Path) -> None:
    question = "What profession do they share? " + "with a very long tail " * 8
    with OpenAICompatServer(ScriptedEngine(overrides={"answer": ("novelist " * 30).strip()})) as server:
        result = CliRunner().invoke(
            app,
            [
                "run", "--method", "closed_book", "--task", "qa", "--question", question.strip(), "--lm", "openai/x",
                "--api-base", server.api_base, "--out", str(tmp_path / "t.json"),
            ],
            env={"COLUMNS": None},
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    answer = next(line for line in lines if line.startswith("answer:"))
    assert answer == "answer: " + ("novelist " * 30).strip()  # one line of 277 characters
    assert any(len(line) > 100 and "with a very long tail" in line for line in lines)
    assert all(line == line.rstrip() for line in lines)  # and not padded to a huge width either


def test_a_finished_evals_rerun_shows_a_full_bar(tmp_path: Path) -> None:
    data = _questions(tmp_path, 3)
    args = ["eval", "--task", "multihop", "--data", str(data), "--method", "closed_book", "--lm", "openai/x",
            "--threads", "1", "--out", str(tmp_path / "out")]  # fmt: skip
    with OpenAICompatServer(ScriptedEngine(overrides={"answer": "novelist"})) as server:
        first = CliRunner().invoke(app, [*args, "--api-base", server.api_base])
        assert first.exit_code == 0, first.output
        again = CliRunner().invoke(app, [*args, "--api-base", server.api_base], env=TERMINAL)
        requests = server.chat_requests
    assert again.exit_code == 0, again.output
    assert requests == 3  # the rerun resumed every example
    assert "resuming" in again.stderr and "3/3" in again.stderr and "0/3" not in again.stderr


def test_config_show_json_and_the_effective_values_of_a_role() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["config", "show", "--json", "--lm", "openai/x"], env={"MEMENTO_LM_MAX_TOKENS": "512"})
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["lm.model"] == {"value": "openai/x", "source": "flag"}
    assert data["lm.max_tokens"] == {"value": 512, "source": "env"}
    assert data["lm.temperature"]["value"] is None and data["lm.temperature"]["effective"].startswith("the model's")
    assert data["lm.num_retries"]["effective"] == 3 and data["judge_lm.cache"]["effective"] is True
    assert data["compare.gepa_max_metric_calls"] == {"value": 150, "source": "preset light"}
    assert data["compare.preset"] == {"value": "light", "source": "default"}
    table = runner.invoke(app, ["config", "show", "--lm", "openai/x"], env={"COLUMNS": "250"}).stdout
    row = next(line for line in table.splitlines() if "lm.num_retries" in line and "judge" not in line)
    assert re.search(r"│\s*3\s*│\s*default, built in\s*│", row), row
